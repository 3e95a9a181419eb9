//! What the server and the encode loop embed with: the [`Embedder`] trait, and
//! [`EngineEmbedder`], the engine's encoder behind it.
//!
//! Everything above this trait (queue, HTTP API, JSON lines) is tested with a fake embedder on
//! a machine without a GPU; only `EngineEmbedder` touches the device.

use nx_vulkan_engine::encoder::{Encoder, EncoderOptions};
use nx_vulkan_engine::{Context, EngineError};
use std::path::PathBuf;
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

/// What a loaded model is, as answers and `/health` name it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelInfo {
    pub model: String,
    pub device: String,
    pub precision: String,
    pub dimensions: usize,
    pub max_tokens: usize,
}

/// One input's embedding.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbedOutput {
    pub vector: Vec<f32>,
    /// Tokens the model saw (special tokens included).
    pub tokens: usize,
    /// The input was longer than the model's limit and was cut.
    pub truncated: bool,
}

/// A model that embeds a batch of texts. One thread owns it and calls it with one batch at a
/// time; it must answer with one output per text, in order.
pub trait Embedder: Send + 'static {
    fn info(&self) -> ModelInfo;
    fn embed(&mut self, texts: &[String]) -> Result<Vec<EmbedOutput>, String>;
}

impl<E: Embedder + ?Sized> Embedder for Box<E> {
    fn info(&self) -> ModelInfo {
        (**self).info()
    }
    fn embed(&mut self, texts: &[String]) -> Result<Vec<EmbedOutput>, String> {
        (**self).embed(texts)
    }
}

type Request = (Vec<String>, Sender<Result<Vec<EmbedOutput>, String>>);

/// The engine's [`Encoder`] as an [`Embedder`]. The encoder lives on its own thread with an
/// engine thread's stack (loading compiles kernels; lavapipe and glslang recurse deeply), so
/// neither the caller's stack nor whether `Encoder` is `Send` matters; calls reach it over a
/// channel. Dropping the `EngineEmbedder` ends the thread, frees the model and waits for both:
/// a process that returns from `main` while that thread still tears down the device crashes
/// inside the driver (the NVIDIA driver's exit handlers run meanwhile: `nx-vulkan encode`
/// ended with SIGSEGV on an H200 after writing every line).
pub struct EngineEmbedder {
    info: ModelInfo,
    /// `None` only while dropping.
    requests: Option<Sender<Request>>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl Drop for EngineEmbedder {
    fn drop(&mut self) {
        // closing the channel ends the worker's loop; it then drops the encoder and its device
        drop(self.requests.take());
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl EngineEmbedder {
    /// Loads the checkpoint in `dir` onto `ctx`; returns once the model is ready, or with the
    /// engine's error (an unsupported precision included: it is never replaced by another).
    pub fn load(ctx: Arc<Context>, dir: PathBuf, options: EncoderOptions) -> Result<EngineEmbedder, EngineError> {
        let (ready_tx, ready_rx) = channel();
        let (requests, rx) = channel::<Request>();
        let worker = std::thread::Builder::new()
            .name("nx-vulkan-encoder".into())
            .stack_size(nx_vulkan_engine::exec::STACK_BYTES)
            .spawn(move || {
                let encoder = match Encoder::load(ctx, &dir, &options) {
                    Ok(e) => e,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let i = encoder.info();
                let info = ModelInfo {
                    model: i.model.clone(),
                    device: i.device.clone(),
                    precision: i.precision.name().to_string(),
                    dimensions: i.dimensions,
                    max_tokens: i.max_tokens,
                };
                if ready_tx.send(Ok(info)).is_err() {
                    return;
                }
                for (texts, reply) in rx {
                    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                    // A panic fails this batch, not the server: the next batch gets the encoder.
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| encoder.embed(&refs)))
                        .map_err(|_| "internal error: the encoder panicked".to_string())
                        .and_then(|r| r.map_err(|e| e.to_string()))
                        .map(|v| v.into_iter().map(|e| EmbedOutput { vector: e.vector, tokens: e.tokens, truncated: e.truncated }).collect());
                    let _ = reply.send(out);
                }
            })
            .map_err(|e| EngineError::Vulkan(format!("spawning the encoder thread: {e}")))?;
        // (built first, so a failed load is waited for by the drop as well)
        let mut embedder = EngineEmbedder { info: ModelInfo::default(), requests: Some(requests), worker: Some(worker) };
        embedder.info = ready_rx.recv().map_err(|_| EngineError::Vulkan("the encoder thread stopped while loading".into()))??;
        Ok(embedder)
    }
}

impl Embedder for EngineEmbedder {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn embed(&mut self, texts: &[String]) -> Result<Vec<EmbedOutput>, String> {
        let (tx, rx) = channel();
        let requests = self.requests.as_ref().ok_or("the encoder thread is gone")?;
        requests.send((texts.to_vec(), tx)).map_err(|_| "the encoder thread is gone".to_string())?;
        rx.recv().map_err(|_| "the encoder thread stopped during a batch".to_string())?
    }
}
