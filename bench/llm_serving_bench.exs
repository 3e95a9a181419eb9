# NxVulkan.LLM.serving/2 from Elixir: aggregate decode through an Nx.Serving against one
# session alone, on a GGUF file (needs Nx). Greedy with ignore_eos, N distinct prompts of
# 128 token ids, T tokens each:
#   alone       generate/3 of one prompt (its prompt and decode)
#   run         Nx.Serving.run of all N prompts in one batch
#   batched_run N concurrent callers of a supervised serving (batch_size N)
# tok/s = generated tokens over wall time (prompts included; their KV is cached from the
# warm-up, so what is left is mostly decode). One JSON line on stdout.
#   mix run bench/llm_serving_bench.exs FILE.gguf [N] [T]
Application.ensure_all_started(:nx_vulkan)
{:ok, _} = Application.ensure_all_started(:nx)
[path | rest] = System.argv()
[n, t] = Enum.map(rest ++ Enum.drop(["8", "128"], length(rest)), &String.to_integer/1)
{:ok, llm} = NxVulkan.LLM.load(path, context: 512, slots: n)
vocab = NxVulkan.LLM.info(llm).vocab_size
prompts = for p <- 1..n, do: Enum.map(0..127, fn i -> rem(i * 7919 + p * 104_729, vocab) end)
opts = [max_tokens: t, ignore_eos: true]
serving = NxVulkan.LLM.serving(llm, [batch_size: n] ++ opts)
{:ok, _} = Supervisor.start_link([{Nx.Serving, serving: serving, name: BenchServing, batch_timeout: 20}], strategy: :one_for_one)
timed = fn f ->
  t0 = System.monotonic_time(:microsecond)
  out = f.()
  {out, (System.monotonic_time(:microsecond) - t0) / 1.0e6}
end
alone = fn -> {:ok, r} = NxVulkan.LLM.generate(llm, hd(prompts), opts); [r] end
run = fn -> Nx.Serving.run(serving, prompts) end
batched = fn -> prompts |> Enum.map(&Task.async(fn -> Nx.Serving.batched_run(BenchServing, &1) end)) |> Enum.map(&Task.await(&1, 600_000)) end
# warm-up: kernels, step programs, the prompts' KV
run.()
rate = fn f ->
  {results, s} = timed.(f)
  true = Enum.all?(results, &(length(&1.tokens) == t))
  Enum.sum(Enum.map(results, &length(&1.tokens))) / s
end
median = fn l -> Enum.at(Enum.sort(l), div(length(l), 2)) end
[a, r, b] = for f <- [alone, run, batched], do: median.(for _ <- 1..3, do: rate.(f))
IO.puts(~s({"bench": "llm_serving", "file": "#{path}", "device": "#{NxVulkan.LLM.info(llm).device}", "prompts": #{n}, "tokens": #{t}, "alone_tok_s": #{Float.round(a, 1)}, "serving_run_tok_s": #{Float.round(r, 1)}, "batched_run_tok_s": #{Float.round(b, 1)}}))
