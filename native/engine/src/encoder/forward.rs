//! A loaded encoder and its forward pass: one recording (one submission) per batch.

use super::config::EncoderConfig;
use super::kernels::Precision;
use crate::error::{invalid, Result};
use crate::Context;
use std::path::Path;
use std::sync::Arc;

/// How to load a checkpoint.
#[derive(Clone, Debug, Default)]
pub struct EncoderOptions {
    pub precision: Precision,
    /// Overrides the checkpoint's max tokens per input (at most its position limit).
    pub max_tokens: Option<usize>,
}

/// One input's embedding.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    pub vector: Vec<f32>,
    /// Tokens the model saw (special tokens included).
    pub tokens: usize,
    /// The input was longer than `max_tokens` and was cut (as the reference does).
    pub truncated: bool,
}

/// What a loaded encoder is, for answers and `/health`.
#[derive(Clone, Debug, PartialEq)]
pub struct EncoderInfo {
    /// The checkpoint folder's name.
    pub model: String,
    pub device: String,
    pub precision: Precision,
    pub dimensions: usize,
    pub max_tokens: usize,
    pub config: EncoderConfig,
}

/// A checkpoint loaded on a device: weights uploaded once, tokenizer ready.
pub struct Encoder {
    ctx: Arc<Context>,
    info: EncoderInfo,
}

impl Encoder {
    /// Loads `dir` onto `ctx`. Must run on an engine thread ([`crate::exec::run`]).
    pub fn load(ctx: Arc<Context>, dir: &Path, options: &EncoderOptions) -> Result<Encoder> {
        let _ = (ctx, dir, options);
        Err(invalid!("encoder: not built yet"))
    }

    pub fn info(&self) -> &EncoderInfo {
        &self.info
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Embeds `texts` as one batch (one submission). Must run on an engine thread.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        let _ = texts;
        Err(invalid!("encoder: not built yet"))
    }
}
