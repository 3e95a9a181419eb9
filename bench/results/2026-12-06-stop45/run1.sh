#!/usr/bin/env bash
# Stop 45, run 1 (one command): the committed f16_exact (the device's f16 conversion with the
# rare classes built from bits and picked by selects, de1e602) on the GPU. First the kernels'
# tests (tests/llm_kernels.rs, fresh at HEAD; then the same test built with f16_exact = the
# bare device conversion, to learn whether this device's conversion is exact for subnormal,
# zero, Inf and NaN scales), then 1B and 8B Q4_K_M-like decode against llama.cpp's Vulkan
# backend on the same random-weight files: HEAD vs the bare-conversion build, alternating,
# two rounds on 8B, and once with the f16 prefill GEMM. First of all, the driver's own statistics of the decode products and the
# tensor-core GEMMs (NX_VULKAN_KERNEL_STATS=1: registers, shared memory, ... per kernel; what
# holds their occupancy has so far been guessed from the source); last, with the time left, the
# matvec's rows-per-lane-group and lanes knobs against those statistics, and TASK_PAIRS (two
# tasks per loop step: the second's loads before the first's arithmetic; the same bits).
# Carry .gl, .gpurun/s45, .bench-carry.
export BIN=${BIN:-.gpurun/s45}
source bench/results/2026-12-06-stop43/common.sh
mkdir -p /tmp/py /tmp/models
tar -xJf .bench-carry/cyllama-trim.tar.xz -C /tmp/py
for w in .bench-carry/*.whl; do python3 -m zipfile -e "$w" /tmp/py; done
export PYTHONPATH=/tmp/py
(source .gl/env.sh; unpack nx-vulkan
 export NX_VULKAN_KERNEL_STATS=1
 for ty in Q4_K Q6_K Q8_0; do
   timeout 60 /tmp/t/nx-vulkan llm-gemm-bench --type $ty --rows 1,8 --matvec-only --swiglu --norm --shapes 4096x4096 --reps 1 --calls 1 > /dev/null 2>> "$OUT/kstats.txt"
 done
 timeout 60 /tmp/t/nx-vulkan llm-gemm-bench --rows 512 --swiglu --shapes 4096x4096 --reps 1 --calls 1 > /dev/null 2>> "$OUT/kstats.txt"
 timeout 60 /tmp/t/nx-vulkan gemm --types f16,s8 --sizes 1:1024:1024:1024 --coopmat-all > /dev/null 2>> "$OUT/kstats.txt"
 timeout 60 /tmp/t/nx-vulkan gemm --types split-f32 --sizes 1:1024:1024:1024 > /dev/null 2>> "$OUT/kstats.txt"
 python3 - "$OUT/kstats.txt" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith('{"kernel_stats"'):
        if "statistics" in l: print(l.strip()[:300])
        continue
    j = json.loads(l)
    for e in j["executables"]:
        print(j["kernel_stats"][:150], "|", e["subgroup_size"], "|", " ".join(f"{k}={v}" for k, v in e["stats"].items())[:400])
PY
 echo "stats at $SECONDS s"
  for v in "NX_VULKAN_LLM_ROWS=2" "NX_VULKAN_LLM_TASK_PAIRS=1" "NX_VULKAN_LLM_ROWS=4" "NX_VULKAN_LLM_ROWS=1" "NX_VULKAN_LLM_NT=32" "NX_VULKAN_LLM_NT=32 NX_VULKAN_LLM_TASK_PAIRS=1"; do
    env $v NX_VULKAN_KERNEL_STATS=1 timeout 40 /tmp/t/nx-vulkan llm-gemm-bench --rows 1 --matvec-only --swiglu --norm --one-batch --calls 50 --distinct 4 --profile 2>>"$OUT/sweep.err" \
      | tag "\"variant\":\"$v\"" >> "$OUT/mv.jsonl"
  done
  python3 - "$OUT/mv.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "profile" in j:
        if "llm matvec" in j["profile"]:
            k = j["profile"]
            print(j["variant"], "device", round(j["mean_us"], 2), k[11:17], "SWIGLU" if "SWIGLU" in k else "-", "NORM" if "NORM" in k else "-", "PAIRS" if "TASK_PAIRS" in k else "-", k[k.find("NT"):k.find("NT")+30])
    else:
        print(j["variant"], j.get("n"), j.get("k"), j.get("kernel"), "wall", j.get("median_us"), j.get("weight_gb_per_s"))
PY
  grep "\"kernel_stats\"" "$OUT/sweep.err" | cut -c1-300 | head -16
 echo "sweep at $SECONDS s")
SPECS="1b:q4km 8b:q4km"
for spec in $SPECS; do
  python3 bench/llm/gen_model.py "/tmp/models/${spec%%:*}-${spec##*:}.gguf" "${spec%%:*}" "${spec##*:}" > /dev/null
done
echo "models at $SECONDS s"
source .gl/env.sh
gpu_test llm_kernels
gpu_test llm_kernels_bare
grep -E "^test " "$OUT/test_llm_kernels_bare.txt"
unpack nx-vulkan; unpack nx-vulkan-bare
for spec in $SPECS; do
  f=/tmp/models/${spec%%:*}-${spec##*:}.gguf
  timeout 120 python3 bench/llm/llbench.py "$f" 2>>"$OUT/llama.log" | tag "\"peer\":\"llama.cpp-vulkan\",\"spec\":\"$spec\"" >> "$OUT/llm.jsonl"
  rounds="1"; [ "$spec" = 8b:q4km ] && rounds="1 2"
  for r in $rounds; do
    for b in nx-vulkan nx-vulkan-bare; do
      timeout 120 /tmp/t/$b bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" \
        | tag "\"peer\":\"$b\",\"spec\":\"$spec\",\"round\":$r" >> "$OUT/llm.jsonl"
    done
  done
  NX_VULKAN_LLM_GEMM_PRECISION=f16 timeout 120 /tmp/t/nx-vulkan bench --model "$f" --pp 512 --tg 128 --runs 3 --sessions 0 2>>"$OUT/ours.err" \
    | tag "\"peer\":\"nx-vulkan-f16-prefill\",\"spec\":\"$spec\"" >> "$OUT/llm.jsonl"
  echo "$spec at $SECONDS s"
done
python3 - "$OUT/llm.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except Exception: continue
    print(j.get("spec"), j.get("peer"), j.get("round", ""), "tg", round(j.get("tg_tok_s", 0), 1), "pp", round(j.get("pp_tok_s", 0)), "roofline@copy", round(j.get("roofline_tok_s_at_copy", 0)))
PY
tail -3 "$OUT/ours.err"
timeout 60 /tmp/t/nx-vulkan bench --model /tmp/models/8b-q4km.gguf --pp 16 --tg 64 --runs 1 --sessions 0 --profile > "$OUT/profile8b.jsonl" 2>>"$OUT/ours.err"
python3 - "$OUT/profile8b.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"profile"')]
tot = sum(r["device_us"] for r in rows) or 1
for r in sorted(rows, key=lambda r: -r["device_us"])[:14]:
    print(f'{100*r["device_us"]/tot:5.1f}% {r["runs"]:6d} x {r["mean_us"]:8.2f} us  {r["profile"][:110]}')
PY
echo "profile at $SECONDS s"
echo "all done at $SECONDS s"
