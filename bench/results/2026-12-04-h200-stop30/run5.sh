#!/usr/bin/env bash
# Stop 30, run 5 (final code, commit ca015cb's kernels): pp512/tg128 at both prefill precisions,
# aggregate decode with 1/8/32 sessions and the 4.8 TB/s roofline, on the 8B, 1B and SmolLM2
# shapes; llama.cpp in the same command.
set -uo pipefail
source .gl/env.sh
C=.bench-carry
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/py /tmp/models /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
tar -xJf $C/cyllama-trim.tar.xz -C /tmp/py
for w in $C/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
for spec in 8b:q4km 1b:q4km smollm2:q4_1; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  [ -f "$f" ] || python3 bench/llm/gen_model.py "$f" "$preset" "$mix" > /dev/null
  python3 bench/llm/llbench.py "$f" 2>>"$OUT/ll.log" | sed "s/^{/{\"peer\":\"llama.cpp\",\"spec\":\"$spec\",/" >> "$OUT/final.jsonl"
  /tmp/gbins/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 1,8,32 --peak-gbs 4800 2>>"$OUT/ours.log" \
    | sed "s/^{/{\"prec\":\"split\",\"spec\":\"$spec\",/" >> "$OUT/final.jsonl"
  /tmp/gbins/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 --prefill-precision f16 2>>"$OUT/ours.log" \
    | sed "s/^{/{\"prec\":\"f16\",\"spec\":\"$spec\",/" >> "$OUT/final.jsonl"
  echo "$spec done at $SECONDS s"
done
python3 - "$OUT/final.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    extra = "" if "peer" in d else " agg %s roofline %s" % (d.get("aggregate_tok_s"), {k: round(v) for k, v in d.items() if "roofline" in k and isinstance(v, (int, float))})
    print(d["spec"], d.get("peer") or d.get("prec"), "pp", round(d["pp_tok_s"]), "tg", round(d["tg_tok_s"], 1), extra)
PY
echo "all done at $SECONDS s"
