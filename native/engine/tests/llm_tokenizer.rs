//! The GGUF tokenizer and chat templates (no GPU): the real SmolLM2-135M-Instruct vocabulary
//! against test/llm/smollm2-reference.json (ids from llama.cpp's "smollm" pre-tokenization, chat
//! prompt from transformers' apply_chat_template), the 17 fixture vocabularies and the SentencePiece
//! vocabulary of test/llm/tokenizer/ against transformers' GGUF tokenizers, the Llama-3 / Qwen2 split
//! regexes against HF `tokenizers`' Split pre-tokenizer, eight real vocabularies (Llama-3, Qwen2,
//! GPT-2, StarCoder, Refact, Command-R, Llama-2, Phi-3; scripts/fetch-vocabs.sh) against the ids
//! their own Hugging Face tokenizers gave, Llama-3 and Qwen2 on the hard texts and three real
//! chat templates (test/llm/tokenizer/real-vocabs.json), streaming decode, and damaged metadata.

mod common;

use common::llm_fixtures::{ids_of, smollm2_path, test_llm};
use common::model_cache;
use nx_vulkan_engine::llm::chat::{ChatMessage, ChatTemplate};
use nx_vulkan_engine::llm::tokenizer::{pre_tokenize, LlmTokenizer, StreamDecoder};
use nx_vulkan_engine::llm::Gguf;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

fn smollm2() -> (Gguf, LlmTokenizer) {
    let g = Gguf::open(smollm2_path()).unwrap();
    let t = LlmTokenizer::from_gguf(&g).unwrap();
    (g, t)
}

#[test]
fn smollm2_ids_match_the_reference_for_all_35_cases() {
    let (_, tok) = smollm2();
    let r = json(&test_llm().join("smollm2-reference.json"));
    let t = &r["tokenizer"];
    assert_eq!(tok.pre_name(), Some("smollm"));
    assert_eq!(tok.bos(), Some(t["bos_token_id"].as_u64().unwrap() as u32));
    assert_eq!(tok.eos(), Some(t["eos_token_id"].as_u64().unwrap() as u32));
    assert_eq!(tok.vocab_size(), 49152);
    assert!(!tok.adds_bos());
    let controls = ids_of(&t["control_token_ids"]);
    for id in 0..tok.vocab_size() as u32 {
        assert_eq!(tok.is_control(id), controls.contains(&id), "control flag of {id}");
    }
    let cases = t["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 35);
    let mut bad = Vec::new();
    for c in cases {
        let text = c["text"].as_str().unwrap();
        let want = ids_of(&c["ids"]);
        // add_special = true: the file says add_bos_token = false, so nothing is added.
        let got = tok.encode(text, true, true).unwrap();
        if got != want {
            bad.push(format!("{text:?}\n  got  {got:?}\n  want {want:?}"));
            continue;
        }
        let pieces: Vec<&str> = c["pieces"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
        let got_pieces: Vec<&str> = got.iter().map(|&i| tok.piece(i).unwrap()).collect();
        assert_eq!(got_pieces, pieces, "{text:?}");
        assert_eq!(tok.decode(&got, false), text);
        assert_eq!(tok.decode(&got, false), c["decoded"].as_str().unwrap());
    }
    assert!(bad.is_empty(), "{} of 35 cases differ:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn smollm2_special_tokens_and_end_of_generation() {
    let (_, tok) = smollm2();
    let text = "<|im_start|>user\nHi<|im_end|>";
    let parsed = tok.encode(text, false, true).unwrap();
    assert_eq!(parsed.first(), Some(&1));
    assert_eq!(parsed.last(), Some(&2));
    // Without parse_special the markers are plain text.
    let plain = tok.encode(text, false, false).unwrap();
    assert!(!plain.iter().any(|&i| tok.is_control(i)), "{plain:?}");
    assert_eq!(tok.decode(&plain, false), text);
    assert_eq!(tok.decode(&parsed, false), text);
    assert_eq!(tok.decode(&parsed, true), "user\nHi");
    // <|endoftext|> (0) and <|im_end|> (2 = eos).
    assert_eq!(tok.eog_ids(), &[0, 2]);
    assert_eq!(tok.token_bytes(216), b" ".to_vec());
    assert_eq!(tok.token_bytes(1), b"<|im_start|>".to_vec());
    assert!(tok.token_bytes(1_000_000).is_empty());
    assert_eq!(tok.piece(1_000_000), None);
}

#[test]
fn stream_decoder_never_breaks_a_character() {
    let (_, tok) = smollm2();
    let text = "naïve café 日本語のテキスト 한국어 emoji 🤗🚀👍🏽 👨\u{200d}👩\u{200d}👧 flags 🇫🇷 ∑∫√ done";
    let ids = tok.encode(text, false, true).unwrap();
    // Some tokens must carry only part of a character, or the test would prove nothing.
    assert!(ids.iter().any(|&i| std::str::from_utf8(&tok.token_bytes(i)).is_err()));
    let mut d = StreamDecoder::new();
    let mut out = String::new();
    for &id in &ids {
        let s = d.push(&tok, id);
        assert!(!s.contains('\u{FFFD}'), "broken character after {id}: {s:?}");
        out.push_str(&s);
    }
    out.push_str(&d.finish());
    assert_eq!(out, text);
    // A lone leading byte of a 4-byte character comes out as U+FFFD only at finish.
    let first = ids.iter().copied().find(|&i| std::str::from_utf8(&tok.token_bytes(i)).is_err()).unwrap();
    let mut d = StreamDecoder::new();
    let s = d.push(&tok, first);
    let rest = d.finish();
    assert_eq!(format!("{s}{rest}"), String::from_utf8_lossy(&tok.token_bytes(first)));
}

#[test]
fn split_regexes_of_known_pre_tokenizers() {
    assert_eq!(pre_tokenize("gpt-2", "Hello  world's 123").unwrap(), ["Hello", " ", " world", "'s", " 123"]);
    assert_eq!(pre_tokenize("smollm", "a 123").unwrap(), ["a", " ", "1", "2", "3"]);
    let e = pre_tokenize("no-such-pre", "x").unwrap_err().to_string();
    assert!(e.contains("no-such-pre"), "{e}");
}

fn tokenizer_dir() -> PathBuf {
    test_llm().join("tokenizer")
}

/// Encodes every case of a reference (`add_special`, control tokens parsed) and returns the
/// failures, checking decode on the matches with `check_decode`.
fn run_cases(tok: &LlmTokenizer, cases: &[Value], add_special: bool, check_decode: impl Fn(&str, &[u32], &str)) -> Vec<String> {
    let mut bad = Vec::new();
    for c in cases {
        let text = c["text"].as_str().unwrap();
        let want = ids_of(&c["ids"]);
        let got = tok.encode(text, add_special, true).unwrap();
        if got != want {
            bad.push(format!("{text:?}\n  got  {got:?}\n  want {want:?}"));
            continue;
        }
        check_decode(text, &got, c["decoded"].as_str().unwrap());
    }
    bad
}

#[test]
fn every_fixture_vocabulary_matches_transformers() {
    let r = json(&tokenizer_dir().join("fixtures.json"));
    let mut seen = 0;
    for v in r["vocabs"].as_array().unwrap() {
        let cases = v["cases"].as_array().unwrap();
        assert!(cases.len() >= 40);
        for name in v["fixtures"].as_array().unwrap() {
            let name = name.as_str().unwrap();
            let g = Gguf::open(test_llm().join("fixtures").join(format!("{name}.gguf"))).unwrap();
            let tok = LlmTokenizer::from_gguf(&g).unwrap();
            assert_eq!(tok.pre_name(), Some("gpt-2"), "{name}");
            let n = tok.vocab_size() as u32;
            assert_eq!(tok.bos(), Some(n - 4));
            assert_eq!(tok.eos(), Some(n - 3));
            // eos and <|im_end|> (control).
            assert_eq!(tok.eog_ids(), &[n - 3, n - 1]);
            let bad = run_cases(&tok, cases, true, |text, ids, decoded| {
                assert_eq!(decoded, text);
                assert_eq!(tok.decode(ids, false), text, "{name}");
            });
            assert!(bad.is_empty(), "{name}: {} of {} cases differ:\n{}", bad.len(), cases.len(), bad.join("\n"));
            seen += 1;
        }
    }
    assert_eq!(seen, 17);
}

#[test]
fn split_regexes_match_hf_tokenizers_split() {
    let r = json(&tokenizer_dir().join("splits.json"));
    let texts: Vec<&str> = r["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let families = r["families"].as_object().unwrap();
    for fam in ["gpt-2", "smollm", "default", "llama3", "qwen2"] {
        let want = families[fam]["pieces"].as_array().unwrap();
        assert_eq!(want.len(), texts.len());
        let mut bad = Vec::new();
        for (text, want) in texts.iter().zip(want) {
            let want: Vec<&str> = want.as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
            let got = pre_tokenize(fam, text).unwrap();
            if got != want {
                bad.push(format!("{text:?}\n  got  {got:?}\n  want {want:?}"));
            }
        }
        assert!(bad.is_empty(), "{fam}: {} of {} texts differ:\n{}", bad.len(), texts.len(), bad.join("\n"));
    }
    // The aliases llama.cpp maps to the same families.
    assert_eq!(pre_tokenize("llama-bpe", "x 1234").unwrap(), ["x", " ", "123", "4"]);
    assert_eq!(pre_tokenize("qwen2", "x 1234").unwrap(), ["x", " ", "1", "2", "3", "4"]);
}

#[test]
fn sentencepiece_vocabulary_matches_transformers() {
    let g = Gguf::open(tokenizer_dir().join("spm.gguf")).unwrap();
    let tok = LlmTokenizer::from_gguf(&g).unwrap();
    let r = json(&tokenizer_dir().join("spm.json"));
    assert_eq!(tok.vocab_size() as u64, r["n_vocab"].as_u64().unwrap());
    assert_eq!((tok.bos(), tok.eos()), (Some(1), Some(2)));
    assert!(tok.adds_bos());
    assert_eq!(tok.pre_name(), None);
    let cases = r["cases"].as_array().unwrap();
    let bad = run_cases(&tok, cases, true, |text, ids, decoded| {
        assert_eq!(tok.decode(ids, false), decoded, "{text:?}");
        if !text.contains("<|im_start|>") {
            assert_eq!(tok.decode(ids, true), text);
        }
    });
    assert!(bad.is_empty(), "{} of {} cases differ:\n{}", bad.len(), cases.len(), bad.join("\n"));
    // Byte tokens decode to their byte; a character split into bytes streams back whole.
    assert_eq!(tok.token_bytes(4 + 0xE6), vec![0xE6]);
    let text = "日本 🤗 x";
    let ids = tok.encode(text, true, false).unwrap();
    let mut d = StreamDecoder::skipping_special();
    let mut out = String::new();
    for &id in &ids {
        out.push_str(&d.push(&tok, id));
    }
    out.push_str(&d.finish());
    assert_eq!(out, text);
}

/// A GGUF v3 file with no tensors and the given metadata (value = (type, encoded bytes)).
fn gguf_bytes(kv: &[(&str, u32, Vec<u8>)]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend((kv.len() as u64).to_le_bytes());
    for (k, ty, v) in kv {
        b.extend((k.len() as u64).to_le_bytes());
        b.extend(k.as_bytes());
        b.extend(ty.to_le_bytes());
        b.extend(v);
    }
    while b.len() % 32 != 0 {
        b.push(0);
    }
    b
}
const T_I32: u32 = 5;
const T_U32: u32 = 4;
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;
fn enc_str(s: &str) -> Vec<u8> {
    let mut b = (s.len() as u64).to_le_bytes().to_vec();
    b.extend(s.as_bytes());
    b
}
fn enc_strs(v: &[&str]) -> Vec<u8> {
    let mut b = T_STRING.to_le_bytes().to_vec();
    b.extend((v.len() as u64).to_le_bytes());
    for s in v {
        b.extend(enc_str(s));
    }
    b
}
fn enc_i32s(v: &[i32]) -> Vec<u8> {
    let mut b = T_I32.to_le_bytes().to_vec();
    b.extend((v.len() as u64).to_le_bytes());
    for x in v {
        b.extend(x.to_le_bytes());
    }
    b
}

/// A tiny byte-level vocabulary: the 256 byte characters, "ab" from merge "a b", one control.
struct Vocab {
    model: &'static str,
    pre: Option<&'static str>,
    tokens: Option<Vec<String>>,
    types: Option<Vec<i32>>,
    merges: Option<Vec<String>>,
    extra: Vec<(&'static str, u32, Vec<u8>)>,
}

fn byte_level_chars() -> Vec<String> {
    let mut printable: Vec<u32> = (33..=126).chain(161..=172).chain(174..=255).collect();
    let mut n = 0;
    let mut all = Vec::new();
    for b in 0..256u32 {
        if !printable.contains(&b) {
            printable.push(256 + n);
            n += 1;
        }
    }
    // ids 0..255 in bytes_to_unicode() order.
    for c in printable {
        all.push(char::from_u32(c).unwrap().to_string());
    }
    all
}

impl Vocab {
    fn good() -> Vocab {
        let mut tokens = byte_level_chars();
        tokens.push("ab".into());
        tokens.push("<|end|>".into());
        let mut types = vec![1; 257];
        types.push(3);
        Vocab { model: "gpt2", pre: Some("gpt-2"), tokens: Some(tokens), types: Some(types), merges: Some(vec!["a b".into()]), extra: vec![] }
    }
    fn build(&self) -> Result<LlmTokenizer, String> {
        let mut kv: Vec<(&str, u32, Vec<u8>)> = vec![("tokenizer.ggml.model", T_STRING, enc_str(self.model))];
        if let Some(p) = self.pre {
            kv.push(("tokenizer.ggml.pre", T_STRING, enc_str(p)));
        }
        if let Some(t) = &self.tokens {
            kv.push(("tokenizer.ggml.tokens", T_ARRAY, enc_strs(&t.iter().map(String::as_str).collect::<Vec<_>>())));
        }
        if let Some(t) = &self.types {
            kv.push(("tokenizer.ggml.token_type", T_ARRAY, enc_i32s(t)));
        }
        if let Some(m) = &self.merges {
            kv.push(("tokenizer.ggml.merges", T_ARRAY, enc_strs(&m.iter().map(String::as_str).collect::<Vec<_>>())));
        }
        kv.extend(self.extra.iter().cloned());
        let g = Gguf::from_bytes("test", gguf_bytes(&kv)).map_err(|e| format!("gguf: {e}"))?;
        LlmTokenizer::from_gguf(&g).map_err(|e| e.to_string())
    }
}

fn err_of(v: Vocab) -> String {
    match v.build() {
        Ok(_) => panic!("damaged metadata was accepted"),
        Err(e) => e,
    }
}

#[test]
fn a_hand_written_vocabulary_works() {
    let tok = Vocab::good().build().unwrap();
    assert_eq!(tok.encode("abc<|end|>", false, true).unwrap(), vec![256, 66, 257]);
    assert_eq!(tok.encode("abc<|end|>", false, false).unwrap().len(), 9);
    assert_eq!(tok.decode(&[256, 66, 257], false), "abc<|end|>");
    assert_eq!(tok.decode(&[256, 66, 257], true), "abc");
    // An id out of range decodes to nothing rather than panicking.
    assert_eq!(tok.decode(&[256, 9999], false), "ab");
    // <|end|> is one of the end-of-turn texts llama.cpp knows.
    assert_eq!(tok.eog_ids(), &[257]);
    // No pre key: llama.cpp's "default" family.
    let tok = Vocab { pre: None, ..Vocab::good() }.build().unwrap();
    assert_eq!(tok.pre_name(), Some("default"));
}

#[test]
fn damaged_metadata_is_an_error() {
    let has = |e: String, what: &str| assert!(e.contains(what), "{e:?} does not mention {what:?}");
    has(err_of(Vocab { tokens: None, ..Vocab::good() }), "tokenizer.ggml.tokens is missing");
    has(err_of(Vocab { tokens: Some(vec![]), types: None, merges: Some(vec![]), ..Vocab::good() }), "empty");
    has(err_of(Vocab { merges: None, ..Vocab::good() }), "merges is missing");
    has(err_of(Vocab { merges: Some(vec!["a zz".into()]), ..Vocab::good() }), "unknown token \"zz\"");
    has(err_of(Vocab { merges: Some(vec!["b c".into()]), ..Vocab::good() }), "unknown token \"bc\"");
    has(err_of(Vocab { merges: Some(vec!["ab".into()]), ..Vocab::good() }), "not two tokens");
    has(err_of(Vocab { types: Some(vec![1; 10]), ..Vocab::good() }), "token_type has 10 entries for 258 tokens");
    let mut types = vec![1; 258];
    types[5] = 42;
    has(err_of(Vocab { types: Some(types), ..Vocab::good() }), "token 5 has an unknown token type");
    has(err_of(Vocab { pre: Some("mystery-pre"), ..Vocab::good() }), "\"mystery-pre\"");
    has(err_of(Vocab { model: "bert", ..Vocab::good() }), "unsupported tokenizer model \"bert\"");
    let extra = vec![("tokenizer.ggml.eos_token_id", T_U32, 258u32.to_le_bytes().to_vec())];
    has(err_of(Vocab { extra, ..Vocab::good() }), "eos_token_id = 258 is out of range");
    let extra = vec![("tokenizer.ggml.bos_token_id", T_STRING, enc_str("x"))];
    err_of(Vocab { extra, ..Vocab::good() });
    let extra = vec![("tokenizer.ggml.tokens", T_STRING, enc_str("x"))];
    err_of(Vocab { tokens: None, extra, ..Vocab::good() });
    // SentencePiece: scores must match the tokens.
    let extra = vec![("tokenizer.ggml.scores", T_ARRAY, enc_i32s(&[0; 3]))];
    has(err_of(Vocab { model: "llama", merges: None, extra, ..Vocab::good() }), "scores has 3 entries for 258 tokens");
    // A character with no token and no unknown token: an error at encode, not a panic.
    let mut tokens: Vec<String> = byte_level_chars().into_iter().take(200).collect();
    tokens.push("<|end|>".into());
    let tok = Vocab { tokens: Some(tokens), types: None, merges: Some(vec![]), ..Vocab::good() }.build().unwrap();
    // (The first 200 byte characters leave out byte 0x20.)
    let e = tok.encode("a b", false, true).unwrap_err().to_string();
    assert!(e.contains("no token"), "{e}");
}

fn msg(role: &str, content: &str) -> ChatMessage {
    ChatMessage { role: role.into(), content: content.into() }
}

#[test]
fn smollm2_chat_template_renders_the_reference_prompt() {
    let (g, tok) = smollm2();
    let r = json(&test_llm().join("smollm2-reference.json"));
    let chat = &r["chat"];
    let t = ChatTemplate::from_gguf(&g, &tok).unwrap().expect("SmolLM2 has a chat template");
    assert_eq!(t.name(), "gguf");
    assert_eq!(t.source(), chat["template"].as_str().unwrap());
    let messages: Vec<ChatMessage> = serde_json::from_value(chat["messages"].clone()).unwrap();
    let text = t.render(&messages, true).unwrap();
    assert_eq!(text, chat["prompt_text"].as_str().unwrap());
    assert_eq!(tok.encode(&text, false, true).unwrap(), ids_of(&chat["prompt_ids"]));
    // Without a system message the template adds its own.
    let text = t.render(&[msg("user", "Hi")], false).unwrap();
    assert!(text.starts_with("<|im_start|>system\nYou are a helpful AI assistant named SmolLM"), "{text}");
    assert!(text.ends_with("<|im_start|>user\nHi<|im_end|>\n"), "{text}");
    // SmolLM2's template is chatml plus that default system turn.
    let chatml = ChatTemplate::builtin("chatml", &tok).unwrap();
    assert_eq!(chatml.render(&messages, true).unwrap(), chat["prompt_text"].as_str().unwrap());
    // The fixtures have no template.
    let g = Gguf::open(test_llm().join("fixtures/llama-f32.gguf")).unwrap();
    let ftok = LlmTokenizer::from_gguf(&g).unwrap();
    assert!(ChatTemplate::from_gguf(&g, &ftok).unwrap().is_none());
}

#[test]
fn builtin_and_hf_style_templates() {
    let tok = Vocab::good().build().unwrap();
    let conv = [msg("system", "  Be brief.  "), msg("user", "Hi")];
    let l3 = ChatTemplate::builtin("llama3", &tok).unwrap();
    assert_eq!(l3.name(), "llama3");
    // This vocabulary has no BOS: bos_token renders empty.
    assert_eq!(
        l3.render(&conv, true).unwrap(),
        "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    );
    assert!(ChatTemplate::builtin("nope", &tok).unwrap_err().to_string().contains("\"nope\""));
    // The HF-isms: raise_exception, |tojson, Python string/dict methods, loop vars,
    // namespace, trim_blocks / lstrip_blocks.
    let src = "{%- set ns = namespace(n=0) -%}
{% for m in messages %}
    {% if m.role not in ['system', 'user', 'assistant'] %}{{ raise_exception('bad role ' + m.role) }}{% endif %}
    {% set ns.n = ns.n + 1 %}
[{{ loop.index }}/{{ loop.length }}{% if loop.last %} last{% endif %}] {{ m.role.upper() }}: {{ m.content.strip() }} {{ m.content.split('.')[0].lstrip().startswith('Be') }} {{ m | tojson }}
{% endfor %}
{{ {'a': 1, 'b': [true, none, 'x\"y']} | tojson }} {{ {'k': 'v'}.items() | list }} {{ {'k': 'v'}.get('z', 'dflt') }} {{ ns.n }}
{{ strftime_now('%Y')|length }}";
    let t = ChatTemplate::from_source("test", src, &tok).unwrap();
    let out = t.render(&conv, false).unwrap();
    let want = "[1/2] SYSTEM: Be brief. True {\"role\": \"system\", \"content\": \"  Be brief.  \"}
[2/2 last] USER: Hi False {\"role\": \"user\", \"content\": \"Hi\"}
{\"a\": 1, \"b\": [true, null, \"x\\\"y\"]} [[\"k\", \"v\"]] dflt 2
4";
    assert_eq!(out, want);
    let e = t.render(&[msg("tool", "x")], false).unwrap_err().to_string();
    assert!(e.contains("bad role tool"), "{e}");
    // A template that does not compile is an error when it is loaded.
    assert!(ChatTemplate::from_source("bad", "{% for %}", &tok).is_err());
}

/// The real vocabularies `scripts/fetch-vocabs.sh` caches (llama.cpp's `models/ggml-vocab-*`):
/// `NX_VULKAN_VOCABS`, else the model cache. Absent → the test fails saying how to fetch them.
fn vocabs_dir() -> PathBuf {
    let dir = match std::env::var_os("NX_VULKAN_VOCABS") {
        Some(p) => PathBuf::from(p),
        None => model_cache().join("llama.cpp-vocabs"),
    };
    assert!(
        dir.join(".complete").is_file() || std::env::var_os("NX_VULKAN_VOCABS").is_some(),
        "vocabularies not found at {}: run `bash scripts/fetch-vocabs.sh` (or set NX_VULKAN_VOCABS)",
        dir.display()
    );
    dir
}

/// One vocabulary's test texts and the ids its Hugging Face tokenizer gave them
/// (`tokenizer.encode(text, add_special_tokens=False)`): `.inp` holds the texts, each followed by
/// "\n__ggml_vocab_test__\n"; `.out` one line of space-separated ids per text.
fn vocab_cases(dir: &Path, name: &str) -> Vec<(String, Vec<u32>)> {
    let read = |ext: &str| {
        let p = dir.join(format!("ggml-vocab-{name}.gguf{ext}"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let inp = read(".inp");
    let out = read(".out");
    let texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    let lines: Vec<&str> = out.lines().collect();
    // The last separator leaves one empty piece after it.
    assert_eq!(texts.len(), lines.len() + 1, "{name}: texts and id lines differ in count");
    texts
        .iter()
        .zip(&lines)
        .map(|(t, l)| (t.to_string(), l.split_whitespace().map(|x| x.parse().unwrap()).collect()))
        .collect()
}

#[test]
fn real_vocabularies_match_their_hugging_face_tokenizers() {
    let dir = vocabs_dir();
    // (file, pre-tokenizer family we should pick, vocabulary size)
    let vocabs: [(&str, Option<&str>, usize); 8] = [
        ("llama-bpe", Some("llama3"), 128256),
        ("qwen2", Some("qwen2"), 151936),
        ("gpt-2", Some("gpt-2"), 50257),
        ("starcoder", Some("smollm"), 49152),
        ("refact", Some("smollm"), 49216),
        ("command-r", Some("smollm"), 256000),
        ("llama-spm", None, 32000),
        ("phi-3", None, 32064),
    ];
    let mut report = Vec::new();
    let mut failed = false;
    let mut compared = 0;
    for (name, pre, n_vocab) in vocabs {
        let g = Gguf::open(dir.join(format!("ggml-vocab-{name}.gguf"))).unwrap();
        let tok = LlmTokenizer::from_gguf(&g).unwrap_or_else(|e| panic!("{name}: {e}"));
        let cases = vocab_cases(&dir, name);
        assert!(cases.len() >= 40, "{name}: {} texts", cases.len());
        let mut bad = Vec::new();
        for (text, want) in &cases {
            let got = tok.encode(text, false, true).unwrap();
            if &got != want {
                bad.push(format!("{text:?}\n  got  {got:?}\n  want {want:?}"));
            } else if pre.is_some() && tok.decode(&got, false) != *text {
                // Byte-level BPE loses nothing: the ids decode back to the text.
                bad.push(format!("{text:?} decodes to {:?}", tok.decode(&got, false)));
            }
            compared += 1;
        }
        if !bad.is_empty() || tok.pre_name() != pre || tok.vocab_size() != n_vocab {
            failed = true;
            report.push(format!(
                "{name}: pre {:?} vocab {}; {} of {} texts differ\n{}",
                tok.pre_name(),
                tok.vocab_size(),
                bad.len(),
                cases.len(),
                bad.join("\n")
            ));
        }
    }
    assert!(!failed, "{}", report.join("\n"));
    assert_eq!(compared, 8 * 46);
}

fn real_vocabs_reference() -> Value {
    json(&tokenizer_dir().join("real-vocabs.json"))
}

#[test]
fn llama3_and_qwen2_vocabularies_on_hard_texts() {
    let dir = vocabs_dir();
    let r = real_vocabs_reference();
    for v in r["vocabs"].as_array().unwrap() {
        let name = v["vocab"].as_str().unwrap();
        let g = Gguf::open(dir.join(format!("ggml-vocab-{name}.gguf"))).unwrap();
        let tok = LlmTokenizer::from_gguf(&g).unwrap();
        let cases = v["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 42);
        let bad = run_cases(&tok, cases, false, |text, ids, decoded| {
            assert_eq!(tok.decode(ids, false), decoded, "{name}: {text:?}");
        });
        assert!(bad.is_empty(), "{name}: {} of {} cases differ:\n{}", bad.len(), cases.len(), bad.join("\n"));
    }
    // NFC is Qwen2's alone: a decomposed accent is one composed character there, two in Llama-3.
    let qwen = LlmTokenizer::from_gguf(&Gguf::open(dir.join("ggml-vocab-qwen2.gguf")).unwrap()).unwrap();
    let llama = LlmTokenizer::from_gguf(&Gguf::open(dir.join("ggml-vocab-llama-bpe.gguf")).unwrap()).unwrap();
    assert_eq!(qwen.encode("caf\u{65}\u{301}", false, false).unwrap(), qwen.encode("café", false, false).unwrap());
    assert_ne!(llama.encode("caf\u{65}\u{301}", false, false).unwrap(), llama.encode("café", false, false).unwrap());
}

#[test]
fn chat_templates_of_real_vocabularies_render_as_transformers() {
    let dir = vocabs_dir();
    let r = real_vocabs_reference();
    let conversations: Vec<Vec<ChatMessage>> = serde_json::from_value(r["conversations"].clone()).unwrap();
    let templates = r["templates"].as_array().unwrap();
    assert_eq!(templates.len(), 3);
    for t in templates {
        let name = t["vocab"].as_str().unwrap();
        let g = Gguf::open(dir.join(format!("ggml-vocab-{name}.gguf"))).unwrap();
        let tok = LlmTokenizer::from_gguf(&g).unwrap();
        let tmpl = ChatTemplate::from_gguf(&g, &tok).unwrap().unwrap_or_else(|| panic!("{name}: no template"));
        assert_eq!(tmpl.name(), "gguf");
        let prompts = t["prompts"].as_array().unwrap();
        assert_eq!(prompts.len(), conversations.len());
        for (c, want) in conversations.iter().zip(prompts) {
            assert_eq!(tmpl.render(c, true).unwrap(), want.as_str().unwrap(), "{name}");
        }
    }
}

#[test]
fn real_vocabularies_end_generation_where_their_chats_end_a_turn() {
    let dir = vocabs_dir();
    // (file, BOS, EOS, adds BOS, end-of-generation tokens): a chat must stop at the token its
    // template closes the assistant's turn with (<|eot_id|>, <|im_end|>, <|end|>, ...).
    let want: [(&str, &str, &str, bool, &[(u32, &str)]); 8] = [
        ("llama-bpe", "<|begin_of_text|>", "<|end_of_text|>", true, &[(128001, "<|end_of_text|>"), (128009, "<|eot_id|>")]),
        ("qwen2", "<|endoftext|>", "<|endoftext|>", false, &[(151643, "<|endoftext|>"), (151645, "<|im_end|>")]),
        ("gpt-2", "<|endoftext|>", "<|endoftext|>", false, &[(50256, "<|endoftext|>")]),
        ("starcoder", "<|endoftext|>", "<|endoftext|>", false, &[(0, "<|endoftext|>")]),
        ("refact", "<|endoftext|>", "<|endoftext|>", false, &[(0, "<|endoftext|>")]),
        ("command-r", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", true, &[(255001, "<|END_OF_TURN_TOKEN|>")]),
        ("llama-spm", "<s>", "</s>", true, &[(2, "</s>")]),
        ("phi-3", "<s>", "<|endoftext|>", true, &[(32000, "<|endoftext|>"), (32007, "<|end|>")]),
    ];
    for (name, bos, eos, adds_bos, eog) in want {
        let g = Gguf::open(dir.join(format!("ggml-vocab-{name}.gguf"))).unwrap();
        let tok = LlmTokenizer::from_gguf(&g).unwrap();
        assert_eq!(tok.bos().and_then(|i| tok.piece(i)), Some(bos), "{name}");
        assert_eq!(tok.eos().and_then(|i| tok.piece(i)), Some(eos), "{name}");
        assert_eq!(tok.adds_bos(), adds_bos, "{name}");
        let got: Vec<(u32, &str)> = tok.eog_ids().iter().map(|&i| (i, tok.piece(i).unwrap())).collect();
        assert_eq!(got, eog, "{name}");
    }
    // A real chat prompt through a real vocabulary: Qwen2's template, then its tokenizer — the
    // turn markers are single control tokens and the text around them decodes back unchanged.
    let g = Gguf::open(dir.join("ggml-vocab-qwen2.gguf")).unwrap();
    let tok = LlmTokenizer::from_gguf(&g).unwrap();
    let tmpl = ChatTemplate::from_gguf(&g, &tok).unwrap().unwrap();
    let prompt = tmpl.render(&[msg("user", "Say hi in 日本語 🤗")], true).unwrap();
    let ids = tok.encode(&prompt, true, true).unwrap();
    let (start, end) = (tok.token_id("<|im_start|>").unwrap(), tok.token_id("<|im_end|>").unwrap());
    assert_eq!(ids.iter().filter(|&&i| i == start).count(), 3, "system, user, assistant");
    assert_eq!(ids.iter().filter(|&&i| i == end).count(), 2);
    assert_eq!(ids[0], start, "Qwen2 adds no BOS");
    assert_eq!(tok.decode(&ids, false), prompt);
}
