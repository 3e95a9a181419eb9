# Stop 37, run 6: add_probe6.exs (run 5) found the table's FIRST 16 M add from Elixir allocating
# 18 of 20 results anew (after the 1 K and 1 M rounds; the same add after exp reused). This
# build evicts the least recent cached buffers when the cache is full. The same sequence, and
# for every timed call the pool's live and cached buffers, cached MiB, allocations and
# evictions so far, after the call and after its wait.
import Bitwise
f32 = {:f, 32}
timed = fn reps, fun ->
  for _ <- 1..3, do: (fun.(); NxVulkan.synchronize())
  s0 = NxVulkan.stats()
  rows =
    for _ <- 1..reps do
      t0 = System.monotonic_time(:nanosecond)
      fun.()
      p = NxVulkan.stats()
      NxVulkan.synchronize()
      dt = div(System.monotonic_time(:nanosecond) - t0, 1000)
      q = NxVulkan.stats()
      [dt, p.live_buffers, p.cached_buffers, div(p.cached_bytes, 1 <<< 20), p.device_allocations - s0.device_allocations, p.evictions - s0.evictions, q.live_buffers, q.cached_buffers]
    end
  times = Enum.map(rows, &hd/1)
  s1 = NxVulkan.stats()
  {Enum.at(Enum.sort(times), div(reps, 2)), rows, s1.device_allocations - s0.device_allocations, s1.reuses - s0.reuses, s1.cached_buffers, s1.live_buffers}
end
show = fn name, n, {med, rows, fresh, reuses, cached, live} ->
  rows = if n >= 1 <<< 24, do: rows, else: Enum.map(rows, &hd/1)
  IO.puts(~s({"op":"#{name}","size":#{n},"median_us":#{med},"new_buffers":#{fresh},"reuses":#{reuses},"cached_after":#{cached},"live_after":#{live},"rows":#{inspect(rows, limit: :infinity)}}))
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
