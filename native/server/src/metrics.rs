//! The server's counters and their Prometheus text form (`GET /metrics`).
//!
//! Counters are plain atomics and small locked histograms: the queue worker and the HTTP
//! handlers update them, `/metrics` renders them. Names start with `nx_vulkan_`.

use crate::embedder::ModelInfo;
use crate::generator::GenModelInfo;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// A Prometheus histogram: fixed upper bounds, per-bucket counts, sum and count.
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram { bounds, counts: vec![0; bounds.len()], sum: 0.0, count: 0 }
    }

    /// Records `n` observations of `value`.
    fn observe_n(&mut self, value: f64, n: u64) {
        if let Some(i) = self.bounds.iter().position(|b| value <= *b) {
            self.counts[i] += n;
        }
        self.sum += value * n as f64;
        self.count += n;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cumulative += c;
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}\n{name}_sum {}\n{name}_count {}", self.count, self.sum, self.count);
    }
}

const BATCH_BOUNDS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];
const TTFT_BOUNDS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
const SECONDS_BOUNDS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Everything `/metrics` reports.
pub struct Metrics {
    /// (route, HTTP status) → answered requests.
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    inputs: AtomicU64,
    tokens: AtomicU64,
    /// Inputs whose client went away before they were embedded (skipped, never run).
    abandoned_inputs: AtomicU64,
    /// Batches the embedder failed (every request in them answered 500).
    failed_batches: AtomicU64,
    batch_size: Mutex<Histogram>,
    queue_wait: Mutex<Histogram>,
    embed_seconds: Mutex<Histogram>,
    /// Generation sessions ended, by how: a finish reason, `error`, or `client_gone`.
    generations: Mutex<BTreeMap<&'static str, u64>>,
    generated_tokens: AtomicU64,
    generation_prompt_tokens: AtomicU64,
    /// From the request's arrival (admission wait included) to its first token.
    time_to_first_token: Mutex<Histogram>,
}

/// The generator's load now, for [`Metrics::render`].
pub struct GenerationLoad<'a> {
    pub info: &'a GenModelInfo,
    pub running: usize,
    pub waiting: usize,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Mutex::new(BTreeMap::new()),
            inputs: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
            abandoned_inputs: AtomicU64::new(0),
            failed_batches: AtomicU64::new(0),
            batch_size: Mutex::new(Histogram::new(BATCH_BOUNDS)),
            queue_wait: Mutex::new(Histogram::new(SECONDS_BOUNDS)),
            embed_seconds: Mutex::new(Histogram::new(SECONDS_BOUNDS)),
            generations: Mutex::new(BTreeMap::new()),
            generated_tokens: AtomicU64::new(0),
            generation_prompt_tokens: AtomicU64::new(0),
            time_to_first_token: Mutex::new(Histogram::new(TTFT_BOUNDS)),
        }
    }
}

impl Metrics {
    pub(crate) fn request(&self, route: &'static str, status: u16) {
        *self.requests.lock().entry((route, status)).or_insert(0) += 1;
    }

    /// `n` inputs waited `seconds` in the queue before a batch took them.
    pub(crate) fn queue_wait(&self, seconds: f64, n: usize) {
        self.queue_wait.lock().observe_n(seconds, n as u64);
    }

    /// A batch of `inputs` inputs (`tokens` tokens) ran for `seconds`.
    pub(crate) fn batch(&self, inputs: usize, tokens: usize, seconds: f64) {
        self.inputs.fetch_add(inputs as u64, Ordering::Relaxed);
        self.tokens.fetch_add(tokens as u64, Ordering::Relaxed);
        self.batch_size.lock().observe_n(inputs as f64, 1);
        self.embed_seconds.lock().observe_n(seconds, 1);
    }

    pub(crate) fn failed_batch(&self) {
        self.failed_batches.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn abandoned(&self, inputs: usize) {
        self.abandoned_inputs.fetch_add(inputs as u64, Ordering::Relaxed);
    }

    /// A generation's first token came `seconds` after its request arrived.
    pub(crate) fn first_token(&self, seconds: f64) {
        self.time_to_first_token.lock().observe_n(seconds, 1);
    }

    /// A generation ended (`how`: a finish reason, `error` or `client_gone`) after `completion`
    /// tokens of a `prompt`-token prompt (0 when the generator did not say).
    pub(crate) fn generation(&self, how: &'static str, prompt: usize, completion: usize) {
        *self.generations.lock().entry(how).or_insert(0) += 1;
        self.generation_prompt_tokens.fetch_add(prompt as u64, Ordering::Relaxed);
        self.generated_tokens.fetch_add(completion as u64, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every counter, with the embedding queue's depth and
    /// the generator's load now (each when the server has that model).
    pub fn render(&self, embedding: Option<(&ModelInfo, usize)>, generation: Option<GenerationLoad>) -> String {
        let mut out = String::new();
        if let Some((info, _)) = embedding {
            let _ = writeln!(
                out,
                "# HELP nx_vulkan_model_info The embedding model served.\n# TYPE nx_vulkan_model_info gauge\nnx_vulkan_model_info{{model=\"{}\",device=\"{}\",precision=\"{}\",dimensions=\"{}\"}} 1",
                label(&info.model),
                label(&info.device),
                label(&info.precision),
                info.dimensions
            );
        }
        if let Some(g) = &generation {
            let _ = writeln!(
                out,
                "# HELP nx_vulkan_generator_info The language model served.\n# TYPE nx_vulkan_generator_info gauge\nnx_vulkan_generator_info{{model=\"{}\",device=\"{}\",quantization=\"{}\",activations=\"{}\",context_length=\"{}\"}} 1",
                label(&g.info.id),
                label(&g.info.device),
                label(&g.info.quantization),
                label(&g.info.activations),
                g.info.context_length
            );
        }
        let queue_depth = embedding.map_or(0, |(_, depth)| depth);
        let _ = writeln!(out, "# HELP nx_vulkan_requests_total HTTP requests answered, by route and status.\n# TYPE nx_vulkan_requests_total counter");
        for ((route, status), n) in self.requests.lock().iter() {
            let _ = writeln!(out, "nx_vulkan_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}");
        }
        let counters = [
            ("nx_vulkan_inputs_total", "Inputs embedded.", &self.inputs),
            ("nx_vulkan_tokens_total", "Tokens embedded (special tokens included).", &self.tokens),
            ("nx_vulkan_abandoned_inputs_total", "Inputs skipped because their client went away.", &self.abandoned_inputs),
            ("nx_vulkan_failed_batches_total", "Batches the embedder failed.", &self.failed_batches),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", v.load(Ordering::Relaxed));
        }
        let _ = writeln!(out, "# HELP nx_vulkan_queue_depth Inputs waiting in the queue.\n# TYPE nx_vulkan_queue_depth gauge\nnx_vulkan_queue_depth {queue_depth}");
        self.batch_size.lock().render(&mut out, "nx_vulkan_batch_size", "Inputs per batch run on the embedder.");
        self.queue_wait.lock().render(&mut out, "nx_vulkan_queue_wait_seconds", "Time each input waited in the queue before its batch started.");
        self.embed_seconds.lock().render(&mut out, "nx_vulkan_embed_seconds", "Embedder (device) time per batch.");
        let _ = writeln!(out, "# HELP nx_vulkan_generations_total Generation sessions ended, by finish reason (or error, client_gone).\n# TYPE nx_vulkan_generations_total counter");
        for (how, n) in self.generations.lock().iter() {
            let _ = writeln!(out, "nx_vulkan_generations_total{{finish_reason=\"{how}\"}} {n}");
        }
        let counters = [
            ("nx_vulkan_generated_tokens_total", "Tokens generated (completion tokens).", &self.generated_tokens),
            ("nx_vulkan_generation_prompt_tokens_total", "Prompt tokens of finished generations.", &self.generation_prompt_tokens),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", v.load(Ordering::Relaxed));
        }
        let (running, waiting) = generation.map_or((0, 0), |g| (g.running, g.waiting));
        let _ = writeln!(out, "# HELP nx_vulkan_generation_active_sessions Generation sessions running.\n# TYPE nx_vulkan_generation_active_sessions gauge\nnx_vulkan_generation_active_sessions {running}");
        let _ = writeln!(out, "# HELP nx_vulkan_generation_waiting Generation requests waiting for a session.\n# TYPE nx_vulkan_generation_waiting gauge\nnx_vulkan_generation_waiting {waiting}");
        self.time_to_first_token.lock().render(&mut out, "nx_vulkan_time_to_first_token_seconds", "From a generation request's arrival to its first token.");
        out
    }
}

/// A label value as Prometheus' text format escapes it.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
