"""Sets nx-vulkan's bench results beside the peer's from the same run, as a Markdown table."""
import json, sys

ours = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
peer = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
key = lambda r: (r["bench"], r.get("n"))
peer_by = {key(r): r for r in peer}
print("| measurement | nx_vulkan | peer (torch) | ratio (higher is better for us) |")
print("|---|---|---|---|")
for r in ours:
    p = peer_by.get(key(r))
    if not p:
        continue
    if r["bench"] == "add_f32":
        print(f"| add f32, {r['elements']} elements (GB/s) | {r['gb_per_s']:.0f} | {p['gb_per_s']:.0f} | {r['gb_per_s'] / p['gb_per_s']:.2f}x |")
    elif r["bench"] == "sgemm":
        print(f"| SGEMM {r['n']} FP32 (TFLOP/s) | {r['tflops']:.2f} | {p['tflops']:.2f} | {r['tflops'] / p['tflops']:.2f}x |")
    elif r["bench"] == "op_latency":
        print(f"| 1-element op, submit + wait (µs, median) | {r['median_us']:.1f} | {p['median_us']:.1f} | {p['median_us'] / r['median_us']:.2f}x |")
