#!/usr/bin/env bash
# Stop 43, run 6, ONE command: throughput or latency? Each kernel at 1, 8, 16 and 64 sequences
# of 128 (1/64 .. 1 of run 2's grid). Run 5: the score loop rolled (dloop1, dloop4) and 16 KiB
# of unused shared memory (pad16k) changed nothing.
# Run 4: named vec4 accumulators changed nothing. Run 2 showed enc_expf costing ~160 us of the tiled kernel (native exp:
# 266 us) and a skeleton without scores, exp or weighted sums still 195 us. Variants (same
# measurement patch): enc_expf scaling 2^k by exponent bits (exp_bits) and rounding k with
# 1.5·2^23 (exp_magic); the max, weight and sum loops unrolled over the 32-key tile with
# masked keys as -Inf / 0 (unroll: the same bits, tested on lavapipe); 32 queries per group.
# Carry .gl, .gpurun/s43, .gpurun/minilm-tok.
source bench/results/2026-12-06-stop43/common.sh
python3 bench/encoder/make_random_bert.py --tokenizer-dir .gpurun/minilm-tok --out /tmp/random-minilm --seed 0 > "$OUT/model.log" 2>&1
source .gl/env.sh
unpack nx-vulkan
for r in 1 2; do
  for kv in "tiled:" "tiled:unroll,native_exp" "query:"; do
    k=${kv%%:*}; dg=${kv#*:}
    for shape in 1x128 8x128 16x128 64x128; do
    NX_VULKAN_ATTN_DIAG=$dg NX_VULKAN_ENCODER_ATTENTION=$k timeout 60 /tmp/t/nx-vulkan encode-bench --model /tmp/random-minilm --precisions fp32 --shapes $shape --reps 5 --warmup 2 --profile 2>>"$OUT/ours.err" \
      | grep 'encoder attention' | tag "\"kernel\":\"$k\",\"diag\":\"$dg\",\"round\":$r,\"shape\":\"$shape\"" >> "$OUT/diag.jsonl"
  done
  done
done
python3 - "$OUT/diag.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    print(j["round"], j["shape"], j["kernel"], j["diag"] or "-", round(j["mean_us"], 1), "us x", j["runs"])
PY
echo "all done at $SECONDS s"
