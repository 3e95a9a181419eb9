#!/usr/bin/env bash
# Stop 31, run 2: run 1's reduce failures on the H200, by variant (messages kept).
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
T="f32_extremes arg_reduce special_values large_reductions"
echo "== seq, no p2";  timeout 100 /tmp/gbins/reduce --test-threads 4 $T > "$OUT/seq.txt" 2>&1; grep -E "test result|panicked" -A2 "$OUT/seq.txt" | head -20
echo "== seq off, p2"; NX_VULKAN_ARG_SEQ_OFF=1 NX_VULKAN_P2_ROWK=1 timeout 100 /tmp/gbins/reduce --test-threads 4 $T > "$OUT/p2.txt" 2>&1; grep -E "test result|panicked" -A2 "$OUT/p2.txt" | head -20
