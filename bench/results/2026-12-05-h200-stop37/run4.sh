#!/usr/bin/env bash
# Stop 37, run 4: tests/exp_f32.rs (the f32-result exp against the full f64 path) and
# tests/scan.rs (padding dropped) on the GPU; reuse_probe5.exs (the 16 M add loop traced per
# call, in the script's process and a spawned one); then the op table from Elixir, PyTorch and
# Rust in one command (this build: m_exp_f32, conv by im2col + GEMM, full collections).
# Carry .gl, .gpurun (tests/, beam.tgz of this build), .bench-carry/nx-vulkan.xz (this build).
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
xz -dc .bench-carry/nx-vulkan.xz > /tmp/nx-vulkan; chmod +x /tmp/nx-vulkan
for t in exp_f32 scan; do
  (cd native/engine && timeout 120 ../../.gpurun/tests/$t --test-threads 4 2>&1 | tail -8) > "$OUT/test_$t.txt"
  grep -E "^test result|FAILED|panicked" "$OUT/test_$t.txt"
done
ERL_LIBS=/tmp/gbeam timeout 120 elixir bench/results/2026-12-05-h200-stop37/reuse_probe5.exs > "$OUT/reuse_probe5.jsonl" 2>&1
cut -c1-900 "$OUT/reuse_probe5.jsonl"; echo "probe done at $SECONDS s"
ERL_LIBS=/tmp/gbeam timeout 240 elixir bench/ops_bench.exs > "$OUT/elixir.jsonl" 2> "$OUT/elixir.err"
python3 bench/torch_ops.py --reps 50 > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
timeout 150 /tmp/nx-vulkan bench --ops --reps 50 > "$OUT/rust.jsonl" 2> "$OUT/rust.err"
python3 bench/compare_ops.py "$OUT/rust.jsonl" "$OUT/elixir.jsonl" "$OUT/torch.jsonl" > "$OUT/ratios.md" 2>&1
cat "$OUT/ratios.md"; tail -3 "$OUT/elixir.err"
cd "$OUT" && tar -czf /tmp/x.tgz . && rm -rf "$OUT"/* && mv /tmp/x.tgz "$OUT/"
echo "all done at $SECONDS s"
