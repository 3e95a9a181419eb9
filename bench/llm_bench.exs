# Decode and prefill speed from Elixir: NxVulkan.LLM.generate/3 and stream/3, greedy with
# ignore_eos, on a GGUF file, as an Elixir caller sees it (the runtime's worker thread, the NIF,
# messages). Decode tok/s = 128 tokens over the time difference between generating 129 tokens
# and 1 token from the same 512-token prompt (the prompt's KV is reused across calls, and the
# difference cancels whatever of it is not). Prefill tok/s = 512 over the time of generating one
# token from a 512-token prompt that shares no prefix with the cached one (its first token
# differs), so the whole prompt runs. One JSON line on stdout; compare with `nx-vulkan bench
# --model` run on the same file in the same command.
#   mix run bench/llm_bench.exs FILE.gguf [runs [split|f16]]
Application.ensure_all_started(:nx_vulkan)
[path | rest] = System.argv()
runs = case rest do
  [r | _] -> String.to_integer(r)
  _ -> 3
end
precision = case rest do
  [_, p | _] -> String.to_existing_atom(p)
  _ -> :split
end
{:ok, llm} = NxVulkan.LLM.load(path, context: 1024, slots: 1, prefill_precision: precision)
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
# Prefill: run r's prompt starts with a token no other prompt starts with (slots: 1, so each
# call replaces the cached one and reuses none of it); one warm-up.
pp = fn r ->
  p = [rem(1000 + r, vocab) | tl(prompt)]
  512 / (timed.(fn -> {:ok, _} = NxVulkan.LLM.generate(llm, p, max_tokens: 1, ignore_eos: true) end) / 1.0e6)
end
pp.(0)
p = median.(for r <- 1..runs, do: pp.(r))
info = NxVulkan.LLM.info(llm)
IO.puts(~s({"bench": "llm_elixir", "file": "#{path}", "device": "#{info.device}", "prefill_precision": "#{info.prefill_precision}", "generate_decode_tok_s": #{Float.round(g, 1)}, "stream_decode_tok_s": #{Float.round(s, 1)}, "prefill_tok_s": #{Float.round(p, 1)}, "runs": #{runs}}))
