if Code.ensure_loaded?(Nx) do
  defmodule NxVulkan.Compiler do
    @moduledoc """
    A `Nx.Defn.Compiler` that compiles `defn` functions into fused device plans.

        Nx.Defn.jit(&MyModule.softmax/1, compiler: NxVulkan.Compiler).(x)
        Nx.Defn.default_options(compiler: NxVulkan.Compiler)

    The compiler does the least it can in Elixir: it lowers the `Nx.Defn.Expr` graph to a
    flat IR — `{op, args, shape, type, attr}` nodes in topological order, shared
    subexpressions once — and hands it to the engine (`NxVulkan.plan_compile/4`), which
    schedules it (elementwise regions fused into generated kernels, reductions and dots as
    stage boundaries) once per function, input shapes and types, and options. A call binds
    the new inputs and records the whole plan as one submission to the device's stream.

    ## Options

      * `:precision` — `:exact` (default): the bits `NxVulkan.Backend` gives eagerly (which are
        `Nx.BinaryBackend`'s); `:fast`: dots accumulate in f32 (SGEMM).

    ## What is compiled, what is not

    Compiled: parameters, constants, tensors captured by the function, elementwise ops
    (unary, binary, `select`, `clip`, `as_type`, `bitcast`, `iota`, `eye`), views (`reshape`,
    `squeeze`, `broadcast`, `transpose`, `slice` with constant starts, `reverse`), reductions
    (`sum`, `product`, `reduce_max`, `reduce_min`, `all`, `any`, `argmax`, `argmin`), `dot`,
    `concatenate`, `pad`, `metadata` (`stop_grad` and friends) and `optional` nodes whose
    backend callback `NxVulkan.Backend` does not define (their default expression is
    inlined). A function with anything else (`while`, `cond`, hooks and tokens, complex
    numbers, other ops) runs through `Nx.Defn.Evaluator` over `NxVulkan.Backend` — on the
    device, op by op, still correct — and that is counted as a fallback named
    `:"defn:<op>"` (`NxVulkan.fallbacks/0`) and forbidden in strict mode
    (`NxVulkan.strict/1`).

    `stats/0` counts plan cache hits and misses and evaluator runs.
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

    @cache_key {__MODULE__, :cache}
    @stats_key {__MODULE__, :stats}
    @stat_slots [plan_hit: 1, plan_miss: 2, evaluator: 3]

    ## Nx.Defn.Compiler

    @impl true
    def __partitions_options__(opts), do: [opts]

    @impl true
    def __to_backend__(opts), do: {NxVulkan.Backend, Keyword.take(opts, [:device])}

    # Streams run through the evaluator over NxVulkan.Backend (counted like any fallback).
    @impl true
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
    The plan summary for a function and arguments (as `Nx.Defn.jit/2` would compile them):
    `{:plan, %{nodes:, fused_kernels:, inlined_nodes:, family_steps:, fused_prologues:,
    fused_epilogues:}}` (generated elementwise kernels; elementwise nodes computed inside
    others; reductions, dots and views; reductions reading an inlined expression; elementwise
    nodes written by the reduction kernel they read), or
    `{:evaluator, op}` naming the first op that keeps it from being planned.
    """
    def describe(fun, args, opts \\ []) when is_function(fun) and is_list(args) do
      expr = apply(Nx.Defn.debug_expr(fun), args)
      params = args |> Composite.flatten_list() |> Enum.map(&Nx.to_tensor/1) |> Enum.map(&{&1.type, &1.shape})

      try do
        {nodes, outputs, captured} = lower(expr, length(params))
        dot = if opts[:precision] == :fast, do: "f32", else: "exact"
        captured = Enum.map(captured, &{&1.type, &1.shape})
        {_plan, summary} = NxVulkan.plan_compile(params ++ captured, nodes, outputs, dot)
        __plan_info__({:plan, nil, [], expr, summary})
      catch
        {:unsupported, op} -> {:evaluator, op}
      end
    end

    @doc """
    The IR a function and arguments lower to, for tests and golden files:
    `{:ok, %{params: [{type, shape}], nodes: [...], outputs: [...], captured: [tensor]}}`
    (captured tensors are parameters after the function's own), or `{:unsupported, op}`.
    """
    def lower_ir(fun, args) when is_function(fun) and is_list(args) do
      expr = apply(Nx.Defn.debug_expr(fun), args)
      params = args |> Composite.flatten_list() |> Enum.map(&Nx.to_tensor/1) |> Enum.map(&{&1.type, &1.shape})

      try do
        {nodes, outputs, captured} = lower(expr, length(params))
        {:ok, %{params: params, nodes: nodes, outputs: outputs, captured: captured}}
      catch
        {:unsupported, op} -> {:unsupported, op}
      end
    end

    ## Compilation and its cache

    defp compiled(key, vars, fun, opts) do
      precision = Keyword.get(opts, :precision, :exact)

      unless precision in [:exact, :fast] do
        raise ArgumentError, "NxVulkan.Compiler :precision must be :exact or :fast, got #{inspect(precision)}"
      end

      templates = vars |> Composite.flatten_list() |> Enum.map(&{&1.type, &1.shape, &1.names})
      cache_key = {key, templates, precision}

      case :persistent_term.get({@cache_key, cache_key}, nil) do
        nil ->
          bump(:plan_miss)
          {time, compiled} = :timer.tc(fn -> build(key, vars, fun, opts, precision) end)
          telemetry(:compile, %{duration_us: time}, %{kind: elem(compiled, 0)})
          :persistent_term.put({@cache_key, cache_key}, compiled)
          compiled

        compiled ->
          bump(:plan_hit)
          compiled
      end
    end

    defp build(key, vars, fun, opts, precision) do
      expr = fun.(vars)
      params = vars |> Composite.flatten_list() |> Enum.map(&{&1.type, &1.shape})

      try do
        {nodes, outputs, captured} = lower(expr, length(params))
        captured_params = Enum.map(captured, &{&1.type, &1.shape})
        dot = if precision == :fast, do: "f32", else: "exact"
        {plan, summary} = NxVulkan.plan_compile(params ++ captured_params, nodes, outputs, dot)
        {:plan, plan, Enum.map(captured, &device_ref/1), expr, summary}
      catch
        {:unsupported, op} ->
          evaluator = Nx.Defn.Evaluator.__compile__(key, vars, fun, Keyword.drop(opts, [:precision]))
          {:evaluator, op, evaluator}
      end
    end

    defp run({:plan, plan, captured, expr, _summary}, params) do
      handles = Enum.map(params, &(&1 |> param() |> device_ref()))
      outputs = NxVulkan.plan_run(plan, handles ++ captured)

      {result, []} =
        Composite.traverse(expr, outputs, fn %T{} = t, [h | rest] ->
          {%T{t | data: %NxVulkan.Backend{ref: h}}, rest}
        end)

      result
    end

    defp run({:evaluator, op, evaluator}, params) do
      NxVulkan.Fallback.record!(:"defn:#{op}")
      bump(:evaluator)
      [result] = evaluator.([params])
      result
    end

    defp param(fun) when is_function(fun, 0), do: fun.()
    defp param(%T{} = t), do: t

    defp device_ref(%T{data: %NxVulkan.Backend{ref: ref}}), do: ref
    defp device_ref(%T{} = t), do: device_ref(Nx.backend_copy(t, NxVulkan.Backend))

    ## Lowering: Nx.Defn.Expr -> flat IR

    # State: nodes (reversed), index (expr id -> node), count, captured tensors (reversed),
    # params (number of function parameters; captured tensors follow them).
    defp lower(expr, n_params) do
      leaves = Composite.flatten_list([expr])
      state = %{nodes: [], index: %{}, count: 0, captured: [], n_params: n_params}
      {outputs, state} = Enum.map_reduce(leaves, state, &visit(&1, %{}, &2))
      {Enum.reverse(state.nodes), outputs, Enum.reverse(state.captured)}
    end

    # Constants are keyed by their bits, not their id: Nx gives 0.0 and -0.0 one id on OTP
    # releases where they compare equal, and the evaluator reads each node's own number.
    defp visit(%T{data: %Expr{op: :constant, args: [number]}} = t, _scope, state) do
      bits = constant_bits(number, t.type)
      key = {:constant, t.type, t.shape, bits}

      case state.index do
        %{^key => i} ->
          {i, state}

        %{} ->
          {i, state} = emit(state, :constant, [], t, bits)
          {i, %{state | index: Map.put(state.index, key, i)}}
      end
    end

    defp visit(%T{data: %Expr{id: id}} = t, scope, state) do
      case state.index do
        %{^id => i} ->
          {i, state}

        %{} ->
          {i, state} = lower_node(t, scope, state)
          {i, %{state | index: Map.put(state.index, id, i)}}
      end
    end

    defp visit(other, _scope, _state), do: throw({:unsupported, inspect(other)})

    defp emit(state, op, args, %T{shape: shape, type: type}, attr) do
      check_type!(type)
      node = {op, args, shape, type, attr}
      {state.count, %{state | nodes: [node | state.nodes], count: state.count + 1}}
    end

    defp check_type!({:c, _} = type), do: throw({:unsupported, :"complex #{inspect(type)}"})
    defp check_type!({:f, 8}), do: throw({:unsupported, :f8})
    defp check_type!(_), do: :ok

    defp visit_args(args, scope, state), do: Enum.map_reduce(args, state, &visit(&1, scope, &2))

    defp lower_node(%T{data: %Expr{op: op, args: args}} = t, scope, state) do
      case {op, args} do
        {:parameter, [i]} ->
          case scope do
            %{^i => node} -> {node, state}
            %{} -> emit(state, :parameter, [], t, i)
          end

        {:tensor, [tensor]} ->
          check_type!(tensor.type)
          k = state.n_params + length(state.captured)
          state = %{state | captured: [tensor | state.captured]}
          emit(state, :parameter, [], t, k)

        {:metadata, [expr, _meta]} ->
          visit(expr, scope, state)

        {:optional, [call, default, _fun]} ->
          lower_optional(t, call, default, scope, state)

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

        {:as_type, [x]} ->
          {[x], state} = visit_args([x], scope, state)
          emit(state, :as_type, [x], t, nil)

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
          emit(state, op, [xi], t, {opts[:axis], opts[:tie_break] == :high})

        {:dot, [a, ca, ba, b, cb, bb]} ->
          {[ai, bi], state} = visit_args([a, b], scope, state)
          emit(state, :dot, [ai, bi], t, {ca, ba, cb, bb})

        {:elem, [%T{data: %Expr{op: tuple_op}}, _]} ->
          # name what made the tuple (while, cond, an optional with several results)
          throw({:unsupported, tuple_op})

        {op, _} ->
          throw({:unsupported, op})
      end
    end

    # An optional node: NxVulkan.Backend's own callback if it has one (its bits are what the
    # eager backend gives, so the function goes to the evaluator for now), else the default
    # expression inlined with its parameters bound to the call's arguments.
    defp lower_optional(_t, %T{data: %Expr{op: name, args: call_args}}, default, scope, state) do
      {tensors, _opts} = Enum.split_while(call_args, &(not is_list(&1)))

      if function_exported?(NxVulkan.Backend, name, length(call_args) + 1) do
        throw({:unsupported, name})
      end

      case default do
        %T{} ->
          {nodes, state} = visit_args(tensors, scope, state)
          inner = nodes |> Enum.with_index(fn node, i -> {i, node} end) |> Map.new()
          visit(default, inner, state)

        _ ->
          throw({:unsupported, name})
      end
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

    @doc false
    def __plan_info__({:plan, _plan, _captured, _expr, {nodes, fused, inlined, family, pro, epi}}) do
      {:plan,
       %{
         nodes: nodes,
         fused_kernels: fused,
         inlined_nodes: inlined,
         family_steps: family,
         fused_prologues: pro,
         fused_epilogues: epi
       }}
    end

    def __plan_info__({:evaluator, op, _}), do: {:evaluator, op}

  end
end
