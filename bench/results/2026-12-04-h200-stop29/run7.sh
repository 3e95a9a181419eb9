#!/usr/bin/env bash
# Stop 29, run 7: the combine with 16 chunks loaded at once (decode), after run 6:
# correctness (llm_attention, llm_gemm, llm fixture tests) on the H200, then pp512/tg128 + profile
# against llama.cpp on 8B and 1B Q4_K_M-like shapes, both GEMM precisions.
set -uo pipefail
source .gl/env.sh
C=.bench-carry
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/py /tmp/models /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
tar -xJf $C/cyllama-trim.tar.xz -C /tmp/py
for w in $C/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
[ -d /work/main/native/engine ] || { mkdir -p /work/main/native && ln -sfn "$PWD/native/engine" /work/main/native/engine; }
( cd native/engine && for b in llm_attention llm; do timeout 200 /tmp/gbins/$b --test-threads 4 2>&1 | grep -E "^test |test result|panicked|assert" ; done ) > "$OUT/correctness.txt" 2>&1
grep -E "test result|FAIL|panicked" "$OUT/correctness.txt"
echo "tests done at $SECONDS s"
for spec in 8b:q4km 1b:q4km smollm2:q4_1; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  [ -f "$f" ] || python3 bench/llm/gen_model.py "$f" "$preset" "$mix" > /dev/null
  python3 bench/llm/llbench.py "$f" 2>/dev/null | sed "s/^{/{\"peer\":\"llama.cpp\",\"spec\":\"$spec\",/" >> "$OUT/pp.jsonl"
  for prec in split; do
    NX_VULKAN_LLM_GEMM_PRECISION=$prec /tmp/gbins/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.log" \
      | sed "s/^{/{\"prec\":\"$prec\",\"spec\":\"$spec\",/" >> "$OUT/pp.jsonl"
    NX_VULKAN_LLM_GEMM_PRECISION=$prec /tmp/gbins/nx-vulkan bench --model "$f" --pp 512 --tg 16 --runs 1 --sessions 0 --profile 2>>"$OUT/ours.log" \
      | sed "s/^{/{\"prec\":\"$prec\",\"spec\":\"$spec\",/" >> "$OUT/profile.jsonl"
  done
  echo "$spec done at $SECONDS s"
done
python3 - "$OUT/pp.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    print(d.get("spec"), d.get("peer") or d.get("prec"), "pp", round(d["pp_tok_s"]), "tg", round(d["tg_tok_s"], 1))
PY
echo "all done at $SECONDS s"
