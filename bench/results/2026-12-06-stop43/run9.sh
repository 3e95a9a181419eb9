#!/usr/bin/env bash
# Stop 43, run 9, ONE command: the encoder attention with each tile's scores in registers
# (the GPU default now; shared memory only for the K and V tiles) against the scores in shared
# memory (the kernel before), NX_VULKAN_ENCODER_ATTENTION=registers|shared alternating in
# this build, beside PyTorch measured first in this command:
#  1. PyTorch (sentence-transformers, SDPA) fp32/fp16 on a MiniLM-shaped random checkpoint;
#  2. tests/encoder_kernels.rs on the GPU (registers == shared bit for bit, heads up to 128);
#  3. device time per attention call, registers at 32 / 64 / 128 queries per workgroup
#     (NX_VULKAN_ATTN_QB, an uncommitted measurement patch; a row's bits do not depend on it)
#     and shared at 64, at 8 x 32 and 64 x 128;
#  4. encode-bench forward inputs/s, both, two rounds, fp32/fp16/bf16.
# Carry .gl, .gpurun/s43, .gpurun/minilm-tok.
source bench/results/2026-12-06-stop43/common.sh
python3 bench/encoder/make_random_bert.py --tokenizer-dir .gpurun/minilm-tok --out /tmp/random-minilm --seed 0 > "$OUT/model.log" 2>&1
timeout 240 python3 bench/encoder/torch_encoder.py --model /tmp/random-minilm --precisions fp32,fp16 --shapes 1x32,8x32,64x128 --reps 30 --no-cold-start 2> "$OUT/torch.err" > "$OUT/torch.jsonl"
echo "torch done at $SECONDS s"
source .gl/env.sh
gpu_test encoder_kernels
unpack nx-vulkan
for r in 1 2; do
  for kv in "registers:64" "registers:32" "registers:128" "shared:64"; do
    v=${kv%%:*}; qb=${kv#*:}
    for shape in 8x32 64x128; do
      NX_VULKAN_ATTN_QB=$qb NX_VULKAN_ENCODER_ATTENTION=$v timeout 60 /tmp/t/nx-vulkan encode-bench --model /tmp/random-minilm --precisions fp32 --shapes $shape --reps 5 --warmup 2 --profile 2>>"$OUT/ours.err" \
        | grep 'encoder attention' | tag "\"variant\":\"$v\",\"qb\":$qb,\"round\":$r,\"shape\":\"$shape\"" >> "$OUT/attn.jsonl"
    done
  done
done
python3 - "$OUT/attn.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    print(j["round"], j["shape"], j["variant"], j["qb"], round(j["mean_us"], 1), "us x", j["runs"])
PY
E="$OUT/encoder.jsonl"
for r in 1 2; do
  for v in shared registers; do
    NX_VULKAN_ENCODER_ATTENTION=$v timeout 150 /tmp/t/nx-vulkan encode-bench --model /tmp/random-minilm --precisions fp32,fp16,bf16 --shapes 1x32,8x32,64x128 --reps 20 2>>"$OUT/ours.err" | tag "\"variant\":\"$v\",\"round\":$r" >> "$E"
  done
done
cat "$OUT/torch.jsonl" "$E" > "$OUT/all.jsonl"
encoder_summary "$OUT/all.jsonl"
echo "all done at $SECONDS s"
