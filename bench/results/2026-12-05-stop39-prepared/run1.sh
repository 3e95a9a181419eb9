#!/usr/bin/env bash
# Stop 39, run 1 (prepared; no device was lent in stop 39), ONE command:
# 1. tests/unary_f32.rs, tests/matmul.rs and tests/conv.rs on the GPU: the f32 tanh/sigmoid/erf
#    paths give the full functions' bits there too, and every f64 tile (and conv's GEMM, folded
#    from -0.0) is BinaryBackend's sum to the bit on a device that fuses a double fma (lavapipe
#    does not, so only here would a wrong fma choice show).
# 2. The exact dot / f64 GEMM (issue 6's goal: >= 0.4x PyTorch fp64 at 1024 and 4096): this
#    build (fused exact products) against the baseline build (unfused) and PyTorch DGEMM, every
#    f64 tile forced too (--tiles-all), 1024/2048/4096.
# 3. The op table's exp/log/tanh/sigmoid/erf/add rows at 1 M and 16 M, the exact dot at 1024
#    and the conv from Rust: this build against the baseline (full f64 log/tanh/sigmoid/erf,
#    unfused exact products), alternating, 2 rounds, and PyTorch (fp64 GEMM / conv beside the
#    exact ones).
# Carry .gl, .gpurun/tests, .bench-carry/nx-vulkan.xz, .bench-carry/nx-vulkan-base.xz
# (prepare.sh).
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/t
for b in nx-vulkan nx-vulkan-base; do xz -dc .bench-carry/$b.xz > /tmp/$b; chmod +x /tmp/$b; done
for t in unary_f32 matmul conv; do
  xz -dc .gpurun/tests/$t.xz > /tmp/t/$t; chmod +x /tmp/t/$t
  (cd native/engine && timeout 150 /tmp/t/$t --test-threads 4 2>&1 | tail -12) > "$OUT/test_$t.txt"
  echo "$t:"; grep -E "^test result|FAILED|panicked" "$OUT/test_$t.txt"
done
echo "tests done at $SECONDS s"
G="--sizes 1:1024:1024:1024,1:2048:2048:2048,1:4096:4096:4096 --reps 5 --calls 3"
for b in nx-vulkan nx-vulkan-base; do
  NX_VULKAN_CACHE_DIR=/tmp/cache-$b timeout 200 /tmp/$b gemm --types exact,f64 $G $([ $b = nx-vulkan ] && echo --tiles-all) | sed "s/^{/{\"build\":\"$b\",/" >> "$OUT/gemm.jsonl"
done
python3 bench/torch_gemm.py --types f64 $G > "$OUT/torch_gemm.jsonl" 2> "$OUT/torch_gemm.err"
python3 bench/compare_gemm.py "$OUT/gemm.jsonl" "$OUT/torch_gemm.jsonl" | tee "$OUT/gemm_ratios.md"
echo "gemm done at $SECONDS s"
for r in 1 2; do
  for b in nx-vulkan nx-vulkan-base; do
    NX_VULKAN_CACHE_DIR=/tmp/cache-$b timeout 120 /tmp/$b bench --ops --sizes 1048576,16777216 --gemm 1024 --reps 30 | sed "s/^{/{\"build\":\"$b\",\"round\":$r,/" >> "$OUT/ops.jsonl"
  done
done
python3 bench/torch_ops.py --sizes 1048576,16777216 --dots 1024 --reps 30 > "$OUT/torch_ops.jsonl" 2> "$OUT/torch_ops.err"
python3 bench/compare_op_variants.py "$OUT/ops.jsonl" "$OUT/torch_ops.jsonl" build,round exp,log,tanh,sigmoid,erf,add,dot_exact,dot_f64,conv2d
cd "$OUT" && tar -czf /tmp/x.tgz . && rm -rf "$OUT"/* && mv /tmp/x.tgz "$OUT/"
echo "all done at $SECONDS s"
