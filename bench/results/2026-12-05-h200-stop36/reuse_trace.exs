# Stop 36, run 4: big_add_probe.exs found that a dropped 16 M add result is often not back in
# the pool by the next call on the H200 (28 new 64 MiB buffers per 50 calls) while exp's is.
# Traces the pool around each call — live and cached buffers and new allocations after the op,
# after the wait and after a minor collection — for 8 calls of each op, and whether the NIF
# answered from the normal scheduler (the no-wait form) or went dirty (:busy), and its GC hint.
import Bitwise
f32 = {:f, 32}
n = 1 <<< 24
a = NxVulkan.iota(f32, {n})
x = NxVulkan.unary(:sin, a, f32)
NxVulkan.synchronize()
snap = fn -> s = NxVulkan.stats(); {s.live_buffers, s.cached_buffers, s.device_allocations} end
ops = [
  add: {fn -> NxVulkan.Native.binary_nowait("add", x, a, "f32", false) end, fn -> NxVulkan.binary(:add, x, a, f32) end},
  exp: {fn -> NxVulkan.Native.unary_nowait("exp", x, "f32", false) end, fn -> NxVulkan.unary(:exp, x, f32) end}
]
for {name, {raw, op}} <- ops do
  for _ <- 1..5, do: (op.(); NxVulkan.synchronize())
  :erlang.garbage_collect()
  # the call and its answer in a function of their own, so the result is dead on return
  call = fn ->
    case raw.() do
      :busy -> op.(); "busy"
      {:ok, _, :gc_young} -> :erlang.garbage_collect(self(), type: :minor); "nowait+gc_young"
      {:ok, _, :gc} -> :erlang.garbage_collect(); "nowait+gc"
      {:ok, _} -> "nowait"
      other -> inspect(other)
    end
  end
  for i <- 1..8 do
    s0 = snap.()
    how = call.()
    s1 = snap.()
    NxVulkan.synchronize()
    s2 = snap.()
    :erlang.garbage_collect(self(), type: :minor)
    s3 = snap.()
    IO.puts(~s({"op":"#{name}","call":#{i},"answer":"#{how}","before":#{inspect(Tuple.to_list(s0))},"after_op":#{inspect(Tuple.to_list(s1))},"after_wait":#{inspect(Tuple.to_list(s2))},"after_minor_gc":#{inspect(Tuple.to_list(s3))}}))
  end
end
