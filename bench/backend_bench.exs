# NxVulkan.Backend vs Nx.BinaryBackend, same machine, same run (needs Nx on the code path):
#
#     ERL_LIBS=... mix run bench/backend_bench.exs
#
# Per-op latency from Elixir (warm, small tensor, result read back) and a few large ops.
# Medians of several runs after a warm-up; prints a Markdown table.
Application.ensure_all_started(:nx)

defmodule BackendBench do
  def median(fun, reps) do
    for(_ <- 1..3, do: fun.())
    times = for _ <- 1..reps, do: elem(:timer.tc(fun), 0)
    Enum.at(Enum.sort(times), div(reps, 2))
  end

  def run(name, reps, make_inputs, op) do
    row =
      for backend <- [NxVulkan.Backend, Nx.BinaryBackend] do
        inputs = make_inputs.() |> Enum.map(&Nx.backend_transfer(&1, backend))
        # Reading the result back makes sure the work finished.
        median(fn -> apply(op, inputs) |> Nx.to_binary() end, reps)
      end

    [vk, bin] = row
    IO.puts("| #{name} | #{fmt(vk)} | #{fmt(bin)} | #{Float.round(bin / vk, 1)}× |")
  end

  defp fmt(us) when us >= 10_000, do: "#{Float.round(us / 1000, 1)} ms"
  defp fmt(us), do: "#{us} µs"
end

key = Nx.Random.key(42)
rand = fn shape -> elem(Nx.Random.uniform(key, shape: shape, type: :f32), 0) end

IO.puts("device: #{NxVulkan.device_info().name}\n")
IO.puts("| op | NxVulkan.Backend | Nx.BinaryBackend | speed-up |")
IO.puts("|---|---|---|---|")
BackendBench.run("add, 4-element f32 (per-op latency)", 200, fn -> [Nx.tensor([1.0, 2.0, 3.0, 4.0]), Nx.tensor([1.0, 2.0, 3.0, 4.0])] end, &Nx.add/2)
BackendBench.run("exp, 1M f32", 5, fn -> [rand.({1_000_000})] end, &Nx.exp/1)
BackendBench.run("sum, 1M f32", 5, fn -> [rand.({1_000_000})] end, &Nx.sum/1)
BackendBench.run("dot 256×256 f32 (exact)", 3, fn -> [rand.({256, 256}), rand.({256, 256})] end, &Nx.dot/2)
BackendBench.run("sort 100k f32", 3, fn -> [rand.({100_000})] end, &Nx.sort/1)
BackendBench.run("softmax-like chain 1000×100", 5, fn -> [rand.({1000, 100})] end, fn x ->
  e = Nx.exp(Nx.subtract(x, Nx.reduce_max(x, axes: [1], keep_axes: true)))
  Nx.divide(e, Nx.sum(e, axes: [1], keep_axes: true))
end)
IO.inspect(NxVulkan.fallbacks(), label: "\nhost fallbacks during the bench")
