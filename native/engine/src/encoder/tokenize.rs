//! Texts to token ids with the checkpoint's `tokenizer.json` (the HF `tokenizers` crate),
//! truncated like sentence-transformers: at `max_tokens` including the special tokens, whatever
//! the file's own truncation/padding settings say (all-MiniLM-L6-v2's file pads and truncates
//! at 128 while sentence-transformers feeds up to 256); never padded — batches are packed.

use crate::error::{invalid, Result};
use std::path::Path;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// One input's tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tokens {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    /// The text had more tokens than `max_tokens` and was cut at the right.
    pub truncated: bool,
}

/// A checkpoint's tokenizer, set up as the reference pipeline uses it.
pub struct EncoderTokenizer {
    inner: Tokenizer,
    max_tokens: usize,
}

impl EncoderTokenizer {
    /// Loads `tokenizer.json`, truncating at `max_tokens` and never padding.
    pub fn load(path: &Path, max_tokens: usize) -> Result<EncoderTokenizer> {
        if max_tokens < 2 {
            return Err(invalid!("encoder: max_tokens {max_tokens} leaves no room for the special tokens"));
        }
        let mut inner = Tokenizer::from_file(path).map_err(|e| invalid!("{}: {e}", path.display()))?;
        inner
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| invalid!("{}: truncation: {e}", path.display()))?;
        inner.with_padding(None);
        Ok(EncoderTokenizer { inner, max_tokens })
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Tokenizes one text, special tokens included.
    pub fn encode(&self, text: &str) -> Result<Tokens> {
        let enc = self.inner.encode(text, true).map_err(|e| invalid!("tokenizer: {e}"))?;
        Ok(Tokens {
            ids: enc.get_ids().to_vec(),
            type_ids: enc.get_type_ids().to_vec(),
            truncated: !enc.get_overflowing().is_empty(),
        })
    }

    /// Tokenizes a batch, in parallel over the inputs (the tokenizers crate's thread pool;
    /// `TOKENIZERS_PARALLELISM=false` turns it off): 64 inputs of 128 tokens took 23 ms one by
    /// one on the H200 machine's CPU, longer than their forward pass.
    pub fn encode_all(&self, texts: &[&str]) -> Result<Vec<Tokens>> {
        if texts.len() < 2 {
            return texts.iter().map(|t| self.encode(t)).collect();
        }
        let encodings = self.inner.encode_batch(texts.to_vec(), true).map_err(|e| invalid!("tokenizer: {e}"))?;
        Ok(encodings
            .into_iter()
            .map(|enc| Tokens {
                ids: enc.get_ids().to_vec(),
                type_ids: enc.get_type_ids().to_vec(),
                truncated: !enc.get_overflowing().is_empty(),
            })
            .collect())
    }
}
