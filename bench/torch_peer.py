"""The peer for `nx-vulkan bench`: the same measurements through PyTorch on the same GPU.

Prints one JSON object per measurement, with the field names nx-vulkan uses.
Usage: python3 bench/torch_peer.py [--elements N] [--gemm 1024,4096] [--reps R]
"""
import argparse, json, statistics, time
import torch

p = argparse.ArgumentParser()
p.add_argument("--elements", type=int, default=256 << 20)
p.add_argument("--gemm", default="1024,4096")
p.add_argument("--reps", type=int, default=20)
args = p.parse_args()
dev = torch.device("cuda")
name = torch.cuda.get_device_name(0)
torch.backends.cuda.matmul.allow_tf32 = False  # SGEMM means FP32, not TF32


def timed(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


n = args.elements
a = torch.arange(n, dtype=torch.float32, device=dev)
b = torch.arange(n, dtype=torch.float32, device=dev)
s = timed(lambda: torch.add(a, b), args.reps)
print(json.dumps({"bench": "add_f32", "peer": "torch", "device": name, "elements": n,
                  "median_ms": s * 1e3, "gb_per_s": n * 12 / s / 1e9, "reps": args.reps}))
del a, b
for m in [int(x) for x in args.gemm.split(",") if x]:
    x = torch.randn(m, m, dtype=torch.float32, device=dev)
    y = torch.randn(m, m, dtype=torch.float32, device=dev)
    s = timed(lambda: torch.mm(x, y), min(args.reps, 10))
    print(json.dumps({"bench": "sgemm", "peer": "torch", "device": name, "n": m, "median_ms": s * 1e3,
                      "tflops": 2 * m ** 3 / s / 1e12, "reps": min(args.reps, 10)}))
one = torch.ones(1, device=dev)
s = timed(lambda: torch.add(one, one), 1000)
print(json.dumps({"bench": "op_latency", "peer": "torch", "device": name, "median_us": s * 1e6, "reps": 1000}))
