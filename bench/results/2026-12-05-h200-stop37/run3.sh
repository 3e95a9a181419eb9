#!/usr/bin/env bash
# Stop 37, run 3: tests/conv.rs (every case by the direct kernel and by im2col + GEMM, with the
# -0.0-started f64 GEMM) and tests/matmul.rs on the GPU; then reuse_probe4.exs (when a dead
# handle's buffers come back). Carry .gl, .gpurun (tests/: stripped test binaries of this build).
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
for t in conv matmul; do
  (cd native/engine && timeout 200 ../../.gpurun/tests/$t --test-threads 4 2>&1 | tail -25) > "$OUT/test_$t.txt"
  grep -E "^test result|FAILED|panicked" "$OUT/test_$t.txt"
done
ERL_LIBS=/tmp/gbeam timeout 200 elixir bench/results/2026-12-05-h200-stop37/reuse_probe4.exs > "$OUT/reuse_probe4.jsonl" 2>&1
cat "$OUT/reuse_probe4.jsonl"
echo "all done at $SECONDS s"
