#!/usr/bin/env bash
# Stop 46 run 3: the opt-in int8 activations against the default f32 ones on the 8B files
# today (last measured at stop 39: 195 vs 200 tok/s on 8B Q4_K_M-like, before the f16-scale,
# subgroup-tree and Q8_0-word changes), and matvec workgroups of 64 / 256 on 8B Q4_K_M-like;
# llama.cpp on the same files. Carry .gl (without .gl/beam), $BIN, .bench-carry.
export BIN=${BIN:-.gpurun/s46d}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
for m in "8b q4km" "8b q8_0"; do
  set -- $m
  [ -f /tmp/models/$1-$2.gguf ] || python3 bench/llm/gen_model.py /tmp/models/$1-$2.gguf $1 $2 > /dev/null
done
source .gl/env.sh
unpack nx-vulkan
b() { env $1 timeout 60 /tmp/t/nx-vulkan bench --model "$2" --pp 512 --tg 128 --runs 3 --sessions 0 $3 2>>"$OUT/ours.err" | tag "\"variant\":\"$1 $3\"" >> "$OUT/llm.jsonl"; }
for f in /tmp/models/8b-q4km.gguf /tmp/models/8b-q8_0.gguf; do
  timeout 60 python3 bench/llm/llbench.py "$f" 2>>"$OUT/llama.log" | tag "\"variant\":\"llama.cpp-vulkan\"" >> "$OUT/llm.jsonl"
  for round in 1 2; do
    b X=0 "$f"
    b X=0 "$f" --int8-activations
  done
done
f=/tmp/models/8b-q4km.gguf
for v in NX_VULKAN_LLM_WG=256 NX_VULKAN_LLM_WG=64 X=0; do b $v "$f"; done
python3 -c "
import json
for l in open('$OUT/llm.jsonl'):
    j = json.loads(l); print(j.get('model'), j['variant'], 'tg', round(j['tg_tok_s'], 1), 'pp', round(j['pp_tok_s'], 1), j.get('tg_runs'))"
echo "all done at $SECONDS s"
