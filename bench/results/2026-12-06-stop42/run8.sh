#!/usr/bin/env bash
# Stop 42, run 8 (H100), ONE command: run 7 again with the native results tested by float
# comparisons again (nxf_normal, as the checked path; zero signs still rebuilt on bits):
# tests/elementwise.rs on the GPU, then chain10 / chain10_arith from Elixir with
# NX_VULKAN_SPECULATE=1 / 0, one round. Carry .gl, .gpurun/beam46.tgz, .gpurun/tests46.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/t /tmp/gbeam
source .gl/env.sh
xz -dc .gpurun/tests46/elementwise.xz > /tmp/t/elementwise; chmod +x /tmp/t/elementwise
(cd native/engine && timeout 150 /tmp/t/elementwise --test-threads 4 2>&1 | tail -22) > "$OUT/test_elementwise.txt"
echo "elementwise:"; grep -E "^test result|FAILED|panicked" "$OUT/test_elementwise.txt"
echo "tests done at $SECONDS s"
tar -xzf .gpurun/beam46.tgz -C /tmp/gbeam
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
