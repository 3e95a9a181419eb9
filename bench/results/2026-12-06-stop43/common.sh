# Sourced (from the repo root) by this stop's device commands (and prepared ones after it):
# one copy of what each run does the same way. Carry .gl and $BIN (default .gpurun/s43: the
# binaries, xz'd).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/t
BIN=${BIN:-.gpurun/s43}
export NX_VULKAN_CACHE_DIR=/tmp/nxvk-cache
# unpack NAME: $BIN/NAME.xz -> /tmp/t/NAME (executable)
unpack() { xz -dc "$BIN/$1.xz" > "/tmp/t/$1" && chmod +x "/tmp/t/$1"; }
# gpu_test NAME [FILTER...]: a test binary on the GPU (from native/engine, as cargo runs it)
gpu_test() {
  local name=$1; shift
  unpack "$name"
  (cd native/engine && timeout 240 "/tmp/t/$name" --test-threads 4 "$@" 2>&1 | tail -25) > "$OUT/test_$name.txt"
  echo "$name tests:"; grep -E "^test result|FAILED|panicked" "$OUT/test_$name.txt"
}
# tag FIELDS: prefixes FIELDS ("\"k\":\"v\",...") to each JSON object read on stdin.
tag() { sed "s/^{/{$1,/"; }
# encoder_summary FILE: build/variant, round, precision, shape, forward inputs/s per line
encoder_summary() {
  python3 - "$1" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    j = json.loads(l)
    if j.get("scope") == "forward" or j.get("peer") == "torch":
        print(j.get("peer", "nx_vulkan"), j.get("variant", ""), j.get("round", ""), j.get("precision"), f'{j.get("batch")}x{j.get("seq")}', j.get("scope", ""), round(j.get("inputs_per_s", 0), 1))
PY
}
# setup_peer: llama.cpp's wheel (cyllama, trimmed) and the gguf/tqdm/PyYAML wheels from
# .bench-carry unpacked into /tmp/py, on PYTHONPATH (the model generator and the peer).
setup_peer() {
  mkdir -p /tmp/py
  tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
  for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
  export PYTHONPATH=/tmp/py
}
# gen_models "PRESET MIX"...: random-weight GGUFs /tmp/models/PRESET-MIX.gguf (bench/llm/gen_model.py), once each.
gen_models() {
  mkdir -p /tmp/models
  local m; for m in "$@"; do
    set -- $m
    [ -f /tmp/models/$1-$2.gguf ] || python3 bench/llm/gen_model.py /tmp/models/$1-$2.gguf $1 $2 > /dev/null
  done
}
