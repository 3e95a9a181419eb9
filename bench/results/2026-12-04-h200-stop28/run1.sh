#!/usr/bin/env bash
# Stop 28, run 1: split-f32 GEMM (three modes) — correctness and error on the H200, throughput
# against cuBLAS FP32 in the same command; coopmat / encoder linear regression checks.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins
xz -dc .bench-carry/nx-vulkan-new.xz > /tmp/nxv; chmod +x /tmp/nxv
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
[ -d /work/main/native/engine ] || { mkdir -p /work/main/native && ln -sfn "$PWD/native/engine" /work/main/native/engine; }
# peers first (torch before anything else)
timeout 120 python3 bench/torch_gemm.py --types f32,f16 > "$OUT/torch_gemm.jsonl" 2>"$OUT/torch.log"
timeout 120 python3 bench/split_f32_errors.py > "$OUT/torch_errors.jsonl" 2>>"$OUT/torch.log"
echo "peers done at $SECONDS s"; cat "$OUT/torch_errors.jsonl" | cut -c1-160
cd native/engine
for mode in fused2 fused1 concat; do
  NX_VULKAN_SPLIT_F32=$mode timeout 100 /tmp/gbins/split_f32 --nocapture --test-threads 2 > "$OUT/split_tests_$mode.txt" 2>&1
  grep -E "^test |test result|panicked|worst|multiplies" "$OUT/split_tests_$mode.txt" | cut -c1-200
  NX_VULKAN_SPLIT_F32=$mode timeout 60 /tmp/gbins/split_f32 --ignored --nocapture error_table 2>&1 | grep '^{' >> "$OUT/errors.jsonl"
done
cut -c1-200 "$OUT/errors.jsonl"
cd ../..
echo "split tests done at $SECONDS s"
for mode in fused2 fused1 concat; do
  NX_VULKAN_SPLIT_F32=$mode timeout 90 /tmp/nxv gemm --types split-f32 2>>"$OUT/gemm.log" | sed "s/^{/{\"mode\":\"$mode\",/" >> "$OUT/gemm.jsonl"
done
timeout 90 /tmp/nxv gemm --types f32,f16 2>>"$OUT/gemm.log" >> "$OUT/gemm.jsonl"
python3 - "$OUT/gemm.jsonl" "$OUT/torch_gemm.jsonl" <<'PY'
import json,sys
t={}
for l in open(sys.argv[2]):
    d=json.loads(l); t[(d['type'],d['batch'],d['m'],d['n'],d['k'])]=d['tflops']
for l in open(sys.argv[1]):
    d=json.loads(l); ty=d['type']; key=('f32' if ty=='split-f32' else ty,d['batch'],d['m'],d['n'],d['k'])
    p=t.get(key)
    print(d.get('mode','-'), ty, f"{d['batch']}x{d['m']}x{d['n']}x{d['k']}", round(d['tflops'],1), 'torch', p and round(p,1), 'ratio', p and round(d['tflops']/p,2))
PY
echo "gemm done at $SECONDS s"
cd native/engine
timeout 100 /tmp/gbins/coopmat --test-threads 2 --skip every_coopmat_variant --skip every_coopmat2_tile 2>&1 | grep -E "^test |test result|panicked" > "$OUT/coopmat.txt"
timeout 60 /tmp/gbins/encoder_kernels --test-threads 2 coopmat_linear 2>&1 | grep -E "^test |test result|panicked" >> "$OUT/coopmat.txt"
cat "$OUT/coopmat.txt"
echo "all done at $SECONDS s"
