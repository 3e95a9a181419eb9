#!/usr/bin/env bash
# Stop 28, run 8: double-buffered shared staging (one barrier per K step) against the
# default staging and the multiply-only probe, f16 and int8, PyTorch in the same command.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
timeout 120 python3 bench/torch_gemm.py --types s8,f16,bf16 --sizes 1:4096:4096:4096,1:2048:2048:2048 > "$OUT/torch_gemm.jsonl" 2>"$OUT/torch.log"
timeout 240 /tmp/gbins/nx-vulkan gemm --types s8,f16,bf16 --coopmat-all --sizes 1:4096:4096:4096,1:2048:2048:2048 > "$OUT/gemm.jsonl" 2>"$OUT/gemm.log"; tail -2 "$OUT/gemm.log"
python3 - "$OUT/gemm.jsonl" "$OUT/torch_gemm.jsonl" <<'PY'
import json,sys,re
t={}
for l in open(sys.argv[2]):
    d=json.loads(l); t[(d['type'],d['batch'],d['m'],d['n'],d['k'])]=d['tflops']
for l in open(sys.argv[1]):
    d=json.loads(l); key=(d['type'],d['batch'],d['m'],d['n'],d['k']); p=t.get(key)
    k=re.sub(r'CoopMat \{ input: \w+, m: \d+, n: \d+, k: \d+, ','',d['kernel'])
    print(d['type'], d['m'], round(d['tflops'],1), 'torch', p and round(p,1), 'ratio', p and round(d['tflops']/p,2), k)
PY
echo "all done at $SECONDS s"
