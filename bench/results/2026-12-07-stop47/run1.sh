#!/usr/bin/env bash
# Stop 47 run 1: the decode matvec's Q4_K/Q5_K/Q6_K/Q8_0/Q4_0 quants as the floats 1 + q·2^-bits
# (QF_MANT, the new default: a shift and a masked or per value) against 2^23 + q − 2^23
# (NX_VULKAN_LLM_QUANT_MANTISSA=0: one float subtraction more per value, and Q4_K's nibble
# masks). (1) The kernel test on the GPU, with both forms' worst errors printed; (2) the Q4_K,
# Q6_K and Q8_0 matvecs' device time at 14336×4096 and 57344×4096 (weights cycling through enough
# copies to miss L2), both forms; (3) decode on 8B Q4_K_M-like and 1B Q4_K_M-like files,
# both forms alternating over two rounds, llama.cpp b11669 on the same files
# in the same command. Carry .gl, $BIN, .bench-carry.
export BIN=${BIN:-.gpurun/s47a}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
for m in "8b q4km" "1b q4km"; do
  set -- $m
  [ -f /tmp/models/$1-$2.gguf ] || python3 bench/llm/gen_model.py /tmp/models/$1-$2.gguf $1 $2 > /dev/null
done
echo "models at $SECONDS s"
source .gl/env.sh
gpu_test llm_kernels matvec_matches_the_cpu_reference --nocapture
grep -E "worst error" "$OUT/test_llm_kernels.txt"
unpack nx-vulkan
for v in X=0 NX_VULKAN_LLM_QUANT_MANTISSA=0; do
  for ty in Q4_K Q6_K Q8_0; do
    for sd in 14336x4096:4 57344x4096:2; do
      env $v timeout 60 /tmp/t/nx-vulkan llm-gemm-bench --type $ty --shapes ${sd%%:*} --rows 1 --matvec-only --one-batch --calls 50 --distinct ${sd##*:} --profile 2>>"$OUT/ours.err" \
        | tag "\"variant\":\"$v\",\"type\":\"$ty\",\"shape\":\"${sd%%:*}\"" >> "$OUT/mv.jsonl"
    done
  done
done
python3 - "$OUT/mv.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "profile" in j:
        if "llm matvec" in j["profile"]: print("  device", j["variant"], j["type"], j["shape"], round(j["mean_us"], 2), "us")
    else:
        print(j["variant"], j["type"], j["shape"], "wall", j.get("median_us"), "GB/s", j.get("weight_gb_per_s"))
PY
echo "matvecs done at $SECONDS s"
for f in /tmp/models/8b-q4km.gguf /tmp/models/1b-q4km.gguf; do
  timeout 60 python3 bench/llm/llbench.py "$f" 2>>"$OUT/llama.log" | tag "\"variant\":\"llama.cpp-vulkan\"" >> "$OUT/llm.jsonl"
  for v in X=0 NX_VULKAN_LLM_QUANT_MANTISSA=0 X=0 NX_VULKAN_LLM_QUANT_MANTISSA=0; do
    env $v timeout 60 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" | tag "\"variant\":\"$v\"" >> "$OUT/llm.jsonl"
  done
done
python3 -c "
import json
for l in open('$OUT/llm.jsonl'):
    j = json.loads(l); print(j.get('model'), j['variant'], 'tg', round(j['tg_tok_s'], 1), 'pp', round(j['pp_tok_s'], 1), j.get('tg_runs'))"
echo "all done at $SECONDS s"
