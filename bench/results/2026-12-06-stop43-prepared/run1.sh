#!/usr/bin/env bash
# Prepared at stop 43 (not yet run): does shared memory per workgroup bound the other
# kernel families as it bounded the encoder attention (stop 43, runs 6-7)? ONE command,
# each knob A/B in one build, two rounds (knobs change no bit; README's environment table):
#  1. the cumulative sum at 1 M and 16 M with 16 (default, 16.9 KiB per workgroup), 8 and 4
#     positions per invocation (NX_VULKAN_SCAN_POSITIONS; smaller tiles, more passes);
#  2. the encoder's f32 projections (64 x 64 tile, 16 KiB at K step 16) with K steps 16 / 8 /
#     32 (NX_VULKAN_ENCODER_LINEAR_KSTEP), device time per kernel and forward inputs/s at
#     64 x 128;
#  3. the f16 tensor-core GEMM's variants (--coopmat-all: K step 32 stages 16 KiB per
#     128 x 128 tile, 64 stages 32 KiB) at 4096^3 and 2048^3.
# Build the current nx-vulkan into $BIN (xz); carry .gl, $BIN, .gpurun/minilm-tok.
export BIN=${BIN:-.gpurun/s44}
source bench/results/2026-12-06-stop43/common.sh
python3 bench/encoder/make_random_bert.py --tokenizer-dir .gpurun/minilm-tok --out /tmp/random-minilm --seed 0 > "$OUT/model.log" 2>&1
source .gl/env.sh
unpack nx-vulkan
for r in 1 2; do
  for pos in 16 8 4; do
    NX_VULKAN_SCAN_POSITIONS=$pos timeout 60 /tmp/t/nx-vulkan bench --ops --only cumsum --sizes 1048576,16777216 --reps 30 2>>"$OUT/ours.err" | tag "\"positions\":$pos,\"round\":$r" >> "$OUT/scan.jsonl"
  done
  for k in 16 8 32; do
    NX_VULKAN_ENCODER_LINEAR_KSTEP=$k timeout 60 /tmp/t/nx-vulkan encode-bench --model /tmp/random-minilm --precisions fp32 --shapes 64x128 --reps 10 --profile 2>>"$OUT/ours.err" | tag "\"kstep\":$k,\"round\":$r" >> "$OUT/linear.jsonl"
  done
done
timeout 200 /tmp/t/nx-vulkan gemm --types f16 --sizes 1:4096:4096:4096,1:2048:2048:2048 --coopmat-all 2>>"$OUT/ours.err" > "$OUT/gemm.jsonl"
grep -h cumsum "$OUT/scan.jsonl" | cut -c1-220
grep -h -E '"scope":"forward"|encoder linear' "$OUT/linear.jsonl" | cut -c1-220
cut -c1-220 "$OUT/gemm.jsonl"
echo "all done at $SECONDS s"
