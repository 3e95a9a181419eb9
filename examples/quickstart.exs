# NxVulkan.Backend in a few lines. Needs Nx (from Hex, or on the code path):
#
#     mix run examples/quickstart.exs
#
Application.ensure_all_started(:nx)

# Move a tensor to the device, compute there, and bring the result back.
host = Nx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
t = Nx.backend_transfer(host, NxVulkan.Backend)
IO.inspect(Nx.exp(t) |> Nx.sum(axes: [1]), label: "sum(exp(t), axes: [1])")
IO.inspect(Nx.dot(t, Nx.transpose(t)), label: "t · tᵀ")
IO.inspect(Nx.backend_transfer(Nx.argmax(t, axis: 1), Nx.BinaryBackend), label: "argmax on the host")

# Or make it the default backend for this process.
Nx.default_backend(NxVulkan.Backend)
x = Nx.iota({3, 4}, type: :f32) |> Nx.divide(10)
IO.inspect(Nx.window_sum(x, {2, 2}), label: "window_sum")

# Ops the engine cannot run (here: a reduction with an Elixir function) take a counted host
# fallback; strict mode makes them raise instead.
_ = Nx.reduce(Nx.tensor([3, 1, 2]), 0, fn x, acc -> Nx.add(x, acc) end)
IO.inspect(NxVulkan.fallbacks(), label: "host fallbacks so far")
IO.inspect(NxVulkan.stats() |> Map.take([:dispatches, :submits, :live_buffers]), label: "engine")
