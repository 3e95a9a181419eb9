# Device time per kernel (timestamps) of compiled softmax, layernorm and the MLP step vs the
# eager path: where the time of bench/compiler_bench.exs goes. JSON-ish lines on stdout.
Code.require_file("compiler_bench_fns.exs", __DIR__)
Application.ensure_all_started(:nx)
Nx.default_backend(NxVulkan.Backend)
key = Nx.Random.key(0)
{s, key} = Nx.Random.uniform(key, -4.0, 4.0, shape: {4096, 1024}, type: :f32)
{g, _} = Nx.Random.uniform(key, 0.5, 1.5, shape: {1024}, type: :f32)

for {name, fun, args} <- [{"softmax", &BenchFns.softmax/1, [s]}, {"layernorm", &BenchFns.layernorm/3, [s, g, g]}] do
  for {impl, compiler} <- [{"eager", Nx.Defn.Evaluator}, {"compiled", NxVulkan.Compiler}] do
    jit = Nx.Defn.jit(fun, compiler: compiler)
    for _ <- 1..3, do: apply(jit, args)
    NxVulkan.synchronize()
    {_, report} = NxVulkan.profile(fn -> for(_ <- 1..10, do: apply(jit, args)); NxVulkan.synchronize() end)

    for k <- report.kernels do
      IO.puts("#{name} #{impl} #{Float.round(k.device_us / 10, 1)} us x#{div(k.runs, 10)}  #{String.slice(k.name, 0, 160)}")
    end
  end
end
