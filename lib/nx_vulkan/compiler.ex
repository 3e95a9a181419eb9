if Code.ensure_loaded?(Nx) do
  defmodule NxVulkan.Compiler do
    @moduledoc """
    A `Nx.Defn.Compiler` that compiles `defn` functions into fused device plans.

        Nx.Defn.jit(&MyModule.softmax/1, compiler: NxVulkan.Compiler).(x)
        Nx.Defn.default_options(compiler: NxVulkan.Compiler)

    The compiler does the least it can in Elixir: it lowers the `Nx.Defn.Expr` graph to a
    flat IR — `{op, args, shape, type, attr}` nodes in topological order, shared
    subexpressions once — and hands it to the engine (`NxVulkan.plan_compile/4`), which
    schedules it (elementwise regions fused into generated kernels; reductions with their
    elementwise prologue, finish and epilogue in their own kernels; dots and views as stage
    boundaries) once per function, input shapes and types, and options. A call binds the new
    inputs and records the whole plan as one submission to the device's stream. A `while`
    loop splits the function into plans before and after it; its condition and body are
    plans of their own, and the host reads the predicate back once per iteration. `cond` is
    computed as a `select` over all branches (no read-back).

    ## Options

      * `:precision` — `:exact`: the bits `NxVulkan.Backend` gives eagerly under `:exact`
        (which are `Nx.BinaryBackend`'s); `:fast`: f32/f16/bf16 elementwise math in f32 with
        our own f32 library (within 2 ulp, the same bits on every device; fused equals eager
        `NxVulkan.Backend` under `:fast`, see `NxVulkan.Precision`) and dots accumulating in
        f32 (on tensor cores for f16/bf16 where the device has them). Defaults to
        `NxVulkan.Precision.current/0` (`config :nx_vulkan, precision: ...`, `:exact` unset).

    ## What is compiled, what is not

    Compiled: parameters, constants, tensors captured by the function, elementwise ops
    (unary, binary, `select`, `clip`, `as_type`, `bitcast`, `iota`, `eye`), views (`reshape`,
    `squeeze`, `broadcast`, `transpose`, `slice` with constant starts, `reverse`), reductions
    (`sum`, `product`, `reduce_max`, `reduce_min`, `all`, `any`, `argmax`, `argmin`), `dot`,
    `concatenate`, `pad`, `sort`, `argsort`, the `cumulative_*` ops, `while`, `cond`, `metadata` (`stop_grad` and friends) and `optional`
    nodes whose backend callback `NxVulkan.Backend` does not define (their default expression
    is inlined). A function with anything else (hooks and tokens, complex numbers, other ops
    such as gather, take or conv) runs through `Nx.Defn.Evaluator` over `NxVulkan.Backend` —
    on the device, op by op, under the function's `:precision`, still correct — and that is
    counted as a fallback named
    `:"defn:<op>"` (`NxVulkan.fallbacks/0`) and forbidden in strict mode
    (`NxVulkan.strict/1`).

    `stats/0` counts plan cache hits and misses and evaluator runs. Telemetry (when
    `:telemetry` is loaded): `[:nx_vulkan, :compiler, :cache]` per lookup (`%{count: 1}`,
    `%{result: :hit | :miss}`) and `[:nx_vulkan, :compiler, :compile]` per compilation
    (`%{duration_us: _}`, `%{kind: :program | :evaluator}`); the engine's SPIR-V disk cache
    counts in `NxVulkan.stats/0` (`:spirv_disk_hits`, `:spirv_disk_misses`,
    `:spirv_disk_rejected`).
    """

    @behaviour Nx.Defn.Compiler

    alias Nx.Defn.{Composite, Expr}
    alias Nx.Tensor, as: T

    @unary_ops [:exp, :expm1, :log, :log1p, :sigmoid, :cos, :sin, :tan, :cosh, :sinh, :tanh] ++
                 [:acos, :asin, :atan, :acosh, :asinh, :atanh, :sqrt, :rsqrt, :cbrt, :erf] ++
                 [:erfc, :erf_inv, :abs, :bitwise_not, :ceil, :floor, :round, :sign] ++
                 [:count_leading_zeros, :population_count, :is_nan, :is_infinity]

    @binary_ops [:add, :subtract, :multiply, :pow, :remainder, :divide, :atan2, :min, :max] ++
                  [:quotient, :bitwise_and, :bitwise_or, :bitwise_xor, :left_shift] ++
                  [:right_shift, :equal, :not_equal, :greater, :less, :greater_equal] ++
                  [:less_equal, :logical_and, :logical_or, :logical_xor]

    @reductions [:sum, :product, :reduce_max, :reduce_min, :all, :any]
    @cumulative [:cumulative_sum, :cumulative_product, :cumulative_max, :cumulative_min]

    @cache_key {__MODULE__, :cache}
    @stats_key {__MODULE__, :stats}
    @stat_slots [plan_hit: 1, plan_miss: 2, evaluator: 3]

    ## Nx.Defn.Compiler

    @impl true
    def __partitions_options__(opts), do: [opts]

    @impl true
    def __to_backend__(opts), do: {NxVulkan.Backend, Keyword.take(opts, [:device])}

    # Streams run through the evaluator over NxVulkan.Backend (counted like any fallback);
    # Nx dropped the callback after 0.7.
    if {:__stream__, 7} in Nx.Defn.Compiler.behaviour_info(:callbacks), do: @impl(true)

    def __stream__(key, input, acc, vars, fun, args_list, opts) do
      NxVulkan.Fallback.record!(:"defn:stream")
      Nx.Defn.Evaluator.__stream__(key, input, acc, vars, fun, args_list, Keyword.drop(opts, [:precision]))
    end

    @impl true
    def __jit__(key, vars, fun, args_list, opts) do
      __compile__(key, vars, fun, opts).(args_list)
    end

    @impl true
    def __compile__(key, vars, fun, opts) do
      compiled = compiled(key, vars, fun, opts)
      fn args_list -> Enum.map(args_list, &run(compiled, &1)) end
    end

    @doc """
    Counters since the VM started: `:plan_hit` and `:plan_miss` (compiled-plan cache lookups)
    and `:evaluator` (calls of functions the compiler could not plan).
    """
    def stats do
      c = counters()
      Map.new(@stat_slots, fn {name, i} -> {name, :counters.get(c, i)} end)
    end

    @doc """
    What the compiler makes of a function and arguments (as `Nx.Defn.jit/2` would compile
    them): `{:plan, summary}` with `:stages` (straight-line plans, split by `while` loops),
    `:whiles`, and over all stages `:nodes`, `:fused_kernels` (generated elementwise kernels),
    `:inlined_nodes` (elementwise nodes computed inside others), `:family_steps` (reductions,
    dots, views), `:fused_prologues` (reductions reading an inlined expression) and
    `:fused_epilogues` (elementwise nodes written by the reduction kernel they read); or
    `{:evaluator, op}` naming the first op that keeps it from being planned.
    """
    def describe(fun, args, opts \\ []) when is_function(fun) and is_list(args) do
      {expr, params} = traced(fun, args)

      try do
        program = expr |> lower_program(params) |> compile_program(engine_precision(precision_option(opts)))
        {:plan, summary(program)}
      catch
        {:unsupported, op} -> {:evaluator, op}
      end
    end

    @doc """
    The IR a function without `while` lowers to, for tests and golden files:
    `{:ok, %{params: [{type, shape}], nodes: [...], outputs: [...], inputs: [ref]}}` where
    `inputs` says what each plan parameter is bound to (`{:param, i}` for the function's i-th
    argument, `{:captured, tensor}` for a tensor the function captured), or
    `{:unsupported, op}`.
    """
    def lower_ir(fun, args) when is_function(fun) and is_list(args) do
      {expr, params} = traced(fun, args)

      try do
        case lower_program(expr, params) do
          %{stages: [stage], whiles: [], captured: captured} = prog ->
            outputs = Enum.map(prog.outputs, fn {:stage, 0, p} -> Enum.at(stage.outputs, p) end)
            inputs = Enum.map(stage.inputs, fn
              {:captured, k} -> {:captured, Enum.at(captured, k)}
              ref -> ref
            end)
            {:ok, %{params: stage.params, nodes: stage.nodes, outputs: outputs, inputs: inputs}}

          _ ->
            {:unsupported, :while}
        end
      catch
        {:unsupported, op} -> {:unsupported, op}
      end
    end

    # The expression `fun` builds for `args` and the parameter templates, as jit would see them.
    defp traced(fun, args) do
      expr = apply(Nx.Defn.debug_expr(fun), args)
      params = args |> Composite.flatten_list() |> Enum.map(&Nx.to_tensor/1) |> Enum.map(&{&1.type, &1.shape})
      {expr, params}
    end

    # The engine's precision for a precision option (NxVulkan.plan_compile/4).
    defp engine_precision(:fast), do: "fast"
    defp engine_precision(:exact), do: "exact"

    defp precision_option(opts) do
      case Keyword.get(opts, :precision) do
        nil -> NxVulkan.Precision.current()
        p when p in [:exact, :fast] -> p
        p -> raise ArgumentError, "NxVulkan.Compiler :precision must be :exact or :fast, got #{inspect(p)}"
      end
    end

    ## Compilation and its cache

    defp compiled(key, vars, fun, opts) do
      precision = precision_option(opts)

      templates = vars |> Composite.flatten_list() |> Enum.map(&{&1.type, &1.shape, &1.names})
      cache_key = {key, templates, precision}

      case :persistent_term.get({@cache_key, cache_key}, nil) do
        nil ->
          bump(:plan_miss)
          telemetry(:cache, %{count: 1}, %{result: :miss})
          {time, compiled} = :timer.tc(fn -> build(key, vars, fun, opts, precision) end)
          telemetry(:compile, %{duration_us: time}, %{kind: elem(compiled, 0)})
          :persistent_term.put({@cache_key, cache_key}, compiled)
          compiled

        compiled ->
          bump(:plan_hit)
          telemetry(:cache, %{count: 1}, %{result: :hit})
          compiled
      end
    end

    defp build(key, vars, fun, opts, precision) do
      expr = fun.(vars)
      params = vars |> Composite.flatten_list() |> Enum.map(&{&1.type, &1.shape})
      try do
        program = expr |> lower_program(params) |> compile_program(engine_precision(precision))
        {:program, program, expr}
      catch
        {:unsupported, op} ->
          evaluator = Nx.Defn.Evaluator.__compile__(key, vars, fun, Keyword.drop(opts, [:precision]))
          {:evaluator, op, evaluator, precision}
      end
    end

    defp run({:program, program, expr}, params) do
      handles = Enum.map(params, &(&1 |> param() |> device_ref()))
      outputs = run_program(program, handles)

      {result, []} =
        Composite.traverse(expr, outputs, fn %T{} = t, [h | rest] ->
          {%T{t | data: %NxVulkan.Backend{ref: h}}, rest}
        end)

      result
    end

    defp run({:evaluator, op, evaluator, precision}, params) do
      NxVulkan.Fallback.record!(:"defn:#{op}")
      bump(:evaluator)
      # the eager ops the evaluator runs take the function's precision
      old = NxVulkan.Precision.put(precision)

      try do
        [result] = evaluator.([params])
        result
      after
        NxVulkan.Precision.put(old)
      end
    end

    defp param(fun) when is_function(fun, 0), do: fun.()
    defp param(%T{} = t), do: t

    defp device_ref(%T{data: %NxVulkan.Backend{ref: ref}}), do: ref
    defp device_ref(%T{} = t), do: device_ref(Nx.backend_copy(t, NxVulkan.Backend))

    ## Programs: straight-line plans and the while loops between them
    #
    # A program is a list of stages (each one engine plan) and while loops. Values are named by
    # refs: {:param, i} (the function's i-th argument), {:captured, k} (a tensor the function
    # captured), {:stage, j, p} (the p-th output of stage j), {:while, w, i} (the i-th result
    # of loop w). Loops whose initial values come from stages < j run between stage j - 1 and
    # stage j; a loop's condition and body are programs of their own over the loop state.

    defp compile_program(prog, precision) do
      stages =
        Enum.map(prog.stages, fn
          %{nodes: []} = stage ->
            Map.merge(stage, %{plan: nil, summary: {0, 0, 0, 0, 0, 0}})

          stage ->
            {plan, summary} = NxVulkan.plan_compile(stage.params, stage.nodes, stage.outputs, precision)
            Map.merge(stage, %{plan: plan, summary: summary})
        end)

      whiles =
        Enum.map(prog.whiles, fn w ->
          %{w | cond: compile_program(w.cond, precision), body: compile_program(w.body, precision)}
        end)

      captured = Enum.map(prog.captured, &device_ref/1)
      %{prog | stages: stages, whiles: whiles, captured: captured}
    end

    defp run_program(prog, handles) do
      env = %{params: List.to_tuple(handles), captured: List.to_tuple(prog.captured), values: %{}}

      env =
        prog.stages
        |> Enum.with_index()
        |> Enum.reduce(env, fn {stage, j}, env ->
          env =
            prog.whiles
            |> Enum.with_index()
            |> Enum.filter(fn {w, _} -> w.level == j end)
            |> Enum.reduce(env, fn {w, wi}, env ->
              results = run_while(w, Enum.map(w.initial, &fetch(env, &1)))
              results |> Enum.with_index() |> Enum.reduce(env, fn {h, i}, env -> put_value(env, {:while, wi, i}, h) end)
            end)

          outs = if stage.plan, do: NxVulkan.plan_run(stage.plan, Enum.map(stage.inputs, &fetch(env, &1))), else: []
          outs |> Enum.with_index() |> Enum.reduce(env, fn {h, p}, env -> put_value(env, {:stage, j, p}, h) end)
        end)

      Enum.map(prog.outputs, &fetch(env, &1))
    end

    # The host reads the predicate between recorded segments (one synchronisation per
    # iteration); the condition and body are plans like any other.
    defp run_while(w, state) do
      [pred] = run_program(w.cond, state)

      if truthy?(pred, w.pred_type) do
        run_while(w, run_program(w.body, state))
      else
        state
      end
    end

    defp truthy?(handle, type) do
      Nx.from_binary(NxVulkan.download(handle), type, backend: Nx.BinaryBackend) |> Nx.reshape({}) |> Nx.to_number() != 0
    end

    defp put_value(env, ref, h), do: %{env | values: Map.put(env.values, ref, h)}

    defp fetch(env, {:param, i}), do: elem(env.params, i)
    defp fetch(env, {:captured, k}), do: elem(env.captured, k)
    defp fetch(env, ref), do: Map.fetch!(env.values, ref)

    defp summary(prog) do
      keys = [:nodes, :fused_kernels, :inlined_nodes, :family_steps, :fused_prologues, :fused_epilogues]
      zero = Map.new(keys, &{&1, 0})

      own =
        Enum.reduce(prog.stages, zero, fn %{summary: s}, acc ->
          Enum.zip(keys, Tuple.to_list(s)) |> Enum.reduce(acc, fn {k, v}, acc -> Map.update!(acc, k, &(&1 + v)) end)
        end)

      nested = Enum.flat_map(prog.whiles, &[summary(&1.cond), summary(&1.body)])

      Enum.reduce(nested, Map.merge(own, %{stages: length(prog.stages), whiles: length(prog.whiles)}), fn n, acc ->
        Map.merge(acc, n, fn _k, a, b -> a + b end)
      end)
    end

    ## Lowering: Nx.Defn.Expr -> programs of flat IR stages
    #
    # A visited tensor becomes a value: {:node, level, index} (node `index` of stage `level`),
    # {:ext, level, ref} (a function argument, captured tensor or loop result, usable from stage
    # `level` on) or {:free, key, node} (no arguments — constants, iota: emitted into each stage
    # that uses it). A node's level is the highest of its arguments'; a while loop's results
    # are one level above its initial values.

    defp lower_program(expr, param_templates) do
      leaves = Composite.flatten_list([expr])

      state = %{
        params: List.to_tuple(param_templates),
        stages: %{},
        index: %{},
        captured: [],
        whiles: []
      }

      {values, state} = Enum.map_reduce(leaves, state, &visit(&1, %{}, &2))
      {outputs, state} = Enum.map_reduce(values, state, &export/2)
      levels = state.stages |> Map.keys() |> Enum.max(fn -> 0 end)
      levels = Enum.max([levels | Enum.map(state.whiles, & &1.level)], fn -> 0 end)

      stages =
        for j <- 0..levels//1 do
          st = Map.get(state.stages, j, new_stage())
          %{nodes: Enum.reverse(st.nodes), outputs: Enum.reverse(st.outputs), inputs: Enum.reverse(st.inputs), params: Enum.reverse(st.params)}
        end

      %{stages: stages, whiles: Enum.reverse(state.whiles), outputs: outputs, captured: Enum.reverse(state.captured)}
    end

    defp new_stage, do: %{nodes: [], count: 0, outputs: [], n_out: 0, out_index: %{}, inputs: [], params: [], in_index: %{}, free: %{}}

    defp stage(state, j), do: Map.get(state.stages, j, new_stage())
    defp put_stage(state, j, st), do: %{state | stages: Map.put(state.stages, j, st)}

    defp level({:node, j, _}), do: j
    defp level({:ext, j, _}), do: j
    defp level({:free, _, _}), do: 0

    # The value as a node index of stage j (importing or emitting it there as needed).
    defp localize({:node, j, i}, j, state), do: {i, state}

    defp localize({:node, k, i}, j, state) when k < j do
      {ref, state} = export({:node, k, i}, state)
      localize({:ext, k, ref}, j, state)
    end

    defp localize({:ext, _, ref}, j, state) do
      st = stage(state, j)

      case st.in_index do
        %{^ref => i} ->
          {i, state}

        %{} ->
          {type, shape} = template(state, ref)
          n_in = length(st.inputs)
          node = {:parameter, [], shape, type, n_in}

          st = %{
            st
            | nodes: [node | st.nodes],
              count: st.count + 1,
              inputs: [ref | st.inputs],
              params: [{type, shape} | st.params],
              in_index: Map.put(st.in_index, ref, st.count)
          }

          {st.count - 1, put_stage(state, j, st)}
      end
    end

    defp localize({:free, key, node}, j, state) do
      st = stage(state, j)

      case st.free do
        %{^key => i} ->
          {i, state}

        %{} ->
          st = %{st | nodes: [node | st.nodes], count: st.count + 1, free: Map.put(st.free, key, st.count)}
          {st.count - 1, put_stage(state, j, st)}
      end
    end

    # The value as a ref outside plans (a stage output where it is a node).
    defp export({:ext, _, ref}, state), do: {ref, state}

    defp export({:free, _, _} = v, state) do
      {i, state} = localize(v, 0, state)
      export({:node, 0, i}, state)
    end

    defp export({:node, j, i}, state) do
      st = stage(state, j)

      case st.out_index do
        %{^i => p} ->
          {{:stage, j, p}, state}

        %{} ->
          st = %{st | outputs: [i | st.outputs], n_out: st.n_out + 1, out_index: Map.put(st.out_index, i, st.n_out)}
          {{:stage, j, st.n_out - 1}, put_stage(state, j, st)}
      end
    end

    defp template(state, {:param, i}), do: elem(state.params, i)
    defp template(state, {:captured, k}), do: state.captured |> Enum.reverse() |> Enum.at(k) |> then(&{&1.type, &1.shape})
    defp template(state, {:while, w, i}), do: state.whiles |> Enum.reverse() |> Enum.at(w) |> Map.fetch!(:templates) |> Enum.at(i)

    defp template(state, {:stage, j, p}) do
      st = stage(state, j)
      i = st.outputs |> Enum.reverse() |> Enum.at(p)
      {_, _, shape, type, _} = st.nodes |> Enum.reverse() |> Enum.at(i)
      {type, shape}
    end

    # Constants are keyed by their bits, not their id: Nx gives 0.0 and -0.0 one id on OTP
    # releases where they compare equal, and the evaluator reads each node's own number.
    defp visit(%T{data: %Expr{op: :constant, args: [number]}} = t, _scope, state) do
      check_type!(t.type)
      bits = constant_bits(number, t.type)
      key = {:constant, t.type, t.shape, bits}
      {{:free, key, {:constant, [], t.shape, t.type, bits}}, state}
    end

    defp visit(%T{data: %Expr{id: id}} = t, scope, state) do
      case state.index do
        %{^id => v} ->
          {v, state}

        %{} ->
          {v, state} = lower_node(t, scope, state)
          {v, %{state | index: Map.put(state.index, id, v)}}
      end
    end

    defp visit(other, _scope, _state), do: throw({:unsupported, inspect(other)})

    defp emit(state, op, args, %T{shape: shape, type: type}, attr) do
      check_type!(type)

      if args == [] do
        {{:free, {op, shape, type, attr}, {op, [], shape, type, attr}}, state}
      else
        j = args |> Enum.map(&level/1) |> Enum.max()
        {locals, state} = Enum.map_reduce(args, state, &localize(&1, j, &2))
        st = stage(state, j)
        st = %{st | nodes: [{op, locals, shape, type, attr} | st.nodes], count: st.count + 1}
        {{:node, j, st.count - 1}, put_stage(state, j, st)}
      end
    end

    # The types plans hold; complex, 8-bit floats and sub-byte integers go to the evaluator.
    defp check_type!({f, bits}) when f in [:f, :bf] and bits in [16, 32, 64], do: :ok
    defp check_type!({k, bits}) when k in [:s, :u] and bits in [8, 16, 32, 64], do: :ok
    defp check_type!(type), do: throw({:unsupported, :"type #{inspect(type)}"})

    # Answers that changed between Nx releases follow the installed Nx, as NxVulkan.Backend
    # does (NxVulkan.NxCompat): since 0.8 argmax/argmin return a NaN's index (the last one)
    # and ±Inf converts to s16's true limits.
    defp nx_at_least?(vsn), do: NxVulkan.NxCompat.at_least?(NxVulkan.Backend.nx_version(), vsn)

    defp float_type?({f, _}), do: f in [:f, :bf]

    # A scalar constant of `type` as a value (as visiting a :constant node gives).
    defp const_value(number, type) do
      bits = constant_bits(number, type)
      {:free, {:constant, type, {}, bits}, {:constant, [], {}, type, bits}}
    end

    defp visit_args(args, scope, state), do: Enum.map_reduce(args, state, &visit(&1, scope, &2))

    defp lower_node(%T{data: %Expr{op: op, args: args}} = t, scope, state) do
      case {op, args} do
        {:parameter, [i]} ->
          case scope do
            %{^i => value} -> {value, state}
            %{} -> {{:ext, 0, {:param, i}}, state}
          end

        {:tensor, [tensor]} ->
          check_type!(tensor.type)
          k = length(state.captured)
          {{:ext, 0, {:captured, k}}, %{state | captured: [tensor | state.captured]}}

        {:metadata, [expr, _meta]} ->
          visit(expr, scope, state)

        {:optional, [call, default, _fun]} ->
          lower_optional(t, call, default, scope, state)

        {:elem, [%T{data: %Expr{op: :while}} = w, i]} ->
          {results, state} = lower_while(w, scope, state)
          {Enum.at(results, i), state}

        {:elem, [%T{data: %Expr{op: :block}} = b, i]} ->
          lower_block(b, i, scope, state)

        {:block, _} ->
          lower_block(t, nil, scope, state)

        {:elem, [%T{data: %Expr{op: :cond}} = c, i]} ->
          lower_cond(c, i, t, scope, state)

        {:while, _} ->
          {[result], state} = lower_while(t, scope, state)
          {result, state}

        {:cond, _} ->
          lower_cond(t, nil, t, scope, state)

        {op, [x]} when op in @unary_ops ->
          {[x], state} = visit_args([x], scope, state)
          emit(state, op, [x], t, nil)

        {:negate, [x]} ->
          # the eager backend converts to the result type first
          {x, state} = converted(x, t.type, scope, state)
          emit(state, :negate, [x], t, nil)

        {op, [a, b]} when op in @binary_ops ->
          {args, state} = visit_args([a, b], scope, state)
          emit(state, op, args, t, nil)

        {:select, args} ->
          {args, state} = visit_args(args, scope, state)
          emit(state, :select, args, t, nil)

        {:clip, args} ->
          {args, state} = visit_args(args, scope, state)
          emit(state, :clip, args, t, nil)

        {:as_type, [%T{type: from} = x]} ->
          {[xi], state} = visit_args([x], scope, state)
          {converted, state} = emit(state, :as_type, [xi], t, nil)

          if t.type == {:s, 16} and float_type?(from) and nx_at_least?("0.8.0") do
            # ±Inf -> 32767/-32768 (the engine's conversion gives 0.7's 32677/-32678)
            u8 = %{t | type: {:u, 8}}
            {inf, state} = emit(state, :is_infinity, [xi], %{u8 | shape: x.shape}, nil)
            zero = const_value(0, from)
            {pos, state} = emit(state, :greater, [xi, zero], %{u8 | shape: x.shape}, nil)
            {hi, lo} = {const_value(32767, {:s, 16}), const_value(-32768, {:s, 16})}
            {limit, state} = emit(state, :select, [pos, hi, lo], t, nil)
            emit(state, :select, [inf, limit, converted], t, nil)
          else
            {converted, state}
          end

        {:bitcast, [x]} ->
          {[x], state} = visit_args([x], scope, state)
          emit(state, :bitcast, [x], t, nil)

        {:iota, [axis]} ->
          emit(state, :iota, [], t, axis)

        {:eye, _} ->
          # as NxVulkan.Backend.eye/2: rows == cols, as a u8 mask converted to the type
          r = tuple_size(t.shape)
          s64 = %{t | type: {:s, 64}}
          {rows, state} = emit(state, :iota, [], s64, r - 2)
          {cols, state} = emit(state, :iota, [], s64, r - 1)
          {mask, state} = emit(state, :equal, [rows, cols], %{t | type: {:u, 8}}, nil)
          emit(state, :as_type, [mask], t, nil)

        {op, [x | _]} when op in [:reshape, :squeeze] ->
          {[x], state} = visit_args([x], scope, state)
          emit(state, :reshape, [x], t, nil)

        {:broadcast, [x, _shape, axes]} ->
          {[x], state} = visit_args([x], scope, state)
          emit(state, :broadcast, [x], t, axes)

        {:transpose, [x, axes]} ->
          {[x], state} = visit_args([x], scope, state)
          emit(state, :transpose, [x], t, axes)

        {:reverse, [x, axes]} ->
          {[x], state} = visit_args([x], scope, state)
          emit(state, :reverse, [x], t, axes)

        {:slice, [x, start, _lengths, strides]} ->
          unless Enum.all?(start, &is_integer/1), do: throw({:unsupported, :slice_with_tensor_start})
          {[xi], state} = visit_args([x], scope, state)
          # clamped as Nx.BinaryBackend clamps them (the window must fit)
          start =
            [start, Tuple.to_list(x.shape), Tuple.to_list(t.shape), strides]
            |> Enum.zip_with(fn [s, dim, count, stride] ->
              len = if count == 0, do: 0, else: (count - 1) * stride + 1
              s |> max(0) |> min(dim - len)
            end)

          emit(state, :slice, [xi], t, {start, strides})

        {:pad, [x, value, config]} ->
          {args, state} = visit_args([x, value], scope, state)
          emit(state, :pad, args, t, config)

        {:concatenate, [list, axis]} ->
          {args, state} = visit_args(list, scope, state)
          emit(state, :concatenate, args, t, axis)

        {op, [x, opts]} when op in @reductions ->
          {[xi], state} = visit_args([x], scope, state)
          axes = opts[:axes] || Enum.to_list(0..(tuple_size(x.shape) - 1)//1)
          emit(state, op, [xi], t, axes)

        {op, [x, opts]} when op in [:argmax, :argmin] ->
          {[xi], state} = visit_args([x], scope, state)
          {ordered, state} = emit(state, op, [xi], t, {opts[:axis], opts[:tie_break] == :high})

          if float_type?(x.type) and nx_at_least?("0.8.0") do
            # where the axis holds a NaN, the index of its last NaN
            nan_t = %{x | type: {:u, 8}}
            {nan, state} = emit(state, :is_nan, [xi], nan_t, nil)
            {at_nan, state} = emit(state, :argmax, [nan], t, {opts[:axis], true})
            axes = if opts[:axis], do: [opts[:axis]], else: Enum.to_list(0..(tuple_size(x.shape) - 1)//1)
            {any, state} = emit(state, :any, [nan], %{t | type: {:u, 8}}, axes)
            emit(state, :select, [any, at_nan, ordered], t, nil)
          else
            {ordered, state}
          end

        {:sort, [%T{shape: {}} = x, _opts]} ->
          # as NxVulkan.Backend: a scalar sorts to itself
          visit(x, scope, state)

        {:sort, [x, opts]} ->
          {[xi], state} = visit_args([x], scope, state)
          emit(state, :sort, [xi], t, {opts[:axis], Atom.to_string(opts[:direction] || :asc)})

        {:argsort, [%T{shape: {}}, _opts]} ->
          {const_value(0, t.type), state}

        {:argsort, [x, opts]} ->
          {[xi], state} = visit_args([x], scope, state)
          emit(state, :argsort, [xi], t, {opts[:axis], Atom.to_string(opts[:direction] || :asc)})

        {:dot, [a, ca, ba, b, cb, bb]} ->
          {[ai, bi], state} = visit_args([a, b], scope, state)
          emit(state, :dot, [ai, bi], t, {ca, ba, cb, bb})

        {:elem, [%T{data: %Expr{op: tuple_op}}, _]} ->
          # name what made the tuple (an optional with several results, ...)
          throw({:unsupported, tuple_op})

        {op, _} ->
          throw({:unsupported, op})
      end
    end

    # A while loop: its initial values are exported from their stages, its condition and body
    # lowered as programs of their own over the loop state; its results are values one level
    # above the highest initial value. Lowered once per loop (keyed by the loop's id).
    defp lower_while(%T{data: %Expr{id: id, args: [initial, arg, condition, body]}}, scope, state) do
      key = {:while, id}

      case state.index do
        %{^key => results} ->
          {results, state}

        %{} ->
          init_leaves = Composite.flatten_list([initial])
          {values, state} = Enum.map_reduce(init_leaves, state, &visit(&1, scope, &2))
          level = (values |> Enum.map(&level/1) |> Enum.max(fn -> 0 end)) + 1
          {refs, state} = Enum.map_reduce(values, state, &export/2)
          templates = arg |> then(&Composite.flatten_list([&1])) |> Enum.map(&{&1.type, &1.shape})
          cond_prog = lower_program(condition, templates)
          body_prog = lower_program(body, templates)
          w = length(state.whiles)

          loop = %{
            level: level,
            initial: refs,
            templates: templates,
            cond: cond_prog,
            body: body_prog,
            pred_type: condition.type
          }

          results = for i <- 0..(length(templates) - 1)//1, do: {:ext, level, {:while, w, i}}
          state = %{state | whiles: [loop | state.whiles], index: Map.put(state.index, key, results)}
          {results, state}
      end
    end

    # cond as select: every branch is computed and the first clause whose predicate holds is
    # picked, output by output — the chosen branch's values, without a read-back. (Branches are
    # pure; a loop inside an untaken branch would still run.)
    defp lower_cond(%T{data: %Expr{args: [clauses, last]}}, i, out, scope, state) do
      pick = fn branch -> if i == nil, do: branch, else: branch |> then(&Composite.flatten_list([&1])) |> Enum.at(i) end
      {last_v, state} = visit(pick.(last), scope, state)

      clauses
      |> Enum.reverse()
      |> Enum.reduce({last_v, state}, fn {pred, branch}, {acc, state} ->
        {p, state} = visit(pred, scope, state)
        {b, state} = visit(pick.(branch), scope, state)
        emit(state, :select, [p, b, acc], out, nil)
      end)
    end

    # An optional node: where NxVulkan.Backend has its own callback, the eager bits are that
    # callback's — planned for the cumulative ops (the same scan kernel), else the function
    # goes to the evaluator for now; without one, the default expression is inlined with its
    # parameters bound to the call's arguments.
    defp lower_optional(_t, %T{data: %Expr{op: name, args: call_args}}, default, scope, state) do
      {tensors, _opts} = Enum.split_while(call_args, &(not is_list(&1)))

      cond do
        name in @cumulative and function_exported?(NxVulkan.Backend, name, 3) ->
          [x, opts] = call_args
          lower_cumulative(name, x, opts[:axis] || 0, opts[:reverse] || false, scope, state)

        function_exported?(NxVulkan.Backend, name, length(call_args) + 1) ->
          throw({:unsupported, name})

        match?(%T{}, default) ->
          inline_default(default, tensors, scope, state)

        true ->
          throw({:unsupported, name})
      end
    end

    # Nx ≥ 0.10's block node (what optional became): NxVulkan.Backend.block/4 runs the
    # cumulative ops on its scan kernel, a few others (top_k, take, take_along_axis, lu) on
    # kernels of their own — so the evaluator takes those for now — and everything else
    # through the block's default defn, which is inlined here the same way.
    @native_blocks [:top_k, :take, :take_along_axis, :lu]

    defp lower_block(%T{data: %Expr{args: [struct, in_args, default, _fun]}}, i, scope, state) do
      name = struct.__struct__ |> Module.split() |> List.last() |> Macro.underscore() |> String.to_atom()
      {tensors, _opts} = Enum.split_while(in_args, &(not is_list(&1)))

      cond do
        name in @cumulative ->
          [x] = tensors
          lower_cumulative(name, x, struct.axis, struct.reverse, scope, state)

        name in @native_blocks ->
          throw({:unsupported, name})

        true ->
          leaf = if i == nil, do: default, else: default |> then(&Composite.flatten_list([&1])) |> Enum.at(i)
          inline_default(leaf, tensors, scope, state)
      end
    end

    # A cumulative op on NxVulkan.Backend's scan kernel (Nx's operand order), as the eager
    # call runs it.
    defp lower_cumulative(name, x, axis, reverse, scope, state) do
      {[xi], state} = visit_args([x], scope, state)
      emit(state, name, [xi], x, {axis, reverse})
    end

    # An optional's or block's default expression, its parameters bound to the call's tensor
    # arguments. Its nodes are its own: they are visited without the outer index.
    defp inline_default(default, tensors, scope, state) do
      {values, state} = visit_args(tensors, scope, state)
      inner = values |> Enum.with_index(fn v, k -> {k, v} end) |> Map.new()
      {v, inner_state} = visit(default, inner, %{state | index: %{}})
      {v, %{inner_state | index: state.index}}
    end

    defp converted(%T{type: type} = x, type, scope, state), do: visit(x, scope, state)

    defp converted(x, type, scope, state) do
      {xi, state} = visit(x, scope, state)
      emit(state, :as_type, [xi], %{x | type: type}, nil)
    end

    # One element of the node's type, as Nx.BinaryBackend stores it (the engine decodes it).
    defp constant_bits(number, type) do
      check_type!(type)

      %T{type: type, shape: {}, names: []}
      |> Nx.BinaryBackend.constant(number, [])
      |> Nx.BinaryBackend.to_binary(1)
    end

    ## Counters and telemetry

    defp counters do
      case :persistent_term.get(@stats_key, nil) do
        nil ->
          c = :counters.new(length(@stat_slots), [:write_concurrency])

          :global.trans({@stats_key, self()}, fn ->
            case :persistent_term.get(@stats_key, nil) do
              nil -> :persistent_term.put(@stats_key, c)
              _ -> :ok
            end
          end)

          :persistent_term.get(@stats_key)

        c ->
          c
      end
    end

    defp bump(name), do: :counters.add(counters(), @stat_slots[name], 1)

    defp telemetry(event, measurements, metadata) do
      if Code.ensure_loaded?(:telemetry) do
        apply(:telemetry, :execute, [[:nx_vulkan, :compiler, event], measurements, metadata])
      end
    end

  end
end
