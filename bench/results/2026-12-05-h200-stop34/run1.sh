#!/usr/bin/env bash
# Stop 34, run 1: the first H200 run since stop 31. Correctness of the reduce, fused-reduce and
# stream suites (stop 31's reduce fixes and stops 32-33's stream/pool/no-wait transfers were never
# run there), then the op table from Elixir (handle API, the no-wait transfers), Rust and PyTorch
# eager in one command; the tiny-op rows twice more at the end to see their spread.
# Carried: .gl (loader + BEAM debs), .gpurun/bins.tgz (test binaries + nx-vulkan),
# .gpurun/beam.tgz (ERL_LIBS folder: nx_vulkan/ebin + priv/libnx_vulkan_nif.so).
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins /tmp/gbeam
tar -xzf .gpurun/bins.tgz -C /tmp/gbins; tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
echo "unpacked at $SECONDS s"
cd native/engine
for t in stream reduce fused_reduce; do
  timeout 120 /tmp/gbins/$t --test-threads 4 > "$OUT/$t-tests.txt" 2>&1
  echo "$t: $(grep 'test result' "$OUT/$t-tests.txt") at $SECONDS s"
  grep -E "FAILED|panicked" "$OUT/$t-tests.txt" | head -5
done
cd ../..
ERL_LIBS=/tmp/gbeam timeout 200 elixir bench/ops_bench.exs > "$OUT/elixir.jsonl" 2> "$OUT/elixir.err"
echo "elixir done at $SECONDS s"; tail -3 "$OUT/elixir.err"
python3 bench/torch_ops.py --reps 50 > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
echo "torch done at $SECONDS s"
timeout 120 /tmp/gbins/nx-vulkan bench --ops --reps 50 > "$OUT/rust.jsonl" 2> "$OUT/rust.err"
echo "rust done at $SECONDS s"
python3 bench/compare_ops.py "$OUT/rust.jsonl" "$OUT/elixir.jsonl" "$OUT/torch.jsonl" > "$OUT/ratios.md" 2>&1
cat "$OUT/ratios.md"
for rep in 2 3; do
  ERL_LIBS=/tmp/gbeam timeout 60 elixir bench/ops_bench.exs 1024 2>/dev/null | grep tiny | sed "s/^{/{\"round\":$rep,/" >> "$OUT/elixir-tiny.jsonl"
  python3 bench/torch_ops.py --sizes 1024 --dots "" --reps 50 2>/dev/null | grep tiny | sed "s/^{/{\"round\":$rep,/" >> "$OUT/torch-tiny.jsonl"
done
cat "$OUT/elixir-tiny.jsonl" "$OUT/torch-tiny.jsonl"
echo "all done at $SECONDS s"
