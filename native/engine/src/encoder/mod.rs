//! The encoder runtime: BERT-family checkpoints (BERT, MiniLM, BGE/E5-style) as one recorded
//! forward pass per batch.
//!
//! A checkpoint folder holds `config.json`, `model.safetensors` and `tokenizer.json`, plus
//! sentence-transformers' `modules.json`, `sentence_bert_config.json` (max_seq_length) and
//! `1_Pooling/config.json` where present ([`config`]). Weights are memory-mapped, checked and
//! uploaded once ([`weights`]); texts are tokenized with the HF `tokenizers` crate, truncated
//! like sentence-transformers ([`tokenize`]).
//!
//! **Ragged batches without padding.** A batch's token rows are packed one sequence after the
//! other (`T = Σ lengths` rows) with `seq_offsets[b]..seq_offsets[b+1]` naming sequence `b`'s
//! rows. Projections are row-wise GEMMs over all `T` rows, attention runs per sequence
//! ([`kernels`]). Every kernel's choice and summation order depend only on the weights' shapes
//! and each sequence's own length — never on the batch size, the batch-mates or a padded length —
//! so an input's embedding is bit-identical whatever batch it arrives in ([`forward`]).

pub mod config;
pub mod forward;
pub mod kernels;
pub mod tokenize;
pub mod weights;

pub use config::{EncoderConfig, Pooling};
pub use forward::{Embedding, Encoder, EncoderInfo, EncoderOptions};
pub use kernels::{Activation, Precision};
