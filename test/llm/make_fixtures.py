"""Writes the small random-weight GGUF test models of test/llm/fixtures/ and their float64 reference
outputs (see test/llm/README.md for what each file holds). Deterministic: fixed seeds, fixed order;
running it again rewrites byte-identical files (on the same machine and package versions).

  python3 test/llm/make_fixtures.py            # all fixtures
  python3 test/llm/make_fixtures.py NAME ...   # only these

Needs numpy, gguf (gguf-py) and tokenizers (only to pre-tokenize the merge-training text).
"""

import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, LlamaFileType as F
from tokenizers import pre_tokenizers

sys.dont_write_bytecode = True  # no __pycache__ in the repo
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
QK_K = 256
N_GEN = 32

# ---------------------------------------------------------------------------------------------
# Tokenizer: GPT-2 byte-level BPE. ids 0..255 are the 256 byte characters in bytes_to_unicode()
# order, then the merges learned below (one token per merge, in merge order), then 4 controls.
# ---------------------------------------------------------------------------------------------

CORPUS = """\
The quick brown fox jumps over the lazy dog. The dog sleeps in the sun, and the fox runs into the
woods. In the morning the people of the town open their shops; in the evening they close them and
go home. A model reads the text, one token at a time, and writes the next token. It is the same
thing, again and again: the token, the state, the next token. There is nothing more to it than that,
and there is nothing less. Numbers like 12, 345 and 6789 are written with digits. Code looks like
this: for (int i = 0; i < n; i++) { sum += x[i]; } and def main(): return 0. We are here, you are
there, they're everywhere; I'm sure it's fine, isn't it? She said that the weather would be better
tomorrow, and then the rain started again. Everything that can be tested should be tested.
"""
SPECIALS = ["<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>"]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def learn_merges(n_merges):
    """Plain BPE training on CORPUS, GPT-2 pre-tokenization; ties go to the smallest pair."""
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    words = {}
    for piece, _ in pre.pre_tokenize_str(CORPUS):
        words[piece] = words.get(piece, 0) + 1
    seqs = {w: list(w) for w in words}
    merges = []
    for _ in range(n_merges):
        counts = {}
        for w, c in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + c
        if not counts:
            break
        # deterministic tie-break: highest count, then lexicographically smallest pair
        top = max(counts.values())
        best = min(p for p, c in counts.items() if c == top)
        merges.append(best)
        for w in seqs:
            s = seqs[w]
            out = []
            i = 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    out.append(s[i] + s[i + 1])
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    assert len(merges) == n_merges, "corpus too small for that many merges"
    return merges


def make_vocab(n_vocab):
    n_merges = n_vocab - 256 - len(SPECIALS)
    merges = learn_merges(n_merges)
    tokens = list(bytes_to_unicode().values()) + [a + b for a, b in merges] + SPECIALS
    assert len(tokens) == len(set(tokens)) == n_vocab
    types = [gguf.TokenType.NORMAL] * (n_vocab - len(SPECIALS)) + [gguf.TokenType.CONTROL] * len(SPECIALS)
    return tokens, [f"{a} {b}" for a, b in merges], [int(t) for t in types]


# ---------------------------------------------------------------------------------------------
# Quantization. gguf-py quantizes F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q5_1; the K-quants are packed here by
# a simple (not llama.cpp's optimal) quantizer, so that the weights still look like the float
# matrix they came from. Whatever is written, the reference reads it back with gguf-py's dequantizer.
# ---------------------------------------------------------------------------------------------

def f16r(x):
    """The float32 value of x rounded to f16, and its 2 raw bytes (little-endian)."""
    h = np.asarray(x, dtype=np.float32).astype(np.float16)
    return h.astype(np.float32), h.view(np.uint8)


def safe_div(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b == 0, 0.0, a / np.where(b == 0, 1.0, b))


def pack_scales_k4(sc, m):
    """12 bytes holding 8 six-bit scales and 8 six-bit mins (Q4_K/Q5_K), per block: (n, 8) -> (n, 12)."""
    n = sc.shape[0]
    out = np.zeros((n, 12), dtype=np.uint8)
    for j in range(4):
        out[:, j] = (sc[:, j] & 63) | ((sc[:, j + 4] >> 4) << 6)
        out[:, j + 4] = (m[:, j] & 63) | ((m[:, j + 4] >> 4) << 6)
        out[:, j + 8] = (sc[:, j + 4] & 15) | ((m[:, j + 4] & 15) << 4)
    return out


def quantize_q4k_q5k(x, bits):
    nb = x.size // QK_K
    xb = x.reshape(nb, 8, 32).astype(np.float32)
    levels = (1 << bits) - 1
    mn = np.minimum(xb.min(axis=2), 0.0)
    mx = xb.max(axis=2)
    scale = (mx - mn) / levels
    mins = -mn
    d, d_b = f16r(scale.max(axis=1) / 63)
    dmin, dmin_b = f16r(mins.max(axis=1) / 63)
    sc = np.clip(np.rint(safe_div(scale, d[:, None])), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(safe_div(mins, dmin[:, None])), 0, 63).astype(np.uint8)
    dl = (d[:, None] * sc.astype(np.float32))[:, :, None]
    ml = (dmin[:, None] * m.astype(np.float32))[:, :, None]
    q = np.clip(np.rint(safe_div(xb + ml, dl)), 0, levels).astype(np.uint8).reshape(nb, QK_K)
    # element e: chunk e//64, nibble (e%64)//32, byte chunk*32 + e%32
    q4 = q.reshape(nb, 4, 2, 32) & 15
    qs = (q4[:, :, 0, :] | (q4[:, :, 1, :] << 4)).reshape(nb, 128)
    parts = [d_b.reshape(nb, 2), dmin_b.reshape(nb, 2), pack_scales_k4(sc, m)]
    if bits == 5:
        hb = (q >> 4).reshape(nb, 8, 32)  # element e: bit e//32 of qh[e%32]
        qh = np.zeros((nb, 32), dtype=np.uint8)
        for b in range(8):
            qh |= hb[:, b, :] << b
        parts.append(qh)
    parts.append(qs)
    return np.concatenate(parts, axis=1)


def quantize_q6k(x):
    nb = x.size // QK_K
    xb = x.reshape(nb, 16, 16).astype(np.float32)
    idx = np.abs(xb).argmax(axis=2)[:, :, None]
    scale = np.take_along_axis(xb, idx, axis=2)[:, :, 0] / -32.0
    d, d_b = f16r(np.abs(scale).max(axis=1) / 127)
    sc = np.clip(np.rint(safe_div(scale, d[:, None])), -128, 127).astype(np.int8)
    dl = (d[:, None] * sc.astype(np.float32))[:, :, None]
    q = (np.clip(np.rint(safe_div(xb, dl)), -32, 31) + 32).astype(np.uint8).reshape(nb, QK_K)
    # ql: element e: chunk e//128, nibble (e%128)//64, byte chunk*64 + e%64
    lo = (q & 15).reshape(nb, 2, 2, 64)
    ql = (lo[:, :, 0, :] | (lo[:, :, 1, :] << 4)).reshape(nb, 128)
    # qh: element e: chunk e//128, shift 2*((e%128)//32), byte chunk*32 + e%32
    hi = (q >> 4).reshape(nb, 2, 4, 32)
    qh = (hi[:, :, 0, :] | (hi[:, :, 1, :] << 2) | (hi[:, :, 2, :] << 4) | (hi[:, :, 3, :] << 6)).reshape(nb, 64)
    return np.concatenate([ql, qh, sc.view(np.uint8), d_b.reshape(nb, 2)], axis=1)


def quantize_q2k(x):
    nb = x.size // QK_K
    xb = x.reshape(nb, 16, 16).astype(np.float32)
    mn = np.minimum(xb.min(axis=2), 0.0)
    scale = (xb.max(axis=2) - mn) / 3
    mins = -mn
    d, d_b = f16r(scale.max(axis=1) / 15)
    dmin, dmin_b = f16r(mins.max(axis=1) / 15)
    sc = np.clip(np.rint(safe_div(scale, d[:, None])), 0, 15).astype(np.uint8)
    m = np.clip(np.rint(safe_div(mins, dmin[:, None])), 0, 15).astype(np.uint8)
    dl = (d[:, None] * sc.astype(np.float32))[:, :, None]
    ml = (dmin[:, None] * m.astype(np.float32))[:, :, None]
    q = np.clip(np.rint(safe_div(xb + ml, dl)), 0, 3).astype(np.uint8).reshape(nb, 2, 4, 32)
    # element e: chunk e//128, shift 2*((e%128)//32), byte chunk*32 + e%32
    qs = (q[:, :, 0, :] | (q[:, :, 1, :] << 2) | (q[:, :, 2, :] << 4) | (q[:, :, 3, :] << 6)).reshape(nb, 64)
    return np.concatenate([sc | (m << 4), qs, d_b.reshape(nb, 2), dmin_b.reshape(nb, 2)], axis=1)


def quantize_q3k(x):
    nb = x.size // QK_K
    xb = x.reshape(nb, 16, 16).astype(np.float32)
    idx = np.abs(xb).argmax(axis=2)[:, :, None]
    scale = np.take_along_axis(xb, idx, axis=2)[:, :, 0] / -4.0
    d, d_b = f16r(np.abs(scale).max(axis=1) / 31)
    sc = np.clip(np.rint(safe_div(scale, d[:, None])), -32, 31).astype(np.int32)
    dl = (d[:, None] * sc.astype(np.float32))[:, :, None]
    q = (np.clip(np.rint(safe_div(xb, dl)), -4, 3) + 4).astype(np.uint8).reshape(nb, QK_K)  # 0..7
    lo = (q & 3).reshape(nb, 2, 4, 32)
    qs = (lo[:, :, 0, :] | (lo[:, :, 1, :] << 2) | (lo[:, :, 2, :] << 4) | (lo[:, :, 3, :] << 6)).reshape(nb, 64)
    hb = (q >> 2).reshape(nb, 8, 32)  # element e: bit e//32 of hmask[e%32]
    hmask = np.zeros((nb, 32), dtype=np.uint8)
    for b in range(8):
        hmask |= hb[:, b, :] << b
    s = (sc + 32).astype(np.uint8)  # 16 six-bit values
    scales = np.zeros((nb, 12), dtype=np.uint8)
    for j in range(16):
        if j < 8:
            scales[:, j] |= s[:, j] & 15
        else:
            scales[:, j - 8] |= (s[:, j] & 15) << 4
        scales[:, 8 + j % 4] |= (s[:, j] >> 4) << (2 * (j // 4))
    return np.concatenate([hmask, qs, scales, d_b.reshape(nb, 2)], axis=1)


K_QUANTIZERS = {
    T.Q2_K: quantize_q2k,
    T.Q3_K: quantize_q3k,
    T.Q4_K: lambda x: quantize_q4k_q5k(x, 4),
    T.Q5_K: lambda x: quantize_q4k_q5k(x, 5),
    T.Q6_K: quantize_q6k,
}


def encode_matrix(w, qtype):
    """(array for GGUFWriter.add_tensor, raw_dtype or None, float32 values it stands for)."""
    w = np.ascontiguousarray(w, dtype=np.float32)
    if qtype == T.F32:
        return w, None, w
    if qtype == T.F16:
        h = w.astype(np.float16)
        return h, None, h.astype(np.float32)
    if qtype in K_QUANTIZERS:
        out, inn = w.shape
        raw = K_QUANTIZERS[qtype](w).reshape(out, -1)
    else:
        raw = gguf.quants.quantize(w, qtype)
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    assert raw.shape == (w.shape[0], w.shape[1] // block * size)
    return raw, qtype, gguf.quants.dequantize(raw, qtype)


# ---------------------------------------------------------------------------------------------
# The fixtures
# ---------------------------------------------------------------------------------------------

FILE_TYPE = {
    T.F32: F.ALL_F32, T.F16: F.MOSTLY_F16, T.BF16: F.MOSTLY_BF16, T.Q8_0: F.MOSTLY_Q8_0,
    T.Q4_0: F.MOSTLY_Q4_0, T.Q4_1: F.MOSTLY_Q4_1, T.Q5_0: F.MOSTLY_Q5_0, T.Q5_1: F.MOSTLY_Q5_1,
    T.Q2_K: F.MOSTLY_Q2_K, T.Q3_K: F.MOSTLY_Q3_K_S, T.Q4_K: F.MOSTLY_Q4_K_S, T.Q5_K: F.MOSTLY_Q5_K_S,
    T.Q6_K: F.MOSTLY_Q6_K,
}

LLAMA = dict(arch="llama", n_embd=256, n_layer=2, n_head=4, n_head_kv=2, head_dim=64, n_ff=256, n_vocab=384,
             freq_base=10000.0, eps=1e-5)
LLAMA_SMALL = dict(LLAMA, n_embd=128, n_layer=1, n_head=2, n_head_kv=1, head_dim=64)  # F32/F16/BF16: size
QWEN2 = dict(arch="qwen2", n_embd=256, n_layer=2, n_head=4, n_head_kv=2, head_dim=64, n_ff=256, n_vocab=448,
             freq_base=1000000.0, eps=1e-6)
QWEN3 = dict(arch="qwen3", n_embd=256, n_layer=2, n_head=4, n_head_kv=1, head_dim=128, n_ff=256, n_vocab=384,
             freq_base=1000000.0, eps=1e-6)
QWEN3_SMALL = dict(QWEN3, n_embd=128, n_layer=1, n_head=2, head_dim=128)  # head_dim 128 != 128/2

# name, config, weight type, tied (no output.weight)
FIXTURES = [
    ("llama-f32", LLAMA_SMALL, T.F32, True),
    ("llama-f16", LLAMA_SMALL, T.F16, True),
    ("llama-bf16", LLAMA_SMALL, T.BF16, False),
    ("llama-q8_0", LLAMA, T.Q8_0, True),
    ("llama-q4_0", LLAMA, T.Q4_0, False),
    ("llama-q4_1", LLAMA, T.Q4_1, True),
    ("llama-q5_0", LLAMA, T.Q5_0, True),
    ("llama-q5_1", LLAMA, T.Q5_1, False),
    ("llama-q2_k", LLAMA, T.Q2_K, True),
    ("llama-q3_k", LLAMA, T.Q3_K, True),
    ("llama-q4_k", LLAMA, T.Q4_K, False),
    ("llama-q5_k", LLAMA, T.Q5_K, True),
    ("llama-q6_k", LLAMA, T.Q6_K, False),
    ("qwen2-q8_0", QWEN2, T.Q8_0, True),
    ("qwen2-q4_k", QWEN2, T.Q4_K, True),
    ("qwen3-q6_k", QWEN3, T.Q6_K, True),
    ("qwen3-f16", QWEN3_SMALL, T.F16, True),
]

# Magnitudes. With tied embeddings a random model tends to repeat its last token forever (the
# token's own embedding stays in the residual stream and scores highest against itself); small
# embeddings, std-0.05 matrices and norm gains of 2 (attn/ffn) and 3 (output) make the layers' part
# of the residual dominate, so the greedy continuations are varied and attention sharp (score std ~2).
STD_EMBD = 0.02   # token embedding (and output) rows
STD_W = 0.05      # every other matrix
GAIN_NORM = 2.0   # attn_norm, ffn_norm: GAIN * (1 + 0.1 N(0,1))
GAIN_OUT = 3.0    # output_norm
GAIN_QK = 1.0     # qwen3 attn_q_norm / attn_k_norm
N_PROMPT = 12


def norm_weight(rng, n, gain):
    return (gain * (1.0 + 0.1 * rng.standard_normal(n))).astype(np.float32)


def build(name, cfg, qtype, tied, seed):
    rng = np.random.default_rng(seed)
    arch = cfg["arch"]
    E, L, H, HKV, HD, FF, V = (cfg[k] for k in ("n_embd", "n_layer", "n_head", "n_head_kv", "head_dim", "n_ff",
                                                "n_vocab"))
    mats = []  # (name, float32 (out, in))
    vecs = []  # (name, float32 (n,))
    mats.append(("token_embd.weight", rng.standard_normal((V, E)) * STD_EMBD))
    for l in range(L):
        p = f"blk.{l}."
        vecs.append((p + "attn_norm.weight", norm_weight(rng, E, GAIN_NORM)))
        mats.append((p + "attn_q.weight", rng.standard_normal((H * HD, E)) * STD_W))
        mats.append((p + "attn_k.weight", rng.standard_normal((HKV * HD, E)) * STD_W))
        mats.append((p + "attn_v.weight", rng.standard_normal((HKV * HD, E)) * STD_W))
        if arch == "qwen2":
            vecs.append((p + "attn_q.bias", (rng.standard_normal(H * HD) * 0.1).astype(np.float32)))
            vecs.append((p + "attn_k.bias", (rng.standard_normal(HKV * HD) * 0.1).astype(np.float32)))
            vecs.append((p + "attn_v.bias", (rng.standard_normal(HKV * HD) * 0.05).astype(np.float32)))
        if arch == "qwen3":
            vecs.append((p + "attn_q_norm.weight", norm_weight(rng, HD, GAIN_QK)))
            vecs.append((p + "attn_k_norm.weight", norm_weight(rng, HD, GAIN_QK)))
        mats.append((p + "attn_output.weight", rng.standard_normal((E, H * HD)) * STD_W))
        vecs.append((p + "ffn_norm.weight", norm_weight(rng, E, GAIN_NORM)))
        mats.append((p + "ffn_gate.weight", rng.standard_normal((FF, E)) * STD_W))
        mats.append((p + "ffn_up.weight", rng.standard_normal((FF, E)) * STD_W))
        mats.append((p + "ffn_down.weight", rng.standard_normal((E, FF)) * STD_W))
    vecs.append(("output_norm.weight", norm_weight(rng, E, GAIN_OUT)))
    if not tied:
        mats.append(("output.weight", rng.standard_normal((V, E)) * STD_EMBD))

    path = os.path.join(OUT, name + ".gguf")
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"nx_vulkan test fixture {name}")
    w.add_context_length(256)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(FF)
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    w.add_rope_freq_base(cfg["freq_base"])
    w.add_layer_norm_rms_eps(cfg["eps"])
    w.add_rope_dimension_count(HD)
    if HD * H != E:
        w.add_key_length(HD)
        w.add_value_length(HD)
    w.add_vocab_size(V)
    w.add_file_type(int(FILE_TYPE[qtype]))
    tokens, merges, types = make_vocab(V)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(V - 4)
    w.add_eos_token_id(V - 3)
    w.add_add_bos_token(False)
    # ordered like llama.cpp's converter: token_embd, per block, output_norm, output
    order = {n: i for i, n in enumerate(
        ["token_embd.weight"] + [f"blk.{l}.{s}" for l in range(L) for s in (
            "attn_norm.weight", "attn_q.weight", "attn_q.bias", "attn_k.weight", "attn_k.bias", "attn_v.weight",
            "attn_v.bias", "attn_q_norm.weight", "attn_k_norm.weight", "attn_output.weight", "ffn_norm.weight",
            "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight")] + ["output_norm.weight", "output.weight"])}
    tensors = []
    for n, m in mats:
        arr, raw, _ = encode_matrix(m, qtype)
        tensors.append((n, arr, raw))
    for n, v in vecs:
        tensors.append((n, np.ascontiguousarray(v, dtype=np.float32), None))
    for n, arr, raw in sorted(tensors, key=lambda t: order[t[0]]):
        if raw is None:
            w.add_tensor(n, arr)
        else:
            w.add_tensor(n, arr, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, rng


def reference_outputs(name, path, rng, cfg, qtype, tied):
    m = reference.Model(path)
    assert m.tied == tied and m.arch == cfg["arch"]
    V = m.n_vocab
    prompt = [V - 4] + [int(t) for t in rng.integers(0, V - 4, N_PROMPT - 1)]
    greedy, kv_logits = reference.generate(m, prompt, N_GEN)
    full = m.forward(prompt + greedy)
    kv_diff = float(np.abs(full - kv_logits).max())
    P = len(prompt)
    logits = np.concatenate([full[:P], kv_logits[P:]], axis=0)  # prompt rows: full recompute; decode: KV
    margins = [reference.top2_margin(kv_logits[P - 1 + k]) for k in range(N_GEN)]
    logits_file = name + ".logits.f32"
    logits.astype("<f4").tofile(os.path.join(OUT, logits_file))
    info = {
        "arch": cfg["arch"],
        "weight_type": qtype.name,
        "tied": tied,
        "config": {k: cfg[k] for k in ("n_embd", "n_layer", "n_head", "n_head_kv", "head_dim", "n_ff", "n_vocab",
                                       "freq_base", "eps")},
        "rope_mode": "neox" if m.neox else "norm",
        "prompt_ids": prompt,
        "greedy_ids": greedy,
        "margins": margins,
        "steps_over_1e-2": int(sum(x > 1e-2 for x in margins)),
        "logits_file": logits_file,
        "logits_shape": [P + N_GEN, V],
        "kv_vs_recompute_max_abs": kv_diff,
        "max_abs_logit": float(np.abs(logits).max()),
    }
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    return info


def main(argv):
    os.makedirs(OUT, exist_ok=True)
    wanted = set(argv) if argv else None
    for seed, (name, cfg, qtype, tied) in enumerate(FIXTURES):
        if wanted and name not in wanted:
            continue
        path, rng = build(name, cfg, qtype, tied, 1000 + seed)
        info = reference_outputs(name, path, rng, cfg, qtype, tied)
        print(f"{name:12s} {info['arch']:6s} {info['weight_type']:5s} tied={str(tied):5s} "
              f"{os.path.getsize(path):8d} B  steps_over_1e-2={info['steps_over_1e-2']:2d}/{N_GEN} "
              f"distinct={len(set(info['greedy_ids'])):2d} max|logit|={info['max_abs_logit']:.2f} kv_diff={info['kv_vs_recompute_max_abs']:.1e}")


if __name__ == "__main__":
    main(sys.argv[1:])
