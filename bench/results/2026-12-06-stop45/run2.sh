#!/usr/bin/env bash
# Stop 45, run 2 (one command): the f16 scales read by the device's conversion alone where a
# probe finds it exact for every f16 (Context::f16_conversion_is_exact; run 1: the H100's is,
# and the select form cost 6-7 % of decode). The scales test on the GPU (both forms), then
# decode/prefill against llama.cpp's Vulkan backend on the same random-weight files (Q4_K_M-,
# Q5_K_M- and Q8_0-like 1B/8B and SmolLM2-shaped Q4_1), then, with the time left, the 8B file's
# aggregate decode with 8 and 32 sessions at TC 8 (the default; 246-254 registers) and 4.
# Carry .gl, .gpurun/s45, .bench-carry.
export BIN=${BIN:-.gpurun/s45}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
SPECS="8b:q4km 1b:q4km 8b:q8_0 1b:q5km smollm2:q4_1"
for spec in $SPECS; do
  python3 bench/llm/gen_model.py "/tmp/models/${spec%%:*}-${spec##*:}.gguf" "${spec%%:*}" "${spec##*:}" > /dev/null
done
echo "models at $SECONDS s"
source .gl/env.sh
gpu_test llm_kernels scales_of_every
unpack nx-vulkan
NX_VULKAN_TRACE_BUILDS=1 timeout 30 /tmp/t/nx-vulkan llm-gemm-bench --rows 1 --matvec-only --reps 1 --calls 1 --shapes 4096x4096 2>&1 >/dev/null | grep -o "built .*" | cut -c1-140
for spec in $SPECS; do
  [ $SECONDS -gt 330 ] && break
  f=/tmp/models/${spec%%:*}-${spec##*:}.gguf
  timeout 60 python3 bench/llm/llbench.py "$f" 2>>"$OUT/llama.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\"" >> "$OUT/llm.jsonl"
  timeout 60 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" \
    | tag "\"peer\":\"nx_vulkan\",\"spec\":\"$spec\"" >> "$OUT/llm.jsonl"
  echo "$spec at $SECONDS s"
done
python3 - "$OUT/llm.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except Exception: continue
    print(j.get("spec"), j.get("peer"), "tg", round(j.get("tg_tok_s", 0), 1), "pp", round(j.get("pp_tok_s", 0)), "roofline@copy", round(j.get("roofline_tok_s_at_copy", 0)), "copy GB/s", round(j.get("copy_gbs", 0)))
PY
for tc in 8 4; do
  [ $SECONDS -gt 400 ] && break
  NX_VULKAN_LLM_TC=$tc timeout 60 /tmp/t/nx-vulkan bench --model /tmp/models/8b-q4km.gguf --pp 32 --tg 64 --runs 1 --sessions 8,32 2>>"$OUT/ours.err" \
    | tag "\"peer\":\"nx_vulkan\",\"tc\":$tc" >> "$OUT/sessions.jsonl"
  echo "tc $tc at $SECONDS s"
done
python3 - "$OUT/sessions.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except Exception: continue
    print("tc", j.get("tc"), "aggregate", j.get("aggregate_tok_s"), "tg", round(j.get("tg_tok_s", 0), 1))
PY
tail -3 "$OUT/ours.err"
echo "all done at $SECONDS s"
