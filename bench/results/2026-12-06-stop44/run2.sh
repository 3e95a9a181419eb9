#!/usr/bin/env bash
# Stop 44, run 2 (one command): the tensor-core GEMM with its output scratch in the A tiles'
# shared memory (run 1's probe: about 48 KiB of shared memory per multiprocessor in all, so
# 128 x 128 x 32 tiles went from 28 to 20 KiB: two resident workgroups instead of one).
# Correctness first (tests/coopmat.rs without the coopmat2 sweep, tests/split_f32.rs), then
# `gemm --coopmat-all` with the scratch in A (default) and separate
# (NX_VULKAN_COOPMAT_SCRATCH=separate), alternating over two rounds, beside PyTorch measured
# first. Carry .gl, .gpurun/s44b.
export BIN=${BIN:-.gpurun/s44b}
source bench/results/2026-12-06-stop43/common.sh
python3 bench/torch_gemm.py --types f16,bf16,s8,f32 --sizes 1:4096:4096:4096,1:2048:2048:2048 > "$OUT/torch.jsonl" 2>>"$OUT/ours.err"
source .gl/env.sh
gpu_test coopmat --skip every_coopmat2_tile
gpu_test split_f32
unpack nx-vulkan
for r in 1 2; do
  for sc in a separate; do
    NX_VULKAN_COOPMAT_SCRATCH=$sc timeout 100 /tmp/t/nx-vulkan gemm --types f16,bf16,s8 --sizes 1:4096:4096:4096,1:2048:2048:2048 --coopmat-all 2>>"$OUT/ours.err" | grep -v CoopMat2 | tag "\"scratch\":\"$sc\",\"round\":$r" >> "$OUT/gemm.jsonl"
    NX_VULKAN_COOPMAT_SCRATCH=$sc timeout 60 /tmp/t/nx-vulkan gemm --types split-f32 --sizes 1:4096:4096:4096,1:2048:2048:2048 2>>"$OUT/ours.err" | tag "\"scratch\":\"$sc\",\"round\":$r" >> "$OUT/gemm.jsonl"
  done
done
python3 - "$OUT/gemm.jsonl" "$OUT/torch.jsonl" <<'PY'
import json, sys
torch = {}
for l in open(sys.argv[2]):
    if l.startswith("{"):
        j = json.loads(l); torch[(j["type"], j["m"])] = j["tflops"]
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    j = json.loads(l)
    peer = torch.get(("f32" if j["type"] == "split-f32" else j["type"], j["m"]), float("nan"))
    k = j["kernel"].replace("CoopMat { input: ", "").replace("staging: ", "")
    print(j["round"], j["scratch"], j["type"], j["m"], round(j["tflops"], 1), f'{j["tflops"] / peer:.2f}x', k[:90])
PY
tail -5 "$OUT/ours.err"
echo "all done at $SECONDS s"
