#!/usr/bin/env bash
# Stop 37, run 8: the wrapper now yields after a hinted collection. yield_probe8.exs again (its
# "nothing" variant is the op table's loop), then the op table from Elixir, PyTorch and Rust.
# Carry .gl, .gpurun/beam.tgz, .bench-carry/nx-vulkan.xz.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
xz -dc .bench-carry/nx-vulkan.xz > /tmp/nx-vulkan; chmod +x /tmp/nx-vulkan
ERL_LIBS=/tmp/gbeam timeout 120 elixir bench/results/2026-12-05-h200-stop37/yield_probe8.exs > "$OUT/yield_probe8.jsonl" 2>&1
cut -c1-300 "$OUT/yield_probe8.jsonl"
for rep in 1 2; do
  ERL_LIBS=/tmp/gbeam timeout 240 elixir bench/ops_bench.exs > "$OUT/elixir$rep.jsonl" 2> "$OUT/elixir$rep.err"
  python3 bench/torch_ops.py --reps 50 > "$OUT/torch$rep.jsonl" 2> "$OUT/torch$rep.err"
  timeout 150 /tmp/nx-vulkan bench --ops --reps 50 > "$OUT/rust$rep.jsonl" 2> "$OUT/rust$rep.err"
  python3 bench/compare_ops.py "$OUT/rust$rep.jsonl" "$OUT/elixir$rep.jsonl" "$OUT/torch$rep.jsonl" > "$OUT/ratios$rep.md" 2>&1
  grep -E "^\| (op|tiny|add|exp|sum|argmax|cumsum|conv|upload|download|dot_exact|dot_f64) " "$OUT/ratios$rep.md"
done
cd "$OUT" && tar -czf /tmp/x.tgz . && rm -rf "$OUT"/* && mv /tmp/x.tgz "$OUT/"
echo "all done at $SECONDS s"
