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

  @known_gaps NxVulkan.GoldenReplay.known_gaps()

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
