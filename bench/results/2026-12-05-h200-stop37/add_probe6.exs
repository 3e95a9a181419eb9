# Stop 37, run 5: ops_bench.exs's 16 M add from Elixir took 241.6 µs against Rust's 97.6 (run 4)
# while reuse_probe5.exs's loops of the same add reused their buffers (0-2 new in 60). The
# table's own sequence, instrumented: per size the same tensors and `timed` (3 warm-up calls +
# reps, each followed by a wait), with every call's time, and the pool's new buffers and reuses
# over the timed calls; then the add again after exp, and with the result deallocated.
import Bitwise
f32 = {:f, 32}
timed = fn reps, fun ->
  for _ <- 1..3, do: (fun.(); NxVulkan.synchronize())
  s0 = NxVulkan.stats()
  times =
    for _ <- 1..reps do
      t0 = System.monotonic_time(:nanosecond)
      fun.()
      NxVulkan.synchronize()
      div(System.monotonic_time(:nanosecond) - t0, 1000)
    end
  s1 = NxVulkan.stats()
  {Enum.at(Enum.sort(times), div(reps, 2)), times, s1.device_allocations - s0.device_allocations, s1.reuses - s0.reuses, s1.cached_buffers, s1.live_buffers}
end
show = fn name, n, {med, times, fresh, reuses, cached, live} ->
  IO.puts(~s({"op":"#{name}","size":#{n},"median_us":#{med},"new_buffers":#{fresh},"reuses":#{reuses},"cached_after":#{cached},"live_after":#{live},"times_us":#{inspect(times, limit: :infinity)}}))
end
for n <- [1 <<< 10, 1 <<< 20, 1 <<< 24] do
  reps = if n >= 1 <<< 24, do: 20, else: 50
  a = NxVulkan.iota(f32, {n})
  x = NxVulkan.unary(:sin, a, f32)
  show.("add", n, timed.(reps, fn -> NxVulkan.binary(:add, x, a, f32) end))
  show.("exp", n, timed.(reps, fn -> NxVulkan.unary(:exp, x, f32) end))
  show.("add again", n, timed.(reps, fn -> NxVulkan.binary(:add, x, a, f32) end))
  show.("add, deallocated", n, timed.(reps, fn -> NxVulkan.deallocate(NxVulkan.binary(:add, x, a, f32)) end))
  show.("x + x", n, timed.(reps, fn -> NxVulkan.binary(:add, x, x, f32) end))
end
