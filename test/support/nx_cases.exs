defmodule NxVulkan.NxCases do
  @moduledoc """
  Random op cases shared by the property tests (NxVulkan.Backend against Nx.BinaryBackend)
  and the golden-data generator (`test/golden/generate.exs`). Needs Nx.

  A case is `%{name, call, inputs, nx}`: `inputs` are `Nx.BinaryBackend` tensors, `nx` is the
  Nx function of the inputs, and `call` is the same op written for the `NxVulkan` handle API
  (see `NxVulkan.GoldenReplay`), whose output type is the type Nx gives the result.
  """

  import Bitwise, only: [<<<: 2]

  @floats [{:f, 32}, {:f, 64}, {:f, 16}, {:bf, 16}]
  @ints [{:s, 8}, {:s, 16}, {:s, 32}, {:s, 64}, {:u, 8}, {:u, 16}, {:u, 32}, {:u, 64}]
  @types @floats ++ @ints

  @unary_float [:exp, :expm1, :log, :log1p, :sigmoid, :sqrt, :rsqrt, :cbrt, :sin, :cos, :tan] ++
                 [
                   :asin,
                   :acos,
                   :atan,
                   :sinh,
                   :cosh,
                   :tanh,
                   :asinh,
                   :acosh,
                   :atanh,
                   :erf,
                   :erfc,
                   :erf_inv
                 ]
  @unary_any [:negate, :abs, :sign, :ceil, :floor, :round, :is_nan, :is_infinity]
  @unary_int [:bitwise_not, :count_leading_zeros, :population_count]
  @binary_any [:add, :subtract, :multiply, :divide, :max, :min, :equal, :not_equal, :greater] ++
                [:less, :greater_equal, :less_equal, :logical_and, :logical_or, :logical_xor]
  @binary_float [:pow, :atan2, :remainder]
  @binary_int [:bitwise_and, :bitwise_or, :bitwise_xor, :quotient, :remainder]

  def types, do: @types

  @doc "Whether a case's result depends on the engine's float math (transcendentals, float sums)."
  def float_math?(%{call: {:unary, op}, inputs: [%{type: {:c, _}} | _]}),
    do: op in [:exp, :log, :sqrt, :sin, :cos]

  def float_math?(%{call: {:unary, op}}), do: op in @unary_float
  def float_math?(%{call: {:binary, op}}), do: op in @binary_float
  def float_math?(%{call: {:reduce, op, _, _}}), do: op in [:sum, :product]
  def float_math?(_), do: false

  @doc "Every case for `seed`, each valid on Nx.BinaryBackend (inputs that make it raise are redrawn)."
  def all(seed) do
    :rand.seed(:exsss, {seed, 7, 11})

    Enum.flat_map(
      [&unary/0, &binary/0, &conversions/0, &selects/0, &reductions/0, &dots/0, &views/0] ++
        [&indexing/0, &sorting/0, &windows/0, &convs/0, &ffts/0, &complex/0] ++
        [&versioned/0, &stored/0],
      & &1.()
    )
  end

  defp unary do
    for op <- @unary_float, t <- @floats, shape = if(t == {:f, 32}, do: {3, 5}, else: {7}) do
      build("#{op} #{name(t)}", {:unary, op}, [{t, shape}], &apply(Nx, op, &1))
    end ++
      for op <- @unary_float, t <- [{:s, 32}, {:u, 8}] do
        build("#{op} #{name(t)}", {:unary, op}, [{t, {5}}], &apply(Nx, op, &1))
      end ++
      for op <- @unary_any, t <- @types, not (op in [:ceil, :floor, :round] and t in @ints) do
        build("#{op} #{name(t)}", {:unary, op}, [{t, {2, 7}}], &apply(Nx, op, &1))
      end ++
      for op <- @unary_int, t <- @ints do
        build("#{op} #{name(t)}", {:unary, op}, [{t, {9}}], &apply(Nx, op, &1))
      end
  end

  defp binary do
    pairs = Enum.map(@types, &{&1, &1}) ++ mixed_pairs()

    shapes = [{{3, 5}, {3, 5}}, {{3, 1}, {1, 4}}, {{5}, {}}]

    for {op, i} <- Enum.with_index(@binary_any), {{a, b}, j} <- Enum.with_index(pairs) do
      {sa, sb} = Enum.at(shapes, rem(i + j, 3))

      build(
        "#{op} #{name(a)}#{inspect(sa)} #{name(b)}#{inspect(sb)}",
        {:binary, op},
        [{a, sa}, {b, sb}],
        &apply(Nx, op, &1)
      )
    end ++
      for op <- @binary_float, t <- @floats do
        # BinaryBackend's atan2(finite, NaN) never returns: finite inputs only for it
        kind = if op == :atan2, do: :finite

        build(
          "#{op} #{name(t)}",
          {:binary, op},
          [{t, {11}, kind}, {t, {11}, kind}],
          &apply(Nx, op, &1)
        )
      end ++
      for op <- @binary_int ++ [:left_shift, :right_shift, :pow], t <- @ints do
        gen =
          if op in [:left_shift, :right_shift, :pow],
            do: [{t, {9}}, {t, {9}, :small}],
            else: [{t, {9}}, {t, {9}}]

        build("#{op} #{name(t)}", {:binary, op}, gen, &apply(Nx, op, &1))
      end
  end

  defp mixed_pairs do
    [
      {{:s, 32}, {:f, 32}},
      {{:u, 8}, {:s, 8}},
      {{:f, 16}, {:bf, 16}},
      {{:s, 64}, {:f, 32}},
      {{:u, 64}, {:s, 64}},
      {{:u, 32}, {:f, 64}},
      {{:s, 8}, {:f, 16}}
    ]
  end

  defp conversions do
    for from <- @types, to <- @types, from != to do
      build("as_type #{name(from)} -> #{name(to)}", {:as_type}, [{from, {13}}], fn [x] ->
        Nx.as_type(x, to)
      end)
    end ++
      for t <- @types, to <- @types, t != to, elem(t, 1) == elem(to, 1) do
        build("bitcast #{name(t)} -> #{name(to)}", {:bitcast}, [{t, {6}}], fn [x] ->
          Nx.bitcast(x, to)
        end)
      end
  end

  defp selects do
    for {a, b} <- [
          {{:f, 32}, {:f, 32}},
          {{:s, 8}, {:f, 32}},
          {{:u, 8}, {:s, 64}},
          {{:bf, 16}, {:f, 16}}
        ] do
      build(
        "select #{name(a)} #{name(b)}",
        {:select},
        [{{:u, 8}, {3, 4}, :bool}, {a, {3, 4}}, {b, {4}}],
        fn [p, x, y] ->
          Nx.select(p, x, y)
        end
      )
    end ++
      for t <- @types do
        build("clip #{name(t)}", {:clip}, [{t, {3, 4}}, {t, {}}, {t, {}}], fn [x, lo, hi] ->
          Nx.clip(x, lo, hi)
        end)
      end
  end

  defp reductions do
    for op <- [:sum, :product, :reduce_max, :reduce_min, :all, :any],
        t <- @types,
        {shape, axes, keep} <- [
          {{4, 3, 2}, [1], false},
          {{4, 3, 2}, [0, 2], true},
          {{7}, nil, false}
        ] do
      build(
        "#{op} #{name(t)} #{inspect(shape)} axes #{inspect(axes)}",
        {:reduce, op, axes || all_axes(shape), keep},
        [{t, shape}],
        fn [x] ->
          apply(Nx, op, [x, [axes: axes, keep_axes: keep]])
        end
      )
    end ++
      for op <- [:argmax, :argmin],
          t <- @types,
          {axis, tie} <- [{1, :low}, {nil, :high}, {0, :high}] do
        build(
          "#{op} #{name(t)} axis #{inspect(axis)} #{tie}",
          {:arg_reduce, op, axis, false, tie},
          [{t, {4, 5}, :ties}],
          fn [x] ->
            apply(Nx, op, [x, [axis: axis, tie_break: tie]])
          end
        )
      end
  end

  defp all_axes(shape), do: Enum.to_list(0..(tuple_size(shape) - 1)//1)

  defp dots do
    for {a, b} <- [
          {{:f, 32}, {:f, 32}},
          {{:f, 64}, {:f, 64}},
          {{:s, 32}, {:s, 32}},
          {{:u, 8}, {:u, 8}},
          {{:s, 8}, {:f, 32}},
          {{:f, 16}, {:f, 16}}
        ],
        {sa, ca, ba, sb, cb, bb} <- [
          {{3, 5}, [1], [], {5, 4}, [0], []},
          {{2, 3, 5}, [2], [0], {2, 5, 4}, [1], [0]},
          {{5, 3}, [0], [], {4, 5}, [1], []},
          {{7}, [0], [], {7}, [0], []}
        ] do
      build(
        "dot #{name(a)}#{inspect(sa)} #{name(b)}#{inspect(sb)}",
        {:dot, ca, ba, cb, bb},
        [{a, sa, :small}, {b, sb, :small}],
        fn [x, y] ->
          Nx.dot(x, ca, ba, y, cb, bb)
        end
      )
    end
  end

  defp views do
    for t <- [{:f, 32}, {:s, 16}, {:bf, 16}, {:u, 64}] do
      [
        build("transpose #{name(t)}", {:transpose, [2, 0, 1]}, [{t, {4, 3, 2}}], fn [x] ->
          Nx.transpose(x, axes: [2, 0, 1])
        end),
        build(
          "slice #{name(t)}",
          {:slice, [1, 0, 1], [3, 3, 1], [2, 1, 1]},
          [{t, {4, 3, 2}}],
          fn [x] ->
            Nx.slice(x, [1, 0, 1], [3, 3, 1], strides: [2, 1, 1])
          end
        ),
        build("reverse #{name(t)}", {:reverse, [0, 2]}, [{t, {4, 3, 2}}], fn [x] ->
          Nx.reverse(x, axes: [0, 2])
        end),
        build("pad #{name(t)}", {:pad, [{1, -1, 2}, {-1, 2, 0}]}, [{t, {3, 4}}, {t, {}}], fn [
                                                                                               x,
                                                                                               v
                                                                                             ] ->
          Nx.pad(x, v, [{1, -1, 2}, {-1, 2, 0}])
        end),
        build(
          "concatenate #{name(t)}",
          {:concatenate, 1},
          [{t, {2, 3}}, {t, {2, 1}}, {t, {2, 2}}],
          fn xs -> Nx.concatenate(xs, axis: 1) end
        ),
        build("put_slice #{name(t)}", {:put_slice, [1, 2]}, [{t, {4, 5}}, {t, {2, 2}}], fn [x, u] ->
          Nx.put_slice(x, [1, 2], u)
        end),
        build("broadcast #{name(t)}", {:broadcast, {2, 3, 4}, [0, 2]}, [{t, {2, 4}}], fn [x] ->
          Nx.broadcast(x, {2, 3, 4}, axes: [0, 2])
        end),
        build("iota #{name(t)}", {:iota, t, {3, 4}, 1}, [], fn [] ->
          Nx.iota({3, 4}, type: t, axis: 1)
        end)
      ]
    end
    |> List.flatten()
  end

  defp indexing do
    for t <- [{:f, 32}, {:s, 16}, {:bf, 16}, {:u, 64}, {:f, 64}] do
      [
        build(
          "gather #{name(t)}",
          {:gather, [0, 1]},
          [{t, {4, 3, 2}}, {{:s, 64}, {5, 2}, {:index, 3}}],
          fn [x, i] ->
            Nx.gather(x, i)
          end
        ),
        build(
          "gather axes #{name(t)}",
          {:gather, [1]},
          [{t, {4, 3, 2}}, {{:u, 8}, {2, 3, 1}, {:index, 3}}],
          fn [x, i] ->
            Nx.gather(x, i, axes: [1])
          end
        ),
        build("take #{name(t)}", {:take, 1}, [{t, {3, 4}}, {{:s, 32}, {2, 5}, {:index, 4}}], fn [
                                                                                                  x,
                                                                                                  i
                                                                                                ] ->
          Nx.take(x, i, axis: 1)
        end),
        build(
          "take_along_axis #{name(t)}",
          {:take_along_axis, 0},
          [{t, {3, 4}}, {{:s, 64}, {5, 4}, {:index, 3}}],
          fn [x, i] ->
            Nx.take_along_axis(x, i, axis: 0)
          end
        ),
        build(
          "indexed_add #{name(t)}",
          {:indexed, :add, [0, 1]},
          [{t, {4, 3}}, {{:s, 64}, {6, 2}, {:index, 3}}, {t, {6}}],
          fn [x, i, u] ->
            Nx.indexed_add(x, i, u)
          end
        ),
        build(
          "indexed_put #{name(t)}",
          {:indexed, :put, [1]},
          [{t, {4, 3}}, {{:s, 64}, {5, 1}, {:index, 3}}, {t, {5, 4}}],
          fn [x, i, u] ->
            Nx.indexed_put(x, i, u, axes: [1])
          end
        )
      ]
    end
    |> List.flatten()
  end

  defp sorting do
    for t <- [{:f, 32}, {:f, 64}, {:f, 16}, {:s, 8}, {:u, 32}, {:s, 64}], kind <- [nil, :ties] do
      k = if kind, do: " ties", else: ""

      [
        build("sort #{name(t)}#{k}", {:sort, 1, :asc}, [{t, {3, 9}, kind}], fn [x] ->
          Nx.sort(x, axis: 1)
        end),
        build("sort desc #{name(t)}#{k}", {:sort, 0, :desc}, [{t, {6, 2}, kind}], fn [x] ->
          Nx.sort(x, axis: 0, direction: :desc)
        end),
        build("argsort #{name(t)}#{k}", {:argsort, 1, :desc}, [{t, {3, 9}, kind}], fn [x] ->
          Nx.argsort(x, axis: 1, direction: :desc)
        end),
        build("top_k values #{name(t)}#{k}", {:top_k, 3, 0}, [{t, {2, 7}, kind}], fn [x] ->
          elem(Nx.top_k(x, k: 3), 0)
        end),
        build("top_k indices #{name(t)}#{k}", {:top_k, 3, 1}, [{t, {2, 7}, kind}], fn [x] ->
          elem(Nx.top_k(x, k: 3), 1)
        end)
      ] ++
        for op <- [:cumulative_sum, :cumulative_product, :cumulative_max, :cumulative_min] do
          build(
            "#{op} #{name(t)}#{k}",
            {:cumulative, op, 1, op == :cumulative_max},
            [{t, {3, 11}, kind}],
            fn [x] ->
              apply(Nx, op, [x, [axis: 1, reverse: op == :cumulative_max]])
            end
          )
        end
    end
    |> List.flatten()
  end

  defp windows do
    window = {2, 3}
    strides = [2, 1]
    padding = [{1, 0}, {0, 2}]
    dilations = [1, 2]
    opts = [strides: strides, padding: padding, window_dilations: dilations]

    for t <- [{:f, 32}, {:f, 64}, {:s, 32}, {:u, 8}, {:bf, 16}] do
      # Nx.BinaryBackend 0.7.2's window scatters are wrong with padding (they raise or put
      # values at unpadded offsets) and for f64/bf16 (they raise or write 0.0); compared
      # without padding on the other types.
      for op <- [:window_sum, :window_product, :window_max, :window_min] do
        build(
          "#{op} #{name(t)}",
          {:window_reduce, op, window, strides, padding, dilations},
          [{t, {5, 6}, :small}],
          fn [x] ->
            apply(Nx, op, [x, window, opts])
          end
        )
      end ++
        for op <- [:window_scatter_max, :window_scatter_min], t not in [{:f, 64}, {:bf, 16}] do
          build(
            "#{op} #{name(t)}",
            {:window_scatter, op, {2, 3}, [2, 1], [{0, 0}, {0, 0}]},
            [{t, {4, 5}, :small}, {t, {2, 3}, :small}, {t, {}, :small}],
            fn [x, s, i] ->
              apply(Nx, op, [x, s, i, {2, 3}, [strides: [2, 1], padding: [{0, 0}, {0, 0}]]])
            end
          )
        end
    end
    |> List.flatten()
  end

  defp convs do
    full = fn rank, opts ->
      spatial = rank - 2
      axes = Enum.to_list(0..(rank - 1))

      Keyword.merge(
        [
          strides: List.duplicate(1, spatial),
          padding: List.duplicate({0, 0}, spatial),
          input_dilation: List.duplicate(1, spatial),
          kernel_dilation: List.duplicate(1, spatial),
          feature_group_size: 1,
          batch_group_size: 1,
          input_permutation: axes,
          kernel_permutation: axes,
          output_permutation: axes
        ],
        opts
      )
    end

    for {a, b} <- [
          {{:f, 32}, {:f, 32}},
          {{:f, 64}, {:f, 64}},
          {{:s, 32}, {:s, 32}},
          {{:f, 16}, {:f, 32}}
        ],
        {sa, sk, opts} <- [
          {{1, 2, 7}, {3, 2, 3}, [padding: [{1, 1}]]},
          {{2, 4, 5, 5}, {6, 2, 2, 3},
           [
             strides: [2, 1],
             padding: [{0, 1}, {1, 1}],
             kernel_dilation: [2, 1],
             feature_group_size: 2
           ]},
          {{2, 3, 6}, {4, 3, 2}, [input_dilation: [2], padding: [{1, 0}]]},
          {{4, 2, 5}, {4, 2, 2}, [batch_group_size: 2]},
          {{2, 5, 3}, {4, 3, 2}, [input_permutation: [0, 2, 1], output_permutation: [0, 2, 1]]}
        ] do
      opts = full.(tuple_size(sa), opts)

      build(
        "conv #{name(a)}#{inspect(sa)} #{name(b)}#{inspect(sk)}",
        {:conv, opts},
        [{a, sa, :small}, {b, sk, :small}],
        fn [x, k] ->
          Nx.conv(x, k, opts)
        end
      )
    end
  end

  defp ffts do
    for t <- [{:f, 32}, {:f, 64}, {:s, 32}, {:c, 64}, {:c, 128}],
        {kind, shape, axis, length} <- [
          {:fft, {2, 8}, 1, 8},
          {:ifft, {3, 6}, 1, 6},
          {:fft, {5, 3}, 0, 8},
          {:ifft, {4, 2}, 0, 3}
        ] do
      build(
        "#{kind} #{name(t)} #{inspect(shape)} axis #{axis} length #{length}",
        {:fft, kind, axis, length, 1.0e-10},
        [{t, shape, :small}],
        fn [x] ->
          apply(Nx, kind, [x, [axis: axis, length: length]])
        end
      )
    end
  end

  defp complex do
    for t <- [{:c, 64}, {:c, 128}] do
      for(
        op <- [:exp, :log, :sqrt, :sin, :cos, :negate, :conjugate, :abs, :real, :imag],
        do: build("#{op} #{name(t)}", {:unary, op}, [{t, {2, 5}, :finite}], &apply(Nx, op, &1))
      ) ++
        for(
          op <- [:add, :subtract, :multiply, :divide, :equal, :not_equal],
          do:
            build(
              "#{op} #{name(t)}",
              {:binary, op},
              [{t, {3, 4}, :finite}, {t, {3, 1}, :finite}],
              &apply(Nx, op, &1)
            )
        ) ++
        [
          build("sum #{name(t)}", {:reduce, :sum, [1], false}, [{t, {3, 4}, :finite}], fn [x] ->
            Nx.sum(x, axes: [1])
          end),
          build(
            "dot #{name(t)}",
            {:dot, [1], [], [0], []},
            [{t, {3, 4}, :small}, {t, {4, 2}, :small}],
            fn [x, y] -> Nx.dot(x, y) end
          ),
          build("as_type #{name(t)} f32", {:as_type}, [{t, {7}, :finite}], fn [x] ->
            Nx.as_type(x, {:f, 32})
          end),
          build(
            "gather #{name(t)}",
            {:gather, [0]},
            [{t, {4, 3}, :finite}, {{:s, 64}, {2, 1}, {:index, 4}}],
            fn [x, i] -> Nx.gather(x, i) end
          )
        ]
    end
    |> List.flatten()
  end

  # Ops whose answers changed between Nx releases (see NxVulkan.NxCompat): lu (0.10),
  # argmax/argmin with NaNs, ±Inf to s16 and s16 window max/min (0.8).
  defp versioned do
    lus =
      for {t, shape, kind} <- [
            {{:f, 32}, {4, 4}, :small},
            {{:f, 64}, {3, 3}, :small},
            {{:f, 64}, {2, 3, 3}, :small},
            {{:s, 32}, {3, 3}, :small},
            {{:f, 16}, {3, 3}, :small},
            {{:c, 64}, {3, 3}, :small},
            {{:f, 64}, {4, 4}, :pivots},
            {{:f, 32}, {3, 3}, :nans}
          ],
          part <- 0..2 do
        build(
          "lu #{name(t)}#{inspect(shape)} #{kind} #{elem({"p", "l", "u"}, part)}",
          {:lu, part},
          [{t, shape, kind}],
          fn [x] -> elem(Nx.LinAlg.lu(x), part) end
        )
      end

    args =
      for op <- [:argmax, :argmin],
          t <- @floats,
          {shape, axis, tie} <- [{{4, 5}, 1, :low}, {{4, 5}, nil, :high}, {{6, 3}, 0, :low}] do
        build(
          "#{op} #{name(t)} nans axis #{inspect(axis)} #{tie}",
          {:arg_reduce, op, axis, false, tie},
          [{t, shape, :nans}],
          fn [x] -> apply(Nx, op, [x, [axis: axis, tie_break: tie]]) end
        )
      end

    s16 = {:s, 16}

    converts =
      for t <- @floats do
        build("as_type #{name(t)} -> s16 extremes", {:as_type}, [{t, {12}, :extremes}], fn [x] ->
          Nx.as_type(x, s16)
        end)
      end

    windows =
      for op <- [:window_max, :window_min] do
        opts = [strides: [1, 2], padding: [{1, 1}, {2, 0}], window_dilations: [1, 1]]

        build(
          "#{op} s16 extremes padded",
          {:window_reduce, op, {2, 2}, [1, 2], [{1, 1}, {2, 0}], [1, 1]},
          [{s16, {3, 4}, :extremes}],
          fn [x] -> apply(Nx, op, [x, {2, 2}, opts]) end
        )
      end

    lus ++ args ++ converts ++ windows
  end

  # 8-bit floats and sub-byte integers (Nx >= 0.12): conversions both ways and a few ops,
  # through the widening NxVulkan.Backend does (see NxVulkan.NxCompat).
  defp stored do
    if Version.compare(to_string(Application.spec(:nx, :vsn)), "0.12.0") == :lt do
      []
    else
      stored_types = [{:f, 8}, {:f8_e4m3fn, 8}, {:u, 2}, {:u, 4}, {:s, 2}, {:s, 4}]

      converts =
        for t <- stored_types, other <- [{:f, 32}, {:f, 64}, {:f, 16}, {:s, 32}],
            {from, to} <- [{other, t}, {t, other}] do
          build(
            "as_type #{name(from)} -> #{name(to)}",
            {:stored, {:as_type}, [{from, {13}}], to, {13}},
            [{from, {13}}],
            fn [x] -> Nx.as_type(x, to) end
          )
        end

      ops =
        for t <- stored_types,
            {op, arity} <- [add: 2, multiply: 2, divide: 2, max: 2, exp: 1, negate: 1, sum: 1],
            not (op in [:exp, :divide] and elem(t, 0) in [:u, :s]) do
          specs = List.duplicate({t, {3, 5}}, arity)

          {call, out_type, out_shape} =
            case op do
              :sum -> {{:reduce, :sum, [1], false}, t, {3}}
              _ when arity == 2 -> {{:binary, op}, t, {3, 5}}
              _ -> {{:unary, op}, t, {3, 5}}
            end

          build(
            "#{op} #{name(t)}",
            {:stored, call, specs, out_type, out_shape},
            specs,
            fn xs ->
              r = apply(Nx, op, xs)
              # Nx.sum of sub-byte integers aggregates in a wider type: ask for the stored one
              if op == :sum, do: Nx.sum(hd(xs), axes: [1]) |> Nx.as_type(t), else: r
            end
          )
        end

      moves =
        for t <- [{:f, 8}, {:f8_e4m3fn, 8}] do
          build(
            "transpose #{name(t)} bytes",
            {:stored_move, {:transpose, [1, 0]}, t},
            [{t, {3, 4}, :bytes}],
            fn [x] -> Nx.transpose(x) end
          )
        end

      converts ++ ops ++ moves
    end
  end

  ## Building a case: draw inputs until Nx.BinaryBackend accepts them (it raises where IEEE
  ## would give NaN/Inf, e.g. sqrt(-1) or x/0); fall back to tame inputs after a few tries.

  defp build(name, call, specs, nx) do
    inputs =
      Enum.find_value([:wild, :wild, :wild, :tame, :above_one, :above_one], fn mode ->
        inputs = Enum.map(specs, &input(&1, mode))

        try do
          _ = nx.(inputs)
          inputs
        rescue
          _ -> nil
        end
      end) || raise("no valid inputs for #{name}")

    %{name: name, call: call, inputs: inputs, nx: nx}
  end

  defp input({t, shape}, mode), do: input({t, shape, nil}, mode)

  defp input({type, shape, :bytes}, _mode) do
    bin = for _ <- 1..Tuple.product(shape), into: <<>>, do: <<:rand.uniform(256) - 1>>
    Nx.from_binary(bin, type, backend: Nx.BinaryBackend) |> Nx.reshape(shape)
  end

  defp input({type, shape, kind}, mode) do
    n = Tuple.product(shape)
    values = for _ <- 1..max(n, 1)//1, do: value(type, kind, mode)
    values = Enum.take(values, n)
    Nx.tensor(values, type: type, backend: Nx.BinaryBackend) |> Nx.reshape(shape)
  end

  @specials [:nan, :infinity, :neg_infinity, -0.0, 0.0]

  defp value({:u, 8}, :bool, _), do: Enum.random([0, 1, 2])
  defp value(_type, {:index, bound}, _), do: :rand.uniform(bound) - 1

  defp value({:c, bits}, kind, mode) do
    part = {:f, div(bits, 2)}
    Complex.new(value(part, kind, mode), value(part, kind, mode))
  end

  defp value({:s, 16}, :extremes, _),
    do: Enum.random([-32768, -32767, -32700, -32678, -32677, 32677, 32678, 32700, 32767, 0])

  defp value(type, :extremes, _) do
    if float?(type),
      do: Enum.random([:infinity, :neg_infinity, :nan, 32767.0, -32768.0, 1.5, -2.5, 0.0]),
      else: :rand.uniform(5) - 1
  end

  defp value(type, :nans, _),
    do: if(float?(type) and :rand.uniform(3) == 1, do: :nan, else: Enum.random(-4..4) / 2)

  # Matrices whose pivots tie or vanish: entries from a few small values, zeros often.
  defp value(_type, :pivots, _), do: Enum.random([0, 0, 0, 1, -1, 2])

  defp value(type, :ties, _),
    do: if(float?(type) and :rand.uniform(8) == 1, do: :nan, else: :rand.uniform(4))

  defp value(type, :small, _),
    do: if(float?(type), do: Enum.random(-8..8) / 4, else: :rand.uniform(5) - 1)

  defp value(type, kind, mode) do
    cond do
      float?(type) and mode == :wild and kind != :finite and :rand.uniform(6) == 1 ->
        Enum.random(@specials)

      float?(type) and mode == :wild ->
        (:rand.normal() * :math.pow(10, :rand.uniform(4) - 2)) |> Float.round(6)

      float?(type) and mode == :tame ->
        0.05 + :rand.uniform() * 0.9

      float?(type) ->
        1.05 + :rand.uniform() * 0.9

      mode == :tame ->
        0

      mode == :above_one ->
        :rand.uniform(100)

      true ->
        int(type)
    end
  end

  defp int({:u, bits}), do: :rand.uniform(1 <<< min(bits, 62)) - 1
  defp int({:s, bits}), do: :rand.uniform(1 <<< min(bits, 62)) - (1 <<< (min(bits, 62) - 1))

  defp float?({k, _}), do: k in [:f, :bf, :f8_e4m3fn]

  def name({:bf, 16}), do: "bf16"
  def name({:f8_e4m3fn, 8}), do: "f8_e4m3fn"
  def name({k, b}), do: "#{k}#{b}"
end
