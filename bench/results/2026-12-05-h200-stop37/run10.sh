#!/usr/bin/env bash
# Stop 37, run 10 (final code, 082782c): the op table from Elixir, PyTorch and Rust in one
# command, one round. Carry .gl, .gpurun/beam.tgz, .bench-carry/nx-vulkan.xz.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
xz -dc .bench-carry/nx-vulkan.xz > /tmp/nx-vulkan; chmod +x /tmp/nx-vulkan
ERL_LIBS=/tmp/gbeam timeout 200 elixir bench/ops_bench.exs > "$OUT/elixir.jsonl" 2> "$OUT/elixir.err"
python3 bench/torch_ops.py --reps 50 > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
timeout 150 /tmp/nx-vulkan bench --ops --reps 50 > "$OUT/rust.jsonl" 2> "$OUT/rust.err"
python3 bench/compare_ops.py "$OUT/rust.jsonl" "$OUT/elixir.jsonl" "$OUT/torch.jsonl" > "$OUT/ratios.md" 2>&1
cat "$OUT/ratios.md"
cd "$OUT" && tar -czf /tmp/x.tgz . && rm -rf "$OUT"/* && mv /tmp/x.tgz "$OUT/"
