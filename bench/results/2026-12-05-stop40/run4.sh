#!/usr/bin/env bash
# Stop 40, run 4, ONE command. Two same-bits changes of this stop against the same build with
# each turned off by its measurement switch:
#  - wide elementwise kernels (four elements per invocation, 16-byte loads and stores, from
#    2^20 elements; 465f78b) — off: NX_VULKAN_WIDE_MIN=0;
#  - softmax's/logsumexp's row max and layernorm's row sum inside the next kernel (one dispatch; 83f2731, 42ab414) — off:
#    NX_VULKAN_ROW_REDUCTION=0.
# 1. device time per kernel from Rust (tests/plan.rs row_kernels_device_time: softmax and
#    layernorm 4096 x 1024, both maths), row reductions in the next kernel on and off;
# 2. the op rows from Rust (exp/log/tanh/sigmoid/erf/add/sum at 1 M and 16 M), wide on and
#    off, alternating, beside PyTorch eager;
# 3. issue 7's compiler table from Elixir (chain10, chain10_arith, softmax, layernorm, the MLP
#    step) beside torch.compile measured first in the same command: this build, then wide off,
#    then row reductions off (those two with REPS=10).
# Carry .gl, .gpurun/beam-wide.tgz, .gpurun/tests40, .bench-carry/nx-vulkan-wide.xz.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam /tmp/t
# PyTorch's peers before env.sh (it unpacks Debian's BEAM over /lib; bench/h200_compiler.sh)
# (run5.sh measures them itself before its tests)
[ -s "$OUT/torch_compiler.jsonl" ] || python3 bench/torch_compiler.py --reps 20 > "$OUT/torch_compiler.jsonl" 2> "$OUT/torch_compiler.err"
[ -s "$OUT/torch_ops.jsonl" ] || python3 bench/torch_ops.py --sizes 1048576,16777216 --reps 30 > "$OUT/torch_ops.jsonl" 2> "$OUT/torch_ops.err"
echo "peers done at $SECONDS s"
source .gl/env.sh
tar -xzf .gpurun/beam-wide.tgz -C /tmp/gbeam
xz -dc .bench-carry/nx-vulkan-wide.xz > /tmp/nx-vulkan; chmod +x /tmp/nx-vulkan
xz -dc .gpurun/tests40/plan.xz > /tmp/t/plan; chmod +x /tmp/t/plan
export NX_VULKAN_CACHE_DIR=/tmp/nxvk-cache
for re in 1 0; do
  (cd native/engine && NX_VULKAN_ROW_REDUCTION=$re timeout 90 /tmp/t/plan row_kernels_device_time --ignored --nocapture 2>&1 | grep ROWBENCH) > "$OUT/rows_row_reduction_$re.txt"
  echo "row reduction $re:"; cut -c1-150 "$OUT/rows_row_reduction_$re.txt"
done
echo "rows done at $SECONDS s"
for r in 1 2; do
  for w in 0 default; do
    if [ $w = 0 ]; then export NX_VULKAN_WIDE_MIN=0; else unset NX_VULKAN_WIDE_MIN; fi
    timeout 100 /tmp/nx-vulkan bench --ops --sizes 1048576,16777216 --reps 30 | sed "s/^{/{\"wide\":\"$w\",\"round\":$r,/" >> "$OUT/ops.jsonl"
  done
done
unset NX_VULKAN_WIDE_MIN
python3 bench/compare_op_variants.py "$OUT/ops.jsonl" "$OUT/torch_ops.jsonl" wide,round | tee "$OUT/ops_ratios.txt"
echo "ops done at $SECONDS s"
for v in default wide_off row_reduction_off; do
  case $v in
    default) env_v="" ; reps=20 ;;
    wide_off) env_v="NX_VULKAN_WIDE_MIN=0" ; reps=10 ;;
    row_reduction_off) env_v="NX_VULKAN_ROW_REDUCTION=0" ; reps=10 ;;
  esac
  env $env_v REPS=$reps ERL_LIBS=/tmp/gbeam timeout 150 elixir bench/compiler_bench.exs 2>> "$OUT/compiler.err" | sed "s/^{/{\"variant\": \"$v\", /" >> "$OUT/compiler.jsonl"
  echo "compiler ($v) done at $SECONDS s"
done
cat "$OUT/compiler.jsonl" "$OUT/torch_compiler.jsonl" | cut -c1-220; tail -3 "$OUT/compiler.err"
cd "$OUT" && tar -czf /tmp/x.tgz . && rm -rf "$OUT"/* && mv /tmp/x.tgz "$OUT/"
echo "all done at $SECONDS s"
