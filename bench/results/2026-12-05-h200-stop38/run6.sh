#!/usr/bin/env bash
# Stop 38, run 6: Q6_K, Q3_K and Q2_K half tasks (NX_VULKAN_LLM_QUARTER_HALF=1: l in 8-value halves of the 16,
# 24 bytes per row in aligned words) against the 64-value task (run 5 made Q4_K/Q5_K half
# tasks the default), alternating, same binary, llama.cpp on the same files: 1B Q4_K_M-like, Q3_K, Q2_K, 8B Q4_K_M-like.
# Carry as run 1 (nx-vulkan.xz only).
# (Kept: the half tasks became the default with f32 activations and the variable is gone.)
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source bench/llm/unpack-carry.sh
R="$OUT/llm.jsonl"
tag() { sed "s/^{/{$1,/"; }
for spec in 1b:q4km 1b:q3k 1b:q2k 8b:q4km; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  python3 bench/llm/gen_model.py "$f" "$preset" "$mix"
  timeout 150 python3 bench/llm/llbench.py "$f" 2>"$OUT/llama-$preset-$mix.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\"" >> "$R"
  for r in 1 2; do
    for h in 0 1; do
      NX_VULKAN_LLM_QUARTER_HALF=$h timeout 120 /tmp/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.log" \
        | tag "\"peer\":\"nx_vulkan\",\"spec\":\"$spec\",\"q6_half\":$h" >> "$R"
    done
  done
  rm -f "$f"
  echo "$spec done at $SECONDS s" >&2
done
python3 - "$R" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except Exception: continue
    print(j.get("spec"), j.get("peer"), j.get("q6_half", ""), "tg", round(j.get("tg_tok_s", 0), 1), "pp", round(j.get("pp_tok_s", 0)))
PY
