"""Sets the op-family results (ours from Rust and from Elixir, PyTorch eager) side by side.

Usage: python3 bench/compare_ops.py rust.jsonl elixir.jsonl torch.jsonl
Ratio = PyTorch's time / ours (higher is better for us; 1.0 = the same speed).
"""
import json, sys


def load(path):
    try:
        return {(r["bench"], r["size"]): r for r in (json.loads(l) for l in open(path) if l.startswith("{"))}
    except FileNotFoundError:
        return {}


rust, elixir, torch = (load(p) for p in sys.argv[1:4])
print("| op | size | Rust µs | Elixir µs | PyTorch µs | ratio Rust | ratio Elixir |")
print("|---|---|---|---|---|---|---|")
keys = list(torch) + [k for k in list(rust) + list(elixir) if k not in torch]
seen = set()
for k in keys:
    if k in seen:
        continue
    seen.add(k)
    t = torch.get(k, {}).get("median_us")
    r = rust.get(k, {}).get("median_us")
    e = elixir.get(k, {}).get("median_us")
    fmt = lambda v: f"{v:.1f}" if v is not None else "–"
    ratio = lambda v: f"{t / v:.2f}×" if v and t else "–"
    print(f"| {k[0]} | {k[1]} | {fmt(r)} | {fmt(e)} | {fmt(t)} | {ratio(r)} | {ratio(e)} |")
