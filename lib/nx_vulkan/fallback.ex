defmodule NxVulkan.FallbackError do
  @moduledoc "Raised in strict mode when an op would leave the device for the host fallback."
  defexception [:op, :message]
end

defmodule NxVulkan.Fallback do
  @moduledoc """
  Bookkeeping for the backend's one host-fallback path.

  `NxVulkan.Backend` runs an op it has no device implementation for by transferring its
  tensors to `Nx.BinaryBackend`, computing there and transferring the result back. Every such
  run passes through `record!/1` here, which

    * counts it per op (`NxVulkan.fallbacks/0`, `NxVulkan.reset_fallbacks/0`),
    * emits the `:telemetry` event `[:nx_vulkan, :fallback]` with measurements `%{count: 1}`
      and metadata `%{op: op}` (when `:telemetry` is loaded), and
    * raises `NxVulkan.FallbackError` in strict mode instead.

  Strict mode is read at call time: the process's own setting (`NxVulkan.strict/1`) wins over
  `config :nx_vulkan, strict: true`.

  This module does not need Nx; the counters live in `:counters` behind `:persistent_term`, so
  no process owns them.
  """

  @key {__MODULE__, :counters}
  @strict_key :nx_vulkan_strict

  @doc false
  def record!(op) when is_atom(op) do
    if strict?() do
      raise NxVulkan.FallbackError,
        op: op,
        message:
          "NxVulkan.Backend has no device implementation of #{op} and strict mode forbids the " <>
            "host fallback (NxVulkan.strict(false) or config :nx_vulkan, strict: false allows it)"
    end

    {counters, index} = table()
    :counters.add(counters, Map.get_lazy(index, op, fn -> slot!(op) end), 1)

    if Code.ensure_loaded?(:telemetry) do
      apply(:telemetry, :execute, [[:nx_vulkan, :fallback], %{count: 1}, %{op: op}])
    end

    :ok
  end

  @doc "Whether strict mode is on for the calling process."
  def strict? do
    case Process.get(@strict_key) do
      nil -> Application.get_env(:nx_vulkan, :strict, false) == true
      value -> value
    end
  end

  @doc "Sets strict mode for the calling process (`nil` follows the app config); returns the old value."
  def strict(value) when is_boolean(value) or is_nil(value) do
    if value == nil, do: Process.delete(@strict_key), else: Process.put(@strict_key, value)
  end

  @doc "Fallback counts since the last reset, as `%{op => count}` (ops never run are left out)."
  def counts do
    {counters, index} = table()
    for {op, i} <- index, (n = :counters.get(counters, i)) > 0, into: %{}, do: {op, n}
  end

  @doc "Sets every fallback count back to zero."
  def reset do
    {counters, index} = table()
    for {_, i} <- index, do: :counters.put(counters, i, 0)
    :ok
  end

  # Slots are handed out on first use; the table grows by replacing the persistent term
  # (rare: once per distinct op name), keeping the old counts.
  @slots 256

  defp table do
    case :persistent_term.get(@key, nil) do
      nil ->
        :global.trans({@key, self()}, fn ->
          case :persistent_term.get(@key, nil) do
            nil ->
              t = {:counters.new(@slots, [:write_concurrency]), %{}}
              :persistent_term.put(@key, t)
              t

            t ->
              t
          end
        end)

      t ->
        t
    end
  end

  defp slot!(op) do
    :global.trans({@key, self()}, fn ->
      {counters, index} = table()

      case index do
        %{^op => i} ->
          i

        _ ->
          i = map_size(index) + 1
          if i > @slots, do: raise(ArgumentError, "too many distinct fallback ops")
          :persistent_term.put(@key, {counters, Map.put(index, op, i)})
          i
      end
    end)
  end
end
