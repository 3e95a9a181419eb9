#!/usr/bin/env bash
# Stop 40, run 6: run5.sh cut to fit a short lease (≈ 5 min), ONE command — torch.compile's
# peers, the new kernels' tests and tests/unary_f32.rs on the GPU, then issue 7's compiler
# table from Elixir for this build, wide kernels off and row reductions off (REPS=10 each).
# Carry .gl, .gpurun/beam-wide.tgz, .gpurun/tests40 (the CLI is not needed).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/t /tmp/gbeam
python3 bench/torch_compiler.py --reps 10 > "$OUT/torch_compiler.jsonl" 2> "$OUT/torch_compiler.err"
echo "peers done at $SECONDS s"
source .gl/env.sh
source bench/results/2026-12-05-stop40/gpu-tests.sh
tar -xzf .gpurun/beam-wide.tgz -C /tmp/gbeam
export NX_VULKAN_CACHE_DIR=/tmp/nxvk-cache
for v in default wide_off row_reduction_off; do
  case $v in
    default) env_v="" ;;
    wide_off) env_v="NX_VULKAN_WIDE_MIN=0" ;;
    row_reduction_off) env_v="NX_VULKAN_ROW_REDUCTION=0" ;;
  esac
  env $env_v REPS=10 ERL_LIBS=/tmp/gbeam timeout 120 elixir bench/compiler_bench.exs 2>> "$OUT/compiler.err" | sed "s/^{/{\"variant\": \"$v\", /" >> "$OUT/compiler.jsonl"
  echo "compiler ($v) done at $SECONDS s"
done
cat "$OUT/compiler.jsonl" "$OUT/torch_compiler.jsonl" | cut -c1-220; tail -3 "$OUT/compiler.err"
cd "$OUT" && tar -czf /tmp/x.tgz . && rm -rf "$OUT"/* && mv /tmp/x.tgz "$OUT/"
echo "all done at $SECONDS s"
