"""The peer for `nx-vulkan gemm`: the same GEMMs through PyTorch (cuBLAS) on the same GPU.

Each timed run queues `calls` matmuls back to back and synchronizes once; the median of `reps`
runs after a warm-up, as nx-vulkan measures. f32 is SGEMM (TF32 off).
s8 is int8 x int8 -> int32 through torch._int_mm (no batched form: a batch runs as that many
calls; B column-major, as cuBLASLt's int8 GEMM wants it); its "tflops" are tera-ops. f64 is
DGEMM (cuBLAS, on the FP64 tensor cores where the GPU has them): the peer of nx-vulkan's f64
and exact rows (compare_gemm.py sets exact beside it).
Usage: python3 bench/torch_gemm.py [--types f16,bf16,f32,f64,s8] [--sizes 1:4096:4096:4096,...]
"""
import argparse, json, statistics, time
import torch

p = argparse.ArgumentParser()
p.add_argument("--types", default="f16,bf16,f32")
p.add_argument("--sizes", default="1:4096:4096:4096,1:2048:2048:2048,1:1024:1024:1024,32:512:512:512")
p.add_argument("--reps", type=int, default=7)
p.add_argument("--calls", type=int, default=10)
args = p.parse_args()
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
dev = torch.device("cuda")
name = torch.cuda.get_device_name(0)
dtypes = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}
for ty in args.types.split(","):
    for spec in args.sizes.split(","):
        b, m, n, k = (int(x) for x in spec.split(":"))
        if ty == "s8":
            x = torch.randint(-128, 128, (b, m, k), device=dev, dtype=torch.int8)
            y = torch.randint(-128, 128, (b, n, k), device=dev, dtype=torch.int8).transpose(1, 2)

            def run():
                for _ in range(args.calls):
                    for z in range(b):
                        torch._int_mm(x[z], y[z])
                torch.cuda.synchronize()
        else:
            x = torch.randn(b, m, k, device=dev).to(dtypes[ty])
            y = torch.randn(b, k, n, device=dev).to(dtypes[ty])

            def run():
                for _ in range(args.calls):
                    torch.bmm(x, y) if b > 1 else torch.mm(x[0], y[0])
                torch.cuda.synchronize()

        # at least 0.3 s of warm-up, as nx-vulkan gemm (the GPU leaves its idle clocks)
        w0 = time.perf_counter()
        while time.perf_counter() - w0 < 0.3:
            run()
        times = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            run()
            times.append((time.perf_counter() - t0) / args.calls)
        s = statistics.median(times)
        print(json.dumps({"bench": "gemm", "peer": "torch", "type": ty, "batch": b, "m": m, "n": n, "k": k,
                          "median_ms": s * 1e3, "tflops": 2 * b * m * n * k / s / 1e12, "device": name,
                          "reps": args.reps, "calls": args.calls, "torch": torch.__version__}))
