#!/usr/bin/env bash
# Stop 28, run 6: int8 × int8 → int32 on cooperative matrices — exactness tests, throughput
# against torch._int_mm (same command), f16 beside it.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
[ -d /work/main/native/engine ] || { mkdir -p /work/main/native && ln -sfn "$PWD/native/engine" /work/main/native/engine; }
timeout 120 python3 bench/torch_gemm.py --types s8,f16 > "$OUT/torch_gemm.jsonl" 2>"$OUT/torch.log"
cut -c1-160 "$OUT/torch_gemm.jsonl"; tail -2 "$OUT/torch.log"
echo "peer done at $SECONDS s"
(cd native/engine && timeout 150 /tmp/gbins/coopmat --test-threads 2 --nocapture --skip every_coopmat_variant --skip every_coopmat2_tile > "$OUT/coopmat.txt" 2>&1; grep -E "^test |test result|panicked|int8" "$OUT/coopmat.txt" | cut -c1-300)
echo "tests done at $SECONDS s"
timeout 120 /tmp/gbins/nx-vulkan gemm --types s8,f16 > "$OUT/gemm.jsonl" 2>"$OUT/gemm.log"; tail -2 "$OUT/gemm.log"
python3 - "$OUT/gemm.jsonl" "$OUT/torch_gemm.jsonl" <<'PY'
import json,sys
t={}
for l in open(sys.argv[2]):
    d=json.loads(l); t[(d['type'],d['batch'],d['m'],d['n'],d['k'])]=d['tflops']
for l in open(sys.argv[1]):
    d=json.loads(l); key=(d['type'],d['batch'],d['m'],d['n'],d['k']); p=t.get(key)
    print(d['type'], f"{d['batch']}x{d['m']}x{d['n']}x{d['k']}", round(d['tflops'],1), 'torch', p and round(p,1), 'ratio', p and round(d['tflops']/p,2), d['kernel'][:60])
PY
echo "all done at $SECONDS s"
