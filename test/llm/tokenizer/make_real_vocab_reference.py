"""Writes test/llm/tokenizer/real-vocabs.json: ids of the hard texts of make_tokenizer_reference.py
under two real vocabularies, Llama-3 (llama.cpp's ggml-vocab-llama-bpe.gguf) and Qwen2
(ggml-vocab-qwen2.gguf), and the prompts the chat templates stored in the Qwen2, Phi-3 and
Command-R vocabulary files render for a few conversations. The files come from
scripts/fetch-vocabs.sh (PyPI llama-cpp-python's source package); nothing of them is committed.

The reference tokenizers are HF `tokenizers` pipelines built from each file's tokens and merges in
the configuration the model's own tokenizer.json publishes:
  Llama-3  no normalizer; Split(LLAMA3 regex, isolated) then ByteLevel(use_regex=False);
           BPE with ignore_merges (a whole piece found in the vocabulary is one token)
  Qwen2    NFC normalizer; Split(QWEN2 regex, isolated) then ByteLevel(use_regex=False); BPE
with the control tokens as special added tokens (matched before normalizing). Before writing
anything the script checks that each pipeline reproduces every id of the file's own .out (46
texts the model's Hugging Face tokenizer encoded for llama.cpp), so the pipeline stands for the
model's tokenizer. Chat prompts are rendered by transformers' apply_chat_template (its Jinja
environment) with the file's template.

  bash scripts/fetch-vocabs.sh
  /work/venv-llm/bin/python test/llm/tokenizer/make_real_vocab_reference.py [VOCAB_DIR]

Needs gguf, transformers, tokenizers (no torch). Deterministic.
"""

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys

import gguf

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_tokenizer_reference import TEXTS, field  # noqa: E402

# As published in Meta-Llama-3-8B's and Qwen2-7B's tokenizer.json.
LLAMA3_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are a terse assistant."},
     {"role": "user", "content": "Name three primes."},
     {"role": "assistant", "content": "2, 3, 5."},
     {"role": "user", "content": "  And the next one?  "}],
    [{"role": "user", "content": "日本語で答えて: 1+1は? 🤗\n\tTabs and\r\nCRLF."}],
]


def vocab_cases(d, name):
    with open(os.path.join(d, f"ggml-vocab-{name}.gguf.inp"), encoding="utf-8", newline="") as f:
        texts = f.read().split("\n__ggml_vocab_test__\n")
    with open(os.path.join(d, f"ggml-vocab-{name}.gguf.out")) as f:
        ids = [[int(x) for x in line.split()] for line in f.read().splitlines()]
    assert len(texts) == len(ids) + 1
    return list(zip(texts, ids))


def hf_pipeline(reader, regex, nfc, ignore_merges):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i, t in enumerate(types) if t == 3])
    return tok


def sha256_of_vocab(reader):
    return hashlib.sha256(json.dumps([field(reader, "tokenizer.ggml.tokens"), field(reader, "tokenizer.ggml.merges"),
                                      [int(t) for t in field(reader, "tokenizer.ggml.token_type")]]).encode()).hexdigest()


def render_templates(d):
    from transformers import PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models

    out = []
    for name in ("qwen2", "phi-3", "command-r"):
        reader = gguf.GGUFReader(os.path.join(d, f"ggml-vocab-{name}.gguf"))
        template = field(reader, "tokenizer.chat_template")
        tokens = field(reader, "tokenizer.ggml.tokens")
        bos = tokens[field(reader, "tokenizer.ggml.bos_token_id")]
        eos = tokens[field(reader, "tokenizer.ggml.eos_token_id")]
        # Only the template and the BOS/EOS strings matter to rendering.
        hf = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), bos_token=bos, eos_token=eos)
        prompts = [hf.apply_chat_template(c, chat_template=template, tokenize=False, add_generation_prompt=True)
                   for c in CONVERSATIONS]
        out.append({"vocab": name, "template_sha256": hashlib.sha256(template.encode()).hexdigest(),
                    "bos_token": bos, "eos_token": eos, "prompts": prompts})
    return out


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else subprocess.check_output(
        ["bash", os.path.join(HERE, "..", "..", "..", "scripts", "fetch-vocabs.sh")], text=True).strip()
    vocabs = []
    for name, regex, nfc, ignore_merges in (("llama-bpe", LLAMA3_RE, False, True), ("qwen2", QWEN2_RE, True, False)):
        reader = gguf.GGUFReader(os.path.join(d, f"ggml-vocab-{name}.gguf"))
        tok = hf_pipeline(reader, regex, nfc, ignore_merges)
        checks = vocab_cases(d, name)
        for text, want in checks:
            got = tok.encode(text, add_special_tokens=False).ids
            assert got == want, f"{name}: the pipeline is not the model's tokenizer on {text!r}: {got} vs {want}"
        cases = []
        for text in TEXTS:
            ids = tok.encode(text, add_special_tokens=False).ids
            cases.append({"text": text, "ids": [int(i) for i in ids],
                          "decoded": tok.decode(ids, skip_special_tokens=False)})
        vocabs.append({"vocab": name, "vocab_sha256": sha256_of_vocab(reader), "nfc": nfc,
                       "checked_against_out": len(checks), "cases": cases})
        print(name, "pipeline = .out on", len(checks), "texts;", len(cases), "cases")
    obj = {"note": __doc__.strip().split("\n\n")[0],
           "vocabs": vocabs,
           "templates": render_templates(d),
           "conversations": CONVERSATIONS,
           "versions": {p: importlib.metadata.version(p) for p in ("gguf", "transformers", "tokenizers")}}
    with open(os.path.join(HERE, "real-vocabs.json"), "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
