#!/usr/bin/env bash
# Stop 30, run 4: the decode matvec's activations staged in shared memory per workgroup in
# chunks of 4,096 values (NX_VULKAN_LLM_XSHARED=1; Q4_K/Q6_K, one column), with workgroups of
# 128/256/512 (NX_VULKAN_LLM_WG): micro-benchmark (8B shapes, weights from HBM), greedy tokens
# compared with and without, and 8B/1B decode; llama.cpp in the same command.
set -uo pipefail
source .gl/env.sh
C=.bench-carry
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/py /tmp/models /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
tar -xJf $C/cyllama-trim.tar.xz -C /tmp/py
for w in $C/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
for xs in 0 1; do
  for wg in 128 256 512; do
    for ty in Q4_K Q6_K; do
      NX_VULKAN_LLM_XSHARED=$xs NX_VULKAN_LLM_WG=$wg /tmp/gbins/nx-vulkan llm-gemm-bench --type $ty --matvec-only --rows 1 --shapes 14336x4096,4096x14336,4096x4096,1024x4096 --swiglu --one-batch --calls 50 --reps 5 --distinct 4 2>>"$OUT/ours.log" \
        | sed "s/^{/{\"xs\":$xs,\"wg\":$wg,/" >> "$OUT/micro.jsonl"
    done
  done
done
echo "micro done at $SECONDS s"
for spec in 8b:q4km 1b:q4km; do
  preset=${spec%%:*}; mix=${spec##*:}; f=/tmp/models/$preset-$mix.gguf
  [ -f "$f" ] || python3 bench/llm/gen_model.py "$f" "$preset" "$mix" > /dev/null
  for xs in 0 1; do
    NX_VULKAN_LLM_XSHARED=$xs /tmp/gbins/nx-vulkan generate --model "$f" --prompt "hello world" --max-tokens 48 > "$OUT/gen-$preset-$xs.txt" 2>/dev/null
  done
  cmp "$OUT/gen-$preset-0.txt" "$OUT/gen-$preset-1.txt" && echo "$spec greedy tokens equal with x staged"
  python3 bench/llm/llbench.py "$f" 2>>"$OUT/ll.log" | sed "s/^{/{\"peer\":\"llama.cpp\",\"spec\":\"$spec\",/" >> "$OUT/llm.jsonl"
  for rep in 1 2; do
    for v in 0:128 1:128 1:256 1:512; do
      xs=${v%%:*}; wg=${v##*:}
      NX_VULKAN_LLM_XSHARED=$xs NX_VULKAN_LLM_WG=$wg /tmp/gbins/nx-vulkan bench --model "$f" --pp 16 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.log" \
        | sed "s/^{/{\"xs\":$xs,\"wg\":$wg,\"spec\":\"$spec\",/" >> "$OUT/llm.jsonl"
    done
  done
  echo "$spec done at $SECONDS s"
done
python3 - "$OUT" <<'PY'
import json, sys
d = sys.argv[1]
for l in open(d + "/micro.jsonl"):
    r = json.loads(l)
    print("micro xs", r["xs"], "wg", r["wg"], r["kernel"], r["type"], r["n"], "x", r["k"], r["median_us"], "us", r["weight_gb_per_s"], "GB/s")
for l in open(d + "/llm.jsonl"):
    r = json.loads(l)
    print(r["spec"], r.get("peer") or ("xs %d wg %d" % (r["xs"], r["wg"])), "tg", round(r["tg_tok_s"], 1))
PY
echo "all done at $SECONDS s"
