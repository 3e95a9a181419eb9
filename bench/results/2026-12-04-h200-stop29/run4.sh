#!/usr/bin/env bash
# Stop 29, run 4: attention rows per workgroup sweep (1, 2, 4) with interleaved PV chains;
# pp512/tg64 f16 GEMM, 8B and 1B; profile at R=1; llm_attention on the H200.
set -uo pipefail
source .gl/env.sh
C=.bench-carry
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/py /tmp/models /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
for w in $C/gguf*.whl $C/pyyaml*.whl $C/tqdm*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
[ -d /work/main/native/engine ] || { mkdir -p /work/main/native && ln -sfn "$PWD/native/engine" /work/main/native/engine; }
( cd native/engine && timeout 100 /tmp/gbins/llm_attention 2>&1 | grep -E "^test |test result|panicked" ) > "$OUT/correctness.txt" 2>&1
cat "$OUT/correctness.txt"
for spec in 8b:q4km 1b:q4km; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  [ -f "$f" ] || python3 bench/llm/gen_model.py "$f" "$preset" "$mix" > /dev/null
  for r in 1 2 4 1; do
    NX_VULKAN_LLM_ATTN_ROWS=$r /tmp/gbins/nx-vulkan bench --model "$f" --pp 512 --tg 64 --runs 3 --sessions 0 --prefill-precision f16 2>>"$OUT/ours.log" \
      | sed "s/^{/{\"rows\":$r,\"spec\":\"$spec\",/" >> "$OUT/pp.jsonl"
  done
  NX_VULKAN_LLM_ATTN_ROWS=1 /tmp/gbins/nx-vulkan bench --model "$f" --pp 512 --tg 2 --runs 1 --sessions 0 --profile --prefill-precision f16 2>>"$OUT/ours.log" \
      | sed "s/^{/{\"rows\":1,\"spec\":\"$spec\",/" >> "$OUT/profile.jsonl"
  echo "$spec done at $SECONDS s"
done
python3 - "$OUT/pp.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    print(d.get("spec"), "rows", d.get("rows"), "pp", round(d["pp_tok_s"]), "tg", round(d["tg_tok_s"], 1))
PY
echo "all done at $SECONDS s"
