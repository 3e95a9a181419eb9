#!/usr/bin/env bash
# Stop 37, run 9: exp from Rust, three builds alternating in one command: be24aa9's (m_exp
# rounded to f32), ac7f7bb's (m_exp_f32, then the node's f32 rounding) and this one (m_exp_f32's
# value kept as it is: already an f32). Carry .gl and .bench-carry/nx-vulkan{,-r,-prev}.xz.
set -uo pipefail
source .gl/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for b in prev r now; do
  f=.bench-carry/nx-vulkan-$b.xz; [ $b = now ] && f=.bench-carry/nx-vulkan.xz
  xz -dc $f > /tmp/nx-vulkan-$b; chmod +x /tmp/nx-vulkan-$b
done
for rep in 1 2 3; do
  for b in prev r now; do
    timeout 60 /tmp/nx-vulkan-$b bench --ops --sizes 1048576,16777216 --gemm 64 --reps 50 2>/dev/null | grep -E '"bench":"(exp|add)"' | sed "s/^{/{\"round\":$rep,\"build\":\"$b\",/" >> "$OUT/exp_abc.jsonl"
  done
done
python3 - "$OUT/exp_abc.jsonl" <<'PY'
import json, sys, collections
rows = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l); rows[(r["bench"], r["size"], r["build"])].append(r["median_us"])
for k in sorted(rows): print(k, rows[k])
PY
# Then, on the same warm H200 (one command, copied from its output into run9/exp_vs_torch.jsonl):
#   for r in 1 2; do python3 bench/torch_ops.py --sizes 1048576,16777216 --dots "" --reps 50 | grep exp/add;
#     /tmp/nv bench --ops --sizes 1048576,16777216 --gemm 64 --reps 50 | grep exp/add; done
