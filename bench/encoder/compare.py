"""Compares embeddings: a reference .bin (little-endian f32 [n, dims], torch_encoder.py
--reference) with `nx-vulkan encode` JSON lines (same texts, same order). Prints one JSON line:
max/mean abs difference, min cosine, and whether every row is within --tolerance.

  python bench/encoder/compare.py REF.bin OURS.jsonl [--tolerance 1e-4] [--label fp32]
"""
import argparse
import array
import json
import math


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("ours")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    ours = [json.loads(l) for l in open(args.ours, encoding="utf-8") if l.strip()]
    vals = array.array("f")
    with open(args.reference, "rb") as f:
        vals.frombytes(f.read())
    dims = len(ours[0]["embedding"])
    n = len(vals) // dims
    if n != len(ours):
        raise SystemExit(f"reference has {n} rows, ours {len(ours)}")
    worst, total, count, min_cos, over = 0.0, 0.0, 0, 1.0, 0
    for i, row in enumerate(ours):
        a = row["embedding"]
        b = vals[i * dims:(i + 1) * dims]
        diff = max(abs(x - y) for x, y in zip(a, b))
        worst = max(worst, diff)
        total += sum(abs(x - y) for x, y in zip(a, b))
        count += dims
        na = math.sqrt(sum(x * x for x in a)) or 1.0
        nb = math.sqrt(sum(y * y for y in b)) or 1.0
        min_cos = min(min_cos, sum(x * y for x, y in zip(a, b)) / (na * nb))
        over += diff > args.tolerance
    print(json.dumps({"bench": "compare", "label": args.label, "device": ours[0].get("device"),
                      "precision": ours[0].get("precision"), "n": n, "dims": dims,
                      "max_abs": worst, "mean_abs": total / count, "min_cosine": min_cos,
                      "tolerance": args.tolerance, "rows_over_tolerance": over,
                      "ok": over == 0}))


if __name__ == "__main__":
    main()
