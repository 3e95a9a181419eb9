#!/usr/bin/env bash
# Stop 41, run 7, ONE command (~5 min): the register-block scan (af25f59, 4f523cb), the
# encoder attention's vec4 staging (6dc94f0) and the FFT's twiddle table on the GPU.
#  1. tests/scan.rs on the GPU (the same bits as Nx's tree: the f32 library's add/multiply and
#     the register levels on a device that may flush subnormals);
#  2. the op rows from Rust, stop 40's build (the shared-memory scan, 5 passes at 16 M) and
#     this one alternating, two rounds, beside PyTorch eager measured first in this command;
#  3. device time per scan kernel at 16 M (this build);
#  (the FFT twiddle table and the sort's three-step global passes, 2026-12-06: their tests
#  and rows ride along in 1 and 2)
# Carry .gl, .gpurun/tests41, .gpurun/minilm-tok, .bench-carry/nx-vulkan-scan.xz,
# .bench-carry/nx-vulkan-wide.xz.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/t
python3 bench/torch_ops.py --sizes 1024,1048576,16777216 --dots 64 --reps 30 > "$OUT/torch_ops.jsonl" 2> "$OUT/torch_ops.err"
echo "peers done at $SECONDS s"
source .gl/env.sh
export NX_VULKAN_CACHE_DIR=/tmp/nxvk-cache
for name in scan fft sort; do
  xz -dc .gpurun/tests41/$name.xz > /tmp/t/$name; chmod +x /tmp/t/$name
  (cd native/engine && timeout 200 /tmp/t/$name --test-threads 4 2>&1 | tail -15) > "$OUT/test_$name.txt"
  echo "$name tests:"; grep -E "^test result|FAILED|panicked" "$OUT/test_$name.txt"
done
xz -dc .bench-carry/nx-vulkan-wide.xz > /tmp/nxv-old; xz -dc .bench-carry/nx-vulkan-scan.xz > /tmp/nxv-new
chmod +x /tmp/nxv-old /tmp/nxv-new
for r in 1 2; do
  timeout 120 /tmp/nxv-old bench --ops --sizes 1024,1048576,16777216 --gemm 64 --reps 30 | sed "s/^{/{\"build\":\"stop40\",\"round\":$r,/" >> "$OUT/ops.jsonl"
  timeout 60 /tmp/nxv-new bench --ops --only cumsum,sum,add,fft,sort --sizes 1024,1048576,16777216 --reps 30 | sed "s/^{/{\"build\":\"scan16\",\"round\":$r,/" >> "$OUT/ops.jsonl"
done
echo "ops done at $SECONDS s"
python3 bench/compare_op_variants.py "$OUT/ops.jsonl" "$OUT/torch_ops.jsonl" build,round cumsum,sum,add,fft,sort | tee "$OUT/ops_ratios.txt"
timeout 60 /tmp/nxv-new bench --ops --only cumsum --sizes 16777216 --reps 10 --profile | grep scan > "$OUT/profile_scan16.jsonl"
timeout 60 /tmp/nxv-old bench --ops --sizes 16777216 --gemm 64 --reps 10 --profile | grep scan > "$OUT/profile_stop40.jsonl"
cut -c1-160 "$OUT"/profile_*.jsonl
# 4. the encoder attention's vec4 staging (6dc94f0): stop 40's build against this one on a
#    MiniLM-shaped random checkpoint written here, device time per kernel at 64 x 128
python3 bench/encoder/make_random_bert.py --tokenizer-dir .gpurun/minilm-tok --out /tmp/random-minilm --seed 0 > "$OUT/model.log" 2>&1
for r in 1 2; do
  for b in old new; do
    timeout 120 /tmp/nxv-$b encode-bench --model /tmp/random-minilm --precisions fp32,bf16 --shapes 1x32,8x32,64x128 --reps 20 | sed "s/^{/{\"build\":\"$b\",\"round\":$r,/" >> "$OUT/encoder.jsonl"
  done
done
for b in old new; do
  timeout 120 /tmp/nxv-$b encode-bench --model /tmp/random-minilm --precisions fp32 --shapes 64x128 --reps 10 --profile | grep '"profile"' | sed "s/^{/{\"build\":\"$b\",/" >> "$OUT/encoder_profile.jsonl"
done
python3 - "$OUT/encoder.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        j = json.loads(l)
        if j.get("scope") == "forward":
            print(j["build"], j["round"], j["precision"], f'{j["batch"]}x{j["seq"]}', round(j["inputs_per_s"], 1))
PY
grep -h attention "$OUT/encoder_profile.jsonl" | cut -c1-200
echo "all done at $SECONDS s"
