defmodule NxVulkan.Native do
  @moduledoc false
  # The NIF library (native/nif). Every function here is replaced when the library loads;
  # the bodies only run if it failed to load.
  #
  # The stubs are derived at compile time from the `#[rustler::nif]` functions in
  # native/nif/src/*.rs (their names and arities, `env` not counted), so adding a NIF in Rust
  # needs no list kept in step here; a module the VM cannot match to its library fails loudly.
  @on_load :load_nif

  def load_nif do
    path = :filename.join(:code.priv_dir(:nx_vulkan), ~c"libnx_vulkan_nif")

    case :erlang.load_nif(path, 0) do
      :ok -> :ok
      {:error, {:reload, _}} -> :ok
      {:error, reason} -> {:error, reason}
    end
  end

  sources = Path.wildcard(Path.expand("../../native/nif/src/*.rs", __DIR__))

  for source <- sources do
    @external_resource source
  end

  # Splits a parameter list at top-level commas (generic and tuple types contain commas).
  split_params = fn params ->
    {parts, current, _depth} =
      params
      |> String.graphemes()
      |> Enum.reduce({[], "", 0}, fn
        c, {parts, cur, d} when c in ["(", "<", "["] -> {parts, cur <> c, d + 1}
        c, {parts, cur, d} when c in [")", ">", "]"] -> {parts, cur <> c, d - 1}
        ",", {parts, cur, 0} -> {[cur | parts], "", 0}
        c, {parts, cur, d} -> {parts, cur <> c, d}
      end)

    [current | parts] |> Enum.map(&String.trim/1) |> Enum.reject(&(&1 == "")) |> Enum.reverse()
  end

  nifs =
    for source <- sources,
        [_, name, params] <-
          Regex.scan(~r/#\[rustler::nif[^\]]*\]\s*(?:pub\s+)?fn\s+(\w+)\s*(?:<[^>]*>)?\s*\(([^{]*)\)\s*(?:->[^{]*)?\{/s, File.read!(source)) do
      arity = params |> split_params.() |> Enum.reject(&String.contains?(&1, "Env<")) |> length()
      {String.to_atom(name), arity}
    end

  if nifs == [], do: raise("no NIF functions found in native/nif/src")

  @doc false
  def __nifs__, do: unquote(Enum.sort(nifs))

  for {name, arity} <- nifs do
    args = Macro.generate_arguments(arity, __MODULE__)
    def unquote(name)(unquote_splicing(args)), do: :erlang.nif_error(:nif_not_loaded)
  end
end
