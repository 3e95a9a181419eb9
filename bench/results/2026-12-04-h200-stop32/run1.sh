#!/usr/bin/env bash
# Stop 32, run 1: the final build of stops 31-32 on the H200 (stop 31's last build was never run
# there). Correctness: the reduce, fused-reduce, encoder-kernel, LLM kernel/attention/GEMM and
# coopmat suites on the GPU. Then the op table's sum/argmax/add/tiny rows from Rust, two rounds,
# PyTorch eager in the same command.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/gbins
tar -xzf .gpubin/bins.tgz -C /tmp/gbins
cd native/engine
for t in reduce fused_reduce encoder_kernels llm_kernels llm_attention llm_gemm coopmat; do
  timeout 150 /tmp/gbins/$t --test-threads 4 > "$OUT/$t-tests.txt" 2>&1
  echo "$t: $(grep 'test result' "$OUT/$t-tests.txt") at $SECONDS s"
  grep -E "FAILED|panicked" "$OUT/$t-tests.txt" | head -5
done
cd ../..
python3 bench/torch_ops.py --sizes 1048576,16777216 --dots "" --reps 50 > "$OUT/torch.jsonl" 2>"$OUT/torch.err"
for rep in 1 2; do
  /tmp/gbins/nx-vulkan bench --ops --sizes 1048576,16777216 --gemm 64 --reps 50 2>>"$OUT/err.log" \
    | grep -E '"bench":"(sum|argmax|add|exp|tiny_add_sync)"' | sed "s/^{/{\"round\":$rep,/" >> "$OUT/rust.jsonl"
done
python3 bench/torch_ops.py --sizes 1048576,16777216 --dots "" --reps 50 > "$OUT/torch2.jsonl" 2>>"$OUT/torch.err"
echo "all done at $SECONDS s"
python3 - "$OUT" <<'PY'
import json,sys,collections
o=sys.argv[1]
t=collections.defaultdict(list); r=collections.defaultdict(list)
for f in ("torch.jsonl","torch2.jsonl"):
    for l in open(f"{o}/{f}"):
        try: j=json.loads(l)
        except Exception: continue
        if "median_us" in j: t[(j["bench"],j.get("size"))].append(j["median_us"])
for l in open(f"{o}/rust.jsonl"):
    j=json.loads(l); r[(j["bench"],j.get("size"))].append(j["median_us"])
for k in sorted(r, key=str):
    tv=t.get(k,[])
    print(k, "nx_vulkan", [round(x,1) for x in r[k]], "torch", [round(x,1) for x in tv],
          "ratio(torch/ours)", [round(min(tv)/x,2) for x in r[k]] if tv else "-")
PY
