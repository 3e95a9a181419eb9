//! What every robustness check does with one input: parse it, and where that succeeds, do what a
//! loader does next — build the tokenizer, read the config, take every tensor's bytes, dequantize
//! a few blocks of each — asserting the reader's documented guarantees along the way. Shared by
//! `tests/gguf_robust.rs` and the `gguf_parse` fuzz target (`native/fuzz`), so both check the
//! same things.

use nx_vulkan_engine::llm::config::LlmConfig;
use nx_vulkan_engine::llm::tokenizer::LlmTokenizer;
use nx_vulkan_engine::llm::{quant, Gguf};

/// Values dequantized from each end of a tensor (whole blocks, at least one).
const DEQUANT_VALUES: u64 = 512;

/// What one input did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `Gguf::from_bytes` refused it.
    Refused,
    /// Parsed; `LlmConfig::from_gguf` refused it.
    ParsedNoConfig,
    /// Parsed, and a config came out.
    ParsedWithConfig,
}

/// Parses `bytes` as `name` and exercises the result; panics only on a broken guarantee.
pub fn exercise(name: &str, bytes: Vec<u8>) -> Outcome {
    let len = bytes.len() as u64;
    let g = match Gguf::from_bytes(name, bytes) {
        Ok(g) => g,
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with(name), "error does not name the file: {msg}");
            return Outcome::Refused;
        }
    };
    assert_eq!(g.file_size(), len);
    assert!(g.alignment.is_power_of_two());
    assert!(g.data_offset % g.alignment == 0 && g.data_offset <= len.next_multiple_of(g.alignment));
    let _ = format!("{g:?}");

    let mut extents = Vec::new();
    for t in &g.tensors {
        assert!(t.offset >= g.data_offset && (t.offset - g.data_offset) % g.alignment == 0, "{t:?}");
        assert!(t.offset.checked_add(t.size).is_some_and(|end| end <= len), "{t:?}");
        assert!(!t.dims.is_empty() && t.dims.len() <= 4, "{t:?}");
        assert_eq!(g.tensor(&t.name).map(|u| u.offset), Some(t.offset));
        let bytes = g.tensor_bytes(t);
        assert_eq!(bytes.len() as u64, t.size);
        let _ = (t.elements(), t.matrix_shape(), t.type_name());
        match t.ggml_type {
            None => assert_eq!(t.size, 0),
            Some(ty) => {
                assert_eq!(t.size, t.elements() / ty.block_size() * ty.block_bytes(), "{t:?}");
                dequantize_ends(ty, bytes);
            }
        }
        if t.size > 0 {
            extents.push((t.offset, t.offset + t.size));
        }
    }
    extents.sort_unstable();
    assert!(extents.windows(2).all(|w| w[0].1 <= w[1].0), "tensor extents overlap: {extents:?}");

    // Every typed accessor on every key: a wrong type is an error, never a panic.
    for (key, v) in &g.metadata {
        let _ = (g.u64(key), g.f64(key), g.str(key), g.bool(key), g.array(key), g.strings(key));
        let _ = (v.as_i64(), v.type_name());
    }

    // The tokenizer reads the same metadata (vocabulary, types, merges, special ids).
    if let Ok(tok) = LlmTokenizer::from_gguf(&g) {
        let ids = tok.encode("Hello, world! <|im_start|>user\n12 ÿ€😀", true, true).unwrap_or_default();
        let _ = tok.decode(&ids, true);
        let _ = tok.decode(&[0, 1, tok.vocab_size() as u32, u32::MAX], false);
    }

    match LlmConfig::from_gguf(&g) {
        Ok(cfg) => {
            let _ = (cfg.q_dim(), cfg.kv_dim());
            Outcome::ParsedWithConfig
        }
        Err(_) => Outcome::ParsedNoConfig,
    }
}

/// Dequantizes the first and the last few blocks of `bytes` (activation types must be refused).
fn dequantize_ends(ty: quant::GgmlType, bytes: &[u8]) {
    let (bs, bb) = (ty.block_size() as usize, ty.block_bytes() as usize);
    let blocks = bytes.len() / bb;
    let take = blocks.min((DEQUANT_VALUES as usize).div_ceil(bs).max(1));
    if take == 0 {
        return;
    }
    let mut out = vec![0f32; take * bs];
    for part in [&bytes[..take * bb], &bytes[bytes.len() - take * bb..]] {
        let r = quant::dequantize(ty, part, &mut out);
        assert_eq!(r.is_ok(), ty.is_weight_type(), "{} dequantize: {r:?}", ty.name());
    }
}
