//! The HTTP API: `POST /v1/embeddings` (OpenAI's request and answer, plus `device`,
//! `precision` and `truncated`), the generation endpoints of [`crate::completions`]
//! (`POST /v1/completions`, `POST /v1/chat/completions`, `GET /v1/models`), `GET /health`,
//! `GET /metrics`.
//!
//! Every error is `{"error": {"message", "type"}}` with a status that says whose fault it is:
//! 400 malformed or invalid request, 401 missing/wrong API key, 404 another model (or an
//! endpoint whose kind of model this server was started without), 413 body over the limit, 503
//! queue full (with `Retry-After`) or shutting down, 500 the embedder or generator failed.

use crate::completions::{self, Generation};
use crate::embedder::EmbedOutput;
use crate::metrics::{GenerationLoad, Metrics};
use crate::queue::{BatchQueue, SubmitError};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

/// What the handlers share. At least one of `queue` (the embedder) and `generation` is set.
pub(crate) struct App {
    pub queue: Option<BatchQueue>,
    pub generation: Option<Generation>,
    pub metrics: Arc<Metrics>,
    pub api_key: Option<String>,
}

pub(crate) fn router(app: Arc<App>, max_body_bytes: usize) -> Router {
    let v1 = Router::new()
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/completions", post(completions::completions))
        .route("/v1/chat/completions", post(completions::chat_completions))
        .route("/v1/models", get(completions::models))
        .route_layer(middleware::from_fn_with_state(app.clone(), authorize));
    Router::new()
        .merge(v1)
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "no such route".into()) })
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::from_fn_with_state(app.clone(), count))
        .with_state(app)
}

/// An error answer: `{"error": {"message", "type"}}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    retry_after: Option<u32>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, kind: &'static str, message: String) -> Self {
        ApiError { status, kind, message, retry_after: None }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message.into())
    }

    /// 503 with `Retry-After: 1`: full now, worth retrying.
    pub(crate) fn overloaded(message: String) -> Self {
        ApiError { retry_after: Some(1), ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded_error", message) }
    }

    pub(crate) fn shutting_down() -> Self {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable_error", "the server is shutting down".into())
    }

    pub(crate) fn internal(message: String) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// 404 for an endpoint whose kind of model this server was started without.
    pub(crate) fn not_loaded(what: &str, route: &str) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", format!("this server was started without {what}, so {route} is not served"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({"error": {"message": self.message, "type": self.kind}}));
        let mut response = (self.status, body).into_response();
        if let Some(secs) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl From<SubmitError> for ApiError {
    fn from(e: SubmitError) -> Self {
        match e {
            SubmitError::Full { .. } => ApiError::overloaded(e.to_string()),
            SubmitError::Closed => ApiError::shutting_down(),
            SubmitError::TooLarge { .. } => ApiError::invalid(e.to_string()),
        }
    }
}

/// Counts every answer by route and status.
async fn count(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let route = match request.uri().path() {
        "/v1/embeddings" => "/v1/embeddings",
        "/v1/completions" => "/v1/completions",
        "/v1/chat/completions" => "/v1/chat/completions",
        "/v1/models" => "/v1/models",
        "/health" => "/health",
        "/metrics" => "/metrics",
        _ => "other",
    };
    let response = next.run(request).await;
    app.metrics.request(route, response.status().as_u16());
    response
}

/// With `--api-key`, `/v1/*` needs `Authorization: Bearer KEY`.
async fn authorize(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    if let Some(key) = &app.api_key {
        let given = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| same_secret(g.trim().as_bytes(), key.as_bytes())) {
            let mut response = ApiError::new(StatusCode::UNAUTHORIZED, "authentication_error", "missing or wrong API key (Authorization: Bearer KEY)".into()).into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

/// Equality that takes the same time wherever the first difference is.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// OpenAI's embeddings request. Unknown fields (`user`, …) are ignored, as OpenAI does.
#[derive(Deserialize)]
struct EmbeddingsRequest {
    input: Value,
    model: Option<String>,
    encoding_format: Option<String>,
    dimensions: Option<i64>,
}

#[derive(Serialize)]
struct EmbeddingsResponse {
    object: &'static str,
    data: Vec<EmbeddingItem>,
    model: String,
    usage: Usage,
    device: String,
    precision: String,
    /// Indexes of the inputs that were longer than the model's limit and were cut.
    truncated: Vec<usize>,
}

#[derive(Serialize)]
struct EmbeddingItem {
    object: &'static str,
    index: usize,
    embedding: Vector,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Vector {
    Float(Vec<f32>),
    Base64(String),
}

#[derive(Serialize)]
struct Usage {
    prompt_tokens: usize,
    total_tokens: usize,
}

async fn embeddings(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> Result<Json<EmbeddingsResponse>, ApiError> {
    let queue = app.queue.as_ref().ok_or_else(|| ApiError::not_loaded("an embedding model", "/v1/embeddings"))?;
    let request: EmbeddingsRequest = parse_body(body)?;
    let info = queue.info();
    let texts = match request.input {
        Value::String(s) => vec![s],
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(ApiError::invalid("input must be a string or an array of strings (token arrays are not supported)")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(ApiError::invalid("input must be a string or an array of strings")),
    };
    if texts.is_empty() {
        return Err(ApiError::invalid("input is an empty list"));
    }
    if let Some(model) = request.model.as_deref().filter(|m| *m != info.model) {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", format!("model {model:?} is not served here; this server serves {:?}", info.model)));
    }
    let base64 = match request.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => return Err(ApiError::invalid(format!("encoding_format {other:?}: expected \"float\" or \"base64\""))),
    };
    let dimensions = match request.dimensions {
        None => None,
        Some(d) if d >= 1 && d as u64 <= info.dimensions as u64 => Some(d as usize),
        Some(d) => return Err(ApiError::invalid(format!("dimensions {d}: the model gives 1 to {}", info.dimensions))),
    };
    let answer = queue.submit(texts)?;
    let outputs: Vec<EmbedOutput> = answer
        .await
        .map_err(|_| ApiError::internal("the request was dropped by the queue".into()))?
        .map_err(|e| ApiError::internal(format!("embedding failed: {e}")))?;
    let tokens = outputs.iter().map(|o| o.tokens).sum();
    let truncated = outputs.iter().enumerate().filter(|(_, o)| o.truncated).map(|(i, _)| i).collect();
    let data = outputs
        .into_iter()
        .enumerate()
        .map(|(index, o)| {
            let mut vector = o.vector;
            if let Some(d) = dimensions {
                shorten(&mut vector, d);
            }
            let embedding = if base64 { Vector::Base64(f32_base64(&vector)) } else { Vector::Float(vector) };
            EmbeddingItem { object: "embedding", index, embedding }
        })
        .collect();
    Ok(Json(EmbeddingsResponse {
        object: "list",
        data,
        model: info.model.clone(),
        usage: Usage { prompt_tokens: tokens, total_tokens: tokens },
        device: info.device.clone(),
        precision: info.precision.clone(),
        truncated,
    }))
}

/// A request body as JSON (400 with serde's message when it is not), or the body limit's answer.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let body = body.map_err(|r| ApiError::new(r.status(), "invalid_request_error", r.body_text()))?;
    serde_json::from_slice(&body).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))
}

/// The embedding model's fields at the top level (as before generation existed), the language
/// model's under `"generator"`; each only when the server has that model.
async fn health(State(app): State<Arc<App>>) -> Json<Value> {
    let draining = app.queue.as_ref().is_some_and(|q| q.is_closed()) || app.generation.as_ref().is_some_and(|g| g.admission.is_closed());
    let mut health = json!({"status": if draining { "draining" } else { "ok" }});
    if let Some(queue) = &app.queue {
        let info = queue.info();
        let config = queue.config();
        let Value::Object(fields) = json!({
            "model": info.model,
            "device": info.device,
            "precision": info.precision,
            "dimensions": info.dimensions,
            "max_tokens": info.max_tokens,
            "queue_depth": queue.depth(),
            "queue_capacity": config.capacity,
            "batch": config.batch,
        }) else {
            unreachable!("an object literal is an object")
        };
        health.as_object_mut().expect("an object").extend(fields);
    }
    if let Some(g) = &app.generation {
        let config = g.admission.config();
        health["generator"] = json!({
            "model": g.info.id,
            "device": g.info.device,
            "quantization": g.info.quantization,
            "activations": g.info.activations,
            "context_length": g.info.context_length,
            "active_sessions": g.admission.running(),
            "waiting": g.admission.waiting(),
            "max_sessions": config.max_sessions,
            "queue": config.queue,
        });
    }
    Json(health)
}

async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    let embedding = app.queue.as_ref().map(|q| (q.info(), q.depth()));
    let generation = app.generation.as_ref().map(|g| GenerationLoad { info: &g.info, running: g.admission.running(), waiting: g.admission.waiting() });
    let text = app.metrics.render(embedding, generation);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text)
}

/// Keeps the first `dims` components and rescales them to unit L2 norm (OpenAI's
/// `dimensions`: a Matryoshka-style shortening). A zero vector stays zero.
pub fn shorten(vector: &mut Vec<f32>, dims: usize) {
    vector.truncate(dims);
    let norm = vector.iter().map(|x| (*x as f64) * (*x as f64)).sum::<f64>().sqrt();
    if norm > 0.0 {
        for x in vector.iter_mut() {
            *x = (*x as f64 / norm) as f32;
        }
    }
}

/// The vector's little-endian f32 bytes in standard base64 (OpenAI's `encoding_format`).
fn f32_base64(vector: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        // 1.0f32 = 00 00 80 3f
        assert_eq!(f32_base64(&[1.0]), "AACAPw==");
        assert_eq!(f32_base64(&[1.0, 2.0]), "AACAPwAAAEA=");
        assert_eq!(f32_base64(&[]), "");
    }

    #[test]
    fn shorten_gives_unit_norm() {
        let mut v = vec![3.0, 4.0, 12.0];
        shorten(&mut v, 2);
        assert_eq!(v, vec![0.6, 0.8]);
    }
}
