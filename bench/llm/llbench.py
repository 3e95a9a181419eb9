# The peer: llama.cpp's Vulkan backend (the PyPI wheel cyllama-vulkan 0.7.0, llama.cpp b11669) on a
# GGUF: prefill (512 tokens) and greedy decode (128 tokens) timed around llama_decode calls;
# medians of 3 after one warm-up. One JSON line. Usage: python3 llbench.py FILE.gguf
import sys, json, time, statistics
from cyllama import LLM, GenerationConfig
from cyllama.llama.llama_cpp import llama_batch_get_one
path = sys.argv[1]
cfg = GenerationConfig(max_tokens=128, temperature=0.0, n_gpu_layers=999, n_ctx=2048, n_batch=512, seed=1)
llm = LLM(path, config=cfg)
toks = llm.vocab.tokenize("a" * 600, add_special=True, parse_special=False)[:512]
res = []
for rep in range(4):
    ctx = llm._ensure_context(len(toks), cfg)
    sampler = llm._ensure_sampler(cfg)
    t0 = time.perf_counter()
    ctx.decode(llama_batch_get_one(toks, 0))
    tok = sampler.sample(ctx, -1)          # reads the logits: the prefill has finished
    t1 = time.perf_counter()
    n = 0
    for i in range(128):
        ctx.decode(llama_batch_get_one([tok], len(toks) + i))
        tok = sampler.sample(ctx, -1); n += 1
    t2 = time.perf_counter()
    res.append((len(toks) / (t1 - t0), n / (t2 - t1)))
res = res[1:]
print(json.dumps({"model": path, "pp_tokens": len(toks), "tg_tokens": 128,
                  "pp_tok_s": round(statistics.median(r[0] for r in res), 1),
                  "tg_tok_s": round(statistics.median(r[1] for r in res), 1),
                  "runs": [[round(a, 1), round(b, 1)] for a, b in res]}))
