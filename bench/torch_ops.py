"""The PyTorch-eager side of the op-family table (`nx-vulkan bench --ops`, `bench/ops_bench.exs`).

Same work, same names, one JSON object per measurement: {"bench", "size", "median_us", "peer"}.
Every timed call ends with torch.cuda.synchronize(), as ours end with a wait for the device.
Usage: python3 bench/torch_ops.py [--sizes 1024,1048576,16777216] [--dots 1024,4096] [--reps 50]
"""
import argparse, json, statistics, time
import torch

p = argparse.ArgumentParser()
p.add_argument("--sizes", default=f"{1 << 10},{1 << 20},{1 << 24}")
p.add_argument("--dots", default="1024,4096")
p.add_argument("--reps", type=int, default=50)
args = p.parse_args()
dev = torch.device("cuda")
name = torch.cuda.get_device_name(0)
torch.backends.cuda.matmul.allow_tf32 = False  # FP32 means FP32


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


def emit(bench, size, secs, reps, **extra):
    print(json.dumps({"bench": bench, "size": size, "median_us": secs * 1e6, "reps": reps, "peer": "torch",
                      "device": name, **extra}), flush=True)


def reps_for(n):
    return min(args.reps, 20) if n >= 1 << 24 else args.reps


tiny = torch.zeros(4, device=dev)
for _ in range(100):
    torch.add(tiny, tiny)
torch.cuda.synchronize()
enq = []
for i in range(2000):
    t0 = time.perf_counter()
    torch.add(tiny, tiny)
    enq.append(time.perf_counter() - t0)
    if i % 100 == 99:
        torch.cuda.synchronize()
emit("tiny_add_enqueue", 4, statistics.median(enq), 2000)
emit("tiny_add_sync", 4, timed(lambda: torch.add(tiny, tiny), 2000), 2000)
emit("tiny_add_readback", 4, timed(lambda: torch.add(tiny, tiny).cpu(), 2000), 2000)

for n in [int(s) for s in args.sizes.split(",") if s]:
    r = reps_for(n)
    a = torch.arange(n, dtype=torch.float32, device=dev)
    x = torch.sin(a)
    emit("add", n, timed(lambda: torch.add(x, a), r), r)
    emit("exp", n, timed(lambda: torch.exp(x), r), r)
    emit("tanh", n, timed(lambda: torch.tanh(x), r), r)
    emit("sigmoid", n, timed(lambda: torch.sigmoid(x), r), r)
    emit("erf", n, timed(lambda: torch.erf(x), r), r)
    emit("log", n, timed(lambda: torch.log(a), r), r)
    emit("sum", n, timed(lambda: torch.sum(x), r), r)
    emit("argmax", n, timed(lambda: torch.argmax(x), r), r)
    emit("cumsum", n, timed(lambda: torch.cumsum(x, 0), r), r)
    if n <= 1 << 20:
        emit("sort", n, timed(lambda: torch.sort(x, stable=True), r), r)
    if n >= 4096:
        rows = n // 64
        table = x.reshape(rows, 64)
        idx = (torch.arange(rows, device=dev) * 7919) % rows
        emit("gather", n, timed(lambda: table[idx], r), r)
    if n >= 1024:
        m = x.reshape(n // 1024, 1024)

        def softmax_eager():
            mx = torch.amax(m, 1, keepdim=True)
            e = torch.exp(m - mx)
            return e / torch.sum(e, 1, keepdim=True)

        emit("softmax_eager", n, timed(softmax_eager, r), r)
        emit("softmax_fused", n, timed(lambda: torch.softmax(m, 1), r), r)
    host = torch.ones(n, dtype=torch.float32)
    emit("upload", n, timed(lambda: host.to(dev), r), r)
    emit("download", n, timed(lambda: x.cpu(), r), r)
    pinned = torch.empty(n, dtype=torch.float32).pin_memory()
    emit("download_pinned", n, timed(lambda: pinned.copy_(x), r), r)
    del a, x, host, pinned

for d in [int(s) for s in args.dots.split(",") if s]:
    r = min(args.reps, 10)
    a = torch.sin(torch.arange(d * d, dtype=torch.float32, device=dev).reshape(d, d))
    emit("dot_f32acc", d, timed(lambda: torch.mm(a, a), r), r)
    a64 = a.double()
    emit("dot_f64", d, timed(lambda: torch.mm(a64, a64), r), r)

inp = torch.sin(torch.arange(8 * 64 * 56 * 56, dtype=torch.float32, device=dev).reshape(8, 64, 56, 56))
ker = torch.cos(torch.arange(64 * 64 * 9, dtype=torch.float32, device=dev).reshape(64, 64, 3, 3))
torch.backends.cudnn.allow_tf32 = False
emit("conv2d", 8 * 64 * 56 * 56, timed(lambda: torch.nn.functional.conv2d(inp, ker, padding=1), 10), 10)
# the f64 conv (cuDNN's double path): the peer of our f64-summed conv, as dot_f64 is the exact dot's
inp64, ker64 = inp.double(), ker.double()
emit("conv2d_f64", 8 * 64 * 56 * 56, timed(lambda: torch.nn.functional.conv2d(inp64, ker64, padding=1), 10), 10)
sig = torch.sin(torch.arange(256 * 4096, dtype=torch.float32, device=dev).reshape(256, 4096)).to(torch.complex64)
emit("fft", 256 * 4096, timed(lambda: torch.fft.fft(sig, dim=1), 10), 10)
