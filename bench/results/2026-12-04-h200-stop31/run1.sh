#!/usr/bin/env bash
# Stop 31, run 1: the split reductions' shape and the f32 arg-reduction's in-order fold.
# Correctness first (the reduce suite on the H200, every variant below default-on), then the
# op table's sum/argmax rows from Rust for each variant, two alternating rounds, PyTorch eager in
# the same command, and device time per kernel (timestamps) for each variant at 16 M.
# Variants (environment; measurement switches of this run only):
#   base      NX_VULKAN_ARG_SEQ_OFF=1                       (stop 30's kernels)
#   seq       the f32 argmax folds its own candidates by order keys
#   p2        seq + pass 2 loads all its partials at once (row_k)
#   g2048/g1024/g512  p2 + NX_VULKAN_SPLIT_GROUPS (pass-1 workgroups aimed at; default 4096)
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
NX_VULKAN_P2_ROWK=1 timeout 200 /tmp/gbins/reduce --test-threads 4 2>&1 | grep -E "^test |test result|panicked" > "$OUT/reduce-tests.txt"
grep "test result" "$OUT/reduce-tests.txt"; echo "tests done at $SECONDS s"
envof() { case $1 in
  base) echo "NX_VULKAN_ARG_SEQ_OFF=1";; seq) echo "X=1";; p2) echo "NX_VULKAN_P2_ROWK=1";;
  g2048) echo "NX_VULKAN_P2_ROWK=1 NX_VULKAN_SPLIT_GROUPS=2048";; g1024) echo "NX_VULKAN_P2_ROWK=1 NX_VULKAN_SPLIT_GROUPS=1024";;
  g512) echo "NX_VULKAN_P2_ROWK=1 NX_VULKAN_SPLIT_GROUPS=512";; esac; }
python3 bench/torch_ops.py --sizes 1048576,16777216 --dots "" --reps 50 > "$OUT/torch.jsonl" 2>"$OUT/torch.err"
for rep in 1 2; do
  for v in base seq p2 g2048 g1024 g512; do
    env $(envof $v) /tmp/gbins/nx-vulkan bench --ops --sizes 1048576,16777216 --gemm 64 --reps 50 2>>"$OUT/err.log" \
      | grep -E '"bench":"(sum|argmax|add|tiny_add_sync)"' | sed "s/^{/{\"variant\":\"$v\",\"round\":$rep,/" >> "$OUT/rust.jsonl"
  done
  echo "round $rep done at $SECONDS s"
done
python3 bench/torch_ops.py --sizes 1048576,16777216 --dots "" --reps 50 > "$OUT/torch2.jsonl" 2>>"$OUT/torch.err"
for v in base seq p2 g2048 g1024 g512; do
  env $(envof $v) /tmp/gbins/nx-vulkan bench --ops --profile --sizes 16777216 --gemm 64 --reps 10 2>>"$OUT/err.log" \
    | grep '"profile":"reduce' | sed "s/^{/{\"variant\":\"$v\",/" >> "$OUT/profile.jsonl"
done
echo "all done at $SECONDS s"
grep -hE '"bench":"(sum|argmax)"' "$OUT/torch.jsonl" "$OUT/torch2.jsonl"
python3 - "$OUT" <<'PY'
import json,sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]+"/rust.jsonl"):
    j=json.loads(l); d[(j["bench"],j["size"],j["variant"])].append(j["median_us"])
for k in sorted(d): print(k, d[k])
for l in open(sys.argv[1]+"/profile.jsonl"):
    j=json.loads(l); print(j["variant"], j["profile"][:60], j["mean_us"])
PY
