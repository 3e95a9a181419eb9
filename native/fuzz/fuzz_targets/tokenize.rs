//! The GGUF tokenizer on arbitrary text and arbitrary ids.
//!
//! The first input byte picks the case: even — the rest, as lossy UTF-8 text, is encoded with
//! special-token parsing off and on and decoded again, which must give the text back whenever
//! the text was valid UTF-8 holding no control token's text and no byte the vocabulary cannot
//! spell (SmolLM2 has no byte-level token for 21 bytes — 0x04 0x06 0x13 0x14 0x16 0x1D 0xC0 0xC1
//! 0xF1–0xFF — which encode to its unknown token, `<|endoftext|>`, as in HF); odd — the rest, as little-endian
//! u32 ids (some out of range), is decoded whole, skipping specials or not, and token by token
//! through a `StreamDecoder`. Nothing may panic. The tokenizer is SmolLM2-135M-Instruct's
//! (`$NX_FUZZ_TOKENIZER_GGUF`, else the model cache), or a fixture's when neither is there.
#![no_main]

use nx_vulkan_engine::llm::tokenizer::{LlmTokenizer, StreamDecoder};
use nx_vulkan_engine::llm::Gguf;
use std::path::PathBuf;
use std::sync::OnceLock;

struct Subject {
    tok: LlmTokenizer,
    /// The text of every control token (text containing one may not round-trip).
    specials: Vec<String>,
    /// Bytes whose byte-level character is not in the vocabulary (byte-pair models): text
    /// holding one cannot round-trip.
    unencodable: Vec<u8>,
}

/// GPT-2's byte-level alphabet: the character that stands for byte `b`.
fn byte_char(b: u8) -> char {
    let printable = |b: u8| matches!(b, 33..=126 | 161..=172 | 174..=255);
    if printable(b) {
        return b as char;
    }
    let n = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + n).unwrap()
}

fn subject() -> &'static Subject {
    static S: OnceLock<Subject> = OnceLock::new();
    S.get_or_init(|| {
        let smollm2 = dirs_home().join(".cache/nx_vulkan/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test/llm/fixtures/llama-q8_0.gguf");
        let path = std::env::var_os("NX_FUZZ_TOKENIZER_GGUF").map(PathBuf::from).unwrap_or(if smollm2.exists() { smollm2 } else { fixture });
        eprintln!("tokenize: tokenizer of {}", path.display());
        let g = Gguf::open(&path).unwrap();
        let tok = LlmTokenizer::from_gguf(&g).unwrap();
        let specials = (0..tok.vocab_size() as u32).filter(|&id| tok.is_control(id)).filter_map(|id| tok.piece(id).map(str::to_owned)).collect();
        let unencodable: Vec<u8> = match tok.pre_name() {
            Some(_) => (0..=255u8).filter(|&b| tok.token_id(&byte_char(b).to_string()).is_none()).collect(),
            None => Vec::new(),
        };
        eprintln!("tokenize: bytes with no byte-level token: {unencodable:?}");
        Subject { tok, specials, unencodable }
    })
}

fn dirs_home() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default()
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let s = subject();
    if mode % 2 == 0 {
        let text = String::from_utf8_lossy(rest);
        let plain = matches!(text, std::borrow::Cow::Borrowed(_))
            && !s.specials.iter().any(|sp| text.contains(sp.as_str()))
            && !text.bytes().any(|b| s.unencodable.contains(&b));
        for parse_special in [false, true] {
            let ids = s.tok.encode(&text, false, parse_special).unwrap_or_else(|e| panic!("encode {text:?}: {e}"));
            let back = s.tok.decode(&ids, false);
            if plain {
                assert_eq!(back, text, "round trip (parse_special {parse_special}) through {ids:?}");
            }
            let _ = s.tok.encode(&text, true, parse_special);
        }
    } else {
        let n = s.tok.vocab_size() as u32;
        let ids: Vec<u32> = rest.chunks(4).map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            let v = u32::from_le_bytes(w);
            // Mostly valid ids, some just past the end, a few anywhere.
            match v >> 30 { 0 | 1 => v % n, 2 => n + v % 16, _ => v }
        }).collect();
        let whole = s.tok.decode(&ids, false);
        let _ = s.tok.decode(&ids, true);
        let mut stream = StreamDecoder::new();
        let mut streamed: String = ids.iter().map(|&id| stream.push(&s.tok, id)).collect();
        streamed.push_str(&stream.finish());
        assert_eq!(streamed, whole, "streamed decode of {ids:?}");
    }
});
