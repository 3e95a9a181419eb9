#!/usr/bin/env bash
# The tensor-core GEMM run, for the device machine (see ../shared/GPU.md): device info, the
# cross-device digest, the coopmat and matmul test binaries (correctness of the tensor-core path
# against CPU references, odd sizes), then nx-vulkan gemm and PyTorch on the same GPU.
# Expects in $BIN_DIR (default .gpubin, carried): nx-vulkan, coopmat_test, matmul_test, and
# torch_gemm.py / compare_gemm.py in $SCRIPTS (default bench); the loader in .gl/.
set -uo pipefail
source .gl/env.sh
out=${OUT:-bench/out}; mkdir -p "$out"
export NX_VULKAN_CACHE_DIR=/tmp/nxvk-cache
dir=${BIN_DIR:-.gpubin}; scripts=${SCRIPTS:-bench}
bin=$dir/nx-vulkan
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$out/gpu.csv" 2>&1
$bin info | tee "$out/info.txt"
$bin digest > "$out/digest_gpu.jsonl"; grep '"ALL' "$out/digest_gpu.jsonl"
# The same digest from a build with the previous compiler (shaderc), where carried: every line
# must match (the compiler switch checked on reductions, dot, scans, sorts and FFT too).
if [ -x "$dir/nx-vulkan-shaderc" ]; then
  $dir/nx-vulkan-shaderc digest > "$out/digest_gpu_shaderc.jsonl"
  if diff -q "$out/digest_gpu.jsonl" "$out/digest_gpu_shaderc.jsonl"; then echo "digest: glslang build == shaderc build"; else echo "digest: DIFFERENT"; diff "$out/digest_gpu.jsonl" "$out/digest_gpu_shaderc.jsonl" | head; fi
fi
# (over 180 s on the H200 since the coopmat2 tiles and k-major B variants joined the sweep)
timeout 420 $dir/coopmat_test --test-threads=1 --nocapture > "$out/coopmat_test.txt" 2>&1; echo "coopmat_test rc=$?"; grep -E "test result|uses|worst|panicked" "$out/coopmat_test.txt"
timeout 180 $dir/matmul_test --test-threads=1 > "$out/matmul_test.txt" 2>&1; echo "matmul_test rc=$?"; grep "test result" "$out/matmul_test.txt"
timeout 240 $bin gemm --types f16,bf16,f32 --coopmat-all ${GEMM_ARGS:-} | tee "$out/nx_vulkan_gemm.jsonl"
python3 $scripts/torch_gemm.py ${GEMM_ARGS:-} | tee "$out/torch_gemm.jsonl"
python3 $scripts/compare_gemm.py "$out/nx_vulkan_gemm.jsonl" "$out/torch_gemm.jsonl" | tee "$out/ratios.md"
