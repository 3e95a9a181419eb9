# An Axon training loop compiled by NxVulkan.Compiler: a small MLP learns a synthetic
# 4-class task; the loss per epoch and the time per step are printed, and the same loop on
# Nx.BinaryBackend (Nx.Defn.Evaluator) gives the reference loss trajectory.
#
# Needs Nx 0.7.2, Axon 0.6.1 and Polaris 0.1.0 on the code path (they come from Hex in a normal
# project; here, built by hand outside the repo and given through ERL_LIBS), and the app:
#
#     ERL_LIBS=<nx, complex, telemetry, axon, polaris> mix run examples/axon_training_loop.exs
#
# Options (env): EPOCHS (5), BATCHES per epoch (20), PRECISION (exact | fast), REFERENCE=0 skips
# the BinaryBackend run, STRICT=1 forbids any host fallback during the compiled run.
Application.ensure_all_started(:nx)
epochs = String.to_integer(System.get_env("EPOCHS", "5"))
batches = String.to_integer(System.get_env("BATCHES", "20"))
precision = String.to_existing_atom(System.get_env("PRECISION", "exact"))

defmodule Example do
  # Deterministic data: x in [-1, 1]^16, the class is the argmax of a fixed projection.
  def data(batches, backend) do
    key = Nx.Random.key(7)
    {proj, key} = Nx.Random.normal(key, shape: {16, 4}, type: :f32)

    {batches, _} =
      Enum.map_reduce(1..batches, key, fn _, key ->
        {x, key} = Nx.Random.uniform(key, -1.0, 1.0, shape: {32, 16}, type: :f32)
        y = x |> Nx.dot(proj) |> Nx.argmax(axis: 1) |> Nx.new_axis(1) |> Nx.equal(Nx.iota({1, 4})) |> Nx.as_type(:f32)
        {{Nx.backend_copy(x, backend), Nx.backend_copy(y, backend)}, key}
      end)

    batches
  end

  def model do
    Axon.input("x", shape: {nil, 16})
    |> Axon.dense(64, activation: :relu, kernel_initializer: Axon.Initializers.glorot_uniform())
    |> Axon.dense(4, activation: :softmax)
  end

  # Trains and returns the mean loss of each epoch (Axon's running average at epoch end) and
  # the median step time in microseconds (after the first epoch, which compiles).
  def train(data, params, epochs, compiler_opts) do
    parent = self()
    model = model()

    loop =
      model
      |> Axon.Loop.trainer(:categorical_cross_entropy, Polaris.Optimizers.sgd(learning_rate: 0.1), log: 0)
      |> Axon.Loop.handle_event(:iteration_completed, fn state ->
        send(parent, {:step_done, System.monotonic_time(:microsecond)})
        {:continue, state}
      end)
      |> Axon.Loop.handle_event(:epoch_completed, fn state ->
        send(parent, {:epoch, state.epoch, Nx.to_number(state.metrics["loss"])})
        {:continue, state}
      end)

    state = Axon.Loop.run(loop, data, params, [epochs: epochs] ++ compiler_opts)
    losses = for _ <- 1..epochs, do: (receive do {:epoch, _, l} -> l end)
    stamps = Stream.repeatedly(fn -> receive do {:step_done, t} -> t after 0 -> nil end end) |> Enum.take_while(& &1)
    steps = stamps |> Enum.drop(length(data)) |> Enum.chunk_every(2, 1, :discard) |> Enum.map(fn [a, b] -> b - a end)
    median = if steps == [], do: nil, else: Enum.at(Enum.sort(steps), div(length(steps), 2))
    {losses, median, state}
  end
end

# The same initial parameters for both runs (Axon's initializers draw fresh random keys).
defmodule Params do
  def copy(%Nx.Tensor{} = t, backend), do: Nx.backend_copy(t, backend)
  def copy(%{} = map, backend), do: Map.new(map, fn {k, v} -> {k, copy(v, backend)} end)
end

Nx.default_backend(Nx.BinaryBackend)
{init, _} = Axon.build(Example.model(), mode: :train)
params0 = init.(Nx.template({32, 16}, :f32), %{})

Nx.default_backend(NxVulkan.Backend)
if System.get_env("STRICT") == "1", do: NxVulkan.strict(true)
NxVulkan.reset_fallbacks()
data = Example.data(batches, NxVulkan.Backend)
{losses, step_us, _} = Example.train(data, Params.copy(params0, NxVulkan.Backend), epochs, compiler: NxVulkan.Compiler, precision: precision)
NxVulkan.strict(nil)
IO.puts("NxVulkan.Compiler (#{precision}): #{epochs} epochs x #{batches} steps, median step #{step_us} us")
Enum.with_index(losses, fn l, e -> IO.puts("  epoch #{e}: loss #{l}") end)
IO.puts("  host fallbacks: #{inspect(NxVulkan.fallbacks())}; compiler: #{inspect(NxVulkan.Compiler.stats())}")

if System.get_env("REFERENCE", "1") == "1" do
  Nx.default_backend(Nx.BinaryBackend)
  ref_data = Example.data(batches, Nx.BinaryBackend)
  {ref, ref_step, _} = Example.train(ref_data, params0, epochs, compiler: Nx.Defn.Evaluator)
  IO.puts("Nx.BinaryBackend (evaluator): median step #{ref_step} us")
  Enum.with_index(ref, fn l, e -> IO.puts("  epoch #{e}: loss #{l}") end)
  rel = Enum.zip_with(losses, ref, fn a, b -> abs(a - b) / max(abs(b), 1.0e-30) end) |> Enum.max()
  IO.puts("loss trajectory: #{if losses == ref, do: "bit-identical", else: "max relative difference #{rel}"}")
end
