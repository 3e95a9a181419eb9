"""Writes test/llm/fixtures/quant_blocks/: for each weight type, raw blocks (<TYPE>.bin) and gguf-py's
dequantization of them (<TYPE>.f32, float32 little-endian), for bit-exact dequantizer tests; plus
index.json (block geometry and what each special block is). See test/llm/README.md.

  python3 test/llm/make_quant_blocks.py

Deterministic (fixed seed per type).
"""

import json
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "quant_blocks")
N_BLOCKS = 64

# byte offsets of the f16 fields inside a block, and a name for each
F16_FIELDS = {
    T.Q8_0: {"d": 0},
    T.Q4_0: {"d": 0},
    T.Q4_1: {"d": 0, "m": 2},
    T.Q5_0: {"d": 0},
    T.Q5_1: {"d": 0, "m": 2},
    T.Q2_K: {"d": 80, "dmin": 82},
    T.Q3_K: {"d": 108},
    T.Q4_K: {"d": 0, "dmin": 2},
    T.Q5_K: {"d": 0, "dmin": 2},
    T.Q6_K: {"d": 208},
}
BLOCK_TYPES = [T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]

H = {  # f16 bit patterns
    "zero": 0x0000, "neg_zero": 0x8000, "one": 0x3C00, "neg_one": 0xBC00,
    "min_subnormal": 0x0001, "max_subnormal": 0x03FF, "neg_subnormal": 0x8155, "min_normal": 0x0400,
    "max_finite": 0x7BFF, "neg_max_finite": 0xFBFF, "inf": 0x7C00, "neg_inf": 0xFC00, "nan": 0x7E00,
    "small": 0x1E66,  # ~0.0062
    "neg_small": 0x9E66,
    "small_min": 0x1A00,  # 0.003
}


def f16_bits(x):
    return np.asarray(x, dtype=np.float16).view(np.uint16)


def random_scales(rng, n):
    """Plausible f16 scales: magnitude 1e-4..1, random sign."""
    mag = 10.0 ** rng.uniform(-4, 0, n)
    sign = np.where(rng.random(n) < 0.2, -1.0, 1.0)
    return f16_bits(mag * sign)


def set_f16(block, off, bits):
    block[off] = bits & 0xFF
    block[off + 1] = (bits >> 8) & 0xFF


def block_specials(qtype, type_size, rng):
    """(description, block bytes) for the special blocks of a block type."""
    fields = F16_FIELDS[qtype]
    out = []

    def blk(desc, fill=None, f16=None):
        b = rng.integers(0, 256, type_size, dtype=np.uint8) if fill is None else np.full(type_size, fill, np.uint8)
        for name, off in fields.items():
            set_f16(b, off, H["small"] if name == "d" else H["small_min"])
        for name, bits in (f16 or {}).items():
            set_f16(b, fields[name], bits)
        out.append((desc, b))

    blk("all bytes zero", fill=0, f16={k: 0 for k in fields})
    blk("all bytes 0xFF (f16 fields = 0xFFFF, a NaN)", fill=0xFF, f16={k: 0xFFFF for k in fields})
    blk("all quant/scale bits max, positive f16 fields", fill=0xFF)
    blk("all quant/scale bits zero, positive f16 fields", fill=0x00)
    blk("all quant/scale bits max, negative f16 fields", fill=0xFF, f16={k: H["neg_small"] for k in fields})
    blk("all quant/scale bits zero, negative f16 fields", fill=0x00, f16={k: H["neg_small"] for k in fields})
    for name in fields:
        for special in ("zero", "neg_zero", "neg_one", "min_subnormal", "max_subnormal", "neg_subnormal",
                        "min_normal", "max_finite", "neg_max_finite", "inf", "neg_inf", "nan"):
            blk(f"random bits, {name} = {special} (0x{H[special]:04X})", f16={name: H[special]})
    return out


def make_block_type(qtype, seed):
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    specials = block_specials(qtype, type_size, rng)
    assert len(specials) <= N_BLOCKS // 2
    blocks = np.zeros((N_BLOCKS, type_size), dtype=np.uint8)
    desc = []
    for i, (d, b) in enumerate(specials):
        blocks[i] = b
        desc.append(d)
    for i in range(len(specials), N_BLOCKS):
        b = rng.integers(0, 256, type_size, dtype=np.uint8)
        for off in F16_FIELDS[qtype].values():
            set_f16(b, off, int(random_scales(rng, 1)[0]))
        blocks[i] = b
        desc.append("random bits, random f16 fields (|x| in 1e-4..1, 20% negative)")
    with np.errstate(all="ignore"):
        values = gguf.quants.dequantize(blocks, qtype)
    values = np.asarray(values, dtype=np.float32).reshape(N_BLOCKS, block_size)
    return blocks, values, desc


def make_16bit(qtype, seed):
    """F16 / BF16: N_BLOCKS x 32 raw 16-bit values, specials first."""
    rng = np.random.default_rng(seed)
    n = N_BLOCKS * 32
    if qtype == T.F16:
        specials = [0x0000, 0x8000, 0x3C00, 0xBC00, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x7BFF, 0xFBFF,
                    0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7FFF, 0x3555, 0x0200]
    else:
        specials = [0x0000, 0x8000, 0x3F80, 0xBF80, 0x0001, 0x8001, 0x007F, 0x807F, 0x0080, 0x8080, 0x7F7F, 0xFF7F,
                    0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x7FFF, 0x3EAA, 0x0040]
    vals = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    vals[:len(specials)] = specials
    raw = vals.astype("<u2").view(np.uint8)
    with np.errstate(all="ignore"):
        values = gguf.quants.dequantize(raw if qtype == T.BF16 else raw.view(np.uint8), qtype)
    values = np.asarray(values, dtype=np.float32).reshape(-1)
    assert values.size == n
    desc = [f"values 0..{len(specials) - 1}: special bit patterns " + ", ".join(f"0x{s:04X}" for s in specials),
            f"values {len(specials)}..{n - 1}: uniformly random 16-bit patterns (incl. NaN/inf/subnormal)"]
    return raw.reshape(N_BLOCKS, 64), values, desc


def main():
    os.makedirs(OUT, exist_ok=True)
    index = {"n_blocks": N_BLOCKS, "byte_order": "little-endian", "types": {}}
    for seed, qtype in enumerate([T.F16, T.BF16] + BLOCK_TYPES):
        if qtype in (T.F16, T.BF16):
            raw, values, desc = make_16bit(qtype, 7000 + seed)
            entry = {"ggml_type": int(qtype), "block_size": 1, "type_size": 2, "n_values": int(values.size),
                     "notes": desc}
        else:
            raw, values, desc = make_block_type(qtype, 7000 + seed)
            block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
            entry = {"ggml_type": int(qtype), "block_size": block_size, "type_size": type_size,
                     "n_values": int(values.size), "f16_fields": F16_FIELDS[qtype], "blocks": desc}
        raw.astype(np.uint8).tofile(os.path.join(OUT, qtype.name + ".bin"))
        values.astype("<f4").tofile(os.path.join(OUT, qtype.name + ".f32"))
        entry["n_nan"] = int(np.isnan(values).sum())
        entry["n_inf"] = int(np.isinf(values).sum())
        index["types"][qtype.name] = entry
        print(f"{qtype.name:5s} {raw.size:7d} B raw  {values.size:6d} values  nan={entry['n_nan']} inf={entry['n_inf']}")
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
