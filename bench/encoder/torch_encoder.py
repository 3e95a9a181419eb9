"""The PyTorch peer for the encoder benchmark: sentence-transformers on one GPU (or the CPU).

Loads a checkpoint folder (the real all-MiniLM-L6-v2, or one from make_random_bert.py) with
sentence-transformers (BertModel + mean pooling + Normalize), and prints one JSON line per
measurement:
  {"peer": "torch", "bench": "encode", "scope", "precision", "batch", "seq", "inputs_per_s",
   "median_ms", "p10_ms", "p90_ms", "reps", "device", ...}
    scope "forward": pre-tokenized batches already on the device; model forward + pooling +
                     normalize, timed to torch.cuda.synchronize()  (the engine's GPU work)
    scope "e2e":     model.encode(texts): tokenization, host->device, forward, device->host numpy
  and one {"bench": "cold_start", ...}: wall time from spawning a fresh python process to its first
  embedding (imports, CUDA context, loading, tokenizing, one forward), measured by the parent.

Shapes: batch 1, 2, 4, 8 at seq 32 tokens and batch 64 at seq 128 tokens (the texts are made to
tokenize to exactly `seq` tokens with [CLS]/[SEP], distinct texts per row). Precisions: fp32 with
TF32 OFF (torch.backends.cuda.matmul.allow_tf32 = False, cudnn.allow_tf32 = False,
set_float32_matmul_precision("highest")), and fp16 (model.half()).

Reference mode (no timing): embeds each text at batch size 1 in fp32 (TF32 off) and writes
little-endian f32 [N, hidden] to OUT.bin plus OUT.bin.json (metadata), so nx_vulkan's output on the
same checkpoint and texts can be compared:
  python bench/encoder/torch_encoder.py --model DIR --reference OUT.bin --texts FILE
FILE: .jsonl with a "text" field per line (e.g. test/encoder/corpus.jsonl), else one text per line.

Usage:
  python bench/encoder/torch_encoder.py --model DIR [--device cuda|cpu] [--reps 50] [--warmup 10]
      [--precisions fp32,fp16] [--shapes 1x32,2x32,4x32,8x32,64x128] [--no-cold-start]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

T_PROCESS = time.time()  # for the cold-start child: as early as the script can note it

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DEFAULT_SHAPES = "1x32,2x32,4x32,8x32,64x128"
# common words that are single WordPiece tokens in the uncased BERT vocabulary
WORDS = ("the of and to in is was for on as with by he at from his an were are which this be "
         "or has had not first one their its new after who they have her she two been other when "
         "there all also into during time more school only city would may year world some most "
         "then where later used people made over team war state known game part two film him "
         "years many such these back best well three them out life album city music day band "
         "house small west north south east club long high work name make town left way down "
         "party four found great last while under home could both good water early old public "
         "side line own five big play area main like place did set took").split()


def set_precision_flags(torch):
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means FP32, not TF32
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def load(model_dir, device, precision):
    import torch
    from sentence_transformers import SentenceTransformer
    set_precision_flags(torch)
    m = SentenceTransformer(model_dir, device=device)
    m.eval()
    if precision == "fp16":
        m = m.half()
    elif precision == "bf16":
        m = m.to(torch.bfloat16)
    return m


def features(model, texts):
    fn = getattr(model, "preprocess", None) or model.tokenize
    return fn(texts)


def texts_of_len(model, n, seq, salt=0):
    """n distinct texts that each tokenize to exactly `seq` ids (with [CLS] and [SEP])."""
    out = []
    for r in range(n):
        words = [WORDS[(r * 7 + salt * 13 + k * (r % 5 + 1)) % len(WORDS)] for k in range(seq - 2)]
        text = " ".join(words)
        ids = features(model, [text])["input_ids"][0]
        assert len(ids) == seq, (len(ids), seq, text)
        out.append(text)
    return out


def sync(torch, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# Warm-up: at least `warmup` runs and WARMUP_S seconds of them, so the GPU's clocks have left
# their idle state before timing (short bursts on the H200 ran at idle clocks; nx-vulkan's
# encode-bench warms up the same way).
WARMUP_S = 0.5


def timed(torch, device, fn, warmup, reps):
    t0 = time.perf_counter()
    n = 0
    while n < warmup or time.perf_counter() - t0 < WARMUP_S:
        fn()
        n += 1
        if n % 8 == 0:
            sync(torch, device)
    sync(torch, device)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync(torch, device)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times


def device_name(torch, device):
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    import platform
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def bench(args):
    import torch
    import sentence_transformers
    import transformers
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s]
    common = {"peer": "torch", "device": None, "model": os.path.basename(os.path.normpath(args.model)),
              "torch": torch.__version__, "transformers": transformers.__version__,
              "sentence_transformers": sentence_transformers.__version__}
    for precision in args.precisions.split(","):
        model = load(args.model, args.device, precision)
        common["device"] = device_name(torch, args.device)
        hf = model[0].auto_model if hasattr(model[0], "auto_model") else None
        attn = getattr(getattr(hf, "config", None), "_attn_implementation", None)
        for batch, seq in shapes:
            texts = texts_of_len(model, batch, seq, salt=batch)
            feats = {k: v.to(args.device) for k, v in features(model, texts).items()
                     if hasattr(v, "to")}
            extra = {k: v for k, v in features(model, texts).items() if not hasattr(v, "to")}
            feats.update(extra)

            def forward():
                with torch.inference_mode():
                    return model(dict(feats))["sentence_embedding"]

            def e2e():
                return model.encode(texts, batch_size=batch, convert_to_numpy=True,
                                    show_progress_bar=False)

            emb = forward()
            assert emb.shape[0] == batch and torch.isfinite(emb.float()).all()
            for scope, fn in (("forward", forward), ("e2e", e2e)):
                times = timed(torch, args.device, fn, args.warmup, args.reps)
                med = statistics.median(times)
                print(json.dumps({
                    **common, "bench": "encode", "scope": scope, "precision": precision,
                    "tf32": False if precision == "fp32" else None, "attn_implementation": attn,
                    "batch": batch, "seq": seq, "inputs_per_s": batch / med,
                    "tokens_per_s": batch * seq / med, "median_ms": med * 1e3,
                    "p10_ms": times[len(times) // 10] * 1e3,
                    "p90_ms": times[min(len(times) - 1, (len(times) * 9) // 10)] * 1e3,
                    "reps": args.reps, "warmup": args.warmup}), flush=True)
        del model
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    if not args.no_cold_start:
        for precision in args.cold_precisions.split(","):
            cold_start(args, precision, common)


def cold_start(args, precision, common):
    """Parent side: spawn a fresh interpreter, time to its first embedding."""
    runs = []
    child = None
    for _ in range(args.cold_runs):
        cmd = [sys.executable, os.path.abspath(__file__), "--cold-child", "--model", args.model,
               "--device", args.device, "--precisions", precision, "--threads", str(args.threads)]
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, check=False)
        t_exit = time.time()
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if p.returncode != 0 or not lines:
            print(json.dumps({**common, "bench": "cold_start", "precision": precision,
                              "error": p.stderr[-2000:]}), flush=True)
            return
        child = json.loads(lines[-1])
        runs.append({"first_embedding_s": child["t_first_embedding"] - t0,
                     "process_exit_s": t_exit - t0,
                     "interpreter_start_s": child["t_process"] - t0,
                     "imports_s": child["t_imported"] - child["t_process"],
                     "load_s": child["t_loaded"] - child["t_imported"],
                     "first_encode_s": child["t_first_embedding"] - child["t_loaded"]})
    first = sorted(r["first_embedding_s"] for r in runs)
    print(json.dumps({**common, "bench": "cold_start", "precision": precision,
                      "what": "wall time from spawning `python torch_encoder.py --cold-child` to its "
                              "first embedding on the host (imports + CUDA init + load + encode)",
                      "median_ms": statistics.median(first) * 1e3, "runs": runs,
                      "text": child.get("text")}), flush=True)


def cold_child(args):
    import torch  # noqa: F401
    import sentence_transformers  # noqa: F401
    t_imported = time.time()
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    model = load(args.model, args.device, args.precisions.split(",")[0])
    t_loaded = time.time()
    text = "The quick brown fox jumps over the lazy dog."
    emb = model.encode([text], convert_to_numpy=True, show_progress_bar=False)
    t_first = time.time()
    assert emb.shape[0] == 1
    print(json.dumps({"t_process": T_PROCESS, "t_imported": t_imported, "t_loaded": t_loaded,
                      "t_first_embedding": t_first, "text": text}))


def read_texts(path):
    with open(path, encoding="utf-8") as f:
        if path.endswith(".jsonl"):
            return [json.loads(l)["text"] for l in f if l.strip()]
        return [l.rstrip("\n") for l in f]


def reference(args):
    import numpy as np
    import torch
    import sentence_transformers
    import transformers
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    model = load(args.model, args.device, "fp32")
    texts = read_texts(args.texts)
    emb = model.encode(texts, batch_size=1, convert_to_numpy=True, show_progress_bar=False)
    emb = np.asarray(emb, dtype="<f4")
    emb.tofile(args.reference)
    meta = {"n": int(emb.shape[0]), "dims": int(emb.shape[1]),
            "layout": "little-endian float32, row-major [n, dims], in the order of --texts",
            "texts": os.path.abspath(args.texts), "model": os.path.abspath(args.model),
            "precision": "fp32, TF32 off", "batch_size": 1, "device": device_name(torch, args.device),
            "max_seq_length": model.max_seq_length, "torch": torch.__version__,
            "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__}
    with open(args.reference + ".json", "w") as f:
        json.dump(meta, f, indent=2)
    print(json.dumps({"peer": "torch", "bench": "reference", "out": args.reference, **meta}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="checkpoint folder")
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu")
    ap.add_argument("--precisions", default="fp32,fp16")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="BATCHxSEQ,... (default %(default)s)")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads with --device cpu")
    ap.add_argument("--no-cold-start", action="store_true")
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--cold-precisions", default="fp32")
    ap.add_argument("--cold-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--reference", metavar="OUT.bin")
    ap.add_argument("--texts", metavar="FILE")
    args = ap.parse_args()
    if args.cold_child:
        cold_child(args)
    elif args.reference:
        if not args.texts:
            ap.error("--reference needs --texts")
        reference(args)
    else:
        bench(args)


if __name__ == "__main__":
    main()
