#!/usr/bin/env bash
# Prepared at the end of stop 45 (not run): the decode products' grid. Stop 45 found the Q4_K
# products at 1.1-1.4 TB/s against 2.7-3.0 for a plain read, a loads-only probe as slow, and
# the driver's count at 64 registers (residency is not it). Each workgroup of 128 takes 8 rows
# (2 tasks per lane for K = 4096, then a reduction tree): thousands of short workgroups.
# NX_VULKAN_LLM_GROUPS caps the grid (each workgroup loops over row groups; the same bits):
# device time per product by cap, Q4_K and Q8_0 (8B FFN shapes, SwiGLU too), then 8B Q4_K_M-like
# decode with the two fastest caps against the default, beside llama.cpp.
# Carry .gl, $BIN (nx-vulkan.xz built at the commit under test), .bench-carry.
export BIN=${BIN:-.gpurun/s46}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
python3 bench/llm/gen_model.py /tmp/models/8b-q4km.gguf 8b q4km > /dev/null
source .gl/env.sh
unpack nx-vulkan
for ty in Q4_K Q8_0; do
  for v in "X=0" "NX_VULKAN_LLM_GROUPS=132" "NX_VULKAN_LLM_GROUPS=264" "NX_VULKAN_LLM_GROUPS=528" "NX_VULKAN_LLM_GROUPS=1056" "NX_VULKAN_LLM_GROUPS=2112"; do
    env $v timeout 30 /tmp/t/nx-vulkan llm-gemm-bench --type $ty --rows 1 --matvec-only --swiglu --one-batch --calls 50 --distinct 4 --profile 2>>"$OUT/ours.err" \
      | tag "\"variant\":\"$v\",\"ty\":\"$ty\"" >> "$OUT/mv.jsonl"
  done
done
python3 - "$OUT/mv.jsonl" <<'PY' | tee "$OUT/best.txt"
import json, sys
dev = {}
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "profile" in j:
        if "llm matvec" in j["profile"] and j["ty"] == "Q4_K":
            dev[j["variant"]] = dev.get(j["variant"], 0) + j["mean_us"]
    else:
        print(j["ty"], j["variant"], j.get("n"), j.get("k"), j.get("kernel"), "wall", j.get("median_us"), j.get("weight_gb_per_s"))
for v, d in sorted(dev.items(), key=lambda x: x[1]):
    print("device", v, round(d, 2))
PY
f=/tmp/models/8b-q4km.gguf
timeout 60 python3 bench/llm/llbench.py "$f" 2>>"$OUT/llama.log" | tag "\"variant\":\"llama.cpp-vulkan\"" >> "$OUT/llm.jsonl"
for v in X=0 $(grep "^device" "$OUT/best.txt" | grep -v "X=0" | head -2 | awk '{print $2}') X=0; do
  env $v timeout 60 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" | tag "\"variant\":\"$v\"" >> "$OUT/llm.jsonl"
done
python3 -c "
import json
for l in open('$OUT/llm.jsonl'):
    j = json.loads(l); print(j['variant'], 'tg', round(j['tg_tok_s'], 1), j.get('tg_runs'))"
echo "all done at $SECONDS s"
