#!/usr/bin/env bash
# Builds what a device command carries as $BIN (bench/results/*/common.sh: `unpack NAME`):
# the nx-vulkan binary and the named engine test binaries, stripped and xz'd into
# .gpurun/NAME/ (git-ignored), from the current checkout.
#
#   bench/gpurun-build.sh NAME [TEST...]     e.g. bench/gpurun-build.sh s48a llm llm_kernels
#
# CARGO_TARGET_DIR is honoured (a separate one keeps a running CI's build undisturbed). On a
# bare 2-core machine the first build takes about 20 minutes.
set -euo pipefail
name=${1:?usage: bench/gpurun-build.sh NAME [TEST...]}; shift
root=$(git rev-parse --show-toplevel); cd "$root"
grep -qx '/.gpurun/' .git/info/exclude 2>/dev/null || echo '/.gpurun/' >> .git/info/exclude
out=.gpurun/$name; mkdir -p "$out"
export RUSTUP_AUTO_INSTALL=0
target=${CARGO_TARGET_DIR:-$root/native/target}
(cd native && cargo build --release -p nx_vulkan_cli)
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
strip -o "$tmp" "$target/release/nx-vulkan"; xz -T2 -6 -c "$tmp" > "$out/nx-vulkan.xz"
for t in "$@"; do
  # the test executable cargo reports for --test $t
  exe=$(cd native && cargo test --release -p nx_vulkan_engine --test "$t" --no-run --message-format=json 2>/dev/null \
        | python3 -c 'import json,sys
for l in sys.stdin:
    j = json.loads(l)
    if j.get("reason") == "compiler-artifact" and j.get("executable") and j["target"]["kind"] == ["test"]: print(j["executable"])' | tail -1)
  [ -n "$exe" ] || { echo "gpurun-build: no test binary for $t" >&2; exit 1; }
  strip -o "$tmp" "$exe"; xz -T2 -6 -c "$tmp" > "$out/$t.xz"
done
du -sh "$out"/*
