#!/usr/bin/env bash
# Stop 36, run 4: the scan's shared-memory slots padded one per 32 (bank conflicts at the
# tree's power-of-two strides) against the unpadded build (be24aa9), alternating, cumsum rows
# from Rust with PyTorch eager beside them; then reuse_trace.exs (the Elixir 16 M add's pool
# reuse). Carry .gl, .gpurun, .bench-carry (nx-vulkan.xz: padded; nx-vulkan-prev.xz: unpadded).
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
source bench/llm/unpack-carry.sh
xz -dc .bench-carry/nx-vulkan-prev.xz > /tmp/nx-vulkan-prev; chmod +x /tmp/nx-vulkan-prev
for rep in 1 2; do
  for b in prev padded; do
    bin=/tmp/nx-vulkan; [ $b = prev ] && bin=/tmp/nx-vulkan-prev
    timeout 60 $bin bench --ops --sizes 1024,1048576,16777216 --gemm 64 --reps 50 2>/dev/null | grep '"bench":"cumsum"' | sed "s/^{/{\"round\":$rep,\"build\":\"$b\",/" >> "$OUT/scan_ab.jsonl"
  done
  python3 bench/torch_ops.py --sizes 1024,1048576,16777216 --dots "" --reps 50 2>/dev/null | grep '"bench":"cumsum"' | sed "s/^{/{\"round\":$rep,\"build\":\"torch\",/" >> "$OUT/scan_ab.jsonl"
done
cat "$OUT/scan_ab.jsonl"
ERL_LIBS=/tmp/gbeam timeout 120 elixir bench/results/2026-12-05-h200-stop36/reuse_trace.exs > "$OUT/reuse_trace.jsonl" 2>&1
cat "$OUT/reuse_trace.jsonl"
echo "all done at $SECONDS s"
