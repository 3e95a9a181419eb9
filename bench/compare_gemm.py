"""Sets `nx-vulkan gemm` beside bench/torch_gemm.py (same GPU, same run): a Markdown table.
split-f32 rows are set beside PyTorch's f32 (cuBLAS FP32, the speed they are measured against),
exact rows (Nx.dot's exact f32 policy: an f64 sum) beside PyTorch's f64 (DGEMM)."""
import json, sys

def rows(path):
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            yield json.loads(line)

key = lambda r: (r["type"], r["batch"], r["m"], r["n"], r["k"])
peer = {key(r): r for r in rows(sys.argv[2])}
print("| type | batch×m×n×k | nx_vulkan TFLOP/s | PyTorch TFLOP/s | ratio | kernel |")
print("|---|---|---|---|---|---|")
for r in rows(sys.argv[1]):
    like = {"split-f32": "f32", "exact": "f64"}.get(r["type"], r["type"])
    p = peer.get(key(dict(r, type=like)))
    t = p["tflops"] if p else float("nan")
    forced = " (forced)" if r.get("forced") else ""
    build = f" [{r['build']}]" if r.get("build") else ""
    print(f"| {r['type']} | {r['batch']}×{r['m']}×{r['n']}×{r['k']} | {r['tflops']:.1f} | {t:.1f} | {r['tflops'] / t:.2f}× | {r['kernel']}{forced}{build} |")
