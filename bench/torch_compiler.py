"""Peers for bench/compiler_bench.exs on the same GPU (JSON lines on stdout): PyTorch eager and
torch.compile for the 10-op chain, softmax and layernorm; the MLP training step in PyTorch eager
and in JAX jit. Same timing as the Elixir side: latency = one call then synchronize (median of
--reps), throughput = 20 calls then synchronize, divided by 20."""
import argparse, json, time

import torch

p = argparse.ArgumentParser()
p.add_argument("--reps", type=int, default=20)
args = p.parse_args()
dev = "cuda"


def median(xs):
    return sorted(xs)[len(xs) // 2]


def timed(fn, sync, reps):
    for _ in range(3):
        fn()
    sync()
    lat = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        lat.append((time.perf_counter() - t) * 1e6)
    thr = []
    for _ in range(max(reps // 4, 3)):
        t = time.perf_counter()
        for _ in range(20):
            fn()
        sync()
        thr.append((time.perf_counter() - t) * 1e6 / 20)
    return median(lat), median(thr)


def report(case, impl, fn, sync=torch.cuda.synchronize):
    lat, thr = timed(fn, sync, args.reps)
    print(json.dumps({"case": case, "impl": impl, "latency_us": round(lat, 1), "throughput_us": round(thr, 1)}), flush=True)


def chain10(x, y):
    v = x * 2.0 + y
    v = torch.tanh(v) - x
    v = torch.maximum(torch.abs(v), y)
    v = -(torch.exp(v) / 3.0)
    return torch.minimum(v, x)


def softmax(x):
    return torch.softmax(x, dim=-1)


def layernorm(x, g, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, 1e-5)


g = torch.Generator(device=dev).manual_seed(0)
x = torch.rand(4096, 4096, device=dev, generator=g) * 2 - 1
y = torch.rand(4096, 4096, device=dev, generator=g) * 2 - 1
s = torch.rand(4096, 1024, device=dev, generator=g) * 8 - 4
gm = torch.rand(1024, device=dev, generator=g) + 0.5
bt = torch.rand(1024, device=dev, generator=g) - 0.5

for case, fn, a in [("chain10_16M", chain10, (x, y)), ("softmax_4096x1024", softmax, (s,)), ("layernorm_4096x1024", layernorm, (s, gm, bt))]:
    report(case, "torch_eager", lambda: fn(*a))
    try:
        c = torch.compile(fn)
        report(case, "torch_compile", lambda: c(*a))
    except Exception as e:  # no triton, etc.: say so
        print(json.dumps({"case": case, "impl": "torch_compile", "error": str(e)[:200]}), flush=True)

# MLP step: 784-512-10, batch 128, softmax cross-entropy, SGD lr 0.01
w1 = (torch.randn(784, 512, device=dev, generator=g) * 0.05).requires_grad_()
b1 = torch.zeros(512, device=dev, requires_grad=True)
w2 = (torch.randn(512, 10, device=dev, generator=g) * 0.05).requires_grad_()
b2 = torch.zeros(10, device=dev, requires_grad=True)
xb = torch.rand(128, 784, device=dev, generator=g)
labels = torch.nn.functional.one_hot(torch.arange(128, device=dev) % 10, 10).float()


def torch_step():
    h = torch.relu(xb @ w1 + b1)
    logits = h @ w2 + b2
    loss = -(labels * torch.log_softmax(logits, -1)).sum(-1).mean()
    gs = torch.autograd.grad(loss, (w1, b1, w2, b2))
    with torch.no_grad():
        return tuple(p - 0.01 * gp for p, gp in zip((w1, b1, w2, b2), gs))


report("mlp_step_784_512_10_b128", "torch_eager", torch_step)

try:
    import jax, jax.numpy as jnp

    def jloss(params, x, lab):
        w1, b1, w2, b2 = params
        h = jnp.maximum(x @ w1 + b1, 0)
        logits = h @ w2 + b2
        return -(lab * jax.nn.log_softmax(logits, -1)).sum(-1).mean()

    @jax.jit
    def jstep(params, x, lab):
        gs = jax.grad(jloss)(params, x, lab)
        return tuple(p - 0.01 * gp for p, gp in zip(params, gs))

    params = tuple(jnp.asarray(t.detach().cpu().numpy()) for t in (w1, b1, w2, b2))
    jx, jl = jnp.asarray(xb.cpu().numpy()), jnp.asarray(labels.cpu().numpy())
    holder = {}

    def run():
        holder["r"] = jstep(params, jx, jl)

    report("mlp_step_784_512_10_b128", "jax_jit", run, sync=lambda: jax.block_until_ready(holder["r"]))
except Exception as e:
    print(json.dumps({"case": "mlp_step_784_512_10_b128", "impl": "jax_jit", "error": str(e)[:200]}), flush=True)
