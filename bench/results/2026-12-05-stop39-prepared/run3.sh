#!/usr/bin/env bash
# Stop 39, run 3 (prepared; no device was lent in stop 39), ONE command: issue 6's op table
# from Elixir, PyTorch eager and Rust (stop 37's run10.sh, never run; now with tanh and sigmoid
# rows), then issue 7's compiler table (chain10 — tanh and exp in it now take the f32 paths —
# softmax, layernorm, the MLP step) from Elixir against torch.compile in the same command.
# Carry .gl, .gpurun/beam.tgz, .bench-carry/nx-vulkan.xz (prepare.sh).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
# torch.compile's peers before env.sh (it unpacks Debian's BEAM over /lib; bench/h200_compiler.sh)
python3 bench/torch_compiler.py --reps 20 > "$OUT/torch_compiler.jsonl" 2> "$OUT/torch_compiler.err"
source .gl/env.sh
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
xz -dc .bench-carry/nx-vulkan.xz > /tmp/nx-vulkan; chmod +x /tmp/nx-vulkan
export NX_VULKAN_CACHE_DIR=/tmp/nxvk-cache
ERL_LIBS=/tmp/gbeam timeout 240 elixir bench/ops_bench.exs > "$OUT/elixir.jsonl" 2> "$OUT/elixir.err"
python3 bench/torch_ops.py --reps 50 > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
timeout 150 /tmp/nx-vulkan bench --ops --reps 50 > "$OUT/rust.jsonl" 2> "$OUT/rust.err"
python3 bench/compare_ops.py "$OUT/rust.jsonl" "$OUT/elixir.jsonl" "$OUT/torch.jsonl" > "$OUT/ratios.md" 2>&1
cat "$OUT/ratios.md"; tail -3 "$OUT/elixir.err"
echo "ops done at $SECONDS s"
ERL_LIBS=/tmp/gbeam timeout 240 elixir bench/compiler_bench.exs > "$OUT/compiler.jsonl" 2> "$OUT/compiler.err"
cat "$OUT/compiler.jsonl" "$OUT/torch_compiler.jsonl" | cut -c1-300; tail -3 "$OUT/compiler.err"
cd "$OUT" && tar -czf /tmp/x.tgz . && rm -rf "$OUT"/* && mv /tmp/x.tgz "$OUT/"
echo "all done at $SECONDS s"
