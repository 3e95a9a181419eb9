defmodule NxVulkan.Precision do
  @moduledoc """
  How float math is evaluated: `:exact` (the default) or `:fast`.

    * `:exact` — f32, f16 and bf16 elementwise math is computed in f64 with our own f64 library
      and rounded once: `Nx.BinaryBackend`'s bits, the same on every device.
    * `:fast` — f32, f16 and bf16 elementwise math is computed in f32 with our own f32 library
      (within 2 ulp of the correctly rounded result; add, subtract, multiply, divide and sqrt
      correctly rounded, so equal to `:exact`), the same bits on every device; ops the f32
      library lacks (sin, cos, tan, atan, cbrt, ...) give `:exact`'s result rounded to f32. In
      `NxVulkan.Compiler` plans, `:fast` also makes dots accumulate in f32.

  Eager ops (`NxVulkan.Backend`, `NxVulkan.unary/3`, `NxVulkan.binary/4`) read it at call
  time: the process's own setting (`NxVulkan.precision/1`) wins over
  `config :nx_vulkan, precision: :fast`. `NxVulkan.Compiler` takes it as its `:precision`
  option, defaulting to the same setting.
  """

  @key :nx_vulkan_precision

  @doc "The precision in effect for the calling process."
  def current do
    case Process.get(@key) do
      nil -> check!(Application.get_env(:nx_vulkan, :precision, :exact))
      value -> value
    end
  end

  @doc "Sets the calling process's precision (`nil` follows the app config); returns the old setting."
  def put(value) when value in [:exact, :fast, nil] do
    if value == nil, do: Process.delete(@key), else: Process.put(@key, value)
  end

  def put(other), do: check!(other)

  @doc false
  def check!(value) when value in [:exact, :fast], do: value

  def check!(other) do
    raise ArgumentError, "NxVulkan precision must be :exact or :fast, got #{inspect(other)}"
  end
end
