//! The encoder's kernels, each recorded into a caller's batch over packed token rows
//! (see [`super`]): embeddings + layernorm, projection GEMMs with bias/activation/residual
//! epilogues, attention per sequence (QKᵀ·softmax·V without materialising the scores),
//! layernorm, pooling + L2 normalisation. f32 activations throughout; projection weights in
//! f32, f16 or bf16 by [`Precision`].
//!
//! Contract shared by all of them: the result for a row (token) or a sequence depends only on
//! that row's / sequence's own data and the weights — the summation order is chosen from the
//! weight shapes alone — so batch composition never changes a bit. (The projection's tile does
//! depend on `T`, see [`linear_tile`]; its summation order does not.)
//!
//! **Numerics.** Every sum accumulates in f32. Projections: each output is one `fma` chain over
//! k in ascending order (so its bits do not depend on the tile either), then `+ bias`, the
//! activation, `+ residual`, each rounded to f32. Compensated projections split both f32
//! operands as they are loaded: `v = hi + lo + δ`, `hi = bf16(v)`, `lo = bf16(v − hi)` (round
//! to nearest even; `v − hi` is exact), `|δ| ≤ 2^-16·|v|`; each output is two fma chains in
//! ascending k — `Σ hi·hi` and `Σ (hi·lo + lo·hi)` (the bf16 products are exact in f32; `lo·lo`
//! is dropped) — added once before the bias. Against the exact `Σ x·w` the split costs at most
//! `3.01·2^-16·Σ|x·w|` (`lo·lo`, `x·δw`, `δx·w`), the f32 chains `(K + 2)·2^-24` of the same sum:
//! about 2^-16 relative per product term, where bf16 alone is 2^-8. GELU is the exact-erf form with our own f32
//! erf and exp (`kernels/encoder_math.glsl`, about an ulp: the drivers' `exp` is an
//! approximation and GLSL has no `erf`). In the f16/bf16 modes the activations are rounded to
//! the weight type (round to nearest even) as they are loaded and the products of two halves
//! are exact in f32. Layernorm: f32 mean and biased variance over a fixed tree, `(x - mean) ·
//! (1/√(var + eps)) · γ + β`. Attention: online softmax over key tiles of fixed size (max
//! subtracted, `exp` as above), divided by the denominator once at the end. Pooling: column
//! sums in ascending row order, `/ len`; L2 norm over a fixed tree, `x / max(‖x‖, 1e-12)`.
//! Inputs with a non-zero offset are read in place; every input must be contiguous.

use crate::dtype::DType;
use crate::error::{invalid, Result};
use crate::ops::check_dense_output;
use crate::params::ParamBlock;
use crate::submit::Batch;
use crate::tensor::Tensor;
use crate::Context;
use std::fmt::Write;

/// How a projection's operands are multiplied. Every mode accumulates in f32.
///
/// Compensated uses bf16 hi/lo parts rather than f16 ones (which would keep 2^-22 per
/// operand): bf16 has f32's exponent range, so the split needs no scaling — f16's would need a
/// per-row scale (a reduction over K before the GEMM) for activations and weights outside
/// 2^-14..65504 — and every device with bf16 cooperative matrices multiplies exactly these
/// parts. The portable kernel (no tensor cores, lavapipe included) does the same arithmetic
/// in f32 with shared-memory tiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// f32 × f32 (the default; PyTorch fp32's numerics up to summation order).
    #[default]
    Fp32,
    /// Both f32 operands split into bf16 hi + lo parts as they are loaded (split-f32, the
    /// tensor-core emulation of fp32): `hi·hi + hi·lo + lo·hi` accumulated in f32, about 2^-16
    /// relative per product term; f32 weights; plain f32 outside projections.
    Compensated,
    /// Activations rounded to f16, f16 weights; f32 accumulation.
    Fp16,
    /// Activations rounded to bf16, bf16 weights; f32 accumulation.
    Bf16,
}

impl Precision {
    pub fn parse(s: &str) -> Result<Precision> {
        match s {
            "fp32" | "f32" => Ok(Precision::Fp32),
            "compensated" => Ok(Precision::Compensated),
            "fp16" | "f16" => Ok(Precision::Fp16),
            "bf16" => Ok(Precision::Bf16),
            other => Err(invalid!("unknown precision {other:?} (expected fp32, compensated, fp16 or bf16)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Compensated => "compensated",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
        }
    }

    /// The weight type a projection in this precision reads.
    pub fn weight_dtype(self) -> DType {
        match self {
            Precision::Fp32 | Precision::Compensated => DType::F32,
            Precision::Fp16 => DType::F16,
            Precision::Bf16 => DType::BF16,
        }
    }
}

/// The activation applied in a projection's epilogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    None,
    /// `x · Φ(x)` with the exact erf (PyTorch's `gelu`, BERT's "gelu").
    Gelu,
}

impl Context {
    /// `out[t, n] = act(Σ_k x[t, k] · w[n, k] + bias[n]) + residual[t, n]`: `x` is `[T, K]` f32,
    /// `w` is `[N, K]` (PyTorch's Linear layout) in the precision's weight type, `bias` `[N]`
    /// f32, `residual` (optional) and `out` `[T, N]` f32 (new contiguous tensors).
    /// One dispatch. fp16/bf16 on a device with cooperative matrices
    /// ([`linear_uses_tensor_cores`]): the tensor-core GEMM with this epilogue fused
    /// (`Context::record_coopmat_linear`; x rounded as it is staged); otherwise the
    /// shared-memory kernel with the tile [`linear_tile`]`(N, T, Context::linear_min_groups)`.
    /// Neither path's arithmetic for an output depends on `T` or on the other rows, and the
    /// path depends on the device and precision alone, so a row's bits are not a function of
    /// the batch.
    #[allow(clippy::too_many_arguments)]
    pub fn record_encoder_linear(
        &self,
        batch: &mut Batch<'_>,
        x: &Tensor,
        w: &Tensor,
        bias: &Tensor,
        act: Activation,
        residual: Option<&Tensor>,
        precision: Precision,
        out: &Tensor,
    ) -> Result<()> {
        const OP: &str = "encoder linear";
        let (t, k) = matrix(x, DType::F32, OP, "x")?;
        let (n, kw) = matrix(w, precision.weight_dtype(), OP, "w")?;
        if kw != k {
            return Err(invalid!("{OP}: x is [{t}, {k}] but w is [{n}, {kw}] (w is [N, K], PyTorch's Linear layout)"));
        }
        vector(bias, DType::F32, n, OP, "bias")?;
        if let Some(r) = residual {
            let (rt, rn) = matrix(r, DType::F32, OP, "residual")?;
            if (rt, rn) != (t, n) {
                return Err(invalid!("{OP}: residual is [{rt}, {rn}], expected [{t}, {n}]"));
            }
        }
        check_dense_output(out, DType::F32, &[t, n], OP)?;
        if t == 0 || n == 0 {
            return Ok(());
        }
        if linear_uses_tensor_cores(self, precision) {
            // (the checks above leave contiguous operands: the kernel's layout)
            return self.record_coopmat_linear(batch, x, w, Some(bias), act == Activation::Gelu, residual, out);
        }
        let mut tile = linear_tile(n, t, self.linear_min_groups.load(std::sync::atomic::Ordering::Relaxed));
        // `NX_VULKAN_ENCODER_LINEAR_KSTEP=N` (a multiple of 4, 4..=64): K staged per step, a
        // measurement knob (less shared memory per workgroup; the same fma chains, the same
        // bits: `linear_tile_switch_keeps_bits`).
        if let Some(k) = std::env::var("NX_VULKAN_ENCODER_LINEAR_KSTEP").ok().and_then(|v| v.parse::<u32>().ok()).filter(|k| k % 4 == 0 && (4..=64).contains(k)) {
            tile.k_step = k;
        }
        let wbytes = precision.weight_dtype().size() as u64;
        let aligned16 = |t: &Tensor, elem: u64| (t.buffer.address() + elem * t.offset as u64).is_multiple_of(16);
        let cfg = LinearCfg {
            precision,
            tile,
            gelu: act == Activation::Gelu,
            residual: residual.is_some(),
            xv4: k % 4 == 0 && aligned16(x, 4),
            // 4 weights: 16 bytes (f32) or 8 bytes (f16/bf16)
            wv4: k % 4 == 0 && (w.buffer.address() + wbytes * w.offset as u64).is_multiple_of(4 * wbytes),
            ov4: tile.block_cols == 4 && n % 4 == 0 && out.buffer.address().is_multiple_of(16),
            check_n: n % tile.cols as usize != 0,
            check_k: k % tile.k_step as usize != 0 || k == 0,
        };
        let mut p = ParamBlock::new(OP);
        let res = residual.unwrap_or(out);
        p.addrs([x, w, bias, res, out].map(|t| t.buffer.address()));
        p.i32s([t, n, k, x.offset, w.offset, bias.offset, res.offset])?;
        for b in [x, w, bias, res, out] {
            batch.keep(&b.buffer);
        }
        let kernel = self.kernels.get(&cfg.key(), tile.threads(), 1, || cfg.source())?;
        let max = self.caps.max_workgroup_count;
        let groups = [n.div_ceil(tile.cols as usize) as u32, (t.div_ceil(tile.rows as usize) as u64).min(max[1] as u64) as u32, 1];
        batch.dispatch_grid(&kernel, p.bytes(), (t * n).min(u32::MAX as usize) as u32, groups)
    }

    /// Token embeddings: `out[t] = layernorm(word[ids[t]] + position[positions[t]] +
    /// token_type[token_types[t]]) · gamma + beta`. `ids`, `positions`, `token_types` are `[T]`
    /// u32; the tables `[V, H]`, `[P, H]`, `[S, H]` f32; `out` `[T, H]` f32. An index out of its
    /// table's range is an error found before recording (the caller checks ids on the host;
    /// the kernel clamps indices into their tables so a bad one never reads out of range).
    /// The sum is `(word + token_type) + position`, HF BERT's order. One dispatch.
    #[allow(clippy::too_many_arguments)]
    pub fn record_encoder_embeddings(
        &self,
        batch: &mut Batch<'_>,
        ids: &Tensor,
        positions: &Tensor,
        token_types: &Tensor,
        word: &Tensor,
        position: &Tensor,
        token_type: &Tensor,
        gamma: &Tensor,
        beta: &Tensor,
        eps: f32,
        out: &Tensor,
    ) -> Result<()> {
        const OP: &str = "encoder embeddings";
        let (v, h) = matrix(word, DType::F32, OP, "word table")?;
        let (pn, ph) = matrix(position, DType::F32, OP, "position table")?;
        let (sn, sh) = matrix(token_type, DType::F32, OP, "token type table")?;
        if ph != h || sh != h {
            return Err(invalid!("{OP}: tables have widths {h}, {ph}, {sh}; they must agree"));
        }
        if v == 0 || pn == 0 || sn == 0 {
            return Err(invalid!("{OP}: empty embedding table ({v}, {pn}, {sn} rows)"));
        }
        let t = ids.shape.first().copied().unwrap_or(0);
        for (x, name) in [(ids, "ids"), (positions, "positions"), (token_types, "token_types")] {
            vector(x, DType::U32, t, OP, name)?;
        }
        vector(gamma, DType::F32, h, OP, "gamma")?;
        vector(beta, DType::F32, h, OP, "beta")?;
        check_eps(eps, OP)?;
        check_dense_output(out, DType::F32, &[t, h], OP)?;
        if t == 0 || h == 0 {
            return Ok(());
        }
        let all = [ids, positions, token_types, word, position, token_type, gamma, beta, out];
        if [word, position, token_type].iter().any(|t| t.offset != 0) {
            return Err(invalid!("{OP}: embedding tables must start at their buffer's start"));
        }
        let mut p = ParamBlock::new(OP);
        p.addrs(all.map(|t| t.buffer.address()));
        p.i32s([t, h])?.i32(eps.to_bits() as i32)?.i32s([0, gamma.offset, beta.offset, v, pn, sn, ids.offset, positions.offset, token_types.offset])?;
        for b in all {
            batch.keep(&b.buffer);
        }
        self.record_norm_rows(batch, true, h, t, p.bytes())
    }

    /// Row-wise layernorm of `x` `[T, H]` f32 (biased variance, as PyTorch) into `out`. One
    /// dispatch.
    pub fn record_encoder_layernorm(&self, batch: &mut Batch<'_>, x: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f32, out: &Tensor) -> Result<()> {
        const OP: &str = "encoder layernorm";
        let (t, h) = matrix(x, DType::F32, OP, "x")?;
        vector(gamma, DType::F32, h, OP, "gamma")?;
        vector(beta, DType::F32, h, OP, "beta")?;
        check_eps(eps, OP)?;
        check_dense_output(out, DType::F32, &[t, h], OP)?;
        if t == 0 || h == 0 {
            return Ok(());
        }
        let mut p = ParamBlock::new(OP);
        p.addrs([x, gamma, beta, out].map(|t| t.buffer.address()));
        p.i32s([t, h])?.i32(eps.to_bits() as i32)?.i32s([x.offset, gamma.offset, beta.offset])?;
        for b in [x, gamma, beta, out] {
            batch.keep(&b.buffer);
        }
        self.record_norm_rows(batch, false, h, t, p.bytes())
    }

    fn record_norm_rows(&self, batch: &mut Batch<'_>, embed: bool, h: usize, t: usize, params: &[u8]) -> Result<()> {
        let vpt = h.div_ceil(256);
        if vpt > 16 {
            return Err(invalid!("encoder layernorm: rows of {h} exceed the kernel's 4096"));
        }
        let key = format!("encoder layernorm embed={embed} vpt={vpt}");
        let kernel = self.kernels.get(&key, 256, 1, || {
            let mut s = crate::kernels::numeric_prelude();
            writeln!(s, "#define VPT {vpt}").unwrap();
            if embed {
                s.push_str("#define EMBED\n");
            }
            s.push_str(include_str!("../kernels/encoder_norm.glsl"));
            s
        })?;
        let groups = t.min(self.caps.max_workgroup_count[0].min(65535) as usize) as u32;
        batch.dispatch_grid(&kernel, params, t.min(u32::MAX as usize) as u32, [groups, 1, 1])
    }

    /// Multi-head self-attention per sequence: `qkv` is `[T, 3·heads·head_dim]` f32 (each row
    /// q | k | v, heads contiguous inside each), `seq_offsets` `[B + 1]` u32 (rows of sequence
    /// `b` are `seq_offsets[b]..seq_offsets[b+1]`, every sequence at most `max_len` long);
    /// `out[t, h·D + d] = Σ_j softmax_j(q_t·k_j·scale) · v_j[d]` over `t`'s own sequence.
    /// `out` is `[T, heads·head_dim]` f32. One dispatch over (query blocks of 64 or 128
    /// queries, heads, sequences); offsets are clamped into `0..=T` on the device.
    /// `head_dim` is 1..=128.
    #[allow(clippy::too_many_arguments)]
    pub fn record_encoder_attention(
        &self,
        batch: &mut Batch<'_>,
        qkv: &Tensor,
        seq_offsets: &Tensor,
        sequences: usize,
        max_len: usize,
        heads: usize,
        head_dim: usize,
        scale: f32,
        out: &Tensor,
    ) -> Result<()> {
        self.record_encoder_attention_using(batch, qkv, seq_offsets, sequences, max_len, heads, head_dim, scale, out, None)
    }

    /// Where [`Context::record_encoder_attention`] keeps a tile's scores for `head_dim` here:
    /// in registers on GPUs for heads up to 64 (shared memory limits how many workgroups run
    /// at once: `encoder_attention.glsl`), in shared memory on CPU devices (lavapipe's
    /// compiler took minutes over the unrolled tiles) and for wider heads. Both give the same
    /// bits (`tests/encoder_kernels.rs`): the choice is speed alone.
    pub fn attention_scores(&self, head_dim: usize) -> AttentionScores {
        if self.caps.device_type != "cpu" && head_dim <= 64 {
            AttentionScores::Registers
        } else {
            AttentionScores::Shared
        }
    }

    /// [`Context::record_encoder_attention`] with the scores' place forced (`None`: its
    /// choice, or `NX_VULKAN_ENCODER_ATTENTION=registers|shared`): for tests and measurements
    /// that compare the two.
    #[allow(clippy::too_many_arguments)]
    pub fn record_encoder_attention_using(
        &self,
        batch: &mut Batch<'_>,
        qkv: &Tensor,
        seq_offsets: &Tensor,
        sequences: usize,
        max_len: usize,
        heads: usize,
        head_dim: usize,
        scale: f32,
        out: &Tensor,
        scores: Option<AttentionScores>,
    ) -> Result<()> {
        const OP: &str = "encoder attention";
        let (t, width) = matrix(qkv, DType::F32, OP, "qkv")?;
        if heads == 0 || head_dim == 0 || head_dim > 128 {
            return Err(invalid!("{OP}: {heads} heads of {head_dim} (head_dim must be 1..=128)"));
        }
        if width != 3 * heads * head_dim {
            return Err(invalid!("{OP}: qkv rows of {width}, expected 3 · {heads} heads · {head_dim} = {}", 3 * heads * head_dim));
        }
        vector(seq_offsets, DType::U32, sequences + 1, OP, "seq_offsets")?;
        if !scale.is_finite() {
            return Err(invalid!("{OP}: scale {scale} is not finite"));
        }
        check_dense_output(out, DType::F32, &[t, heads * head_dim], OP)?;
        if t == 0 || sequences == 0 || max_len == 0 {
            return Ok(());
        }
        let scores = match scores {
            Some(s) => s,
            None => AttentionScores::from_env()?.unwrap_or_else(|| self.attention_scores(head_dim)),
        };
        let qb = if scores == AttentionScores::Registers { ATTN_QB_REGISTERS } else { ATTN_QB };
        let cfg = AttentionCfg { d: head_dim as u32, qb, kb: if head_dim <= 64 { 32 } else { 16 }, scores };
        let kernel = self.kernels.get(&cfg.key(), cfg.qb, 1, || cfg.source())?;
        let mut p = ParamBlock::new(OP);
        p.addrs([qkv, seq_offsets, out].map(|t| t.buffer.address()));
        p.i32s([t, heads, qkv.offset, seq_offsets.offset])?.i32(scale.to_bits() as i32)?.i32(sequences)?;
        for b in [qkv, seq_offsets, out] {
            batch.keep(&b.buffer);
        }
        let max = self.caps.max_workgroup_count;
        let groups = [
            (max_len.div_ceil(cfg.qb as usize) as u64).min(max[0] as u64) as u32,
            u32::try_from(heads).ok().filter(|&h| h <= max[1]).ok_or_else(|| invalid!("{OP}: {heads} heads exceed the device's grid"))?,
            (sequences as u64).min(max[2].min(65535) as u64) as u32,
        ];
        batch.dispatch_grid(&kernel, p.bytes(), (t * heads).min(u32::MAX as usize) as u32, groups)
    }

    /// Pools each sequence's rows of `x` `[T, H]` into `out` `[B, H]` f32 (mean over the
    /// sequence's tokens, or its first token for CLS), then divides each row by its L2 norm
    /// (clamped below at 1e-12, as `torch.nn.functional.normalize`) when `normalize` is set.
    /// `seq_offsets` is `[B + 1]` u32 as for attention; an empty sequence pools to zeros. One
    /// dispatch.
    pub fn record_encoder_pool(&self, batch: &mut Batch<'_>, x: &Tensor, seq_offsets: &Tensor, pooling: super::Pooling, normalize: bool, out: &Tensor) -> Result<()> {
        const OP: &str = "encoder pooling";
        let (t, h) = matrix(x, DType::F32, OP, "x")?;
        let b = seq_offsets.shape.first().copied().unwrap_or(0).saturating_sub(1);
        vector(seq_offsets, DType::U32, b + 1, OP, "seq_offsets")?;
        check_dense_output(out, DType::F32, &[b, h], OP)?;
        if b == 0 || h == 0 {
            return Ok(());
        }
        let cls = match pooling {
            super::Pooling::Cls => true,
            super::Pooling::Mean => false,
        };
        let key = format!("encoder pool cls={cls} normalize={normalize}");
        let kernel = self.kernels.get(&key, 256, 1, || {
            let mut s = crate::kernels::numeric_prelude();
            if cls {
                s.push_str("#define CLS\n");
            }
            if normalize {
                s.push_str("#define NORMALIZE\n");
            }
            s.push_str(include_str!("../kernels/encoder_pool.glsl"));
            s
        })?;
        let mut p = ParamBlock::new(OP);
        p.addrs([x, seq_offsets, out].map(|t| t.buffer.address()));
        p.i32s([t, h, b, x.offset, seq_offsets.offset])?;
        for buf in [x, seq_offsets, out] {
            batch.keep(&buf.buffer);
        }
        let groups = b.min(self.caps.max_workgroup_count[0].min(65535) as usize) as u32;
        batch.dispatch_grid(&kernel, p.bytes(), b as u32, [groups, 1, 1])
    }

    /// The encoder kernels' f32 `erf` applied elementwise to an f32 tensor (for tests of its
    /// accuracy; GELU uses the same function).
    #[doc(hidden)]
    pub fn encoder_erf(&self, x: &Tensor) -> Result<Tensor> {
        const OP: &str = "encoder erf";
        let n = x.numel();
        if x.dtype != DType::F32 || !x.is_contiguous() {
            return Err(invalid!("{OP}: needs a contiguous f32 tensor"));
        }
        let out = self.empty(DType::F32, &x.shape)?;
        let kernel = self.kernels.get("encoder erf", 256, 1, || {
            let mut s = crate::kernels::numeric_prelude();
            s.push_str(include_str!("../kernels/encoder_math.glsl"));
            s.push_str(
                "layout(local_size_x = 256) in;
void main() {
    uint64_t addrX = ParamsU64(pc.params).v[0]; uint64_t addrO = ParamsU64(pc.params).v[1];
    int off = ParamsI32(pc.params + 16ul).v[0];
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * 256u)
        BufU32(addrO).v[i] = floatBitsToUint(enc_erff(uintBitsToFloat(BufU32(addrX).v[off + int(i)])));
}
",
            );
            s
        })?;
        let mut p = ParamBlock::new(OP);
        p.addrs([x.buffer.address(), out.buffer.address()]).i32(x.offset)?;
        self.recorded(out, |batch, out| {
            batch.keep(&x.buffer);
            batch.keep(&out.buffer);
            batch.dispatch(&kernel, p.bytes(), n as u64)
        })
    }
}

/// Queries per attention workgroup (one invocation each) with the scores in shared memory.
const ATTN_QB: u32 = 64;
/// ... and with the scores in registers: the K and V tiles then serve twice the queries for
/// the same shared memory. On an H100 at 64 × 128 MiniLM tokens 185.8 us per call against
/// 194–195 with 64 and 315 with 32 (stop 43, run 9). A row's bits do not depend on it.
const ATTN_QB_REGISTERS: u32 = 128;

/// Where the attention kernel keeps a key tile's scores (`encoder_attention.glsl`): the same
/// operations in the same order either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionScores {
    /// In registers, the tile's loops unrolled: shared memory holds only the K and V tiles.
    Registers,
    /// In a shared `[QB][KB + 1]` array, the tile's loops as loops.
    Shared,
}

impl AttentionScores {
    /// `NX_VULKAN_ENCODER_ATTENTION`: `registers`, `shared`, or unset (the device's choice).
    pub fn from_env() -> Result<Option<AttentionScores>> {
        match std::env::var("NX_VULKAN_ENCODER_ATTENTION").as_deref() {
            Err(_) => Ok(None),
            Ok("registers") => Ok(Some(AttentionScores::Registers)),
            Ok("shared") => Ok(Some(AttentionScores::Shared)),
            Ok(other) => Err(invalid!("NX_VULKAN_ENCODER_ATTENTION={other:?}: expected \"registers\" or \"shared\"")),
        }
    }
}

/// A projection workgroup's output tile: `rows` of T by `cols` of N, each invocation a
/// `block_rows` × `block_cols` block of it, `k_step` of K staged per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LinearTile {
    pub rows: u32,
    pub cols: u32,
    pub block_rows: u32,
    pub block_cols: u32,
    pub k_step: u32,
}

impl LinearTile {
    const fn new(rows: u32, cols: u32, block_rows: u32, block_cols: u32, k_step: u32) -> LinearTile {
        LinearTile { rows, cols, block_rows, block_cols, k_step }
    }

    pub fn threads(&self) -> u32 {
        (self.rows / self.block_rows) * (self.cols / self.block_cols)
    }

    fn groups(&self, n: usize, t: usize) -> usize {
        n.div_ceil(self.cols as usize) * t.div_ceil(self.rows as usize)
    }
}

/// Whether `record_encoder_linear` runs `precision` on tensor cores on this device: fp16 and
/// bf16 where the device has a cooperative-matrix kernel for the weight type (never on
/// lavapipe). The choice is the device's, never the batch's (see `record_encoder_linear`).
pub fn linear_uses_tensor_cores(ctx: &Context, precision: Precision) -> bool {
    matches!(precision, Precision::Fp16 | Precision::Bf16) && ctx.coopmat_linear_available(precision.weight_dtype())
}

/// The projection's tiles, largest first: 64 × 64 (4 × 4 per invocation) where the grid is big
/// enough, then 32 × 32 (2 × 2), then 8 × 16 (one output per invocation, 128 invocations).
/// The small tiles stage more of K per step: with few outputs per workgroup a step is mostly
/// its barriers, and MiniLM's FFN-down (K = 1536) at T = 32 took 43 µs on an H200 with 16 per
/// step. The K step does not touch an output's arithmetic either: the chain is the same fmas
/// in the same order, and a zero-padded tail adds fma(0, 0, acc) = acc (acc starts at +0.0
/// and an exactly cancelling f32 sum is +0.0, so it is never -0.0).
const LINEAR_TILES: [LinearTile; 3] = [LinearTile::new(64, 64, 4, 4, 16), LinearTile::new(32, 32, 2, 2, 32), LinearTile::new(8, 16, 1, 1, 64)];
/// Workgroups a projection's grid should have to occupy a GPU of about a hundred compute
/// units (MiniLM's N = 384 at T = 32: 6 with 64 × 64 tiles, 96 with 8 × 16).
const LINEAR_MIN_GROUPS: usize = 128;
/// The same on a CPU device (lavapipe), whose few threads each run workgroups one after
/// another: there the biggest tile always wins, since a small tile's shared-memory steps and
/// barriers cost far more than the parallelism they buy (MiniLM fp32, one 256-token input on
/// 2-core lavapipe: 48.6 s with the GPU's choice, 15.4 s with 64 × 64 everywhere).
const LINEAR_MIN_GROUPS_CPU: usize = 1;

/// Workgroups a projection's grid should have on this device (see `linear_tile`; the context
/// keeps it in `Context::linear_min_groups`).
pub fn linear_min_groups(caps: &crate::DeviceCaps) -> usize {
    if caps.device_type == "cpu" {
        LINEAR_MIN_GROUPS_CPU
    } else {
        LINEAR_MIN_GROUPS
    }
}

/// The projection kernel's tile for an `[N, K]` weight and `T` rows: the largest of 64 × 64,
/// 32 × 32 and 8 × 16 whose grid has at least `min_groups` workgroups ([`linear_min_groups`]:
/// 128 on a GPU, 1 on a CPU device), else 8 × 16. It may depend on `T` and on the device
/// because nothing in an output's arithmetic does: each output is the same fma chain(s) over
/// k in ascending order, whatever the K step, tile, the invocation's block or the row's place
/// in it, so a row's bits are the same in every batch and on every device (tests:
/// `linear_tile_switch_keeps_bits`).
pub fn linear_tile(n: usize, t: usize, min_groups: usize) -> LinearTile {
    let last = LINEAR_TILES[LINEAR_TILES.len() - 1];
    LINEAR_TILES.into_iter().find(|tile| tile.groups(n, t) >= min_groups).unwrap_or(last)
}

/// Everything the projection kernel's source depends on (its cache key is its Debug form).
#[derive(Clone, Copy, Debug)]
struct LinearCfg {
    precision: Precision,
    tile: LinearTile,
    gelu: bool,
    residual: bool,
    xv4: bool,
    wv4: bool,
    ov4: bool,
    check_n: bool,
    check_k: bool,
}

impl LinearCfg {
    fn key(&self) -> String {
        format!("encoder linear {self:?}")
    }

    fn source(&self) -> String {
        let mut s = crate::kernels::numeric_prelude();
        s.push_str(include_str!("../kernels/encoder_math.glsl"));
        let t = self.tile;
        writeln!(s, "#define BM {}\n#define BN {}\n#define BK {}\n#define TM {}\n#define TN {}", t.rows, t.cols, t.k_step, t.block_rows, t.block_cols).unwrap();
        s.push_str(match self.precision {
            Precision::Fp32 => "#define W_F32\n",
            Precision::Compensated => "#define W_F32\n#define COMP\n",
            Precision::Fp16 => "#define W_F16\n#define X_F16\n",
            Precision::Bf16 => "#define W_BF16\n#define X_BF16\n",
        });
        for (on, name) in [
            (self.gelu, "GELU"),
            (self.residual, "RES"),
            (self.xv4, "XV4"),
            (self.wv4, "WV4"),
            (self.ov4, "OV4"),
            (self.check_n, "CHECK_N"),
            (self.check_k, "CHECK_K"),
        ] {
            if on {
                writeln!(s, "#define {name}").unwrap();
            }
        }
        s.push_str(include_str!("../kernels/encoder_linear.glsl"));
        s
    }
}

/// Everything the attention kernel's source depends on.
#[derive(Clone, Copy, Debug)]
struct AttentionCfg {
    d: u32,
    qb: u32,
    kb: u32,
    scores: AttentionScores,
}

impl AttentionCfg {
    fn key(&self) -> String {
        format!("encoder attention {self:?}")
    }

    fn source(&self) -> String {
        let mut s = crate::kernels::numeric_prelude();
        s.push_str(include_str!("../kernels/encoder_math.glsl"));
        writeln!(s, "#define D {}\n#define QB {}\n#define KB {}", self.d, self.qb, self.kb).unwrap();
        if self.scores == AttentionScores::Registers {
            s.push_str("#define SCORES_IN_REGISTERS\n");
        }
        s.push_str(include_str!("../kernels/encoder_attention.glsl"));
        s
    }
}

/// `t` as a `[rows, cols]` matrix of `dtype` whose rows are contiguous (any offset).
pub(crate) fn matrix(t: &Tensor, dtype: DType, op: &str, name: &str) -> Result<(usize, usize)> {
    if t.dtype != dtype {
        return Err(invalid!("{op}: {name} must be {dtype}, got {}", t.dtype));
    }
    if t.shape.len() != 2 {
        return Err(invalid!("{op}: {name} must be a matrix, got shape {:?}", t.shape));
    }
    if !t.is_contiguous() {
        return Err(invalid!("{op}: {name} must be contiguous, got strides {:?}", t.strides));
    }
    Ok((t.shape[0], t.shape[1]))
}

/// `t` as a contiguous `[len]` vector of `dtype`.
pub(crate) fn vector(t: &Tensor, dtype: DType, len: usize, op: &str, name: &str) -> Result<()> {
    if t.dtype != dtype {
        return Err(invalid!("{op}: {name} must be {dtype}, got {}", t.dtype));
    }
    if t.shape != [len] {
        return Err(invalid!("{op}: {name} must have shape [{len}], got {:?}", t.shape));
    }
    if !t.is_contiguous() {
        return Err(invalid!("{op}: {name} must be contiguous, got strides {:?}", t.strides));
    }
    Ok(())
}

fn check_eps(eps: f32, op: &str) -> Result<()> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(invalid!("{op}: eps {eps} must be finite and non-negative"));
    }
    Ok(())
}
