#!/usr/bin/env bash
# Stop 37, run 5: add_probe6.exs (the op table's 16 M add from Elixir, instrumented), then
# exp from Rust, this build (m_exp_f32) against be24aa9's (m_exp rounded), alternating, 3 rounds.
# Carry .gl, .gpurun/beam.tgz, .bench-carry/nx-vulkan.xz, .bench-carry/nx-vulkan-prev.xz.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
xz -dc .bench-carry/nx-vulkan.xz > /tmp/nx-vulkan; chmod +x /tmp/nx-vulkan
xz -dc .bench-carry/nx-vulkan-prev.xz > /tmp/nx-vulkan-prev; chmod +x /tmp/nx-vulkan-prev
ERL_LIBS=/tmp/gbeam timeout 150 elixir bench/results/2026-12-05-h200-stop37/add_probe6.exs > "$OUT/add_probe6.jsonl" 2>&1
cut -c1-700 "$OUT/add_probe6.jsonl"; echo "probe done at $SECONDS s"
for rep in 1 2 3; do
  for b in prev now; do
    bin=/tmp/nx-vulkan; [ $b = prev ] && bin=/tmp/nx-vulkan-prev
    timeout 60 $bin bench --ops --sizes 1048576,16777216 --gemm 64 --reps 50 2>/dev/null | grep -E '"bench":"(exp|add)"' | sed "s/^{/{\"round\":$rep,\"build\":\"$b\",/" >> "$OUT/exp_ab.jsonl"
  done
done
cat "$OUT/exp_ab.jsonl"
echo "all done at $SECONDS s"
