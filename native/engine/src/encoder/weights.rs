//! `model.safetensors`, memory-mapped. The safetensors header is validated by the
//! `safetensors` crate (offsets inside the file, no overlap); every tensor the forward pass
//! reads is then checked by name, dtype and shape against the config before anything is
//! uploaded, and converted on the host to the type its kernel reads.

use super::config::EncoderConfig;
use super::kernels::Precision;
use crate::dtype::DType;
use crate::error::{invalid, Result};
use crate::tensor::Tensor;
use crate::Context;
use half::{bf16, f16};
use safetensors::{Dtype, SafeTensors};
use std::path::Path;

/// One transformer layer's weights on the device. Projection weights are `[N, K]` (PyTorch's
/// Linear layout) in the precision's weight type; everything else f32.
pub struct LayerWeights {
    /// Query, key and value projections stacked: `[3H, H]`, bias `[3H]`.
    pub qkv: Tensor,
    pub qkv_bias: Tensor,
    pub attn_out: Tensor,
    pub attn_out_bias: Tensor,
    pub attn_norm: (Tensor, Tensor),
    pub ffn_up: Tensor,
    pub ffn_up_bias: Tensor,
    pub ffn_down: Tensor,
    pub ffn_down_bias: Tensor,
    pub ffn_norm: (Tensor, Tensor),
}

/// The whole model's weights on the device.
pub struct EncoderWeights {
    pub word: Tensor,
    pub position: Tensor,
    pub token_type: Tensor,
    pub embed_norm: (Tensor, Tensor),
    pub layers: Vec<LayerWeights>,
    /// Bytes uploaded.
    pub bytes: u64,
}

/// The memory-mapped file and the name prefix its tensors carry (`""`, `"bert."`, ...).
struct Checkpoint<'a> {
    st: SafeTensors<'a>,
    prefix: &'static str,
    path: &'a Path,
}

/// The type projection weights are stored in for `precision`.
pub fn projection_type(precision: Precision) -> DType {
    match precision {
        Precision::Fp32 | Precision::Compensated => DType::F32,
        Precision::Fp16 => DType::F16,
        Precision::Bf16 => DType::BF16,
    }
}

impl<'a> Checkpoint<'a> {
    /// `name`'s values as f32 after checking its shape.
    fn f32s(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let full = format!("{}{name}", self.prefix);
        let view = self.st.tensor(&full).map_err(|_| invalid!("{}: tensor {full:?} is missing", self.path.display()))?;
        if view.shape() != shape {
            return Err(invalid!("{}: tensor {full:?} has shape {:?}, the config implies {shape:?}", self.path.display(), view.shape()));
        }
        let data = view.data();
        let values: Vec<f32> = match view.dtype() {
            Dtype::F32 => data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
            Dtype::F16 => data.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            Dtype::BF16 => data.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            other => return Err(invalid!("{}: tensor {full:?} is {other:?}; expected F32, F16 or BF16", self.path.display())),
        };
        if values.len() != shape.iter().product::<usize>() {
            return Err(invalid!("{}: tensor {full:?} holds {} values for shape {shape:?}", self.path.display(), values.len()));
        }
        Ok(values)
    }
}

fn upload_as(ctx: &Context, dtype: DType, shape: &[usize], values: &[f32]) -> Result<Tensor> {
    let data: Vec<u8> = match dtype {
        DType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        // Round to nearest even, as torch's .half()/.bfloat16() do.
        DType::F16 => values.iter().flat_map(|v| f16::from_f32(*v).to_le_bytes()).collect(),
        DType::BF16 => values.iter().flat_map(|v| bf16::from_f32(*v).to_le_bytes()).collect(),
        other => return Err(invalid!("encoder weights: no {other} upload")),
    };
    ctx.upload(dtype, shape, &data)
}

impl EncoderWeights {
    /// Reads `path` (a safetensors file) for `config` and uploads it to `ctx`.
    pub fn load(ctx: &Context, path: &Path, config: &EncoderConfig, precision: Precision) -> Result<EncoderWeights> {
        let file = std::fs::File::open(path).map_err(|e| invalid!("{}: {e}", path.display()))?;
        // SAFETY: the map is read-only and lives only while loading; a file changed underneath
        // us while loading can give wrong values but not unsafety beyond what reading it does.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| invalid!("{}: {e}", path.display()))?;
        let st = SafeTensors::deserialize(&map).map_err(|e| invalid!("{}: not a valid safetensors file: {e}", path.display()))?;
        let prefix = ["", "bert.", "model."]
            .into_iter()
            .find(|p| st.tensor(&format!("{p}embeddings.word_embeddings.weight")).is_ok())
            .ok_or_else(|| invalid!("{}: no embeddings.word_embeddings.weight (is this a BERT-family checkpoint?)", path.display()))?;
        let ck = Checkpoint { st, prefix, path };
        let (h, i) = (config.hidden, config.intermediate);
        let proj = projection_type(precision);
        // `name`'s values checked against `shape`, uploaded as `dtype`
        let tensor = |name: &str, shape: &[usize], dtype: DType| -> Result<Tensor> { upload_as(ctx, dtype, shape, &ck.f32s(name, shape)?) };
        let f32 = DType::F32;
        let word = tensor("embeddings.word_embeddings.weight", &[config.vocab, h], f32)?;
        let position = tensor("embeddings.position_embeddings.weight", &[config.max_positions, h], f32)?;
        let token_type = tensor("embeddings.token_type_embeddings.weight", &[config.type_vocab, h], f32)?;
        let embed_norm = (tensor("embeddings.LayerNorm.weight", &[h], f32)?, tensor("embeddings.LayerNorm.bias", &[h], f32)?);
        let mut layers = Vec::with_capacity(config.layers);
        for l in 0..config.layers {
            let p = |name: &str| format!("encoder.layer.{l}.{name}");
            let mut qkv = Vec::with_capacity(3 * h * h);
            let mut qkv_bias = Vec::with_capacity(3 * h);
            for part in ["query", "key", "value"] {
                qkv.extend(ck.f32s(&p(&format!("attention.self.{part}.weight")), &[h, h])?);
                qkv_bias.extend(ck.f32s(&p(&format!("attention.self.{part}.bias")), &[h])?);
            }
            layers.push(LayerWeights {
                qkv: upload_as(ctx, proj, &[3 * h, h], &qkv)?,
                qkv_bias: upload_as(ctx, f32, &[3 * h], &qkv_bias)?,
                attn_out: tensor(&p("attention.output.dense.weight"), &[h, h], proj)?,
                attn_out_bias: tensor(&p("attention.output.dense.bias"), &[h], f32)?,
                attn_norm: (tensor(&p("attention.output.LayerNorm.weight"), &[h], f32)?, tensor(&p("attention.output.LayerNorm.bias"), &[h], f32)?),
                ffn_up: tensor(&p("intermediate.dense.weight"), &[i, h], proj)?,
                ffn_up_bias: tensor(&p("intermediate.dense.bias"), &[i], f32)?,
                ffn_down: tensor(&p("output.dense.weight"), &[h, i], proj)?,
                ffn_down_bias: tensor(&p("output.dense.bias"), &[h], f32)?,
                ffn_norm: (tensor(&p("output.LayerNorm.weight"), &[h], f32)?, tensor(&p("output.LayerNorm.bias"), &[h], f32)?),
            });
        }
        let mut all = vec![&word, &position, &token_type, &embed_norm.0, &embed_norm.1];
        for l in &layers {
            all.extend([&l.qkv, &l.qkv_bias, &l.attn_out, &l.attn_out_bias, &l.attn_norm.0, &l.attn_norm.1]);
            all.extend([&l.ffn_up, &l.ffn_up_bias, &l.ffn_down, &l.ffn_down_bias, &l.ffn_norm.0, &l.ffn_norm.1]);
        }
        let bytes = all.iter().map(|t| t.byte_size() as u64).sum();
        Ok(EncoderWeights { word, position, token_type, embed_norm, layers, bytes })
    }
}
