#!/usr/bin/env bash
# Stop 37, run 2: the size-class-dry hint now asks for a full collection (a young one aged the
# new result's handle; reuse_probe3.exs on lavapipe). The Elixir 16 M add's pool reuse again
# (reuse_probe2.exs, big_add_probe.exs), then the op table from Elixir (now with conv2d), PyTorch
# and Rust in one command, with the ratios. Carry .gl, .gpurun (this build's NIF and ebin),
# .bench-carry (nx-vulkan.xz: this build).
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
source bench/llm/unpack-carry.sh
ERL_LIBS=/tmp/gbeam timeout 120 elixir bench/results/2026-12-05-h200-stop37/reuse_probe2.exs > "$OUT/reuse_probe2.jsonl" 2>&1
ERL_LIBS=/tmp/gbeam timeout 150 elixir bench/results/2026-12-05-h200-stop36/big_add_probe.exs > "$OUT/big_add_probe.jsonl" 2>&1
cat "$OUT/reuse_probe2.jsonl" "$OUT/big_add_probe.jsonl"; echo "probes done at $SECONDS s"
ERL_LIBS=/tmp/gbeam timeout 240 elixir bench/ops_bench.exs > "$OUT/elixir.jsonl" 2> "$OUT/elixir.err"
python3 bench/torch_ops.py --reps 50 > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
timeout 150 /tmp/nx-vulkan bench --ops --reps 50 > "$OUT/rust.jsonl" 2> "$OUT/rust.err"
python3 bench/compare_ops.py "$OUT/rust.jsonl" "$OUT/elixir.jsonl" "$OUT/torch.jsonl" > "$OUT/ratios.md" 2>&1
cat "$OUT/ratios.md"; tail -3 "$OUT/elixir.err"
echo "all done at $SECONDS s"
