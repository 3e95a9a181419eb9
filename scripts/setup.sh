#!/usr/bin/env bash
# Installs what building and testing nx_vulkan needs on Debian 12 (apt), if missing:
# Elixir/Erlang, Mesa's lavapipe (a CPU Vulkan driver), the Vulkan loader and tools, and the
# static shaderc/glslang/SPIRV-Tools libraries the engine links (never built from source).
set -euo pipefail
pkgs=(elixir erlang-dev erlang-inets mesa-vulkan-drivers libvulkan1 libvulkan-dev vulkan-tools
      glslc libshaderc-dev glslang-dev spirv-tools libmpfr-dev libgmp-dev pkg-config)
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
command -v cargo >/dev/null || { echo "setup: cargo not found (install Rust 1.95, see rust-toolchain.toml)"; exit 1; }
echo "setup: ok"
