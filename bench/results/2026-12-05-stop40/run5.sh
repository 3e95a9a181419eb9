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
for t in unary_f32:"" elementwise:wide fused_reduce:row_reduction; do
  name=${t%%:*}; filter=${t#*:}
  xz -dc .gpurun/tests40/$name.xz > /tmp/t/$name; chmod +x /tmp/t/$name
  (cd native/engine && timeout 150 /tmp/t/$name $filter --test-threads 4 2>&1 | tail -15) > "$OUT/test_$name.txt"
  echo "$name $filter:"; grep -E "^test result|FAILED|panicked" "$OUT/test_$name.txt"
done
echo "tests done at $SECONDS s"
OUT="$OUT" bash bench/results/2026-12-05-stop40/run4.sh
