#!/usr/bin/env bash
# Stop 28, run 4: split-f32 default (fused3) — tests, the TensorCore (:fast) rule; compiled f32
# Nx.dot from Elixir (:fast = split-f32 from 2048³) against PyTorch's f32 SGEMM (same command).
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins /tmp/gbeam
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
tar -xzf .gpubeam/beam.tgz -C /tmp/gbeam
[ -d /work/main/native/engine ] || { mkdir -p /work/main/native && ln -sfn "$PWD/native/engine" /work/main/native/engine; }
timeout 120 python3 bench/torch_gemm.py --types f32 > "$OUT/torch_gemm.jsonl" 2>"$OUT/torch.log"
cut -c1-150 "$OUT/torch_gemm.jsonl"
echo "peer done at $SECONDS s"
(cd native/engine && timeout 100 /tmp/gbins/split_f32 --nocapture --test-threads 2 > "$OUT/split_tests.txt" 2>&1; grep -E "^test |test result|panicked|multiplies" "$OUT/split_tests.txt" | cut -c1-200)
(cd native/engine && timeout 100 /tmp/gbins/coopmat --test-threads 2 --skip every_coopmat_variant --skip every_coopmat2_tile 2>&1 | grep -E "test result|panicked" | tee "$OUT/coopmat.txt")
echo "tests done at $SECONDS s"
ERL_LIBS=/tmp/gbeam timeout 240 elixir bench/dot_f32_bench.exs > "$OUT/dot_elixir.jsonl" 2>"$OUT/elixir.log"
cat "$OUT/dot_elixir.jsonl"; tail -3 "$OUT/elixir.log"
echo "elixir done at $SECONDS s"
timeout 90 /tmp/gbins/nx-vulkan gemm --types split-f32,f32 > "$OUT/gemm.jsonl" 2>"$OUT/gemm.log"
cut -c1-140 "$OUT/gemm.jsonl"
echo "all done at $SECONDS s"
