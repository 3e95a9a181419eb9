# Stop 34: run 1 had the Elixir cumsum at 600 µs (1 K) where Rust took 108 and stop 26's Elixir
# 124. Times cumsum and add (control) + a wait, the wait through NxVulkan.synchronize/0 (spin on
# the normal scheduler, then the dirty NIF) and through the dirty NIF alone; medians of 400 µs.
import Bitwise
f32 = {:f, 32}
med = fn f ->
  for _ <- 1..20, do: f.()
  ts = for _ <- 1..400 do
    t0 = System.monotonic_time(:nanosecond); f.(); System.monotonic_time(:nanosecond) - t0
  end
  Float.round(Enum.at(Enum.sort(ts), 200) / 1000, 1)
end
for n <- [1024, 1 <<< 20] do
  x = NxVulkan.unary(:sin, NxVulkan.iota(f32, {n}), f32)
  ops = [add: fn -> NxVulkan.binary(:add, x, x, f32) end, cumsum: fn -> NxVulkan.cumulative(:cumulative_sum, x, 0, false) end]
  for {name, op} <- ops do
    a = med.(fn -> op.(); NxVulkan.synchronize() end)
    b = med.(fn -> op.(); NxVulkan.Native.synchronize() end)
    c = med.(fn -> op.() end)
    s0 = NxVulkan.stats(); op.(); NxVulkan.synchronize(); s1 = NxVulkan.stats()
    IO.puts(~s({"probe":"#{name}","size":#{n},"sync_us":#{a},"dirty_sync_us":#{b},"enqueue_us":#{c},"dispatches":#{s1.dispatches - s0.dispatches},"submits":#{s1.submits - s0.submits}}))
  end
end
