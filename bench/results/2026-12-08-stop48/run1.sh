#!/usr/bin/env bash
# Stop 48 run 1 (prepared; the device lent none in stop 48): RMSNorms by block sums
# (NX_VULKAN_LLM_NORM=sums, opt-in until measured: the residual
# products write the next norm's scaled rows and 8-row sums of squares, so no norm dispatch)
# against the old defaults — separate norm dispatches for wide models (8B, 1B) and norms fused
# into the products for narrow ones (SmolLM2-shaped); "tree": sums with the sum's chains over the
# dot's own tree (NX_VULKAN_LLM_SUMS_IN_TREE=1) instead of a prologue. (1) The kernel and runtime tests on the
# GPU; (2) decode/prefill on 8B and 1B Q4_K_M-like and SmolLM2-shaped Q4_1 files, the ways
# alternating over two rounds, llama.cpp b11669 first on the same files in the same command;
# (3) 8B aggregate decode with 8 and 32 sessions, both ways.
# Carry .gl (../shared/tools/gpu-prep), $BIN (`bench/gpurun-build.sh s48 llm llm_kernels`) and
# .bench-carry (bench/llm/prepare.sh's downloads).
export BIN=${BIN:-.gpurun/s48}
source bench/results/2026-12-06-stop43/common.sh
setup_peer
gen_models "8b q4km" "1b q4km" "smollm2 q4_1"
echo "models at $SECONDS s"
source .gl/env.sh
gpu_test llm_kernels
gpu_test llm summed_norms every_norm_way batched_decode the_gpu_matvec every_fixture separate_norms
echo "tests done at $SECONDS s"
unpack nx-vulkan
for m in "8b-q4km separate" "1b-q4km separate" "smollm2-q4_1 fused"; do
  set -- $m
  f=/tmp/models/$1.gguf
  timeout 60 python3 bench/llm/llbench.py "$f" 2>>"$OUT/llama.log" | tag "\"variant\":\"llama.cpp-vulkan\"" >> "$OUT/llm.jsonl"
  for v in sums $2 tree sums $2 tree; do
    # (tree: sums with NX_VULKAN_LLM_SUMS_IN_TREE=1 — the sum's chains over the dot's tree)
    [ $v = tree ] && export NX_VULKAN_LLM_SUMS_IN_TREE=1 || unset NX_VULKAN_LLM_SUMS_IN_TREE
    NX_VULKAN_LLM_NORM=${v/tree/sums} timeout 60 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" | tag "\"variant\":\"$v\"" >> "$OUT/llm.jsonl"
  done
  unset NX_VULKAN_LLM_SUMS_IN_TREE
done
# aggregate decode, 8 and 32 sessions (the several-column kernels), 8B, both ways
for v in sums separate; do
  NX_VULKAN_LLM_NORM=$v timeout 90 /tmp/t/nx-vulkan bench --model /tmp/models/8b-q4km.gguf --pp 32 --tg 64 --runs 1 --sessions 8,32 2>>"$OUT/ours.err" \
    | tag "\"variant\":\"$v\"" >> "$OUT/agg.jsonl"
done
cat "$OUT/agg.jsonl"
python3 -c "
import json
for l in open('$OUT/llm.jsonl'):
    j = json.loads(l); print(j.get('model'), j['variant'], 'tg', round(j['tg_tok_s'], 1), 'pp', round(j['pp_tok_s'], 1), j.get('tg_runs'))"
echo "all done at $SECONDS s"
