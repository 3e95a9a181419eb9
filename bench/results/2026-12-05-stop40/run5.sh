#!/usr/bin/env bash
# Stop 40, run 5, ONE command: this stop's kernels and stop 39's f32 paths on the GPU first
# (tests/unary_f32.rs whole; elementwise's wide-kernel test; fused_reduce's row-reduction test:
# the same bits as the one-element kernels / the plain extreme on a device that is not
# lavapipe), then run4.sh (device time per row kernel, op rows, the compiler table, each with
# this stop's switches on and off).
# Carry .gl, .gpurun/beam-wide.tgz, .gpurun/tests40, .bench-carry/nx-vulkan-wide.xz.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/t
# PyTorch's peers before env.sh (it unpacks Debian's BEAM over /lib; bench/h200_compiler.sh)
python3 bench/torch_compiler.py --reps 20 > "$OUT/torch_compiler.jsonl" 2> "$OUT/torch_compiler.err"
python3 bench/torch_ops.py --sizes 1048576,16777216 --reps 30 > "$OUT/torch_ops.jsonl" 2> "$OUT/torch_ops.err"
echo "peers done at $SECONDS s"
source .gl/env.sh
source bench/results/2026-12-05-stop40/gpu-tests.sh
OUT="$OUT" bash bench/results/2026-12-05-stop40/run4.sh
