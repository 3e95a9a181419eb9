//! What the server generates text with: the [`Generator`] trait and the values that cross it.
//! Nothing here names an engine type; the HTTP side ([`crate::completions`]) is tested with a
//! fake generator on a machine without a GPU.
//!
//! The contract, for whoever implements it:
//! - **The generator batches.** [`Generator::start`] is called from many HTTP handlers at once
//!   (at most [`GenConfig::max_sessions`](crate::GenConfig) sessions are open at a time); the
//!   generator runs its sessions together (continuous batching) and answers each on its own
//!   channel. `start` must not block on generation; it returns once the session is accepted.
//!   The server counts a session as over once its `Done`/`Error` has arrived (or its receiver
//!   was dropped), and may call `start` again at once: a generator without a free slot yet
//!   answers [`GenError::Busy`] (503) or queues it.
//! - **Events in order.** Zero or more [`GenEvent::Token`]s, then exactly one `Done` or `Error`,
//!   then the sender is dropped.
//! - **Cancellation is a closed channel.** When the client goes away the server drops the
//!   receiver; the generator must notice (a failed send, or `Sender::is_closed`) and free that
//!   session's slot and cache. Nothing else tells it.
//! - **Stop strings are the generator's job.** `params.stop` holds them; when the generated text
//!   contains one, the generator ends with `Done { finish_reason: Stop }` and never emits the
//!   stop string's text nor anything after it (OpenAI's rule), so it must hold back a token's text
//!   while it could still be the start of a stop string. End of sequence is also `Stop`; reaching
//!   `max_tokens` or the end of the context is `Length`.
//! - **Text is UTF-8 pieces.** A token's `text` is what it adds to the output; a token that ends
//!   inside a UTF-8 character has empty text and the next one carries the whole character. The
//!   server concatenates the pieces as they are.
//! - **Chat templates are the generator's job** ([`GenPrompt::Chat`]): it knows its model's.

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// What a loaded language model is, as `/v1/models`, `/health` and every answer name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenModelInfo {
    /// The model name requests use (`"model"`).
    pub id: String,
    /// The device it runs on, as the engine names it.
    pub device: String,
    /// Most tokens (prompt and completion together) a session may hold.
    pub context_length: usize,
    /// How the weights are stored (`"Q4_1"`, `"f16"`, …).
    pub quantization: String,
    /// What the decode products multiply the weights with: `"f32"`, or `"int8"` where the
    /// model was loaded with int8 activations (and its matrices took that form).
    pub activations: String,
}

/// One chat message. `content` is plain text (the server flattens OpenAI's text parts).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// How to sample. The defaults are OpenAI's (temperature 1, top_p 1, no penalty), with
/// `max_tokens` 256 and top_k/min_p off.
#[derive(Clone, Debug, PartialEq)]
pub struct GenParams {
    pub max_tokens: usize,
    /// 0 is greedy (argmax).
    pub temperature: f32,
    /// 0 is off.
    pub top_k: usize,
    /// 1 is off.
    pub top_p: f32,
    /// 0 is off.
    pub min_p: f32,
    /// llama.cpp's repetition penalty; 1 is off.
    pub repeat_penalty: f32,
    /// With a seed the same request gives the same tokens.
    pub seed: Option<u64>,
    /// Stop strings (see the module docs).
    pub stop: Vec<String>,
    /// `Some(n)`: every token carries its logprob and the `n` most likely alternatives.
    pub logprobs: Option<usize>,
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams { max_tokens: 256, temperature: 1.0, top_k: 0, top_p: 1.0, min_p: 0.0, repeat_penalty: 1.0, seed: None, stop: vec![], logprobs: None }
    }
}

/// What to continue: raw text (`/v1/completions`) or a conversation (`/v1/chat/completions`).
#[derive(Clone, Debug, PartialEq)]
pub enum GenPrompt {
    Text(String),
    Chat(Vec<ChatMessage>),
}

/// One generated token.
#[derive(Clone, Debug, PartialEq)]
pub struct GenToken {
    pub id: u32,
    /// The text it adds (may be empty: see the module docs).
    pub text: String,
    /// Natural-log probability of this token under the sampling distribution; `Some` when
    /// `params.logprobs` is.
    pub logprob: Option<f32>,
    /// The most likely alternatives (text, logprob), most likely first; `params.logprobs` of them.
    pub top_logprobs: Vec<(String, f32)>,
}

/// Why a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// End of sequence, or a stop string.
    Stop,
    /// `max_tokens` or the end of the context.
    Length,
    /// The generator ended it on its own (it is shutting down, say).
    Cancelled,
}

impl FinishReason {
    /// The name answers carry (`finish_reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Cancelled => "cancelled",
        }
    }
}

/// What a session's channel carries.
#[derive(Clone, Debug, PartialEq)]
pub enum GenEvent {
    Token(GenToken),
    Done { finish_reason: FinishReason, prompt_tokens: usize, completion_tokens: usize },
    /// The session failed after it started; nothing follows.
    Error(String),
}

/// Why a session did not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GenError {
    /// No room now; the client should retry (HTTP 503 with `Retry-After`).
    Busy,
    /// The request cannot be served as it is, e.g. a prompt longer than the context (HTTP 400).
    BadRequest(String),
    /// Anything else (HTTP 500).
    Internal(String),
}

impl std::fmt::Display for GenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GenError::Busy => write!(f, "the generator is busy; retry later"),
            GenError::BadRequest(m) => write!(f, "{m}"),
            GenError::Internal(m) => write!(f, "generation failed: {m}"),
        }
    }
}

impl std::error::Error for GenError {}

/// A language model that runs many generation sessions at once (see the module docs).
pub trait Generator: Send + Sync + 'static {
    fn info(&self) -> GenModelInfo;
    /// Starts a generation; events come on the returned receiver in order, ending with `Done`
    /// or `Error`. Dropping the receiver cancels it (the generator must notice the closed
    /// channel and stop that session).
    fn start(&self, prompt: GenPrompt, params: GenParams) -> Result<mpsc::Receiver<GenEvent>, GenError>;
}
