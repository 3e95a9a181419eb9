#!/usr/bin/env bash
# Stop 43, run 2, ONE command: where the encoder attention's time goes on the GPU (run 1: the
# tiled kernel 428 us per call at 64 x 128 fp32, the per-query one 346, where their arithmetic
# needs ~50 us). Diagnostic builds of both kernels (NX_VULKAN_ATTN_DIAG, an uncommitted
# measurement patch: wrong results by design) timed per kernel: native exp in place of
# enc_expf; no global loads; no score fmas; no weighted sum of V; no exp.
# Carry .gl, .gpurun/s43, .gpurun/minilm-tok.
source bench/results/2026-12-06-stop43/common.sh
python3 bench/encoder/make_random_bert.py --tokenizer-dir .gpurun/minilm-tok --out /tmp/random-minilm --seed 0 > "$OUT/model.log" 2>&1
source .gl/env.sh
unpack nx-vulkan
for r in 1 2; do
  for kv in "tiled:" "tiled:native_exp" "tiled:no_loads" "tiled:no_scores" "tiled:no_pv" "tiled:no_exp" "tiled:no_scores,no_pv" "tiled:no_scores,no_pv,no_exp" "query:" "query:native_exp"; do
    k=${kv%%:*}; dg=${kv#*:}
    NX_VULKAN_ATTN_DIAG=$dg NX_VULKAN_ENCODER_ATTENTION=$k timeout 60 /tmp/t/nx-vulkan encode-bench --model /tmp/random-minilm --precisions fp32 --shapes 64x128 --reps 5 --warmup 2 --profile 2>>"$OUT/ours.err" \
      | grep 'encoder attention' | tag "\"kernel\":\"$k\",\"diag\":\"$dg\",\"round\":$r" >> "$OUT/diag.jsonl"
  done
done
python3 - "$OUT/diag.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    print(j["round"], j["kernel"], j["diag"] or "-", round(j["mean_us"], 1), "us x", j["runs"])
PY
echo "all done at $SECONDS s"
