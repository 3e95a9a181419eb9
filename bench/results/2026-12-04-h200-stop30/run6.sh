#!/usr/bin/env bash
# Stop 30, run 6: aggregate decode (sessions 1, 8, 1, 8, 32 in a row) with the fused RoPE/combine
# (default) and both separate, SmolLM2 and 8B shapes.
set -uo pipefail
source .gl/env.sh
C=.bench-carry
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/py /tmp/models /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
for w in $C/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
for spec in smollm2:q4_1 8b:q4km; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  [ -f "$f" ] || python3 bench/llm/gen_model.py "$f" "$preset" "$mix" > /dev/null
  for v in fused separate; do
    e=""; [ $v = separate ] && e="NX_VULKAN_LLM_ROPE=separate NX_VULKAN_LLM_COMBINE=separate"
    env $e /tmp/gbins/nx-vulkan bench --model "$f" --pp 16 --tg 128 --runs 1 --sessions 1,8,1,8,32 2>>"$OUT/ours.log" \
      | sed "s/^{/{\"variant\":\"$v\",\"spec\":\"$spec\",/" >> "$OUT/agg.jsonl"
  done
  echo "$spec done at $SECONDS s"
done
python3 - "$OUT/agg.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    print(d["spec"], d["variant"], "tg", round(d["tg_tok_s"], 1), "agg", {k: round(v) for k, v in d["aggregate_tok_s"].items()})
PY
