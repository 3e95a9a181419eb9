"""PyTorch's FP32 (cuBLAS, TF32 off) and bf16 GEMM errors on the inputs of the split-f32 error
table (tests/split_f32.rs `error_table`: the same xorshift generator and seeds), against an f64
reference. JSON lines with the same metrics: the worst |c - ref| / sum|ab| over the outputs and
the relative Frobenius error. Usage: python3 bench/split_f32_errors.py
"""
import json
import numpy as np
import torch

M64 = (1 << 64) - 1


def data(n, seed):
    s = ((seed * 0x9E3779B97F4A7C15) & M64) | 1
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        s ^= (s << 13) & M64
        s ^= s >> 7
        s ^= (s << 17) & M64
        out[i] = (s >> 11) / float(1 << 53) * 4.0 - 2.0
    return out.astype(np.float32)


torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
dev = torch.device("cuda")
for m, n, k, sa, sb in [(256, 256, 4096, 101, 102), (1024, 1024, 1024, 103, 104)]:
    a = torch.from_numpy(data(m * k, sa).reshape(m, k))
    b = torch.from_numpy(data(k * n, sb).reshape(k, n))
    ref = a.double() @ b.double()
    mag = a.double().abs() @ b.double().abs()
    ga, gb = a.to(dev), b.to(dev)
    for name, c in [("torch-fp32", (ga @ gb).cpu().double()), ("torch-bf16", (ga.bfloat16() @ gb.bfloat16()).float().cpu().double())]:
        e = c - ref
        print(json.dumps({"case": f"{m}x{n}x{k}", "seeds": [sa, sb], "impl": name,
                          "max_err_of_sum_abs": float((e.abs() / mag).max()),
                          "rel_fro": float(e.norm() / ref.norm()), "device": torch.cuda.get_device_name(0),
                          "torch": torch.__version__}))
