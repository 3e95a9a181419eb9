//! A checkpoint folder's configuration: the model (`config.json`) and sentence-transformers'
//! pipeline around it (`modules.json`, `sentence_bert_config.json`, `1_Pooling/config.json`).

use crate::error::{invalid, Result};
use std::path::Path;

/// How token rows become one vector per input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pooling {
    /// Mean of the sequence's token rows (special tokens included, as sentence-transformers).
    Mean,
    /// The first token's row ([CLS]).
    Cls,
}

/// What the forward pass needs to know about a checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct EncoderConfig {
    pub model_type: String,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub vocab: usize,
    pub max_positions: usize,
    pub type_vocab: usize,
    pub layer_norm_eps: f32,
    /// Tokens per input after truncation (sentence-transformers' max_seq_length, else the
    /// model's position limit).
    pub max_tokens: usize,
    pub pooling: Pooling,
    /// An L2-normalisation module follows pooling.
    pub normalize: bool,
}

impl EncoderConfig {
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    pub fn read(_dir: &Path) -> Result<EncoderConfig> {
        Err(invalid!("encoder config: not built yet"))
    }
}
