#!/usr/bin/env bash
# Stop 39: fills the ignored carry folders for run1-3.sh (this machine; nothing here is
# committed): .bench-carry/nx-vulkan.xz (this build), .bench-carry/nx-vulkan-base.xz (this
# build with the stop's two same-bits speedups turned off: f32 expm1/log/tanh/sigmoid/erf through
# the full f64 functions, the exact dot's products unfused — the A/B baseline), .gpurun/tests/*.xz (the
# unary_f32, matmul and conv test binaries, run on the GPU from native/engine) and .gpurun/beam.tgz
# (the app compiled against Nx, its NIF, and Nx built by hand: NX_ERL_LIBS names that folder).
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
: "${NX_ERL_LIBS:?set NX_ERL_LIBS to the by-hand Nx ERL_LIBS folder (nx, complex, telemetry)}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
rm -rf .gpurun/tests; mkdir -p .bench-carry .gpurun/tests
pack() { strip -o "$tmp/b" native/target/release/nx-vulkan; xz -T2 -6 -c "$tmp/b" > "$1"; }
build() { (cd native && cargo build --release -p nx_vulkan_cli -p nx_vulkan_nif) || exit 1; }
build; pack .bench-carry/nx-vulkan.xz
# the baseline: two one-line switches, built, then restored
cp native/engine/src/elementwise.rs "$tmp/e.rs"; cp native/engine/src/matmul.rs "$tmp/m.rs"
restore() { cp "$tmp/e.rs" native/engine/src/elementwise.rs; cp "$tmp/m.rs" native/engine/src/matmul.rs; }
trap 'restore; rm -rf "$tmp"' EXIT
sed -i 's/    matches!(op, UnaryOp::Exp | UnaryOp::Expm1 | UnaryOp::Log | UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Erf)$/    op == UnaryOp::Exp/' native/engine/src/elementwise.rs
sed -i 's/if significand(a) + significand(b) <= 53 {/if significand(a) + significand(b) <= 0 {/' native/engine/src/matmul.rs
grep -qx '    op == UnaryOp::Exp' native/engine/src/elementwise.rs || { echo "baseline switch 1 did not apply"; exit 1; }
grep -q 'significand(b) <= 0 {' native/engine/src/matmul.rs || { echo "baseline switch 2 did not apply"; exit 1; }
build; pack .bench-carry/nx-vulkan-base.xz
restore; trap 'rm -rf "$tmp"' EXIT
build
# test binaries (the suites' kernels on the GPU)
(cd native && cargo test --release -p nx_vulkan_engine --test unary_f32 --test matmul --test conv --no-run 2>&1) | grep -o 'target/release/deps/[a-z_0-9-]*' | while read -r t; do
  n=$(basename "$t" | sed 's/-[0-9a-f]*$//'); xz -T2 -6 -c "native/$t" > ".gpurun/tests/$n.xz"
done
# the Elixir side: the app built against Nx (make test with ERL_LIBS set builds _build_nx), its NIF
cp native/target/release/libnx_vulkan_nif.so priv/
NX_VULKAN_SKIP_CARGO=1 ERL_LIBS="$NX_ERL_LIBS" MIX_ENV=test mix compile > /dev/null
mkdir -p "$tmp/beam/nx_vulkan/priv"
cp -r _build_nx/test/lib/nx_vulkan/ebin "$tmp/beam/nx_vulkan/"
cp priv/libnx_vulkan_nif.so "$tmp/beam/nx_vulkan/priv/"
cp -r "$NX_ERL_LIBS"/nx "$NX_ERL_LIBS"/complex "$NX_ERL_LIBS"/telemetry "$tmp/beam/"
tar -C "$tmp/beam" -czf .gpurun/beam.tgz .
du -sh .bench-carry/nx-vulkan.xz .bench-carry/nx-vulkan-base.xz .gpurun/tests/*.xz .gpurun/beam.tgz
