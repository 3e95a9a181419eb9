#!/usr/bin/env bash
# Stop 45, run 3 (one command, on run 2's warm machine): the Q8_0 decode product's knobs (run 2:
# 8B Q8_0-like decode 183 tok/s against llama.cpp's 200, 38 % of the roofline; its TC=1 kernel
# takes 32 registers), and the multi-session TC again (run 2: TC 4 above 8 by 12-15 %).
# Carry .gl, .gpurun/s45.
export BIN=${BIN:-.gpurun/s45}
source bench/results/2026-12-06-stop43/common.sh
source .gl/env.sh
unpack nx-vulkan
for v in "X=0" "NX_VULKAN_LLM_ROWS=8" "NX_VULKAN_LLM_ROWS=2" "NX_VULKAN_LLM_NT=32" "NX_VULKAN_LLM_WG=256" "NX_VULKAN_LLM_TASK_PAIRS=1" "NX_VULKAN_LLM_ROWS=8 NX_VULKAN_LLM_TASK_PAIRS=1"; do
  env $v timeout 40 /tmp/t/nx-vulkan llm-gemm-bench --type Q8_0 --rows 1 --matvec-only --one-batch --calls 50 --distinct 4 --profile 2>>"$OUT/sweep.err" \
    | tag "\"variant\":\"$v\"" >> "$OUT/mv.jsonl"
done
python3 - "$OUT/mv.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "profile" in j:
        if "llm matvec" in j["profile"]:
            k = j["profile"]; print(j["variant"], "device", round(j["mean_us"], 2), k[11:80])
    else:
        print(j["variant"], j.get("n"), j.get("k"), j.get("kernel"), "wall", j.get("median_us"), j.get("weight_gb_per_s"))
PY
echo "sweep at $SECONDS s"
if [ -f /tmp/models/8b-q4km.gguf ]; then
  for tc in 2 4 8; do
    NX_VULKAN_LLM_TC=$tc timeout 60 /tmp/t/nx-vulkan bench --model /tmp/models/8b-q4km.gguf --pp 32 --tg 64 --runs 1 --sessions 8,32 2>>"$OUT/ours.err" \
      | tag "\"tc\":$tc" >> "$OUT/sessions.jsonl"
  done
  python3 - "$OUT/sessions.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except Exception: continue
    print("tc", j.get("tc"), "aggregate", j.get("aggregate_tok_s"), "tg", round(j.get("tg_tok_s", 0), 1))
PY
else echo "no models left"; fi
echo "all done at $SECONDS s"
