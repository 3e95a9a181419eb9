# Regenerates test/compiler/golden.etf: the IR NxVulkan.Compiler lowers each case of
# test/compiler/cases.exs to, its inputs, and the outputs Nx.Defn.Evaluator computes on
# NxVulkan.Backend (the eager ops; compiled plans must give the same bits), as plain terms so
# CI replays them without Nx (test/compiler_golden_test.exs). Run by hand where Nx is on the
# code path:
#
#     ERL_LIBS=<dir with nx, complex, telemetry> mix run test/compiler/generate.exs
Application.ensure_all_started(:nx)
Code.require_file("cases.exs", __DIR__)
Nx.default_backend(NxVulkan.Backend)

bytes = fn t -> {Nx.type(t), Nx.shape(t), Nx.to_binary(t)} end

cases =
  for {name, fun, args, kernels} <- NxVulkan.CompilerCases.all() do
    {:ok, ir} = NxVulkan.Compiler.lower_ir(fun, args)
    expected = apply(Nx.Defn.jit(fun, compiler: Nx.Defn.Evaluator), args)

    %{
      name: name,
      params: ir.params,
      nodes: ir.nodes,
      outputs: ir.outputs,
      inputs:
        Enum.map(ir.inputs, fn
          {:param, i} -> bytes.(Enum.at(args, i))
          {:captured, t} -> bytes.(t)
        end),
      expected: [expected] |> Nx.Defn.Composite.flatten_list() |> Enum.map(bytes),
      fused_kernels: kernels
    }
  end

path = Path.join(__DIR__, "golden.etf")
data = %{nx: to_string(Application.spec(:nx, :vsn)), cases: cases}
File.write!(path, :erlang.term_to_binary(data, compressed: 9))
IO.puts("#{length(cases)} cases, #{File.stat!(path).size} bytes -> #{path}")
