#!/usr/bin/env bash
# Stop 38, run 2: Q4_K/Q5_K sums split into 1, 2 or 4 interleaved chains
# (NX_VULKAN_LLM_KQ_CHAINS; shorter dependency chains, the same work), alternating, on the 1B
# Q4_K_M- and Q5_K_M-like files and the 8B Q4_K_M-like one (with llama.cpp on the 8B file).
# Carry as run 1.
# (Not kept: the variable and its code are gone — each sum's sa/sb/xa/xh became KQ_CHAINS
# interleaved arrays, value group i into chain i % KQ_CHAINS, added in chain order at the end.)
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source bench/llm/unpack-carry.sh
R="$OUT/llm.jsonl"
tag() { sed "s/^{/{$1,/"; }
for spec in 1b:q4km 1b:q5km 8b:q4km; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  python3 bench/llm/gen_model.py "$f" "$preset" "$mix"
  [ $preset = 8b ] && timeout 150 python3 bench/llm/llbench.py "$f" 2>"$OUT/llama-$preset-$mix.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\"" >> "$R"
  for r in 1 2; do
    for c in 1 2 4; do
      NX_VULKAN_LLM_KQ_CHAINS=$c timeout 120 /tmp/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.log" \
        | tag "\"peer\":\"nx_vulkan\",\"spec\":\"$spec\",\"chains\":$c" >> "$R"
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
    print(j.get("spec"), j.get("peer"), j.get("chains", ""), "tg", round(j.get("tg_tok_s", 0), 1), "pp", round(j.get("pp_tok_s", 0)))
PY
