# Sourced by run5.sh and run6.sh after .gl/env.sh: this stop's kernels and stop 39's f32
# paths on the GPU (tests/unary_f32.rs whole; elementwise's wide-kernel test; fused_reduce's
# row-reduction test), each binary from .gpurun/tests40, its tail in $OUT/test_NAME.txt.
mkdir -p /tmp/t
for t in unary_f32:"" elementwise:wide fused_reduce:row_reduction; do
  name=${t%%:*}; filter=${t#*:}
  xz -dc .gpurun/tests40/$name.xz > /tmp/t/$name; chmod +x /tmp/t/$name
  (cd native/engine && timeout 150 /tmp/t/$name $filter --test-threads 4 2>&1 | tail -15) > "$OUT/test_$name.txt"
  echo "$name $filter:"; grep -E "^test result|FAILED|panicked" "$OUT/test_$name.txt"
done
echo "tests done at $SECONDS s"
