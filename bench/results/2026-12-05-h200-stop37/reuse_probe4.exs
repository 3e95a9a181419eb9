# Stop 37, run 3: on the H100 a full collection per call left ~19 dead 16 M results alive
# (reuse_probe2.exs, run 2) where lavapipe frees them at once. When do a dead handle's device
# buffers come back on the GPU? Each variant in a fresh process: 40 adds (16 M, or 1 K), a full
# collection after each, then what the variant adds; per call the live-buffer count.
import Bitwise
f32 = {:f, 32}
big = 1 <<< 24
a = NxVulkan.iota(f32, {big})
x = NxVulkan.unary(:sin, a, f32)
s = NxVulkan.iota(f32, {1024})
NxVulkan.synchronize()
nowait = fn p, q -> case NxVulkan.Native.binary_nowait("add", p, q, "f32", false) do
  :busy -> NxVulkan.Native.binary("add", p, q, "f32", false)
  r -> r
end end
dirty = fn p, q -> NxVulkan.Native.binary("add", p, q, "f32", false) end
variants = [
  {"nowait 16M, gc", nowait, x, a, fn -> :ok end, true},
  {"nowait 16M, gc + yield", nowait, x, a, fn -> :erlang.yield() end, true},
  {"nowait 16M, gc + sleep 1 ms", nowait, x, a, fn -> Process.sleep(1) end, true},
  {"nowait 16M, gc, no synchronize", nowait, x, a, fn -> :ok end, false},
  {"dirty 16M, gc", dirty, x, a, fn -> :ok end, true},
  {"nowait 1K, gc", nowait, s, s, fn -> :ok end, true},
  {"nowait 16M, gc + synchronize twice", nowait, x, a, fn -> NxVulkan.synchronize() end, true}
]
for {name, call, p, q, extra, sync} <- variants do
  parent = self()
  spawn(fn ->
    s0 = NxVulkan.stats()
    lives = for _ <- 1..40 do
      _ = call.(p, q)
      :erlang.garbage_collect()
      if sync, do: NxVulkan.synchronize()
      extra.()
      NxVulkan.stats().live_buffers - s0.live_buffers
    end
    s1 = NxVulkan.stats()
    IO.puts(~s({"variant":"#{name}","new_buffers":#{s1.device_allocations - s0.device_allocations},"lives":#{inspect(lives, limit: :infinity)}}))
    send(parent, :done)
  end)
  receive do
    :done -> :ok
  after 60_000 -> IO.puts(~s({"variant":"#{name}","timed_out":true}))
  end
  :erlang.garbage_collect()
  NxVulkan.synchronize()
  Process.sleep(50)
end
