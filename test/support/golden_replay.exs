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

  # Nx's slice lengths are spans; the handle API takes element counts.
  def run({:slice, start, lengths, strides}, [x], _out) do
    NxVulkan.slice(x, start, Enum.zip_with(lengths, strides, &div(&1 + &2 - 1, &2)), strides)
  end
end
