#!/usr/bin/env bash
# Stop 39, run 2 (prepared; stop 39 was lent no device): stop 38's final kernels (half tasks
# for every K-quant by default) against llama.cpp's Vulkan backend on the same files, one
# command: 1B Q4_K_M- and Q5_K_M-like, 8B Q4_K_M-like; and 8 concurrent sessions with
# NX_VULKAN_LLM_BATCH_SHARE=0/1 (Q4_K/Q5_K/Q6_K quant words made floats once for all the columns
# of a step; the same bits), alternating; and the SwiGLU product with 64 lanes per row
# (NX_VULKAN_LLM_NT=64: its 32 were measured with 64-value tasks, it now has twice the tasks);
# and the opt-in int8 activations (--int8-activations: llama.cpp quantizes its activations too).
# Decode kernels unchanged since stop 38's b2467de; "${flags[@]}" with an empty array needs
# bash >= 4.4 (set -u).
# Carry .gl, .bench-carry/{cyllama-trim.tar.xz, *.whl, nx-vulkan.xz}.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source bench/llm/unpack-carry.sh
source bench/llm/run-common.sh
R="$OUT/llm.jsonl"
for spec in 1b:q4km 1b:q5km 8b:q4km; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  python3 bench/llm/gen_model.py "$f" "$preset" "$mix"
  timeout 150 python3 bench/llm/llbench.py "$f" 2>"$OUT/llama-$preset-$mix.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\"" >> "$R"
  for r in 1 2; do
    for v in default share nt64 int8; do
      flags=()
      case $v in
        default) envs=(); sess=1,8 ;;
        share) envs=(NX_VULKAN_LLM_BATCH_SHARE=1); sess=1,8 ;;
        nt64) envs=(NX_VULKAN_LLM_NT=64); sess=0 ;;
        int8) envs=(); sess=0; flags=(--int8-activations) ;;
      esac
      env "${envs[@]}" timeout 150 /tmp/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions $sess "${flags[@]}" 2>>"$OUT/ours.log" \
        | tag "\"peer\":\"nx_vulkan\",\"spec\":\"$spec\",\"variant\":\"$v\"" >> "$R"
    done
  done
  rm -f "$f"
  echo "$spec done at $SECONDS s" >&2
done
llm_summary "$R"
