//! The LLM runtime: GGUF models (llama, qwen2, qwen3) on the engine.
//!
//! [`gguf`] reads and checks the file; [`quant`] knows ggml's block formats and dequantizes
//! them on the host (the reference for the kernels).

pub mod chat;
pub mod config;
pub mod gguf;
pub mod kernels;
pub mod model;
pub mod quant;
pub mod tokenizer;

pub use gguf::{Gguf, MetaValue, TensorInfo};
pub use quant::GgmlType;
