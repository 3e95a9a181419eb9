#!/usr/bin/env bash
# Stop 36, the first device lent since stop 34's run 1. Measures what stops 34-35 built for the
# op table on lavapipe only: reductions, arg-reductions and cumulative scans on the normal
# scheduler when warm (run 1: Elixir cumsum 600 µs at 1 K where Rust took 108), the
# young-collection hint for ≥ 16 MiB results, and whether run 1's doubled Rust 16 M rows (add
# 135 µs vs 71 at stop 31, PyTorch unchanged) come back on another lease (stop 31's binary is
# no longer here for an A/B; lavapipe showed no difference between the two).
# Carried: .gl (gpu-prep --beam), .gpurun/beam.tgz (ERL_LIBS folder: nx_vulkan/ebin + priv NIF),
# .bench-carry (bench/llm/prepare.sh: /tmp/nx-vulkan). From the repo root:
#   bash bench/results/2026-12-05-h200-stop36/ops.sh
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
source bench/llm/unpack-carry.sh
echo "unpacked at $SECONDS s"
ERL_LIBS=/tmp/gbeam timeout 90 elixir bench/results/2026-12-05-h200-stop34/cumsum_probe.exs > "$OUT/cumsum_probe.jsonl" 2>&1
cat "$OUT/cumsum_probe.jsonl"; echo "probe done at $SECONDS s"
for rep in 1 2; do
  [ $rep = 2 ] && [ $SECONDS -gt 300 ] && break
  ERL_LIBS=/tmp/gbeam timeout 200 elixir bench/ops_bench.exs > "$OUT/elixir$rep.jsonl" 2> "$OUT/elixir$rep.err"
  python3 bench/torch_ops.py --reps 50 > "$OUT/torch$rep.jsonl" 2> "$OUT/torch$rep.err"
  timeout 120 /tmp/nx-vulkan bench --ops --reps 50 > "$OUT/rust$rep.jsonl" 2> "$OUT/rust$rep.err"
  python3 bench/compare_ops.py "$OUT/rust$rep.jsonl" "$OUT/elixir$rep.jsonl" "$OUT/torch$rep.jsonl" > "$OUT/ratios$rep.md" 2>&1
  echo "round $rep done at $SECONDS s"
  [ $rep = 1 ] && timeout 60 /tmp/nx-vulkan bench --ops --profile --sizes 16777216 --gemm 64 --reps 5 2>/dev/null | grep '"profile"' > "$OUT/profile16m.jsonl"
done
cat "$OUT/ratios1.md"
[ -f "$OUT/ratios2.md" ] && grep -E "^\| (op|add|exp|sum|argmax|cumsum|upload|download|tiny)" "$OUT/ratios2.md"
cat "$OUT/profile16m.jsonl" | head -20
echo "all done at $SECONDS s"
