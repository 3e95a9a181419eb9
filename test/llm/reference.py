"""An independent float64 NumPy reference of the decoder forward pass of GGUF llama / qwen2 / qwen3
models, with llama.cpp's semantics (see test/llm/README.md for the exact equations).

Weights are read with gguf.GGUFReader, dequantized with gguf-py (float32, exact: the value each
quantized weight stands for), and cast to float64; everything after that is float64.

Two modes that must agree (to ~1e-12):
  * full recompute: `Model.forward(tokens)` runs all positions at once with a causal mask;
  * incremental decode: `Session.step(token)` runs one position against a KV cache.

Usage as a script (a quick look at a model):
  python3 test/llm/reference.py MODEL.gguf [ID ...]
"""

import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

NEOX_ARCHS = {"qwen2", "qwen3"}  # llama.cpp's LLAMA_ROPE_TYPE_NEOX for these; llama is NORM
SUPPORTED_ARCHS = {"llama", "qwen2", "qwen3"}


def field_value(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def dequantize_tensor(t):
    """The float32 values of a GGUFReader tensor, shape (ne1, ne0) = (out, in) for matrices."""
    data = np.asarray(t.data)
    if t.tensor_type == T.F32:
        out = data.astype(np.float32)
    elif t.tensor_type == T.F16:
        out = data.astype(np.float32)
    else:
        out = gguf.quants.dequantize(data, t.tensor_type)
    shape = tuple(int(d) for d in reversed(t.shape.tolist()))
    return np.asarray(out, dtype=np.float32).reshape(shape)


def rmsnorm(v, eps):
    """v / sqrt(mean(v^2) + eps) over the last axis."""
    return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps)


def rope(x, pos, n_rot, base, neox):
    """Rotary embedding of x: (T, heads, head_dim) at positions pos: (T,).

    theta_i = pos * base^(-2i/n_rot), i in [0, n_rot/2). NORM (llama) rotates the pairs (2i, 2i+1),
    NEOX (qwen2/qwen3) the pairs (i, i + n_rot/2); dimensions >= n_rot are left as they are."""
    half = n_rot // 2
    i = np.arange(half, dtype=np.float64)
    inv = np.power(float(base), -2.0 * i / n_rot)  # (half,)
    theta = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]  # (T, half)
    c = np.cos(theta)[:, None, :]
    s = np.sin(theta)[:, None, :]
    out = x.copy()
    if neox:
        a = x[..., :half]
        b = x[..., half:n_rot]
        out[..., :half] = a * c - b * s
        out[..., half:n_rot] = a * s + b * c
    else:
        a = x[..., 0:n_rot:2]
        b = x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = a * c - b * s
        out[..., 1:n_rot:2] = a * s + b * c
    return out


def silu(z):
    return z / (1.0 + np.exp(-z))


class Model:
    def __init__(self, path):
        r = gguf.GGUFReader(path)
        self.path = str(path)
        arch = field_value(r, "general.architecture")
        if arch not in SUPPORTED_ARCHS:
            raise ValueError(f"unsupported architecture {arch!r}")
        self.arch = arch
        g = lambda k, d=None: field_value(r, f"{arch}.{k}", d)
        self.n_embd = int(g("embedding_length"))
        self.n_layer = int(g("block_count"))
        self.n_ff = int(g("feed_forward_length"))
        self.n_head = int(g("attention.head_count"))
        self.n_head_kv = int(g("attention.head_count_kv", self.n_head))
        self.head_dim = int(g("attention.key_length", self.n_embd // self.n_head))
        self.head_dim_v = int(g("attention.value_length", self.head_dim))
        assert self.head_dim_v == self.head_dim, "value_length != key_length is not supported"
        self.n_rot = int(g("rope.dimension_count", self.head_dim))
        self.freq_base = float(g("rope.freq_base", 10000.0))
        # The file stores float32; its exact value (e.g. 9.999999747378752e-06) is used as is.
        self.eps = float(g("attention.layer_norm_rms_epsilon"))
        self.context_length = int(g("context_length"))
        self.neox = arch in NEOX_ARCHS
        assert g("rope.scaling.type") in (None, "none"), "rope scaling is not supported"

        self.types = {t.name: t.tensor_type for t in r.tensors}
        tens = {t.name: t for t in r.tensors}

        def w(name):
            return dequantize_tensor(tens[name]).astype(np.float64)

        self.tok_embd = w("token_embd.weight")  # (vocab, n_embd)
        self.n_vocab = self.tok_embd.shape[0]
        self.tied = "output.weight" not in tens
        self.output = self.tok_embd if self.tied else w("output.weight")  # (vocab, n_embd)
        self.output_norm = w("output_norm.weight")
        self.layers = []
        for l in range(self.n_layer):
            p = f"blk.{l}."
            L = {
                "attn_norm": w(p + "attn_norm.weight"),
                "wq": w(p + "attn_q.weight"),
                "wk": w(p + "attn_k.weight"),
                "wv": w(p + "attn_v.weight"),
                "wo": w(p + "attn_output.weight"),
                "ffn_norm": w(p + "ffn_norm.weight"),
                "gate": w(p + "ffn_gate.weight"),
                "up": w(p + "ffn_up.weight"),
                "down": w(p + "ffn_down.weight"),
            }
            for opt in ("attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_q_norm.weight", "attn_k_norm.weight"):
                if p + opt in tens:
                    L[opt] = w(p + opt)
            assert L["wq"].shape == (self.n_head * self.head_dim, self.n_embd)
            assert L["wk"].shape == (self.n_head_kv * self.head_dim, self.n_embd)
            assert L["wv"].shape == (self.n_head_kv * self.head_dim, self.n_embd)
            assert L["wo"].shape == (self.n_embd, self.n_head * self.head_dim)
            self.layers.append(L)

    # -- one forward over positions start_pos .. start_pos+T-1 -----------------------------------
    def _forward(self, tokens, start_pos, cache):
        """Logits (T, vocab) for `tokens` at positions start_pos... `cache` is a list (one per layer)
        of [K, V] arrays (S, n_head_kv, head_dim) holding positions 0..start_pos-1; it is extended."""
        tokens = np.asarray(tokens, dtype=np.int64)
        Tn = len(tokens)
        nh, nkv, hd = self.n_head, self.n_head_kv, self.head_dim
        group = nh // nkv
        pos = start_pos + np.arange(Tn)
        x = self.tok_embd[tokens].copy()  # (T, n_embd)
        for l, L in enumerate(self.layers):
            h = rmsnorm(x, self.eps) * L["attn_norm"]
            q = h @ L["wq"].T
            k = h @ L["wk"].T
            v = h @ L["wv"].T
            if "attn_q.bias" in L:
                q = q + L["attn_q.bias"]
            if "attn_k.bias" in L:
                k = k + L["attn_k.bias"]
            if "attn_v.bias" in L:
                v = v + L["attn_v.bias"]
            q = q.reshape(Tn, nh, hd)
            k = k.reshape(Tn, nkv, hd)
            v = v.reshape(Tn, nkv, hd)
            if "attn_q_norm.weight" in L:
                q = rmsnorm(q, self.eps) * L["attn_q_norm.weight"]
            if "attn_k_norm.weight" in L:
                k = rmsnorm(k, self.eps) * L["attn_k_norm.weight"]
            q = rope(q, pos, self.n_rot, self.freq_base, self.neox)
            k = rope(k, pos, self.n_rot, self.freq_base, self.neox)
            if cache is not None:
                K = np.concatenate([cache[l][0], k], axis=0)
                V = np.concatenate([cache[l][1], v], axis=0)
                cache[l][0], cache[l][1] = K, V
            else:
                K, V = k, v
            S = K.shape[0]
            key_pos = np.arange(S)
            mask = key_pos[None, :] <= pos[:, None]  # (T, S) causal
            attn = np.empty((Tn, nh, hd))
            scale = 1.0 / np.sqrt(hd)
            for hq in range(nh):
                hk = hq // group
                sc = (q[:, hq, :] @ K[:, hk, :].T) * scale  # (T, S)
                sc = np.where(mask, sc, -np.inf)
                sc = sc - sc.max(axis=1, keepdims=True)
                p = np.exp(sc)
                p = p / p.sum(axis=1, keepdims=True)
                attn[:, hq, :] = p @ V[:, hk, :]
            x = x + attn.reshape(Tn, nh * hd) @ L["wo"].T
            h = rmsnorm(x, self.eps) * L["ffn_norm"]
            x = x + (silu(h @ L["gate"].T) * (h @ L["up"].T)) @ L["down"].T
        h = rmsnorm(x, self.eps) * self.output_norm
        return h @ self.output.T

    def forward(self, tokens):
        """Full recompute: logits (T, vocab) at every position of `tokens` (positions 0..T-1)."""
        return self._forward(tokens, 0, None)

    def session(self):
        return Session(self)


class Session:
    """Incremental decode with a KV cache, one token at a time."""

    def __init__(self, model):
        self.m = model
        self.cache = [[np.zeros((0, model.n_head_kv, model.head_dim)), np.zeros((0, model.n_head_kv, model.head_dim))]
                      for _ in range(model.n_layer)]
        self.n_past = 0

    def step(self, token):
        logits = self.m._forward([int(token)], self.n_past, self.cache)[0]
        self.n_past += 1
        return logits


def greedy_argmax(logits):
    """The lowest id among the largest logits (numpy's argmax)."""
    return int(np.argmax(logits))


def top2_margin(logits):
    s = np.sort(logits)
    return float(s[-1] - s[-2])


def generate(model, prompt_ids, n_new):
    """Greedy decode with the KV cache. Returns (greedy_ids, logits (len(prompt)+n_new, vocab)):
    row i holds the logits after feeding token i of prompt+greedy_ids, so row len(prompt)-1+k is the
    one that picked greedy_ids[k], and the last row (after the last greedy token) picked nothing."""
    s = model.session()
    rows = [s.step(t) for t in prompt_ids]
    out = []
    for _ in range(n_new):
        nxt = greedy_argmax(rows[-1])
        out.append(nxt)
        rows.append(s.step(nxt))
    return out, np.stack(rows)


if __name__ == "__main__":
    m = Model(sys.argv[1])
    ids = [int(a) for a in sys.argv[2:]] or [1, 2, 3]
    print(m.arch, "layers", m.n_layer, "embd", m.n_embd, "heads", m.n_head, m.n_head_kv, "head_dim", m.head_dim,
          "vocab", m.n_vocab, "tied", m.tied)
    g, lg = generate(m, ids, 8)
    full = m.forward(ids + g)
    print("greedy", g, "kv_vs_recompute", float(np.abs(full - lg).max()))
