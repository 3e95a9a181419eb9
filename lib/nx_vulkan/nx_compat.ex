defmodule NxVulkan.NxCompat do
  @moduledoc """
  The answers that depend on which Nx is installed, composed from `NxVulkan` handle ops.

  `NxVulkan.Backend` must print what the installed Nx's `Nx.BinaryBackend` prints, and a few
  of its answers changed between Nx releases:

    * `lu/6`: up to Nx 0.9, BinaryBackend pre-pivots the matrix and runs Doolittle in f64
      (`lu_doolittle/5`); since Nx 0.10 it runs `Nx.LinAlg.LU`'s defn — Gaussian elimination
      with partial pivoting, in the output's float type (`lu_gaussian/4`).
    * `arg_reduce/7`: up to Nx 0.7, argmax/argmin keep index 0 when the first element is NaN
      and skip NaNs otherwise (the engine's kernel rule); since Nx 0.8 a NaN is always taken,
      so the answer is the index of the last NaN where there is one.
    * `as_type/3` and `window_reduce/7`: Nx 0.7's `Nx.Type` gives s16 the limits
      -32678/32677 (what ±Inf converts to, and the window max/min start value); since
      Nx 0.8 they are -32768/32767.

  Each function takes the Nx version (`"0.7.2"`, `"0.13.1"`, ...) whose rules it follows, so
  CI replays golden cases of several Nx versions without Nx (`test/nx_backend_golden_test.exs`).
  Nothing here needs Nx.
  """

  import Bitwise, only: [<<<: 2]

  @s64 {:s, 64}
  @u8 {:u, 8}

  @doc "Whether `vsn` (a version string) is at least `min`."
  def at_least?(vsn, min), do: Version.compare(vsn, min) != :lt

  ## argmax / argmin

  @doc """
  `NxVulkan.arg_reduce/6` with the NaN rule of Nx `vsn`: since Nx 0.8, the index of the last
  NaN along the axis where there is a NaN (BinaryBackend takes every NaN it meets, and nothing
  else replaces a NaN); else the engine's answer, which already follows the ordered rule.
  """
  def arg_reduce(op, x, axis, keep, tie, out, vsn) do
    {type, shape} = NxVulkan.describe(x)
    ordered = NxVulkan.arg_reduce(op, x, axis, keep, tie, out)

    if float?(type) and at_least?(vsn, "0.8.0"),
      do: nan_wins(x, shape, ordered, axis, keep, out, :high),
      else: ordered
  end

  # `ordered` where the axis holds no NaN, else the index of its first (`:low`) or last
  # (`:high`) NaN.
  defp nan_wins(x, shape, ordered, axis, keep, out, which) do
    nan = NxVulkan.unary(:is_nan, x, @u8)
    at_nan = NxVulkan.arg_reduce(:argmax, nan, axis, keep, which, out)
    axes = if axis, do: [axis], else: Enum.to_list(0..(tuple_size(shape) - 1)//1)
    any = NxVulkan.reduce(:any, nan, axes, keep and axis != nil, @u8)
    NxVulkan.select(any, at_nan, ordered, out)
  end

  ## s16 limits

  @doc "The s16 limits `{min, max}` of Nx `vsn`'s `Nx.Type.min/max_finite_binary`."
  def s16_limits(vsn), do: if(at_least?(vsn, "0.8.0"), do: {-32768, 32767}, else: {-32678, 32677})

  @doc """
  `NxVulkan.as_type/2` with Nx `vsn`'s s16 limits for ±Inf (the engine gives Nx 0.7's).
  """
  def as_type(x, out, vsn) do
    {type, _} = NxVulkan.describe(x)
    converted = NxVulkan.as_type(x, out)

    if out == {:s, 16} and float?(type) and at_least?(vsn, "0.8.0") do
      {lo, hi} = s16_limits(vsn)
      inf = NxVulkan.unary(:is_infinity, x, @u8)
      zero = NxVulkan.upload(<<0::size(elem(type, 1))>>, type, {})
      positive = NxVulkan.binary(:greater, x, zero, @u8)
      limit = NxVulkan.select(positive, s16(hi), s16(lo), out)
      NxVulkan.select(inf, limit, converted, out)
    else
      converted
    end
  end

  @doc """
  `NxVulkan.window_reduce/6` with Nx `vsn`'s s16 start values for `:window_max`/`:window_min`
  (`Nx.Type.min_binary`/`max_binary`): since Nx 0.8 the window runs in s32 over the input
  padded with -32768 (or 32767), so every window holds an element and the start value never
  wins; the result converts back exactly.
  """
  def window_reduce(op, x, window, strides, padding, dilations, vsn) do
    {type, _} = NxVulkan.describe(x)

    if type == {:s, 16} and op in [:window_max, :window_min] and at_least?(vsn, "0.8.0") do
      {lo, hi} = s16_limits(vsn)
      s32 = {:s, 32}

      fill =
        NxVulkan.upload(<<if(op == :window_max, do: lo, else: hi)::signed-32-little>>, s32, {})

      padded =
        NxVulkan.pad(
          NxVulkan.as_type(x, s32),
          fill,
          Enum.map(padding, fn {l, h} -> {l, h, 0} end)
        )

      none = Enum.map(padding, fn _ -> {0, 0} end)
      r = NxVulkan.window_reduce(op, padded, window, strides, none, dilations)
      NxVulkan.as_type(r, type)
    else
      NxVulkan.window_reduce(op, x, window, strides, padding, dilations)
    end
  end

  defp s16(v), do: NxVulkan.upload(<<v::signed-16-little>>, {:s, 16}, {})

  ## LU

  @doc """
  `{p, l, u}` of the batched square matrices `a` as Nx `vsn`'s BinaryBackend computes them:
  `p` of type `p_type`, `l` and `u` of the float or complex type `out_type`. `eps` is used by
  the Nx 0.7 algorithm only.
  """
  def lu(a, p_type, out_type, eps, vsn) do
    if at_least?(vsn, "0.10.0") do
      lu_gaussian(a, p_type, out_type, vsn)
    else
      work = if complex?(out_type), do: {:c, 128}, else: {:f, 64}
      {p, l, u} = lu_doolittle(a, p_type, eps, work)
      {p, NxVulkan.as_type(l, out_type), NxVulkan.as_type(u, out_type)}
    end
  end

  # Common pieces over batched matrices of shape batch ++ [n, n].
  defp frame(a) do
    {_, shape} = NxVulkan.describe(a)
    rank = tuple_size(shape)
    n = elem(shape, rank - 1)
    batch = shape |> Tuple.to_list() |> Enum.take(rank - 2)
    {n, batch, length(batch)}
  end

  defp int(x), do: NxVulkan.upload(<<x::signed-64-little>>, @s64, {})

  # A scalar of `type` holding the f64 with these bits (complex: imaginary part 0).
  defp f64_bits(bits, type) do
    NxVulkan.as_type(NxVulkan.upload(<<bits::64-little>>, {:f, 64}, {}), type)
  end

  # Rows j and m (m: one index per batch, shape batch ++ [1]) of `a` (batch ++ [n, n]) and
  # `perm` (batch ++ [n]) swapped, per batch.
  defp swap_rows(a, perm, j, m, n, batch, br) do
    dims = fn list -> List.to_tuple(batch ++ list) end
    iota_n = NxVulkan.iota(@s64, {n}, 0)
    at_j = NxVulkan.binary(:equal, iota_n, int(j), @u8)
    at_m = NxVulkan.binary(:equal, iota_n, m, @u8)
    rows = NxVulkan.select(at_m, int(j), iota_n, @s64)
    rows = NxVulkan.select(at_j, m, rows, @s64)
    rows = NxVulkan.contiguous(NxVulkan.broadcast(rows, dims.([n]), Enum.to_list(0..br)))
    grid = NxVulkan.reshape(rows, dims.([n, 1]))
    grid = NxVulkan.contiguous(NxVulkan.broadcast(grid, dims.([n, n]), Enum.to_list(0..(br + 1))))
    {NxVulkan.take_along_axis(a, grid, br), NxVulkan.take_along_axis(perm, rows, br)}
  end

  # p[r][c] = (r == perm[c]).
  defp permutation(perm, n, batch, br, p_type) do
    dims = List.to_tuple(batch ++ [n, n])
    rows = NxVulkan.iota(@s64, dims, br)
    cols = NxVulkan.broadcast(perm, dims, Enum.to_list(0..(br - 1)//1) ++ [br + 1])
    NxVulkan.as_type(NxVulkan.binary(:equal, rows, cols, @u8), p_type)
  end

  @doc """
  Nx >= 0.10 (`Nx.LinAlg.LU.lu/1`, the defn BinaryBackend runs), op for op in `out_type` and
  vectorised over batches: for each column k, the pivot is the argmax of |a_ik| over i >= k
  (-Inf above; Nx `vsn`'s NaN rule); rows k and pivot are swapped; unless a_kk == 0, the
  column below the diagonal is divided by a_kk; then a - select(i > k and j > k, a_ik * a_kj,
  0). L = tril(a, -1) + I and U = triu(a), each a select against 0 as Nx's tril/triu.
  """
  def lu_gaussian(a, p_type, work, vsn) do
    {n, batch, br} = frame(a)
    dims = fn list -> List.to_tuple(batch ++ list) end
    ones = List.duplicate(1, br + 2)
    zeros = List.duplicate(0, br)
    real = if complex?(work), do: {:f, div(elem(work, 1), 2)}, else: work
    neg_inf = f64_bits(0xFFF0000000000000, real)
    zero = f64_bits(0, work)
    rows = NxVulkan.iota(@s64, {n, 1}, 0)
    cols = NxVulkan.iota(@s64, {1, n}, 1)
    row_ids = NxVulkan.iota(@s64, {n}, 0)

    a = NxVulkan.as_type(a, work)
    perm = NxVulkan.iota(@s64, dims.([n]), br)

    column = fn a, k -> NxVulkan.slice(a, zeros ++ [0, k], batch ++ [n, 1], ones) end

    {a, perm} =
      Enum.reduce(0..(n - 1)//1, {a, perm}, fn k, {a, perm} ->
        magnitude = NxVulkan.unary(:abs, NxVulkan.reshape(column.(a, k), dims.([n])), real)
        below = NxVulkan.binary(:greater_equal, row_ids, int(k), @u8)
        masked = NxVulkan.select(below, magnitude, neg_inf, real)
        pivot = arg_reduce(:argmax, masked, br, true, :low, @s64, vsn)
        {a, perm} = swap_rows(a, perm, k, pivot, n, batch, br)

        diagonal = NxVulkan.slice(a, zeros ++ [k, k], batch ++ [1, 1], ones)
        col = column.(a, k)
        after_k = NxVulkan.binary(:greater, rows, int(k), @u8)

        scaled =
          NxVulkan.select(after_k, NxVulkan.binary(:divide, col, diagonal, work), col, work)

        pivot_zero = NxVulkan.binary(:equal, diagonal, zero, @u8)
        scaled = NxVulkan.select(pivot_zero, col, scaled, work)
        a = NxVulkan.put_slice(a, zeros ++ [0, k], scaled)

        a =
          if k < n - 1 do
            l_col = column.(a, k)
            u_row = NxVulkan.slice(a, zeros ++ [k, 0], batch ++ [1, n], ones)
            outer = NxVulkan.binary(:multiply, l_col, u_row, work)

            trailing =
              NxVulkan.binary(
                :logical_and,
                NxVulkan.binary(:greater, rows, int(k), @u8),
                NxVulkan.binary(:greater, cols, int(k), @u8),
                @u8
              )

            NxVulkan.binary(:subtract, a, NxVulkan.select(trailing, outer, zero, work), work)
          else
            a
          end

        {a, perm}
      end)

    strictly_lower = NxVulkan.binary(:greater, rows, cols, @u8)
    eye = NxVulkan.as_type(NxVulkan.binary(:equal, rows, cols, @u8), work)
    l = NxVulkan.binary(:add, NxVulkan.select(strictly_lower, a, zero, work), eye, work)
    u = NxVulkan.select(strictly_lower, zero, a, work)
    {permutation(perm, n, batch, br, p_type), l, u}
  end

  @doc """
  Nx <= 0.9 (`Nx.BinaryBackend.lu/3`), vectorised over batches: first its pre-pivoting on the
  input (for each column j, swap in the row at or below j with the largest |a_ij|, the first
  on ties, a NaN above all), then Doolittle on the pivoted matrix in `work` (f64 or c128), one step per
  row/column: row t of U is a_tj - sum_{k<t} l_tk u_kj, column t of L is
  (a_it - sum_{k<t} l_ik u_kt) / u_tt (±Inf when u_tt is 0, as BinaryBackend), each value
  below `eps` in magnitude set to 0 before it is used again. Sums in index order, so the
  results match BinaryBackend bit for bit.
  """
  def lu_doolittle(a, p_type, eps, work) do
    {n, batch, br} = frame(a)
    f64 = {:f, 64}
    im = if complex?(work), do: <<0.0::float-64-little>>, else: <<>>
    scalar = fn bits -> NxVulkan.upload(<<bits::64-little>> <> im, work, {}) end
    ones = List.duplicate(1, br + 2)
    zeros = List.duplicate(0, br)
    batch_axes = Enum.to_list(0..(br - 1)//1)
    dims = fn list -> List.to_tuple(batch ++ list) end

    mat = fn ref, {r0, c0}, {rows, cols} ->
      NxVulkan.slice(ref, zeros ++ [r0, c0], batch ++ [rows, cols], ones)
    end

    # sum_k x[..., i, k] * y[..., k, j] over the batches, in index order.
    dot = fn x, y -> NxVulkan.dot(x, [br + 1], batch_axes, y, [br], batch_axes, work) end

    a = NxVulkan.as_type(a, work)
    perm = NxVulkan.iota(@s64, dims.([n]), br)

    # Pre-pivoting: rows of `a` (and `perm`) swapped per batch, all on the device.
    {a, perm} =
      Enum.reduce(0..(n - 2)//1, {a, perm}, fn j, {a, perm} ->
        col = NxVulkan.unary(:abs, mat.(a, {j, j}, {n - j, 1}), f64)
        col = NxVulkan.reshape(col, dims.([n - j]))
        # BinaryBackend's own search here, not Nx.argmax: Enum.sort_by(rows, &abs/1, &>=/2),
        # where a NaN is the atom :nan, above every number: the first NaN, else the first
        # largest magnitude.
        m = NxVulkan.arg_reduce(:argmax, col, br, true, :low, @s64)
        m = nan_wins(col, NxVulkan.describe(col) |> elem(1), m, br, true, @s64, :low)
        m = NxVulkan.binary(:add, m, int(j), @s64)
        swap_rows(a, perm, j, m, n, batch, br)
      end)

    zero = scalar.(0)
    one = NxVulkan.broadcast(scalar.(0x3FF0000000000000), dims.([1, 1]), [])
    eps = NxVulkan.upload(<<eps / 1::float-64-little>>, f64, {})
    zeros_of = fn list -> NxVulkan.broadcast(zero, dims.(list), []) end

    clean = fn v ->
      small = NxVulkan.binary(:less, NxVulkan.unary(:abs, v, f64), eps, @u8)
      NxVulkan.select(small, zero, v, work)
    end

    {l, u} =
      Enum.reduce(0..(n - 1)//1, {nil, nil}, fn t, {l, u} ->
        # Row t of U, columns t..n-1.
        a_row = mat.(a, {t, t}, {1, n - t})

        urow =
          if t == 0,
            do: a_row,
            else:
              NxVulkan.binary(
                :subtract,
                a_row,
                dot.(mat.(l, {t, 0}, {1, t}), mat.(u, {0, t}, {t, n - t})),
                work
              )

        urow = clean.(urow)

        urow =
          if t == 0,
            do: urow,
            else: NxVulkan.concatenate([zeros_of.([1, t]), urow], br + 1, work)

        u = if u, do: NxVulkan.concatenate([u, urow], br, work), else: urow

        # Column t of L: 0 above the diagonal, 1 on it, then rows t+1..n-1.
        parts = if t == 0, do: [one], else: [zeros_of.([t, 1]), one]

        parts =
          if t < n - 1 do
            a_col = mat.(a, {t + 1, t}, {n - t - 1, 1})

            {num, s} =
              if t == 0 do
                {a_col, zeros_of.([n - t - 1, 1])}
              else
                s = dot.(mat.(l, {t + 1, 0}, {n - t - 1, t}), mat.(u, {0, t}, {t, 1}))
                {NxVulkan.binary(:subtract, a_col, s, work), s}
              end

            u_tt = mat.(u, {t, t}, {1, 1})
            value = NxVulkan.binary(:divide, num, u_tt, work)

            # BinaryBackend writes ±Inf for a zero real pivot (a complex pivot never
            # compares equal to 0 there, so it divides).
            value =
              if complex?(work) do
                value
              else
                inf =
                  NxVulkan.select(
                    NxVulkan.binary(:greater_equal, a_col, s, @u8),
                    scalar.(0x7FF0000000000000),
                    scalar.(0xFFF0000000000000),
                    work
                  )

                pivot_zero = NxVulkan.binary(:equal, u_tt, zero, @u8)
                NxVulkan.select(pivot_zero, inf, value, work)
              end

            parts ++ [clean.(value)]
          else
            parts
          end

        col = NxVulkan.concatenate(parts, br, work)
        l = if l, do: NxVulkan.concatenate([l, col], br + 1, work), else: col
        {l, u}
      end)

    {permutation(perm, n, batch, br, p_type), l, u}
  end

  defp float?({k, _}), do: k in [:f, :bf]
  defp complex?({:c, _}), do: true
  defp complex?(_), do: false

  ## 8-bit floats and sub-byte integers (Nx >= 0.12)
  ##
  ## The engine has no kernels for them: NxVulkan.Backend keeps their tensors in u8 device
  ## buffers (one byte per f8, sub-byte integers packed first-element-in-the-high-bits as Nx
  ## packs them), widens operands for every op and narrows results, with Nx's rules:
  ##
  ##   * {:f, 8} (E5M2) widens to f16 (Nx.Floating.load_f8: the f16 whose high byte it is,
  ##     but subnormal bytes read as 2^-15 * (1 + m/4), zero bytes as the folded zero literal,
  ##     NaN canonical). Nx writes an f8 by rounding the f64 result to f16 and keeping the
  ##     high byte — the engine's f16 result (f64 math rounded once) truncated. NaN is 0x7E.
  ##   * {:f8_e4m3fn, 8} widens to f64, exactly, and narrows from the f64 result with
  ##     Nx.Floating.dump_f8_e4m3fn's rule: clamp to ±448, exponent floor(log2 |x|) (taken
  ##     from the f64's bits: the one place it can differ, for f64 values a few ulps below a
  ##     power of two where the host's log2 rounds up), mantissa round((|x|/2^e - 1) * 8)
  ##     capped at 7 (6 at the top exponent), subnormals round(|x| * 512) capped at 7; ±Inf
  ##     saturate, NaN is 0x7F.
  ##   * u2/u4 widen to u8, s2/s4 to s8 (sign-extended); results keep their low bits (Nx wraps
  ##     the same way); ±Inf converts to the type's limits.

  @stored [{:f, 8}, {:f8_e4m3fn, 8}, {:u, 2}, {:u, 4}, {:s, 2}, {:s, 4}]

  @doc "Whether `type` is one the engine stores but has no kernels for."
  def stored?(type), do: type in @stored

  @doc "The type a stored type's ops run in."
  def wide({:f, 8}), do: {:f, 16}
  def wide({:f8_e4m3fn, 8}), do: {:f, 64}
  def wide({:u, _}), do: {:u, 8}
  def wide({:s, _}), do: {:s, 8}

  @doc "A scalar handle of `type` (f16, f32, f64, bf16 or an integer type) holding `value`."
  def scalar({:f, 16}, :nan), do: NxVulkan.upload(<<0x7E00::16-little>>, {:f, 16}, {})
  def scalar({:f, 64}, :nan), do: NxVulkan.upload(<<0x7FF8000000000000::64-little>>, {:f, 64}, {})
  def scalar({:f, 16}, :neg_zero), do: NxVulkan.upload(<<0x8000::16-little>>, {:f, 16}, {})
  def scalar({:f, 16} = t, v), do: NxVulkan.upload(<<v / 1::float-16-little>>, t, {})
  def scalar({:f, 64} = t, v), do: NxVulkan.upload(<<v / 1::float-64-little>>, t, {})
  def scalar({k, bits} = t, 0) when k in [:f, :bf], do: NxVulkan.upload(<<0::size(bits)>>, t, {})

  def scalar({_, bits} = t, v) when is_integer(v),
    do: NxVulkan.upload(<<v::size(bits)-little>>, t, {})

  defp u8_const(values, shape),
    do: NxVulkan.upload(IO.iodata_to_binary(Enum.map(values, &<<&1>>)), {:u, 8}, shape)

  # The stored bytes of `t` as a handle of its wide type and shape.
  @doc """
  The wide-type handle (`wide/1`) of a stored tensor: `raw` its u8 buffer, `type` and `shape`
  its Nx type and shape.
  """
  def decode_stored(raw, type, shape) do
    case type do
      {:f, 8} ->
        decode_e5m2(raw)

      {:f8_e4m3fn, 8} ->
        decode_e4m3fn(raw)

      {kind, bits} ->
        per = div(8, bits)
        {_, bytes} = NxVulkan.describe(raw)
        nb = elem(bytes, 0)
        shifts = u8_const(for(j <- 0..(per - 1), do: (per - 1 - j) * bits), {1, per})
        grid = NxVulkan.broadcast(NxVulkan.reshape(raw, {nb, 1}), {nb, per}, [0, 1])
        v = NxVulkan.binary(:right_shift, grid, shifts, {:u, 8})
        v = NxVulkan.binary(:bitwise_and, v, scalar({:u, 8}, (1 <<< bits) - 1), {:u, 8})
        v = NxVulkan.reshape(NxVulkan.contiguous(v), {nb * per})
        n = Tuple.product(shape)
        v = NxVulkan.slice(v, [0], [n], [1])

        v =
          if kind == :s do
            s8 = {:s, 8}

            up =
              NxVulkan.binary(
                :left_shift,
                NxVulkan.bitcast(NxVulkan.contiguous(v), s8),
                scalar(s8, 8 - bits),
                s8
              )

            NxVulkan.binary(:right_shift, up, scalar(s8, 8 - bits), s8)
          else
            v
          end

        NxVulkan.reshape(NxVulkan.contiguous(v), shape)
    end
  end

  # Nx.Floating.load_f8: the f16 whose high byte it is, except that a subnormal byte
  # (exponent 0, mantissa m != 0) reads as 2^-15 * (1 + m/4), and zero bytes read as the
  # literal in `if(sign == 0, do: 0.0, else: -0.0)`, which the compiler folds to -0.0 on
  # OTP < 27 (where 0.0 =:= -0.0); NaN bytes give the canonical NaN.
  defp decode_e5m2(raw) do
    u8 = {:u, 8}
    f16 = {:f, 16}
    u16 = NxVulkan.as_type(raw, {:u, 16})
    h = NxVulkan.bitcast(NxVulkan.binary(:left_shift, u16, scalar({:u, 16}, 8), {:u, 16}), f16)
    low = NxVulkan.binary(:bitwise_and, raw, scalar(u8, 0x7F), u8)
    m = NxVulkan.binary(:bitwise_and, raw, scalar(u8, 3), u8)

    subnormal =
      NxVulkan.binary(:logical_and, NxVulkan.binary(:less, low, scalar(u8, 4), u8), m, u8)

    four_plus_m = NxVulkan.as_type(NxVulkan.binary(:add, m, scalar(u8, 4), u8), f16)
    sub = NxVulkan.binary(:multiply, four_plus_m, scalar(f16, :math.pow(2, -17)), f16)
    sign = NxVulkan.binary(:greater_equal, raw, scalar(u8, 0x80), u8)
    sub = NxVulkan.select(sign, NxVulkan.unary(:negate, sub, f16), sub, f16)
    h = NxVulkan.select(subnormal, sub, h, f16)
    h = NxVulkan.select(NxVulkan.unary(:is_nan, h, u8), scalar(f16, :nan), h, f16)

    if otp_signed_zero_patterns?() do
      h
    else
      zero = NxVulkan.binary(:equal, low, scalar(u8, 0), u8)
      NxVulkan.select(zero, scalar(f16, :neg_zero), h, f16)
    end
  end

  defp decode_e4m3fn(raw) do
    u64 = {:u, 64}
    f64 = {:f, 64}
    b = NxVulkan.as_type(raw, u64)
    sign = NxVulkan.binary(:greater_equal, raw, scalar({:u, 8}, 0x80), {:u, 8})

    e =
      NxVulkan.binary(
        :bitwise_and,
        NxVulkan.binary(:right_shift, b, scalar(u64, 3), u64),
        scalar(u64, 15),
        u64
      )

    m = NxVulkan.binary(:bitwise_and, b, scalar(u64, 7), u64)
    # normal: 2^(e-7) * (1 + m/8) as f64 bits; subnormal: m * 2^-9
    bits =
      NxVulkan.binary(
        :bitwise_or,
        NxVulkan.binary(
          :left_shift,
          NxVulkan.binary(:add, e, scalar(u64, 1016), u64),
          scalar(u64, 52),
          u64
        ),
        NxVulkan.binary(:left_shift, m, scalar(u64, 49), u64),
        u64
      )

    normal = NxVulkan.bitcast(bits, f64)
    sub = NxVulkan.binary(:multiply, NxVulkan.as_type(m, f64), scalar(f64, 0.001953125), f64)
    e_zero = NxVulkan.binary(:equal, e, scalar(u64, 0), {:u, 8})
    v = NxVulkan.select(e_zero, sub, normal, f64)
    v = NxVulkan.select(sign, NxVulkan.unary(:negate, v, f64), v, f64)

    nan =
      NxVulkan.binary(
        :equal,
        NxVulkan.binary(:bitwise_and, b, scalar(u64, 0x7F), u64),
        scalar(u64, 0x7F),
        {:u, 8}
      )

    NxVulkan.select(nan, scalar(f64, :nan), v, f64)
  end

  @doc "The stored u8 buffer of `type` (and `shape`) for a handle `h` of its wide type."
  def encode_stored(h, type, shape) do
    case type do
      {:f, 8} ->
        hi =
          NxVulkan.binary(
            :right_shift,
            NxVulkan.bitcast(h, {:u, 16}),
            scalar({:u, 16}, 8),
            {:u, 16}
          )

        hi = NxVulkan.as_type(hi, {:u, 8})
        nan = NxVulkan.unary(:is_nan, h, {:u, 8})
        NxVulkan.select(nan, scalar({:u, 8}, 0x7E), hi, {:u, 8})

      {:f8_e4m3fn, 8} ->
        encode_e4m3fn(h)

      {_, bits} ->
        per = div(8, bits)
        n = Tuple.product(shape)
        nb = div(n * bits + 7, 8)
        v = NxVulkan.reshape(NxVulkan.contiguous(h), {n})

        v =
          if wide(type) == {:s, 8}, do: NxVulkan.bitcast(NxVulkan.contiguous(v), {:u, 8}), else: v

        v = NxVulkan.binary(:bitwise_and, v, scalar({:u, 8}, (1 <<< bits) - 1), {:u, 8})
        v = NxVulkan.pad(v, scalar({:u, 8}, 0), [{0, nb * per - n, 0}])
        v = NxVulkan.reshape(NxVulkan.contiguous(v), {nb, per})
        shifts = u8_const(for(j <- 0..(per - 1), do: (per - 1 - j) * bits), {1, per})
        v = NxVulkan.binary(:left_shift, v, shifts, {:u, 8})
        NxVulkan.reduce(:sum, v, [1], false, {:u, 8})
    end
  end

  defp encode_e4m3fn(h) do
    f64 = {:f, 64}
    u64 = {:u, 64}
    u8 = {:u, 8}
    nan = NxVulkan.unary(:is_nan, h, u8)
    negative = NxVulkan.binary(:less, h, scalar(f64, 0), u8)
    clamped = NxVulkan.clip(h, scalar(f64, -448.0), scalar(f64, 448.0), f64)
    a = NxVulkan.unary(:abs, clamped, f64)
    bits = NxVulkan.bitcast(a, u64)
    biased = NxVulkan.binary(:right_shift, bits, scalar(u64, 52), u64)
    # exp = floor(log2 a) + 7 = biased - 1016 (a is 0 or >= 2^-1074; 0 is handled below)
    exp =
      NxVulkan.binary(
        :subtract,
        NxVulkan.as_type(biased, {:s, 64}),
        scalar({:s, 64}, 1016),
        {:s, 64}
      )

    significand =
      NxVulkan.bitcast(
        NxVulkan.binary(
          :bitwise_or,
          NxVulkan.binary(:bitwise_and, bits, scalar(u64, 0x000FFFFFFFFFFFFF), u64),
          scalar(u64, 0x3FF0000000000000),
          u64
        ),
        f64
      )

    round_to = fn x -> NxVulkan.unary(:round, x, f64) end

    m_norm =
      round_to.(
        NxVulkan.binary(
          :multiply,
          NxVulkan.binary(:subtract, significand, scalar(f64, 1.0), f64),
          scalar(f64, 8.0),
          f64
        )
      )

    m_norm = NxVulkan.clip(m_norm, scalar(f64, 0.0), scalar(f64, 7.0), f64)
    top = NxVulkan.binary(:equal, exp, scalar({:s, 64}, 15), u8)

    m_norm =
      NxVulkan.select(top, NxVulkan.binary(:min, m_norm, scalar(f64, 6.0), f64), m_norm, f64)

    m_sub = round_to.(NxVulkan.binary(:multiply, a, scalar(f64, 512.0), f64))
    m_sub = NxVulkan.binary(:min, m_sub, scalar(f64, 7.0), f64)
    sub = NxVulkan.binary(:less_equal, exp, scalar({:s, 64}, 0), u8)
    exp_bits = NxVulkan.as_type(NxVulkan.binary(:max, exp, scalar({:s, 64}, 0), {:s, 64}), u8)
    m = NxVulkan.as_type(NxVulkan.select(sub, m_sub, m_norm, f64), u8)
    e = NxVulkan.select(sub, scalar(u8, 0), exp_bits, u8)
    byte = NxVulkan.binary(:bitwise_or, NxVulkan.binary(:left_shift, e, scalar(u8, 3), u8), m, u8)

    byte =
      NxVulkan.select(
        negative,
        NxVulkan.binary(:bitwise_or, byte, scalar(u8, 0x80), u8),
        byte,
        u8
      )

    # ±0: 0x00, and -0.0 0x80 where the VM tells -0.0 from +0.0 in patterns (OTP >= 27)
    zero = NxVulkan.binary(:equal, h, scalar(f64, 0), u8)
    sign_bit = NxVulkan.binary(:less, NxVulkan.bitcast(h, {:s, 64}), scalar({:s, 64}, 0), u8)
    neg_zero = NxVulkan.binary(:logical_and, zero, sign_bit, u8)
    neg_zero_byte = if otp_signed_zero_patterns?(), do: 0x80, else: 0x00

    byte =
      NxVulkan.select(
        zero,
        NxVulkan.select(neg_zero, scalar(u8, neg_zero_byte), scalar(u8, 0), u8),
        byte,
        u8
      )

    NxVulkan.select(nan, scalar(u8, 0x7F), byte, u8)
  end

  defp otp_signed_zero_patterns?,
    do: String.to_integer(to_string(:erlang.system_info(:otp_release))) >= 27

  @doc """
  Nx.as_type from `in_type` to `out_type` where either is stored (8-bit floats, sub-byte
  integers): `x` is the stored u8 buffer or a handle of `in_type`; the result likewise.
  Through the wide types; ±Inf to a sub-byte type gives its limits.
  """
  def as_type_stored(x, in_type, out_type, shape, vsn) do
    src = if stored?(in_type), do: decode_stored(x, in_type, shape), else: x
    src_type = if stored?(in_type), do: wide(in_type), else: in_type
    target = if stored?(out_type), do: wide(out_type), else: out_type
    r = as_type(src, target, vsn)

    r =
      case out_type do
        {k, bits} when k in [:u, :s] and bits < 8 and elem(src_type, 0) in [:f, :bf] ->
          {lo, hi} =
            if k == :u,
              do: {0, (1 <<< bits) - 1},
              else: {-(1 <<< (bits - 1)), (1 <<< (bits - 1)) - 1}

          inf = NxVulkan.unary(:is_infinity, src, @u8)
          positive = NxVulkan.binary(:greater, src, scalar(src_type, 0), @u8)
          limit = NxVulkan.select(positive, scalar(target, hi), scalar(target, lo), target)
          NxVulkan.select(inf, limit, r, target)

        _ ->
          r
      end

    if stored?(out_type), do: encode_stored(r, out_type, shape), else: r
  end
end
