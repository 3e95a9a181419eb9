#!/usr/bin/env bash
# Stop 34, run 2. (1) Run 1's Rust 16 M rows were about twice stop 31's and 12-01's (add 135 vs
# 71 us) with PyTorch's unchanged: stop 31's last binary (f5731ad, .gpurun/old31) and this one,
# alternating, same lease, with device time per kernel at 16 M. (2) The Elixir op table again
# with this build's young-generation collection hint (run 1: Elixir 16 M add 470 us, Rust 135:
# each dead result made the next op allocate anew), PyTorch eager between rounds. (3) Run 1's
# Elixir cumsum (600 us at 1 K, Rust 108): cumsum_probe.exs.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins /tmp/gbeam
tar -xzf .gpurun/bins.tgz -C /tmp/gbins; tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
S=16777216
for rep in 1 2; do
  for b in old31 new; do
    bin=/tmp/gbins/nx-vulkan; [ $b = old31 ] && bin=.gpurun/old31/nx-vulkan
    timeout 60 $bin bench --ops --sizes $S --gemm 64 --reps 20 2>/dev/null | grep -E '"bench":"(add|exp|sum|argmax)"' | sed "s/^{/{\"round\":$rep,\"build\":\"$b\",/" >> "$OUT/ab.jsonl"
  done
done
for b in old31 new; do
  bin=/tmp/gbins/nx-vulkan; [ $b = old31 ] && bin=.gpurun/old31/nx-vulkan
  timeout 60 $bin bench --ops --profile --sizes $S --gemm 64 --reps 5 2>/dev/null | grep '"profile"' | sed "s/^{/{\"build\":\"$b\",/" >> "$OUT/ab-profile.jsonl"
done
echo "A/B done at $SECONDS s"
python3 - "$OUT" <<'PY'
import json,sys,collections
r=collections.defaultdict(list)
for l in open(sys.argv[1]+"/ab.jsonl"):
    j=json.loads(l); r[(j["bench"],j["build"])].append(j["median_us"])
for k in sorted(r): print(k, r[k])
PY
for rep in 1 2; do
  ERL_LIBS=/tmp/gbeam timeout 200 elixir bench/ops_bench.exs > "$OUT/elixir$rep.jsonl" 2> "$OUT/elixir$rep.err"
  python3 bench/torch_ops.py --reps 50 > "$OUT/torch$rep.jsonl" 2> /dev/null
  echo "round $rep done at $SECONDS s"
done
for rep in 1 2; do
  python3 bench/compare_ops.py /dev/null "$OUT/elixir$rep.jsonl" "$OUT/torch$rep.jsonl" 2>&1 | grep -E "^\| (op|add|exp|sum|argmax|cumsum|softmax_eager|upload|download|tiny)" | cut -d"|" -f2,3,5,6,8 > "$OUT/ratios$rep.md"
done
paste -d"|" "$OUT/ratios1.md" <(cut -d"|" -f3- "$OUT/ratios2.md")
ERL_LIBS=/tmp/gbeam timeout 120 elixir bench/results/2026-12-05-h200-stop34/cumsum_probe.exs > "$OUT/cumsum_probe.jsonl" 2>&1; cat "$OUT/cumsum_probe.jsonl"
echo "all done at $SECONDS s"
