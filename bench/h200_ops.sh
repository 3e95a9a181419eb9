#!/usr/bin/env bash
# The op-family table on the device machine (see ../shared/GPU.md): nx-vulkan from Rust, the same
# from Elixir (handle API), and PyTorch eager, in one command on the same GPU.
# Expects the release binary in .gpubin/, the compiled app as an ERL_LIBS folder in .gpubeam/
# (nx_vulkan/ebin, nx_vulkan/priv/libnx_vulkan_nif.so) and the loader + BEAM in .gl/
# (`../shared/tools/gpu-prep --beam`), all carried; results under $OUT.
set -uo pipefail
source .gl/env.sh
out=${OUT:-bench/out}; mkdir -p "$out"
.gpubin/nx-vulkan info > "$out/info.txt"
.gpubin/nx-vulkan bench --ops --reps "${REPS:-50}" > "$out/rust.jsonl"
ERL_LIBS=.gpubeam elixir bench/ops_bench.exs > "$out/elixir.jsonl"
python3 bench/torch_ops.py --reps "${REPS:-50}" > "$out/torch.jsonl"
# Device time per kernel for the 16 M row (timestamps): where the time goes inside each op.
.gpubin/nx-vulkan bench --ops --profile --sizes 16777216 --gemm 1024 --reps 10 | grep '"profile"' > "$out/profile.jsonl"
python3 bench/compare_ops.py "$out/rust.jsonl" "$out/elixir.jsonl" "$out/torch.jsonl" | tee "$out/ratios.md"
