# Writes a random-weight llama GGUF for speed measurements (values are random quant blocks with
# small fixed scales: only speed is meaningful, never the text). Shapes:
#   smollm2  SmolLM2-135M: h 576, 30 layers, 9/3 heads, ffn 1536, vocab 49152, tied Q8_0 embedding
#   1b       Llama-3.2-1B-like: h 2048, 16 layers, 32/8 heads, ffn 8192, vocab 32000
#   8b       Llama-3-8B: h 4096, 32 layers, 32/8 heads, ffn 14336, vocab 32000
# Mixes: q4km (Q4_K matrices; Q6_K output, attn_v and every other ffn_down, as llama.cpp's
# Q4_K_M), q5km (the same with Q5_K), q8_0, q4_1 (SmolLM2's own: Q4_1 matrices, Q8_0
# embedding), q5_0 (Q5_0 matrices, Q8_0 embedding and output), q2k and q3k (Q2_K / Q3_K
# matrices, Q6_K output).
# ARCH (optional): llama (default) or qwen2 (NEOX rotation, biases on Q, K and V).
# Usage: python3 gen_model.py OUT.gguf PRESET MIX [ARCH]
import sys, os, numpy as np
from gguf import GGUFWriter, GGMLQuantizationType as Q

out, preset, mix = sys.argv[1], sys.argv[2], sys.argv[3]
arch = sys.argv[4] if len(sys.argv) > 4 else "llama"
if arch not in ("llama", "qwen2"):
    raise SystemExit(f"unknown arch {arch}")
P = {"smollm2": dict(h=576, L=30, heads=9, kv=3, ffn=1536, vocab=49152, tied=True),
     "1b": dict(h=2048, L=16, heads=32, kv=8, ffn=8192, vocab=32000, tied=False),
     "8b": dict(h=4096, L=32, heads=32, kv=8, ffn=14336, vocab=32000, tied=False)}[preset]
rng = np.random.default_rng(0)
F16 = lambda v: np.frombuffer(np.float16(v).tobytes(), np.uint8)
# (block values, block bytes, fields to pin: [(offset, bytes)])
KINDS = {
    "q4_k": (256, 144, [(0, F16(2e-4)), (2, F16(1e-3))], Q.Q4_K),
    "q6_k": (256, 210, [(208, F16(1e-4))], Q.Q6_K),
    "q8_0": (32, 34, [(0, F16(1e-3))], Q.Q8_0),
    "q4_1": (32, 20, [(0, F16(1e-3)), (2, F16(-4e-3))], Q.Q4_1),
    "q5_k": (256, 176, [(0, F16(2e-4)), (2, F16(1e-3))], Q.Q5_K),
    "q5_0": (32, 22, [(0, F16(1e-3))], Q.Q5_0),
    "q3_k": (256, 110, [(108, F16(1e-4))], Q.Q3_K),
    "q2_k": (256, 84, [(80, F16(1e-4)), (82, F16(1e-4))], Q.Q2_K),
}

def mat(rows, cols, kind):
    bs, nb_bytes, pins, q = KINDS[kind]
    nb = cols // bs
    blk = rng.integers(0, 256, size=(rows, nb, nb_bytes), dtype=np.uint8)
    for off, val in pins:
        blk[:, :, off:off + len(val)] = val
    if kind == "q6_k":  # int8 sub-block scales in a small range
        blk[:, :, 192:208] = rng.integers(-8, 8, size=(rows, nb, 16)).astype(np.int8).view(np.uint8)
    return blk.reshape(rows, nb * nb_bytes), q

h, L, nh, kv, ffn, V = P["h"], P["L"], P["heads"], P["kv"], P["ffn"], P["vocab"]
hd = h // nh
if mix == "q4km":
    main, out_kind, v_kind, down = "q4_k", "q6_k", "q6_k", lambda i: "q6_k" if i % 2 == 0 else "q4_k"
    embd = "q4_k"
elif mix == "q5km":
    main, out_kind, v_kind, down = "q5_k", "q6_k", "q6_k", lambda i: "q6_k" if i % 2 == 0 else "q5_k"
    embd = "q5_k"
elif mix == "q5_0":
    main = v_kind = "q5_0"; out_kind = embd = "q8_0"; down = lambda i: "q5_0"
elif mix in ("q2k", "q3k"):
    main = v_kind = embd = mix[:2] + "_k"; out_kind = "q6_k"; down = lambda i: main
elif mix == "q8_0":
    main = out_kind = v_kind = embd = "q8_0"; down = lambda i: "q8_0"
elif mix == "q4_1":
    main = v_kind = "q4_1"; out_kind = embd = "q8_0"; down = lambda i: "q4_1"
else:
    raise SystemExit(f"unknown mix {mix}")
if h % 256 and "k" in main:
    raise SystemExit(f"{preset}: rows of {h} are not whole K-quant blocks")

w = GGUFWriter(out, arch)
w.add_name(f"random-{preset}-{mix}")
w.add_context_length(8192); w.add_embedding_length(h); w.add_block_count(L)
w.add_feed_forward_length(ffn); w.add_head_count(nh); w.add_head_count_kv(kv)
w.add_rope_freq_base(500000.0); w.add_layer_norm_rms_eps(1e-5); w.add_rope_dimension_count(hd)
w.add_vocab_size(V)
toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
toks += [f"\u2581t{i}" for i in range(V - len(toks))]
types = [2, 3, 3] + [6] * 256 + [1] * (V - 259)
w.add_tokenizer_model("llama"); w.add_token_list(toks); w.add_token_scores([0.0] * V)
w.add_token_types(types); w.add_bos_token_id(1); w.add_eos_token_id(2); w.add_unk_token_id(0)

def add(name, arr_q):
    arr, q = arr_q
    w.add_tensor(name, arr, raw_dtype=q)

add("token_embd.weight", mat(V, h, embd))
w.add_tensor("output_norm.weight", np.ones(h, np.float32))
if not P["tied"]:
    add("output.weight", mat(V, h, out_kind))
for i in range(L):
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", np.ones(h, np.float32))
    w.add_tensor(p + "ffn_norm.weight", np.ones(h, np.float32))
    add(p + "attn_q.weight", mat(h, h, main)); add(p + "attn_k.weight", mat(kv * hd, h, main))
    add(p + "attn_v.weight", mat(kv * hd, h, v_kind)); add(p + "attn_output.weight", mat(h, h, main))
    add(p + "ffn_gate.weight", mat(ffn, h, main)); add(p + "ffn_up.weight", mat(ffn, h, main))
    add(p + "ffn_down.weight", mat(h, ffn, down(i)))
    if arch == "qwen2":
        for t, n in (("q", h), ("k", kv * hd), ("v", kv * hd)):
            w.add_tensor(p + f"attn_{t}.bias", (rng.standard_normal(n) * 0.01).astype(np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print(f"wrote {out}: {os.path.getsize(out) / 1e9:.3f} GB", file=sys.stderr)
