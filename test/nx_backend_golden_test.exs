defmodule NxVulkan.BackendGoldenTest do
  @moduledoc """
  Golden data for CI, where Nx is absent: each `test/golden/ops-<nx version>.etf` holds op
  cases whose outputs that Nx's Nx.BinaryBackend computed (`test/golden/generate.exs`, run by
  hand with Nx); each is replayed through the NxVulkan handle API — the calls
  NxVulkan.Backend makes for the same Nx op, with that Nx version's rules where they changed
  (`NxVulkan.NxCompat`) — and compared byte for byte.
  """
  use ExUnit.Case, async: true
  @moduletag timeout: 600_000

  Code.require_file("support/golden_replay.exs", Path.dirname(__ENV__.file))

  @files Path.wildcard(Path.join(Path.dirname(__ENV__.file), "golden/ops-*.etf"))

  test "golden files of Nx 0.7 and Nx 0.13 are there and large enough" do
    versions = for f <- @files, do: (f |> File.read!() |> :erlang.binary_to_term()).nx
    assert Enum.any?(versions, &String.starts_with?(&1, "0.7.")), inspect(versions)
    assert Enum.any?(versions, &String.starts_with?(&1, "0.13.")), inspect(versions)

    for f <- @files,
        do: assert(length((f |> File.read!() |> :erlang.binary_to_term()).cases) > 1000)
  end

  for file <- @files do
    @external_resource file
    data = file |> File.read!() |> :erlang.binary_to_term()
    vsn = data.nx
    complex_vsn = data[:complex]
    groups = Enum.group_by(data.cases, fn c -> c.call |> elem(0) end)

    for {kind, cases} <- groups do
      @cases cases
      @vsn vsn
      @complex_vsn complex_vsn
      test "Nx #{vsn} #{kind}: #{length(cases)} cases equal Nx.BinaryBackend byte for byte" do
        gaps = NxVulkan.GoldenReplay.known_gaps(@complex_vsn)

        mismatches =
          for c <- @cases,
              not Map.has_key?(gaps, c.name),
              (why = mismatch(c, @vsn)) != nil,
              do: {c.name, why}

        assert mismatches == [],
               "#{length(mismatches)} of #{length(@cases)} differ:\n" <>
                 Enum.map_join(Enum.take(mismatches, 25), "\n", fn {n, w} -> "  #{n}: #{w}" end)
      end
    end
  end

  defp mismatch(%{call: call, inputs: inputs, out: {type, shape, expected}}, vsn) do
    handles = for {t, s, bin} <- inputs, do: NxVulkan.GoldenReplay.upload(bin, t, s)
    result = NxVulkan.GoldenReplay.run(call, handles, type, vsn)

    case NxVulkan.GoldenReplay.output(result, type, shape) do
      {^type, ^shape, ^expected} -> nil
      {^type, ^shape, got} -> "got #{hex(got, type)}, want #{hex(expected, type)}"
      {t, s, _} -> "got #{inspect({t, s})}, want #{inspect({type, shape})}"
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
