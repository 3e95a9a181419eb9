//! The encoder's kernels, each recorded into a caller's batch over packed token rows
//! (see [`super`]): embeddings + layernorm, projection GEMMs with bias/activation/residual
//! epilogues, attention per sequence (QKᵀ·softmax·V without materialising the scores),
//! layernorm, pooling + L2 normalisation. f32 activations throughout; projection weights in
//! f32, f16 or bf16 by [`Precision`].
//!
//! Contract shared by all of them: the result for a row (token) or a sequence depends only on
//! that row's / sequence's own data and the weights — the kernel, its tiling and its summation
//! order are chosen from the weight shapes alone — so batch composition never changes a bit.

use crate::error::{invalid, Result};
use crate::submit::Batch;
use crate::tensor::Tensor;
use crate::Context;

/// How a projection's operands are multiplied. Every mode accumulates in f32.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// f32 × f32 (the default; PyTorch fp32's numerics up to summation order).
    #[default]
    Fp32,
    /// Both operands split into hi + lo parts on tensor cores (split-f32), f32 accumulation;
    /// plain f32 outside projections.
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
        let _ = (batch, x, w, bias, act, residual, precision, out);
        Err(invalid!("encoder linear: not built yet"))
    }

    /// Token embeddings: `out[t] = layernorm(word[ids[t]] + position[positions[t]] +
    /// token_type[token_types[t]]) · gamma + beta`. `ids`, `positions`, `token_types` are `[T]`
    /// u32; the tables `[V, H]`, `[P, H]`, `[S, H]` f32; `out` `[T, H]` f32. An index out of its
    /// table's range is an error found before recording (the caller checks ids on the host).
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
        let _ = (batch, ids, positions, token_types, word, position, token_type, gamma, beta, eps, out);
        Err(invalid!("encoder embeddings: not built yet"))
    }

    /// Row-wise layernorm of `x` `[T, H]` f32 (biased variance, as PyTorch) into `out`.
    pub fn record_encoder_layernorm(&self, batch: &mut Batch<'_>, x: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f32, out: &Tensor) -> Result<()> {
        let _ = (batch, x, gamma, beta, eps, out);
        Err(invalid!("encoder layernorm: not built yet"))
    }

    /// Multi-head self-attention per sequence: `qkv` is `[T, 3·heads·head_dim]` f32 (each row
    /// q | k | v, heads contiguous inside each), `seq_offsets` `[B + 1]` u32 (rows of sequence
    /// `b` are `seq_offsets[b]..seq_offsets[b+1]`, every sequence at most `max_len` long);
    /// `out[t, h·D + d] = Σ_j softmax_j(q_t·k_j·scale) · v_j[d]` over `t`'s own sequence.
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
        let _ = (batch, qkv, seq_offsets, sequences, max_len, heads, head_dim, scale, out);
        Err(invalid!("encoder attention: not built yet"))
    }

    /// Pools each sequence's rows of `x` `[T, H]` into `out` `[B, H]` f32 (mean over the
    /// sequence's tokens, or its first token for CLS), then divides each row by its L2 norm
    /// (clamped below at 1e-12, as `torch.nn.functional.normalize`) when `normalize` is set.
    pub fn record_encoder_pool(&self, batch: &mut Batch<'_>, x: &Tensor, seq_offsets: &Tensor, pooling: super::Pooling, normalize: bool, out: &Tensor) -> Result<()> {
        let _ = (batch, x, seq_offsets, pooling, normalize, out);
        Err(invalid!("encoder pooling: not built yet"))
    }
}
