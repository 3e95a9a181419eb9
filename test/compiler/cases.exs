if Code.ensure_loaded?(Nx) do
  defmodule NxVulkan.CompilerCases.Fns do
    @moduledoc false
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

    defn softmax(x) do
      m = Nx.reduce_max(x, axes: [-1], keep_axes: true)
      e = Nx.exp(x - m)
      e / Nx.sum(e, axes: [-1], keep_axes: true)
    end

    defn logsumexp(x) do
      m = Nx.reduce_max(x, axes: [-1], keep_axes: true)
      Nx.log(Nx.sum(Nx.exp(x - m), axes: [-1], keep_axes: true)) + m
    end

    defn layernorm(x, g, b) do
      mean = Nx.mean(x, axes: [-1], keep_axes: true)
      d = x - mean
      var = Nx.mean(d * d, axes: [-1], keep_axes: true)
      d * Nx.rsqrt(var + 1.0e-5) * g + b
    end

    defn mean_variance(x), do: {Nx.mean(x, axes: [-1]), Nx.variance(x, axes: [-1])}

    defn multi_map(x, y) do
      p = x * y
      %{a: p, b: p + 1, c: Nx.sum(p), d: Nx.exp(p) - p}
    end

    defn dense_relu(x, w, b), do: Nx.max(Nx.dot(x, w) + b, 0)

    defn mlp_loss(w1, b1, w2, b2, x, labels) do
      h = Nx.max(Nx.dot(x, w1) + b1, 0)
      logits = Nx.dot(h, w2) + b2
      m = Nx.reduce_max(logits, axes: [-1], keep_axes: true)
      lse = Nx.log(Nx.sum(Nx.exp(logits - m), axes: [-1], keep_axes: true)) + m
      -Nx.mean(Nx.sum(labels * (logits - lse), axes: [-1]))
    end

    defn mlp_grad(w1, b1, w2, b2, x, labels) do
      grad({w1, b1, w2, b2}, fn {w1, b1, w2, b2} -> mlp_loss(w1, b1, w2, b2, x, labels) end)
    end

    defn sgd_step(w1, b1, w2, b2, x, labels) do
      {g1, gb1, g2, gb2} = mlp_grad(w1, b1, w2, b2, x, labels)
      {w1 - 0.01 * g1, b1 - 0.01 * gb1, w2 - 0.01 * g2, b2 - 0.01 * gb2}
    end

    defn int_ops(a, b) do
      c = Nx.bitwise_and(a * 3 + b, 255) |> Nx.left_shift(2)
      {c, Nx.select(a > b, c, -c), Nx.remainder(c, 7), Nx.quotient(c, 5)}
    end

    defn specials(x) do
      y = Nx.select(Nx.is_nan(x), 0.0, x)
      {y + Nx.Constants.infinity(), Nx.is_infinity(x), Nx.sqrt(Nx.abs(x)) * Nx.Constants.nan(), x * -0.0, Nx.sqrt(Nx.abs(x)) - x}
    end

    defn shapes(x, y) do
      c = Nx.concatenate([x, Nx.transpose(y)], axis: 0)
      p = Nx.pad(c, 0.5, [{1, 2, 0}, {0, -1, 1}])
      s = Nx.slice(p, [1, 2], [3, 4], strides: [2, 1])
      {Nx.reverse(c, axes: [1]) * 2, p, s + 1, Nx.reshape(s, {Nx.size(s)}) |> Nx.exp()}
    end

    defn creation(x) do
      e = Nx.eye(5, type: :f32)
      i = Nx.iota({5, 5}, axis: 1)
      x * e + i
    end

    defn arg_clip(x) do
      c = Nx.clip(x, -1.0, 2.0)
      {Nx.argmax(c, axis: 1), Nx.argmin(x, axis: 0, tie_break: :high), Nx.as_type(c * 100, :s16)}
    end

    defn captured(x), do: x * Nx.tensor([1.0, -2.0, 0.5]) + Nx.tensor(3.0)

    defn reductions(x) do
      {Nx.sum(x), Nx.product(x, axes: [0]), Nx.reduce_min(x, axes: [1], keep_axes: true), Nx.all(x > 0),
       Nx.any(x > 3, axes: [1])}
    end

    # argmax/argmin with NaNs and ±Inf to s16: answers that changed in Nx 0.8
    defn nan_rules(x) do
      {Nx.argmax(x, axis: 1), Nx.argmin(x, axis: 0, tie_break: :high), Nx.argmax(x), Nx.as_type(x * 1.0e5, :s16)}
    end

    defn sorts(x) do
      {Nx.sort(x, axis: 1), Nx.argsort(x, axis: 0, direction: :desc), Nx.cumulative_sum(x, axis: 1) * 2,
       Nx.cumulative_max(x, axis: 0, reverse: true), Nx.cumulative_product(Nx.abs(x) + 0.5, axis: 1)}
    end

    defn conds(x, n) do
      a =
        cond do
          n > 5 -> x * 2
          n < -5 -> Nx.exp(x)
          true -> x - 1
        end

      b = if Nx.sum(x) > 0, do: {x + 1, n}, else: {x - 1, n + 1}
      {a, b}
    end

    # the shape of Axon's gradient accumulation: a loop that runs once, an if inside
    defn while_cond(x, w) do
      {_, w, _} =
        while {x, w, flag = Nx.tensor(1)}, flag do
          if Nx.sum(x) > 0 do
            {x, w - 0.1 * x, Nx.tensor(0)}
          else
            {x, w + x, Nx.tensor(0)}
          end
        end

      w * 2
    end

    defn while_loop(x) do
      {_, x} =
        while {i = 0, x}, i < 3 do
          {i + 1, x * 2}
        end

      x
    end
  end

  defmodule NxVulkan.CompilerCases do
    @moduledoc false
    # Functions compiled by NxVulkan.Compiler in test/compiler_test.exs (against the
    # evaluator, with Nx) and replayed from test/compiler/golden.etf (without Nx).
    alias NxVulkan.CompilerCases.Fns

    @doc "Cases: `{name, fun, args, expected fused kernels or nil}`."
    def all do
      key = Nx.Random.key(42)
      {u, key} = Nx.Random.uniform(key, -3.0, 3.0, shape: {37, 70}, type: :f32)
      {v, key} = Nx.Random.uniform(key, -3.0, 3.0, shape: {37, 70}, type: :f32)
      {w1, key} = Nx.Random.normal(key, 0.0, 0.1, shape: {20, 16}, type: :f32)
      {w2, key} = Nx.Random.normal(key, 0.0, 0.1, shape: {16, 10}, type: :f32)
      {xb, key} = Nx.Random.uniform(key, 0.0, 1.0, shape: {8, 20}, type: :f32)
      {g, key} = Nx.Random.uniform(key, 0.5, 1.5, shape: {70}, type: :f32)
      {bb, _key} = Nx.Random.uniform(key, -1.0, 1.0, shape: {70}, type: :f32)
      b1 = Nx.iota({16}, type: :f32) |> Nx.multiply(0.01)
      b2 = Nx.iota({10}, type: :f32) |> Nx.multiply(-0.02)
      labels = Nx.iota({8, 10}) |> Nx.remainder(10) |> Nx.equal(Nx.iota({8, 1}) |> Nx.remainder(10)) |> Nx.as_type(:f32)
      ia = Nx.iota({9, 13}, type: :s32) |> Nx.subtract(50)
      ib = Nx.iota({13}, type: :s32) |> Nx.multiply(7)

      sp =
        Nx.tensor([:nan, :infinity, :neg_infinity, -0.0, 0.0, 1.0e-40, -1.0e-40, 3.0, -2.5, 1.0e38],
          type: :f32
        )

      [
        {"chain10 f32", &Fns.chain10/2, [u, v], 1},
        {"chain10 f64", &Fns.chain10/2, [Nx.as_type(u, :f64), Nx.as_type(v, :f64)], 1},
        {"chain10 f16", &Fns.chain10/2, [Nx.as_type(u, :f16), Nx.as_type(v, :f16)], 1},
        {"chain10 bf16", &Fns.chain10/2, [Nx.as_type(u, :bf16), Nx.as_type(v, :bf16)], 1},
        {"softmax", &Fns.softmax/1, [u], 0},
        {"softmax f16", &Fns.softmax/1, [Nx.as_type(u, :f16)], 0},
        {"logsumexp", &Fns.logsumexp/1, [v], nil},
        {"layernorm", &Fns.layernorm/3, [u, g, bb], 0},
        {"mean_variance", &Fns.mean_variance/1, [u], nil},
        {"multi_map", &Fns.multi_map/2, [u, v], nil},
        {"dense_relu", &Fns.dense_relu/3, [xb, w1, b1], nil},
        {"mlp_loss", &Fns.mlp_loss/6, [w1, b1, w2, b2, xb, labels], nil},
        {"mlp_grad", &Fns.mlp_grad/6, [w1, b1, w2, b2, xb, labels], nil},
        {"sgd_step", &Fns.sgd_step/6, [w1, b1, w2, b2, xb, labels], nil},
        {"int_ops", &Fns.int_ops/2, [ia, ib], 1},
        {"specials", &Fns.specials/1, [sp], 1},
        {"shapes", &Fns.shapes/2, [Nx.slice(u, [0, 0], [4, 5]), Nx.slice(v, [0, 0], [5, 3])], nil},
        {"creation", &Fns.creation/1, [Nx.slice(u, [0, 0], [5, 5])], nil},
        {"arg_clip", &Fns.arg_clip/1, [u], nil},
        {"captured", &Fns.captured/1, [Nx.slice(u, [0, 0], [4, 3])], 1},
        {"reductions", &Fns.reductions/1, [Nx.slice(u, [0, 0], [6, 9])], nil},
        {"sorts", &Fns.sorts/1, [Nx.slice(u, [0, 0], [7, 33])], nil},
        {"sorts with specials", &Fns.sorts/1, [Nx.reshape(sp, {2, 5})], nil},
        {"nan_rules", &Fns.nan_rules/1, [Nx.reshape(sp, {2, 5})], nil},
        {"conds n=7", &Fns.conds/2, [Nx.slice(u, [0, 0], [3, 4]), Nx.tensor(7)], nil},
        {"conds n=-9", &Fns.conds/2, [Nx.slice(u, [0, 0], [3, 4]), Nx.tensor(-9)], nil},
        {"conds n=0", &Fns.conds/2, [Nx.slice(v, [1, 0], [3, 4]), Nx.tensor(0)], nil}
      ]
    end
  end
end
