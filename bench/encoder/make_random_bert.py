"""Writes a MiniLM-shaped BERT checkpoint folder with seeded random weights, for benchmarks on
machines that carry only the small tokenizer files of the real model (no weights).

The folder loads like the real all-MiniLM-L6-v2 (sentence-transformers, transformers BertModel, and
nx_vulkan's encoder): config.json, model.safetensors with the real file's tensor names (no "bert."
prefix; embeddings.position_ids as int64; pooler.dense included), and tokenizer.json, modules.json,
sentence_bert_config.json, 1_Pooling/config.json copied from --tokenizer-dir (plus vocab.txt,
tokenizer_config.json, special_tokens_map.json, config_sentence_transformers.json where present).

Weights: normal(0, 0.02) for every matrix, embedding table and bias; LayerNorm gamma 1, beta 0.
Deterministic for a given seed and shape (numpy PCG64). Needs numpy + safetensors only.

Usage:
  python3 bench/encoder/make_random_bert.py --tokenizer-dir ~/.cache/nx_vulkan/models/all-MiniLM-L6-v2 \
      --out /tmp/random-minilm [--seed 0] [--layers 6] [--hidden 384] [--heads 12] [--intermediate 1536]
"""
import argparse
import json
import os
import shutil

import numpy as np
from safetensors.numpy import save_file

MINILM_CONFIG = {
    "_name_or_path": "nreimers/MiniLM-L6-H384-uncased",
    "architectures": ["BertModel"],
    "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": False,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 384,
    "initializer_range": 0.02,
    "intermediate_size": 1536,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 6,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "transformers_version": "4.8.2",
    "type_vocab_size": 2,
    "use_cache": True,
    "vocab_size": 30522,
}
REQUIRED = ["tokenizer.json", "modules.json", "sentence_bert_config.json", "1_Pooling/config.json"]
OPTIONAL = ["vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
            "config_sentence_transformers.json"]


def tensors(cfg, seed, std=0.02):
    rng = np.random.default_rng(seed)
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    p, t = cfg["max_position_embeddings"], cfg["type_vocab_size"]

    def normal(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    def layernorm(prefix, out):
        out[prefix + ".weight"] = np.ones(h, dtype=np.float32)
        out[prefix + ".bias"] = np.zeros(h, dtype=np.float32)

    out = {}
    # a fixed generation order (dict order below) keeps the weights a function of the seed only
    out["embeddings.word_embeddings.weight"] = normal(v, h)
    out["embeddings.position_embeddings.weight"] = normal(p, h)
    out["embeddings.token_type_embeddings.weight"] = normal(t, h)
    layernorm("embeddings.LayerNorm", out)
    out["embeddings.position_ids"] = np.arange(p, dtype=np.int64).reshape(1, p)
    for l in range(cfg["num_hidden_layers"]):
        pre = f"encoder.layer.{l}."
        for name in ("query", "key", "value"):
            out[pre + f"attention.self.{name}.weight"] = normal(h, h)
            out[pre + f"attention.self.{name}.bias"] = normal(h)
        out[pre + "attention.output.dense.weight"] = normal(h, h)
        out[pre + "attention.output.dense.bias"] = normal(h)
        layernorm(pre + "attention.output.LayerNorm", out)
        out[pre + "intermediate.dense.weight"] = normal(i, h)
        out[pre + "intermediate.dense.bias"] = normal(i)
        out[pre + "output.dense.weight"] = normal(h, i)
        out[pre + "output.dense.bias"] = normal(h)
        layernorm(pre + "output.LayerNorm", out)
    out["pooler.dense.weight"] = normal(h, h)
    out["pooler.dense.bias"] = normal(h)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer-dir", required=True,
                    help="folder with the real model's tokenizer.json, modules.json, "
                         "sentence_bert_config.json, 1_Pooling/ (config.json used if present)")
    ap.add_argument("--out", required=True, help="checkpoint folder to write (created)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--intermediate", type=int)
    ap.add_argument("--std", type=float, default=0.02)
    args = ap.parse_args()

    src_cfg = os.path.join(args.tokenizer_dir, "config.json")
    cfg = dict(MINILM_CONFIG)
    if os.path.exists(src_cfg):
        with open(src_cfg) as f:
            cfg = json.load(f)
    for flag, key in (("layers", "num_hidden_layers"), ("hidden", "hidden_size"),
                      ("heads", "num_attention_heads"), ("intermediate", "intermediate_size")):
        val = getattr(args, flag)
        if val is not None:
            cfg[key] = val
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        ap.error(f"hidden {cfg['hidden_size']} is not a multiple of heads {cfg['num_attention_heads']}")
    cfg["_name_or_path"] = f"random-bert-seed{args.seed}"

    for rel in REQUIRED:
        if not os.path.exists(os.path.join(args.tokenizer_dir, rel)):
            ap.error(f"{rel} missing from --tokenizer-dir {args.tokenizer_dir}")
    os.makedirs(os.path.join(args.out, "1_Pooling"), exist_ok=True)
    for rel in REQUIRED + OPTIONAL:
        src = os.path.join(args.tokenizer_dir, rel)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(args.out, rel))
    pool_path = os.path.join(args.out, "1_Pooling", "config.json")
    with open(pool_path) as f:
        pool = json.load(f)
    pool["word_embedding_dimension"] = cfg["hidden_size"]
    with open(pool_path, "w") as f:
        json.dump(pool, f, indent=2)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

    ts = tensors(cfg, args.seed, args.std)
    weights = os.path.join(args.out, "model.safetensors")
    save_file(ts, weights, metadata={"format": "pt"})
    os.chmod(weights, 0o644)
    info = {"generator": "bench/encoder/make_random_bert.py", "seed": args.seed, "std": args.std,
            "layers": cfg["num_hidden_layers"], "hidden": cfg["hidden_size"],
            "heads": cfg["num_attention_heads"], "intermediate": cfg["intermediate_size"],
            "tensors": len(ts), "params": int(sum(a.size for k, a in ts.items() if a.dtype == np.float32))}
    with open(os.path.join(args.out, "random_bert.json"), "w") as f:
        json.dump(info, f, indent=2)
    print(json.dumps({"out": args.out, **info}))


if __name__ == "__main__":
    main()
