#!/usr/bin/env bash
# Stop 29, run 1: where pp512 time goes (split and f16 GEMM), 8B and 1B Q4_K_M-like, beside llama.cpp.
set -uo pipefail
source .gl/env.sh
C=.bench-carry
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/py /tmp/models
tar -xJf $C/cyllama-trim.tar.xz -C /tmp/py
for w in $C/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
xz -dc $C/nx-vulkan-new.xz > /tmp/nx-vulkan; chmod +x /tmp/nx-vulkan
for spec in 8b:q4km 1b:q4km; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  [ -f "$f" ] || python3 bench/llm/gen_model.py "$f" "$preset" "$mix"
  echo "== $spec llama.cpp at $SECONDS s"
  python3 bench/llm/llbench.py "$f" 2>/dev/null | sed "s/^{/{\"peer\":\"llama.cpp\",\"spec\":\"$spec\",/" >> "$OUT/pp.jsonl"
  for prec in split f16; do
    echo "== $spec $prec at $SECONDS s"
    NX_VULKAN_LLM_GEMM_PRECISION=$prec /tmp/nx-vulkan bench --model "$f" --pp 512 --tg 16 --runs 3 --sessions 0 2>>"$OUT/ours.log" \
      | sed "s/^{/{\"prec\":\"$prec\",\"spec\":\"$spec\",/" >> "$OUT/pp.jsonl"
    NX_VULKAN_LLM_GEMM_PRECISION=$prec /tmp/nx-vulkan bench --model "$f" --pp 512 --tg 2 --runs 1 --sessions 0 --profile 2>>"$OUT/ours.log" \
      | sed "s/^{/{\"prec\":\"$prec\",\"spec\":\"$spec\",/" >> "$OUT/profile.jsonl"
  done
  tail -3 "$OUT/pp.jsonl" | cut -c1-400
done
echo "all done at $SECONDS s"
