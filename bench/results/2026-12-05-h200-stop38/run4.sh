#!/usr/bin/env bash
# Stop 38, run 4: Q6_K's quants in aligned 32-bit words (five per 16 bytes, shifted where a
# block starts 2 mod 4; was eight 16-bit loads) and the unit path (Q5_0, Q5_1) reading x once
# for all the rows; the same sums (the same bits). Three builds alternating: stop 37's (old),
# run 3's (r3) and this one (new), llama.cpp on the same files: 1B Q4_K_M-, Q5_K_M-like and
# Q5_0, and the 8B Q4_K_M-like file. Carry as run 1 plus .bench-carry/nx-vulkan-r3.xz.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source bench/llm/unpack-carry.sh
xz -dc .bench-carry/nx-vulkan-prev.xz > /tmp/nx-vulkan-old; chmod +x /tmp/nx-vulkan-old
xz -dc .bench-carry/nx-vulkan-r3.xz > /tmp/nx-vulkan-r3; chmod +x /tmp/nx-vulkan-r3
R="$OUT/llm.jsonl"
tag() { sed "s/^{/{$1,/"; }
for spec in 1b:q4km 1b:q5km 1b:q5_0 8b:q4km; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  python3 bench/llm/gen_model.py "$f" "$preset" "$mix"
  timeout 150 python3 bench/llm/llbench.py "$f" 2>"$OUT/llama-$preset-$mix.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\"" >> "$R"
  for r in 1 2; do
    for b in old r3 new; do
      bin=/tmp/nx-vulkan-$b; [ $b = new ] && bin=/tmp/nx-vulkan
      timeout 120 $bin bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.log" \
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
