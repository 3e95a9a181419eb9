# Regenerates test/golden/ops-<nx version>.etf: op cases computed by the installed Nx on
# Nx.BinaryBackend, stored as plain terms (types, shapes, little-endian bytes) so CI replays
# them without Nx (test/nx_backend_golden_test.exs). Run by hand where Nx is on the code path,
# once per supported Nx version (0.7.2 on Elixir 1.14, 0.13.1 on Elixir >= 1.17):
#
#     ERL_LIBS=<dir with nx, complex, telemetry> mix run test/golden/generate.exs
Application.ensure_all_started(:nx)
Code.require_file("../support/nx_cases.exs", __DIR__)
Nx.default_backend(Nx.BinaryBackend)

bytes = fn t -> {Nx.type(t), Nx.shape(t), Nx.to_binary(t)} end

cases =
  for c <- NxVulkan.NxCases.all(2024) do
    %{name: c.name, call: c.call, inputs: Enum.map(c.inputs, bytes), out: bytes.(c.nx.(c.inputs))}
  end

path = Path.join(__DIR__, "ops-#{Application.spec(:nx, :vsn)}.etf")

File.write!(
  path,
  :erlang.term_to_binary(%{
      nx: to_string(Application.spec(:nx, :vsn)),
      complex: to_string(Application.spec(:complex, :vsn)),
      seed: 2024,
      cases: cases
    },
    compressed: 9
  )
)

IO.puts("#{length(cases)} cases, #{File.stat!(path).size} bytes -> #{path}")
