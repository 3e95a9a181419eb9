//! A model's hyperparameters, read from GGUF metadata and checked against its tensors.

use super::gguf::Gguf;
use crate::error::{invalid, Result};

/// The architectures the runtime runs (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
}

impl Arch {
    pub fn parse(name: &str) -> Option<Arch> {
        match name {
            "llama" => Some(Arch::Llama),
            "qwen2" => Some(Arch::Qwen2),
            "qwen3" => Some(Arch::Qwen3),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
        }
    }

    /// llama.cpp's rope type: llama rotates adjacent pairs (its converter permutes Q/K rows for
    /// this), the qwen family rotates `(i, i + n_rot/2)` (NeoX).
    pub fn rope_neox(self) -> bool {
        !matches!(self, Arch::Llama)
    }
}

/// Everything the forward pass needs to know about a model's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmConfig {
    pub arch: Arch,
    pub name: String,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub n_vocab: usize,
    pub context_length: usize,
    pub rms_eps: f32,
    pub rope_base: f32,
    /// Dimensions of each head that are rotated (the rest pass through).
    pub rope_dims: usize,
    pub rope_neox: bool,
    /// Positions are multiplied by this before rotation (`rope.scaling.type = linear`).
    pub rope_freq_scale: f32,
    /// Q/K/V projections carry biases (qwen2).
    pub qkv_bias: bool,
    /// Per-head RMSNorm of q and k before RoPE (qwen3).
    pub qk_norm: bool,
    /// No `output.weight`: the token embedding is the output projection.
    pub tied_output: bool,
}

impl LlmConfig {
    pub fn from_gguf(g: &Gguf) -> Result<LlmConfig> {
        let file = g.path.display();
        let arch_name = g.str("general.architecture")?.ok_or_else(|| invalid!("{file}: metadata \"general.architecture\" is missing"))?;
        let arch = Arch::parse(arch_name)
            .ok_or_else(|| invalid!("{file}: architecture {arch_name:?} is not supported (supported: llama, qwen2, qwen3)"))?;
        let key = |k: &str| format!("{arch_name}.{k}");
        let req = |k: &str| -> Result<usize> {
            let v = g.require_u64(&key(k))?;
            usize::try_from(v).ok().filter(|&v| v > 0 && v <= 1 << 24).ok_or_else(|| invalid!("{file}: {} = {v} is out of range", key(k)))
        };
        let n_embd = req("embedding_length")?;
        let n_layer = req("block_count")?;
        let n_head = req("attention.head_count")?;
        let n_head_kv = match g.u64(&key("attention.head_count_kv"))? {
            Some(v) => v as usize,
            None => n_head,
        };
        if n_head_kv == 0 || n_head % n_head_kv != 0 {
            return Err(invalid!("{file}: {n_head} query heads cannot share {n_head_kv} key/value heads"));
        }
        let head_dim = match g.u64(&key("attention.key_length"))? {
            Some(v) => v as usize,
            None => n_embd / n_head,
        };
        if let Some(vl) = g.u64(&key("attention.value_length"))? {
            if vl as usize != head_dim {
                return Err(invalid!("{file}: value_length {vl} differs from key_length {head_dim} (not supported)"));
            }
        }
        if head_dim == 0 || head_dim % 2 != 0 || head_dim > 256 {
            return Err(invalid!("{file}: head dimension {head_dim} is not supported (even, up to 256)"));
        }
        let n_ff = req("feed_forward_length")?;
        let context_length = req("context_length")?;
        let tokens = g.array("tokenizer.ggml.tokens")?.map(|a| a.len());
        let n_vocab = match (g.u64(&key("vocab_size"))?, tokens) {
            (Some(v), _) => v as usize,
            (None, Some(n)) => n,
            (None, None) => g.tensor("token_embd.weight").and_then(|t| t.dims.get(1).copied()).unwrap_or(0) as usize,
        };
        let rms_eps = g.f64(&key("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-5) as f32;
        let rope_base = g.f64(&key("rope.freq_base"))?.unwrap_or(10000.0) as f32;
        let rope_dims = g.u64(&key("rope.dimension_count"))?.map_or(head_dim, |v| v as usize);
        if rope_dims == 0 || rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(invalid!("{file}: rope.dimension_count {rope_dims} does not fit heads of {head_dim}"));
        }
        if !(rms_eps > 0.0 && rms_eps < 1.0) || !(rope_base > 1.0 && rope_base.is_finite()) {
            return Err(invalid!("{file}: rms eps {rms_eps} / rope base {rope_base} out of range"));
        }
        let scaling = g.str(&key("rope.scaling.type"))?.unwrap_or("none");
        let rope_freq_scale = match scaling {
            "none" => 1.0,
            "linear" => {
                let factor = g.f64(&key("rope.scaling.factor"))?.unwrap_or(1.0);
                if !(factor >= 1.0 && factor.is_finite()) {
                    return Err(invalid!("{file}: rope.scaling.factor {factor} is out of range"));
                }
                (1.0 / factor) as f32
            }
            other => return Err(invalid!("{file}: rope scaling {other:?} is not supported (none, linear)")),
        };
        if g.tensor("rope_freqs.weight").is_some() {
            return Err(invalid!("{file}: per-dimension rope frequency factors (rope_freqs.weight, Llama 3.1 scaling) are not supported yet"));
        }
        let name = g.str("general.name")?.unwrap_or("").to_string();
        let cfg = LlmConfig {
            arch,
            name,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim,
            n_ff,
            n_vocab,
            context_length,
            rms_eps,
            rope_base,
            rope_dims,
            rope_neox: arch.rope_neox(),
            rope_freq_scale,
            qkv_bias: g.tensor("blk.0.attn_q.bias").is_some(),
            qk_norm: g.tensor("blk.0.attn_q_norm.weight").is_some(),
            tied_output: g.tensor("output.weight").is_none(),
        };
        if cfg.n_vocab == 0 {
            return Err(invalid!("{file}: the vocabulary size is unknown"));
        }
        Ok(cfg)
    }

    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }

    pub fn kv_dim(&self) -> usize {
        self.n_head_kv * self.head_dim
    }
}
