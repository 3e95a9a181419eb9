defmodule NxVulkan.CompilerGoldenTest do
  @moduledoc """
  Golden data for CI, where Nx is absent: `test/compiler/golden.etf` holds the IR that
  NxVulkan.Compiler lowered each case of `test/compiler/cases.exs` to, its inputs, and the
  outputs Nx.Defn.Evaluator computed eagerly on NxVulkan.Backend (`test/compiler/generate.exs`,
  run by hand with Nx). Each is compiled into a plan and run, one recording per call, and its
  outputs are compared byte for byte; the fused-kernel counts the cases promise are checked.
  """
  use ExUnit.Case, async: false
  @moduletag timeout: 600_000

  @golden Path.join(Path.dirname(__ENV__.file), "compiler/golden.etf")
  @external_resource @golden
  @data @golden |> File.read!() |> :erlang.binary_to_term()

  test "the golden file covers the cases" do
    assert @data.nx =~ ~r/^0\.\d+/
    assert length(@data.cases) >= 20
  end

  for c <- @data.cases do
    @case c
    test "#{c.name}: the plan gives the eager bits in one recording" do
      c = @case
      {plan, {_nodes, fused, _inlined, _family, _pro, _epi}} = NxVulkan.plan_compile(c.params, c.nodes, c.outputs)
      if c.fused_kernels, do: assert(fused == c.fused_kernels)
      handles = for {t, s, bin} <- c.inputs, do: NxVulkan.upload(bin, t, s)
      NxVulkan.synchronize()
      before = NxVulkan.stats()
      outs = NxVulkan.plan_run(plan, handles)
      NxVulkan.synchronize()
      assert NxVulkan.stats().recordings - before.recordings == 1

      for {h, {t, s, want}} <- Enum.zip(outs, c.expected) do
        assert NxVulkan.describe(h) == {t, s}
        assert NxVulkan.download(h) == want
      end
    end
  end

  test "malformed IR is an ArgumentError, not a crash" do
    p = [{{:f, 32}, {3}}]
    node = fn op, args, attr -> {op, args, {3}, {:f, 32}, attr} end
    assert_raise ArgumentError, ~r/no op/, fn -> NxVulkan.plan_compile(p, [node.(:frobnicate, [], nil)], [0]) end
    assert_raise ArgumentError, ~r/after their arguments/, fn -> NxVulkan.plan_compile(p, [node.(:exp, [0], nil)], [0]) end
    assert_raise ArgumentError, ~r/malformed attribute/, fn -> NxVulkan.plan_compile(p, [node.(:parameter, [], :x)], [0]) end
    assert_raise ArgumentError, ~r/needs 4 bytes/, fn -> NxVulkan.plan_compile(p, [node.(:constant, [], <<1>>)], [0]) end
    assert_raise ArgumentError, ~r/not a node/, fn -> NxVulkan.plan_compile(p, [node.(:parameter, [], 0)], [5]) end
    assert_raise ArgumentError, ~r/unknown precision/, fn -> NxVulkan.plan_compile(p, [node.(:parameter, [], 0)], [0], "sloppy") end
    {plan, _} = NxVulkan.plan_compile(p, [node.(:parameter, [], 0), node.(:exp, [0], nil)], [1])
    assert_raise ArgumentError, ~r/compiled for f32\[3\]/, fn -> NxVulkan.plan_run(plan, [NxVulkan.upload(<<0::32>>, {:f, 32}, {1})]) end
    dead = NxVulkan.upload(<<0::96>>, {:f, 32}, {3})
    NxVulkan.deallocate(dead)
    assert_raise ArgumentError, ~r/deallocated/, fn -> NxVulkan.plan_run(plan, [dead]) end
  end
end
