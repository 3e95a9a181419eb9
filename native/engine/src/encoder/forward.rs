//! A loaded encoder and its forward pass: one recording (one submission) per batch.
//!
//! Per batch: tokenize, pack the sequences' rows one after another (no padding), upload ids,
//! positions, token types and sequence offsets, record embeddings → per layer [fused QKV
//! projection → attention → output projection with residual → layernorm → FFN up with GELU →
//! FFN down with residual → layernorm] → pooling (and L2 normalisation), submit once and read the `[B, H]`
//! result back. A batch too large for one recording is cut between sequences into chunks of at
//! most [`MAX_CHUNK_ROWS`] rows: since no kernel's numerics depend on the batch, the answer is
//! the same bits.

use super::config::EncoderConfig;
use super::kernels::{Activation, Precision};
use super::tokenize::{EncoderTokenizer, Tokens};
use super::weights::EncoderWeights;
use crate::dtype::DType;
use crate::error::{invalid, Result};
use crate::tensor::Tensor;
use crate::Context;
use std::path::Path;
use std::sync::Arc;

/// Token rows per recording: bounds the activations' memory (MiniLM: 16384 rows × 1536 f32
/// FFN activations = 96 MiB, under lavapipe's 128 MiB per buffer).
pub const MAX_CHUNK_ROWS: usize = 16384;

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
    /// Bytes of weights on the device.
    pub weight_bytes: u64,
    pub config: EncoderConfig,
}

/// A checkpoint loaded on a device: weights uploaded once, tokenizer ready.
pub struct Encoder {
    ctx: Arc<Context>,
    info: EncoderInfo,
    tokenizer: EncoderTokenizer,
    weights: EncoderWeights,
}

impl Encoder {
    /// Loads `dir` onto `ctx`. Must run on an engine thread ([`crate::exec::run`]).
    pub fn load(ctx: Arc<Context>, dir: &Path, options: &EncoderOptions) -> Result<Encoder> {
        if !dir.is_dir() {
            return Err(invalid!("encoder: {} is not a checkpoint folder", dir.display()));
        }
        let mut config = EncoderConfig::read(dir)?;
        if let Some(n) = options.max_tokens {
            if n < 2 || n > config.max_positions {
                return Err(invalid!("encoder: max_tokens {n} must be between 2 and the model's {} positions", config.max_positions));
            }
            config.max_tokens = n;
        }
        let tokenizer = EncoderTokenizer::load(&dir.join("tokenizer.json"), config.max_tokens)?;
        let weights = EncoderWeights::load(&ctx, &dir.join("model.safetensors"), &config, options.precision)?;
        let model = dir
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| dir.display().to_string());
        let info = EncoderInfo {
            model,
            device: ctx.caps.name.clone(),
            precision: options.precision,
            dimensions: config.hidden,
            max_tokens: config.max_tokens,
            weight_bytes: weights.bytes,
            config,
        };
        let encoder = Encoder { ctx, info, tokenizer, weights };
        // One forward pass now builds every kernel, so a precision the device cannot run is an
        // error here rather than at the first request, and the first request is not slowed.
        encoder.embed(&[""]).map_err(|e| invalid!("encoder: warm-up on {} ({}): {e}", encoder.info.device, encoder.info.precision.name()))?;
        Ok(encoder)
    }

    pub fn info(&self) -> &EncoderInfo {
        &self.info
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The token ids the model sees for `text` (special tokens included, truncated).
    pub fn tokenize(&self, text: &str) -> Result<Tokens> {
        self.tokenizer.encode(text)
    }

    /// Embeds `texts` as one batch (one submission per [`MAX_CHUNK_ROWS`] rows). Must run on
    /// an engine thread.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        let tokens = self.tokenizer.encode_all(texts)?;
        self.embed_tokens(&tokens)
    }

    /// Embeds already tokenized inputs (ids checked against the vocabulary here).
    pub fn embed_tokens(&self, tokens: &[Tokens]) -> Result<Vec<Embedding>> {
        let cfg = &self.info.config;
        for (i, t) in tokens.iter().enumerate() {
            if t.ids.is_empty() || t.ids.len() > cfg.max_tokens {
                return Err(invalid!("encoder: input {i} has {} tokens (1..={} allowed)", t.ids.len(), cfg.max_tokens));
            }
            if t.type_ids.len() != t.ids.len() {
                return Err(invalid!("encoder: input {i} has {} type ids for {} tokens", t.type_ids.len(), t.ids.len()));
            }
            if let Some(id) = t.ids.iter().find(|&&id| id as usize >= cfg.vocab) {
                return Err(invalid!("encoder: input {i} has token id {id}, outside the vocabulary of {}", cfg.vocab));
            }
            if let Some(ty) = t.type_ids.iter().find(|&&ty| ty as usize >= cfg.type_vocab) {
                return Err(invalid!("encoder: input {i} has token type {ty}, outside the {} types", cfg.type_vocab));
            }
        }
        let mut out = Vec::with_capacity(tokens.len());
        let mut start = 0;
        while start < tokens.len() {
            let mut rows = 0;
            let mut end = start;
            while end < tokens.len() && (end == start || rows + tokens[end].ids.len() <= MAX_CHUNK_ROWS) {
                rows += tokens[end].ids.len();
                end += 1;
            }
            let vectors = self.forward(&tokens[start..end])?;
            for (t, vector) in tokens[start..end].iter().zip(vectors) {
                out.push(Embedding { vector, tokens: t.ids.len(), truncated: t.truncated });
            }
            start = end;
        }
        Ok(out)
    }

    /// One recorded forward pass over `seqs` (packed), returning one vector per sequence.
    fn forward(&self, seqs: &[Tokens]) -> Result<Vec<Vec<f32>>> {
        let ctx = &*self.ctx;
        let cfg = &self.info.config;
        let w = &self.weights;
        let (h, inter) = (cfg.hidden, cfg.intermediate);
        let b = seqs.len();
        let mut ids = Vec::new();
        let mut positions = Vec::new();
        let mut types = Vec::new();
        let mut offsets = Vec::with_capacity(b + 1);
        offsets.push(0u32);
        let mut max_len = 0;
        for s in seqs {
            ids.extend_from_slice(&s.ids);
            types.extend_from_slice(&s.type_ids);
            positions.extend(0..s.ids.len() as u32);
            offsets.push(ids.len() as u32);
            max_len = max_len.max(s.ids.len());
        }
        let t = ids.len();
        // One upload holding ids, positions, token types and offsets (the kernels read views
        // of it), recorded with the pass: a staged copy rides in the same submission.
        let host: Vec<u8> = [&ids[..], &positions[..], &types[..], &offsets[..]].concat().iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut batch = ctx.batch()?;
        let inputs = ctx.record_upload(&mut batch, DType::U32, &[3 * t + b + 1], &host)?;
        let part = |start: usize, len: usize| inputs.slice(&[start], &[len], &[1]);
        let (ids_t, pos_t, types_t, offsets_t) = (part(0, t)?, part(t, t)?, part(2 * t, t)?, part(3 * t, b + 1)?);
        let rows = |n: usize| -> Result<Tensor> { ctx.empty(DType::F32, &[t, n]) };
        let precision = self.info.precision;
        let scale = 1.0 / (cfg.head_dim() as f32).sqrt();
        let eps = cfg.layer_norm_eps;

        let mut hidden = rows(h)?;
        ctx.record_encoder_embeddings(&mut batch, &ids_t, &pos_t, &types_t, &w.word, &w.position, &w.token_type, &w.embed_norm.0, &w.embed_norm.1, eps, &hidden)?;
        for l in &w.layers {
            let qkv = rows(3 * h)?;
            ctx.record_encoder_linear(&mut batch, &hidden, &l.qkv, &l.qkv_bias, Activation::None, None, precision, &qkv)?;
            let attn = rows(h)?;
            ctx.record_encoder_attention(&mut batch, &qkv, &offsets_t, b, max_len, cfg.heads, cfg.head_dim(), scale, &attn)?;
            let projected = rows(h)?;
            ctx.record_encoder_linear(&mut batch, &attn, &l.attn_out, &l.attn_out_bias, Activation::None, Some(&hidden), precision, &projected)?;
            let normed = rows(h)?;
            ctx.record_encoder_layernorm(&mut batch, &projected, &l.attn_norm.0, &l.attn_norm.1, eps, &normed)?;
            let up = rows(inter)?;
            ctx.record_encoder_linear(&mut batch, &normed, &l.ffn_up, &l.ffn_up_bias, Activation::Gelu, None, precision, &up)?;
            let down = rows(h)?;
            ctx.record_encoder_linear(&mut batch, &up, &l.ffn_down, &l.ffn_down_bias, Activation::None, Some(&normed), precision, &down)?;
            let next = rows(h)?;
            ctx.record_encoder_layernorm(&mut batch, &down, &l.ffn_norm.0, &l.ffn_norm.1, eps, &next)?;
            hidden = next;
        }
        let pooled = ctx.empty(DType::F32, &[b, h])?;
        ctx.record_encoder_pool(&mut batch, &hidden, &offsets_t, cfg.pooling, cfg.normalize, &pooled)?;
        batch.finish()?;
        let bytes = ctx.download(&pooled)?;
        let values: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        Ok(values.chunks_exact(h).map(|r| r.to_vec()).collect())
    }
}
