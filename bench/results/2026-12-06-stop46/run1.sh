#!/usr/bin/env bash
# Stop 46 run 1: the residual products write the next RMSNorm's output (NormOut, from their
# last workgroup per column chunk) instead of a norm dispatch of its own — 63 dispatches and
# barriers fewer per 8B token. First the bit-for-bit test on the GPU (the workgroup kernel's
# counters and coherent reads on a real device), then decode with and without it
# (NX_VULKAN_LLM_NORM_OUT=0) on 8B Q4_K_M-like, 8B Q8_0 and 1B Q4_K_M-like files, beside
# llama.cpp on the same files. Carry .gl (without .gl/beam), $BIN, .bench-carry.
export BIN=${BIN:-.gpurun/s46b}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
for m in "8b q4km" "8b q8_0" "1b q4km"; do
  set -- $m
  [ -f /tmp/models/$1-$2.gguf ] || python3 bench/llm/gen_model.py /tmp/models/$1-$2.gguf $1 $2 > /dev/null
done
source .gl/env.sh
gpu_test llm norms_in_the_residual the_gpu_matvec
unpack nx-vulkan
for f in /tmp/models/8b-q4km.gguf /tmp/models/8b-q8_0.gguf /tmp/models/1b-q4km.gguf; do
  timeout 60 python3 bench/llm/llbench.py "$f" 2>>"$OUT/llama.log" | tag "\"variant\":\"llama.cpp-vulkan\"" >> "$OUT/llm.jsonl"
  for v in X=0 NX_VULKAN_LLM_NORM_OUT=0 X=0 NX_VULKAN_LLM_NORM_OUT=0; do
    env $v timeout 60 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" | tag "\"variant\":\"$v\"" >> "$OUT/llm.jsonl"
  done
done
python3 -c "
import json
for l in open('$OUT/llm.jsonl'):
    j = json.loads(l); print(j.get('model'), j['variant'], 'tg', round(j['tg_tok_s'], 1), 'pp', round(j['pp_tok_s'], 1), j.get('tg_runs'))"
echo "all done at $SECONDS s"
