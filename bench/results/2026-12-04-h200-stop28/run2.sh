#!/usr/bin/env bash
# Stop 28, run 2: split-f32 after the fixes (outside accumulation of hi·hi, Inf/NaN fixup,
# denormal inputs) — tests and errors in three modes, throughput vs cuBLAS FP32 (same command).
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins
xz -dc .bench-carry/nx-vulkan-new.xz > /tmp/nxv; chmod +x /tmp/nxv
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
[ -d /work/main/native/engine ] || { mkdir -p /work/main/native && ln -sfn "$PWD/native/engine" /work/main/native/engine; }
timeout 120 python3 bench/torch_gemm.py --types f32 > "$OUT/torch_gemm.jsonl" 2>"$OUT/torch.log"
timeout 120 python3 bench/split_f32_errors.py > "$OUT/errors.jsonl" 2>>"$OUT/torch.log"
echo "peers done at $SECONDS s"
cd native/engine
for mode in fused2 fused1 concat; do
  NX_VULKAN_SPLIT_F32=$mode timeout 100 /tmp/gbins/split_f32 --nocapture --test-threads 2 > "$OUT/split_tests_$mode.txt" 2>&1
  echo "== $mode"; grep -E "^test |test result|panicked|worst|multiplies" "$OUT/split_tests_$mode.txt" | cut -c1-220
  NX_VULKAN_SPLIT_F32=$mode timeout 60 /tmp/gbins/split_f32 --ignored --nocapture error_table 2>&1 | grep '^{' >> "$OUT/errors.jsonl"
done
python3 - "$OUT/errors.jsonl" <<'PY'
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print(d['case'], d['impl'], d.get('mode',''), 'max %.3g fro %.3g' % (d['max_err_of_sum_abs'], d['rel_fro']))
PY
cd ../..
echo "split tests done at $SECONDS s"
for rep in 1 2; do
for mode in fused2 fused1 concat; do
  NX_VULKAN_SPLIT_F32=$mode timeout 90 /tmp/nxv gemm --types split-f32 2>>"$OUT/gemm.log" | sed "s/^{/{\"mode\":\"$mode\",\"rep\":$rep,/" >> "$OUT/gemm.jsonl"
done
timeout 90 /tmp/nxv gemm --types f32 2>>"$OUT/gemm.log" | sed "s/^{/{\"rep\":$rep,/" >> "$OUT/gemm.jsonl"
done
python3 - "$OUT/gemm.jsonl" "$OUT/torch_gemm.jsonl" <<'PY'
import json,sys
t={}
for l in open(sys.argv[2]):
    d=json.loads(l); t[(d['type'],d['batch'],d['m'],d['n'],d['k'])]=d['tflops']
for l in open(sys.argv[1]):
    d=json.loads(l); ty=d['type']; key=('f32',d['batch'],d['m'],d['n'],d['k'])
    p=t.get(key)
    print(d.get('rep'), d.get('mode','-'), ty, f"{d['batch']}x{d['m']}x{d['n']}x{d['k']}", round(d['tflops'],1), 'torch', p and round(p,1), 'ratio', p and round(d['tflops']/p,2))
PY
echo "all done at $SECONDS s"
