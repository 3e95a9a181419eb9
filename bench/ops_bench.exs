# The op-family table from Elixir, through the handle API (no Nx needed): the same work and
# names as `nx-vulkan bench --ops` (Rust) and bench/torch_ops.py (PyTorch eager), one JSON
# object per line. Every timed call ends with a wait for the device (ops are queued).
#
#   mix run bench/ops_bench.exs [sizes, comma-separated]
import Bitwise

sizes =
  case System.argv() do
    [s | _] -> s |> String.split(",") |> Enum.map(&String.to_integer/1)
    [] -> [1 <<< 10, 1 <<< 20, 1 <<< 24]
  end

reps_default = String.to_integer(System.get_env("REPS", "50"))
device = NxVulkan.device_info().name

median = fn times ->
  sorted = Enum.sort(times)
  Enum.at(sorted, div(length(sorted), 2))
end

# Median µs of `fun` followed by a wait for the device.
timed = fn reps, fun ->
  for _ <- 1..3, do: (fun.(); NxVulkan.synchronize())

  times =
    for _ <- 1..reps do
      t0 = System.monotonic_time(:nanosecond)
      fun.()
      NxVulkan.synchronize()
      System.monotonic_time(:nanosecond) - t0
    end

  median.(times) / 1000
end

emit = fn bench, size, us, reps ->
  IO.puts(~s({"bench":"#{bench}","size":#{size},"median_us":#{Float.round(us / 1, 2)},"reps":#{reps},"from":"elixir","device":#{inspect(device)}}))
end

f32 = {:f, 32}
tiny = NxVulkan.upload(<<0::size(128)>>, f32, {4})
for _ <- 1..100, do: NxVulkan.binary(:add, tiny, tiny, f32)
NxVulkan.synchronize()

enqueue =
  for i <- 1..2000 do
    t0 = System.monotonic_time(:nanosecond)
    _ = NxVulkan.binary(:add, tiny, tiny, f32)
    dt = System.monotonic_time(:nanosecond) - t0
    if rem(i, 100) == 0, do: NxVulkan.synchronize()
    dt
  end

emit.("tiny_add_enqueue", 4, median.(enqueue) / 1000, 2000)
emit.("tiny_add_sync", 4, timed.(2000, fn -> NxVulkan.binary(:add, tiny, tiny, f32) end), 2000)

emit.("tiny_add_readback", 4, timed.(2000, fn -> NxVulkan.download(NxVulkan.binary(:add, tiny, tiny, f32)) end), 2000)

for n <- sizes do
  reps = if n >= 1 <<< 24, do: min(reps_default, 20), else: reps_default
  a = NxVulkan.iota(f32, {n})
  x = NxVulkan.unary(:sin, a, f32)
  emit.("add", n, timed.(reps, fn -> NxVulkan.binary(:add, x, a, f32) end), reps)
  emit.("exp", n, timed.(reps, fn -> NxVulkan.unary(:exp, x, f32) end), reps)
  emit.("tanh", n, timed.(reps, fn -> NxVulkan.unary(:tanh, x, f32) end), reps)
  emit.("sigmoid", n, timed.(reps, fn -> NxVulkan.unary(:sigmoid, x, f32) end), reps)
  emit.("erf", n, timed.(reps, fn -> NxVulkan.unary(:erf, x, f32) end), reps)
  emit.("log", n, timed.(reps, fn -> NxVulkan.unary(:log, a, f32) end), reps)
  emit.("sum", n, timed.(reps, fn -> NxVulkan.reduce(:sum, x, [0], false, f32) end), reps)
  emit.("argmax", n, timed.(reps, fn -> NxVulkan.arg_reduce(:argmax, x, 0, false, :low, {:s, 64}) end), reps)
  emit.("cumsum", n, timed.(reps, fn -> NxVulkan.cumulative(:cumulative_sum, x, 0, false) end), reps)

  if n >= 1024 do
    m = NxVulkan.reshape(x, {div(n, 1024), 1024})
    rows = div(n, 1024)

    softmax = fn ->
      mx = NxVulkan.reduce(:reduce_max, m, [1], true, f32)
      e = NxVulkan.unary(:exp, NxVulkan.binary(:subtract, m, NxVulkan.broadcast(mx, {rows, 1024}, [0, 1]), f32), f32)
      s = NxVulkan.reduce(:sum, e, [1], true, f32)
      NxVulkan.binary(:divide, e, NxVulkan.broadcast(s, {rows, 1024}, [0, 1]), f32)
    end

    emit.("softmax_eager", n, timed.(reps, softmax), reps)
  end

  bytes = :binary.copy(<<1>>, n * 4)
  emit.("upload", n, timed.(reps, fn -> NxVulkan.upload(bytes, f32, {n}) end), reps)
  emit.("download", n, timed.(reps, fn -> NxVulkan.download(x) end), reps)
end

for d <- [1024, 4096] do
  a = NxVulkan.unary(:sin, NxVulkan.iota(f32, {d, d}), f32)
  emit.("dot_exact", d, timed.(10, fn -> NxVulkan.dot(a, [1], [], a, [0], [], f32) end), 10)
end

# conv2d: batch 8, 64 -> 64 channels, 56x56, 3x3, padding 1 (a ResNet stage), as the Rust table
input = NxVulkan.unary(:sin, NxVulkan.iota(f32, {8, 64, 56, 56}), f32)
kernel = NxVulkan.unary(:cos, NxVulkan.iota(f32, {64, 64, 3, 3}), f32)

conv_opts = [
  strides: [1, 1],
  padding: [{1, 1}, {1, 1}],
  input_dilation: [1, 1],
  kernel_dilation: [1, 1],
  feature_group_size: 1,
  batch_group_size: 1,
  input_permutation: [0, 1, 2, 3],
  kernel_permutation: [0, 1, 2, 3],
  output_permutation: [0, 1, 2, 3]
]

emit.("conv2d", 8 * 64 * 56 * 56, timed.(10, fn -> NxVulkan.conv(input, kernel, conv_opts, f32) end), 10)
