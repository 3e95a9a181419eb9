#!/usr/bin/env bash
# Stop 47 run 4: the kept build's aggregate decode with 8 and 32 concurrent sessions on the 8B
# Q4_K_M-like file (32-token prompts, 64 tokens each, after an untimed round), both quant forms
# alternating (NX_VULKAN_LLM_QUANT_MANTISSA=0: the old form), beside one session's tg.
# Carry .gl, $BIN, .bench-carry.
export BIN=${BIN:-.gpurun/s47b}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
[ -f /tmp/models/8b-q4km.gguf ] || python3 bench/llm/gen_model.py /tmp/models/8b-q4km.gguf 8b q4km > /dev/null
source .gl/env.sh
unpack nx-vulkan
for v in X=0 NX_VULKAN_LLM_QUANT_MANTISSA=0 X=0 NX_VULKAN_LLM_QUANT_MANTISSA=0; do
  env $v timeout 90 /tmp/t/nx-vulkan bench --model /tmp/models/8b-q4km.gguf --pp 32 --tg 64 --runs 1 --sessions 8,32 2>>"$OUT/ours.err" \
    | tag "\"variant\":\"$v\"" >> "$OUT/agg.jsonl"
done
cat "$OUT/agg.jsonl"
echo "all done at $SECONDS s"
