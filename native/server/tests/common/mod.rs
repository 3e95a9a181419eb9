//! What the server tests share: a fake embedder with deterministic vectors, a fake generator
//! ([`generator`]), and a minimal HTTP/1.1 client over loopback (one request per connection)
//! that can also drop a request, and read server-sent events.
#![allow(dead_code)]

pub mod generator;

use generator::FakeGenerator;
use nx_vulkan_server::{EmbedOutput, Embedder, GenConfig, Generator, ModelInfo, Server, ServerConfig, ShutdownHandle};
use parking_lot::Mutex;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const DIMS: usize = 8;
/// The fake's token limit: a text of more words is "truncated".
pub const MAX_TOKENS: usize = 16;

/// Vectors derived from the text alone (an FNV hash per component, then unit norm); tokens
/// are words + 2, capped at `MAX_TOKENS`. The text `__fail__` fails its batch, `__panic__`
/// panics. Every batch's size is recorded; each batch sleeps `delay`.
#[derive(Clone)]
pub struct FakeEmbedder {
    pub delay: Duration,
    pub batches: Arc<Mutex<Vec<usize>>>,
}

impl FakeEmbedder {
    pub fn new(delay_ms: u64) -> Self {
        FakeEmbedder { delay: Duration::from_millis(delay_ms), batches: Arc::default() }
    }
}

pub fn fake_vector(text: &str) -> Vec<f32> {
    let v: Vec<f32> = (0..DIMS as u64)
        .map(|d| {
            let h = text.bytes().fold(0xcbf29ce484222325u64 ^ (d * 0x9e3779b97f4a7c15), |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
            (h % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

pub fn fake_output(text: &str) -> EmbedOutput {
    let words = text.split_whitespace().count() + 2;
    EmbedOutput { vector: fake_vector(text), tokens: words.min(MAX_TOKENS), truncated: words > MAX_TOKENS }
}

impl Embedder for FakeEmbedder {
    fn info(&self) -> ModelInfo {
        ModelInfo { model: "fake-minilm".into(), device: "fake device".into(), precision: "fp32".into(), dimensions: DIMS, max_tokens: MAX_TOKENS }
    }

    fn embed(&mut self, texts: &[String]) -> Result<Vec<EmbedOutput>, String> {
        self.batches.lock().push(texts.len());
        std::thread::sleep(self.delay);
        if texts.iter().any(|t| t == "__fail__") {
            return Err("the fake was asked to fail".into());
        }
        if texts.iter().any(|t| t == "__panic__") {
            panic!("the fake was asked to panic");
        }
        Ok(texts.iter().map(|t| fake_output(t)).collect())
    }
}

/// A server on a free loopback port, running on the test's runtime.
pub struct Running {
    pub addr: SocketAddr,
    pub stop: ShutdownHandle,
    pub done: tokio::task::JoinHandle<std::io::Result<()>>,
}

pub async fn start(embedder: FakeEmbedder, config: ServerConfig) -> Running {
    let server = Server::bind("127.0.0.1:0", embedder, config).await.expect("bind");
    let addr = server.local_addr();
    let stop = server.shutdown_handle();
    let done = tokio::spawn(server.run());
    Running { addr, stop, done }
}

/// A server with the fake embedder, the fake generator, or both.
pub async fn start_with(embedder: Option<FakeEmbedder>, generator: Option<FakeGenerator>, config: ServerConfig, generation: GenConfig) -> Running {
    let embedder = embedder.map(|e| Box::new(e) as Box<dyn Embedder>);
    let generator = generator.map(|g| Arc::new(g) as Arc<dyn Generator>);
    let server = Server::bind_with("127.0.0.1:0", embedder, generator, config, generation).await.expect("bind");
    let addr = server.local_addr();
    let stop = server.shutdown_handle();
    let done = tokio::spawn(server.run());
    Running { addr, stop, done }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Checks a 503 is the queue's refusal: retry after a second, an "overloaded_error" body.
    pub fn assert_overloaded(&self) {
        assert_eq!(self.header("retry-after"), Some("1"));
        assert_eq!(self.json()["error"]["type"], "overloaded_error");
    }

    /// The body as server-sent events: each `data:` payload, in order (`[DONE]` included).
    pub fn events(&self) -> Vec<String> {
        sse_events(&self.text())
    }
}

pub fn sse_events(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap_or_else(|| panic!("not a data event: {e:?}")).to_string())
        .collect()
}

/// Sends a request, reads the reply until `events` server-sent events have arrived, then closes
/// the connection (a client that leaves mid-stream). Returns what was read.
pub async fn read_events_and_drop(addr: SocketAddr, path: &str, body: &[u8], events: usize) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(&request_bytes("POST", path, &[], body)).await.expect("write");
    let mut raw = vec![];
    let mut buf = [0u8; 4096];
    while String::from_utf8_lossy(&raw).matches("data: ").count() < events {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await.expect("events within 10 s").expect("read");
        assert!(n > 0, "the server closed the stream early: {:?}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&buf[..n]);
    }
    drop(stream);
    String::from_utf8_lossy(&raw).into_owned()
}

pub fn request_bytes(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// One request on a fresh connection; the whole reply (read until the server closes).
pub async fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    // The server may answer (413) before reading all of a large body: a failed write is fine.
    let _ = stream.write_all(&request_bytes(method, path, headers, body)).await;
    let mut raw = vec![];
    if let Err(e) = stream.read_to_end(&mut raw).await {
        panic!("reading the reply to {method} {path} failed after {} bytes ({e}): {:?}", raw.len(), String::from_utf8_lossy(&raw));
    }
    parse_reply(&raw)
}

/// Sends a request, gives the server a moment to start on it, and closes the connection
/// without reading the reply.
pub async fn send_and_drop(addr: SocketAddr, path: &str, body: &[u8]) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(&request_bytes("POST", path, &[], body)).await.expect("write");
    stream.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(stream);
}

fn parse_reply(raw: &[u8]) -> Reply {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = std::str::from_utf8(&raw[..split]).expect("ASCII head");
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    let mut body = raw[split + 4..].to_vec();
    if headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked")) {
        body = dechunk(&body);
    }
    Reply { status, headers, body }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = vec![];
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
        let size = usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap().split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 2 + size + 2..];
    }
}

pub async fn embed(addr: SocketAddr, body: &Value) -> Reply {
    request(addr, "POST", "/v1/embeddings", &[], body.to_string().as_bytes()).await
}

/// The value of one metric line (`name{labels} value`), 0 when absent.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines().find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' '))).map_or(0.0, |v| v.parse().unwrap())
}

pub async fn metrics(addr: SocketAddr) -> String {
    let r = request(addr, "GET", "/metrics", &[], b"").await;
    assert_eq!(r.status, 200);
    r.text()
}

/// The float vectors of an embeddings answer, by index.
pub fn vectors(answer: &Value) -> Vec<Vec<f32>> {
    answer["data"].as_array().unwrap().iter().map(|d| d["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()).collect()
}
