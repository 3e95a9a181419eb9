#!/usr/bin/env bash
# Stop 30, run 2: RoPE/KV store in the Q/K/V products and the attention's combine in its last
# chunk's workgroup (decode steps): correctness on the H200 (llm_attention, llm), then decode
# A/B in one command — both fused (default), NX_VULKAN_LLM_ROPE=separate, NX_VULKAN_LLM_COMBINE=
# separate, both separate — on 8B, 1B and SmolLM2 shapes, llama.cpp in the same command.
set -uo pipefail
source .gl/env.sh
C=.bench-carry
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/py /tmp/models /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
tar -xJf $C/cyllama-trim.tar.xz -C /tmp/py
for w in $C/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
[ -d /work/main/native/engine ] || { mkdir -p /work/main/native && ln -sfn "$PWD/native/engine" /work/main/native/engine; }
( cd native/engine && for b in llm_attention llm; do timeout 250 /tmp/gbins/$b --test-threads 4 2>&1 | grep -E "^test |test result|panicked|assert" ; done ) > "$OUT/correctness.txt" 2>&1
grep -E "test result|FAIL|panicked" "$OUT/correctness.txt"
echo "tests done at $SECONDS s"
for spec in 8b:q4km 1b:q4km smollm2:q4_1; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  [ -f "$f" ] || python3 bench/llm/gen_model.py "$f" "$preset" "$mix" > /dev/null
  python3 bench/llm/llbench.py "$f" 2>>"$OUT/ll.log" | sed "s/^{/{\"peer\":\"llama.cpp\",\"spec\":\"$spec\",/" >> "$OUT/ab.jsonl"
  for rep in 1 2; do
    for v in fused rope-separate combine-separate both-separate; do
      case $v in
        fused) e="";; rope-separate) e="NX_VULKAN_LLM_ROPE=separate";; combine-separate) e="NX_VULKAN_LLM_COMBINE=separate";;
        both-separate) e="NX_VULKAN_LLM_ROPE=separate NX_VULKAN_LLM_COMBINE=separate";;
      esac
      env $e /tmp/gbins/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.log" \
        | sed "s/^{/{\"variant\":\"$v\",\"spec\":\"$spec\",/" >> "$OUT/ab.jsonl"
    done
  done
  echo "$spec done at $SECONDS s"
done
python3 - "$OUT/ab.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    print(d["spec"], d.get("peer") or d.get("variant"), "pp", round(d["pp_tok_s"]), "tg", round(d["tg_tok_s"], 1))
PY
echo "all done at $SECONDS s"
