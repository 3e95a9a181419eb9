defmodule NxVulkan.PrecisionTest do
  @moduledoc """
  `precision: :fast` from Elixir, without Nx: the per-process and application settings, eager
  ops running the f32 kernels, and a `:fast` plan giving the eager `:fast` bits. (Accuracy is
  checked in Rust: native/engine/tests/math_f32_ulp.rs.)
  """
  use ExUnit.Case, async: false
  import Bitwise

  @f32 {:f, 32}

  setup do
    on_exit(fn -> NxVulkan.precision(nil) end)
  end

  defp f32s(list), do: for(x <- list, into: <<>>, do: <<x::float-32-little>>)
  defp words(bin), do: for(<<w::32-little <- bin>>, do: w)

  # ulps between two finite f32 bit patterns
  defp ord(w) when w >= 0x80000000, do: -(w &&& 0x7FFFFFFF)
  defp ord(w), do: w

  defp fast_kernels(fun) do
    {result, report} = NxVulkan.profile(fun)
    {result, Enum.count(report.kernels, &(&1.name =~ " fast"))}
  end

  test "the process setting wins over the application config; :exact by default" do
    assert NxVulkan.Precision.current() == :exact
    Application.put_env(:nx_vulkan, :precision, :fast)

    try do
      assert NxVulkan.Precision.current() == :fast
      assert NxVulkan.precision(:exact) == nil
      assert NxVulkan.Precision.current() == :exact
      assert NxVulkan.precision(nil) == :exact
      assert NxVulkan.Precision.current() == :fast
    after
      Application.delete_env(:nx_vulkan, :precision)
    end

    assert_raise ArgumentError, ~r/:exact or :fast/, fn -> NxVulkan.precision(:sloppy) end
  end

  test "eager ops run the f32 kernels under :fast, within 2 ulp of :exact's bits" do
    xs = for i <- 0..999, do: (i - 500) / 37.0
    x = NxVulkan.upload(f32s(xs), @f32, {1000})

    for op <- [:exp, :tanh, :sigmoid, :erf] do
      NxVulkan.precision(:exact)
      {exact, 0} = fast_kernels(fn -> NxVulkan.download(NxVulkan.unary(op, x, @f32)) end)
      NxVulkan.precision(:fast)
      {fast, 1} = fast_kernels(fn -> NxVulkan.download(NxVulkan.unary(op, x, @f32)) end)

      for {e, f} <- Enum.zip(words(exact), words(fast)) do
        assert abs(ord(e) - ord(f)) <= 2, "#{op}: #{e} vs #{f}"
      end
    end

    # division: correctly rounded under :exact, faithful (within 1 ulp) under :fast
    NxVulkan.precision(:fast)
    y = NxVulkan.upload(f32s(Enum.map(xs, &(&1 + 0.3))), @f32, {1000})
    {fast, 1} = fast_kernels(fn -> NxVulkan.download(NxVulkan.binary(:divide, x, y, @f32)) end)
    NxVulkan.precision(:exact)
    {exact, 0} = fast_kernels(fn -> NxVulkan.download(NxVulkan.binary(:divide, x, y, @f32)) end)

    for {e, f} <- Enum.zip(words(exact), words(fast)) do
      assert abs(ord(e) - ord(f)) <= 1, "divide: #{e} vs #{f}"
    end
  end

  test "a :fast plan gives the eager :fast bits" do
    p = [{@f32, {257}}]
    nodes = [{:parameter, [], {257}, @f32, 0}, {:exp, [0], {257}, @f32, nil}, {:tanh, [1], {257}, @f32, nil}]
    {plan, {_, 1, _, _, _, _}} = NxVulkan.plan_compile(p, nodes, [2], "fast")
    x = NxVulkan.upload(f32s(for i <- 0..256, do: (i - 128) / 50.0), @f32, {257})
    [out] = NxVulkan.plan_run(plan, [x])
    NxVulkan.precision(:fast)
    eager = NxVulkan.unary(:tanh, NxVulkan.unary(:exp, x, @f32), @f32)
    assert NxVulkan.download(out) == NxVulkan.download(eager)
  end
end
