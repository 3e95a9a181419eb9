# Sourced (from the repo root) by the H200 LLM scripts: unpacks .bench-carry
# (bench/llm/prepare.sh) into /tmp — llama.cpp's Vulkan build and the gguf wheels on
# PYTHONPATH, our binary at /tmp/nx-vulkan — and makes /tmp/models for the generated files.
C=.bench-carry
mkdir -p /tmp/py /tmp/models
tar -xJf $C/cyllama-trim.tar.xz -C /tmp/py
for w in $C/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
xz -dc $C/nx-vulkan.xz > /tmp/nx-vulkan; chmod +x /tmp/nx-vulkan
