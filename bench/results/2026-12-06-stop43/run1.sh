#!/usr/bin/env bash
# Stop 43, run 1, ONE command: the encoder's tiled attention (64 queries x 32 keys per tile,
# 4 x 4 register-blocked scores; the per-query kernel's bits) against the per-query kernel,
# NX_VULKAN_ENCODER_ATTENTION=query|tiled alternating in this build, beside PyTorch measured
# first in this command:
#  1. PyTorch (sentence-transformers, SDPA) fp32/fp16 on a MiniLM-shaped random checkpoint;
#  2. tests/encoder_kernels.rs on the GPU (both kernels the same bits, head_dim 64 at 64
#     queries per workgroup here);
#  3. encode-bench forward inputs/s, both kernels, two rounds; device time per kernel at 64 x 128.
# Carry .gl, .gpurun/s43, .gpurun/minilm-tok.
source bench/results/2026-12-06-stop43/common.sh
python3 bench/encoder/make_random_bert.py --tokenizer-dir .gpurun/minilm-tok --out /tmp/random-minilm --seed 0 > "$OUT/model.log" 2>&1
timeout 240 python3 bench/encoder/torch_encoder.py --model /tmp/random-minilm --precisions fp32,fp16 --shapes 1x32,8x32,64x128 --reps 30 --no-cold-start 2> "$OUT/torch.err" > "$OUT/torch.jsonl"
echo "torch done at $SECONDS s"
source .gl/env.sh
gpu_test encoder_kernels
unpack nx-vulkan
E="$OUT/encoder.jsonl"
for r in 1 2; do
  for v in query tiled; do
    NX_VULKAN_ENCODER_ATTENTION=$v timeout 150 /tmp/t/nx-vulkan encode-bench --model /tmp/random-minilm --precisions fp32,fp16,bf16 --shapes 1x32,8x32,64x128 --reps 20 2>>"$OUT/ours.err" | tag "\"variant\":\"$v\",\"round\":$r" >> "$E"
  done
done
echo "bench done at $SECONDS s"
for v in query tiled; do
  for p in fp32 fp16; do
    NX_VULKAN_ENCODER_ATTENTION=$v timeout 120 /tmp/t/nx-vulkan encode-bench --model /tmp/random-minilm --precisions $p --shapes 64x128 --reps 10 --profile 2>>"$OUT/ours.err" | grep '"profile"' | tag "\"variant\":\"$v\",\"precision\":\"$p\"" >> "$OUT/profile.jsonl"
  done
done
cat "$OUT/torch.jsonl" "$E" > "$OUT/all.jsonl"
encoder_summary "$OUT/all.jsonl"
python3 - "$OUT/profile.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    print(j["variant"], j["precision"], round(j["mean_us"], 1), "us x", j["runs"], j["profile"][:110])
PY
echo "all done at $SECONDS s"
