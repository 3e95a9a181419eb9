"""Op rows of several builds or switch settings beside PyTorch eager, one line per row.

Usage: python3 bench/compare_op_variants.py ours.jsonl torch.jsonl LABEL[,LABEL...] [OP,...]
ours.jsonl holds `nx-vulkan bench --ops` lines tagged with the LABEL fields (the run scripts'
sed adds "build"/"wide" and "round"); OPs (default: the elementwise rows) pick the rows. The
exact f32 dot and the conv sum in f64, so PyTorch's fp64 GEMM / conv is their peer.
Ratio = PyTorch's time / ours (higher is better for us).
"""
import json, sys

ours, torch_path, labels = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
ops = sys.argv[4].split(",") if len(sys.argv) > 4 else ["exp", "log", "tanh", "sigmoid", "erf", "add", "sum"]
PEER = {"dot_exact": "dot_f64", "conv2d": "conv2d_f64"}
torch = {}
for line in open(torch_path):
    if line.startswith("{"):
        j = json.loads(line)
        torch[(j["bench"], j["size"])] = j["median_us"]
for line in open(ours):
    if not line.startswith("{"):
        continue
    j = json.loads(line)
    if j["bench"] in ops:
        t = torch.get((PEER.get(j["bench"], j["bench"]), j["size"]))
        tags = " ".join(str(j.get(l)) for l in labels)
        print(tags, j["bench"], j["size"], j["median_us"], "torch", t, "ratio", round(t / j["median_us"], 2) if t else "")
