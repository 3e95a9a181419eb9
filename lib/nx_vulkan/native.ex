defmodule NxVulkan.Native do
  @moduledoc false
  # The NIF library (native/nif). Every function here is replaced when the library loads;
  # the bodies only run if it failed to load.
  @on_load :load_nif

  def load_nif do
    path = :filename.join(:code.priv_dir(:nx_vulkan), ~c"libnx_vulkan_nif")

    case :erlang.load_nif(path, 0) do
      :ok -> :ok
      {:error, {:reload, _}} -> :ok
      {:error, reason} -> {:error, reason}
    end
  end

  @nifs [
    devices: 0,
    open: 1,
    info_report: 0,
    device_info: 0,
    stats: 0,
    trim_pool: 0,
    upload: 3,
    download: 1,
    describe: 1,
    deallocate: 1,
    unary: 3,
    binary: 4,
    convert: 2,
    bitcast: 2,
    select: 4,
    clip: 4,
    iota: 3,
    reshape: 2,
    transpose: 2,
    broadcast: 3,
    slice: 4,
    reverse: 2,
    contiguous: 1,
    pad: 3,
    put_slice: 3,
    concatenate: 3,
    reduce: 5,
    arg_reduce: 6,
    dot: 7
  ]

  for {name, arity} <- @nifs do
    args = Macro.generate_arguments(arity, __MODULE__)
    def unquote(name)(unquote_splicing(args)), do: :erlang.nif_error(:nif_not_loaded)
  end
end
