#!/usr/bin/env bash
# The GPU bench run, for the device machine (see ../shared/GPU.md): nx-vulkan and PyTorch on the
# same GPU in the same command, then the cross-device digest of every float op.
# Expects the release binary in .gpubin/ and the Vulkan loader in .gl/ (carried), and $OUT.
set -uo pipefail
source .gl/env.sh
out=${OUT:-bench/out}; mkdir -p "$out"
bin=.gpubin/nx-vulkan
$bin info | tee "$out/info.txt"
$bin bench --reps 20 | tee "$out/nx_vulkan.jsonl"
python3 bench/torch_peer.py --reps 20 | tee "$out/torch.jsonl"
$bin digest > "$out/digest_gpu.jsonl"; tail -1 "$out/digest_gpu.jsonl"
python3 bench/compare.py "$out/nx_vulkan.jsonl" "$out/torch.jsonl" | tee "$out/ratios.md"
