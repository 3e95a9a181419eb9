#!/usr/bin/env bash
# Stop 44, run 4 (one command): the Q4_K/Q5_K/Q6_K scales read without branches (run 3's
# hw-f16 + pair-scales, now the code: llm_qdot.glsl's f16_exact, the pair scales, s8_float)
# — first the kernels' tests on the GPU (tests/llm_kernels.rs with its new f16-class test),
# then decode and prefill against llama.cpp's Vulkan backend on the same random-weight files,
# on the 8B file only (trimmed to the device time left:
# failed starts had spent it). Carry .gl, .gpurun/s44d, .bench-carry.
export BIN=${BIN:-.gpurun/s44d}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
SPECS="8b:q4km"
for spec in $SPECS; do
  python3 bench/llm/gen_model.py "/tmp/models/${spec%%:*}-${spec##*:}.gguf" "${spec%%:*}" "${spec##*:}" > /dev/null
done
echo "models at $SECONDS s"
source .gl/env.sh
gpu_test llm_kernels
unpack nx-vulkan
for spec in $SPECS; do
  f=/tmp/models/${spec%%:*}-${spec##*:}.gguf
  timeout 100 python3 bench/llm/llbench.py "$f" 2>>"$OUT/llama.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\"" >> "$OUT/llm.jsonl"
  sess=0
  timeout 150 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions $sess 2>>"$OUT/ours.err" \
    | tag "\"peer\":\"nx_vulkan\",\"spec\":\"$spec\"" >> "$OUT/llm.jsonl"
  echo "$spec at $SECONDS s"
done
python3 - "$OUT/llm.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except Exception: continue
    print(j.get("spec"), j.get("peer"), "tg", round(j.get("tg_tok_s", 0), 1), "pp", round(j.get("pp_tok_s", 0)), j.get("aggregate_tok_s", ""), "roofline@copy", round(j.get("roofline_tok_s_at_copy", 0)), "copy GB/s", round(j.get("copy_gbs", 0)))
PY
tail -3 "$OUT/ours.err"
echo "all done at $SECONDS s"
