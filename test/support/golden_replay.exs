defmodule NxVulkan.GoldenReplay do
  @moduledoc """
  Replays an op case (see `NxVulkan.NxCases`) through the `NxVulkan` handle API — no Nx
  needed, so CI can check the engine's numbers against outputs Nx.BinaryBackend produced.
  """

  @doc "Runs `call` on device handles `xs`, giving a result of type `out`."
  def run({:unary, op}, [x], out), do: NxVulkan.unary(op, x, out)
  def run({:binary, op}, [a, b], out), do: NxVulkan.binary(op, a, b, out)
  def run({:as_type}, [x], out), do: NxVulkan.as_type(x, out)
  def run({:bitcast}, [x], out), do: NxVulkan.bitcast(x, out)
  def run({:select}, [p, a, b], out), do: NxVulkan.select(p, a, b, out)
  def run({:clip}, [x, lo, hi], out), do: NxVulkan.clip(x, lo, hi, out)
  def run({:reduce, op, axes, keep}, [x], out), do: NxVulkan.reduce(op, x, axes, keep, out)

  def run({:arg_reduce, op, axis, keep, tie}, [x], out),
    do: NxVulkan.arg_reduce(op, x, axis, keep, tie, out)

  def run({:dot, ca, ba, cb, bb}, [a, b], out), do: NxVulkan.dot(a, ca, ba, b, cb, bb, out)
  def run({:transpose, perm}, [x], _out), do: NxVulkan.transpose(x, perm)
  def run({:reverse, axes}, [x], _out), do: NxVulkan.reverse(x, axes)
  def run({:pad, config}, [x, v], _out), do: NxVulkan.pad(x, v, config)
  def run({:concatenate, axis}, xs, out), do: NxVulkan.concatenate(xs, axis, out)
  def run({:put_slice, start}, [x, u], _out), do: NxVulkan.put_slice(x, start, u)
  def run({:broadcast, shape, axes}, [x], _out), do: NxVulkan.broadcast(x, shape, axes)
  def run({:iota, type, shape, axis}, [], _out), do: NxVulkan.iota(type, shape, axis)

  def run({:gather, axes}, [x, i], _out), do: NxVulkan.gather(x, i, axes)
  def run({:take, axis}, [x, i], _out), do: NxVulkan.take(x, i, axis)
  def run({:take_along_axis, axis}, [x, i], _out), do: NxVulkan.take_along_axis(x, i, axis)
  def run({:indexed, op, axes}, [x, i, u], out), do: NxVulkan.indexed(op, x, i, u, axes, out)
  def run({:sort, axis, dir}, [x], _out), do: NxVulkan.sort(x, axis, dir)
  def run({:argsort, axis, dir}, [x], out), do: NxVulkan.argsort(x, axis, dir, false, out)

  def run({:top_k, k, part}, [x], out),
    do: NxVulkan.top_k(x, k, if(part == 1, do: out, else: {:s, 64})) |> elem(part)

  def run({:cumulative, op, axis, rev}, [x], _out), do: NxVulkan.cumulative(op, x, axis, rev)

  def run({:window_reduce, op, window, strides, padding, dilations}, [x], _out),
    do: NxVulkan.window_reduce(op, x, window, strides, padding, dilations)

  def run({:window_scatter, op, window, strides, padding}, [x, s, i], out),
    do: NxVulkan.window_scatter(op, x, s, i, window, strides, padding, out)

  def run({:conv, opts}, [x, k], out), do: NxVulkan.conv(x, k, opts, out)

  def run({:fft, kind, axis, length, eps}, [x], _out),
    do: apply(NxVulkan, kind, [x, axis, length, eps])

  # Nx's slice lengths are spans; the handle API takes element counts.
  def run({:slice, start, lengths, strides}, [x], _out) do
    NxVulkan.slice(x, start, Enum.zip_with(lengths, strides, &div(&1 + &2 - 1, &2)), strides)
  end

  @naive "BinaryBackend evaluates a naive formula in f64 (log(1+x), 1/(1+exp(-x)), 1/sqrt(x), (e^x+e^-x)/2, pow(x, 1/3)); the engine's f64 result is the accurate one, 1 ulp apart"

  @libm "f64 result 1 ulp from the host libm that BinaryBackend calls"

  @doc """
  Cases where the engine knowingly differs from Nx.BinaryBackend today, with the reason;
  each is an engine fix still to come.
  """
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
end
