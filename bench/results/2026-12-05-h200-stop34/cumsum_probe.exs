# Stop 34: run 1 had the Elixir cumsum at 600 µs (1 K) where Rust took 108 and stop 26's Elixir
# 124. Times cumsum and add (control) + a wait, the wait through NxVulkan.synchronize/0 (spin on
# the normal scheduler, then the dirty NIF) and through the dirty NIF alone, and with a minor
# collection per call (dead results reused); medians of 400 µs. Then the new device buffers
# and pool reuses of 50 calls.
import Bitwise
f32 = {:f, 32}
med = fn f ->
  for _ <- 1..20, do: f.()
  ts = for _ <- 1..400 do
    t0 = System.monotonic_time(:nanosecond); f.(); System.monotonic_time(:nanosecond) - t0
  end
  Float.round(Enum.at(Enum.sort(ts), 200) / 1000, 1)
end
for n <- (if System.get_env("PROBE_SMALL"), do: [1024], else: [1024, 1 <<< 20]) do
  x = NxVulkan.unary(:sin, NxVulkan.iota(f32, {n}), f32)
  ops = [add: fn -> NxVulkan.binary(:add, x, x, f32) end, cumsum: fn -> NxVulkan.cumulative(:cumulative_sum, x, 0, false) end]
  for {name, op} <- ops do
    a = med.(fn -> op.(); NxVulkan.synchronize() end)
    b = med.(fn -> op.(); NxVulkan.Native.synchronize() end)
    c = med.(fn -> op.() end)
    # dead results go back to the pool only when collected: on lavapipe every cumsum of a
    # loop made a new device buffer (50 in 50); the same with a minor collection per call
    d = med.(fn -> op.(); NxVulkan.synchronize(); :erlang.garbage_collect(self(), type: :minor) end)
    s0 = NxVulkan.stats()
    for _ <- 1..50, do: (op.(); NxVulkan.synchronize())
    s1 = NxVulkan.stats()
    IO.puts(~s({"probe":"#{name}","size":#{n},"sync_us":#{a},"dirty_sync_us":#{b},"enqueue_us":#{c},"sync_minor_gc_us":#{d},"dispatches":#{div(s1.dispatches - s0.dispatches, 50)},"submits":#{div(s1.submits - s0.submits, 50)},"new_buffers_in_50":#{s1.device_allocations - s0.device_allocations},"reuses_in_50":#{s1.reuses - s0.reuses}}))
  end
end
