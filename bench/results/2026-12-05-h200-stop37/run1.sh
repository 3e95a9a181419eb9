#!/usr/bin/env bash
# Stop 37, run 1 (H200): conv2d by im2col + tiled f64 GEMM (`conv`'s choice now) against the
# direct kernel and PyTorch (fp32 with TF32 off, and fp64), inside the whole op table from Rust
# (two rounds around PyTorch's); the padded scan (this build) against be24aa9's unpadded one;
# then reuse_trace.exs (stop 36's prepared trace of the Elixir 16 M add's pool reuse).
# Carry .gl, .gpurun, .bench-carry (nx-vulkan.xz: this build; nx-vulkan-prev.xz: be24aa9).
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
source bench/llm/unpack-carry.sh
xz -dc .bench-carry/nx-vulkan-prev.xz > /tmp/nx-vulkan-prev; chmod +x /tmp/nx-vulkan-prev
S=1024,1048576,16777216
timeout 200 /tmp/nx-vulkan bench --ops --sizes $S --gemm 1024,4096 --reps 50 2>/dev/null | sed 's/^{/{"round":1,/' >> "$OUT/ops.jsonl"
timeout 200 python3 bench/torch_ops.py --sizes $S --dots 1024,4096 --reps 50 2>/dev/null | sed 's/^{/{"round":1,/' >> "$OUT/ops.jsonl"
timeout 200 /tmp/nx-vulkan bench --ops --sizes $S --gemm 1024,4096 --reps 50 2>/dev/null | sed 's/^{/{"round":2,/' >> "$OUT/ops.jsonl"
grep -E 'conv|cumsum' "$OUT/ops.jsonl"
for rep in 1 2; do
  for b in prev padded; do
    bin=/tmp/nx-vulkan; [ $b = prev ] && bin=/tmp/nx-vulkan-prev
    timeout 60 $bin bench --ops --sizes $S --gemm 64 --reps 50 2>/dev/null | grep '"bench":"cumsum"' | sed "s/^{/{\"round\":$rep,\"build\":\"$b\",/" >> "$OUT/scan_ab.jsonl"
  done
done
cat "$OUT/scan_ab.jsonl"
ERL_LIBS=/tmp/gbeam timeout 120 elixir bench/results/2026-12-05-h200-stop36/reuse_trace.exs > "$OUT/reuse_trace.jsonl" 2>&1
cat "$OUT/reuse_trace.jsonl"
echo "all done at $SECONDS s"
