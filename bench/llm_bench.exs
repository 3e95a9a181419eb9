# Decode speed from Elixir: NxVulkan.LLM.generate/3 and stream/3, greedy with ignore_eos, on a
# GGUF file, as an Elixir caller sees it (the runtime's worker thread, the NIF, messages).
# Decode tok/s = 128 tokens over the time difference between generating 129 tokens and 1 token
# from the same 512-token prompt (the prompt's KV is reused across calls, and the difference
# cancels whatever of it is not). One JSON line on stdout; compare with `nx-vulkan bench
# --model` run on the same file in the same command.
#   mix run bench/llm_bench.exs FILE.gguf [runs]
Application.ensure_all_started(:nx_vulkan)
[path | rest] = System.argv()
runs = case rest do
  [r | _] -> String.to_integer(r)
  _ -> 3
end
{:ok, llm} = NxVulkan.LLM.load(path, context: 1024, slots: 1)
vocab = NxVulkan.LLM.info(llm).vocab_size
prompt = Enum.map(0..511, fn i -> rem(i * 7919 + 13, vocab) end)
timed = fn f ->
  t0 = System.monotonic_time(:microsecond)
  f.()
  System.monotonic_time(:microsecond) - t0
end
gen = fn n -> {:ok, %{tokens: toks}} = NxVulkan.LLM.generate(llm, prompt, max_tokens: n, ignore_eos: true); length(toks) end
str = fn n -> NxVulkan.LLM.stream(llm, prompt, max_tokens: n, ignore_eos: true) |> Enum.count() end
# warm-up: kernels, kept step programs and the prompt's KV
gen.(129)
str.(129)
median = fn l -> Enum.at(Enum.sort(l), div(length(l), 2)) end
rate = fn f ->
  median.(for _ <- 1..runs do
    128 / ((timed.(fn -> f.(129) end) - timed.(fn -> f.(1) end)) / 1.0e6)
  end)
end
g = rate.(gen)
s = rate.(str)
IO.puts(~s({"bench": "llm_elixir", "file": "#{path}", "device": "#{NxVulkan.LLM.info(llm).device}", "generate_decode_tok_s": #{Float.round(g, 1)}, "stream_decode_tok_s": #{Float.round(s, 1)}, "runs": #{runs}}))
