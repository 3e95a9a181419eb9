#!/usr/bin/env bash
# Stop 43, run 10, ONE command: the committed form (scores in registers with 128 queries per
# workgroup on GPUs; run 9 measured it through a measurement patch):
#  1. tests/encoder_kernels.rs' attention tests on the GPU (registers == shared bit for bit,
#     heads 8 to 128; tolerance and batch independence);
#  2. device time per attention call and forward inputs/s, default against
#     NX_VULKAN_ENCODER_ATTENTION=shared (the kernel before), alternating, two rounds.
# Carry .gl, .gpurun/s43, .gpurun/minilm-tok.
source bench/results/2026-12-06-stop43/common.sh
python3 bench/encoder/make_random_bert.py --tokenizer-dir .gpurun/minilm-tok --out /tmp/random-minilm --seed 0 > "$OUT/model.log" 2>&1
source .gl/env.sh
gpu_test encoder_kernels attention
unpack nx-vulkan
E="$OUT/encoder.jsonl"
for r in 1 2; do
  for v in shared default; do
    envs=(); [ $v = shared ] && envs=(NX_VULKAN_ENCODER_ATTENTION=shared)
    env "${envs[@]}" timeout 100 /tmp/t/nx-vulkan encode-bench --model /tmp/random-minilm --precisions fp32,fp16,bf16 --shapes 1x32,8x32,64x128 --reps 20 2>>"$OUT/ours.err" | tag "\"variant\":\"$v\",\"round\":$r" >> "$E"
    env "${envs[@]}" timeout 60 /tmp/t/nx-vulkan encode-bench --model /tmp/random-minilm --precisions fp32 --shapes 64x128 --reps 5 --warmup 2 --profile 2>>"$OUT/ours.err" | grep 'encoder attention' | tag "\"variant\":\"$v\",\"round\":$r" >> "$OUT/attn.jsonl"
  done
done
encoder_summary "$E"
cut -c1-220 "$OUT/attn.jsonl"
echo "all done at $SECONDS s"
