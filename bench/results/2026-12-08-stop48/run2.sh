#!/usr/bin/env bash
# Stop 48 run 2 (prepared; after run 1, on the same warm machine if possible): where an 8B
# Q4_K_M-like decode step's time goes by command (NX_VULKAN_PROFILE_SPANS=end: each command
# timed from the previous one's end, so launch gaps and barriers count), with the norms from
# block sums (NX_VULKAN_LLM_NORM=sums) against separate norm dispatches — the per-command view
# of what run 1 measures end to end. Carry .gl, $BIN (as run 1), .bench-carry.
export BIN=${BIN:-.gpurun/s48}
source bench/results/2026-12-06-stop43/common.sh
setup_peer
gen_models "8b q4km"
f=/tmp/models/8b-q4km.gguf
source .gl/env.sh
unpack nx-vulkan
for v in sums separate; do
  NX_VULKAN_LLM_NORM=$v NX_VULKAN_LLM_KEPT=0 NX_VULKAN_PROFILE_SPANS=end timeout 90 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 1 --sessions 0 --profile 2>>"$OUT/ours.err" \
    | tag "\"variant\":\"$v\"" >> "$OUT/prof.jsonl"
done
python3 - "$OUT/prof.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for v in ("sums", "separate"):
    ps = [j for j in rows if j.get("variant") == v and "profile" in j]
    print(v, "total device ms", round(sum(j["device_us"] for j in ps) / 1000, 2))
    for j in sorted(ps, key=lambda j: -j["device_us"])[:14]:
        print("  ", round(j["device_us"] / 1000, 2), "ms", j["runs"], "runs", round(j["mean_us"], 2), "us", j["profile"][:110])
    for j in rows:
        if j.get("variant") == v and "tg_tok_s" in j: print("  tg", round(j["tg_tok_s"], 1))
PY
echo "all done at $SECONDS s"
