defmodule NxVulkan.GoldenReplay do
  @moduledoc """
  Replays an op case (see `NxVulkan.NxCases`) through the `NxVulkan` handle API — no Nx
  needed, so CI can check the engine's numbers against outputs Nx.BinaryBackend produced.
  """

  @doc """
  Runs `call` on device handles `xs`, giving a result of type `out`, with the answers of Nx
  `vsn` where they changed between releases (`NxVulkan.NxCompat`).
  """
  def run(call, xs, out, vsn)

  def run({:as_type}, [x], out, vsn), do: NxVulkan.NxCompat.as_type(x, out, vsn)

  def run({:arg_reduce, op, axis, keep, tie}, [x], out, vsn),
    do: NxVulkan.NxCompat.arg_reduce(op, x, axis, keep, tie, out, vsn)

  def run({:window_reduce, op, window, strides, padding, dilations}, [x], _out, vsn),
    do: NxVulkan.NxCompat.window_reduce(op, x, window, strides, padding, dilations, vsn)

  # Nx.LinAlg.lu: p has the input's type, l and u its float type.
  def run({:lu, part}, [x], _out, vsn) do
    {type, _} = NxVulkan.describe(x)
    float = if elem(type, 0) in [:s, :u], do: {:f, 32}, else: type
    x |> NxVulkan.NxCompat.lu(type, float, 1.0e-10, vsn) |> elem(part)
  end

  # 8-bit floats and sub-byte integers: stored inputs widened, the op in the wide type, a
  # stored result narrowed (NxVulkan.NxCompat), as NxVulkan.Backend runs them.
  def run({:stored, {:as_type}, [{in_type, shape}], out_type, _}, [x], _out, vsn),
    do: NxVulkan.NxCompat.as_type_stored(x, in_type, out_type, shape, vsn)

  def run({:stored, call, specs, out_type, out_shape}, xs, _out, vsn) do
    alias NxVulkan.NxCompat, as: C

    wide =
      Enum.zip_with(xs, specs, fn x, {t, s} ->
        if C.stored?(t), do: C.decode_stored(x, t, s), else: x
      end)

    target = if C.stored?(out_type), do: C.wide(out_type), else: out_type
    r = run(call, wide, target, vsn)
    if C.stored?(out_type), do: C.encode_stored(r, out_type, out_shape), else: r
  end

  # Element moves copy an f8 tensor's bytes.
  def run({:stored_move, call, _type}, xs, _out, vsn), do: run(call, xs, {:u, 8}, vsn)

  def run(call, xs, out, _vsn), do: run(call, xs, out)

  @doc "A device handle for golden input bytes of Nx type `type` (stored types as u8 bytes)."
  def upload(bin, type, shape) do
    cond do
      not NxVulkan.NxCompat.stored?(type) -> NxVulkan.upload(bin, type, shape)
      elem(type, 1) == 8 -> NxVulkan.upload(bin, {:u, 8}, shape)
      true -> NxVulkan.upload(pad_bytes(bin), {:u, 8}, {byte_size(pad_bytes(bin))})
    end
  end

  @doc "`{type, shape, bytes}` of a result handle holding a tensor of Nx type `type`, `shape`."
  def output(handle, type, shape) do
    if NxVulkan.NxCompat.stored?(type) do
      bits = Tuple.product(shape) * elem(type, 1)
      <<bin::bitstring-size(bits), _::bitstring>> = NxVulkan.download(handle)
      {type, shape, bin}
    else
      {t, s} = NxVulkan.describe(handle)
      {t, s, NxVulkan.download(handle)}
    end
  end

  defp pad_bytes(bin), do: <<bin::bitstring, 0::size(rem(8 - rem(bit_size(bin), 8), 8))>>

  defp run({:unary, op}, [x], out), do: NxVulkan.unary(op, x, out)
  defp run({:binary, op}, [a, b], out), do: NxVulkan.binary(op, a, b, out)
  defp run({:bitcast}, [x], out), do: NxVulkan.bitcast(x, out)
  defp run({:select}, [p, a, b], out), do: NxVulkan.select(p, a, b, out)
  defp run({:clip}, [x, lo, hi], out), do: NxVulkan.clip(x, lo, hi, out)
  defp run({:reduce, op, axes, keep}, [x], out), do: NxVulkan.reduce(op, x, axes, keep, out)

  defp run({:dot, ca, ba, cb, bb}, [a, b], out), do: NxVulkan.dot(a, ca, ba, b, cb, bb, out)
  defp run({:transpose, perm}, [x], _out), do: NxVulkan.transpose(x, perm)
  defp run({:reverse, axes}, [x], _out), do: NxVulkan.reverse(x, axes)
  defp run({:pad, config}, [x, v], _out), do: NxVulkan.pad(x, v, config)
  defp run({:concatenate, axis}, xs, out), do: NxVulkan.concatenate(xs, axis, out)
  defp run({:put_slice, start}, [x, u], _out), do: NxVulkan.put_slice(x, start, u)
  defp run({:broadcast, shape, axes}, [x], _out), do: NxVulkan.broadcast(x, shape, axes)
  defp run({:iota, type, shape, axis}, [], _out), do: NxVulkan.iota(type, shape, axis)

  defp run({:gather, axes}, [x, i], _out), do: NxVulkan.gather(x, i, axes)
  defp run({:take, axis}, [x, i], _out), do: NxVulkan.take(x, i, axis)
  defp run({:take_along_axis, axis}, [x, i], _out), do: NxVulkan.take_along_axis(x, i, axis)
  defp run({:indexed, op, axes}, [x, i, u], out), do: NxVulkan.indexed(op, x, i, u, axes, out)
  defp run({:sort, axis, dir}, [x], _out), do: NxVulkan.sort(x, axis, dir)
  defp run({:argsort, axis, dir}, [x], out), do: NxVulkan.argsort(x, axis, dir, false, out)

  defp run({:top_k, k, part}, [x], out),
    do: NxVulkan.top_k(x, k, if(part == 1, do: out, else: {:s, 64})) |> elem(part)

  defp run({:cumulative, op, axis, rev}, [x], _out), do: NxVulkan.cumulative(op, x, axis, rev)

  defp run({:window_scatter, op, window, strides, padding}, [x, s, i], out),
    do: NxVulkan.window_scatter(op, x, s, i, window, strides, padding, out)

  defp run({:conv, opts}, [x, k], out), do: NxVulkan.conv(x, k, opts, out)

  defp run({:fft, kind, axis, length, eps}, [x], _out),
    do: apply(NxVulkan, kind, [x, axis, length, eps])

  # Nx's slice lengths are spans; the handle API takes element counts.
  defp run({:slice, start, lengths, strides}, [x], _out) do
    NxVulkan.slice(x, start, Enum.zip_with(lengths, strides, &div(&1 + &2 - 1, &2)), strides)
  end

  @naive "BinaryBackend evaluates a naive formula in f64 (log(1+x), 1/(1+exp(-x)), 1/sqrt(x), (e^x+e^-x)/2, pow(x, 1/3)); the engine's f64 result is the accurate one, 1 ulp apart"

  @libm "f64 result 1 ulp from the host libm that BinaryBackend calls"

  @doc """
  Cases where the engine knowingly differs from Nx.BinaryBackend today, with the reason;
  each is an engine fix still to come.
  """
  def known_gaps(complex_vsn), do: Map.merge(known_gaps(), known_gaps_complex(complex_vsn))

  def known_gaps,
    do: %{
      "log1p f64" => @naive,
      "sigmoid f64" => @naive,
      "rsqrt f64" => @naive,
      "cosh f64" => @naive,
      "cbrt f64" => @naive <> "; and cbrt(-0.0) must be +0.0",
      "cbrt f16" => "cbrt(-0.0) must be +0.0 (BinaryBackend: -cbrt(-x) only for x < 0)",
      "cbrt bf16" => "cbrt(-0.0) must be +0.0 (BinaryBackend: -cbrt(-x) only for x < 0)",
      "tanh bf16" => "tanh(±Inf) must be NaN (BinaryBackend: sinh/cosh = Inf/Inf)",
      "sinh f64" => @libm,
      "tanh f64" => @libm,
      "asinh f64" => @libm,
      "atanh f64" => @libm,
      "erfc f64" => @libm,
      "pow f64" => @libm,
      "erf_inv f32" => "BinaryBackend uses Giles' single-precision polynomial evaluated in f64",
      "erf_inv f64" => "BinaryBackend uses Giles' single-precision polynomial evaluated in f64",
      "cos c128" =>
        "complex cos/sin in c128: a part 1 ulp from BinaryBackend's Complex.cos (libm cosh/sinh)",
      "product f32 {4, 3, 2} axes [1]" => "reduce: a NaN product must be the canonical +NaN",
      "product f64 {4, 3, 2} axes [0, 2]" => "reduce: a NaN product must be the canonical +NaN",
      "product f16 {4, 3, 2} axes [1]" => "reduce: a NaN product must be the canonical +NaN"
    }

  @complex_divide "BinaryBackend's ifft ends with Complex.divide(z, n); complex 0.6 takes the general formula, (re*n + im*0)/(n*n + 0), two roundings, where complex 0.5 and the engine divide each part by n once (the correctly rounded quotient)"

  # Cases of a golden file made with complex >= 0.6 (what Nx 0.13.1 gets here; Hex would give
  # it complex 0.7) where the engine knowingly differs.
  defp known_gaps_complex(vsn) do
    if vsn != nil and Version.compare(vsn, "0.6.0") != :lt do
      for name <- [
            "ifft f64 {3, 6} axis 1 length 6",
            "ifft f64 {4, 2} axis 0 length 3",
            "ifft c128 {3, 6} axis 1 length 6",
            "ifft c128 {4, 2} axis 0 length 3"
          ],
          into: %{},
          do: {name, @complex_divide}
    else
      %{}
    end
  end
end
