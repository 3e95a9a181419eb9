#!/usr/bin/env bash
# Stop 28, run 9: the encoder's projection kernels (coopmat linear) after the generator's
# element-per-word change, on the H200 (encoder_kernels built at c467fed).
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
[ -d /work/main/native/engine ] || { mkdir -p /work/main/native && ln -sfn "$PWD/native/engine" /work/main/native/engine; }
cd native/engine && timeout 150 /tmp/gbins/encoder_kernels --test-threads 4 linear 2>&1 | grep -E "^test |test result|panicked" | tee "$OUT/encoder_kernels.txt"
echo "all done at $SECONDS s"
