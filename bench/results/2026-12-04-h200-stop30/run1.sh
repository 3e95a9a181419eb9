#!/usr/bin/env bash
# Stop 30, run 1: ablation of a decode step (NX_VULKAN_SKIP_KERNELS drops the named kernels'
# dispatches; the results are wrong, the timing of the rest is what is read) on the 8B and 1B
# Q4_K_M-like shapes, llama.cpp in the same command.
set -uo pipefail
source .gl/env.sh
C=.bench-carry
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/py /tmp/models /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
tar -xJf $C/cyllama-trim.tar.xz -C /tmp/py
for w in $C/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
for spec in 8b:q4km 1b:q4km; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  [ -f "$f" ] || python3 bench/llm/gen_model.py "$f" "$preset" "$mix" > /dev/null
  python3 bench/llm/llbench.py "$f" 2>>"$OUT/ll.log" | sed "s/^{/{\"peer\":\"llama.cpp\",\"spec\":\"$spec\",/" >> "$OUT/ablate.jsonl"
  for skip in "" "llm rmsnorm" "llm rope" "llm attention combine" "llm attention" "SWIGLU" "RESIDUAL" "X_VEC4$" "Q4_K&X_VEC4$" "Q6_K&RESIDUAL" "llm matvec" "llm rmsnorm;llm rope;llm attention" "llm" ""; do
    NX_VULKAN_SKIP_KERNELS="$skip" /tmp/gbins/nx-vulkan bench --model "$f" --pp 16 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.log" \
      | sed "s/^{/{\"skip\":\"${skip//&/\\&}\",\"spec\":\"$spec\",/" >> "$OUT/ablate.jsonl"
  done
  NX_VULKAN_SKIP_KERNELS= /tmp/gbins/nx-vulkan bench --model "$f" --pp 16 --tg 16 --runs 1 --sessions 0 --profile 2>>"$OUT/ours.log" | sed "s/^{/{\"spec\":\"$spec\",/" >> "$OUT/profile.jsonl"
  echo "$spec done at $SECONDS s"
done
python3 - "$OUT/ablate.jsonl" <<'PY'
import json, sys
base = {}
for l in open(sys.argv[1]):
    d = json.loads(l)
    spec = d["spec"]; tg = d["tg_tok_s"]
    if "peer" in d:
        print(spec, "llama.cpp tg", tg, "us/token", round(1e6 / tg)); continue
    us = 1e6 / tg
    if d["skip"] == "" and spec not in base: base[spec] = us
    print(spec, repr(d["skip"]), "tg", round(tg, 1), "us/token", round(us), "saved", round(base[spec] - us))
PY
echo "all done at $SECONDS s"
