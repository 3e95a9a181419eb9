# Stop 37, run 7: the probes that read NxVulkan.stats/0 (a DirtyIo NIF) inside their loops
# reused every dead 16 M result on the H100, the loops that did not (ops_bench.exs,
# big_add_probe.exs) allocated most results anew: does a collected handle's device memory come
# back only once the process leaves its scheduler? 40 adds + wait per variant, the pool read
# only before and after; with the result dropped as the op table does, and after each call
# nothing / :erlang.yield() / a dirty no-op NIF call (stats) / a full collection + yield.
import Bitwise
f32 = {:f, 32}
n = 1 <<< 24
a = NxVulkan.iota(f32, {n})
x = NxVulkan.unary(:sin, a, f32)
NxVulkan.synchronize()
variants = [
  {"nothing", fn -> :ok end},
  {"yield", fn -> :erlang.yield() end},
  {"dirty stats call", fn -> NxVulkan.stats() end},
  {"full gc + yield", fn -> :erlang.garbage_collect(); :erlang.yield() end},
  {"nothing again", fn -> :ok end}
]
for {name, after_call} <- variants do
  for _ <- 1..3, do: (NxVulkan.binary(:add, x, a, f32); NxVulkan.synchronize())
  s0 = NxVulkan.stats()
  times = for _ <- 1..40 do
    t0 = System.monotonic_time(:nanosecond)
    NxVulkan.binary(:add, x, a, f32)
    NxVulkan.synchronize()
    dt = div(System.monotonic_time(:nanosecond) - t0, 1000)
    after_call.()
    dt
  end
  s1 = NxVulkan.stats()
  IO.puts(~s({"variant":"#{name}","median_us":#{Enum.at(Enum.sort(times), 20)},"new_buffers":#{s1.device_allocations - s0.device_allocations},"reuses":#{s1.reuses - s0.reuses},"live_after":#{s1.live_buffers},"times_us":#{inspect(times, limit: :infinity)}}))
end
