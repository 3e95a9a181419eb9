"""Prints the matvec/GEMM micro-bench lines (nx-vulkan llm-gemm-bench JSON) as a short table."""
import json
import sys

for path in sys.argv[1:]:
    for line in open(path):
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "kernel" not in r:
            continue
        print(r.get("variant", "-"), r["type"], r["kernel"], f'{r["n"]}x{r["k"]}', r["rows"], r["median_us"], r["weight_gb_per_s"], r.get("max_abs_diff_vs_matvec", ""))
