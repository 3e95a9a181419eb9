# Time from VM start to the first result of the compiled MLP training step (784-512-10,
# batch 128): run twice by bench/h200_compiler.sh, once with empty caches (our pipeline cache
# dir emptied, the driver's own shader cache off) and once warm. One JSON line on stdout.
Code.require_file("compiler_bench_fns.exs", __DIR__)
Application.ensure_all_started(:nx)
Nx.default_backend(NxVulkan.Backend)

w1 = Nx.broadcast(0.01, {784, 512}) |> Nx.as_type(:f32)
w2 = Nx.broadcast(0.01, {512, 10}) |> Nx.as_type(:f32)
b1 = Nx.broadcast(0.0, {512}) |> Nx.as_type(:f32)
b2 = Nx.broadcast(0.0, {10}) |> Nx.as_type(:f32)
x = Nx.iota({128, 784}, type: :f32) |> Nx.divide(1.0e5)
labels = Nx.iota({128, 10}) |> Nx.remainder(10) |> Nx.equal(Nx.iota({128, 1}) |> Nx.remainder(10)) |> Nx.as_type(:f32)
{_, _, _, b} = Nx.Defn.jit(&BenchFns.step/6, compiler: NxVulkan.Compiler).(w1, b1, w2, b2, x, labels)
Nx.to_binary(b)
{since_start_ms, _} = :erlang.statistics(:wall_clock)
pipelines = NxVulkan.stats().pipelines
IO.puts(~s({"case": "mlp_step_first_result", "cache": "#{System.get_env("CACHE_STATE", "?")}", "ms_since_vm_start": #{since_start_ms}, "pipelines_built": #{pipelines}}))
