#!/usr/bin/env bash
# Stop 38, run 3: the Q8_0/Q4_0/Q4_1 f32-activation products reading each column's x once for
# all the rows of a lane group (was once per row) and their words once for all the columns;
# the same sums in the same order (the same bits). New against stop 37's binary, alternating,
# llama.cpp on the same files: 1B Q4_1 and Q8_0, SmolLM2-shaped Q4_1. Carry as run 1.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source bench/llm/unpack-carry.sh
xz -dc .bench-carry/nx-vulkan-prev.xz > /tmp/nx-vulkan-old; chmod +x /tmp/nx-vulkan-old
R="$OUT/llm.jsonl"
tag() { sed "s/^{/{$1,/"; }
for spec in 1b:q4_1 1b:q8_0 smollm2:q4_1; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  python3 bench/llm/gen_model.py "$f" "$preset" "$mix"
  timeout 120 python3 bench/llm/llbench.py "$f" 2>"$OUT/llama-$preset-$mix.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\"" >> "$R"
  for r in 1 2; do
    for b in old new; do
      bin=/tmp/nx-vulkan; [ $b = old ] && bin=/tmp/nx-vulkan-old
      timeout 90 $bin bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.log" \
        | tag "\"peer\":\"nx_vulkan\",\"spec\":\"$spec\",\"build\":\"$b\"" >> "$R"
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
    print(j.get("spec"), j.get("peer"), j.get("build", ""), "tg", round(j.get("tg_tok_s", 0), 1), "pp", round(j.get("pp_tok_s", 0)))
PY
