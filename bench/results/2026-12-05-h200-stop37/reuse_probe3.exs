# Stop 37: reuse_probe2.exs showed dead 16 M results held alive in numbers (live buffers 41
# after 50 adds with 13 full and 36 young collections; ~19 in steady state for add and exp
# alike), so adds, whose young-collection hint fires when the 2 GiB cache runs dry, allocate
# anew. Which collection policy frees them: each variant in a fresh process, 60 adds + wait,
# per call the live-buffer count, and the process's heap sizes.
import Bitwise
f32 = {:f, 32}
n = 1 <<< 24
a = NxVulkan.iota(f32, {n})
x = NxVulkan.unary(:sin, a, f32)
NxVulkan.synchronize()
variants = [
  as_now: fn -> :ok end,
  fullsweep_after_0: fn -> Process.flag(:fullsweep_after, 0) end,
  hints_full_gc: :full,
  hints_ignored: :none,
  min_heap_small: fn -> Process.flag(:min_heap_size, 233) end
]
for {name, setup} <- variants do
  parent = self()
  spawn(fn ->
    if is_function(setup), do: setup.()
    s0 = NxVulkan.stats()
    lives = for _ <- 1..60 do
      r = NxVulkan.Native.binary_nowait("add", x, a, "f32", false)
      r = if r == :busy, do: NxVulkan.Native.binary("add", x, a, "f32", false), else: r
      case {r, setup} do
        {{:ok, _, _}, :none} -> :ok
        {{:ok, _, _}, :full} -> :erlang.garbage_collect()
        {{:ok, _, :gc_young}, _} -> :erlang.garbage_collect(self(), type: :minor)
        {{:ok, _, :gc}, _} -> :erlang.garbage_collect()
        _ -> :ok
      end
      NxVulkan.synchronize()
      s = NxVulkan.stats()
      s.live_buffers
    end
    s1 = NxVulkan.stats()
    {:heap_size, hs} = Process.info(self(), :heap_size)
    {:garbage_collection, gc} = Process.info(self(), :garbage_collection)
    IO.puts(~s({"variant":"#{name}","new_buffers":#{s1.device_allocations - s0.device_allocations},"reuses":#{s1.reuses - s0.reuses},"max_live":#{Enum.max(lives)},"heap_words":#{hs},"minor_gcs":#{gc[:minor_gcs]},"lives":#{inspect(lives, limit: :infinity)}}))
    send(parent, :done)
  end)
  receive do: (:done -> :ok)
  :erlang.garbage_collect()
  NxVulkan.synchronize()
end
