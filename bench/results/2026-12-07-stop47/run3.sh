#!/usr/bin/env bash
# Stop 47 run 3: the kept build (1 + q·2^-bits for Q4_K and Q5_K only): 1B Q5_K_M-like (Q5_K's
# first measurement) and 8B Q4_K_M-like decode, both forms alternating
# (NX_VULKAN_LLM_QUANT_MANTISSA=0: the old form), llama.cpp b11669 first on the same files.
# Carry .gl, $BIN, .bench-carry.
export BIN=${BIN:-.gpurun/s47b}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
for m in "1b q5km" "8b q4km"; do
  set -- $m
  [ -f /tmp/models/$1-$2.gguf ] || python3 bench/llm/gen_model.py /tmp/models/$1-$2.gguf $1 $2 > /dev/null
done
source .gl/env.sh
unpack nx-vulkan
for f in /tmp/models/1b-q5km.gguf /tmp/models/8b-q4km.gguf; do
  timeout 60 python3 bench/llm/llbench.py "$f" 2>>"$OUT/llama.log" | tag "\"variant\":\"llama.cpp-vulkan\"" >> "$OUT/llm.jsonl"
  for v in X=0 NX_VULKAN_LLM_QUANT_MANTISSA=0 X=0 NX_VULKAN_LLM_QUANT_MANTISSA=0; do
    env $v timeout 60 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" | tag "\"variant\":\"$v\"" >> "$OUT/llm.jsonl"
  done
done
python3 -c "
import json
for l in open('$OUT/llm.jsonl'):
    j = json.loads(l); print(j.get('model'), j['variant'], 'tg', round(j['tg_tok_s'], 1), 'pp', round(j['pp_tok_s'], 1), j.get('tg_runs'))"
echo "all done at $SECONDS s"
