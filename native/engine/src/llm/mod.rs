//! The LLM runtime: GGUF models (llama, qwen2, qwen3) on the engine.
//!
//! [`gguf`] reads and checks the file; [`quant`] knows ggml's block formats and dequantizes
//! them on the host (the reference for the kernels); [`config`] reads the architecture from
//! the metadata; [`model`] uploads the weights as stored and records a forward step over
//! packed token rows of any sessions ([`kernels`]; [`prefill`]: the tensor-core GEMM for
//! steps of many rows); [`tokenizer`] and [`chat`] turn text and messages into ids; [`sample`] picks tokens; [`runtime`] runs generations as sessions in
//! KV-cache slots, batched into shared steps (continuous batching).

pub mod chat;
pub mod config;
pub mod gguf;
pub mod kernels;
pub mod model;
pub mod prefill;
pub mod quant;
pub mod runtime;
pub mod sample;
pub mod tokenizer;

pub use gguf::{Gguf, MetaValue, TensorInfo};
pub use quant::GgmlType;
