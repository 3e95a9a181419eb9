# NxVulkan.Compiler vs the eager backend, from Elixir (JSON lines on stdout). Cases match
# bench/torch_compiler.py: a 10-op elementwise chain on 16 M f32, softmax and layernorm over
# 4096x1024, and an MLP training step (784-512-10, batch 128, softmax cross-entropy, SGD).
#   latency_us:    one call, then synchronize (what a caller that reads the result waits)
#                  — median of REPS, best of three rounds interleaved with the other impls
#   throughput_us: 20 calls back to back, then synchronize, divided by 20
#   host_us:       (compiled only) one call's host time, nothing waited for (small inputs)
# Needs Nx (ERL_LIBS) and the app. Run by bench/h200_compiler.sh; REPS sets the repetitions,
# ROWS (default 4096) the rows of the chain/softmax/layernorm inputs (small for a quick check
# on lavapipe; the case names then carry the shape), CASES a subset of the cases.
Application.ensure_all_started(:nx)
Nx.default_backend(NxVulkan.Backend)
reps = String.to_integer(System.get_env("REPS", "20"))
rows = String.to_integer(System.get_env("ROWS", "4096"))

Code.require_file("compiler_bench_fns.exs", __DIR__)

defmodule B do
  def median(xs), do: xs |> Enum.sort() |> Enum.at(div(length(xs), 2))

  def time(fun, reps) do
    for _ <- 1..3, do: (fun.(); NxVulkan.synchronize())

    latency =
      median(
        for _ <- 1..reps do
          {t, _} = :timer.tc(fn -> fun.(); NxVulkan.synchronize() end)
          t
        end
      )

    through =
      median(
        for _ <- 1..max(div(reps, 4), 3) do
          {t, _} = :timer.tc(fn -> for(_ <- 1..20, do: fun.()); NxVulkan.synchronize() end)
          t / 20
        end
      )

    {latency, through}
  end

  def json(map) do
    "{" <>
      Enum.map_join(map, ", ", fn {k, v} ->
        v = if is_binary(v) or is_atom(v), do: ~s("#{v}"), else: to_string(v)
        ~s("#{k}": #{v})
      end) <> "}"
  end
end

key = Nx.Random.key(0)
{x, key} = Nx.Random.uniform(key, -1.0, 1.0, shape: {rows, 4096}, type: :f32)
{y, key} = Nx.Random.uniform(key, -1.0, 1.0, shape: {rows, 4096}, type: :f32)
{s, key} = Nx.Random.uniform(key, -4.0, 4.0, shape: {rows, 1024}, type: :f32)
{g, key} = Nx.Random.uniform(key, 0.5, 1.5, shape: {1024}, type: :f32)
{b, key} = Nx.Random.uniform(key, -0.5, 0.5, shape: {1024}, type: :f32)
{w1, key} = Nx.Random.normal(key, 0.0, 0.05, shape: {784, 512}, type: :f32)
{w2, key} = Nx.Random.normal(key, 0.0, 0.05, shape: {512, 10}, type: :f32)
{xb, _} = Nx.Random.uniform(key, 0.0, 1.0, shape: {128, 784}, type: :f32)
b1 = Nx.broadcast(0.0, {512}) |> Nx.as_type(:f32)
b2 = Nx.broadcast(0.0, {10}) |> Nx.as_type(:f32)
labels = Nx.iota({128, 10}) |> Nx.remainder(10) |> Nx.equal(Nx.iota({128, 1}) |> Nx.remainder(10)) |> Nx.as_type(:f32)

cases = [
  {if(rows == 4096, do: "chain10_16M", else: "chain10_#{rows}x4096"), &BenchFns.chain10/2, [x, y]},
  {if(rows == 4096, do: "chain10_arith_16M", else: "chain10_arith_#{rows}x4096"), &BenchFns.chain10_arith/2, [x, y]},
  {"softmax_#{rows}x1024", &BenchFns.softmax/1, [s]},
  {"layernorm_#{rows}x1024", &BenchFns.layernorm/3, [s, g, b]},
  {"mlp_step_784_512_10_b128", &BenchFns.step/6, [w1, b1, w2, b2, xb, labels]}
]

# CASES (comma-separated name prefixes, e.g. "softmax,layernorm") keeps only those cases.
cases =
  case System.get_env("CASES") do
    nil -> cases
    only -> Enum.filter(cases, fn {name, _, _} -> Enum.any?(String.split(only, ","), &String.starts_with?(name, &1)) end)
  end

# Each implementation is measured in three rounds, interleaved with the others (order effects
# — pool state, clocks — fall on all of them alike); the best round's medians are reported.
for {name, fun, args} <- cases do
  impls =
    [{"eager", Nx.Defn.jit(fun, compiler: Nx.Defn.Evaluator), %{}}] ++
      for precision <- [:exact, :fast] do
        jit = Nx.Defn.jit(fun, compiler: NxVulkan.Compiler, precision: precision)
        {:plan, info} = NxVulkan.Compiler.describe(fun, args, precision: precision)
        apply(jit, args)
        NxVulkan.synchronize()
        d0 = NxVulkan.stats().dispatches
        apply(jit, args)
        NxVulkan.synchronize()
        {"compiled_#{precision}", jit, %{dispatches: NxVulkan.stats().dispatches - d0, fused_kernels: info.fused_kernels}}
      end

  rounds = for _ <- 1..3, {impl, jit, _} <- impls, do: {impl, B.time(fn -> apply(jit, args) end, reps)}

  for {impl, _, extra} <- impls do
    times = for {^impl, t} <- rounds, do: t
    {lat, _} = Enum.min_by(times, &elem(&1, 0))
    {_, thr} = Enum.min_by(times, &elem(&1, 1))
    IO.puts(B.json(Map.merge(%{case: name, impl: impl, latency_us: lat, throughput_us: Float.round(thr, 1)}, extra)))
  end
end

# Host time of one compiled call (small inputs: the device is never the bottleneck).
small = Nx.iota({1024}, type: :f32)
jit = Nx.Defn.jit(&BenchFns.chain10/2, compiler: NxVulkan.Compiler)
jit.(small, small)
NxVulkan.synchronize()

host =
  B.median(
    for _ <- 1..reps do
      {t, _} = :timer.tc(fn -> for(_ <- 1..50, do: jit.(small, small)) end)
      NxVulkan.synchronize()
      t / 50
    end
  )

IO.puts(B.json(%{case: "chain10_1k_host", impl: "compiled_exact", host_us: Float.round(host, 2)}))
