#!/usr/bin/env bash
# Stop 28, run 7: int8 cooperative-matrix variants (K step 64/128, 128x128/256x128/128x256
# tiles, multiply-only probe) against torch._int_mm in the same command.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
timeout 120 python3 bench/torch_gemm.py --types s8 --sizes 1:4096:4096:4096,1:2048:2048:2048 > "$OUT/torch_gemm.jsonl" 2>"$OUT/torch.log"
timeout 200 /tmp/gbins/nx-vulkan gemm --types s8 --coopmat-all --sizes 1:4096:4096:4096,1:2048:2048:2048 > "$OUT/gemm.jsonl" 2>"$OUT/gemm.log"; tail -2 "$OUT/gemm.log"
python3 - "$OUT/gemm.jsonl" "$OUT/torch_gemm.jsonl" <<'PY'
import json,sys
t={}
for l in open(sys.argv[2]):
    d=json.loads(l); t[(d['type'],d['batch'],d['m'],d['n'],d['k'])]=d['tflops']
for l in open(sys.argv[1]):
    d=json.loads(l); key=(d['type'],d['batch'],d['m'],d['n'],d['k']); p=t.get(key)
    print(f"{d['m']}", round(d['tflops'],1), 'torch', p and round(p,1), 'ratio', p and round(d['tflops']/p,2), d['kernel'].replace('CoopMat { input: S8, m: 16, n: 16, k: 32, ',''))
PY
echo "all done at $SECONDS s"
