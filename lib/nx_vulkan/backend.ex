if Code.ensure_loaded?(Nx) do
  defmodule NxVulkan.Backend do
    @moduledoc """
    An `Nx.Backend` on the Vulkan engine.

        Nx.default_backend(NxVulkan.Backend)
        t = Nx.tensor([1.0, 2.0, 3.0])          # on the device
        Nx.exp(t) |> Nx.sum()                    # computed on the device
        Nx.backend_transfer(t, Nx.BinaryBackend) # back to the host

    The backend is an op table over the tensor-handle API in `NxVulkan`: each callback maps
    its arguments to one or a few engine calls (elementwise, views, reductions, dot). The
    tensor's data is `%NxVulkan.Backend{ref: handle}`.

    Ops the engine cannot run yet take the **host fallback**, one path for all of them
    (`host/3`): the tensors are transferred to `Nx.BinaryBackend`, the op runs there and the
    result is transferred back. Every fallback is counted (`NxVulkan.fallbacks/0`), emits the
    telemetry event `[:nx_vulkan, :fallback]`, and raises `NxVulkan.FallbackError` in strict
    mode — see `NxVulkan.Fallback`. What falls back today: see `@host_ops` below and the
    complex-number notes.

    Complex tensors (c64, c128) live on the device as pairs of reals (an extra trailing
    axis of 2 of f32/f64), so views, concatenation, `add`, `subtract`, `negate`,
    `conjugate`, `real`, `imag`, `sum` and conversions from real types run on the device;
    other complex math falls back.

    Tensors from `Nx.BinaryBackend` given to an op are uploaded on the fly (Nx hands mixed
    operands to the non-binary backend); tensors of any other backend raise.

    `inspect` prints what `Nx.BinaryBackend` prints; `config :nx_vulkan, inspect_device: true`
    adds a line naming the device.
    """

    @behaviour Nx.Backend
    defstruct [:ref]

    alias Nx.Tensor, as: T
    alias __MODULE__, as: B

    @nx_callbacks Nx.Backend.behaviour_info(:callbacks)

    ## Creation

    @impl true
    def init(opts), do: opts

    @impl true
    def constant(%T{type: type, shape: shape} = out, number, _opts) do
      scalar = Nx.BinaryBackend.constant(%T{type: type, shape: {}, names: []}, number, [])
      ref = NxVulkan.upload(host_bytes(scalar), dtype(type), dshape(type, {}))
      put(out, broadcast_ref(ref, type, {}, shape, []))
    end

    @impl true
    def from_binary(%T{type: type, shape: shape} = out, binary, _opts) do
      put(out, NxVulkan.upload(IO.iodata_to_binary(binary), dtype(type), dshape(type, shape)))
    end

    @impl true
    def iota(%T{type: type, shape: shape} = out, axis, _opts) do
      if complex?(type) do
        real = %{out | type: real_type(type)}
        as_type(out, put(real, NxVulkan.iota(real_type(type), shape, axis)))
      else
        put(out, NxVulkan.iota(type, shape, axis))
      end
    end

    @impl true
    def eye(%T{type: type, shape: shape} = out, _opts) do
      r = tuple_size(shape)
      rows = NxVulkan.iota({:s, 64}, shape, r - 2)
      cols = NxVulkan.iota({:s, 64}, shape, r - 1)
      mask = NxVulkan.binary(:equal, rows, cols, {:u, 8})
      as_type(%{out | type: type}, put(%{out | type: {:u, 8}}, mask))
    end

    ## Transfer

    @impl true
    def backend_copy(%T{} = t, B, _opts),
      do: put(t, NxVulkan.upload(to_binary(t, Nx.size(t)), dtype(t.type), dshape(t)))

    def backend_copy(%T{} = t, backend, opts),
      do: backend.from_binary(t, to_binary(t, Nx.size(t)), opts)

    @impl true
    def backend_transfer(%T{} = t, B, _opts), do: t

    def backend_transfer(%T{} = t, backend, opts) do
      result = backend_copy(t, backend, opts)
      backend_deallocate(t)
      result
    end

    @impl true
    def backend_deallocate(%T{data: %B{ref: ref}}), do: NxVulkan.deallocate(ref)

    @impl true
    def to_binary(%T{type: {_, bits}} = t, limit) do
      bin = NxVulkan.download(ref!(t))
      bytes = limit * div(bits, 8)
      if byte_size(bin) == bytes, do: bin, else: binary_part(bin, 0, bytes)
    end

    @impl true
    def inspect(%T{} = t, opts) do
      limit = if opts.limit == :infinity, do: Nx.size(t), else: min(opts.limit + 1, Nx.size(t))
      doc = Nx.Backend.inspect(t, to_binary(t, limit), opts)

      if Application.get_env(:nx_vulkan, :inspect_device, false) do
        name = NxVulkan.device_info().name

        Inspect.Algebra.concat([
          Inspect.Algebra.string("NxVulkan.Backend<#{name}>"),
          Inspect.Algebra.line(),
          doc
        ])
      else
        doc
      end
    end

    # Batches are slices along axis 0; with `leftover: :repeat` the last one wraps around.
    @impl true
    def to_batched(%T{shape: out_shape} = out, %T{shape: shape} = t, opts) do
      batch = elem(out_shape, 0)
      n = elem(shape, 0)
      full = div(n, batch)
      last = if rem(n, batch) != 0 and opts[:leftover] == :repeat, do: full, else: full - 1
      ref = ref!(t)

      Stream.map(0..last, fn
        ^full ->
          tail = slice_rows(ref, t, full * batch, n - full * batch)
          head = slice_rows(ref, t, 0, batch - (n - full * batch))
          put(out, NxVulkan.concatenate([tail, head], 0, dtype(t.type)))

        i ->
          put(out, slice_rows(ref, t, i * batch, batch))
      end)
    end

    defp slice_rows(ref, t, start, len) do
      dims = Tuple.to_list(dshape(t))
      zeros = List.duplicate(0, length(dims) - 1)
      NxVulkan.slice(ref, [start | zeros], [len | tl(dims)], List.duplicate(1, length(dims)))
    end

    if {:to_pointer, 2} in @nx_callbacks, do: @impl(true)

    def to_pointer(_t, _opts),
      do: raise(ArgumentError, "NxVulkan.Backend does not support pointer manipulation")

    if {:from_pointer, 5} in @nx_callbacks, do: @impl(true)

    def from_pointer(_ptr, _type, _shape, _backend_opts, _opts),
      do: raise(ArgumentError, "NxVulkan.Backend does not support pointer manipulation")

    ## Types

    @impl true
    def as_type(%T{type: type} = out, %T{type: type} = t), do: put(out, ref!(t))

    def as_type(%T{type: out_type} = out, %T{type: in_type} = t) do
      cond do
        # real -> complex: convert to the real part's type, append a zero imaginary part
        complex?(out_type) and not complex?(in_type) ->
          rt = real_type(out_type)
          re = NxVulkan.as_type(ref!(t), rt)
          rank = tuple_size(t.shape)
          re = NxVulkan.reshape(re, Tuple.append(t.shape, 1))
          zero = NxVulkan.upload(<<0::size(elem(rt, 1))>>, rt, {})
          config = List.duplicate({0, 0, 0}, rank) ++ [{0, 1, 0}]
          put(out, NxVulkan.pad(re, zero, config))

        complex?(out_type) and complex?(in_type) ->
          put(out, NxVulkan.as_type(ref!(t), real_type(out_type)))

        complex?(in_type) ->
          host(:as_type, out, [t])

        true ->
          put(out, NxVulkan.as_type(ref!(t), out_type))
      end
    end

    @impl true
    def bitcast(%T{type: out_type} = out, %T{type: in_type} = t) do
      if complex?(out_type) or complex?(in_type),
        do: host(:bitcast, out, [t]),
        else: put(out, NxVulkan.bitcast(ref!(t), out_type))
    end

    ## Shape (views where the engine can)

    @impl true
    def reshape(out, t), do: put(out, NxVulkan.reshape(ref!(t), dshape(out)))

    @impl true
    def squeeze(out, t, _axes), do: reshape(out, t)

    @impl true
    def broadcast(out, t, shape, axes) do
      put(out, broadcast_ref(ref!(t), t.type, t.shape, shape, axes))
    end

    @impl true
    def transpose(out, t, axes), do: put(out, NxVulkan.transpose(ref!(t), axes ++ extra_axis(t)))

    @impl true
    def reverse(out, t, axes), do: put(out, NxVulkan.reverse(ref!(t), axes))

    @impl true
    def slice(out, %T{shape: shape} = t, start, lengths, strides) do
      start = clamp_starts(start, shape, lengths)
      counts = Enum.zip_with(lengths, strides, &div(&1 + &2 - 1, &2))

      {start, counts, strides} =
        {start ++ extra(t, 0), counts ++ extra(t, 2), strides ++ extra(t, 1)}

      put(out, NxVulkan.slice(ref!(t), start, counts, strides))
    end

    @impl true
    def put_slice(
          %T{type: type} = out,
          %T{shape: shape} = t,
          start,
          %T{shape: upd_shape} = update
        ) do
      start = clamp_starts(start, shape, Tuple.to_list(upd_shape)) ++ extra(out, 0)
      base = converted(t, type)
      put(out, NxVulkan.put_slice(base, start, converted(update, type)))
    end

    @impl true
    def pad(%T{type: type} = out, t, pad_value, config) do
      if complex?(type) do
        host(:pad, out, [t, pad_value, config])
      else
        put(out, NxVulkan.pad(converted(t, type), converted(pad_value, type), config))
      end
    end

    @impl true
    def concatenate(%T{type: type} = out, tensors, axis) do
      put(out, NxVulkan.concatenate(Enum.map(tensors, &converted(&1, type)), axis, dtype(type)))
    end

    if {:stack, 3} in @nx_callbacks, do: @impl(true)

    def stack(%T{type: type} = out, tensors, axis) do
      refs =
        Enum.map(tensors, fn t ->
          NxVulkan.reshape(converted(t, type), dshape(type, Tuple.insert_at(t.shape, axis, 1)))
        end)

      put(out, NxVulkan.concatenate(refs, axis, dtype(type)))
    end

    ## Elementwise

    unary_ops =
      [:exp, :expm1, :log, :log1p, :sigmoid, :cos, :sin, :tan, :cosh, :sinh, :tanh] ++
        [:acos, :asin, :atan, :acosh, :asinh, :atanh, :sqrt, :rsqrt, :cbrt, :erf, :erfc, :erf_inv] ++
        [:abs, :bitwise_not, :ceil, :floor, :round, :sign, :count_leading_zeros] ++
        [:population_count, :is_nan, :is_infinity]

    for op <- unary_ops do
      @impl true
      def unquote(op)(out, t) do
        if complex?(t.type) or complex?(out.type),
          do: host(unquote(op), out, [t]),
          else: put(out, NxVulkan.unary(unquote(op), ref!(t), out.type))
      end
    end

    @impl true
    def negate(%T{type: type} = out, t) do
      put(out, NxVulkan.unary(:negate, converted(t, type), dtype(type)))
    end

    @impl true
    def conjugate(%T{type: type} = out, t) do
      z = converted(t, type)
      {re, im} = parts(z, out.shape)
      im = NxVulkan.unary(:negate, im, real_type(type))
      put(out, NxVulkan.concatenate([re, im], tuple_size(out.shape), real_type(type)))
    end

    @impl true
    def real(out, %T{type: type} = t) do
      if complex?(type),
        do:
          put(
            out,
            NxVulkan.as_type(elem(parts(ref!(t), t.shape), 0) |> squeeze_last(t.shape), out.type)
          ),
        else: as_type(out, t)
    end

    @impl true
    def imag(out, %T{type: type} = t) do
      if complex?(type) do
        put(
          out,
          NxVulkan.as_type(elem(parts(ref!(t), t.shape), 1) |> squeeze_last(t.shape), out.type)
        )
      else
        constant(out, 0, [])
      end
    end

    # Both parts as [..., 1] views of a complex device tensor of Nx shape `shape`.
    defp parts(ref, shape) do
      dims = Tuple.to_list(shape)
      zeros = List.duplicate(0, length(dims))
      ones = List.duplicate(1, length(dims) + 1)

      {NxVulkan.slice(ref, zeros ++ [0], dims ++ [1], ones),
       NxVulkan.slice(ref, zeros ++ [1], dims ++ [1], ones)}
    end

    defp squeeze_last(ref, shape), do: NxVulkan.reshape(ref, shape)

    binary_ops =
      [:add, :subtract, :multiply, :pow, :remainder, :divide, :atan2, :min, :max, :quotient] ++
        [:bitwise_and, :bitwise_or, :bitwise_xor, :left_shift, :right_shift] ++
        [:equal, :not_equal, :greater, :less, :greater_equal, :less_equal] ++
        [:logical_and, :logical_or, :logical_xor]

    for op <- binary_ops do
      @impl true
      def unquote(op)(out, a, b), do: binary(unquote(op), out, a, b)
    end

    # Complex add/subtract are componentwise once both sides are complex of the output type.
    defp binary(op, %T{type: type} = out, a, b) when op in [:add, :subtract] do
      if complex?(type) do
        put(out, NxVulkan.binary(op, converted(a, type), converted(b, type), real_type(type)))
      else
        put(out, NxVulkan.binary(op, ref!(a), ref!(b), type))
      end
    end

    defp binary(op, out, a, b) do
      if complex?(a.type) or complex?(b.type) or complex?(out.type),
        do: host(op, out, [a, b]),
        else: put(out, NxVulkan.binary(op, ref!(a), ref!(b), out.type))
    end

    @impl true
    def select(%T{type: type} = out, pred, on_true, on_false) do
      if complex?(type) do
        host(:select, out, [pred, on_true, on_false])
      else
        put(out, NxVulkan.select(ref!(pred), ref!(on_true), ref!(on_false), type))
      end
    end

    @impl true
    def clip(%T{type: type} = out, t, lo, hi) do
      if complex?(type),
        do: host(:clip, out, [t, lo, hi]),
        else: put(out, NxVulkan.clip(ref!(t), ref!(lo), ref!(hi), type))
    end

    ## Reductions

    for op <- [:sum, :product, :reduce_max, :reduce_min, :all, :any] do
      @impl true
      def unquote(op)(out, t, opts), do: reduce_op(unquote(op), out, t, opts)
    end

    defp reduce_op(op, %T{type: type} = out, t, opts) do
      axes = opts[:axes] || Enum.to_list(0..(tuple_size(t.shape) - 1)//1)
      keep = opts[:keep_axes] || false

      cond do
        op == :sum and complex?(type) ->
          put(out, NxVulkan.reduce(:sum, converted(t, type), axes, keep, real_type(type)))

        complex?(t.type) or complex?(type) ->
          host(op, out, [t, opts])

        true ->
          put(out, NxVulkan.reduce(op, ref!(t), axes, keep, type))
      end
    end

    for op <- [:argmax, :argmin] do
      @impl true
      def unquote(op)(out, t, opts) do
        if complex?(t.type) do
          host(unquote(op), out, [t, opts])
        else
          ref =
            NxVulkan.arg_reduce(
              unquote(op),
              ref!(t),
              opts[:axis],
              opts[:keep_axis] || false,
              opts[:tie_break] || :low,
              out.type
            )

          put(out, ref)
        end
      end
    end

    @impl true
    def dot(%T{type: type} = out, a, contract_a, batch_a, b, contract_b, batch_b) do
      if complex?(type) do
        host(:dot, out, [a, contract_a, batch_a, b, contract_b, batch_b])
      else
        put(out, NxVulkan.dot(ref!(a), contract_a, batch_a, ref!(b), contract_b, batch_b, type))
      end
    end

    ## Window reductions, composed from views: pad with the identity, then fold one strided
    ## slice per window position. Float sums and products accumulate in f64 and round once,
    ## in the same order as Nx.BinaryBackend, so results match it bit for bit.

    for {op, engine_op} <- [
          window_sum: :add,
          window_product: :multiply,
          window_max: :max,
          window_min: :min
        ] do
      @impl true
      def unquote(op)(out, t, window, opts) do
        if complex?(out.type),
          do: host(unquote(op), out, [t, window, opts]),
          else: window_fold(unquote(engine_op), out, t, window, opts)
      end
    end

    defp window_fold(op, %T{type: type, shape: out_shape} = out, t, window, opts) do
      acc_type = if op in [:add, :multiply] and float?(type), do: {:f, 64}, else: type
      rank = tuple_size(window)
      strides = opts[:strides] || List.duplicate(1, rank)
      dilations = opts[:window_dilations] || List.duplicate(1, rank)
      padding = opts[:padding] || List.duplicate({0, 0}, rank)

      identity = window_identity(op, acc_type)
      x = NxVulkan.as_type(ref!(t), acc_type)
      x = NxVulkan.pad(x, identity, Enum.map(padding, fn {lo, hi} -> {lo, hi, 0} end))
      counts = Tuple.to_list(out_shape)

      offsets =
        window
        |> Tuple.to_list()
        |> Enum.zip(dilations)
        |> Enum.map(fn {w, d} -> Enum.map(0..(w - 1), &(&1 * d)) end)
        |> cartesian()

      acc =
        Enum.reduce(offsets, nil, fn start, acc ->
          view = NxVulkan.slice(x, start, counts, strides)
          if acc, do: NxVulkan.binary(op, acc, view, acc_type), else: view
        end)

      # BinaryBackend folds the identity in first; it only matters for a sum of -0.0s.
      acc = if op == :add, do: NxVulkan.binary(:add, identity, acc, acc_type), else: acc
      put(out, NxVulkan.as_type(acc, type))
    end

    defp cartesian([]), do: [[]]
    defp cartesian([xs | rest]), do: for(x <- xs, tail <- cartesian(rest), do: [x | tail])

    defp window_identity(op, type) do
      bytes =
        case op do
          :add ->
            host_bytes(Nx.BinaryBackend.constant(%T{type: type, shape: {}, names: []}, 0, []))

          :multiply ->
            host_bytes(Nx.BinaryBackend.constant(%T{type: type, shape: {}, names: []}, 1, []))

          :max ->
            Nx.Type.min_binary(type)

          :min ->
            Nx.Type.max_binary(type)
        end

      NxVulkan.upload(bytes, type, {})
    end

    ## Indexing (engine: indexing.rs). Complex tensors are pairs of reals on a trailing axis,
    ## which the indexed axes never touch, so they go through unchanged.

    @impl true
    def gather(out, t, indices, opts) do
      axes =
        opts[:axes] || Enum.to_list(0..(elem(indices.shape, tuple_size(indices.shape) - 1) - 1))

      put(out, NxVulkan.gather(ref!(t), ref!(indices), axes))
    end

    if {:take, 4} in @nx_callbacks, do: @impl(true)
    def take(out, t, indices, axis), do: put(out, NxVulkan.take(ref!(t), ref!(indices), axis))

    if {:take_along_axis, 4} in @nx_callbacks, do: @impl(true)

    def take_along_axis(out, t, indices, axis) do
      idx = ref!(indices)

      idx =
        if complex?(t.type) do
          rank = tuple_size(indices.shape)
          NxVulkan.broadcast(idx, Tuple.append(indices.shape, 2), Enum.to_list(0..(rank - 1)//1))
        else
          idx
        end

      put(out, NxVulkan.take_along_axis(ref!(t), idx, axis))
    end

    for {op, engine_op} <- [indexed_add: :add, indexed_put: :put] do
      @impl true
      def unquote(op)(%T{type: type} = out, target, indices, updates, opts) do
        axes = opts[:axes] || Enum.to_list(0..(elem(indices.shape, 1) - 1))

        ref =
          NxVulkan.indexed(
            unquote(engine_op),
            converted(target, type),
            ref!(indices),
            converted(updates, type),
            axes,
            dtype(type)
          )

        put(out, ref)
      end
    end

    ## Sorting and scans (engine: sort.rs, scan.rs). Nx refuses complex sorts itself.

    @impl true
    def sort(out, %T{shape: {}} = t, _opts), do: put(out, ref!(t))

    def sort(out, t, opts),
      do: put(out, NxVulkan.sort(ref!(t), opts[:axis], opts[:direction] || :asc))

    @impl true
    def argsort(out, %T{shape: {}}, _opts), do: constant(out, 0, [])

    def argsort(out, t, opts) do
      ref =
        NxVulkan.argsort(
          ref!(t),
          opts[:axis],
          opts[:direction] || :asc,
          opts[:stable] || false,
          out.type
        )

      put(out, ref)
    end

    # Optional in Nx 0.7.2 (Nx calls them when exported), blocks at Nx >= 0.12.
    if {:top_k, 3} in @nx_callbacks, do: @impl(true)

    def top_k({%T{} = values, %T{type: index_type} = indices}, t, opts) do
      {v, i} = NxVulkan.top_k(ref!(t), Keyword.fetch!(opts, :k), index_type)
      {put(values, v), put(indices, i)}
    end

    for op <- [:cumulative_sum, :cumulative_product, :cumulative_max, :cumulative_min] do
      if {op, 3} in @nx_callbacks, do: @impl(true)

      def unquote(op)(out, t, opts) do
        axis = opts[:axis] || 0
        reverse = opts[:reverse] || false

        if complex?(t.type) and unquote(op) != :cumulative_sum do
          # Not componentwise on pairs of reals: Nx's own composition, on the host.
          host_apply(unquote(op), fn ->
            Nx.unquote(op)(to_host(t), axis: axis, reverse: reverse)
          end)
        else
          put(out, NxVulkan.cumulative(unquote(op), ref!(t), axis, reverse))
        end
      end
    end

    ## Optional callbacks (Nx 0.7.2) and blocks (Nx >= 0.12)

    # Nx's default implementations are compositions of the ops above, so they run on the
    # device; those listed here would take thousands of tiny dispatches (or need BinaryBackend's
    # own algorithm), so they take the host path.
    @host_optional [:svd, :qr, :eigh, :cholesky, :solve, :determinant]

    if {:optional, 3} in @nx_callbacks, do: @impl(true)

    def optional(name, args, default) when name in @host_optional do
      NxVulkan.Fallback.record!(name)
      on_host(fn -> apply(default, Enum.map(args, &to_host/1)) end)
    end

    def optional(_name, args, default), do: apply(default, args)

    if {:block, 4} in @nx_callbacks, do: @impl(true)

    def block(struct, out, args, fun) do
      name =
        struct.__struct__
        |> Module.split()
        |> List.last()
        |> Macro.underscore()
        |> String.to_atom()

      cond do
        native = native_block(struct, name, out, args) ->
          native

        name in @host_optional ->
          NxVulkan.Fallback.record!(name)

          on_host(fn ->
            apply(Nx.BinaryBackend, :block, [struct, out, Enum.map(args, &to_host/1), fun])
          end)

        true ->
          apply(fun, [struct | args])
      end
    end

    @cumulative_ops [:cumulative_sum, :cumulative_product, :cumulative_max, :cumulative_min]

    # Blocks with a device implementation here (nil: none, use Nx's default or the host).
    defp native_block(struct, name, out, args) do
      case {name, args} do
        {:top_k, [t]} ->
          top_k(out, t, k: struct.k)

        {op, [t]} when op in @cumulative_ops ->
          apply(__MODULE__, op, [out, t, [axis: struct.axis, reverse: struct.reverse]])

        {:take, [t, i]} ->
          take(out, t, i, struct.axis)

        {:take_along_axis, [t, i]} ->
          take_along_axis(out, t, i, struct.axis)

        _ ->
          nil
      end
    end

    ## The host fallback: one path for every op the engine cannot run yet.

    host_ops = [
      reduce: 5,
      window_reduce: 6,
      map: 4,
      conv: 4,
      window_scatter_max: 6,
      window_scatter_min: 6,
      triangular_solve: 4,
      lu: 3,
      eigh: 3,
      fft: 3,
      ifft: 3
    ]

    for {op, arity} <- host_ops do
      [out | args] = Macro.generate_arguments(arity, __MODULE__)
      if {op, arity} in @nx_callbacks, do: @impl(true)

      def unquote(op)(unquote(out), unquote_splicing(args)),
        do: host(unquote(op), unquote(out), unquote(args))
    end

    @doc """
    The host fallback: runs `Nx.BinaryBackend.op(out, args...)` on host copies of every tensor
    in `args` and uploads the result (a tensor or a tuple of tensors). Counted, reported by
    telemetry and refused in strict mode (`NxVulkan.Fallback.record!/1`).
    """
    def host(op, out, args) do
      NxVulkan.Fallback.record!(op)
      on_host(fn -> apply(Nx.BinaryBackend, op, [out | Enum.map(args, &to_host/1)]) end)
    end

    # The same path for an op BinaryBackend has no callback for: `fun` runs Nx on host tensors.
    defp host_apply(op, fun) do
      NxVulkan.Fallback.record!(op)
      on_host(fun)
    end

    # Tensors the host op creates itself (constants, scratch) must stay on the host too, so
    # the process's default backend is BinaryBackend while it runs.
    defp on_host(fun) do
      previous = Nx.default_backend(Nx.BinaryBackend)

      try do
        from_host(fun.())
      after
        Nx.default_backend(previous)
      end
    end

    defp to_host(%T{data: %B{}} = t) do
      Nx.BinaryBackend.from_binary(t, to_binary(t, Nx.size(t)), [])
    end

    defp to_host(%T{} = t), do: t
    defp to_host(list) when is_list(list), do: Enum.map(list, &to_host/1)

    defp to_host(tuple) when is_tuple(tuple),
      do: tuple |> Tuple.to_list() |> Enum.map(&to_host/1) |> List.to_tuple()

    defp to_host(other), do: other

    defp from_host(%T{data: %B{}} = t), do: t
    defp from_host(%T{data: %Nx.BinaryBackend{}} = t), do: from_binary(t, host_bytes(t), [])

    defp from_host(tuple) when is_tuple(tuple),
      do: tuple |> Tuple.to_list() |> Enum.map(&from_host/1) |> List.to_tuple()

    defp host_bytes(%T{data: %Nx.BinaryBackend{state: state}}), do: IO.iodata_to_binary(state)

    ## Helpers

    defp put(%T{} = out, ref), do: %{out | data: %B{ref: ref}}

    # The device handle of a tensor. BinaryBackend tensors are uploaded (Nx gives mixed
    # operands to the non-binary backend); any other backend is an error.
    defp ref!(%T{data: %B{ref: ref}}), do: ref

    defp ref!(%T{data: %Nx.BinaryBackend{}} = t) do
      NxVulkan.upload(host_bytes(t), dtype(t.type), dshape(t))
    end

    defp ref!(%T{data: %other{}}) do
      raise ArgumentError,
            "NxVulkan.Backend got a tensor of #{inspect(other)}; " <>
              "move it first with Nx.backend_transfer(tensor, NxVulkan.Backend)"
    end

    # `t`'s handle converted to `type` (a view of the original when the type already matches).
    defp converted(%T{type: type} = t, type), do: ref!(t)
    defp converted(%T{} = t, type), do: as_type(%{t | type: type}, t) |> ref!()

    defp broadcast_ref(ref, type, in_shape, shape, axes) do
      if complex?(type) do
        NxVulkan.broadcast(ref, Tuple.append(shape, 2), axes ++ [tuple_size(shape)])
      else
        _ = in_shape
        NxVulkan.broadcast(ref, shape, axes)
      end
    end

    defp clamp_starts(start, shape, lengths) do
      [start, Tuple.to_list(shape), lengths]
      |> Enum.zip_with(fn [s, dim, len] ->
        s = if is_integer(s), do: s, else: Nx.to_number(s)
        s |> max(0) |> min(dim - len)
      end)
    end

    defp complex?({:c, _}), do: true
    defp complex?(_), do: false

    defp float?({k, _}), do: k in [:f, :bf]

    defp real_type({:c, 64}), do: {:f, 32}
    defp real_type({:c, 128}), do: {:f, 64}
    defp real_type(type), do: type

    # The device's view of a tensor: complex numbers are a trailing axis of two reals.
    defp dtype(type), do: real_type(type)
    defp dshape(%T{type: type, shape: shape}), do: dshape(type, shape)
    defp dshape({:c, _}, shape), do: Tuple.append(shape, 2)
    defp dshape(_, shape), do: shape

    defp extra(%T{type: {:c, _}}, value), do: [value]
    defp extra(_, _), do: []
    defp extra_axis(%T{type: {:c, _}, shape: shape}), do: [tuple_size(shape)]
    defp extra_axis(_), do: []
  end
end
