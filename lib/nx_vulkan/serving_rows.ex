defmodule NxVulkan.ServingRows do
  @moduledoc false
  # Token-id rows through an Nx.Serving batch, for NxVulkan.Encoder.serving/2 and
  # NxVulkan.LLM.serving/2. Nx.Batch concatenates equal-shaped rows across callers, so each
  # row's ids are padded with zeros to a fixed width and a lengths vector says where each ends
  # (a padding row has length 0). Nx is called through Module.concat: this compiles without it.

  @doc "Lists of ids (each at most `width` long) → an Nx.Batch of {ids [n, width], lengths [n]}, u32."
  def batch(rows, width) do
    nx = nx!()
    padded = for row <- rows, into: <<>>, do: <<u32s(row)::binary, 0::size((width - length(row)) * 32)>>
    ids = padded |> nx.from_binary(:u32) |> nx.reshape({length(rows), width})
    lengths = nx.from_binary(u32s(Enum.map(rows, &length/1)), :u32)
    Module.concat([Nx, Batch]).concatenate([{ids, lengths}])
  end

  @doc "A batch's {ids, lengths} tensors → each row's ids as a little-endian u32 binary."
  def rows(ids, lengths) do
    nx = nx!()
    {_n, width} = nx.shape(ids)
    bin = nx.to_binary(ids)
    for {len, i} <- Enum.with_index(u32_list(nx.to_binary(lengths))), do: :binary.part(bin, i * width * 4, len * 4)
  end

  def u32s(list), do: for(v <- list, into: <<>>, do: <<v::little-unsigned-32>>)
  def u32_list(bin), do: for(<<v::little-unsigned-32 <- bin>>, do: v)

  def nx! do
    if Code.ensure_loaded?(Nx), do: Nx, else: raise(ArgumentError, "this needs Nx, which is not loaded")
  end
end
