#!/usr/bin/env bash
# The LLM runtime against llama.cpp's Vulkan backend on the H200, one command (device tool), from
# the repo root, carrying .gl (../shared/tools/gpu-prep) and .bench-carry (bench/llm/prepare.sh):
#   source .gl/env.sh; bash bench/llm/h200.sh [PRESET:MIX ...]
# For each model: a random-weight GGUF written there (bench/llm/gen_model.py; the device tool
# cannot carry real models), llama.cpp's pp512/tg128 (bench/llm/llbench.py), then ours
# (`nx-vulkan bench --model`: pp512, tg128, 1/8/32 concurrent sessions, roofline) and a short
# profiled run (device time per kernel). JSON lines to $OUT/llm-h200.jsonl.
set -euo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source bench/llm/unpack-carry.sh
R="$OUT/llm-h200.jsonl"
/tmp/nx-vulkan info | head -3 >&2
specs=("$@"); [ ${#specs[@]} -gt 0 ] || specs=(smollm2:q4_1 1b:q4km 8b:q4km)
for spec in "${specs[@]}"; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  [ -f "$f" ] || python3 bench/llm/gen_model.py "$f" "$preset" "$mix"
  echo "== $spec: llama.cpp" >&2
  python3 bench/llm/llbench.py "$f" 2>"$OUT/llama-$preset-$mix.log" | sed "s/^{/{\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\",/" >> "$R" || echo "{\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\",\"error\":true}" >> "$R"
  echo "== $spec: nx_vulkan" >&2
  /tmp/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 1,8,32 --peak-gbs 4800 2>>"$OUT/ours.log" \
    | sed "s/^{/{\"peer\":\"nx_vulkan\",\"spec\":\"$spec\",/" >> "$R" || echo "{\"peer\":\"nx_vulkan\",\"spec\":\"$spec\",\"error\":true}" >> "$R"
  /tmp/nx-vulkan bench --model "$f" --pp 512 --tg 32 --runs 1 --sessions 0 --profile 2>>"$OUT/ours.log" \
    | sed "s/^{/{\"spec\":\"$spec\",/" >> "$OUT/llm-h200-profile.jsonl" || true
  tail -1 "$R" >&2
done
