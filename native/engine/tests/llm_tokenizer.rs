//! The GGUF tokenizer and chat templates (no GPU): the real SmolLM2-135M-Instruct vocabulary
//! against test/llm/smollm2-reference.json (ids from llama.cpp's "smollm" pre-tokenization, chat
//! prompt from transformers' apply_chat_template), the 17 fixture vocabularies and the SentencePiece
//! vocabulary of test/llm/tokenizer/ against transformers' GGUF tokenizers, the Llama-3 / Qwen2 split
//! regexes against HF `tokenizers`' Split pre-tokenizer, streaming decode, and damaged metadata.

use nx_vulkan_engine::llm::tokenizer::{pre_tokenize, LlmTokenizer, StreamDecoder};
use nx_vulkan_engine::llm::Gguf;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn test_llm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test/llm")
}

fn json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

fn ids_of(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// The SmolLM2 GGUF: `NX_VULKAN_SMOLLM2`, else the cache `scripts/fetch-smollm2.sh` fills.
/// Absent → the test fails saying how to fetch it.
fn smollm2_path() -> PathBuf {
    let path = match std::env::var_os("NX_VULKAN_SMOLLM2") {
        Some(p) => PathBuf::from(p),
        None => {
            let cache = std::env::var_os("NX_VULKAN_MODEL_CACHE")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/nx_vulkan/models")))
                .expect("neither NX_VULKAN_MODEL_CACHE nor HOME is set");
            cache.join("SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
        }
    };
    assert!(
        path.is_file(),
        "SmolLM2 GGUF not found at {}: run `bash scripts/fetch-smollm2.sh` (it prints the path; \
         or set NX_VULKAN_SMOLLM2 to the file)",
        path.display()
    );
    path
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
