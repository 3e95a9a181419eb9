# Stop 37, run 4: reuse_probe4.exs (spawned processes, raw NIF calls, a full collection after
# each) freed every dead 16 M result at once on the H100, yet big_add_probe.exs's loop (the
# NxVulkan.binary/4 wrapper in a closure, in the script's own process) made 28 new 64 MiB
# buffers per 50 calls. That loop traced per call — live buffers, cached buffers, allocations
# so far, the pool's answer (through a copy of the wrapper that records it) — in the script's
# process and in a spawned one.
import Bitwise
f32 = {:f, 32}
n = 1 <<< 24
a = NxVulkan.iota(f32, {n})
x = NxVulkan.unary(:sin, a, f32)
NxVulkan.synchronize()
snap = fn s0 -> s = NxVulkan.stats(); [s.live_buffers, s.cached_buffers, s.device_allocations - s0.device_allocations] end
wrapper_with_hint = fn ->
  r = case NxVulkan.Native.binary_nowait("add", x, a, "f32", false) do
    :busy -> NxVulkan.Native.binary("add", x, a, "f32", false)
    r -> r
  end
  case r do
    {:ok, _v} -> "none"
    {:ok, _v, :gc} -> :erlang.garbage_collect(); "gc"
  end
end
dropped = fn -> NxVulkan.binary(:add, x, a, f32); NxVulkan.synchronize() end
trace = fn name, f ->
  s0 = NxVulkan.stats()
  rows = for _ <- 1..60 do
    h = f.()
    NxVulkan.synchronize()
    [h | snap.(s0)]
  end
  {:garbage_collection, gc} = Process.info(self(), :garbage_collection)
  {:heap_size, hs} = Process.info(self(), :heap_size)
  IO.puts(~s({"trace":"#{name}","heap_words":#{hs},"minor_gcs":#{gc[:minor_gcs]},"fullsweep_after":#{gc[:fullsweep_after]},"rows":#{inspect(rows, limit: :infinity)}}))
end
in_spawn = fn name, f ->
  parent = self()
  spawn(fn -> trace.(name, f); send(parent, :done) end)
  receive do
    :done -> :ok
  after 60_000 -> IO.puts(~s({"trace":"#{name}","timed_out":true}))
  end
end
trace.("script process: NxVulkan.binary + wait (big_add_probe's dropped)", fn -> dropped.(); "?" end)
trace.("script process: the wrapper's steps, hint recorded", wrapper_with_hint)
in_spawn.("spawned: NxVulkan.binary + wait", fn -> dropped.(); "?" end)
in_spawn.("spawned: the wrapper's steps, hint recorded", wrapper_with_hint)
trace.("script process again: NxVulkan.binary + wait", fn -> dropped.(); "?" end)
