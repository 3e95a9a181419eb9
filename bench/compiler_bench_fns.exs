# The functions bench/compiler_bench.exs and bench/profile_compiler.exs compile.
defmodule BenchFns do
  import Nx.Defn

  defn chain10(x, y) do
    x
    |> Nx.multiply(2.0)
    |> Nx.add(y)
    |> Nx.tanh()
    |> Nx.subtract(x)
    |> Nx.abs()
    |> Nx.max(y)
    |> Nx.exp()
    |> Nx.divide(3.0)
    |> Nx.negate()
    |> Nx.min(x)
  end

  # chain10 with tanh and exp replaced by arithmetic: what the chain costs where no
  # transcendental function is evaluated (memory-bound if the kernel is), beside chain10 it
  # says how much of chain10's time is the f32 math library's.
  defn chain10_arith(x, y) do
    x
    |> Nx.multiply(2.0)
    |> Nx.add(y)
    |> Nx.multiply(0.5)
    |> Nx.subtract(x)
    |> Nx.abs()
    |> Nx.max(y)
    |> Nx.add(1.0)
    |> Nx.divide(3.0)
    |> Nx.negate()
    |> Nx.min(x)
  end

  defn softmax(x) do
    m = Nx.reduce_max(x, axes: [-1], keep_axes: true)
    e = Nx.exp(x - m)
    e / Nx.sum(e, axes: [-1], keep_axes: true)
  end

  defn layernorm(x, g, b) do
    mean = Nx.mean(x, axes: [-1], keep_axes: true)
    d = x - mean
    var = Nx.mean(d * d, axes: [-1], keep_axes: true)
    d * Nx.rsqrt(var + 1.0e-5) * g + b
  end

  defn loss(w1, b1, w2, b2, x, labels) do
    h = Nx.max(Nx.dot(x, w1) + b1, 0)
    logits = Nx.dot(h, w2) + b2
    m = Nx.reduce_max(logits, axes: [-1], keep_axes: true)
    lse = Nx.log(Nx.sum(Nx.exp(logits - m), axes: [-1], keep_axes: true)) + m
    -Nx.mean(Nx.sum(labels * (logits - lse), axes: [-1]))
  end

  defn step(w1, b1, w2, b2, x, labels) do
    {g1, gb1, g2, gb2} = grad({w1, b1, w2, b2}, fn {w1, b1, w2, b2} -> loss(w1, b1, w2, b2, x, labels) end)
    {w1 - 0.01 * g1, b1 - 0.01 * gb1, w2 - 0.01 * g2, b2 - 0.01 * gb2}
  end

end
