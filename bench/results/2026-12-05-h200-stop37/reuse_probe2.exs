# Stop 37: reuse_trace.exs (8 calls, stats read around each) showed a dropped 16 M add's buffer
# back in the pool by the next call on an H100, where stop 36's big_add_probe.exs (H200) saw 28
# new 64 MiB buffers per 50 calls. Here the probe's own loop — 50 adds, each followed by a wait,
# nothing else — with the NIF's answer tallied (no-wait, :busy then dirty, GC hints), the pool's
# new buffers and reuses, for x + iota, x + x and exp(x); then big_add_probe.exs's timing loop
# (220 calls) and the same tally after it.
import Bitwise
f32 = {:f, 32}
n = 1 <<< 24
a = NxVulkan.iota(f32, {n})
x = NxVulkan.unary(:sin, a, f32)
NxVulkan.synchronize()
answer = fn
  :busy -> "busy"
  {:ok, _, h} -> "nowait+#{h}"
  {:ok, _} -> "nowait"
  other -> inspect(other)
end
ops = [
  x_plus_iota: {fn -> NxVulkan.Native.binary_nowait("add", x, a, "f32", false) end, fn -> NxVulkan.binary(:add, x, a, f32) end},
  x_plus_x: {fn -> NxVulkan.Native.binary_nowait("add", x, x, "f32", false) end, fn -> NxVulkan.binary(:add, x, x, f32) end},
  exp: {fn -> NxVulkan.Native.unary_nowait("exp", x, "f32", false) end, fn -> NxVulkan.unary(:exp, x, f32) end}
]
tally = fn name, raw, op, label ->
  s0 = NxVulkan.stats()
  answers = for _ <- 1..50 do
    r = raw.()
    a = answer.(r)
    case r do
      :busy -> op.()
      {:ok, _, :gc_young} -> :erlang.garbage_collect(self(), type: :minor)
      {:ok, _, :gc} -> :erlang.garbage_collect()
      _ -> :ok
    end
    NxVulkan.synchronize()
    a
  end
  s1 = NxVulkan.stats()
  freq = answers |> Enum.frequencies() |> Enum.map(fn {k, v} -> ~s("#{k}":#{v}) end) |> Enum.join(",")
  IO.puts(~s({"op":"#{name}","when":"#{label}","new_buffers":#{s1.device_allocations - s0.device_allocations},"reuses":#{s1.reuses - s0.reuses},"live_after":#{s1.live_buffers},"cached_after":#{s1.cached_buffers},"answers":{#{freq}}}))
end
for {name, {raw, op}} <- ops, do: tally.(name, raw, op, "fresh")
# big_add_probe's dropped way: NxVulkan.binary + wait, 220 calls timed
for {name, {raw, op}} <- ops do
  ts = for _ <- 1..220 do
    t0 = System.monotonic_time(:nanosecond); op.(); NxVulkan.synchronize(); System.monotonic_time(:nanosecond) - t0
  end
  med = Float.round(Enum.at(Enum.sort(Enum.drop(ts, 20)), 100) / 1000, 1)
  s = NxVulkan.stats()
  IO.puts(~s({"op":"#{name}","when":"after 220 dropped","median_us":#{med},"live":#{s.live_buffers},"cached":#{s.cached_buffers},"allocations":#{s.device_allocations}}))
  tally.(name, raw, op, "after timing")
end
