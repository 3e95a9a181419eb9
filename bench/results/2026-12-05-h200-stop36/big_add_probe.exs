# Stop 36, ops run: Elixir's 16 M add took 250-270 µs where Rust's took 72-75 (and 1 M adds
# 27-32 vs 24-27). Times a 16 M f32 add + wait four ways — as ops_bench.exs does (the result
# dropped, the young-collection hint on), with a minor collection per call, with the result
# deallocated at once (the floor: its buffer back in the pool), and the enqueue alone; then
# x + x and exp(x) with the result dropped, for contrast (exp from Elixir matched Rust) — and
# counts new device buffers and pool reuses per 50 calls. Medians of 200, at 1 M and 16 M.
import Bitwise
f32 = {:f, 32}
med = fn f ->
  for _ <- 1..20, do: f.()
  ts = for _ <- 1..200 do
    t0 = System.monotonic_time(:nanosecond); f.(); System.monotonic_time(:nanosecond) - t0
  end
  Float.round(Enum.at(Enum.sort(ts), 100) / 1000, 1)
end
counts = fn f ->
  s0 = NxVulkan.stats()
  for _ <- 1..50, do: f.()
  s1 = NxVulkan.stats()
  {s1.device_allocations - s0.device_allocations, s1.reuses - s0.reuses}
end
for n <- [1 <<< 20, 1 <<< 24] do
  a = NxVulkan.iota(f32, {n})
  x = NxVulkan.unary(:sin, a, f32)
  # ops_bench.exs's add is x + iota; x + x and exp(x) beside it for contrast
  ways = [
    dropped: fn -> NxVulkan.binary(:add, x, a, f32); NxVulkan.synchronize() end,
    minor_gc: fn -> NxVulkan.binary(:add, x, a, f32); NxVulkan.synchronize(); :erlang.garbage_collect(self(), type: :minor) end,
    deallocated: fn -> y = NxVulkan.binary(:add, x, a, f32); NxVulkan.synchronize(); NxVulkan.deallocate(y) end,
    enqueue_only: fn -> NxVulkan.binary(:add, x, a, f32) end,
    x_plus_x: fn -> NxVulkan.binary(:add, x, x, f32); NxVulkan.synchronize() end,
    exp_dropped: fn -> NxVulkan.unary(:exp, x, f32); NxVulkan.synchronize() end
  ]
  for {way, f} <- ways do
    us = med.(f)
    NxVulkan.synchronize()
    {fresh, reuses} = counts.(f)
    NxVulkan.synchronize()
    IO.puts(~s({"probe":"add","size":#{n},"way":"#{way}","median_us":#{us},"new_buffers_in_50":#{fresh},"reuses_in_50":#{reuses}}))
  end
end
