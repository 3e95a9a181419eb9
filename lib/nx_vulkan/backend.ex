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
    mode — see `NxVulkan.Fallback`. What falls back today:

      * `map/4` (Nx 0.7): it calls an Elixir function on every element as a number (EXLA
        and Torchx exclude it from Nx's doctests for the same reason); `reduce/5` and
        `window_reduce/6` instead apply their function to whole device tensors, once per
        reduced position, in BinaryBackend's order (see their section);
      * `eigh/3` up to Nx 0.11: Nx's doctests print BinaryBackend's own algorithm's results
        (Nx's defn default gives different, valid ones); since Nx 0.12 BinaryBackend runs
        that defn too, and so does this backend, on the device;
      * complex operands of ops the engine has no complex kernel for: `indexed_add`,
        `cumulative_*`, window ops and scatters, `conv`, `bitcast`, `clip`, reductions other
        than `sum`/`product`, and the unary/binary ops outside `@complex_unary` and
        `@complex_binary`.

    Everything else runs on the device, either as one engine op or composed from them:
    `triangular_solve` and `lu` follow BinaryBackend's algorithms step by step (results equal
    bit for bit; `lu` the installed Nx's, which changed in Nx 0.10 — answers that depend on
    the Nx version live in `NxVulkan.NxCompat`), complex `indexed_put` scatters positions,
    and Nx's defn defaults for `qr`, `cholesky`, `svd`, `solve` and `determinant` run op by op
    on the device.

    Nx 0.13's 8-bit floats (`{:f, 8}`, `{:f8_e4m3fn, 8}`) and sub-byte integers (`u2`, `u4`,
    `s2`, `s4`) live in u8 device buffers; every op widens them on the device, runs in the
    wide type and narrows the result with Nx's conversion rules (see the section at the end).

    Complex tensors (c64, c128) are native engine types: views, indexing, conversions,
    `add`/`subtract`/`multiply`/`divide`/`pow`, comparisons for equality, `exp`, `log`,
    `sqrt`, trigonometry, `abs`, `real`/`imag`/`conjugate`, `sum`/`product`, `dot` and
    FFT/IFFT run on the device.

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

    # Types the engine has no kernels for (Nx >= 0.12): stored in u8 device buffers — one
    # byte per 8-bit float, sub-byte integers packed as Nx packs them — and widened for every
    # op (see "8-bit floats and sub-byte integers" below).
    @stored [{:f, 8}, {:f8_e4m3fn, 8}, {:u, 2}, {:u, 4}, {:s, 2}, {:s, 4}]
    defguardp stored?(type) when type in @stored

    ## Creation

    # `{NxVulkan.Backend, device: d}` (an index or part of a name) names the device: it is
    # opened if none is open yet, and naming another device than the one in use raises — one
    # device per VM for now, and never a silent switch.
    @impl true
    def init(opts) do
      case Keyword.validate(opts, [:device]) do
        {:ok, opts} ->
          if device = opts[:device], do: NxVulkan.open(device)
          opts

        {:error, unknown} ->
          raise ArgumentError, "unknown NxVulkan.Backend options #{inspect(unknown)} (known: :device)"
      end
    end

    @impl true
    def constant(%T{type: type, shape: shape} = out, number, _opts) do
      scalar = Nx.BinaryBackend.constant(%T{type: type, shape: {}, names: []}, number, [])
      ref = NxVulkan.upload(host_bytes(scalar), type, {})
      put(out, NxVulkan.broadcast(ref, shape, []))
    end

    @impl true
    def from_binary(%T{type: {_, bits} = type, shape: shape} = out, binary, _opts)
        when stored?(type) do
      bin = if is_list(binary), do: :erlang.list_to_bitstring(binary), else: binary
      pad = rem(8 - rem(bit_size(bin), 8), 8)
      bytes = <<bin::bitstring, 0::size(pad)>>
      raw_shape = if bits == 8, do: shape, else: {byte_size(bytes)}
      put(out, NxVulkan.upload(bytes, {:u, 8}, raw_shape))
    end

    def from_binary(%T{type: type, shape: shape} = out, binary, _opts) do
      put(out, NxVulkan.upload(IO.iodata_to_binary(binary), type, shape))
    end

    @impl true
    def iota(%T{type: type, shape: shape} = out, axis, _opts),
      do: put(out, NxVulkan.iota(type, shape, axis))

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
    def backend_copy(%T{type: type} = t, B, opts) when stored?(type),
      do: from_binary(t, to_binary(t, Nx.size(t)), opts)

    def backend_copy(%T{} = t, B, _opts),
      do: put(t, NxVulkan.upload(to_binary(t, Nx.size(t)), t.type, t.shape))

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
    def to_binary(%T{type: {_, bits} = type} = t, limit) when stored?(type) do
      <<bin::bitstring-size(limit * bits), _::bitstring>> = NxVulkan.download(ref!(t))
      bin
    end

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
          put(out, NxVulkan.concatenate([tail, head], 0, t.type))

        i ->
          put(out, slice_rows(ref, t, i * batch, batch))
      end)
    end

    defp slice_rows(ref, t, start, len) do
      dims = Tuple.to_list(t.shape)
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

    def as_type(%T{type: out_type} = out, %T{type: in_type} = t)
        when stored?(out_type) or stored?(in_type),
        do: stored_as_type(out, t)

    def as_type(%T{type: out_type} = out, t),
      do: put(out, NxVulkan.NxCompat.as_type(ref!(t), out_type, nx_version()))

    @impl true
    # The stored bytes are the bits: f8 <-> u8/s8/f8, u4 <-> s4, u2 <-> s2.
    def bitcast(%T{type: out_type} = out, %T{type: in_type} = t)
        when stored?(out_type) or stored?(in_type) do
      raw = if stored?(in_type), do: ref!(t), else: NxVulkan.bitcast(ref!(t), {:u, 8})
      put(out, if(stored?(out_type), do: raw, else: NxVulkan.bitcast(raw, out_type)))
    end

    def bitcast(%T{type: out_type} = out, %T{type: in_type} = t) do
      if complex?(out_type) or complex?(in_type),
        do: host(:bitcast, out, [t]),
        else: put(out, NxVulkan.bitcast(ref!(t), out_type))
    end

    ## Shape (views where the engine can)

    @impl true
    def reshape(out, t), do: put(out, NxVulkan.reshape(ref!(t), out.shape))

    @impl true
    def squeeze(out, t, _axes), do: reshape(out, t)

    @impl true
    def broadcast(out, t, shape, axes) do
      put(out, NxVulkan.broadcast(ref!(t), shape, axes))
    end

    @impl true
    def transpose(out, t, axes), do: put(out, NxVulkan.transpose(ref!(t), axes))

    @impl true
    def reverse(out, t, axes), do: put(out, NxVulkan.reverse(ref!(t), axes))

    @impl true
    def slice(out, %T{shape: shape} = t, start, lengths, strides) do
      start = clamp_starts(start, shape, lengths)
      counts = Enum.zip_with(lengths, strides, &div(&1 + &2 - 1, &2))
      put(out, NxVulkan.slice(ref!(t), start, counts, strides))
    end

    @impl true
    def put_slice(
          %T{type: type} = out,
          %T{shape: shape} = t,
          start,
          %T{shape: upd_shape} = update
        ) do
      start = clamp_starts(start, shape, Tuple.to_list(upd_shape))
      base = converted(t, type)
      put(out, NxVulkan.put_slice(base, start, converted(update, type)))
    end

    @impl true
    def pad(%T{type: type} = out, t, pad_value, config),
      do: put(out, NxVulkan.pad(converted(t, type), converted(pad_value, type), config))

    @impl true
    def concatenate(%T{type: type} = out, tensors, axis) do
      put(out, NxVulkan.concatenate(Enum.map(tensors, &converted(&1, type)), axis, type))
    end

    if {:stack, 3} in @nx_callbacks, do: @impl(true)

    def stack(%T{type: type} = out, tensors, axis) do
      refs =
        Enum.map(tensors, fn t ->
          NxVulkan.reshape(converted(t, type), Tuple.insert_at(t.shape, axis, 1))
        end)

      put(out, NxVulkan.concatenate(refs, axis, type))
    end

    ## Elementwise

    unary_ops =
      [:exp, :expm1, :log, :log1p, :sigmoid, :cos, :sin, :tan, :cosh, :sinh, :tanh] ++
        [:acos, :asin, :atan, :acosh, :asinh, :atanh, :sqrt, :rsqrt, :cbrt, :erf, :erfc, :erf_inv] ++
        [:abs, :bitwise_not, :ceil, :floor, :round, :sign, :count_leading_zeros] ++
        [:population_count, :is_nan, :is_infinity]

    # What the engine computes on complex operands; other ops on complex take the host path.
    @complex_unary [:exp, :expm1, :log, :log1p, :sigmoid, :cos, :sin, :tan, :sqrt, :rsqrt] ++
                     [:abs, :sign, :is_nan, :is_infinity]
    @complex_binary [:add, :subtract, :multiply, :divide, :pow, :equal, :not_equal] ++
                      [:logical_and, :logical_or, :logical_xor]

    for op <- unary_ops do
      @impl true
      def unquote(op)(out, t) do
        if (complex?(t.type) or complex?(out.type)) and unquote(op) not in @complex_unary,
          do: host(unquote(op), out, [t]),
          else: put(out, NxVulkan.unary(unquote(op), ref!(t), out.type))
      end
    end

    @impl true
    def negate(%T{type: type} = out, t) do
      put(out, NxVulkan.unary(:negate, converted(t, type), type))
    end

    @impl true
    def conjugate(%T{type: type} = out, t),
      do: put(out, NxVulkan.unary(:conjugate, ref!(t), type))

    @impl true
    def real(out, %T{type: type} = t) do
      if complex?(type),
        do: put(out, NxVulkan.unary(:real, ref!(t), out.type)),
        else: as_type(out, t)
    end

    @impl true
    def imag(out, %T{type: type} = t) do
      if complex?(type),
        do: put(out, NxVulkan.unary(:imag, ref!(t), out.type)),
        else: constant(out, 0, [])
    end

    binary_ops =
      [:add, :subtract, :multiply, :pow, :remainder, :divide, :atan2, :min, :max, :quotient] ++
        [:bitwise_and, :bitwise_or, :bitwise_xor, :left_shift, :right_shift] ++
        [:equal, :not_equal, :greater, :less, :greater_equal, :less_equal] ++
        [:logical_and, :logical_or, :logical_xor]

    for op <- binary_ops do
      @impl true
      def unquote(op)(out, a, b) do
        if (complex?(a.type) or complex?(b.type) or complex?(out.type)) and
             unquote(op) not in @complex_binary,
           do: host(unquote(op), out, [a, b]),
           else: put(out, NxVulkan.binary(unquote(op), ref!(a), ref!(b), out.type))
      end
    end

    @impl true
    def select(%T{type: type} = out, pred, on_true, on_false),
      do: put(out, NxVulkan.select(ref!(pred), ref!(on_true), ref!(on_false), type))

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

      if (complex?(t.type) or complex?(type)) and op not in [:sum, :product],
        do: host(op, out, [t, opts]),
        else: put(out, NxVulkan.reduce(op, ref!(t), axes, keep, type))
    end

    for op <- [:argmax, :argmin] do
      @impl true
      def unquote(op)(out, t, opts) do
        if complex?(t.type) do
          host(unquote(op), out, [t, opts])
        else
          ref =
            NxVulkan.NxCompat.arg_reduce(
              unquote(op),
              ref!(t),
              opts[:axis],
              opts[:keep_axis] || false,
              opts[:tie_break] || :low,
              out.type,
              nx_version()
            )

          put(out, ref)
        end
      end
    end

    @impl true
    def dot(%T{type: type} = out, a, contract_a, batch_a, b, contract_b, batch_b),
      do: put(out, NxVulkan.dot(ref!(a), contract_a, batch_a, ref!(b), contract_b, batch_b, type))

    ## Window reductions, window scatters and convolution (engine: window.rs, conv.rs), one
    ## kernel each; no complex kernels yet.

    for op <- [:window_sum, :window_product, :window_max, :window_min] do
      @impl true
      def unquote(op)(%T{type: type} = out, t, window, opts) do
        if complex?(type) do
          host(unquote(op), out, [t, window, opts])
        else
          rank = tuple_size(window)

          ref =
            NxVulkan.NxCompat.window_reduce(
              unquote(op),
              converted(t, type),
              window,
              opts[:strides] || List.duplicate(1, rank),
              opts[:padding] || List.duplicate({0, 0}, rank),
              opts[:window_dilations] || List.duplicate(1, rank),
              nx_version()
            )

          put(out, ref)
        end
      end
    end

    for op <- [:window_scatter_max, :window_scatter_min] do
      @impl true
      def unquote(op)(%T{type: type} = out, t, source, init_value, window, opts) do
        if complex?(type) or complex?(t.type) or complex?(source.type) do
          host(unquote(op), out, [t, source, init_value, window, opts])
        else
          rank = tuple_size(window)

          ref =
            NxVulkan.window_scatter(
              unquote(op),
              ref!(t),
              ref!(source),
              ref!(init_value),
              window,
              opts[:strides] || List.duplicate(1, rank),
              opts[:padding] || List.duplicate({0, 0}, rank),
              type
            )

          put(out, ref)
        end
      end
    end

    @impl true
    def conv(%T{type: type} = out, t, kernel, opts) do
      if complex?(type) or complex?(t.type) or complex?(kernel.type),
        do: host(:conv, out, [t, kernel, opts]),
        else: put(out, NxVulkan.conv(ref!(t), ref!(kernel), opts, type))
    end

    ## FFT (engine: fft.rs); the engine's result type is Nx's (c64, or c128 from f64/c128).

    for op <- [:fft, :ifft] do
      @impl true
      def unquote(op)(%T{type: type} = out, t, opts) do
        ref = NxVulkan.unquote(op)(ref!(t), opts[:axis], opts[:length], opts[:eps] || 1.0e-10)

        ref =
          case NxVulkan.describe(ref) do
            {^type, _} -> ref
            _ -> NxVulkan.as_type(ref, type)
          end

        put(out, ref)
      end
    end

    ## Indexing (engine: indexing.rs).

    @impl true
    def gather(out, t, indices, opts) do
      axes =
        opts[:axes] || Enum.to_list(0..(elem(indices.shape, tuple_size(indices.shape) - 1) - 1))

      put(out, NxVulkan.gather(ref!(t), ref!(indices), axes))
    end

    if {:take, 4} in @nx_callbacks, do: @impl(true)
    def take(out, t, indices, axis), do: put(out, NxVulkan.take(ref!(t), ref!(indices), axis))

    if {:take_along_axis, 4} in @nx_callbacks, do: @impl(true)

    def take_along_axis(out, t, indices, axis),
      do: put(out, NxVulkan.take_along_axis(ref!(t), ref!(indices), axis))

    for {op, engine_op} <- [indexed_add: :add, indexed_put: :put] do
      @impl true
      def unquote(op)(%T{type: type} = out, target, indices, updates, opts) do
        axes = opts[:axes] || Enum.to_list(0..(elem(indices.shape, 1) - 1))

        # The engine's scatter has no complex kernel yet: a complex put scatters update
        # positions instead (see complex_put/5); a complex add takes the host path.
        cond do
          not complex?(type) -> indexed(unquote(engine_op), out, target, indices, updates, axes)
          unquote(engine_op) == :put -> complex_put(out, target, indices, updates, axes)
          true -> host(unquote(op), out, [target, indices, updates, opts])
        end
      end
    end

    defp indexed(op, %T{type: type} = out, target, indices, updates, axes) do
      ref =
        NxVulkan.indexed(
          op,
          converted(target, type),
          ref!(indices),
          converted(updates, type),
          axes,
          type
        )

      put(out, ref)
    end

    # indexed_put moves values, so for complex tensors it is done with ops the engine has
    # for them: scatter the flat position of each update (last writer wins, as in the real
    # kernel) into a map of -1s, take the updates at those positions, keep the target elsewhere.
    defp complex_put(%T{type: type, shape: shape} = out, target, indices, updates, axes) do
      s64 = {:s, 64}
      ids = NxVulkan.iota(s64, updates.shape, nil)
      minus_one = NxVulkan.upload(<<-1::signed-64-little>>, s64, {})
      zero = NxVulkan.upload(<<0::signed-64-little>>, s64, {})
      base = NxVulkan.contiguous(NxVulkan.broadcast(minus_one, shape, []))
      map = NxVulkan.indexed(:put, base, ref!(indices), ids, axes, s64)
      flat = NxVulkan.reshape(converted(updates, type), {Nx.size(updates.shape)})
      values = NxVulkan.take(flat, NxVulkan.binary(:max, map, zero, s64), 0)
      hit = NxVulkan.binary(:greater_equal, map, zero, {:u, 8})
      put(out, NxVulkan.select(hit, values, converted(target, type), type))
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

        if complex?(t.type) do
          # The engine's scan has no complex kernel yet: Nx's own composition, on the host.
          host_apply(unquote(op), fn ->
            Nx.unquote(op)(to_host(t), axis: axis, reverse: reverse)
          end)
        else
          put(out, NxVulkan.cumulative(unquote(op), ref!(t), axis, reverse))
        end
      end
    end

    ## triangular_solve: Nx.BinaryBackend's algorithm composed from device ops. Like it, the
    ## system is rewritten (transposes and reversals, all views) as a lower-triangular one,
    ## solved by forward substitution in f64 (c128 for complex) — one row of all right-hand
    ## sides and batches per step: y_i = (b_i - sum_{j<i} a_ij y_j) / a_ii, the sum taken in
    ## index order — and rounded once to the output type, so results match it bit for bit.

    @impl true
    def triangular_solve(%T{type: out_type} = out, %T{shape: a_shape} = a, %T{} = b, opts) do
      left_side = Keyword.get(opts, :left_side, true) == true
      lower = Keyword.get(opts, :lower, true) == true
      transpose_a_opt = opts[:transform_a] == :transpose

      rank = tuple_size(a_shape)
      n = elem(a_shape, rank - 1)
      batch = Tuple.to_list(a_shape) |> Enum.take(rank - 2)
      br = length(batch)
      vector? = tuple_size(b.shape) == br + 1
      work = if complex?(out_type), do: {:c, 128}, else: {:f, 64}

      transpose_a? = left_side == transpose_a_opt
      reverse_a? = left_side == (lower == transpose_a_opt)
      transpose_b? = not left_side and not vector?
      last2 = [br, br + 1]
      swap = Enum.to_list(0..(br - 1)//1) ++ [br + 1, br]

      am = NxVulkan.as_type(ref!(a), work)
      am = if transpose_a?, do: NxVulkan.transpose(am, swap), else: am
      am = if reverse_a?, do: NxVulkan.reverse(am, last2), else: am
      check_nonsingular!(am, batch, n, work)

      bm = NxVulkan.as_type(ref!(b), work)
      bm = if vector?, do: NxVulkan.reshape(bm, List.to_tuple(batch ++ [n, 1])), else: bm
      bm = if transpose_b?, do: NxVulkan.transpose(bm, swap), else: bm
      bm = if reverse_a?, do: NxVulkan.reverse(bm, last2), else: bm
      {_, b_dims} = NxVulkan.describe(bm)
      m = elem(b_dims, br + 1)
      batch_axes = Enum.to_list(0..(br - 1)//1)
      ones = List.duplicate(1, br + 2)
      zeros = List.duplicate(0, br)

      x =
        Enum.reduce(0..(n - 1)//1, nil, fn i, x ->
          b_i = NxVulkan.slice(bm, zeros ++ [i, 0], batch ++ [1, m], ones)
          diag = NxVulkan.slice(am, zeros ++ [i, i], batch ++ [1, 1], ones)

          num =
            if x do
              row = NxVulkan.slice(am, zeros ++ [i, 0], batch ++ [1, i], ones)
              s = NxVulkan.dot(row, [br + 1], batch_axes, x, [br], batch_axes, work)
              NxVulkan.binary(:subtract, b_i, s, work)
            else
              b_i
            end

          y = NxVulkan.binary(:divide, num, diag, work)
          if x, do: NxVulkan.concatenate([x, y], br, work), else: y
        end)

      x = if transpose_b?, do: NxVulkan.transpose(x, swap), else: x
      x = if reverse_a?, do: NxVulkan.reverse(x, last2), else: x
      x = if vector?, do: NxVulkan.reshape(x, b.shape), else: x
      put(out, NxVulkan.as_type(x, out_type))
    end

    # BinaryBackend raises when a pivot is zero; so do we, before any work.
    defp check_nonsingular!(am, batch, n, work) do
      flat = NxVulkan.reshape(NxVulkan.contiguous(am), List.to_tuple(batch ++ [n * n]))
      br = length(batch)

      diag =
        NxVulkan.slice(
          flat,
          List.duplicate(0, br + 1),
          batch ++ [n],
          List.duplicate(1, br) ++ [n + 1]
        )

      zero = NxVulkan.upload(<<0::size(elem(work, 1))>>, work, {})
      zeros = NxVulkan.binary(:equal, diag, zero, {:u, 8})
      all_axes = Enum.to_list(0..br)

      if NxVulkan.download(NxVulkan.reduce(:any, zeros, all_axes, false, {:u, 8})) != <<0>> do
        raise ArgumentError, "can't solve for singular matrix"
      end
    end

    ## lu: the installed Nx's BinaryBackend algorithm composed from device ops, vectorised
    ## over batches (results equal bit for bit): Doolittle with pre-pivoting in f64 up to
    ## Nx 0.9, Gaussian elimination with partial pivoting in the output type since Nx 0.10
    ## (see NxVulkan.NxCompat.lu/5).

    # A callback up to Nx 0.11, reached through block/4 since 0.12.
    @impl {:lu, 3} in @nx_callbacks
    def lu({p_out, l_out, u_out}, %T{} = t, opts) do
      {p, l, u} =
        NxVulkan.NxCompat.lu(ref!(t), p_out.type, l_out.type, opts[:eps] || 1.0e-10, nx_version())

      {put(p_out, p), put(l_out, l), put(u_out, u)}
    end

    ## Optional callbacks (Nx 0.7.2) and blocks (Nx >= 0.12)

    # Nx's default implementations (qr, cholesky, svd, solve, determinant, ...) are defn
    # compositions of the ops above — the same code Nx.BinaryBackend runs for them — so they
    # run on the device, one small dispatch per op. Up to Nx 0.11, eigh needs BinaryBackend's
    # own algorithm to print what Nx's doctests print, so it takes the host path there.
    @host_optional [:eigh]

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

        # Since Nx 0.12 BinaryBackend runs every block's defn default itself (eigh included:
        # Nx.LinAlg.BlockEigh), so the same defn runs here, op by op on the device.
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

        {:lu, [t]} ->
          lu(out, t, eps: Map.get(struct, :eps, 1.0e-10))

        _ ->
          nil
      end
    end

    ## The host fallback: one path for every op the engine cannot run yet.

    ## reduce and window_reduce with an Elixir function: the function is applied to whole
    ## device tensors, once per reduced position, in the order Nx.BinaryBackend visits them
    ## (the reduced axes in ascending order, row-major; a window row-major), so every output
    ## element sees the same sequence of calls `fun.(element, acc)` as there — vectorised over
    ## all outputs at once, each call's Nx ops dispatched on the device. The function must be
    ## elementwise (as Nx requires of it: it gets scalars there).

    @impl true
    def reduce(%T{shape: out_shape, type: out_type} = out, %T{shape: shape} = t, acc, opts, fun) do
      rank = tuple_size(shape)
      all = Enum.to_list(0..(rank - 1)//1)
      axes = Enum.sort(opts[:axes] || all)
      n = Enum.reduce(axes, 1, &(elem(shape, &1) * &2))
      rows = if n == 0, do: 0, else: div(Nx.size(shape), n)

      flat =
        %{t | names: List.duplicate(nil, rank)}
        |> Nx.transpose(axes: (all -- axes) ++ axes)
        |> Nx.reshape({rows, n})

      result =
        Enum.reduce(0..(n - 1)//1, acc, fn i, acc ->
          x = flat |> Nx.slice_along_axis(i, 1, axis: 1) |> Nx.reshape(out_shape)
          fun.(x, acc)
        end)

      put(out, ref!(result |> Nx.as_type(out_type) |> Nx.broadcast(out_shape)))
    end

    @impl true
    def window_reduce(%T{shape: out_shape, type: out_type} = out, t, acc, window, opts, fun) do
      rank = tuple_size(t.shape)
      strides = opts[:strides] || List.duplicate(1, rank)
      dilations = opts[:window_dilations] || List.duplicate(1, rank)
      padding = opts[:padding] || List.duplicate({0, 0}, rank)

      config = Enum.map(padding, fn {lo, hi} -> {lo, hi, 0} end)
      padded = Nx.pad(%{t | names: List.duplicate(nil, rank)}, acc, config)

      lengths =
        out_shape |> Tuple.to_list() |> Enum.zip_with(strides, &max((&1 - 1) * &2 + 1, 0))

      offsets =
        window
        |> Tuple.to_list()
        |> Enum.reduce([[]], fn d, acc -> for o <- acc, i <- 0..(d - 1)//1, do: o ++ [i] end)

      result =
        Enum.reduce(offsets, acc, fn w, acc ->
          start = Enum.zip_with(w, dilations, &*/2)
          fun.(Nx.slice(padded, start, lengths, strides: strides), acc)
        end)

      put(out, ref!(result |> Nx.as_type(out_type) |> Nx.broadcast(out_shape)))
    end

    host_ops = [
      map: 4,
      eigh: 3
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

    @doc """
    The installed Nx's version (a string), whose BinaryBackend answers this backend
    reproduces where they changed between releases (see `NxVulkan.NxCompat`).
    """
    def nx_version do
      case :persistent_term.get({__MODULE__, :nx_version}, nil) do
        nil ->
          _ = Application.load(:nx)
          vsn = to_string(Application.spec(:nx, :vsn) || "0.0.0")
          :persistent_term.put({__MODULE__, :nx_version}, vsn)
          vsn

        vsn ->
          vsn
      end
    end

    defp put(%T{} = out, ref), do: %{out | data: %B{ref: ref}}

    # The device handle of a tensor. BinaryBackend tensors are uploaded (Nx gives mixed
    # operands to the non-binary backend); any other backend is an error.
    defp ref!(%T{data: %B{ref: ref}}), do: ref

    defp ref!(%T{data: %Nx.BinaryBackend{}} = t) do
      NxVulkan.upload(host_bytes(t), t.type, t.shape)
    end

    defp ref!(%T{data: %other{}}) do
      raise ArgumentError,
            "NxVulkan.Backend got a tensor of #{inspect(other)}; " <>
              "move it first with Nx.backend_transfer(tensor, NxVulkan.Backend)"
    end

    # `t`'s handle converted to `type` (a view of the original when the type already matches).
    defp converted(%T{type: type} = t, type), do: ref!(t)
    defp converted(%T{} = t, type), do: as_type(%{t | type: type}, t) |> ref!()

    defp clamp_starts(start, shape, lengths) do
      [start, Tuple.to_list(shape), lengths]
      |> Enum.zip_with(fn [s, dim, len] ->
        s = if is_integer(s), do: s, else: Nx.to_number(s)
        s |> max(0) |> min(dim - len)
      end)
    end

    defp complex?({:c, _}), do: true
    defp complex?(_), do: false

    ## 8-bit floats and sub-byte integers (Nx >= 0.12)
    ##
    ## The engine has no kernels for them, so their tensors live in u8 device buffers (one byte
    ## per f8, sub-byte integers packed as Nx packs them) and every op widens its operands on
    ## the device, runs on the wide type and narrows the result — the conversions, with
    ## Nx.Floating's rules, are in NxVulkan.NxCompat (decode_stored/3, encode_stored/3).

    defp wide(type), do: NxVulkan.NxCompat.wide(type)

    defp scalar(type, value), do: NxVulkan.NxCompat.scalar(type, value)

    defp decode(%T{type: type, shape: shape} = t),
      do: NxVulkan.NxCompat.decode_stored(ref!(t), type, shape)

    defp encode(h, type, shape), do: NxVulkan.NxCompat.encode_stored(h, type, shape)

    # as_type to or from a stored type: through the wide types.
    defp stored_as_type(%T{type: out_type, shape: shape} = out, %T{type: in_type} = t) do
      put(out, NxVulkan.NxCompat.as_type_stored(ref!(t), in_type, out_type, shape, nx_version()))
    end

    # Every other callback, wrapped: operands of a stored type widened, outputs of a stored
    # type computed in the wide type and narrowed. Bit counts see the unsigned stored bits.
    @not_wrapped [:init, :from_binary, :to_binary, :inspect, :backend_copy, :backend_transfer] ++
                   [:backend_deallocate, :to_pointer, :from_pointer, :optional, :block, :host] ++
                   [:nx_version, :as_type, :bitcast]

    for {name, arity} <- Module.definitions_in(__MODULE__, :def),
        name not in @not_wrapped,
        not String.starts_with?(Atom.to_string(name), "__") do
      args = Macro.generate_arguments(arity, __MODULE__)
      defoverridable [{name, arity}]

      def unquote(name)(unquote_splicing(args)) do
        if stored_in?(unquote(args)) do
          [out | _] = unquote(args)

          if raw_move?(unquote(name), unquote(args)) do
            unquote(args) = as_raw(unquote(args))
            from_raw(super(unquote_splicing(args)), out)
          else
            unquote(args) = widen_args(unquote(name), unquote(args))
            narrow(unquote(name), super(unquote_splicing(args)), out)
          end
        else
          super(unquote_splicing(args))
        end
      end
    end

    # Ops that move elements without reading them move an f8 tensor's bytes as u8, as
    # BinaryBackend moves its bytes (decoding and encoding would not give every byte back:
    # Nx reads subnormal and zero bytes as other values).
    @moves [:reshape, :squeeze, :broadcast, :transpose, :reverse, :slice, :put_slice, :pad] ++
             [:concatenate, :stack, :gather, :take, :take_along_axis, :to_batched] ++
             [:indexed_put]

    defp raw_move?(name, [%T{type: {_, 8} = type} | args]) when name in @moves and stored?(type) do
      args
      |> List.flatten()
      |> Enum.all?(fn
        %T{type: ^type} -> true
        %T{type: {k, _} = t} -> k in [:s, :u] and not stored?(t)
        _ -> true
      end)
    end

    defp raw_move?(_name, _args), do: false

    defp as_raw(%T{type: type} = t) when stored?(type), do: %{t | type: {:u, 8}}
    defp as_raw(list) when is_list(list), do: Enum.map(list, &as_raw/1)
    defp as_raw(other), do: other

    defp from_raw(%T{} = r, %T{type: type}), do: %{r | type: type}
    defp from_raw(%Stream{} = stream, out), do: Stream.map(stream, &from_raw(&1, out))
    defp from_raw(other, _out), do: other

    defp stored_in?(%T{type: type}) when stored?(type), do: true
    defp stored_in?(list) when is_list(list), do: Enum.any?(list, &stored_in?/1)
    defp stored_in?(tuple) when is_tuple(tuple), do: stored_in?(Tuple.to_list(tuple))
    defp stored_in?(_), do: false

    @bit_counts [:count_leading_zeros, :population_count]

    defp widen_args(name, [out | rest]) when name in @bit_counts do
      [%T{type: {_, _} = type} = t] = rest
      unsigned = if stored?(type), do: %{t | type: {:u, elem(type, 1)}}, else: t
      [widen_out(out) | [widen(unsigned)]]
    end

    defp widen_args(_name, [out | rest]), do: [widen_out(out) | Enum.map(rest, &widen/1)]

    defp widen_out(%T{type: type} = out) when stored?(type), do: %{out | type: wide(type)}

    defp widen_out(tuple) when is_tuple(tuple),
      do: tuple |> Tuple.to_list() |> Enum.map(&widen_out/1) |> List.to_tuple()

    defp widen_out(other), do: other

    defp widen(%T{type: type} = t) when stored?(type),
      do: %{t | type: wide(type), data: %B{ref: decode(t)}}

    defp widen(list) when is_list(list), do: Enum.map(list, &widen/1)
    defp widen(other), do: other

    defp narrow(:count_leading_zeros, %T{} = r, %T{type: {_, bits} = type} = out)
         when stored?(type) do
      # clz over 8 bits of the zero-extended value counts 8 - bits extra zeros
      h = NxVulkan.binary(:subtract, ref!(r), scalar(wide(type), 8 - bits), wide(type))
      narrow(nil, %{r | data: %B{ref: h}}, out)
    end

    defp narrow(_name, %T{} = r, %T{type: type, shape: shape}) when stored?(type),
      do: %{r | type: type, data: %B{ref: encode(ref!(r), type, shape)}}

    defp narrow(name, result, outs) when is_tuple(result) and is_tuple(outs) do
      Enum.zip_with(Tuple.to_list(result), Tuple.to_list(outs), &narrow(name, &1, &2))
      |> List.to_tuple()
    end

    defp narrow(name, %Stream{} = stream, out), do: Stream.map(stream, &narrow(name, &1, out))
    defp narrow(_name, result, _out), do: result
  end
end
