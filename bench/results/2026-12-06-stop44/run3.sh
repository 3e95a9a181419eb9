#!/usr/bin/env bash
# Stop 44, run 3 (one command): the Q4_K decode product's instructions. Run 1 measured the
# 8B FFN's Q4_K matvec at 33 us of device time per 14336 x 4096 product (1.0 TB/s) where a
# plain 16-byte stream of 64 MiB reads 2.7 TB/s on the same H100: the product is not bound by
# memory. Variants of the Q4_K task (NX_VULKAN_LLM_KQ, one build; the first two give the same
# bits): hw-f16 (the device's f16 conversion for d and dmin instead of the software one),
# pair-scales (both sub-blocks' 6-bit scales without a per-lane branch, floats built from
# bits instead of converted), both, and probe-loads (the task's loads without its arithmetic:
# a wrong result by design, the structure's floor). Then 1B and 8B Q4_K_M-like decode against
# llama.cpp's Vulkan backend on the same files, default vs both, alternating, two rounds.
# Carry .gl, .gpurun/s44c, .bench-carry.
export BIN=${BIN:-.gpurun/s44c}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
for spec in 1b:q4km 8b:q4km; do
  preset=${spec%%:*}; mix=${spec##*:}
  python3 bench/llm/gen_model.py "/tmp/models/$preset-$mix.gguf" "$preset" "$mix" > /dev/null
done
echo "models at $SECONDS s"
source .gl/env.sh
unpack nx-vulkan
for r in 1 2; do
  for v in default hw-f16 pair-scales hw-f16,pair-scales probe-loads; do
    NX_VULKAN_LLM_KQ=$v timeout 60 /tmp/t/nx-vulkan llm-gemm-bench --rows 1 --matvec-only --swiglu --one-batch --calls 50 --distinct 4 --profile 2>>"$OUT/ours.err" \
      | tag "\"variant\":\"$v\",\"round\":$r" >> "$OUT/mv.jsonl"
  done
done
python3 - "$OUT/mv.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "profile" in j:
        if "llm matvec" in j["profile"]:
            print(j["round"], j["variant"], "device", round(j["mean_us"], 2), j["profile"][11:60])
    else:
        print(j["round"], j["variant"], j.get("n"), j.get("k"), j.get("kernel"), "wall", j.get("median_us"), j.get("weight_gb_per_s"))
PY
echo "matvecs at $SECONDS s"
for spec in 1b:q4km 8b:q4km; do
  f=/tmp/models/${spec%%:*}-${spec##*:}.gguf
  timeout 150 python3 bench/llm/llbench.py "$f" 2>"$OUT/llama.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\"" >> "$OUT/llm.jsonl"
  for r in 1 2; do
    for v in default hw-f16,pair-scales; do
      NX_VULKAN_LLM_KQ=$v timeout 120 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" \
        | tag "\"peer\":\"nx_vulkan\",\"spec\":\"$spec\",\"variant\":\"$v\",\"round\":$r" >> "$OUT/llm.jsonl"
    done
  done
done
python3 - "$OUT/llm.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except Exception: continue
    print(j.get("spec"), j.get("peer"), j.get("variant", ""), j.get("round", ""), "tg", round(j.get("tg_tok_s", 0), 1), "pp", round(j.get("pp_tok_s", 0)))
PY
tail -3 "$OUT/ours.err"
echo "all done at $SECONDS s"
