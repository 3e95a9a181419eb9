#!/usr/bin/env bash
# Stop 46 run 3: the RMSNorm dispatch with its values in registers and a subgroup tree (one
# memory latency instead of four; 7.25 µs × 64.5 a token in run 2's profile) — first its bit
# test on the GPU, then 8B and 1B Q4_K_M-like decode against NX_VULKAN_LLM_NORM_REGS=0, alternating;
# also the opt-in int8 activations on it today (last measured at stop 39). (Cut to fit the
# session's last device minutes: no llama.cpp, Q8_0 or workgroup sizes.) Carry .gl (without
# .gl/beam), $BIN, .bench-carry.
export BIN=${BIN:-.gpurun/s46e}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
for m in "8b q4km" "1b q4km"; do
  set -- $m
  [ -f /tmp/models/$1-$2.gguf ] || python3 bench/llm/gen_model.py /tmp/models/$1-$2.gguf $1 $2 > /dev/null
done
source .gl/env.sh
gpu_test llm the_norm_kernels
unpack nx-vulkan
b() { env $1 timeout 60 /tmp/t/nx-vulkan bench --model "$2" --pp 512 --tg 128 --runs 3 --sessions 0 ${3:-} 2>>"$OUT/ours.err" | tag "\"variant\":\"$1 ${3:-}\"" >> "$OUT/llm.jsonl"; }
f=/tmp/models/8b-q4km.gguf
for v in X=0 NX_VULKAN_LLM_NORM_REGS=0 X=0 NX_VULKAN_LLM_NORM_REGS=0; do b $v "$f"; done
b X=0 "$f" --int8-activations
f=/tmp/models/1b-q4km.gguf
for v in X=0 NX_VULKAN_LLM_NORM_REGS=0 X=0 NX_VULKAN_LLM_NORM_REGS=0; do b $v "$f"; done
python3 -c "
import json
for l in open('$OUT/llm.jsonl'):
    j = json.loads(l); print(j.get('model'), j['variant'], 'tg', round(j['tg_tok_s'], 1), 'pp', round(j['pp_tok_s'], 1), j.get('tg_runs'))"
echo "all done at $SECONDS s"
