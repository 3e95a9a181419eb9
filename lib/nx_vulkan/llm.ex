defmodule NxVulkan.LLM do
  @moduledoc """
  Text generation with GGUF models (llama, qwen2, qwen3; F32/F16/BF16, Q8_0, Q4_0, Q4_1, Q5_0,
  Q5_1, Q2_K…Q6_K weights) on the device.

  Weights are uploaded as stored and dequantized inside the kernels. Generations run as
  sessions in the model's KV-cache slots; a worker thread steps every live session together
  (continuous batching), so concurrent callers share each pass over the weights. A session's
  tokens are the same alone or batched.

      {:ok, llm} = NxVulkan.LLM.load("SmolLM2-135M-Instruct.Q4_1.gguf")
      {:ok, %{text: text}} = NxVulkan.LLM.chat(llm, [%{role: "user", content: "What is the capital of France?"}])
      NxVulkan.LLM.stream(llm, "Once upon a time", max_tokens: 32) |> Enum.each(&IO.write/1)

  Generation options (`generate/3`, `stream/3`, `chat/3`):
    * `:max_tokens` (default 256), `:stop` (a string or a list: text that ends the generation,
      not included), `:ignore_eos` (default false)
    * `:temperature` (default 0: greedy), `:top_k` (0: off), `:top_p` (1.0: off), `:min_p`
      (0.0: off), `:repeat_penalty` (1.0: off), `:repeat_last_n` (64), `:seed` (0) — a seed
      reproduces its tokens
    * `:logprobs` — the log-probabilities of this many best alternatives per token

  With Nx loaded, `serving/2` builds an `Nx.Serving` over the same sessions.
  """

  alias NxVulkan.{Native, ServingRows}

  @enforce_keys [:ref]
  defstruct [:ref, :path, :info]

  @type t :: %__MODULE__{}

  @gen_defaults [
    max_tokens: 256,
    temperature: 0.0,
    top_k: 0,
    top_p: 1.0,
    min_p: 0.0,
    repeat_penalty: 1.0,
    repeat_last_n: 64,
    seed: 0,
    logprobs: 0,
    stop: [],
    ignore_eos: false
  ]

  @doc """
  Loads a GGUF file onto the device in use.

  Options: `:context` (positions per session; default the model's, at most 4096), `:slots`
  (sessions that can run at once, default 4), `:kv_type` (`:f16` default, or `:f32`),
  `:template` (`nil`: the file's chat template; `"chatml"` or `"llama3"`), `:prefill_chunk`
  (prompt rows per step, default 512), `:int8_activations` (default `false`; opt-in: decode
  products of quantized weights (every quantized format) quantize their activations to int8
  per 32 values (16 for Q6_K) and take integer dot products, llama.cpp's precision — faster on
  some models, and logits further from the reference; see bench/README.md),
  `:prefill_precision` (`nil`: `:split`, or the `NX_VULKAN_LLM_GEMM_PRECISION` environment
  variable; on devices with tensor cores, prompt chunks run on a GEMM whose operands are f16
  hi + lo parts, `:split`, within the runtime's stated tolerances, or plain f16, `:f16`,
  llama.cpp's precision and about twice as fast).

  Returns `{:ok, llm}` or `{:error, exception}`: a missing, damaged or truncated file, an
  unsupported architecture or tensor type, a tokenizer this runtime cannot read.
  """
  def load(path, opts \\ []) do
    opts = Keyword.validate!(opts, context: nil, slots: 4, kv_type: :f16, template: nil, prefill_chunk: 512, int8_activations: false, prefill_precision: nil)

    native = %{
      context: non_neg!(opts[:context] || 0, :context),
      slots: pos!(opts[:slots], :slots),
      kv_type: to_string(opts[:kv_type]),
      template: to_string(opts[:template] || ""),
      prefill_chunk: pos!(opts[:prefill_chunk], :prefill_chunk),
      int8_activations: bool!(opts[:int8_activations], :int8_activations),
      prefill_precision: prefill_precision!(opts[:prefill_precision])
    }

    path = Path.expand(to_string(path))

    case Native.llm_load(path, native) do
      {:ok, ref} -> {:ok, %__MODULE__{ref: ref, path: path, info: unwrap!(Native.llm_info(ref))}}
      {:error, reason} -> {:error, exception(reason)}
    end
  end

  @doc "As `load/2`, raising on error."
  def load!(path, opts \\ []) do
    case load(path, opts) do
      {:ok, llm} -> llm
      {:error, e} -> raise e
    end
  end

  @doc "What was loaded: model, architecture, device, vocabulary, context, slots, bytes, template."
  def info(%__MODULE__{info: info}), do: info

  @doc """
  Token ids of `text`. Options: `:add_special` (prepend BOS where the model asks for it;
  default true), `:parse_special` (control tokens written in the text, like `<|im_start|>`,
  become their ids; default false).
  """
  def tokenize(%__MODULE__{ref: ref}, text, opts \\ []) when is_binary(text) do
    opts = Keyword.validate!(opts, add_special: true, parse_special: false)
    Native.llm_tokenize(ref, text, opts[:add_special], opts[:parse_special]) |> unwrap!()
  end

  @doc "The text of token ids (`skip_special: true` leaves control tokens out)."
  def detokenize(%__MODULE__{ref: ref}, ids, opts \\ []) when is_list(ids) do
    opts = Keyword.validate!(opts, skip_special: false)
    Native.llm_detokenize(ref, ids, opts[:skip_special]) |> unwrap!()
  end

  @doc """
  The prompt text for `messages` (maps or keyword lists with `:role` and `:content`) under the
  model's chat template, ending with the assistant's turn.
  """
  def chat_prompt(%__MODULE__{ref: ref}, messages, opts \\ []) do
    opts = Keyword.validate!(opts, add_generation_prompt: true)
    Native.llm_chat_prompt(ref, Enum.map(messages, &message!/1), opts[:add_generation_prompt]) |> unwrap!()
  end

  @doc """
  Generates from `prompt` (a string, tokenized with special tokens parsed, or a list of token
  ids) to the end: `{:ok, %{text, tokens, finish_reason, usage, logprobs}}` or `{:error, e}`.
  """
  def generate(%__MODULE__{} = llm, prompt, opts \\ []) do
    case start(llm, prompt, opts) do
      {:ok, tag, session} -> collect(tag, session, [], [], [])
      {:error, _} = e -> e
    end
  end

  @doc "`generate/3` on the chat prompt of `messages`."
  def chat(%__MODULE__{} = llm, messages, opts \\ []) do
    # The rendered prompt already holds whatever BOS its template writes.
    generate(llm, tokenize(llm, chat_prompt(llm, messages), add_special: false, parse_special: true), opts)
  end

  @doc """
  A lazy stream of generated text pieces, produced as the device makes them (sent to the
  caller as messages). Halting the stream early cancels the generation. Raises on errors.
  """
  def stream(%__MODULE__{} = llm, prompt, opts \\ []) do
    Stream.resource(
      fn ->
        case start(llm, prompt, opts) do
          {:ok, tag, session} -> {tag, session, false}
          {:error, e} -> raise e
        end
      end,
      fn
        {_tag, _session, true} = acc ->
          {:halt, acc}

        {tag, session, false} ->
          receive do
            {:nx_vulkan_llm, ^tag, {:token, _id, text, _lp, _top}} -> {[text], {tag, session, false}}
            {:nx_vulkan_llm, ^tag, {:done, _, _, _, _}} -> {:halt, {tag, session, true}}
            # The session has ended: mark it so before raising (the after-function then has
            # nothing to cancel).
            {:nx_vulkan_llm, ^tag, {:error, message}} -> {:halt, {tag, session, {:error, message}}}
          end
      end,
      fn
        {tag, session, false} -> cancel_and_drain(tag, session)
        {_tag, _session, {:error, message}} -> raise NxVulkan.Error, kind: :device, message: message
        {_tag, _session, true} -> :ok
      end
    )
  end

  @doc """
  An `Nx.Serving` generating with `llm` (needs Nx). `Nx.Serving.run(serving, prompt)` answers
  one result map (`generate/3`'s `:text`, `:tokens`, `:finish_reason` and `:usage`), a list
  of prompts a list of them; started under a supervisor, `Nx.Serving.batched_run/2` gathers
  concurrent callers' prompts into batches. A batch's prompts run as concurrent sessions that
  the runtime decodes together, so each prompt gets the tokens `generate/3` gives it alone.

  A prompt is a string (special tokens parsed, as in `generate/3`), a list of token ids, or
  with `chat: true` a list of chat messages. Options: `:batch_size` (default: the model's
  session slots), `:chat` (default false), and `generate/3`'s options but `:logprobs`, fixed
  for the serving.
  """
  def serving(%__MODULE__{} = llm, opts \\ []) do
    {serving_opts, gen} = Keyword.split(opts, [:batch_size, :chat])
    serving_opts = Keyword.validate!(serving_opts, batch_size: llm.info.slots, chat: false)
    # Checked here, not in the serving process.
    native = native_options(Keyword.validate!(gen, Keyword.delete(@gen_defaults, :logprobs)))
    nx_serving = Module.concat([Nx, Serving])
    nx!()

    nx_serving.new(Module.concat(__MODULE__, Serving), {llm, native})
    |> nx_serving.batch_size(pos!(serving_opts[:batch_size], :batch_size))
    |> nx_serving.client_preprocessing(&serving_preprocess(llm, serving_opts[:chat], &1))
    |> nx_serving.client_postprocessing(&serving_postprocess/2)
  end

  @doc false
  # Prompts → {ids, lengths}: each prompt's ids padded with zeros to the context (Nx.Batch
  # concatenates equal-shaped rows across callers); lengths say where each one ends.
  def serving_preprocess(llm, chat?, input) do
    {prompts, single?} = serving_prompts(input, chat?)
    width = llm.info.context

    ids =
      for prompt <- prompts do
        ids = if chat?, do: tokenize(llm, chat_prompt(llm, prompt), add_special: false, parse_special: true), else: prompt_ids(llm, prompt)

        if length(ids) >= width or ids == [],
          do: raise(ArgumentError, "a prompt of #{length(ids)} tokens does not fit the context of #{width} (one token at least, and room to generate)")

        ids
      end

    {ServingRows.batch(ids, width), single?}
  end

  defp serving_prompts(input, false) when is_binary(input), do: {[input], true}
  defp serving_prompts([i | _] = input, false) when is_integer(i), do: {[input], true}
  defp serving_prompts([m | _] = input, true) when is_map(m) or (is_list(m) and is_tuple(hd(m))), do: {[input], true}
  defp serving_prompts([_ | _] = input, _chat?), do: {input, false}
  defp serving_prompts(input, _), do: raise(ArgumentError, "expected a prompt or a non-empty list of prompts, got #{inspect(input)}")

  @finish [:stop, :length, :cancelled]

  @doc false
  # One batch, in the serving process: a session per prompt (padding rows have length 0 and
  # start none), all started before any is waited for, so they share decode steps. Per row:
  # generated ids [n, max_tokens], their count, the text's bytes [n, longest], its length,
  # finish reason (index in @finish), prompt, completion and cached token counts.
  def serving_run(%__MODULE__{} = llm, native, ids, lengths) do
    nx = nx!()
    rows = ServingRows.rows(ids, lengths)
    n = length(rows)

    started =
      for row <- rows do
        if row != <<>> do
          {:ok, tag, session} = start_ids(llm, ServingRows.u32_list(row), native) |> ok!()
          {tag, session}
        end
      end

    results =
      Enum.map(started, fn
        nil -> %{text: "", tokens: [], finish_reason: :stop, usage: %{prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0}}
        {tag, session} -> collect(tag, session, [], [], []) |> ok!() |> elem(1)
      end)

    max_tokens = native.max_tokens
    longest = results |> Enum.map(&byte_size(&1.text)) |> Enum.max(fn -> 0 end) |> max(1)
    tensor = fn bin, type, shape -> bin |> nx.from_binary(type) |> nx.reshape(shape) end
    tokens = for r <- results, into: <<>>, do: <<ServingRows.u32s(r.tokens)::binary, 0::size((max_tokens - length(r.tokens)) * 32)>>
    texts = for r <- results, into: <<>>, do: <<r.text::binary, 0::size((longest - byte_size(r.text)) * 8)>>
    column = fn f -> tensor.(ServingRows.u32s(Enum.map(results, f)), :u32, {n}) end

    {tensor.(tokens, :u32, {n, max_tokens}), column.(&length(&1.tokens)), tensor.(texts, :u8, {n, longest}), column.(&byte_size(&1.text)),
     column.(&Enum.find_index(@finish, fn r -> r == &1.finish_reason end)), column.(& &1.usage.prompt_tokens), column.(& &1.usage.completion_tokens),
     column.(& &1.usage.cached_tokens)}
  end

  @doc false
  def serving_postprocess({{tokens, counts, texts, text_lengths, finish, prompt, completion, cached}, _metadata}, single?) do
    nx = nx!()
    {_, max_tokens} = nx.shape(tokens)
    {_, longest} = nx.shape(texts)
    u32 = fn t -> ServingRows.u32_list(nx.to_binary(t)) end
    tokens_bin = nx.to_binary(tokens)
    texts_bin = nx.to_binary(texts)

    results =
      [u32.(counts), u32.(text_lengths), u32.(finish), u32.(prompt), u32.(completion), u32.(cached)]
      |> Enum.zip()
      |> Enum.with_index()
      |> Enum.map(fn {{count, text_length, f, p, c, k}, i} ->
        %{
          text: :binary.part(texts_bin, i * longest, text_length),
          tokens: ServingRows.u32_list(:binary.part(tokens_bin, i * max_tokens * 4, count * 4)),
          finish_reason: Enum.at(@finish, f),
          usage: %{prompt_tokens: p, completion_tokens: c, cached_tokens: k}
        }
      end)

    if single?, do: hd(results), else: results
  end

  defp ok!({:ok, _} = ok), do: ok
  defp ok!({:ok, _, _} = ok), do: ok
  defp ok!({:error, e}), do: raise(e)

  defp nx!, do: ServingRows.nx!()

  @doc "Runtime counters: steps, rows fed, the largest batch, cached prompt tokens, ..."
  def stats(%__MODULE__{ref: ref}), do: Native.llm_stats(ref) |> unwrap!()

  # The session's messages carry a tag unique in this VM, so a process can run several.
  defp start(llm, prompt, opts), do: start_ids(llm, prompt_ids(llm, prompt), native_options(opts))

  defp prompt_ids(llm, prompt) do
    cond do
      is_binary(prompt) -> tokenize(llm, prompt, add_special: true, parse_special: true)
      is_list(prompt) and Enum.all?(prompt, &(is_integer(&1) and &1 >= 0)) -> prompt
      true -> raise ArgumentError, "the prompt must be a string or a list of token ids, got #{inspect(prompt)}"
    end
  end

  defp start_ids(llm, ids, native) do
    tag = System.unique_integer([:positive])

    case Native.llm_start(llm.ref, ids, native, self(), tag) do
      {:ok, session} -> {:ok, tag, session}
      {:error, reason} -> {:error, exception(reason)}
    end
  end

  defp native_options(opts) do
    opts = Keyword.validate!(opts, @gen_defaults)
    stop = List.wrap(opts[:stop])

    unless Enum.all?(stop, &is_binary/1), do: raise(ArgumentError, ":stop must be a string or a list of strings")

    %{
      max_tokens: pos!(opts[:max_tokens], :max_tokens),
      temperature: num!(opts[:temperature], :temperature),
      top_k: non_neg!(opts[:top_k], :top_k),
      top_p: num!(opts[:top_p], :top_p),
      min_p: num!(opts[:min_p], :min_p),
      repeat_penalty: num!(opts[:repeat_penalty], :repeat_penalty),
      repeat_last_n: non_neg!(opts[:repeat_last_n], :repeat_last_n),
      seed: non_neg!(opts[:seed], :seed),
      logprobs: non_neg!(opts[:logprobs], :logprobs),
      stop: stop,
      ignore_eos: opts[:ignore_eos] == true
    }
  end

  defp collect(tag, session, text, ids, lps) do
    receive do
      {:nx_vulkan_llm, ^tag, {:token, id, piece, lp, top}} ->
        collect(tag, session, [text | piece], [id | ids], [{lp, top} | lps])

      {:nx_vulkan_llm, ^tag, {:done, reason, prompt_tokens, completion_tokens, cached}} ->
        {:ok,
         %{
           text: IO.iodata_to_binary(text),
           tokens: Enum.reverse(ids),
           finish_reason: reason,
           logprobs: Enum.reverse(lps),
           usage: %{prompt_tokens: prompt_tokens, completion_tokens: completion_tokens, cached_tokens: cached}
         }}

      {:nx_vulkan_llm, ^tag, {:error, message}} ->
        {:error, %NxVulkan.Error{kind: :device, message: message}}
    end
  end

  defp cancel_and_drain(tag, session) do
    Native.llm_cancel(session)

    receive do
      {:nx_vulkan_llm, ^tag, {:done, _, _, _, _}} -> :ok
      {:nx_vulkan_llm, ^tag, {:error, _}} -> :ok
    after
      30_000 -> :ok
    end

    flush(tag)
  end

  defp flush(tag) do
    receive do
      {:nx_vulkan_llm, ^tag, _} -> flush(tag)
    after
      0 -> :ok
    end
  end

  defp message!(%{role: r, content: c}) when is_binary(r) and is_binary(c), do: {r, c}
  defp message!(%{"role" => r, "content" => c}) when is_binary(r) and is_binary(c), do: {r, c}
  defp message!([{_, _} | _] = kw), do: message!(Map.new(kw))
  defp message!(other), do: raise(ArgumentError, "a chat message needs a string :role and :content, got #{inspect(other)}")

  defp pos!(n, _) when is_integer(n) and n > 0, do: n
  defp pos!(n, name), do: raise(ArgumentError, "#{inspect(name)} must be a positive integer, got #{inspect(n)}")
  defp non_neg!(n, _) when is_integer(n) and n >= 0, do: n
  defp non_neg!(n, name), do: raise(ArgumentError, "#{inspect(name)} must be a non-negative integer, got #{inspect(n)}")
  defp bool!(b, _) when is_boolean(b), do: b
  defp bool!(b, name), do: raise(ArgumentError, "#{inspect(name)} must be true or false, got #{inspect(b)}")
  defp prefill_precision!(nil), do: ""
  defp prefill_precision!(p) when p in [:split, :f16], do: Atom.to_string(p)
  defp prefill_precision!(p), do: raise(ArgumentError, ":prefill_precision must be nil, :split or :f16, got #{inspect(p)}")

  defp num!(n, _) when is_number(n), do: n / 1
  defp num!(n, name), do: raise(ArgumentError, "#{inspect(name)} must be a number, got #{inspect(n)}")

  defp unwrap!({:ok, v}), do: v
  defp unwrap!({:error, reason}), do: raise(exception(reason))

  defp exception({:argument, message}), do: %ArgumentError{message: message}
  defp exception({kind, message}), do: %NxVulkan.Error{kind: kind, message: message}
end

if Code.ensure_loaded?(Nx.Serving) do
  defmodule NxVulkan.LLM.Serving do
    @moduledoc false
    # The Nx.Serving behaviour over a loaded model: each batch's prompts run as concurrent
    # sessions of the runtime.
    @behaviour Nx.Serving

    @impl true
    def init(_type, {llm, native}, _defn_options), do: {:ok, {llm, native}}

    @impl true
    def handle_batch(batch, _partition, {llm, native} = state) do
      {:execute,
       fn ->
         {ids, lengths} = Nx.Defn.jit_apply(&Function.identity/1, [batch], compiler: Nx.Defn.Evaluator)
         {NxVulkan.LLM.serving_run(llm, native, ids, lengths), :ok}
       end, state}
    end
  end
end
