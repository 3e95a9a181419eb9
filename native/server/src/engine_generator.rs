//! [`Generator`] over the engine's LLM runtime: prompts rendered and tokenized here, sessions
//! run by the runtime's batching worker (several requests share each decode step), events
//! forwarded to the HTTP handler's channel. A closed channel cancels the session.

use crate::generator::{FinishReason, GenError, GenEvent, GenModelInfo, GenParams, GenPrompt, GenToken, Generator};
use nx_vulkan_engine::llm::chat::{ChatMessage as EngineMessage, ChatTemplate};
use nx_vulkan_engine::llm::runtime::{FinishReason as EngineFinish, GenEvent as EngineEvent, GenRequest, LlmRuntime};
use nx_vulkan_engine::llm::sample::SamplingParams;
use nx_vulkan_engine::EngineError;
use std::sync::Arc;
use tokio::sync::mpsc;

pub struct EngineGenerator {
    runtime: Arc<LlmRuntime>,
    template: Option<ChatTemplate>,
    info: GenModelInfo,
}

impl EngineGenerator {
    /// `id`: the model name clients use; `quantization`: how its weights are stored. The
    /// activations are read off the loaded matrices, not the options asked for.
    pub fn new(runtime: Arc<LlmRuntime>, template: Option<ChatTemplate>, id: String, device: String, quantization: String) -> EngineGenerator {
        let context_length = runtime.llm.attn.ctx;
        let activations = if runtime.llm.matrices().iter().any(|m| m.x_int8) { "int8" } else { "f32" }.to_string();
        EngineGenerator { runtime, template, info: GenModelInfo { id, device, context_length, quantization, activations } }
    }
}

fn bad(e: EngineError) -> GenError {
    match e {
        EngineError::InvalidArgument(m) => GenError::BadRequest(m),
        EngineError::Busy(_) => GenError::Busy,
        other => GenError::Internal(other.to_string()),
    }
}

impl Generator for EngineGenerator {
    fn info(&self) -> GenModelInfo {
        self.info.clone()
    }

    fn start(&self, prompt: GenPrompt, params: GenParams) -> Result<mpsc::Receiver<GenEvent>, GenError> {
        let tok = &self.runtime.tokenizer;
        let ids = match prompt {
            GenPrompt::Text(t) => tok.encode(&t, true, true).map_err(bad)?,
            GenPrompt::Chat(msgs) => {
                let template = self.template.as_ref().ok_or_else(|| GenError::BadRequest("this model has no chat template (start the server with --template chatml|llama3)".into()))?;
                let msgs: Vec<EngineMessage> = msgs.into_iter().map(|m| EngineMessage { role: m.role, content: m.content }).collect();
                // The rendered prompt holds whatever BOS its template writes.
                tok.encode(&template.render(&msgs, true).map_err(bad)?, false, true).map_err(bad)?
            }
        };
        let req = GenRequest {
            prompt: ids,
            sampling: SamplingParams {
                temperature: params.temperature,
                top_k: params.top_k,
                top_p: params.top_p,
                min_p: params.min_p,
                repeat_penalty: params.repeat_penalty,
                // No seed asked for: a fresh one per request (a fixed default would make every
                // "random" answer to the same prompt the same).
                seed: params.seed.unwrap_or_else(fresh_seed),
                logprobs: params.logprobs.unwrap_or(0),
                ..Default::default()
            },
            max_tokens: params.max_tokens,
            stop: params.stop,
            ignore_eos: false,
        };
        let want_logprobs = params.logprobs.is_some();
        // Events are few and small; an unbounded channel never blocks the batching worker.
        let (tx, mut rx_unbounded) = mpsc::unbounded_channel::<GenEvent>();
        let tok2 = self.runtime.tokenizer.clone();
        self.runtime
            .submit(
                req,
                Box::new(move |e| {
                    let ev = match e {
                        EngineEvent::Token { id, text, logprob, top } => GenEvent::Token(GenToken {
                            id,
                            text,
                            logprob: (want_logprobs && !logprob.is_nan()).then_some(logprob),
                            top_logprobs: top.into_iter().map(|(i, l)| (tok2.decode(&[i], false), l)).collect(),
                        }),
                        EngineEvent::Done { reason, prompt_tokens, completion_tokens, .. } => GenEvent::Done {
                            finish_reason: match reason {
                                EngineFinish::Stop => FinishReason::Stop,
                                EngineFinish::Length => FinishReason::Length,
                                EngineFinish::Cancelled => FinishReason::Cancelled,
                            },
                            prompt_tokens,
                            completion_tokens,
                        },
                        EngineEvent::Error(m) => GenEvent::Error(m),
                    };
                    tx.send(ev).is_ok()
                }),
            )
            .map_err(bad)?;
        // The trait hands out a bounded receiver: a forwarding task bridges the two, and
        // ends (closing the engine side) when the handler drops its receiver.
        let (out_tx, out_rx) = mpsc::channel::<GenEvent>(64);
        tokio::spawn(async move {
            while let Some(e) = rx_unbounded.recv().await {
                if out_tx.send(e).await.is_err() {
                    break;
                }
            }
        });
        Ok(out_rx)
    }
}

fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}
