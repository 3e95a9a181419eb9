defmodule NxVulkan.BackendGoldenTest do
  @moduledoc """
  Golden data for CI, where Nx is absent: `test/golden/ops.etf` holds op cases whose outputs
  Nx.BinaryBackend computed (`test/golden/generate.exs`, run by hand with Nx); each is
  replayed through the NxVulkan handle API — the calls NxVulkan.Backend makes for the same
  Nx op — and compared byte for byte.
  """
  use ExUnit.Case, async: true
  @moduletag timeout: 600_000

  Code.require_file("support/golden_replay.exs", Path.dirname(__ENV__.file))

  @golden Path.join(Path.dirname(__ENV__.file), "golden/ops.etf")
  @external_resource @golden
  @data @golden |> File.read!() |> :erlang.binary_to_term()

  # Cases where the engine knowingly differs from Nx.BinaryBackend today, with the reason;
  # each is an engine capability still to come (see the issue's closing note).
  naive =
    "BinaryBackend evaluates a naive formula in f64 (log(1+x), 1/(1+exp(-x)), 1/sqrt(x), (e^x+e^-x)/2, pow(x, 1/3)); the engine's f64 result is the accurate one, 1 ulp apart"

  libm = "f64 result 1 ulp from the host libm that BinaryBackend calls"

  @known_gaps %{
    "log1p f64" => naive,
    "sigmoid f64" => naive,
    "rsqrt f64" => naive,
    "cosh f64" => naive,
    "cbrt f64" => naive <> "; and cbrt(-0.0) must be +0.0",
    "cbrt f16" => "cbrt(-0.0) must be +0.0 (BinaryBackend: -cbrt(-x) only for x < 0)",
    "cbrt bf16" => "cbrt(-0.0) must be +0.0 (BinaryBackend: -cbrt(-x) only for x < 0)",
    "tanh bf16" => "tanh(±Inf) must be NaN (BinaryBackend: sinh/cosh = Inf/Inf)",
    "sinh f64" => libm,
    "tanh f64" => libm,
    "asinh f64" => libm,
    "atanh f64" => libm,
    "erfc f64" => libm,
    "pow f64" => libm,
    "erf_inv f32" => "BinaryBackend uses Giles' single-precision polynomial evaluated in f64",
    "erf_inv f64" => "BinaryBackend uses Giles' single-precision polynomial evaluated in f64",
    "product f32 {4, 3, 2} axes [1]" => "reduce: a NaN product must be the canonical +NaN",
    "product f64 {4, 3, 2} axes [0, 2]" => "reduce: a NaN product must be the canonical +NaN",
    "product f16 {4, 3, 2} axes [1]" => "reduce: a NaN product must be the canonical +NaN"
  }

  test "golden file is recent and large enough" do
    assert @data.nx =~ ~r/^0\.\d+/
    assert length(@data.cases) > 1000
  end

  groups = Enum.group_by(@data.cases, fn c -> c.call |> elem(0) end)

  for {kind, cases} <- groups do
    @cases cases
    test "#{kind}: #{length(cases)} cases equal Nx.BinaryBackend byte for byte" do
      mismatches =
        for c <- @cases,
            not Map.has_key?(@known_gaps, c.name),
            (why = mismatch(c)) != nil,
            do: {c.name, why}

      assert mismatches == [],
             "#{length(mismatches)} of #{length(@cases)} differ:\n" <>
               Enum.map_join(Enum.take(mismatches, 25), "\n", fn {n, w} -> "  #{n}: #{w}" end)
    end
  end

  defp mismatch(%{call: call, inputs: inputs, out: {type, shape, expected}}) do
    handles = for {t, s, bin} <- inputs, do: NxVulkan.upload(bin, t, s)
    result = NxVulkan.GoldenReplay.run(call, handles, type)

    case {NxVulkan.describe(result), NxVulkan.download(result)} do
      {{^type, ^shape}, ^expected} -> nil
      {{^type, ^shape}, got} -> "got #{hex(got, type)}, want #{hex(expected, type)}"
      {other, _} -> "got #{inspect(other)}, want #{inspect({type, shape})}"
    end
  rescue
    e -> "raised #{Exception.message(e)}"
  end

  defp hex(bin, {_, bits}) do
    for(<<x::size(bits)-little <- bin>>, do: Integer.to_string(x, 16))
    |> Enum.take(8)
    |> Enum.join(",")
  end
end
