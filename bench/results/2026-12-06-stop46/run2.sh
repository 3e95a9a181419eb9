#!/usr/bin/env bash
# Stop 46 run 2: where a decode product's fixed ~10 µs goes. (1) Q4_K matvec device time and
# wall time per call (one batch of 50, barriers between, weights cycling through enough copies
# to miss L2) over row counts 1,024 .. 57,344 at K = 4096: the intercept is the fixed part.
# (2) The same and 8B Q4_K_M-like decode with NX_VULKAN_BARRIER=compute (compute-to-compute
# barriers between dispatches instead of ones that also name transfers), alternating.
# (3) A decode step's critical path by command (NX_VULKAN_PROFILE_SPANS=end: each command's
# time from the previous command's end; NX_VULKAN_LLM_KEPT=0 so the commands are timed one by
# one), beside the start-to-end times.
# Carry .gl (without .gl/beam), $BIN, .bench-carry.
export BIN=${BIN:-.gpurun/s46d}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/models
[ -f /tmp/models/8b-q4km.gguf ] || python3 bench/llm/gen_model.py /tmp/models/8b-q4km.gguf 8b q4km > /dev/null
source .gl/env.sh
unpack nx-vulkan
for v in X=0 NX_VULKAN_BARRIER=compute; do
  for sd in 1024x4096:32 4096x4096:16 14336x4096:4 57344x4096:2; do
    env $v timeout 60 /tmp/t/nx-vulkan llm-gemm-bench --type Q4_K --shapes ${sd%%:*} --rows 1 --matvec-only --one-batch --calls 50 --distinct ${sd##*:} --profile 2>>"$OUT/ours.err" \
      | tag "\"variant\":\"$v\",\"shape\":\"${sd%%:*}\"" >> "$OUT/mv.jsonl"
  done
done
python3 - "$OUT/mv.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "profile" in j:
        if "llm matvec" in j["profile"]: print("  device", j["variant"], j["shape"], round(j["mean_us"], 2))
    else:
        print(j["variant"], j["shape"], "wall", j.get("median_us"), "GB/s", j.get("weight_gb_per_s"))
PY
f=/tmp/models/8b-q4km.gguf
for v in X=0 NX_VULKAN_BARRIER=compute X=0 NX_VULKAN_BARRIER=compute; do
  env $v timeout 60 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" | tag "\"variant\":\"$v\"" >> "$OUT/llm.jsonl"
done
python3 -c "
import json
for l in open('$OUT/llm.jsonl'):
    j = json.loads(l); print(j['variant'], 'tg', round(j['tg_tok_s'], 1), 'pp', round(j['pp_tok_s'], 1), j.get('tg_runs'))"
for spans in end start; do
  NX_VULKAN_LLM_KEPT=0 NX_VULKAN_PROFILE_SPANS=$spans timeout 90 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 1 --sessions 0 --profile 2>>"$OUT/ours.err" | tag "\"spans\":\"$spans\"" >> "$OUT/prof.jsonl"
done
python3 - "$OUT/prof.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for spans in ("end", "start"):
    ps = [j for j in rows if j.get("spans") == spans and "profile" in j]
    tot = sum(j["device_us"] for j in ps)
    print("spans", spans, "total device ms", round(tot / 1000, 2))
    for j in sorted(ps, key=lambda j: -j["device_us"])[:14]:
        print("  ", round(j["device_us"] / 1000, 2), "ms", j["runs"], "runs", round(j["mean_us"], 2), "us", j["profile"][:110])
    for j in rows:
        if j.get("spans") == spans and "tg_tok_s" in j: print("  tg", round(j["tg_tok_s"], 1))
PY
echo "all done at $SECONDS s"
