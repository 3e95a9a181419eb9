//! The generation endpoints, in OpenAI's shapes: `POST /v1/completions` (a prompt string),
//! `POST /v1/chat/completions` (messages), both with `stream` (server-sent events:
//! `data: {chunk}\n\n` … `data: [DONE]\n\n`), and `GET /v1/models`.
//!
//! - **Sampling fields**: `max_tokens` (`max_completion_tokens` in chat), `temperature`,
//!   `top_p`, `top_k`, `min_p`, `repeat_penalty`, `seed`, `stop` (a string or a list),
//!   `logprobs` (completions: an integer 0–20; chat: `logprobs: true` with `top_logprobs`
//!   0–20). Out-of-range values are 400. Fields OpenAI has that we cannot honour are refused
//!   (400) rather than ignored: a nonzero `frequency_penalty`/`presence_penalty` (use
//!   `repeat_penalty`), `n`/`best_of` other than 1, `echo`, `suffix`, `logit_bias`, `tools`, a
//!   `response_format` other than text. Other unknown fields (`user`, …) are ignored, as OpenAI
//!   does.
//! - **Model**: `model` may be left out; a name other than the language model's is 404 (as in
//!   `/v1/embeddings`).
//! - **Answers** carry `model`, `usage` (non-streaming; streaming with
//!   `stream_options.include_usage`, as a last chunk with no choices), `system_fingerprint`
//!   (`nx_vulkan-<version>`) and `device` (the generator's device), in every chunk too.
//! - **Admission**: at most `max_sessions` run and `queue` wait ([`crate::GenConfig`]); beyond,
//!   503 with `Retry-After`. A streaming request gets its 200 only once its session has started,
//!   so a refusal from the generator is still a proper status.
//! - **Cancellation**: a client that goes away drops its session's receiver, which is how the
//!   generator learns to stop (noticed at the next token written: a write to a closed socket
//!   fails). An error after the stream started is sent as `data: {"error": …}` then `[DONE]`.

use crate::admission::{Admission, Refusal, Session};
use crate::api::{parse_body, ApiError, App};
use crate::generator::{ChatMessage, GenError, GenEvent, GenModelInfo, GenParams, GenPrompt, GenToken, Generator};
use crate::metrics::Metrics;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// The language model and its admission gate.
pub(crate) struct Generation {
    pub generator: Arc<dyn Generator>,
    pub info: GenModelInfo,
    pub admission: Arc<Admission>,
}

/// Most alternatives per token `logprobs` may ask for.
const MAX_TOP_LOGPROBS: usize = 20;
/// Most stop strings per request.
const MAX_STOPS: usize = 16;
/// `max_tokens` when the request has none (or the context, if smaller).
const DEFAULT_MAX_TOKENS: usize = 256;

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Full => ApiError::overloaded("every generation session and waiting place is taken; retry later".into()),
            Refusal::Closed => ApiError::shutting_down(),
        }
    }
}

impl From<GenError> for ApiError {
    fn from(e: GenError) -> Self {
        match e {
            GenError::Busy => ApiError::overloaded(e.to_string()),
            GenError::BadRequest(m) => ApiError::invalid(m),
            GenError::Internal(_) => ApiError::internal(e.to_string()),
        }
    }
}

/// The fields both endpoints share.
#[derive(Deserialize)]
struct Sampling {
    model: Option<String>,
    max_tokens: Option<i64>,
    max_completion_tokens: Option<i64>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<i64>,
    min_p: Option<f64>,
    repeat_penalty: Option<f64>,
    frequency_penalty: Option<f64>,
    presence_penalty: Option<f64>,
    seed: Option<i64>,
    stop: Option<Value>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    n: Option<i64>,
    logit_bias: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
}

#[derive(Deserialize)]
struct CompletionRequest {
    prompt: Value,
    #[serde(flatten)]
    sampling: Sampling,
    logprobs: Option<i64>,
    echo: Option<bool>,
    suffix: Option<String>,
    best_of: Option<i64>,
}

#[derive(Deserialize)]
struct ChatRequest {
    messages: Vec<Value>,
    #[serde(flatten)]
    sampling: Sampling,
    logprobs: Option<bool>,
    top_logprobs: Option<i64>,
    tools: Option<Vec<Value>>,
    response_format: Option<Value>,
}

/// A request checked and turned into the generator's terms.
struct Checked {
    prompt: GenPrompt,
    params: GenParams,
    stream: bool,
    include_usage: bool,
}

fn refuse_if(cond: bool, message: &str) -> Result<(), ApiError> {
    if cond {
        Err(ApiError::invalid(message))
    } else {
        Ok(())
    }
}

/// A float field within `ok`, or the default.
fn float(value: Option<f64>, name: &str, default: f32, ok: impl Fn(f64) -> bool, range: &str) -> Result<f32, ApiError> {
    match value {
        None => Ok(default),
        Some(v) if v.is_finite() && ok(v) => Ok(v as f32),
        Some(v) => Err(ApiError::invalid(format!("{name} {v}: expected {range}"))),
    }
}

fn top_logprobs(n: i64) -> Result<usize, ApiError> {
    if (0..=MAX_TOP_LOGPROBS as i64).contains(&n) {
        Ok(n as usize)
    } else {
        Err(ApiError::invalid(format!("logprobs {n}: expected 0 to {MAX_TOP_LOGPROBS} alternatives")))
    }
}

/// Checks the shared fields against the model; `logprobs` is the endpoint's own reading.
fn params(s: &Sampling, app: &App, info: &GenModelInfo, logprobs: Option<usize>) -> Result<GenParams, ApiError> {
    if let Some(model) = s.model.as_deref().filter(|m| *m != info.id) {
        let embedding = app.queue.as_ref().is_some_and(|q| q.info().model == model);
        let what = if embedding { "is the embedding model (POST /v1/embeddings)" } else { "is not served here" };
        return Err(ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", format!("model {model:?} {what}; the language model here is {:?}", info.id)));
    }
    refuse_if(s.n.is_some_and(|n| n != 1), "n: only 1 choice per request is supported")?;
    refuse_if(s.logit_bias.as_ref().is_some_and(|b| !b.is_empty()), "logit_bias is not supported")?;
    for (name, v) in [("frequency_penalty", s.frequency_penalty), ("presence_penalty", s.presence_penalty)] {
        refuse_if(v.is_some_and(|v| v != 0.0), &format!("{name} is not supported (only 0); use repeat_penalty"))?;
    }
    let max_tokens = match s.max_completion_tokens.or(s.max_tokens) {
        None => DEFAULT_MAX_TOKENS.min(info.context_length),
        Some(n) if n >= 1 && n as u64 <= info.context_length as u64 => n as usize,
        Some(n) => return Err(ApiError::invalid(format!("max_tokens {n}: expected 1 to {} (the context length)", info.context_length))),
    };
    let d = GenParams::default();
    let top_k = match s.top_k {
        None => d.top_k,
        Some(k) if k >= 0 => k as usize,
        Some(k) => return Err(ApiError::invalid(format!("top_k {k}: expected 0 (off) or more"))),
    };
    let stop = match &s.stop {
        None => vec![],
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items.iter().map(|v| v.as_str().map(str::to_string).ok_or_else(|| ApiError::invalid("stop must be a string or a list of strings"))).collect::<Result<_, _>>()?,
        Some(_) => return Err(ApiError::invalid("stop must be a string or a list of strings")),
    };
    refuse_if(stop.len() > MAX_STOPS, &format!("stop: at most {MAX_STOPS} strings"))?;
    refuse_if(stop.iter().any(String::is_empty), "stop: an empty stop string")?;
    Ok(GenParams {
        max_tokens,
        temperature: float(s.temperature, "temperature", d.temperature, |v| (0.0..=2.0).contains(&v), "0 to 2")?,
        top_k,
        top_p: float(s.top_p, "top_p", d.top_p, |v| v > 0.0 && v <= 1.0, "more than 0, at most 1")?,
        min_p: float(s.min_p, "min_p", d.min_p, |v| (0.0..=1.0).contains(&v), "0 to 1")?,
        repeat_penalty: float(s.repeat_penalty, "repeat_penalty", d.repeat_penalty, |v| v > 0.0, "more than 0 (1 is off)")?,
        // OpenAI's seed is any integer; its bits are the seed.
        seed: s.seed.map(|v| v as u64),
        stop,
        logprobs,
    })
}

fn stream_flags(s: &Sampling) -> (bool, bool) {
    let stream = s.stream.unwrap_or(false);
    (stream, stream && s.stream_options.as_ref().and_then(|o| o.include_usage).unwrap_or(false))
}

fn check_completion(r: CompletionRequest, app: &App, info: &GenModelInfo) -> Result<Checked, ApiError> {
    let prompt = match r.prompt {
        Value::String(s) => s,
        Value::Array(mut items) if items.len() == 1 && items[0].is_string() => items.remove(0).as_str().unwrap().to_string(),
        Value::Array(items) if items.iter().all(Value::is_string) => return Err(ApiError::invalid("prompt: one prompt per request")),
        _ => return Err(ApiError::invalid("prompt must be a string (token arrays are not supported)")),
    };
    refuse_if(r.echo == Some(true), "echo is not supported")?;
    refuse_if(r.suffix.is_some(), "suffix is not supported")?;
    refuse_if(r.best_of.is_some_and(|n| n != 1), "best_of: only 1 is supported")?;
    let logprobs = r.logprobs.map(top_logprobs).transpose()?;
    let params = params(&r.sampling, app, info, logprobs)?;
    let (stream, include_usage) = stream_flags(&r.sampling);
    Ok(Checked { prompt: GenPrompt::Text(prompt), params, stream, include_usage })
}

fn check_chat(r: ChatRequest, app: &App, info: &GenModelInfo) -> Result<Checked, ApiError> {
    refuse_if(r.messages.is_empty(), "messages is an empty list")?;
    let messages = r.messages.iter().enumerate().map(|(i, m)| message(i, m)).collect::<Result<Vec<_>, _>>()?;
    refuse_if(r.tools.as_ref().is_some_and(|t| !t.is_empty()), "tools are not supported")?;
    refuse_if(r.response_format.as_ref().is_some_and(|f| f.get("type").and_then(Value::as_str) != Some("text")), "response_format: only {\"type\": \"text\"} is supported")?;
    let logprobs = match (r.logprobs, r.top_logprobs) {
        (Some(true), n) => Some(top_logprobs(n.unwrap_or(0))?),
        (_, Some(_)) => return Err(ApiError::invalid("top_logprobs needs logprobs: true")),
        _ => None,
    };
    let params = params(&r.sampling, app, info, logprobs)?;
    let (stream, include_usage) = stream_flags(&r.sampling);
    Ok(Checked { prompt: GenPrompt::Chat(messages), params, stream, include_usage })
}

/// One chat message: a role the templates know and text content (a string, null, or a list of
/// text parts, joined).
fn message(i: usize, m: &Value) -> Result<ChatMessage, ApiError> {
    let role = m.get("role").and_then(Value::as_str).ok_or_else(|| ApiError::invalid(format!("messages[{i}]: no role")))?;
    if !["system", "developer", "user", "assistant"].contains(&role) {
        return Err(ApiError::invalid(format!("messages[{i}]: role {role:?}: expected system, developer, user or assistant")));
    }
    let content = match m.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                (Some("text"), Some(text)) => Ok(text),
                _ => Err(ApiError::invalid(format!("messages[{i}]: only text content parts are supported"))),
            })
            .collect::<Result<String, _>>()?,
        Some(_) => return Err(ApiError::invalid(format!("messages[{i}]: content must be a string or a list of text parts"))),
    };
    Ok(ChatMessage { role: role.to_string(), content })
}

pub(crate) async fn completions(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let g = app.generation.as_ref().ok_or_else(|| ApiError::not_loaded("a language model", "/v1/completions"))?;
    let checked = check_completion(parse_body(body)?, &app, &g.info)?;
    generate(&app, g, Shape::new(Endpoint::Completion, &g.info, checked.params.logprobs.is_some()), checked, arrived).await
}

pub(crate) async fn chat_completions(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let g = app.generation.as_ref().ok_or_else(|| ApiError::not_loaded("a language model", "/v1/chat/completions"))?;
    let checked = check_chat(parse_body(body)?, &app, &g.info)?;
    generate(&app, g, Shape::new(Endpoint::Chat, &g.info, checked.params.logprobs.is_some()), checked, arrived).await
}

/// Admits, waits for a session, starts it, and answers: a stream, or the whole text.
async fn generate(app: &App, g: &Generation, shape: Shape, checked: Checked, arrived: Instant) -> Result<Response, ApiError> {
    let ticket = g.admission.admit()?;
    let session = ticket.run().await;
    let mut events = g.generator.start(checked.prompt, checked.params)?;
    let mut tally = Tally { metrics: app.metrics.clone(), arrived, completion: 0, ended: false };
    if checked.stream {
        let stream = EventStream { tally, pending: shape.opening(), events, shape, include_usage: checked.include_usage, text_bytes: 0, done: false, _session: session };
        return Ok(([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(stream)).into_response());
    }
    let mut tokens = vec![];
    loop {
        match events.recv().await {
            Some(GenEvent::Token(t)) => {
                tally.token();
                tokens.push(t);
            }
            Some(GenEvent::Done { finish_reason, prompt_tokens, completion_tokens }) => {
                tally.end(finish_reason.as_str(), prompt_tokens, completion_tokens);
                return Ok(Json(shape.whole(&tokens, finish_reason.as_str(), prompt_tokens, completion_tokens)).into_response());
            }
            Some(GenEvent::Error(m)) => {
                tally.end("error", 0, tally.completion);
                return Err(ApiError::internal(format!("generation failed: {m}")));
            }
            None => {
                tally.end("error", 0, tally.completion);
                return Err(ApiError::internal(UNFINISHED.into()));
            }
        }
    }
}

const UNFINISHED: &str = "generation failed: the generator ended the session without finishing it";

/// Counts one generation into the metrics, whichever way it ends; dropped unended (the client
/// went away), it counts as `client_gone`.
struct Tally {
    metrics: Arc<Metrics>,
    arrived: Instant,
    completion: usize,
    ended: bool,
}

impl Tally {
    fn token(&mut self) {
        if self.completion == 0 {
            self.metrics.first_token(self.arrived.elapsed().as_secs_f64());
        }
        self.completion += 1;
    }

    fn end(&mut self, how: &'static str, prompt: usize, completion: usize) {
        self.ended = true;
        self.metrics.generation(how, prompt, completion);
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if !self.ended {
            self.metrics.generation("client_gone", 0, self.completion);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Completion,
    Chat,
}

/// How one request's answer and chunks look.
struct Shape {
    endpoint: Endpoint,
    id: String,
    created: u64,
    model: String,
    device: String,
    logprobs: bool,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

impl Shape {
    fn new(endpoint: Endpoint, info: &GenModelInfo, logprobs: bool) -> Shape {
        let created = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let prefix = if endpoint == Endpoint::Chat { "chatcmpl" } else { "cmpl" };
        let id = format!("{prefix}-{created:x}{:06x}", NEXT_ID.fetch_add(1, Ordering::Relaxed));
        Shape { endpoint, id, created, model: info.id.clone(), device: info.device.clone(), logprobs }
    }

    fn object(&self, stream: bool) -> &'static str {
        match (self.endpoint, stream) {
            (Endpoint::Completion, _) => "text_completion",
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Chat, true) => "chat.completion.chunk",
        }
    }

    fn envelope(&self, stream: bool, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(stream),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": concat!("nx_vulkan-", env!("CARGO_PKG_VERSION")),
            "device": self.device,
            "choices": choices,
        })
    }

    /// The `logprobs` of a choice: OpenAI's completions form or its chat form; null when not asked.
    fn logprobs(&self, tokens: &[GenToken], offset: usize) -> Value {
        if !self.logprobs {
            return Value::Null;
        }
        match self.endpoint {
            Endpoint::Completion => {
                let mut at = offset;
                let offsets: Vec<usize> = tokens
                    .iter()
                    .map(|t| {
                        let o = at;
                        at += t.text.len();
                        o
                    })
                    .collect();
                json!({
                    "tokens": tokens.iter().map(|t| &t.text).collect::<Vec<_>>(),
                    "token_logprobs": tokens.iter().map(|t| t.logprob).collect::<Vec<_>>(),
                    "top_logprobs": tokens.iter().map(|t| t.top_logprobs.iter().map(|(s, l)| (s.clone(), json!(l))).collect::<Map<_, _>>()).collect::<Vec<_>>(),
                    "text_offset": offsets,
                })
            }
            Endpoint::Chat => {
                let entry = |text: &str, logprob: Option<f32>| json!({"token": text, "logprob": logprob, "bytes": text.as_bytes()});
                let content: Vec<Value> = tokens
                    .iter()
                    .map(|t| {
                        let mut e = entry(&t.text, t.logprob);
                        e["top_logprobs"] = t.top_logprobs.iter().map(|(s, l)| entry(s, Some(*l))).collect();
                        e
                    })
                    .collect();
                json!({"content": content})
            }
        }
    }

    /// The non-streaming answer.
    fn whole(&self, tokens: &[GenToken], finish_reason: &str, prompt_tokens: usize, completion_tokens: usize) -> Value {
        let text: String = tokens.iter().map(|t| t.text.as_str()).collect();
        let logprobs = self.logprobs(tokens, 0);
        let choice = match self.endpoint {
            Endpoint::Completion => json!({"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}),
            Endpoint::Chat => json!({"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": logprobs, "finish_reason": finish_reason}),
        };
        let mut answer = self.envelope(false, json!([choice]));
        answer["usage"] = usage(prompt_tokens, completion_tokens);
        answer
    }

    /// What a stream starts with: chat's role delta.
    fn opening(&self) -> Option<Bytes> {
        (self.endpoint == Endpoint::Chat).then(|| self.chunk(json!({"role": "assistant", "content": ""}), Value::Null, Value::Null))
    }

    /// One chunk: chat's `delta` or completions' `text` (a string in `delta`).
    fn chunk(&self, delta: Value, logprobs: Value, finish_reason: Value) -> Bytes {
        let choice = match self.endpoint {
            Endpoint::Completion => json!({"index": 0, "text": delta, "logprobs": logprobs, "finish_reason": finish_reason}),
            Endpoint::Chat => json!({"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}),
        };
        event(&self.envelope(true, json!([choice])))
    }

    fn token_chunk(&self, t: &GenToken, offset: usize) -> Bytes {
        let delta = match self.endpoint {
            Endpoint::Completion => json!(t.text),
            Endpoint::Chat => json!({"content": t.text}),
        };
        self.chunk(delta, self.logprobs(std::slice::from_ref(t), offset), Value::Null)
    }

    /// The last chunks: the finish reason, then usage when asked for, then `[DONE]`.
    fn closing(&self, finish_reason: &str, usage_counts: Option<(usize, usize)>) -> Bytes {
        let empty = match self.endpoint {
            Endpoint::Completion => json!(""),
            Endpoint::Chat => json!({}),
        };
        let mut out = self.chunk(empty, Value::Null, json!(finish_reason)).to_vec();
        if let Some((prompt, completion)) = usage_counts {
            let mut last = self.envelope(true, json!([]));
            last["usage"] = usage(prompt, completion);
            out.extend_from_slice(&event(&last));
        }
        out.extend_from_slice(DONE);
        out.into()
    }
}

const DONE: &[u8] = b"data: [DONE]\n\n";

fn usage(prompt_tokens: usize, completion_tokens: usize) -> Value {
    json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens})
}

/// One server-sent event carrying `value`.
fn event(value: &Value) -> Bytes {
    format!("data: {value}\n\n").into()
}

/// A session's events as server-sent-event bytes. Holds the session's place; dropping it
/// (the stream ended, or the client went away) drops the receiver, which cancels the session.
struct EventStream {
    // Fields drop in order: the tally first (so a cancellation the generator sees is already
    // counted), then the receiver (which cancels the session), then the session's place.
    tally: Tally,
    pending: Option<Bytes>,
    events: mpsc::Receiver<GenEvent>,
    shape: Shape,
    include_usage: bool,
    /// Bytes of text sent so far (completions' `text_offset`).
    text_bytes: usize,
    done: bool,
    _session: Session,
}

impl EventStream {
    fn fail(&mut self, message: &str) -> Bytes {
        self.done = true;
        self.tally.end("error", 0, self.tally.completion);
        let mut out = event(&json!({"error": {"message": message, "type": "server_error"}})).to_vec();
        out.extend_from_slice(DONE);
        out.into()
    }
}

impl futures_core::Stream for EventStream {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(first) = this.pending.take() {
            return Poll::Ready(Some(Ok(first)));
        }
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let bytes = match ready!(this.events.poll_recv(cx)) {
                Some(GenEvent::Token(t)) => {
                    let offset = this.text_bytes;
                    this.text_bytes += t.text.len();
                    this.tally.token();
                    if t.text.is_empty() && t.logprob.is_none() {
                        continue; // part of a character: nothing to send yet
                    }
                    this.shape.token_chunk(&t, offset)
                }
                Some(GenEvent::Done { finish_reason, prompt_tokens, completion_tokens }) => {
                    this.done = true;
                    this.tally.end(finish_reason.as_str(), prompt_tokens, completion_tokens);
                    this.shape.closing(finish_reason.as_str(), this.include_usage.then_some((prompt_tokens, completion_tokens)))
                }
                Some(GenEvent::Error(m)) => this.fail(&format!("generation failed: {m}")),
                None => this.fail(UNFINISHED),
            };
            return Poll::Ready(Some(Ok(bytes)));
        }
    }
}

pub(crate) async fn models(State(app): State<Arc<App>>) -> Json<Value> {
    let mut data = vec![];
    if let Some(q) = &app.queue {
        let i = q.info();
        data.push(json!({"id": i.model, "object": "model", "created": 0, "owned_by": "nx_vulkan", "type": "embedding", "device": i.device, "precision": i.precision, "dimensions": i.dimensions, "max_tokens": i.max_tokens}));
    }
    if let Some(g) = &app.generation {
        let i = &g.info;
        data.push(json!({"id": i.id, "object": "model", "created": 0, "owned_by": "nx_vulkan", "type": "generation", "device": i.device, "quantization": i.quantization, "activations": i.activations, "context_length": i.context_length}));
    }
    Json(json!({"object": "list", "data": data}))
}
