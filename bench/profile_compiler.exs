# Device time per kernel (timestamps) of compiled softmax, layernorm and the MLP step (:exact
# and :fast) vs the eager path: where the time of bench/compiler_bench.exs goes. JSON-ish lines on stdout.
# Caution (stop 23): since split-K and overlapping plan steps, the MLP step's per-kernel spans
# sum to about 4x its measured time per call, with NX_VULKAN_PLAN_OVERLAP=0 too (unexplained;
# softmax and layernorm still add up): read them as an order, not as times.
Code.require_file("compiler_bench_fns.exs", __DIR__)
Application.ensure_all_started(:nx)
Nx.default_backend(NxVulkan.Backend)
key = Nx.Random.key(0)
{s, key} = Nx.Random.uniform(key, -4.0, 4.0, shape: {4096, 1024}, type: :f32)
{g, key} = Nx.Random.uniform(key, 0.5, 1.5, shape: {1024}, type: :f32)
{w1, key} = Nx.Random.normal(key, 0.0, 0.05, shape: {784, 512}, type: :f32)
{w2, key} = Nx.Random.normal(key, 0.0, 0.05, shape: {512, 10}, type: :f32)
{xb, _} = Nx.Random.uniform(key, 0.0, 1.0, shape: {128, 784}, type: :f32)
{b1, b2} = {Nx.broadcast(0.0, {512}) |> Nx.as_type(:f32), Nx.broadcast(0.0, {10}) |> Nx.as_type(:f32)}
labels = Nx.iota({128, 10}) |> Nx.remainder(10) |> Nx.equal(Nx.iota({128, 1}) |> Nx.remainder(10)) |> Nx.as_type(:f32)

cases = [
  {"softmax", &BenchFns.softmax/1, [s]},
  {"layernorm", &BenchFns.layernorm/3, [s, g, g]},
  {"mlp_step", &BenchFns.step/6, [w1, b1, w2, b2, xb, labels]}
]

impls = [{"eager", Nx.Defn.Evaluator, []}, {"exact", NxVulkan.Compiler, [precision: :exact]}, {"fast", NxVulkan.Compiler, [precision: :fast]}]

for {name, fun, args} <- cases, {impl, compiler, opts} <- impls do
  jit = Nx.Defn.jit(fun, [compiler: compiler] ++ opts)
  for _ <- 1..3, do: apply(jit, args)
  NxVulkan.synchronize()
  {_, report} = NxVulkan.profile(fn -> for(_ <- 1..10, do: apply(jit, args)); NxVulkan.synchronize() end)
  IO.puts("#{name} #{impl} total: kernels #{Float.round(report.device_us / 10, 1)} us, host #{Float.round(report.host_us / 10, 1)} us per call")

  for k <- report.kernels do
    IO.puts("#{name} #{impl} #{Float.round(k.device_us / 10, 1)} us x#{div(k.runs, 10)}  #{String.slice(k.name, 0, 160)}")
  end
end
