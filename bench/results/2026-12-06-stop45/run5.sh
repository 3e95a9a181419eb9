#!/usr/bin/env bash
# Stop 45, run 5 (one command, on run 4's warm machine): the Q8_0 matvec's knobs with the
# 32-bit words (run 4: 8B Q8_0-like decode 213 tok/s, llama.cpp 205), device time per product,
# then 8B Q8_0 decode with the two best if the file is still there. Carry .gl, .gpurun/s45.
export BIN=${BIN:-.gpurun/s45}
source bench/results/2026-12-06-stop43/common.sh
source .gl/env.sh
unpack nx-vulkan
for v in "X=0" "NX_VULKAN_LLM_ROWS=8" "NX_VULKAN_LLM_ROWS=2" "NX_VULKAN_LLM_NT=32" "NX_VULKAN_LLM_WG=256" "NX_VULKAN_LLM_WG=64"; do
  env $v timeout 30 /tmp/t/nx-vulkan llm-gemm-bench --type Q8_0 --rows 1 --matvec-only --one-batch --calls 50 --distinct 4 --profile 2>>"$OUT/ours.err" \
    | tag "\"variant\":\"$v\"" >> "$OUT/mv.jsonl"
done
python3 - "$OUT/mv.jsonl" <<'PY' | tee "$OUT/best.txt"
import json, sys
dev = {}
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "profile" in j:
        if "llm matvec" in j["profile"]:
            dev[j["variant"]] = dev.get(j["variant"], 0) + j["mean_us"]
    else:
        print(j["variant"], j.get("n"), j.get("k"), "wall", j.get("median_us"), j.get("weight_gb_per_s"))
for v, d in sorted(dev.items(), key=lambda x: x[1]):
    print("device", v, round(d, 2))
PY
f=/tmp/models/8b-q8_0.gguf
if [ -f "$f" ]; then
  for v in $(grep "^device" "$OUT/best.txt" | head -2 | awk '{print $2}'); do
    env $v timeout 40 /tmp/t/nx-vulkan bench --model "$f" --pp 64 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" | tag "\"variant\":\"$v\"" >> "$OUT/llm.jsonl"
  done
  python3 -c "
import json
for l in open('$OUT/llm.jsonl'):
    j = json.loads(l); print(j['variant'], 'tg', round(j['tg_tok_s'], 1), j['tg_runs'])"
fi
echo "all done at $SECONDS s"
