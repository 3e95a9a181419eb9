#!/usr/bin/env bash
# Fetches real tokenizer vocabularies for the tokenizer tests: the vocabulary-only GGUFs llama.cpp
# keeps in models/ (Llama-3 "llama-bpe", Qwen2, GPT-2, StarCoder, Refact, Command-R, Llama-2 and
# Phi-3 SentencePiece), each with its .inp test texts and .out ids written by the model's own
# Hugging Face tokenizer (llama.cpp's convert_hf_to_gguf_update.py), as shipped inside the PyPI
# source package llama-cpp-python 0.3.36 (nothing from a model hub), into a cache folder, once.
# Prints the folder's path (and nothing else on stdout).
#   NX_VULKAN_MODEL_CACHE  where models are kept (default: ~/.cache/nx_vulkan/models)
set -euo pipefail
cache="${NX_VULKAN_MODEL_CACHE:-$HOME/.cache/nx_vulkan/models}"
dir="$cache/llama.cpp-vocabs"
version=0.3.36
url="https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-$version.tar.gz"
# sha256 of that source package: a damaged download is refused.
want=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
names="llama-bpe qwen2 gpt-2 starcoder refact command-r llama-spm phi-3"
if [ -f "$dir/.complete" ]; then
  echo "$dir"; exit 0
fi
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
command -v python3 >/dev/null || { echo "fetch-vocabs: python3 is needed" >&2; exit 1; }
python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$url" "$tmp/src.tgz"
got="$(sha256sum "$tmp/src.tgz" | cut -d' ' -f1)"
if [ "$got" != "$want" ]; then
  echo "fetch-vocabs: llama-cpp-python $version has sha256 $got, expected $want" >&2; exit 1
fi
members=()
for n in $names; do
  for ext in "" .inp .out; do
    members+=("llama_cpp_python-$version/vendor/llama.cpp/models/ggml-vocab-$n.gguf$ext")
  done
done
tar -xzf "$tmp/src.tgz" -C "$tmp" "${members[@]}"
mkdir -p "$cache"; rm -rf "$dir"; mkdir -p "$dir"
mv "$tmp/llama_cpp_python-$version/vendor/llama.cpp/models/"ggml-vocab-* "$dir/"
touch "$dir/.complete"
echo "$dir"
