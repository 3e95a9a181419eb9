#!/usr/bin/env bash
# Stop 45, run 4 (one command): Q8_0 blocks read as aligned 32-bit words (Q8_WORDS; run 2: 8B
# Q8_0-like decode 183 tok/s against llama.cpp's 200) and TC 4 as the multi-session default
# (run 2, one run each: aggregate +12-15 % over 8). The kernels' scale test on the GPU; the
# Q8_0 matvec with and without the words (device time, two rounds); 8B Q8_0-like decode
# against llama.cpp on the same file, ours with and without; the 8B Q4_K_M-like file's
# aggregate decode with 8 and 32 sessions at TC 2, 4 and 8. Also the matvec's reduction tree
# with its levels below the subgroup size in registers (SUBGROUP_TREE, the default; the same
# bits, 3 barriers instead of 7) against all in shared memory (NX_VULKAN_LLM_SUBGROUP_TREE=0):
# Q4_K products (14336 x 4096 plain and SwiGLU, 1024 x 4096 as K and V) and 8B decode.
# Carry .gl, .gpurun/s45, .bench-carry.
export BIN=${BIN:-.gpurun/s45}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
for spec in 8b:q8_0 8b:q4km; do
  python3 bench/llm/gen_model.py "/tmp/models/${spec%%:*}-${spec##*:}.gguf" "${spec%%:*}" "${spec##*:}" > /dev/null
done
echo "models at $SECONDS s"
source .gl/env.sh
gpu_test llm_kernels scales_of_every
unpack nx-vulkan
for r in 1 2; do
  for v in 1 0; do
    NX_VULKAN_LLM_Q8_WORDS=$v timeout 40 /tmp/t/nx-vulkan llm-gemm-bench --type Q8_0 --rows 1 --matvec-only --one-batch --calls 50 --distinct 4 --profile 2>>"$OUT/ours.err" \
      | tag "\"variant\":\"words=$v\",\"round\":$r" >> "$OUT/mv.jsonl"
  done
done
python3 - "$OUT/mv.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "profile" in j:
        if "llm matvec" in j["profile"]:
            print(j["round"], j["variant"], "device", round(j["mean_us"], 2), j["profile"][11:30])
    else:
        print(j["round"], j["variant"], j.get("n"), j.get("k"), "wall", j.get("median_us"), j.get("weight_gb_per_s"))
PY
for r in 1 2; do
  for v in 1 0; do
    NX_VULKAN_LLM_SUBGROUP_TREE=$v timeout 40 /tmp/t/nx-vulkan llm-gemm-bench --rows 1 --shapes 14336x4096,1024x4096 --swiglu --matvec-only --one-batch --calls 50 --distinct 4 --profile 2>>"$OUT/ours.err" \
      | tag "\"variant\":\"tree=$v\",\"round\":$r" >> "$OUT/tree.jsonl"
  done
done
python3 - "$OUT/tree.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "profile" not in j:
        print(j["round"], j["variant"], j.get("n"), j.get("k"), j.get("kernel"), "wall", j.get("median_us"), j.get("weight_gb_per_s"))
PY
echo "matvec at $SECONDS s"
f=/tmp/models/8b-q8_0.gguf
timeout 60 python3 bench/llm/llbench.py "$f" 2>>"$OUT/llama.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"8b:q8_0\"" >> "$OUT/llm.jsonl"
for v in 1 0; do
  NX_VULKAN_LLM_Q8_WORDS=$v timeout 60 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" \
    | tag "\"peer\":\"nx_vulkan words=$v\",\"spec\":\"8b:q8_0\"" >> "$OUT/llm.jsonl"
done
f=/tmp/models/8b-q4km.gguf
timeout 60 python3 bench/llm/llbench.py "$f" 2>>"$OUT/llama.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"8b:q4km\"" >> "$OUT/llm.jsonl"
for v in 1 0 1 0; do
  NX_VULKAN_LLM_SUBGROUP_TREE=$v timeout 60 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" \
    | tag "\"peer\":\"nx_vulkan tree=$v\",\"spec\":\"8b:q4km\"" >> "$OUT/llm.jsonl"
done
python3 - "$OUT/llm.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except Exception: continue
    print(j.get("spec"), j.get("peer"), "tg", round(j.get("tg_tok_s", 0), 1), j.get("tg_runs"), "pp", round(j.get("pp_tok_s", 0)), "roofline@copy", round(j.get("roofline_tok_s_at_copy", 0)))
PY
echo "decode at $SECONDS s"
for tc in 4 8 2; do
  [ $SECONDS -gt 270 ] && break
  NX_VULKAN_LLM_TC=$tc timeout 60 /tmp/t/nx-vulkan bench --model /tmp/models/8b-q4km.gguf --pp 32 --tg 64 --runs 1 --sessions 8,32 2>>"$OUT/ours.err" \
    | tag "\"tc\":$tc" >> "$OUT/sessions.jsonl"
done
python3 - "$OUT/sessions.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except Exception: continue
    print("tc", j.get("tc"), "aggregate", j.get("aggregate_tok_s"), "tg", round(j.get("tg_tok_s", 0), 1))
PY
tail -3 "$OUT/ours.err"
echo "all done at $SECONDS s"
