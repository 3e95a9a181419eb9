#!/usr/bin/env bash
# Stop 37, run 7: yield_probe8.exs. Carry .gl, .gpurun/beam.tgz.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbeam
tar -xzf .gpurun/beam.tgz -C /tmp/gbeam
ERL_LIBS=/tmp/gbeam timeout 120 elixir bench/results/2026-12-05-h200-stop37/yield_probe8.exs 2>&1 | tee "$OUT/yield_probe8.jsonl" | cut -c1-400
