#!/usr/bin/env bash
# Stop 35 (prepared; no device was lent that session). Measures on the H200 what stop 35 built
# on lavapipe only:
#  1. int8 activations for the formats that got them in stop 35 (Q5_K, Q5_0, Q2_K, Q3_K) and the
#     ones measured before (Q4_K, Q4_1), 1B shape: decode tok/s with f32 and int8 activations,
#     llama.cpp's Vulkan backend on the same file (it quantizes its activations to int8 too).
#  2. RoPE and the KV store inside the Q, K and V products for NEOX rotation (qwen2 shape, new in
#     stop 35): decode with NX_VULKAN_LLM_ROPE=separate against the default, alternating.
# Carry .gl (../shared/tools/gpu-prep) and .bench-carry (bench/llm/prepare.sh); from the repo root:
#   source .gl/env.sh; bash bench/results/2026-12-05-stop35-prepared/llm-int8-neox.sh
# JSON lines to $OUT/llm-int8-neox.jsonl. About 6-8 minutes (each 1B file ≈ 10 s to write).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source bench/llm/unpack-carry.sh
R="$OUT/llm-int8-neox.jsonl"
tag() { sed "s/^{/{$1,/"; }
for spec in 1b:q5km 1b:q5_0 1b:q2k 1b:q3k 1b:q4km 1b:q4_1; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  python3 bench/llm/gen_model.py "$f" "$preset" "$mix"
  timeout 120 python3 bench/llm/llbench.py "$f" 2>"$OUT/llama-$mix.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\"" >> "$R"
  for a in f32 int8 f32 int8; do
    flag=""; [ $a = int8 ] && flag="--int8-activations"
    timeout 90 /tmp/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 $flag 2>>"$OUT/ours.log" \
      | tag "\"peer\":\"nx_vulkan\",\"spec\":\"$spec\",\"activations\":\"$a\"" >> "$R"
  done
  rm -f "$f"
  echo "$spec done at $SECONDS s" >&2
done
f=/tmp/models/1b-q4km-qwen2.gguf
python3 bench/llm/gen_model.py "$f" 1b q4km qwen2
timeout 120 python3 bench/llm/llbench.py "$f" 2>"$OUT/llama-qwen2.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"1b:q4km:qwen2\"" >> "$R"
for rope in separate fused separate fused; do
  env_rope=""; [ $rope = separate ] && env_rope=separate
  NX_VULKAN_LLM_ROPE=$env_rope timeout 90 /tmp/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 1,8 2>>"$OUT/ours.log" \
    | tag "\"peer\":\"nx_vulkan\",\"spec\":\"1b:q4km:qwen2\",\"rope\":\"$rope\"" >> "$R"
done
echo "all done at $SECONDS s" >&2
grep -h '"tg' "$R" | head -40
