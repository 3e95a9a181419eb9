defmodule NxVulkan.Encoder do
  @moduledoc """
  Sentence embeddings from BERT-family checkpoints (BERT, MiniLM, BGE/E5-style) on the device.

  A checkpoint folder holds `config.json`, `model.safetensors` and `tokenizer.json`, plus
  sentence-transformers' `modules.json`, `sentence_bert_config.json` and pooling config where
  present (mean or CLS pooling, L2 normalisation, max tokens: as sentence-transformers runs it).
  Weights are uploaded once; each `embed/3` call is one batch, recorded and submitted as one
  forward pass. An input's embedding does not depend on its batch-mates (bit for bit).

      {:ok, encoder} = NxVulkan.Encoder.load("/path/to/all-MiniLM-L6-v2")
      [vector] = NxVulkan.Encoder.embed(encoder, ["hello world"])

  Precisions (`:precision` option of `load/2`): `:fp32` (default), `:compensated`, `:fp16`,
  `:bf16`. A precision the device cannot run is an error at load, never a silent switch.

  With Nx loaded, `embed/3` can return an `Nx` tensor (`format: :tensor`) and `serving/2`
  builds an `Nx.Serving` (batching across callers and nodes comes from Nx.Serving).
  """

  alias NxVulkan.{Native, ServingRows}

  @enforce_keys [:ref, :model, :device, :precision, :dimensions, :max_tokens]
  defstruct [:ref, :path, :model, :device, :precision, :dimensions, :max_tokens, :pooling, :normalize, :weight_bytes]

  @type t :: %__MODULE__{}

  @precisions [:fp32, :compensated, :fp16, :bf16]

  @doc """
  Loads a checkpoint folder onto the device in use (`NxVulkan.open/1`, else the default).

  Options: `:precision` (#{Enum.map_join(@precisions, ", ", &inspect/1)}), `:max_tokens`
  (override the tokens kept per input, at most the model's position limit).

  Returns `{:ok, encoder}` or `{:error, exception}` (a missing or damaged checkpoint, an
  unsupported architecture or precision).
  """
  def load(path, opts \\ []) do
    opts = Keyword.validate!(opts, precision: :fp32, max_tokens: nil)
    precision = opts[:precision]

    unless precision in @precisions do
      raise ArgumentError, "unknown precision #{inspect(precision)} (expected one of #{inspect(@precisions)})"
    end

    max_tokens = opts[:max_tokens] || 0

    unless is_integer(max_tokens) and max_tokens >= 0 do
      raise ArgumentError, ":max_tokens must be a positive integer, got #{inspect(opts[:max_tokens])}"
    end

    path = Path.expand(to_string(path))

    case Native.encoder_load(path, Atom.to_string(precision), max_tokens) do
      {:ok, ref} -> {:ok, from_ref(ref, path)}
      {:error, {:argument, message}} -> {:error, %ArgumentError{message: message}}
      {:error, {kind, message}} -> {:error, %NxVulkan.Error{kind: kind, message: message}}
    end
  end

  @doc "As `load/2`, raising on error."
  def load!(path, opts \\ []) do
    case load(path, opts) do
      {:ok, encoder} -> encoder
      {:error, exception} -> raise exception
    end
  end

  defp from_ref(ref, path) do
    {{model, device, precision}, {dims, max_tokens, pooling, normalize, bytes}} = Native.encoder_info(ref) |> unwrap!()

    %__MODULE__{
      ref: ref,
      path: path,
      model: model,
      device: device,
      precision: Enum.find(@precisions, &(Atom.to_string(&1) == precision)),
      dimensions: dims,
      max_tokens: max_tokens,
      pooling: if(pooling == "cls", do: :cls, else: :mean),
      normalize: normalize,
      weight_bytes: bytes
    }
  end

  @doc """
  Embeds a string or a list of strings.

  Options:
    * `:format` — `:list` (default: a list of float lists), `:binary` (one little-endian f32
      binary per input), `:detailed` (a map per input: `:embedding` (list), `:tokens`,
      `:truncated` — whether the input was cut at `max_tokens`, as the reference does), or
      `:tensor` (an `{n, dimensions}` f32 `Nx` tensor; needs Nx)
    * `:batch_size` — inputs per forward pass (default: all in one)

  Bad inputs (not UTF-8, not strings) raise `ArgumentError`; device failures raise
  `NxVulkan.Error`.
  """
  def embed(encoder, texts, opts \\ [])

  def embed(%__MODULE__{} = encoder, text, opts) when is_binary(text), do: embed(encoder, [text], opts)

  def embed(%__MODULE__{} = encoder, texts, opts) when is_list(texts) do
    opts = Keyword.validate!(opts, format: :list, batch_size: nil)

    Enum.each(texts, fn
      t when is_binary(t) -> :ok
      other -> raise ArgumentError, "embed/3 expects strings, got #{inspect(other)}"
    end)

    batches =
      case opts[:batch_size] do
        nil -> [texts]
        n when is_integer(n) and n > 0 -> Enum.chunk_every(texts, n)
        n -> raise ArgumentError, ":batch_size must be a positive integer, got #{inspect(n)}"
      end

    results = Enum.flat_map(batches, fn [] -> []; batch -> Native.encoder_embed(encoder.ref, batch) |> unwrap!() end)
    format(results, opts[:format], encoder.dimensions)
  end

  @doc """
  The token ids each text becomes (special tokens included, truncated at `max_tokens`):
  a list of `{ids, truncated}`.
  """
  def tokenize(%__MODULE__{} = encoder, texts) when is_list(texts) do
    Native.encoder_tokenize(encoder.ref, texts)
    |> unwrap!()
    |> Enum.map(fn {bin, truncated} -> {for(<<id::little-unsigned-32 <- bin>>, do: id), truncated} end)
  end

  defp format(results, :binary, _dims), do: Enum.map(results, &elem(&1, 0))
  defp format(results, :list, _dims), do: Enum.map(results, &floats(elem(&1, 0)))

  defp format(results, :detailed, _dims) do
    Enum.map(results, fn {bin, tokens, truncated} -> %{embedding: floats(bin), tokens: tokens, truncated: truncated} end)
  end

  defp format(results, :tensor, dims) do
    nx = nx!()
    bin = IO.iodata_to_binary(Enum.map(results, &elem(&1, 0)))
    bin |> nx.from_binary(:f32) |> nx.reshape({length(results), dims})
  end

  defp format(_results, other, _dims),
    do: raise(ArgumentError, "unknown format #{inspect(other)} (expected :list, :binary, :detailed or :tensor)")

  defp floats(bin), do: for(<<v::little-float-32 <- bin>>, do: v)

  @doc """
  An `Nx.Serving` embedding strings with `encoder` (needs Nx). Run it with
  `Nx.Serving.run(serving, texts)` or start it under a supervisor and call
  `Nx.Serving.batched_run/2`; each call answers an `{n, dimensions}` f32 tensor.

  Options: `:batch_size` (the serving's batch size, default 32). Texts are tokenized on the
  caller's side; the serving process runs the forward passes.
  """
  def serving(%__MODULE__{} = encoder, opts \\ []) do
    opts = Keyword.validate!(opts, batch_size: 32)
    serving_module = Module.concat(__MODULE__, Serving)
    nx_serving = Module.concat([Nx, Serving])
    nx!()

    nx_serving.new(serving_module, encoder)
    |> nx_serving.batch_size(opts[:batch_size])
    |> nx_serving.client_preprocessing(&serving_preprocess(encoder, &1))
    |> nx_serving.client_postprocessing(fn {result, _metadata}, _info -> result end)
  end

  @doc false
  # Texts → {ids, lengths}: ids padded with zeros to max_tokens (Nx.Batch concatenates
  # equal-shaped rows); lengths say where each input ends.
  def serving_preprocess(encoder, text) when is_binary(text), do: serving_preprocess(encoder, [text])

  def serving_preprocess(%__MODULE__{} = encoder, texts) when is_list(texts) do
    rows = for {ids, _} <- tokenize(encoder, texts), do: ids
    {ServingRows.batch(rows, encoder.max_tokens), :ok}
  end

  @doc false
  # Runs one Nx.Batch of {ids, lengths} (padding rows have length 0 and give zero vectors).
  def serving_run(%__MODULE__{} = encoder, ids, lengths) do
    nx = nx!()
    rows = ServingRows.rows(ids, lengths)
    n = length(rows)
    real = Enum.filter(rows, &(byte_size(&1) > 0))
    vectors = if real == [], do: [], else: Native.encoder_embed_tokens(encoder.ref, real) |> unwrap!()
    zero = <<0::size(encoder.dimensions * 32)>>

    {out, []} =
      Enum.map_reduce(rows, vectors, fn
        <<>>, rest -> {zero, rest}
        _, [{bin, _, _} | rest] -> {bin, rest}
      end)

    out |> IO.iodata_to_binary() |> nx.from_binary(:f32) |> nx.reshape({n, encoder.dimensions})
  end

  defp nx!, do: ServingRows.nx!()

  defp unwrap!({:ok, value}), do: value
  defp unwrap!({:error, {:argument, message}}), do: raise(ArgumentError, message)
  defp unwrap!({:error, {kind, message}}), do: raise(NxVulkan.Error, kind: kind, message: message)

  defimpl Inspect do
    def inspect(e, _opts) do
      "#NxVulkan.Encoder<#{e.model} on #{e.device}, #{e.precision}, #{e.dimensions} dims, " <>
        "#{e.pooling} pooling#{if e.normalize, do: " + normalize", else: ""}, max #{e.max_tokens} tokens>"
    end
  end
end

if Code.ensure_loaded?(Nx.Serving) do
  defmodule NxVulkan.Encoder.Serving do
    @moduledoc false
    # The Nx.Serving behaviour over an encoder: each batch is one forward pass.
    @behaviour Nx.Serving

    @impl true
    def init(_type, encoder, _defn_options), do: {:ok, encoder}

    @impl true
    def handle_batch(batch, _partition, encoder) do
      {:execute,
       fn ->
         {ids, lengths} = Nx.Defn.jit_apply(&Function.identity/1, [batch], compiler: Nx.Defn.Evaluator)
         {NxVulkan.Encoder.serving_run(encoder, ids, lengths), :ok}
       end, encoder}
    end
  end
end
