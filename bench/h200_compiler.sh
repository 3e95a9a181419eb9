#!/usr/bin/env bash
# NxVulkan.Compiler on the device machine (see ../shared/GPU.md), one command: compiled vs eager
# from Elixir, PyTorch eager / torch.compile / JAX jit in the same run, and the time from VM
# start to the first training-step result with cold and warm caches.
# Expects the loader + BEAM in .gl/ (`../shared/tools/gpu-prep --beam`) and an ERL_LIBS folder in
# .gpubeam/ holding the compiled app (nx_vulkan/ebin, nx_vulkan/priv/libnx_vulkan_nif.so) and Nx
# 0.7.2 built by hand (nx, complex, telemetry), all carried; results under $OUT.
set -uo pipefail
out=${OUT:-bench/out}; mkdir -p "$out"
# The peers first: env.sh unpacks Debian's BEAM packages over the machine's /lib, after which
# torch.compile's generated code no longer links (seen in stop 23).
python3 bench/torch_compiler.py --reps "${REPS:-20}" > "$out/peers.jsonl" 2> "$out/peers.err"
source .gl/env.sh
export ERL_LIBS=$PWD/.gpubeam
cache=$(mktemp -d)
# cold: our pipeline cache empty, the driver's shader cache off; then warm: the same dir again
NX_VULKAN_CACHE_DIR=$cache __GL_SHADER_DISK_CACHE=0 CACHE_STATE=cold elixir bench/first_result.exs > "$out/first.jsonl"
NX_VULKAN_CACHE_DIR=$cache __GL_SHADER_DISK_CACHE=0 CACHE_STATE=warm elixir bench/first_result.exs >> "$out/first.jsonl"
NX_VULKAN_CACHE_DIR=$cache elixir bench/compiler_bench.exs > "$out/elixir.jsonl"
cat "$out/first.jsonl" "$out/elixir.jsonl" "$out/peers.jsonl"
