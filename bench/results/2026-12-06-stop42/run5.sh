#!/usr/bin/env bash
# Stop 42, run 5 (H100), ONE command: the row extreme's and the row sum's trees in the next
# kernel (reduce.rs, `pre:`) finishing in subgroup registers like the main tree — the
# fused_reduce suite on the GPU, then issue 7's softmax and layernorm cases from Elixir
# (CASES=softmax,layernorm, REPS=10): the build before (.gpurun/beam42.tgz, run 4's) and this
# one (.gpurun/beam43.tgz), alternating, two rounds. Peers: run 4's (same card type).
# Carry .gl, .gpurun/beam42.tgz, .gpurun/beam43.tgz, .gpurun/tests43.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/t
source .gl/env.sh
xz -dc .gpurun/tests43/fused_reduce.xz > /tmp/t/fused_reduce; chmod +x /tmp/t/fused_reduce
(cd native/engine && timeout 200 /tmp/t/fused_reduce --test-threads 4 2>&1 | tail -22) > "$OUT/test_fused_reduce.txt"
echo "fused_reduce:"; grep -E "^test result|FAILED|panicked" "$OUT/test_fused_reduce.txt"
echo "tests done at $SECONDS s"
export NX_VULKAN_CACHE_DIR=/tmp/nxvk-cache
for b in beam42 beam43; do mkdir -p /tmp/$b && tar -xzf .gpurun/$b.tgz -C /tmp/$b; done
for r in 1 2; do
  for b in beam42 beam43; do
    CASES=softmax,layernorm REPS=10 ERL_LIBS=/tmp/$b timeout 100 elixir bench/compiler_bench.exs 2>> "$OUT/compiler.err" | sed "s/^{/{\"build\": \"$b\", \"round\": $r, /" >> "$OUT/compiler.jsonl"
    echo "compiler ($b, round $r) done at $SECONDS s"
  done
done
grep -h '"throughput_us"' "$OUT/compiler.jsonl" | grep compiled | cut -c1-200; tail -3 "$OUT/compiler.err"
cd "$OUT" && tar -czf /tmp/x.tgz . && rm -rf "$OUT"/* && mv /tmp/x.tgz "$OUT/"
echo "all done at $SECONDS s"
