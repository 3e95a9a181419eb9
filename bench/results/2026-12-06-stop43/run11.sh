#!/usr/bin/env bash
# Stop 43, run 11, ONE command: aggregate decode with 1, 8 and 32 concurrent sessions on the
# 1B Q4_K_M-like random-weight file (issue 11 asks for 32; stop 42 measured 1 and 8), this
# stop's binary (no LLM change since stop 42).
# Carry .gl, .gpurun/s43, .bench-carry/*.whl (the gguf writer for bench/llm/gen_model.py).
source bench/results/2026-12-06-stop43/common.sh
source .gl/env.sh
mkdir -p /tmp/py /tmp/models
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
unpack nx-vulkan
f=/tmp/models/1b-q4km.gguf
python3 bench/llm/gen_model.py "$f" 1b q4km
echo "model at $SECONDS s"
timeout 240 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 1,8,32 2>"$OUT/ours.err" | tag '"spec":"1b:q4km"' > "$OUT/llm.jsonl"
cut -c1-600 "$OUT/llm.jsonl"
echo "all done at $SECONDS s"
