#!/usr/bin/env bash
# Stop 37, run 6 (this build: cache eviction by least recent release, m_exp_f32, conv by
# im2col + GEMM, full collections): add_probe7.exs (the op table's 16 M add from Elixir traced
# per call), then the op table from Elixir, PyTorch and Rust in one command.
# Carry .gl, .gpurun/beam.tgz, .bench-carry/nx-vulkan.xz.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
xz -dc .bench-carry/nx-vulkan.xz > /tmp/nx-vulkan; chmod +x /tmp/nx-vulkan
ERL_LIBS=/tmp/gbeam timeout 150 elixir bench/results/2026-12-05-h200-stop37/add_probe7.exs > "$OUT/add_probe7.jsonl" 2>&1
grep '"size":16777216' "$OUT/add_probe7.jsonl" | cut -c1-1500; echo "probe done at $SECONDS s"
ERL_LIBS=/tmp/gbeam timeout 240 elixir bench/ops_bench.exs > "$OUT/elixir.jsonl" 2> "$OUT/elixir.err"
python3 bench/torch_ops.py --reps 50 > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
timeout 150 /tmp/nx-vulkan bench --ops --reps 50 > "$OUT/rust.jsonl" 2> "$OUT/rust.err"
python3 bench/compare_ops.py "$OUT/rust.jsonl" "$OUT/elixir.jsonl" "$OUT/torch.jsonl" > "$OUT/ratios.md" 2>&1
grep -E "^\| (op|tiny|add|exp|sum|argmax|cumsum|conv|upload|download) " "$OUT/ratios.md"; tail -3 "$OUT/elixir.err"
cd "$OUT" && tar -czf /tmp/x.tgz . && rm -rf "$OUT"/* && mv /tmp/x.tgz "$OUT/"
echo "all done at $SECONDS s"
