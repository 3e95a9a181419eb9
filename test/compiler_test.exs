defmodule NxVulkan.CompilerTest do
  @moduledoc """
  NxVulkan.Compiler against Nx.Defn.Evaluator on NxVulkan.Backend (the eager path): under
  `precision: :exact` compiled results are bit-identical; fusion is checked by the plan's
  kernel count and the engine's dispatch counter; unsupported ops go to the evaluator,
  counted, and strict mode forbids them.
  """
  use ExUnit.Case, async: false
  @moduletag :nx
  @moduletag timeout: 600_000

  Code.require_file("compiler/cases.exs", __DIR__)

  if Code.ensure_loaded?(Nx) do
    alias NxVulkan.CompilerCases
    alias Nx.Defn.Composite

    setup do
      Nx.default_backend(NxVulkan.Backend)
      NxVulkan.strict(nil)
      :ok
    end

    # The fused-kernel count a case promises (nil: none), and with no reductions or dots the
    # dispatches of a call equal it.
    defp check_kernels(nil, _info, _dispatches), do: :ok

    defp check_kernels(kernels, info, dispatches) do
      assert info.fused_kernels == kernels, inspect(info)
      if info.family_steps == 0, do: assert(dispatches == kernels)
    end

    defp on_device(args), do: Enum.map(args, &Nx.backend_copy(&1, NxVulkan.Backend))
    defp leaves(result), do: Composite.flatten_list([result])

    defp bits(result), do: Enum.map(leaves(result), &{Nx.type(&1), Nx.shape(&1), Nx.to_binary(&1)})

    for {name, fun, args, kernels} <- CompilerCases.all() do
      @fun fun
      @args args
      @kernels kernels
      test "#{name}: compiled == evaluator on NxVulkan.Backend, bit for bit" do
        args = on_device(@args)
        {:plan, info} = NxVulkan.Compiler.describe(@fun, args)

        jitted = Nx.Defn.jit(@fun, compiler: NxVulkan.Compiler)
        NxVulkan.synchronize()
        before = NxVulkan.stats()
        compiled = apply(jitted, args)
        NxVulkan.synchronize()
        after_run = NxVulkan.stats()
        eager = apply(Nx.Defn.jit(@fun, compiler: Nx.Defn.Evaluator), args)
        assert bits(compiled) == bits(eager)
        assert after_run.recordings - before.recordings == 1, "one recording per call"

        check_kernels(@kernels, info, after_run.dispatches - before.dispatches)

        # BinaryBackend agrees to within rounding (reduction trees may order sums differently)
        host = apply(Nx.Defn.jit(@fun, compiler: Nx.Defn.Evaluator), Enum.map(@args, &Nx.backend_copy(&1, Nx.BinaryBackend)))

        for {c, h} <- Enum.zip(leaves(compiled), leaves(host)) do
          c = Nx.backend_copy(c, Nx.BinaryBackend)
          assert Nx.shape(c) == Nx.shape(h) and Nx.type(c) == Nx.type(h)

          if Nx.size(c) > 0 and match?({f, _} when f in [:f, :bf], Nx.type(c)) do
            assert Nx.all_close(c, h, rtol: 1.0e-2, atol: 1.0e-3, equal_nan: true) |> Nx.to_number() == 1
          else
            assert Nx.to_binary(c) == Nx.to_binary(h)
          end
        end
      end
    end

    test "a 10-op chain on 1M elements is one dispatch and one recording" do
      x = Nx.iota({1024, 1024}, type: :f32) |> Nx.divide(1.0e6)
      y = Nx.iota({1024, 1024}, type: :f32, axis: 1) |> Nx.multiply(1.0e-3)
      jitted = Nx.Defn.jit(&CompilerCases.Fns.chain10/2, compiler: NxVulkan.Compiler)
      apply(jitted, [x, y]) |> Nx.to_binary()
      NxVulkan.synchronize()
      before = NxVulkan.stats()
      r = apply(jitted, [x, y])
      NxVulkan.synchronize()
      after_run = NxVulkan.stats()
      assert after_run.dispatches - before.dispatches == 1
      assert after_run.recordings - before.recordings == 1
      assert Nx.to_binary(r) == Nx.to_binary(CompilerCases.Fns.chain10(x, y))
    end

    # Softmax's f32 max and layernorm's f32 sum over rows of 1,024 run in the kernel of the
    # reduction after them (`reduce::RowReduction`).
    test "softmax and layernorm over the last axis are one dispatch each" do
      key = Nx.Random.key(3)
      {x, key} = Nx.Random.uniform(key, -4.0, 4.0, shape: {512, 1024}, type: :f32)
      {g, _} = Nx.Random.uniform(key, shape: {1024}, type: :f32)

      for {fun, args, dispatches} <- [{&CompilerCases.Fns.softmax/1, [x], 1}, {&CompilerCases.Fns.layernorm/3, [x, g, g], 1}] do
        jitted = Nx.Defn.jit(fun, compiler: NxVulkan.Compiler)
        apply(jitted, args) |> Nx.to_binary()
        before = NxVulkan.stats()
        r = apply(jitted, args)
        NxVulkan.synchronize()
        assert NxVulkan.stats().dispatches - before.dispatches == dispatches
        assert Nx.to_binary(r) == Nx.to_binary(apply(Nx.Defn.jit(fun, compiler: Nx.Defn.Evaluator), args))
      end
    end

    test "a second call hits the plan cache; new shapes miss it" do
      f = fn x -> Nx.sin(x) |> Nx.add(1) end
      jitted = Nx.Defn.jit(f, compiler: NxVulkan.Compiler)
      x = Nx.iota({7}, type: :f32)
      jitted.(x)
      s0 = NxVulkan.Compiler.stats()
      jitted.(Nx.add(x, 1))
      s1 = NxVulkan.Compiler.stats()
      assert s1.plan_hit == s0.plan_hit + 1 and s1.plan_miss == s0.plan_miss
      jitted.(Nx.iota({8}, type: :f32))
      s2 = NxVulkan.Compiler.stats()
      assert s2.plan_miss == s1.plan_miss + 1
    end

    test "inputs on another backend are copied to the device" do
      x = Nx.iota({5}, type: :f32, backend: Nx.BinaryBackend)
      r = Nx.Defn.jit(&Nx.exp/1, compiler: NxVulkan.Compiler).(x)
      assert %NxVulkan.Backend{} = r.data
      assert Nx.to_binary(r) == Nx.to_binary(Nx.exp(Nx.backend_copy(x, NxVulkan.Backend)))
    end

    test "while runs on the device: plans around the loop, the predicate read back" do
      NxVulkan.reset_fallbacks()
      x = Nx.iota({4}, type: :f32)

      assert {:plan, %{whiles: 1, stages: stages}} =
               NxVulkan.Compiler.describe(&CompilerCases.Fns.while_loop/1, [x])

      assert stages >= 2
      jitted = Nx.Defn.jit(&CompilerCases.Fns.while_loop/1, compiler: NxVulkan.Compiler)
      assert Nx.to_flat_list(jitted.(x)) == [0.0, 8.0, 16.0, 24.0]

      for w <- [Nx.iota({4}, type: :f32), Nx.negate(Nx.iota({4}, type: :f32))] do
        x = Nx.tensor([0.5, -1.0, 2.0, 0.25])
        x = if Nx.to_number(Nx.sum(w)) > 0, do: x, else: Nx.negate(x)
        want = Nx.Defn.jit(&CompilerCases.Fns.while_cond/2, compiler: Nx.Defn.Evaluator).(x, w)
        got = Nx.Defn.jit(&CompilerCases.Fns.while_cond/2, compiler: NxVulkan.Compiler).(x, w)
        assert Nx.to_binary(got) == Nx.to_binary(want)
      end

      assert NxVulkan.fallbacks() == %{}
    end

    test "ops without a plan node run through the evaluator, counted; strict mode forbids it" do
      NxVulkan.reset_fallbacks()
      x = Nx.tensor([3.0, 1.0, 2.0])
      taker = fn x -> Nx.take(x, Nx.tensor([2, 0])) |> Nx.multiply(2) end
      assert {:evaluator, op} = NxVulkan.Compiler.describe(taker, [x])
      jitted = Nx.Defn.jit(taker, compiler: NxVulkan.Compiler)
      assert Nx.to_flat_list(jitted.(x)) == [4.0, 6.0]
      assert NxVulkan.fallbacks()[:"defn:#{op}"] == 1
      NxVulkan.strict(true)
      assert_raise NxVulkan.FallbackError, fn -> jitted.(x) end
    after
      NxVulkan.strict(nil)
    end

    test "a bad :precision is an ArgumentError" do
      assert_raise ArgumentError, ~r/:precision/, fn ->
        Nx.Defn.jit(&Nx.exp/1, compiler: NxVulkan.Compiler, precision: :sloppy).(Nx.tensor([1.0]))
      end
    end

    test ":fast precision accumulates dots in f32, close to :exact" do
      key = Nx.Random.key(1)
      {a, key} = Nx.Random.uniform(key, shape: {64, 300}, type: :f32)
      {b, _} = Nx.Random.uniform(key, shape: {300, 32}, type: :f32)
      exact = Nx.Defn.jit(&Nx.dot/2, compiler: NxVulkan.Compiler).(a, b)
      fast = Nx.Defn.jit(&Nx.dot/2, compiler: NxVulkan.Compiler, precision: :fast).(a, b)
      assert Nx.all_close(exact, fast, rtol: 1.0e-5) |> Nx.to_number() == 1
    end
  end
end
