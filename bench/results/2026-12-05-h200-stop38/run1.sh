#!/usr/bin/env bash
# Stop 38, run 1: the factored Q5_K, Q3_K and Q2_K decode products (new) against stop 37's
# binary (their unit path), 1B shape, alternating, with llama.cpp's Vulkan backend on the same
# file; and 32 lanes instead of 64 for a row on the 1B Q4_K_M-like file (K = 2,048 is 32 tasks
# of 64 values, so 64 lanes leave half idle). Carry .gl, .bench-carry/{cyllama-trim.tar.xz,
# *.whl, nx-vulkan.xz (new), nx-vulkan-prev.xz (old)}.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source bench/llm/unpack-carry.sh
xz -dc .bench-carry/nx-vulkan-prev.xz > /tmp/nx-vulkan-old; chmod +x /tmp/nx-vulkan-old
R="$OUT/llm.jsonl"
tag() { sed "s/^{/{$1,/"; }
ours() { # binary spec label [flags...]
  local bin=$1 spec=$2 label=$3; shift 3
  timeout 90 $bin bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 "$@" 2>>"$OUT/ours.log" \
    | tag "\"peer\":\"nx_vulkan\",\"spec\":\"$spec\",\"build\":\"$label\"" >> "$R"
}
for spec in 1b:q5km 1b:q3k 1b:q2k 1b:q4km; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  python3 bench/llm/gen_model.py "$f" "$preset" "$mix"
  timeout 120 python3 bench/llm/llbench.py "$f" 2>"$OUT/llama-$mix.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\"" >> "$R"
  if [ $mix = q4km ]; then
    for r in 1 2; do
      ours /tmp/nx-vulkan $spec new
      NX_VULKAN_LLM_NT=32 ours /tmp/nx-vulkan $spec new-nt32
    done
  else
    for r in 1 2; do
      ours /tmp/nx-vulkan-old $spec old
      ours /tmp/nx-vulkan $spec new
    done
    [ $mix = q5km ] && { ours /tmp/nx-vulkan-old $spec old-int8 --int8-activations; ours /tmp/nx-vulkan $spec new-int8 --int8-activations; }
  fi
  rm -f "$f"
  echo "$spec done at $SECONDS s" >&2
done
python3 - "$R" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except Exception: continue
    print(j.get("spec"), j.get("peer"), j.get("build", ""), {k: v for k, v in j.items() if k.startswith(("tg", "pp", "decode", "prefill"))})
PY
