#!/usr/bin/env bash
# Stop 29, run 8: prefill and decode from Elixir (bench/llm_bench.exs: NxVulkan.LLM.generate/3
# and stream/3) at both prefill precisions, beside `nx-vulkan bench --model`, 8B and 1B shapes.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/py /tmp/models /tmp/gbeam /tmp/gbins
C=.bench-carry
tar -xzf .gpubeam/beam.tgz -C /tmp/gbeam
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
for w in $C/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
python3 bench/llm/gen_model.py /tmp/models/1b-q4km.gguf 1b q4km > /dev/null 2>&1 &
python3 bench/llm/gen_model.py /tmp/models/8b-q4km.gguf 8b q4km > /dev/null 2>&1
wait
for spec in 8b:q4km 1b:q4km; do
  f=/tmp/models/${spec%%:*}-${spec##*:}.gguf
  for prec in split f16; do
    ERL_LIBS=/tmp/gbeam timeout 120 elixir bench/llm_bench.exs "$f" 3 $prec 2>>"$OUT/elixir.log" | sed "s/^{/{\"spec\":\"$spec\",/" >> "$OUT/elixir.jsonl"
    timeout 90 /tmp/gbins/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 --prefill-precision $prec 2>>"$OUT/ours.log" | sed "s/^{/{\"peer\":\"nx_vulkan-rust\",\"spec\":\"$spec\",/" >> "$OUT/rust.jsonl"
  done
  echo "$spec done at $SECONDS s"
done
cat "$OUT/elixir.jsonl"; tail -3 "$OUT/elixir.log"
python3 - "$OUT/rust.jsonl" <<'PY'
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print(d['spec'], d['prefill_precision'], 'pp', round(d['pp_tok_s']), 'tg', round(d['tg_tok_s'],1))
PY
echo "done at $SECONDS s"
