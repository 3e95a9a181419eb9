#!/usr/bin/env bash
# Stop 28, run 5: compiled f32 Nx.dot from Elixir, warmed 0.3 s per case, two size orders;
# PyTorch's f32 SGEMM in the same command.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpubeam/beam.tgz -C /tmp/gbeam
timeout 120 python3 bench/torch_gemm.py --types f32 > "$OUT/torch_gemm.jsonl" 2>"$OUT/torch.log"
cut -c1-150 "$OUT/torch_gemm.jsonl"
for s in 2048,4096,1024 4096,2048; do SIZES=$s ERL_LIBS=/tmp/gbeam timeout 200 elixir bench/dot_f32_bench.exs >> "$OUT/dot_elixir.jsonl" 2>>"$OUT/elixir.log"; done
cat "$OUT/dot_elixir.jsonl"; tail -3 "$OUT/elixir.log"
echo "all done at $SECONDS s"
