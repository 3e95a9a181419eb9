#!/usr/bin/env bash
# Fills .bench-carry/ (git-ignored) with what bench/llm/h200.sh needs on the GPU machine, which
# reaches no registry: the nx-vulkan binary (stripped, xz), llama.cpp's Vulkan build from the PyPI
# wheel cyllama-vulkan 0.7.0 (its stable-diffusion, whisper and rag modules dropped so that the
# carried tree stays under the device tool's 64 MiB), and the wheels of gguf, PyYAML and tqdm.
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
grep -qx '/.bench-carry/' .git/info/exclude 2>/dev/null || echo '/.bench-carry/' >> .git/info/exclude
C=.bench-carry; mkdir -p $C; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd native && cargo build --release -p nx_vulkan_cli)
strip -o "$tmp/nx-vulkan" native/target/release/nx-vulkan; xz -T2 -6 -c "$tmp/nx-vulkan" > $C/nx-vulkan.xz
if [ ! -f $C/cyllama-trim.tar.xz ]; then
  python3 -m pip download -q --no-deps --python-version 3.12 --only-binary=:all: cyllama-vulkan==0.7.0 -d "$tmp"
  mkdir "$tmp/x"; python3 -m zipfile -e "$tmp"/cyllama_vulkan-0.7.0-*.whl "$tmp/x"
  rm -rf "$tmp/x/cyllama/sd" "$tmp/x/cyllama/whisper" "$tmp/x/cyllama/rag"
  tar -C "$tmp/x" -cf - . | xz -T2 -6 > $C/cyllama-trim.tar.xz
fi
python3 -m pip download -q --no-deps --only-binary=:all: gguf==0.19.0 tqdm -d $C
python3 -m pip download -q --no-deps --python-version 3.12 --only-binary=:all: --platform manylinux_2_17_x86_64 pyyaml -d $C
du -sh $C
