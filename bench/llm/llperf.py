# llama.cpp's own per-op device times for decode (GGML_VK_PERF_LOGGER=1, set by the caller; the
# Vulkan backend prints a table per graph to stderr): a 16-token prompt, then 8 greedy decode
# steps. Usage: GGML_VK_PERF_LOGGER=1 python3 llperf.py FILE.gguf 2> timings.txt
import sys
from cyllama import LLM, GenerationConfig
from cyllama.llama.llama_cpp import llama_batch_get_one
cfg = GenerationConfig(max_tokens=8, temperature=0.0, n_gpu_layers=999, n_ctx=2048, n_batch=512, seed=1)
llm = LLM(sys.argv[1], config=cfg)
toks = llm.vocab.tokenize("a" * 40, add_special=True, parse_special=False)[:16]
ctx = llm._ensure_context(len(toks), cfg)
sampler = llm._ensure_sampler(cfg)
ctx.decode(llama_batch_get_one(toks, 0))
tok = sampler.sample(ctx, -1)
for i in range(8):
    ctx.decode(llama_batch_get_one([tok], len(toks) + i))
    tok = sampler.sample(ctx, -1)
print("done", file=sys.stderr)
