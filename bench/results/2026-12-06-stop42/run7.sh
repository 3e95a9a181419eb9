#!/usr/bin/env bash
# Stop 42, run 7 (H100), ONE command: run 6 again after the review's mends (zero signs
# rebuilt on bits, exponent-bit result tests, constant subtrees, the refusal fallback):
# tests/elementwise.rs on the GPU, then chain10 / chain10_arith from Elixir with
# NX_VULKAN_SPECULATE=1 / 0, one round. Carry .gl, .gpurun/beam45.tgz, .gpurun/tests45.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/t /tmp/gbeam
source .gl/env.sh
xz -dc .gpurun/tests45/elementwise.xz > /tmp/t/elementwise; chmod +x /tmp/t/elementwise
(cd native/engine && timeout 150 /tmp/t/elementwise --test-threads 4 2>&1 | tail -22) > "$OUT/test_elementwise.txt"
echo "elementwise:"; grep -E "^test result|FAILED|panicked" "$OUT/test_elementwise.txt"
echo "tests done at $SECONDS s"
tar -xzf .gpurun/beam45.tgz -C /tmp/gbeam
export NX_VULKAN_CACHE_DIR=/tmp/nxvk-cache
for r in 1; do
  for v in spec nospec; do
    s=1; [ $v = nospec ] && s=0
    NX_VULKAN_SPECULATE=$s CASES=chain10 REPS=10 ERL_LIBS=/tmp/gbeam timeout 120 elixir bench/compiler_bench.exs 2>> "$OUT/compiler.err" | sed "s/^{/{\"variant\": \"$v\", \"round\": $r, /" >> "$OUT/compiler.jsonl"
    echo "compiler ($v, round $r) done at $SECONDS s"
  done
done
grep -h '"throughput_us"' "$OUT/compiler.jsonl" | grep compiled | cut -c1-200; tail -3 "$OUT/compiler.err"
cd "$OUT" && tar -czf /tmp/x.tgz . && rm -rf "$OUT"/* && mv /tmp/x.tgz "$OUT/"
echo "all done at $SECONDS s"
