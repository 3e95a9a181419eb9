"""Writes the tokenizer references in this folder (see README.md here):
  fixtures.json  ids of the hard TEXTS for every distinct vocabulary of ../fixtures/*.gguf, from
                 transformers' GGUF tokenizer (convert_gguf_tokenizer, as make_smollm2_reference.py)
  splits.json    the pieces of TEXTS under llama.cpp's split regexes for the pre-tokenizer families
                 gpt-2, smollm, default, llama3 and qwen2, from HF `tokenizers`' Split pre-tokenizer
                 (behavior "isolated", one Split per regex in llama.cpp's order, in a Sequence)
  spm.gguf       a small SentencePiece ("llama") vocabulary: <unk>, <s>, </s>, <|im_start|>, the 256
                 <0xNN> byte tokens, the characters of CORPUS and BPE merges learned from it, scored
                 by merge order (no tensors)
  spm.json       ids of TEXTS for spm.gguf: llama.cpp's space-prefix rule, merges by transformers'
                 GGUF tokenizer (see spm_reference)

  /work/venv-llm/bin/python test/llm/tokenizer/make_tokenizer_reference.py

Needs gguf, transformers, tokenizers (no torch). Deterministic: fixed inputs, no randomness.
"""

import collections
import glob
import hashlib
import importlib.metadata
import json
import os
import sys

import gguf
import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")

TEXTS = [
    "Hello world",
    "Hello, world! How are you doing today?",
    " leading space",
    "  two leading spaces",
    "trailing space ",
    "trailing spaces   ",
    "multiple   spaces    between  words",
    "tabs\tand\t\ttabs\t",
    "new\nline\n\nand\r\nCRLF\r\n\r\n",
    "   \n\n   \t  ",
    " \n x\n\n\ny  \n",
    "",
    " ",
    "\n",
    "12345678901234567890",
    "3.14159 2,718 -42 +7 1e-10 0x1F 007 1000000",
    "Phone: +1 (555) 123-4567, date 2024-12-31 at 23:59",
    "I'm sure you'll see they're here, we've done it, he'd go, it's ok",
    "DON'T SHOUT, I'LL LEAVE, WE'RE DONE, IT'S 'S 'ſ 'K",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }\n\tif (x) {\n\t\treturn;\n\t}",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "text with <|eos|> in the middle<|bos|>",
    "<|im_start|><|im_end|><|im_start|>",
    "<|im_start <|im_end| |im_end|> <|IM_END|>",
    "naïve café résumé Straße ǅemal",
    "e\u0301 a\u0300 n\u0303 combining marks",
    "日本語のテキストと中文文本",
    "한국어 텍스트",
    "Привет, мир! Ελληνικά",
    "مرحبا بالعالم",
    "emoji 🤗🚀👍🏽 👨\u200d👩\u200d👧\u200d👦 flags 🇫🇷",
    "math ∑∫√∞ ≤≥ ≠ ± x² α→β ½ Ⅻ ٣",
    "URL https://example.com/path?query=1&x=y#frag",
    "JSON {\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "repeated !!!!!!!!!! ?????? ...... ------ ____ $$$ +++ <=> ^^ ~~ ||",
    "Mixed12abc34DEF56",
    "\u00a0non-breaking\u2009thin\u3000ideographic\u2028line\u0085next space",
    "zero\u200bwidth\u200djoiner\u00adsoft",
    "control \x00\x01\x1f\x7f bytes",
    "private \ue000 and astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𠀀",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
]

# The split regexes of llama.cpp's pre-tokenizer families (llama-vocab.cpp), in application order.
GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
SPLITS = {
    "gpt-2": [GPT2_RE],
    "smollm": [r"\p{N}", GPT2_RE],
    "default": [
        r"[\p{P}\$\+<=>\^~\|]+",
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
        r"\p{N}+",
        r"[0-9][0-9][0-9]",
    ],
    "llama3": [
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ],
    "qwen2": [
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ],
}

CORPUS = """The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.
Hello world! Hello again, world. A tokenizer splits text into pieces, and pieces into ids.
She sells sea shells by the sea shore, and the shells she sells are surely sea shells.
Numbers: 1 2 3 10 20 100 2024. Code: def f(x): return x + 1  # add one
naïve café résumé Straße, Привет мир, ελληνικά.
"""
N_MERGES = 200


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def hf_tokenizer(path):
    """transformers' GGUF tokenizer for a file, built as from_pretrained(gguf_file=...) does after
    reading the metadata (its own reader imports torch)."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer

    reader = gguf.GGUFReader(path)
    tokenizer_dict = {}
    for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items():
        if (v := field(reader, "tokenizer." + key)) is not None:
            tokenizer_dict[name] = v
    backend, _ = convert_gguf_tokenizer(field(reader, "general.architecture"), tokenizer_dict)
    return reader, backend


def encode_cases(backend, texts, add_bos_id=None):
    cases = []
    for text in texts:
        ids = backend.encode(text, add_special_tokens=False).ids
        if add_bos_id is not None:
            ids = [add_bos_id] + ids
        decoded = backend.decode(ids, skip_special_tokens=False)
        cases.append({"text": text, "ids": [int(i) for i in ids], "decoded": decoded})
    return cases


def fixtures_reference():
    groups = collections.OrderedDict()
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*.gguf"))):
        reader = gguf.GGUFReader(path)
        key = hashlib.sha256(json.dumps([field(reader, "tokenizer.ggml.tokens"), field(reader, "tokenizer.ggml.merges"),
                                         [int(t) for t in field(reader, "tokenizer.ggml.token_type")]]).encode()).hexdigest()
        groups.setdefault(key, []).append(path)
    vocabs = []
    for key, paths in groups.items():
        _, backend = hf_tokenizer(paths[0])
        vocabs.append({
            "fixtures": [os.path.basename(p)[:-len(".gguf")] for p in paths],
            "vocab_sha256": key,
            "cases": encode_cases(backend, TEXTS),
        })
    return {"texts_note": "ids from transformers' GGUF tokenizer, add_special_tokens=False (the files say "
                          "add_bos_token = false); control tokens in the text are matched whole",
            "vocabs": vocabs}


def splits_reference():
    from tokenizers import Regex, pre_tokenizers

    out = {}
    for family, exprs in SPLITS.items():
        pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(e), behavior="isolated") for e in exprs])
        out[family] = {"regexes": exprs, "pieces": [[p for p, _ in pre.pre_tokenize_str(t)] for t in TEXTS]}
    return {"texts": TEXTS, "families": out}


def learn_spm_vocab():
    """Plain BPE over the ▁-escaped words of CORPUS: (characters, merged pieces in merge order)."""
    words = collections.Counter()
    for line in CORPUS.splitlines():
        for w in line.split(" "):
            if w:
                words["\u2581" + w] += 1
    chars = sorted({c for w in words for c in w})
    seqs = {w: list(w) for w in words}
    pieces = []
    for _ in range(N_MERGES):
        pairs = collections.Counter()
        for w, n in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], [-ord(c) for c in kv[0][0] + kv[0][1]]))[0]
        merged = best[0] + best[1]
        if merged not in pieces:
            pieces.append(merged)
        for w in words:
            s, i, t = seqs[w], 0, []
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    t.append(merged)
                    i += 2
                else:
                    t.append(s[i])
                    i += 1
            seqs[w] = t
    return chars, pieces


def write_spm_gguf(path):
    chars, pieces = learn_spm_vocab()
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3, 3] + [6] * 256
    scores = [0.0] * len(tokens)
    for c in chars:
        tokens.append(c)
        types.append(1)
        scores.append(-1000.0)
    for k, p in enumerate(pieces):
        tokens.append(p)
        types.append(1)
        scores.append(-float(k + 1))
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("spm-tokenizer-test")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return len(tokens)


def spm_reference(path):
    """ids with llama.cpp's space-prefix rule (llm_tokenizer_spm: a space before every text fragment
    that follows BOS / a special token / the start, even when the text already starts with a space),
    merged by transformers' GGUF tokenizer (LlamaTokenizer: BPE with merges from the scores, byte
    fallback) with its Metaspace prefix switched off; transformers' own ids (Metaspace "first": no
    prefix after a special token nor before a leading space) are kept as ids_transformers where
    they differ."""
    from tokenizers import pre_tokenizers

    reader, backend = hf_tokenizer(path)
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    specials = sorted((i for i, t in enumerate(types) if t in (2, 3, 4)), key=lambda i: (-len(tokens[i]), i))
    plain = hf_tokenizer(path)[1]
    plain.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="never", split=False)
    cases = []
    for text in TEXTS:
        frags = [text] if text else []
        for i in specials:
            out = []
            for f in frags:
                if isinstance(f, int):
                    out.append(f)
                    continue
                parts = f.split(tokens[i])
                for k, part in enumerate(parts):
                    if k:
                        out.append(i)
                    if part:
                        out.append(part)
            frags = out
        ids, prev_special = [1], True
        for f in frags:
            if isinstance(f, int):
                ids.append(f)
                prev_special = True
            else:
                ids += plain.encode((" " if prev_special else "") + f, add_special_tokens=False).ids
                prev_special = False
        case = {"text": text, "ids": ids, "decoded": backend.decode(ids, skip_special_tokens=False)}
        hf_ids = [1] + backend.encode(text, add_special_tokens=False).ids
        if hf_ids != ids:
            case["ids_transformers"] = hf_ids
        cases.append(case)
    return {"n_vocab": len(tokens),
            "note": spm_reference.__doc__.strip(),
            "n_cases_transformers_differs": sum("ids_transformers" in c for c in cases),
            "cases": cases}


def main():
    versions = {p: importlib.metadata.version(p) for p in ("gguf", "transformers", "tokenizers")}
    fx = fixtures_reference()
    fx["versions"] = versions
    sp = splits_reference()
    sp["versions"] = versions
    spm_path = os.path.join(HERE, "spm.gguf")
    write_spm_gguf(spm_path)
    spm = spm_reference(spm_path)
    spm["versions"] = versions
    for name, obj in (("fixtures.json", fx), ("splits.json", sp), ("spm.json", spm)):
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=1)
            f.write("\n")
    print("vocab groups", [len(v["fixtures"]) for v in fx["vocabs"]], "spm vocab", spm["n_vocab"])


if __name__ == "__main__":
    main()
