# Time from VM start to the first result of the compiled MLP training step (784-512-10,
# batch 128): run twice by bench/h200_compiler.sh, once with empty caches (our pipeline cache
# dir emptied, the driver's own shader cache off) and once warm. One JSON line on stdout.
Application.ensure_all_started(:nx)
Nx.default_backend(NxVulkan.Backend)

defmodule F do
  import Nx.Defn

  defn loss(w1, b1, w2, b2, x, labels) do
    h = Nx.max(Nx.dot(x, w1) + b1, 0)
    logits = Nx.dot(h, w2) + b2
    m = Nx.reduce_max(logits, axes: [-1], keep_axes: true)
    lse = Nx.log(Nx.sum(Nx.exp(logits - m), axes: [-1], keep_axes: true)) + m
    -Nx.mean(Nx.sum(labels * (logits - lse), axes: [-1]))
  end

  defn step(w1, b1, w2, b2, x, labels) do
    {g1, gb1, g2, gb2} = grad({w1, b1, w2, b2}, fn {w1, b1, w2, b2} -> loss(w1, b1, w2, b2, x, labels) end)
    {w1 - 0.01 * g1, b1 - 0.01 * gb1, w2 - 0.01 * g2, b2 - 0.01 * gb2}
  end
end

w1 = Nx.broadcast(0.01, {784, 512}) |> Nx.as_type(:f32)
w2 = Nx.broadcast(0.01, {512, 10}) |> Nx.as_type(:f32)
b1 = Nx.broadcast(0.0, {512}) |> Nx.as_type(:f32)
b2 = Nx.broadcast(0.0, {10}) |> Nx.as_type(:f32)
x = Nx.iota({128, 784}, type: :f32) |> Nx.divide(1.0e5)
labels = Nx.iota({128, 10}) |> Nx.remainder(10) |> Nx.equal(Nx.iota({128, 1}) |> Nx.remainder(10)) |> Nx.as_type(:f32)
{_, _, _, b} = Nx.Defn.jit(&F.step/6, compiler: NxVulkan.Compiler).(w1, b1, w2, b2, x, labels)
Nx.to_binary(b)
{since_start_ms, _} = :erlang.statistics(:wall_clock)
pipelines = NxVulkan.stats().pipelines
IO.puts(~s({"case": "mlp_step_first_result", "cache": "#{System.get_env("CACHE_STATE", "?")}", "ms_since_vm_start": #{since_start_ms}, "pipelines_built": #{pipelines}}))
