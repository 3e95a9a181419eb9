#!/usr/bin/env bash
# Stop 42, run 4 (H100), ONE command: the speculative native f32 chains
# (elementwise.rs `speculative_block`) — their bit test and the elementwise, plan, llm_kernels
# and matmul suites on the GPU (a device that may flush subnormals is where the speculation's
# tests matter) — then issue 7's compiler table from Elixir with NX_VULKAN_SPECULATE=1 / 0
# in the same build, alternating, two rounds (REPS=10), beside torch.compile / PyTorch / JAX
# measured first (before .gl/env.sh: its libraries broke torch.compile's gcc step in run 3).
# Carry .gl, .gpurun/beam42.tgz (this build's app, NIF and Nx), .gpurun/tests42.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/t /tmp/gbeam
python3 bench/torch_compiler.py --reps 10 > "$OUT/torch_compiler.jsonl" 2> "$OUT/torch_compiler.err"
echo "peers done at $SECONDS s"
source .gl/env.sh
for t in elementwise: plan: llm_kernels: matmul:; do
  name=${t%%:*}; filter=${t#*:}
  xz -dc .gpurun/tests42/$name.xz > /tmp/t/$name; chmod +x /tmp/t/$name
  (cd native/engine && timeout 150 /tmp/t/$name $filter --test-threads 4 2>&1 | tail -15) > "$OUT/test_$name.txt"
  echo "$name:"; grep -E "^test result|FAILED|panicked" "$OUT/test_$name.txt"
done
echo "tests done at $SECONDS s"
tar -xzf .gpurun/beam42.tgz -C /tmp/gbeam
export NX_VULKAN_CACHE_DIR=/tmp/nxvk-cache
for r in 1 2; do
  for v in spec nospec; do
    s=1; [ $v = nospec ] && s=0
    NX_VULKAN_SPECULATE=$s REPS=10 ERL_LIBS=/tmp/gbeam timeout 120 elixir bench/compiler_bench.exs 2>> "$OUT/compiler.err" | sed "s/^{/{\"variant\": \"$v\", \"round\": $r, /" >> "$OUT/compiler.jsonl"
    echo "compiler ($v, round $r) done at $SECONDS s"
  done
done
grep -h '"throughput_us"' "$OUT/compiler.jsonl" "$OUT/torch_compiler.jsonl" | cut -c1-200; tail -3 "$OUT/compiler.err"
cd "$OUT" && tar -czf /tmp/x.tgz . && rm -rf "$OUT"/* && mv /tmp/x.tgz "$OUT/"
echo "all done at $SECONDS s"
