//! A checkpoint folder's configuration: the model (`config.json`) and sentence-transformers'
//! pipeline around it (`modules.json`, `sentence_bert_config.json`, the pooling module's
//! `config.json`). Where sentence-transformers' files are absent the defaults are a plain
//! BERT's: mean pooling, no normalisation, the model's position limit as max tokens.

use crate::error::{invalid, Result};
use serde::Deserialize;
use std::path::Path;

/// How token rows become one vector per input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pooling {
    /// Mean of the sequence's token rows (special tokens included, as sentence-transformers).
    Mean,
    /// The first token's row ([CLS]).
    Cls,
}

impl Pooling {
    pub fn name(self) -> &'static str {
        match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
        }
    }
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

#[derive(Deserialize)]
struct ModelJson {
    #[serde(default)]
    model_type: Option<String>,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    vocab_size: usize,
    max_position_embeddings: usize,
    #[serde(default = "two")]
    type_vocab_size: usize,
    #[serde(default = "bert_eps")]
    layer_norm_eps: f64,
    #[serde(default)]
    hidden_act: Option<String>,
    #[serde(default)]
    position_embedding_type: Option<String>,
}

fn two() -> usize {
    2
}

fn bert_eps() -> f64 {
    1e-12
}

#[derive(Deserialize)]
struct ModuleJson {
    #[serde(default)]
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct SentenceBertJson {
    max_seq_length: Option<usize>,
}

#[derive(Deserialize)]
struct PoolingJson {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
}

/// Architectures whose checkpoints have BERT's layout (`embeddings.*`, `encoder.layer.N.*`).
const BERT_FAMILY: &[&str] = &["bert", "roberta", "xlm-roberta", "camembert", "electra", "mpnet"];

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| invalid!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| invalid!("{}: {e}", path.display()))
}

impl EncoderConfig {
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    /// Reads `dir`'s configuration. Anything the runtime cannot run (another architecture,
    /// pooling mode or activation) is an error naming it.
    pub fn read(dir: &Path) -> Result<EncoderConfig> {
        let m: ModelJson = read_json(&dir.join("config.json"))?;
        let model_type = m.model_type.unwrap_or_else(|| "bert".into());
        // Only BERT itself is validated; its relatives differ (RoBERTa's position offset,
        // MPNet's relative buckets), so they are refused rather than run wrongly.
        if model_type != "bert" {
            let known = BERT_FAMILY.contains(&model_type.as_str());
            return Err(invalid!(
                "encoder: model_type {model_type:?} is not supported{} (supported: bert, incl. MiniLM/BGE/E5 checkpoints of BERT layout)",
                if known { " yet" } else { "" }
            ));
        }
        if let Some(act) = m.hidden_act.as_deref() {
            if act != "gelu" {
                return Err(invalid!("encoder: hidden_act {act:?} is not supported (supported: gelu)"));
            }
        }
        if let Some(p) = m.position_embedding_type.as_deref() {
            if p != "absolute" {
                return Err(invalid!("encoder: position_embedding_type {p:?} is not supported (supported: absolute)"));
            }
        }
        let positive = [
            ("hidden_size", m.hidden_size),
            ("num_hidden_layers", m.num_hidden_layers),
            ("num_attention_heads", m.num_attention_heads),
            ("intermediate_size", m.intermediate_size),
            ("vocab_size", m.vocab_size),
            ("max_position_embeddings", m.max_position_embeddings),
            ("type_vocab_size", m.type_vocab_size),
        ];
        for (name, v) in positive {
            if v == 0 || v > 1 << 24 {
                return Err(invalid!("encoder: config.json {name} = {v} is out of range"));
            }
        }
        if !m.hidden_size.is_multiple_of(m.num_attention_heads) {
            return Err(invalid!("encoder: hidden_size {} is not a multiple of num_attention_heads {}", m.hidden_size, m.num_attention_heads));
        }
        if !(m.layer_norm_eps.is_finite() && m.layer_norm_eps > 0.0) {
            return Err(invalid!("encoder: layer_norm_eps {} must be a positive number", m.layer_norm_eps));
        }

        // sentence-transformers' pipeline, where the folder has one.
        let mut pooling = Pooling::Mean;
        let mut normalize = false;
        let mut max_tokens = m.max_position_embeddings;
        let modules_path = dir.join("modules.json");
        if modules_path.exists() {
            let modules: Vec<ModuleJson> = read_json(&modules_path)?;
            for module in &modules {
                let kind = module.kind.rsplit('.').next().unwrap_or(&module.kind);
                match kind {
                    "Transformer" => {}
                    "Pooling" => pooling = read_pooling(&dir.join(&module.path).join("config.json"))?,
                    "Normalize" => normalize = true,
                    other => return Err(invalid!("encoder: sentence-transformers module {other:?} is not supported")),
                }
            }
        }
        let st_path = dir.join("sentence_bert_config.json");
        if st_path.exists() {
            let st: SentenceBertJson = read_json(&st_path)?;
            if let Some(n) = st.max_seq_length {
                max_tokens = n.min(m.max_position_embeddings);
            }
        }
        Ok(EncoderConfig {
            model_type,
            hidden: m.hidden_size,
            layers: m.num_hidden_layers,
            heads: m.num_attention_heads,
            intermediate: m.intermediate_size,
            vocab: m.vocab_size,
            max_positions: m.max_position_embeddings,
            type_vocab: m.type_vocab_size,
            layer_norm_eps: m.layer_norm_eps as f32,
            max_tokens,
            pooling,
            normalize,
        })
    }
}

fn read_pooling(path: &Path) -> Result<Pooling> {
    let p: PoolingJson = read_json(path)?;
    let unsupported = [
        ("max", p.pooling_mode_max_tokens),
        ("mean_sqrt_len", p.pooling_mode_mean_sqrt_len_tokens),
        ("weightedmean", p.pooling_mode_weightedmean_tokens),
        ("lasttoken", p.pooling_mode_lasttoken),
    ];
    if let Some((name, _)) = unsupported.iter().find(|(_, on)| *on) {
        return Err(invalid!("encoder: pooling mode {name} is not supported (supported: mean, cls)"));
    }
    match (p.pooling_mode_mean_tokens, p.pooling_mode_cls_token) {
        (true, false) => Ok(Pooling::Mean),
        (false, true) => Ok(Pooling::Cls),
        (true, true) => Err(invalid!("encoder: {} asks for mean and cls pooling together (concatenated): not supported", path.display())),
        (false, false) => Err(invalid!("encoder: {} names no pooling mode", path.display())),
    }
}
