//! A GGUF model on the device: its weights uploaded as stored (no dequantization at load), the
//! rotary table, the KV cache of a fixed number of session slots, and the forward pass over a
//! packed set of token rows ([`Llm::record_forward`]).

use super::config::LlmConfig;
use super::gguf::{Gguf, TensorInfo};
use super::kernels::{llm_norm_blocks, AttnShape, Epilogue, InputNorm, NextNorm, NormSums, QMatrix, RmsNorm, RopeStore};
use super::prefill::{llm_gemm_pays, LlmGemmPrecision};
use crate::device::DeviceCaps;
use super::quant::{dequantize, GgmlType};
use crate::dtype::DType;
use crate::error::{invalid, Result};
use crate::submit::{Batch, Command, KeptCommands, Recording};
use parking_lot::Mutex;
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
    /// Opt-in: decode matvecs quantize their activations to int8 per 32 values (16 for Q6_K)
    /// and take integer dot products, where the weight format has that form
    /// ([`QMatrix::int8_capable`]: every quantized one): faster, and logits
    /// further from the reference than the default f32 activations (bench/README.md). Prefill
    /// GEMMs are unaffected.
    pub int8_activations: bool,
    /// The prompt GEMM's operands on tensor cores ([`LlmGemmPrecision`]); `None`:
    /// `NX_VULKAN_LLM_GEMM_PRECISION`, else `Split` (the runtime's stated tolerances). `F16`
    /// is llama.cpp's precision and about twice as fast at prefill.
    pub prefill_precision: Option<LlmGemmPrecision>,
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
        LlmOptions { context: None, slots: 4, kv_f16: true, int8_activations: false, prefill_precision: None }
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
    /// Kept recordings of recent step shapes (decode steps).
    programs: Mutex<Vec<StepProgram>>,
    /// Decode steps run from kept command buffers (off with NX_VULKAN_LLM_KEPT=0 at load,
    /// for comparisons: it cannot change a bit).
    kept_command_buffers: bool,
    /// The prompt GEMM's precision (from [`LlmOptions::prefill_precision`]).
    pub prefill_precision: LlmGemmPrecision,
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
            let m = m.with_int8_activations(&ctx, opts.int8_activations)?;
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
        let prefill_precision = match opts.prefill_precision {
            Some(p) => p,
            None => LlmGemmPrecision::from_env()?,
        };
        Ok(Llm {
            ctx,
            config: cfg,
            attn,
            token_embd,
            output,
            output_norm,
            layers,
            cos_sin,
            weight_bytes,
            cache_bytes,
            programs: Mutex::new(vec![]),
            kept_command_buffers: std::env::var("NX_VULKAN_LLM_KEPT").as_deref() != Ok("0"),
            prefill_precision,
        })
    }

    pub fn output_matrix(&self) -> &QMatrix {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }

    /// Every weight matrix the decode products read: each layer's seven and the output's.
    pub fn matrices(&self) -> Vec<&QMatrix> {
        self.layers.iter().flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down]).chain([self.output_matrix()]).collect()
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
    /// Steps of at most [`PROGRAM_MAX_ROWS`] rows (decode steps) replay a kept recording of
    /// their shape (see [`StepProgram`]); the logits tensor then belongs to that program and is
    /// overwritten by its next step, so read it before recording another.
    pub fn record_forward(&self, batch: &mut Batch<'_>, rows: &[Row], want: &[usize]) -> Result<Tensor> {
        self.check_rows(rows, want)?;
        let ctx = &*self.ctx;
        let inputs = step_inputs(rows, want);
        let segs = segments(&ctx.caps, rows);
        if rows.len() <= PROGRAM_MAX_ROWS && !want.is_empty() && segs.iter().all(|s| !s.gemm) {
            let mut programs = self.programs.lock();
            let at = match programs.iter().position(|p| (p.rows, p.want) == (rows.len(), want.len())) {
                Some(i) => i,
                None => {
                    if programs.len() == PROGRAM_SHAPES {
                        programs.remove(0);
                    }
                    programs.push(self.step_program(rows.len(), want.len())?);
                    programs.len() - 1
                }
            };
            let program = &programs[at];
            let staged = ctx.record_upload(batch, DType::U32, &[inputs.len() / 4], &inputs)?;
            record_copy(batch, &staged, &program.inputs);
            let max_pos = rows.iter().map(|r| r.pos as usize).max().unwrap_or(0);
            let chunks = max_pos / 64 + 1;
            // Replayed from a command buffer of its own (recorded once per chunk count) unless
            // every command is being timed or the model was loaded with kept buffers off.
            if ctx.stream.profiling_commands() || !self.kept_command_buffers {
                batch.append(program.replay(chunks)?);
            } else {
                batch.append_kept(&program.kept(chunks)?);
            }
            return Ok(program.logits.clone());
        }
        let staged = ctx.record_upload(batch, DType::U32, &[inputs.len() / 4], &inputs)?;
        let max_pos = rows.iter().map(|r| r.pos as usize).max().unwrap_or(0);
        self.record_step(batch, &staged, rows.len(), want.len(), max_pos, &segs)
    }

    /// The kept recording of a step of `t` rows, `w` of them read out (see [`StepProgram`]).
    fn step_program(&self, t: usize, w: usize) -> Result<StepProgram> {
        let ctx = &*self.ctx;
        let inputs = ctx.empty(DType::U32, &[3 * t + w])?;
        let mut batch = ctx.batch()?;
        let logits = self.record_step(&mut batch, &inputs, t, w, self.attn.ctx - 1, &[Segment { start: 0, len: t, gemm: false }])?;
        let rec = batch.into_recording();
        let attention = rec.commands.iter().enumerate().filter(|(_, c)| matches!(c, Command::Dispatch { kernel, .. } if kernel.name().starts_with("llm attention split"))).map(|(i, _)| i).collect();
        Ok(StepProgram { rows: t, want: w, chunks: self.attn.ctx.div_ceil(64), inputs, logits, rec, attention, kept: Mutex::new(vec![]) })
    }

    /// The forward pass over `t` rows whose inputs are `inputs` (see [`step_inputs`]), with
    /// attention scratch for rows up to `max_pos`; `segs` cut the rows by the path their
    /// projections take.
    fn record_step(&self, batch: &mut Batch<'_>, inputs: &Tensor, t: usize, w: usize, max_pos: usize, segs: &[Segment]) -> Result<Tensor> {
        let ctx = &*self.ctx;
        let cfg = &self.config;
        let (h, qd, kvd, ff) = (cfg.n_embd, cfg.q_dim(), cfg.kv_dim(), cfg.n_ff);
        let view = |offset: usize, shape: &[usize]| {
            let mut v = Tensor::new(inputs.buffer.clone(), DType::U32, shape.to_vec());
            v.offset = offset;
            v
        };
        let (meta, ids, wanted) = (view(0, &[t, 2]), view(2 * t, &[t]), view(3 * t, &[w]));
        let x = ctx.empty(DType::F32, &[t, h])?;
        let q = ctx.empty(DType::F32, &[t, qd])?;
        let k = ctx.empty(DType::F32, &[t, kvd])?;
        let v = ctx.empty(DType::F32, &[t, kvd])?;
        let att = ctx.empty(DType::F32, &[t, qd])?;
        let act = ctx.empty(DType::F32, &[t, ff])?;
        ctx.record_llm_get_rows(batch, &self.token_embd, &ids, &x)?;
        let scale = 1.0 / (cfg.head_dim as f32).sqrt();
        let scratch = ctx.llm_attention_scratch(&self.attn, t, max_pos)?;
        // On narrow models each RMSNorm runs inside the matvecs that read it (see NormWay; the
        // normalised rows are never written): 9 dispatches per layer (7 where RoPE and the
        // attention's combine run inside their neighbours, below), Q, K and V without barriers
        // between them. A prompt chunk long enough takes the tensor-core GEMM instead (its
        // segment; the GEMM reads normalised rows, so a step with one writes them once per
        // norm).
        let way = norm_way(ctx, h);
        let separate = way == NormWay::Separate;
        let gemm_rows = segs.iter().filter(|s| s.gemm).map(|s| s.len).max();
        let xn = if separate || gemm_rows.is_some() { Some(ctx.empty(DType::F32, &[t, h])?) } else { None };
        // NormWay::Sums: every norm's scaled rows and block sums, written by the first layer's
        // norm-sums dispatch and then by the residual products (where a step has matvec rows).
        let summed = if way == NormWay::Sums && segs.iter().any(|s| !s.gemm) {
            Some((ctx.empty(DType::F32, &[t, h])?, ctx.empty(DType::F32, &[t, llm_norm_blocks(h)])?))
        } else {
            None
        };
        let gemm = match (gemm_rows, self.layers.first()) {
            (Some(rows), Some(l)) => {
                let products = [(&l.wq, false), (&l.wk, false), (&l.wv, false), (&l.wo, false), (&l.gate, true), (&l.down, false)];
                Some(ctx.llm_gemm_scratch(rows, &products, self.prefill_precision)?)
            }
            _ => None,
        };
        let part = |tensor: &Tensor, s: &Segment| -> Result<Tensor> { tensor.slice(&[s.start, 0], &[s.len, tensor.shape()[1]], &[1, 1]) };
        // One product `w · input` (+ up, epilogue) over every segment's rows; `next`: the weight
        // of the norm after a residual product, whose input its matvec segments write (summed).
        let product = |batch: &mut Batch<'_>, w: &QMatrix, up: Option<&QMatrix>, input: &Tensor, bias: Option<&Tensor>, residual: Option<&Tensor>, out: &Tensor, next: Option<&Tensor>| -> Result<()> {
            for s in segs {
                let (xs, os) = (part(input, s)?, part(out, s)?);
                let rs = residual.map(|r| part(r, s)).transpose()?;
                let epi = Epilogue { bias, residual: rs.as_ref() };
                match (&gemm, s.gemm, &summed, next) {
                    (Some(scratch), true, _, _) => ctx.record_llm_gemm_in(batch, scratch, w, up, &xs, epi, &os)?,
                    (_, _, Some((scaled, sums)), Some(gamma)) => {
                        let (scaled, sums) = (part(scaled, s)?, part(sums, s)?);
                        ctx.record_llm_matvec_norm_out(batch, w, &xs, epi, &os, NextNorm { gamma, scaled: &scaled, sums: &sums })?
                    }
                    _ => ctx.record_llm_matvec(batch, w, up, &xs, epi, &os)?,
                }
            }
            Ok(())
        };
        if let (Some((scaled, sums)), Some(l)) = (&summed, self.layers.first()) {
            ctx.record_llm_norm_sums(batch, &x, &l.attn_norm, scaled, sums)?;
        }
        let step_norm = match (&summed, &xn) {
            (Some((scaled, sums)), _) => StepNorm::Sums { scaled, sums },
            (None, Some(xn)) if separate => StepNorm::Separate(xn),
            _ => StepNorm::Fused,
        };
        for (li, l) in self.layers.iter().enumerate() {
            let next_attn_norm = self.layers.get(li + 1).map(|n| &n.attn_norm);
            let bias = |i: usize| l.qkv_bias.as_ref().map(|b| [&b.0, &b.1, &b.2][i]);
            let (attn_norm, ffn_norm) = (RmsNorm { gamma: &l.attn_norm, eps: cfg.rms_eps }, RmsNorm { gamma: &l.ffn_norm, eps: cfg.rms_eps });
            if let Some(xn) = &xn {
                ctx.record_llm_rmsnorm(batch, &x, None, &l.attn_norm, cfg.rms_eps, xn)?;
            }
            // Without a GEMM segment, models without a QK norm rotate q and k and store k and v
            // in the Q, K and V products themselves (the same bits; a dispatch fewer per layer).
            let rope_in_products = gemm.is_none() && l.qk_norm.is_none() && rope_in_products();
            for s in segs {
                let outs = [part(&q, s)?, part(&k, s)?, part(&v, s)?];
                match normed_input(gemm.as_ref(), xn.as_ref(), &x, &step_norm, s, attn_norm)? {
                    NormedInput::Gemm(scratch, xs) => {
                        for (i, wm) in [&l.wq, &l.wk, &l.wv].into_iter().enumerate() {
                            ctx.record_llm_gemm_in(batch, scratch, wm, None, &xs, Epilogue { bias: bias(i), residual: None }, &outs[i])?;
                        }
                    }
                    NormedInput::Matvec(xs, norm) if rope_in_products => {
                        let rows = part(&meta, s)?;
                        let rope = RopeStore { shape: &self.attn, rows: &rows, cos_sin: &self.cos_sin, cache_k: &l.cache_k, cache_v: &l.cache_v };
                        ctx.record_llm_qkv_rope(batch, [&l.wq, &l.wk, &l.wv], &xs, norm.input(), [bias(0), bias(1), bias(2)], &outs[0], rope)?
                    }
                    NormedInput::Matvec(xs, norm) => ctx.record_llm_qkv(batch, [&l.wq, &l.wk, &l.wv], &xs, norm.input(), [bias(0), bias(1), bias(2)], [&outs[0], &outs[1], &outs[2]])?,
                }
            }
            if !rope_in_products {
                let qk_norm = l.qk_norm.as_ref().map(|(a, b)| (a, b, cfg.rms_eps));
                ctx.record_llm_rope_store(batch, &self.attn, &q, &k, &v, &meta, &self.cos_sin, qk_norm, &l.cache_k, &l.cache_v)?;
            }
            ctx.record_llm_attention(batch, &self.attn, &q, &meta, &l.cache_k, &l.cache_v, scale, &scratch, &att)?;
            product(batch, &l.wo, None, &att, None, Some(&x), &x, Some(&l.ffn_norm))?;
            if let Some(xn) = &xn {
                ctx.record_llm_rmsnorm(batch, &x, None, &l.ffn_norm, cfg.rms_eps, xn)?;
            }
            for s in segs {
                let out = part(&act, s)?;
                match normed_input(gemm.as_ref(), xn.as_ref(), &x, &step_norm, s, ffn_norm)? {
                    NormedInput::Gemm(scratch, xs) => ctx.record_llm_gemm_in(batch, scratch, &l.gate, Some(&l.up), &xs, Epilogue::default(), &out)?,
                    NormedInput::Matvec(xs, norm) => match norm.input() {
                        None => ctx.record_llm_matvec(batch, &l.gate, Some(&l.up), &xs, Epilogue::default(), &out)?,
                        Some(n) => ctx.record_llm_normed_matvec(batch, &l.gate, Some(&l.up), &xs, n, Epilogue::default(), &out)?,
                    },
                }
            }
            product(batch, &l.down, None, &act, None, Some(&x), &x, next_attn_norm)?;
        }
        if let Some(xn) = &xn {
            batch.keep(&xn.buffer);
        }
        if let Some((scaled, sums)) = &summed {
            batch.keep(&scaled.buffer);
            batch.keep(&sums.buffer);
        }
        let fin = ctx.empty(DType::F32, &[w, h])?;
        ctx.record_llm_rmsnorm(batch, &x, Some(&wanted), &self.output_norm, cfg.rms_eps, &fin)?;
        let logits = ctx.empty(DType::F32, &[w, cfg.n_vocab])?;
        ctx.record_llm_matvec(batch, self.output_matrix(), None, &fin, Epilogue::default(), &logits)?;
        for b in [&x, &q, &k, &v, &att, &act, &fin, inputs] {
            batch.keep(&b.buffer);
        }
        scratch.keep(batch);
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

/// Steps of at most this many rows replay a kept recording of their shape.
pub const PROGRAM_MAX_ROWS: usize = 64;
/// How many step shapes keep a recording (the oldest is dropped first).
const PROGRAM_SHAPES: usize = 8;

/// A forward step's recording kept for steps of the same shape — `rows` rows, `want` of them
/// read out: decode steps differ only in their inputs and positions. Its parameter blocks
/// read the rows, token ids and wanted indices from its own `inputs` buffer, which each step
/// fills by a copy at its head (so nothing in the recording changes), and its attention
/// scratch spans the whole context; replaying cuts the attention's chunk grid to the step's
/// longest row (the kernels skip chunks past a row's position, so the bits are those of a
/// freshly recorded step). Recording a step costs ~10 parameter blocks and kernel lookups per
/// layer on the host while the device waits; a replay is a copy of the command list.
pub(crate) struct StepProgram {
    rows: usize,
    want: usize,
    /// The chunk count the scratch was made for.
    chunks: usize,
    /// `[3 · rows + want]` u32: see [`step_inputs`].
    inputs: Tensor,
    logits: Tensor,
    rec: Recording,
    /// Indices of the split-attention dispatches, whose grid's z is the chunk count.
    attention: Vec<usize>,
    /// The replay for each chunk count used so far, kept in a command buffer of its own (a
    /// session's decode steps use each count for 64 positions in a row).
    kept: Mutex<Vec<(usize, Arc<KeptCommands>)>>,
}

/// Chunk counts whose kept command buffers a program holds at once (the least recently
/// built is dropped first).
const KEPT_CHUNK_COUNTS: usize = 4;

impl StepProgram {
    fn kept(&self, chunks: usize) -> Result<Arc<KeptCommands>> {
        let chunks = chunks.min(self.chunks);
        let mut kept = self.kept.lock();
        if let Some((_, k)) = kept.iter().find(|(c, _)| *c == chunks) {
            return Ok(k.clone());
        }
        let k = KeptCommands::new(self.replay(chunks)?).ok_or_else(|| invalid!("a kept LLM step holds staging buffers"))?;
        if kept.len() == KEPT_CHUNK_COUNTS {
            kept.remove(0);
        }
        kept.push((chunks, k.clone()));
        Ok(k)
    }

    fn replay(&self, chunks: usize) -> Result<Recording> {
        let mut rec = self.rec.duplicate().ok_or_else(|| invalid!("a kept LLM step holds staging buffers"))?;
        for &i in &self.attention {
            if let Command::Dispatch { groups, .. } = &mut rec.commands[i] {
                groups[2] = chunks.min(self.chunks) as u32;
            }
        }
        Ok(rec)
    }
}

/// A step's inputs as one u32 buffer: `(slot, pos)` of every row, then the rows' token ids,
/// then the indices of the rows whose logits are wanted (little-endian bytes).
fn step_inputs(rows: &[Row], want: &[usize]) -> Vec<u8> {
    let pairs = rows.iter().flat_map(|r| [r.slot, r.pos]);
    let ids = rows.iter().map(|r| r.token);
    let wanted = want.iter().map(|&w| w as u32);
    pairs.chain(ids).chain(wanted).flat_map(u32::to_le_bytes).collect()
}

/// Copies `src` into `dst` (both contiguous, of one size) as a command of `batch`.
fn record_copy(batch: &mut Batch<'_>, src: &Tensor, dst: &Tensor) {
    use vulkano::VulkanObject;
    let (s, d) = (src.buffer.subbuffer(), dst.buffer.subbuffer());
    let size = src.dtype.size() as u64;
    batch.copy_raw(s.buffer().handle(), s.offset() + src.offset as u64 * size, d.buffer().handle(), d.offset() + dst.offset as u64 * size, src.byte_size() as u64);
    batch.keep(&src.buffer);
    batch.keep(&dst.buffer);
}

/// Whether a step without a GEMM segment may fuse the RoPE and KV store into the Q, K and V
/// products (where the model allows): yes unless NX_VULKAN_LLM_ROPE=separate (benchmarks and
/// the test that compares the two).
fn rope_in_products() -> bool {
    std::env::var("NX_VULKAN_LLM_ROPE").as_deref() != Ok("separate")
}

/// Where a step's RMSNorms over `h` values are computed (the products after each norm always
/// apply its scale):
/// - `Fused` (the default up to 1,024 wide): the products read x, multiply it by gamma as they
///   read it and sum its squares themselves: on an H200 that cost 1–2 µs on SmolLM2's 576-wide
///   products and 25 µs on the 8B model's 4096-wide gate/up.
/// - `Separate` (the default beyond): a norm dispatch writes the normalised rows (5–11 µs each
///   on an H200; 64 per 8B token, 468 µs of its critical path on an H100, stop 46).
/// - `Sums` (NX_VULKAN_LLM_NORM=sums; built at stop 48 to replace both, not yet measured on a
///   GPU — bench/results/2026-12-08-stop48/run1.sh is prepared): the residual product before
///   each norm also writes its output times the norm's weight and the squares' sums of each
///   block of 8 outputs (the first layer's by a dispatch of its own); the products after it
///   read those rows and take the row's sum from the block sums — no norm dispatch and no
///   extra work in their hot loops.
/// Each gives its own rounding (all within the runtime's tolerances), and every row of every
/// step takes the same way, so no bit depends on the batch. NX_VULKAN_LLM_NORM=sums|fused|
/// separate chooses (benchmarks and tests); Sums needs the matvec's default workgroup shapes
/// (Context::llm_summed_norms_fit) and falls back to Separate where they were overridden.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NormWay {
    Sums,
    Fused,
    Separate,
}

fn norm_way(ctx: &Context, h: usize) -> NormWay {
    match std::env::var("NX_VULKAN_LLM_NORM").as_deref() {
        Ok("separate") => NormWay::Separate,
        Ok("fused") => NormWay::Fused,
        Ok("sums") if ctx.llm_summed_norms_fit() => NormWay::Sums,
        Ok("sums") => NormWay::Separate,
        _ if h <= 1024 => NormWay::Fused,
        _ => NormWay::Separate,
    }
}

/// A step's norm inputs for its matvec segments ([`NormWay`]).
enum StepNorm<'t> {
    Sums { scaled: &'t Tensor, sums: &'t Tensor },
    Separate(&'t Tensor),
    Fused,
}


/// Rows of a step that take one path through the projections: a prompt chunk of one session
/// long enough for the tensor-core GEMM ([`llm_gemm_pays`]), or a run of other rows on the
/// matvec. A row's path depends on its own session's rows in the step alone, never on its
/// batch-mates, and the matvec is row-independent: batching never changes a decode row's bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    start: usize,
    len: usize,
    gemm: bool,
}

/// What a segment's products after an RMSNorm read: the GEMM's segments the normalised rows
/// (written by the step's norm dispatch); the matvec's the scaled rows and block sums
/// (NormWay::Sums), the normalised rows (Separate) or x (Fused).
enum NormedInput<'g, 'n> {
    Gemm(&'g super::prefill::LlmGemmScratch, Tensor),
    Matvec(Tensor, MatvecNorm<'n>),
}

/// The norm a matvec segment applies: none (its rows are normalised), fused, or from the
/// segment's rows of the block sums (owned: a view of the step's).
enum MatvecNorm<'n> {
    None,
    Fused(RmsNorm<'n>),
    Sums(Tensor, f32),
}

impl MatvecNorm<'_> {
    fn input(&self) -> Option<InputNorm<'_>> {
        match self {
            MatvecNorm::None => None,
            MatvecNorm::Fused(n) => Some(InputNorm::Fused(*n)),
            MatvecNorm::Sums(sums, eps) => Some(InputNorm::Sums(NormSums { sums, eps: *eps })),
        }
    }
}

/// The [`NormedInput`] of segment `s`: `xn` is the step's normalised rows (written when norms
/// run separately or a segment takes the GEMM), `x` the residual stream.
fn normed_input<'g, 'n>(
    gemm: Option<&'g super::prefill::LlmGemmScratch>,
    xn: Option<&Tensor>,
    x: &Tensor,
    way: &StepNorm<'n>,
    s: &Segment,
    norm: RmsNorm<'n>,
) -> Result<NormedInput<'g, 'n>> {
    let rows = |t: &Tensor| t.slice(&[s.start, 0], &[s.len, t.shape()[1]], &[1, 1]);
    Ok(match (gemm, s.gemm, xn, way) {
        (Some(scratch), true, Some(xn), _) => NormedInput::Gemm(scratch, rows(xn)?),
        (_, _, _, StepNorm::Sums { scaled, sums }) => NormedInput::Matvec(rows(scaled)?, MatvecNorm::Sums(rows(sums)?, norm.eps)),
        (_, _, _, StepNorm::Separate(xn)) => NormedInput::Matvec(rows(xn)?, MatvecNorm::None),
        _ => NormedInput::Matvec(rows(x)?, MatvecNorm::Fused(norm)),
    })
}

/// A step's rows cut into segments: runs of consecutive positions of one slot that the GEMM
/// takes, and the matvec runs between them.
fn segments(caps: &DeviceCaps, rows: &[Row]) -> Vec<Segment> {
    let mut out: Vec<Segment> = vec![];
    let mut i = 0;
    while i < rows.len() {
        let mut j = i + 1;
        while j < rows.len() && rows[j].slot == rows[i].slot && rows[j].pos == rows[j - 1].pos + 1 {
            j += 1;
        }
        let gemm = llm_gemm_pays(caps, j - i);
        match out.last_mut() {
            Some(last) if !last.gemm && !gemm => last.len += j - i,
            _ => out.push(Segment { start: i, len: j - i, gemm }),
        }
        i = j;
    }
    out
}
