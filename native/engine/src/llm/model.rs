//! A GGUF model on the device: its weights uploaded as stored (no dequantization at load), the
//! rotary table, the KV cache of a fixed number of session slots, and the forward pass over a
//! packed set of token rows ([`Llm::record_forward`]).

use super::config::LlmConfig;
use super::gguf::{Gguf, TensorInfo};
use super::kernels::{AttnShape, Epilogue, QMatrix};
use super::quant::{dequantize, GgmlType};
use crate::dtype::DType;
use crate::error::{invalid, Result};
use crate::submit::Batch;
use crate::tensor::Tensor;
use crate::Context;
use std::path::Path;
use std::sync::Arc;

/// How a model is opened.
#[derive(Clone, Debug)]
pub struct LlmOptions {
    /// Positions per session (default: the model's context length, at most 4096).
    pub context: Option<usize>,
    /// Session slots in the KV cache: how many sessions can be live (and decoded together).
    pub slots: usize,
    /// KV cache in f16 (default) or f32.
    pub kv_f16: bool,
}

impl LlmOptions {
    /// The KV cache type by name: "f16" (true) or "f32" (false).
    pub fn parse_kv_type(name: &str) -> Result<bool> {
        match name {
            "f16" => Ok(true),
            "f32" => Ok(false),
            other => Err(invalid!("KV cache type {other:?}: expected \"f16\" or \"f32\"")),
        }
    }
}

impl Default for LlmOptions {
    fn default() -> Self {
        LlmOptions { context: None, slots: 4, kv_f16: true }
    }
}

pub struct Layer {
    pub attn_norm: Tensor,
    pub wq: QMatrix,
    pub wk: QMatrix,
    pub wv: QMatrix,
    pub qkv_bias: Option<(Tensor, Tensor, Tensor)>,
    pub qk_norm: Option<(Tensor, Tensor)>,
    pub wo: QMatrix,
    pub ffn_norm: Tensor,
    pub gate: QMatrix,
    pub up: QMatrix,
    pub down: QMatrix,
    pub cache_k: Tensor,
    pub cache_v: Tensor,
}

/// One token row of a forward step: session `slot`, position `pos`, input `token`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub slot: u32,
    pub pos: u32,
    pub token: u32,
}

pub struct Llm {
    pub ctx: Arc<Context>,
    pub config: LlmConfig,
    pub attn: AttnShape,
    pub token_embd: QMatrix,
    /// `None`: tied to `token_embd`.
    pub output: Option<QMatrix>,
    pub output_norm: Tensor,
    pub layers: Vec<Layer>,
    /// `[ctx, rope_dims/2, 2]` f32: cos and sin of every position's angles (computed in f64).
    pub cos_sin: Tensor,
    /// Bytes of weights uploaded, and of KV cache allocated.
    pub weight_bytes: u64,
    pub cache_bytes: u64,
}

/// A 1-D tensor of the file as f32 values (norm weights and biases), length checked.
fn host_vector(g: &Gguf, name: &str, len: usize) -> Result<Vec<f32>> {
    let t = g.tensor(name).ok_or_else(|| invalid!("{}: tensor {name:?} is missing", g.path.display()))?;
    let ty = known_type(g, t)?;
    if t.dims != [len as u64] {
        return Err(invalid!("{}: tensor {name:?} has dims {:?}, expected [{len}]", g.path.display(), t.dims));
    }
    let mut out = vec![0f32; len];
    dequantize(ty, g.tensor_bytes(t), &mut out)?;
    Ok(out)
}

fn known_type(g: &Gguf, t: &TensorInfo) -> Result<GgmlType> {
    match t.ggml_type {
        Some(ty) if ty.is_weight_type() => Ok(ty),
        _ => Err(invalid!("{}: tensor {:?} has type {}, which this runtime does not read", g.path.display(), t.name, t.type_name())),
    }
}

fn upload_f32(ctx: &Context, v: &[f32]) -> Result<Tensor> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    ctx.upload(DType::F32, &[v.len()], &bytes)
}

impl Llm {
    /// Opens `path`, checks every tensor the forward pass reads against the config, and uploads
    /// them. `progress(done, total)` is called with weight bytes as they go up.
    pub fn load(ctx: Arc<Context>, path: impl AsRef<Path>, opts: &LlmOptions, progress: &dyn Fn(u64, u64)) -> Result<Llm> {
        let g = Gguf::open(path)?;
        Self::from_gguf(ctx, &g, opts, progress)
    }

    pub fn from_gguf(ctx: Arc<Context>, g: &Gguf, opts: &LlmOptions, progress: &dyn Fn(u64, u64)) -> Result<Llm> {
        let cfg = LlmConfig::from_gguf(g)?;
        let file = g.path.display();
        let context = opts.context.unwrap_or(cfg.context_length.min(4096));
        if context == 0 || context > cfg.context_length.max(1) * 8 || context > 1 << 20 {
            return Err(invalid!("context {context} is out of range (the model was trained for {})", cfg.context_length));
        }
        if opts.slots == 0 || opts.slots > 1024 {
            return Err(invalid!("{} session slots: expected 1..=1024", opts.slots));
        }
        let (h, qd, kvd, ff) = (cfg.n_embd, cfg.q_dim(), cfg.kv_dim(), cfg.n_ff);
        let total: u64 = g.tensors.iter().map(|t| t.size).sum();
        let done = std::cell::Cell::new(0u64);
        let matrix = |name: &str, rows: usize, cols: usize| -> Result<QMatrix> {
            let t = g.tensor(name).ok_or_else(|| invalid!("{file}: tensor {name:?} is missing"))?;
            let ty = known_type(g, t)?;
            if t.dims != [cols as u64, rows as u64] {
                return Err(invalid!("{file}: tensor {name:?} has dims {:?}, the config implies [{cols}, {rows}]", t.dims));
            }
            let m = QMatrix::upload(&ctx, ty, rows, cols, g.tensor_bytes(t)).map_err(|e| invalid!("{file}: tensor {name:?}: {e}"))?;
            done.set(done.get() + t.size);
            progress(done.get(), total);
            Ok(m)
        };
        let vector = |name: &str, len: usize| -> Result<Tensor> { upload_f32(&ctx, &host_vector(g, name, len)?) };
        let attn = AttnShape {
            n_head: cfg.n_head,
            n_head_kv: cfg.n_head_kv,
            head_dim: cfg.head_dim,
            rope_dims: cfg.rope_dims,
            rope_neox: cfg.rope_neox,
            ctx: context,
            slots: opts.slots,
            kv_f16: opts.kv_f16,
        };
        let token_embd = matrix("token_embd.weight", cfg.n_vocab, h)?;
        let output = if cfg.tied_output { None } else { Some(matrix("output.weight", cfg.n_vocab, h)?) };
        let output_norm = vector("output_norm.weight", h)?;
        let mut layers = Vec::with_capacity(cfg.n_layer);
        let mut cache_bytes = 0u64;
        for i in 0..cfg.n_layer {
            let p = |s: &str| format!("blk.{i}.{s}");
            let qkv_bias = if cfg.qkv_bias {
                Some((vector(&p("attn_q.bias"), qd)?, vector(&p("attn_k.bias"), kvd)?, vector(&p("attn_v.bias"), kvd)?))
            } else {
                None
            };
            let qk_norm = if cfg.qk_norm { Some((vector(&p("attn_q_norm.weight"), cfg.head_dim)?, vector(&p("attn_k_norm.weight"), cfg.head_dim)?)) } else { None };
            let cache = || -> Result<Tensor> {
                let t = ctx.empty(attn.kv_dtype(), &attn.cache_shape())?;
                Ok(t)
            };
            let (cache_k, cache_v) = (cache()?, cache()?);
            cache_bytes += 2 * cache_k.byte_size() as u64;
            layers.push(Layer {
                attn_norm: vector(&p("attn_norm.weight"), h)?,
                wq: matrix(&p("attn_q.weight"), qd, h)?,
                wk: matrix(&p("attn_k.weight"), kvd, h)?,
                wv: matrix(&p("attn_v.weight"), kvd, h)?,
                qkv_bias,
                qk_norm,
                wo: matrix(&p("attn_output.weight"), h, qd)?,
                ffn_norm: vector(&p("ffn_norm.weight"), h)?,
                gate: matrix(&p("ffn_gate.weight"), ff, h)?,
                up: matrix(&p("ffn_up.weight"), ff, h)?,
                down: matrix(&p("ffn_down.weight"), h, ff)?,
                cache_k,
                cache_v,
            });
        }
        let cos_sin = upload_f32(&ctx, &rope_table(&cfg, context))?.reshape(&[context, cfg.rope_dims / 2, 2])?;
        let weight_bytes = done.get();
        ctx.synchronize()?;
        Ok(Llm { ctx, config: cfg, attn, token_embd, output, output_norm, layers, cos_sin, weight_bytes, cache_bytes })
    }

    pub fn output_matrix(&self) -> &QMatrix {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }

    /// Checks a step's rows against the model and cache.
    pub fn check_rows(&self, rows: &[Row], want: &[usize]) -> Result<()> {
        for r in rows {
            if r.slot as usize >= self.attn.slots {
                return Err(invalid!("session slot {} does not exist ({} slots)", r.slot, self.attn.slots));
            }
            if r.pos as usize >= self.attn.ctx {
                return Err(invalid!("position {} is beyond the context of {} tokens", r.pos, self.attn.ctx));
            }
            if r.token as usize >= self.config.n_vocab {
                return Err(invalid!("token id {} is outside the vocabulary of {}", r.token, self.config.n_vocab));
            }
        }
        if let Some(&w) = want.iter().find(|&&w| w >= rows.len()) {
            return Err(invalid!("logits of row {w} asked for, the step has {} rows", rows.len()));
        }
        Ok(())
    }

    /// Records one forward step over `rows` (any mix of sessions and positions; a row attends
    /// to its session's cache positions `0..=pos`, which this step or earlier ones must have
    /// filled) and returns the logits `[want.len(), n_vocab]` of the rows listed in `want`.
    pub fn record_forward(&self, batch: &mut Batch<'_>, rows: &[Row], want: &[usize]) -> Result<Tensor> {
        self.check_rows(rows, want)?;
        let ctx = &*self.ctx;
        let cfg = &self.config;
        let t = rows.len();
        let (h, qd, kvd, ff) = (cfg.n_embd, cfg.q_dim(), cfg.kv_dim(), cfg.n_ff);
        let ids: Vec<u8> = rows.iter().flat_map(|r| r.token.to_le_bytes()).collect();
        let meta: Vec<u8> = rows.iter().flat_map(|r| [r.slot.to_le_bytes(), r.pos.to_le_bytes()]).flatten().collect();
        let wanted: Vec<u8> = want.iter().flat_map(|&w| (w as u32).to_le_bytes()).collect();
        let ids = ctx.record_upload(batch, DType::U32, &[t], &ids)?;
        let meta = ctx.record_upload(batch, DType::U32, &[t, 2], &meta)?;
        let wanted = ctx.record_upload(batch, DType::U32, &[want.len()], &wanted)?;
        let x = ctx.empty(DType::F32, &[t, h])?;
        let xn = ctx.empty(DType::F32, &[t, h])?;
        let q = ctx.empty(DType::F32, &[t, qd])?;
        let k = ctx.empty(DType::F32, &[t, kvd])?;
        let v = ctx.empty(DType::F32, &[t, kvd])?;
        let att = ctx.empty(DType::F32, &[t, qd])?;
        let act = ctx.empty(DType::F32, &[t, ff])?;
        ctx.record_llm_get_rows(batch, &self.token_embd, &ids, &x)?;
        let scale = 1.0 / (cfg.head_dim as f32).sqrt();
        let max_pos = rows.iter().map(|r| r.pos as usize).max().unwrap_or(0);
        let partials = ctx.llm_attention_scratch(&self.attn, t, max_pos)?;
        for l in &self.layers {
            ctx.record_llm_rmsnorm(batch, &x, None, &l.attn_norm, cfg.rms_eps, &xn)?;
            let bias = |i: usize| l.qkv_bias.as_ref().map(|b| [&b.0, &b.1, &b.2][i]);
            ctx.record_llm_matvec(batch, &l.wq, None, &xn, Epilogue { bias: bias(0), residual: None }, &q)?;
            ctx.record_llm_matvec(batch, &l.wk, None, &xn, Epilogue { bias: bias(1), residual: None }, &k)?;
            ctx.record_llm_matvec(batch, &l.wv, None, &xn, Epilogue { bias: bias(2), residual: None }, &v)?;
            let qk_norm = l.qk_norm.as_ref().map(|(a, b)| (a, b, cfg.rms_eps));
            ctx.record_llm_rope_store(batch, &self.attn, &q, &k, &v, &meta, &self.cos_sin, qk_norm, &l.cache_k, &l.cache_v)?;
            ctx.record_llm_attention(batch, &self.attn, &q, &meta, &l.cache_k, &l.cache_v, scale, &partials, &att)?;
            ctx.record_llm_matvec(batch, &l.wo, None, &att, Epilogue { bias: None, residual: Some(&x) }, &x)?;
            ctx.record_llm_rmsnorm(batch, &x, None, &l.ffn_norm, cfg.rms_eps, &xn)?;
            ctx.record_llm_matvec(batch, &l.gate, Some(&l.up), &xn, Epilogue::default(), &act)?;
            ctx.record_llm_matvec(batch, &l.down, None, &act, Epilogue { bias: None, residual: Some(&x) }, &x)?;
        }
        let fin = ctx.empty(DType::F32, &[want.len(), h])?;
        ctx.record_llm_rmsnorm(batch, &x, Some(&wanted), &self.output_norm, cfg.rms_eps, &fin)?;
        let logits = ctx.empty(DType::F32, &[want.len(), cfg.n_vocab])?;
        ctx.record_llm_matvec(batch, self.output_matrix(), None, &fin, Epilogue::default(), &logits)?;
        for b in [&x, &xn, &q, &k, &v, &att, &act, &fin, &ids, &meta, &wanted, &partials] {
            batch.keep(&b.buffer);
        }
        Ok(logits)
    }

    /// One step, waited for: the logits of the `want` rows as `[want.len()][n_vocab]` f32.
    pub fn forward(&self, rows: &[Row], want: &[usize]) -> Result<Vec<Vec<f32>>> {
        let mut batch = self.ctx.batch()?;
        let logits = self.record_forward(&mut batch, rows, want)?;
        batch.finish()?;
        let bytes = self.ctx.download(&logits)?;
        let v = self.config.n_vocab;
        Ok(bytes.chunks_exact(v * 4).map(|r| r.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()).collect())
    }

    /// One step whose `want` rows are reduced to their argmax on the device: only the token
    /// ids come back.
    pub fn forward_greedy(&self, rows: &[Row], want: &[usize]) -> Result<Vec<u32>> {
        let mut batch = self.ctx.batch()?;
        let logits = self.record_forward(&mut batch, rows, want)?;
        let ids = self.ctx.empty(DType::U32, &[want.len()])?;
        self.ctx.record_llm_argmax(&mut batch, &logits, &ids)?;
        batch.finish()?;
        let bytes = self.ctx.download(&ids)?;
        Ok(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}

/// cos and sin of `pos · freq_scale · base^(-2i / rope_dims)` for every position and pair, in
/// f64, rounded once to f32.
pub fn rope_table(cfg: &LlmConfig, context: usize) -> Vec<f32> {
    let half = cfg.rope_dims / 2;
    let mut out = Vec::with_capacity(context * half * 2);
    for pos in 0..context {
        for i in 0..half {
            let theta = pos as f64 * cfg.rope_freq_scale as f64 * (cfg.rope_base as f64).powf(-2.0 * i as f64 / cfg.rope_dims as f64);
            out.push(theta.cos() as f32);
            out.push(theta.sin() as f32);
        }
    }
    out
}
