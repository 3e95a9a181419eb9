"""How far SmolLM2-135M-Instruct's logits move with opt-in int8 activations, in a host model of
the mode: the basis of SMOLLM2_INT8_TOLERANCE in native/engine/tests/llm.rs. Prints the largest
difference from the exact float64 logits (smollm2-logits0.f32) at the last prompt position, for
the model in float64 and with the activations rounded to f32 before each quantization (as the
device holds them): the mode is chaotic over 30 layers, so that rounding alone moves the result
about as far as the mode does. Writes nothing.

  python3 test/llm/int8_spread.py "$(scripts/fetch-smollm2.sh)"

The model of the int8 mode (native/engine/src/llm/kernels/llm_qdot.glsl) in float64: before every
matrix product, each row of the activations is cut into groups of 32 values (16 for Q6_K; this
model has none) and each group becomes dx·round(x / dx), dx = max|x| / 127 (round half to even,
as the device's fma onto 1.5·2^23); the weights' d·q part meets the quantized activations, and
Q4_1's m part the exact ones. Everything else is test/llm/reference.py's float64 forward.
Needs numpy and gguf.
"""

import json
import os
import sys

import numpy as np
import gguf

sys.dont_write_bytecode = True  # no __pycache__ in the repo
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PRODUCTS = [("wq", "attn_q"), ("wk", "attn_k"), ("wv", "attn_v"), ("wo", "attn_output"),
            ("gate", "ffn_gate"), ("up", "ffn_up"), ("down", "ffn_down")]


def quant_part(t):
    """The weight with its offset term zeroed (Q4_1's m: bytes 2..4 of each 20-byte block): the
    part that meets the quantized activations. None: all of it does."""
    if t.tensor_type == gguf.GGMLQuantizationType.Q4_1:
        raw = np.array(t.data, copy=True)
        raw.reshape(-1, 20)[:, 2:4] = 0
        return np.asarray(gguf.quants.dequantize(raw, t.tensor_type), dtype=np.float64).reshape(reference.dequantize_tensor(t).shape)
    if t.tensor_type in (gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0):
        return None
    raise ValueError(f"{t.name}: {t.tensor_type.name} is not modelled here")


def q8(v, group=32, f32=False):
    if f32:
        v = v.astype(np.float32).astype(np.float64)
    s = v.shape
    v = v.reshape(-1, group)
    amax = np.abs(v).max(axis=1, keepdims=True)
    dx = amax / 127.0
    xq = np.round(v / np.where(amax > 0, dx, 1.0)) * (amax > 0)  # np.round: half to even
    return (xq * dx).reshape(s)


def last_row_logits(m, wq, tokens, f32):
    def product(h, w, part):
        return q8(h, f32=f32) @ w.T if part is None else q8(h, f32=f32) @ part.T + h @ (w - part).T

    T = len(tokens)
    nh, nkv, hd = m.n_head, m.n_head_kv, m.head_dim
    pos = np.arange(T)
    x = m.tok_embd[tokens].copy()
    for l, L in enumerate(m.layers):
        h = reference.rmsnorm(x, m.eps) * L["attn_norm"]
        q = product(h, L["wq"], wq[(l, "wq")]).reshape(T, nh, hd)
        k = product(h, L["wk"], wq[(l, "wk")]).reshape(T, nkv, hd)
        v = product(h, L["wv"], wq[(l, "wv")]).reshape(T, nkv, hd)
        q = reference.rope(q, pos, m.n_rot, m.freq_base, m.neox)
        k = reference.rope(k, pos, m.n_rot, m.freq_base, m.neox)
        mask = pos[None, :] <= pos[:, None]
        attn = np.empty((T, nh, hd))
        for hq in range(nh):
            hk = hq // (nh // nkv)
            sc = np.where(mask, (q[:, hq, :] @ k[:, hk, :].T) / np.sqrt(hd), -np.inf)
            p = np.exp(sc - sc.max(axis=1, keepdims=True))
            attn[:, hq, :] = (p / p.sum(axis=1, keepdims=True)) @ v[:, hk, :]
        x = x + product(attn.reshape(T, nh * hd), L["wo"], wq[(l, "wo")])
        h = reference.rmsnorm(x, m.eps) * L["ffn_norm"]
        glu = reference.silu(product(h, L["gate"], wq[(l, "gate")])) * product(h, L["up"], wq[(l, "up")])
        x = x + product(glu, L["down"], wq[(l, "down")])
    h = reference.rmsnorm(x, m.eps) * m.output_norm
    return product(h[-1:], m.output, None)[0]


def main(path):
    m = reference.Model(path)
    tens = {t.name: t for t in gguf.GGUFReader(path).tensors}
    assert m.tied and tens["token_embd.weight"].tensor_type == gguf.GGMLQuantizationType.Q8_0
    wq = {(l, k): quant_part(tens[f"blk.{l}.{n}.weight"]) for l in range(m.n_layer) for k, n in PRODUCTS}
    g = json.load(open(os.path.join(HERE, "smollm2-reference.json")))["greedy"]
    exact = np.fromfile(os.path.join(HERE, g["logits0_file"]), "<f4").astype(np.float64)
    tokens = np.asarray(g["prompt_ids"])
    f64 = last_row_logits(m, wq, tokens, f32=False)
    f32 = last_row_logits(m, wq, tokens, f32=True)
    print(f"int8 activations, last prompt row, max |logit difference|: float64 model {np.abs(f64 - exact).max():.2f} "
          f"from exact; f32-rounded model {np.abs(f32 - exact).max():.2f} from exact, {np.abs(f32 - f64).max():.2f} from the float64 model "
          f"(logits reach {np.abs(exact).max():.1f})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
