#!/usr/bin/env bash
# Stop 36, second ops run: the shared-memory scan (be24aa9: 1 dispatch at 1 K, 3 at 1 M, 5 at
# 16 M, where the ops run had 19 / 39 / 47 and cumsum at 0.09-0.22x PyTorch), and
# big_add_probe.exs on the Elixir 16 M add (250-270 µs vs Rust's 72-75 in the ops run).
# Same carries as ops.sh.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
source bench/llm/unpack-carry.sh
ERL_LIBS=/tmp/gbeam timeout 90 elixir bench/results/2026-12-05-h200-stop36/big_add_probe.exs > "$OUT/big_add_probe.jsonl" 2>&1
cat "$OUT/big_add_probe.jsonl"; echo "probe done at $SECONDS s"
ERL_LIBS=/tmp/gbeam timeout 90 elixir bench/results/2026-12-05-h200-stop34/cumsum_probe.exs > "$OUT/cumsum_probe.jsonl" 2>&1
cat "$OUT/cumsum_probe.jsonl"
for rep in 1 2; do
  ERL_LIBS=/tmp/gbeam timeout 200 elixir bench/ops_bench.exs > "$OUT/elixir$rep.jsonl" 2> "$OUT/elixir$rep.err"
  python3 bench/torch_ops.py --reps 50 > "$OUT/torch$rep.jsonl" 2> "$OUT/torch$rep.err"
  timeout 120 /tmp/nx-vulkan bench --ops --reps 50 > "$OUT/rust$rep.jsonl" 2> "$OUT/rust$rep.err"
  python3 bench/compare_ops.py "$OUT/rust$rep.jsonl" "$OUT/elixir$rep.jsonl" "$OUT/torch$rep.jsonl" > "$OUT/ratios$rep.md" 2>&1
  echo "round $rep done at $SECONDS s"
done
grep -E "^\| (op|add|exp|sum|argmax|cumsum|tiny)" "$OUT/ratios1.md"
grep -E "^\| (op|add|exp|sum|argmax|cumsum|tiny)" "$OUT/ratios2.md"
timeout 60 /tmp/nx-vulkan bench --ops --profile --sizes 1024,1048576,16777216 --gemm 64 --reps 5 2>/dev/null | grep '"profile":"scan' > "$OUT/profile-scan.jsonl"
cat "$OUT/profile-scan.jsonl"
echo "all done at $SECONDS s"
# the device tool brings back a handful of files: one archive
(cd "$OUT" && tar -czf /tmp/ops2.tgz . && rm -rf "$OUT"/* && mv /tmp/ops2.tgz "$OUT/")
