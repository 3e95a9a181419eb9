//! Generation with continuous batching: requests become sessions in the model's KV-cache
//! slots, and one worker thread runs steps that hold every live session at once — the next
//! chunk of each new prompt and one decode row per generating session — so concurrent
//! sessions share each pass over the weights instead of taking turns.
//!
//! A step's rows and their positions are all a session's result depends on (the kernels'
//! summation order never depends on a row's batch-mates, tests/llm.rs), and each session draws
//! from its own seeded generator, so a session's tokens are the same alone or batched.
//!
//! A slot keeps the tokens whose keys and values it holds after its session ends; a new
//! prompt goes to the free slot sharing the longest prefix with it and skips that prefix
//! (a system prompt or a chat history is not recomputed).

use super::chat::ChatTemplate;
use super::gguf::Gguf;
use super::model::{Llm, LlmOptions, Row};
use super::sample::{sample, Pick, Rng, SamplingParams};
use super::tokenizer::{LlmTokenizer, StreamDecoder};
use crate::error::{invalid, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A generation: prompt token ids, how to sample, when to stop.
#[derive(Clone, Debug)]
pub struct GenRequest {
    pub prompt: Vec<u32>,
    pub sampling: SamplingParams,
    /// Tokens to generate at most.
    pub max_tokens: usize,
    /// Text that ends the generation (not included in the output).
    pub stop: Vec<String>,
    /// Keep going past end-of-generation tokens (benchmarks).
    pub ignore_eos: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token or a stop string.
    Stop,
    /// `max_tokens`, or the session's context is full.
    Length,
    Cancelled,
}

impl FinishReason {
    pub fn name(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Cancelled => "cancelled",
        }
    }
}

/// What a session reports, in order; `Done` or `Error` is the last event.
#[derive(Clone, Debug, PartialEq)]
pub enum GenEvent {
    /// One generated token and the text it completes (may be empty: part of a UTF-8
    /// character, or held back while it may start a stop string).
    Token { id: u32, text: String, logprob: f32, top: Vec<(u32, f32)> },
    Done { reason: FinishReason, prompt_tokens: usize, completion_tokens: usize, cached_tokens: usize },
    Error(String),
}

/// Receives a session's events on the worker thread; returning `false` cancels the session
/// (its receiver is gone).
pub type Sink = Box<dyn FnMut(GenEvent) -> bool + Send>;

/// How the worker batches.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// Prompt rows per step across all sessions (a long prompt is fed in chunks, so decoding
    /// sessions are not stalled behind it for long).
    pub prefill_chunk: usize,
    /// Requests waiting for a slot at most; more are refused (`Busy`).
    pub max_queued: usize,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions { prefill_chunk: 512, max_queued: 256 }
    }
}

/// Counters tests and `/metrics` read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuntimeStats {
    pub steps: u64,
    /// Rows fed, prompt and decode.
    pub rows: u64,
    /// The most sessions live during one step (some may have had no row in it while the
    /// prefill budget went to others).
    pub max_batch: u64,
    pub prompt_tokens: u64,
    /// Prompt tokens skipped because a slot already held them.
    pub cached_tokens: u64,
    pub generated_tokens: u64,
    /// Steps whose picks were made by the device argmax (only ids read back).
    pub device_argmax_steps: u64,
}

struct Pending {
    req: GenRequest,
    sink: Sink,
    cancel: Arc<AtomicBool>,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    stats: Mutex<RuntimeStats>,
}

struct Queue {
    pending: VecDeque<Pending>,
    shutdown: bool,
}

/// A running generation's handle: cancel it from any thread.
#[derive(Clone)]
pub struct SessionHandle {
    cancel: Arc<AtomicBool>,
    shared: Arc<Shared>,
}

impl SessionHandle {
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Release);
        self.shared.wake.notify_all();
    }
}

/// The model, its tokenizer and the batching worker.
pub struct LlmRuntime {
    pub llm: Arc<Llm>,
    pub tokenizer: Arc<LlmTokenizer>,
    shared: Arc<Shared>,
    options: RuntimeOptions,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl LlmRuntime {
    pub fn new(llm: Llm, tokenizer: LlmTokenizer, options: RuntimeOptions) -> Result<LlmRuntime> {
        if options.prefill_chunk == 0 || options.prefill_chunk > 8192 {
            return Err(invalid!("prefill_chunk {} must be in 1..=8192", options.prefill_chunk));
        }
        if tokenizer.vocab_size() > llm.config.n_vocab {
            return Err(invalid!("the tokenizer has {} tokens, the model's vocabulary {}", tokenizer.vocab_size(), llm.config.n_vocab));
        }
        let llm = Arc::new(llm);
        let tokenizer = Arc::new(tokenizer);
        let shared = Arc::new(Shared { queue: Mutex::new(Queue { pending: VecDeque::new(), shutdown: false }), wake: Condvar::new(), stats: Mutex::new(RuntimeStats::default()) });
        let worker = {
            let (llm, tokenizer, shared, chunk) = (llm.clone(), tokenizer.clone(), shared.clone(), options.prefill_chunk);
            crate::exec::spawn_deep("nx-vulkan-llm", move || {
                let worker = Worker::new(llm, tokenizer, shared.clone(), chunk);
                // A panic must not leave requests waiting forever: refuse new ones and fail the
                // queued ones (live sessions' sinks are dropped with the worker; the NIF's and
                // the server's sinks report that as an error).
                if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.run())) {
                    let mut q = shared.queue.lock();
                    q.shutdown = true;
                    let msg = format!("the generation worker failed: {}", crate::exec::panic_message(&p));
                    for mut pending in q.pending.drain(..) {
                        (pending.sink)(GenEvent::Error(msg.clone()));
                    }
                }
            })?
        };
        Ok(LlmRuntime { llm, tokenizer, shared, options, worker: Some(worker) })
    }

    /// Queues a generation; its events go to `sink` from the worker thread.
    pub fn submit(&self, req: GenRequest, sink: Sink) -> Result<SessionHandle> {
        req.sampling.check()?;
        let ctx = self.llm.attn.ctx;
        if req.prompt.is_empty() {
            return Err(invalid!("the prompt is empty"));
        }
        if req.max_tokens == 0 {
            return Err(invalid!("max_tokens must be at least 1"));
        }
        if req.prompt.len() >= ctx {
            return Err(invalid!("the prompt has {} tokens; the context holds {ctx} (prompt and generated tokens together)", req.prompt.len()));
        }
        if let Some(&t) = req.prompt.iter().find(|&&t| t as usize >= self.llm.config.n_vocab) {
            return Err(invalid!("token id {t} is outside the vocabulary of {}", self.llm.config.n_vocab));
        }
        if req.stop.iter().any(String::is_empty) {
            return Err(invalid!("a stop string is empty"));
        }
        let cancel = Arc::new(AtomicBool::new(false));
        {
            let mut q = self.shared.queue.lock();
            if q.shutdown {
                return Err(invalid!("the runtime has stopped (shut down, or its worker failed: see the earlier errors)"));
            }
            if q.pending.len() >= self.options.max_queued {
                return Err(crate::error::EngineError::Busy(format!("{} requests are already waiting for a session slot", q.pending.len())));
            }
            q.pending.push_back(Pending { req, sink, cancel: cancel.clone() });
        }
        self.shared.wake.notify_all();
        Ok(SessionHandle { cancel, shared: self.shared.clone() })
    }

    /// Runs one generation to its end and returns its events (tests, the CLI).
    pub fn generate_blocking(&self, req: GenRequest) -> Result<Vec<GenEvent>> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.submit(req, Box::new(move |e| tx.send(e).is_ok()))?;
        let mut out = vec![];
        for e in rx {
            let last = matches!(e, GenEvent::Done { .. } | GenEvent::Error(_));
            out.push(e);
            if last {
                break;
            }
        }
        Ok(out)
    }

    pub fn stats(&self) -> RuntimeStats {
        self.shared.stats.lock().clone()
    }
}

/// A GGUF file opened for generation: the runtime, its chat template and the file's name.
pub struct OpenedModel {
    pub runtime: LlmRuntime,
    /// The built-in template named at opening, else the file's own (`None`: it has none).
    pub template: Option<ChatTemplate>,
    /// `general.name` ("" when the file has none).
    pub name: String,
}

impl LlmRuntime {
    /// Opens `path` on `ctx`: tokenizer, chat template (`template`: a built-in one by name,
    /// else the file's), weights (`progress(done, total)` in bytes as they go up) and the
    /// batching worker.
    pub fn open(
        ctx: std::sync::Arc<crate::Context>,
        path: impl AsRef<std::path::Path>,
        model: &LlmOptions,
        template: Option<&str>,
        options: RuntimeOptions,
        progress: &dyn Fn(u64, u64),
    ) -> Result<OpenedModel> {
        let g = Gguf::open(path)?;
        let tokenizer = LlmTokenizer::from_gguf(&g)?;
        let template = match template {
            Some(name) => Some(ChatTemplate::builtin(name, &tokenizer)?),
            None => ChatTemplate::from_gguf(&g, &tokenizer)?,
        };
        let name = g.str("general.name")?.unwrap_or("").to_string();
        let llm = Llm::from_gguf(ctx, &g, model, progress)?;
        Ok(OpenedModel { runtime: LlmRuntime::new(llm, tokenizer, options)?, template, name })
    }
}

impl Drop for LlmRuntime {
    fn drop(&mut self) {
        self.shared.queue.lock().shutdown = true;
        self.shared.wake.notify_all();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// A live session in a slot.
struct Session {
    slot: u32,
    req: GenRequest,
    sink: Sink,
    cancel: Arc<AtomicBool>,
    /// Prompt tokens already in the cache (cached prefix + fed so far).
    fed: usize,
    cached: usize,
    /// Generated ids.
    generated: Vec<u32>,
    /// The last pick, to be fed next.
    next: Option<u32>,
    rng: Rng,
    decoder: StreamDecoder,
    /// Decoded text not yet sent (it may be the start of a stop string).
    held: String,
}

impl Session {
    /// The position of the next row fed.
    fn pos(&self) -> usize {
        self.fed + self.generated.len().saturating_sub(1)
    }
}

struct Worker {
    llm: Arc<Llm>,
    tok: Arc<LlmTokenizer>,
    shared: Arc<Shared>,
    chunk: usize,
    /// What each slot's cache holds (token ids at positions 0..), and whether a session has it.
    slot_tokens: Vec<Vec<u32>>,
    busy: Vec<bool>,
    live: Vec<Session>,
}

impl Worker {
    fn new(llm: Arc<Llm>, tok: Arc<LlmTokenizer>, shared: Arc<Shared>, chunk: usize) -> Worker {
        let slots = llm.attn.slots;
        Worker { llm, tok, shared, chunk, slot_tokens: vec![vec![]; slots], busy: vec![false; slots], live: vec![] }
    }

    fn run(mut self) {
        loop {
            if !self.admit() {
                return;
            }
            if let Err(e) = self.step() {
                // A failed step poisons every session in it; the cache of their slots is unknown.
                let msg = e.to_string();
                for mut s in std::mem::take(&mut self.live) {
                    (s.sink)(GenEvent::Error(msg.clone()));
                    self.slot_tokens[s.slot as usize].clear();
                    self.busy[s.slot as usize] = false;
                }
            }
        }
    }

    /// Moves waiting requests into free slots; waits while nothing is live. `false`: shut down.
    fn admit(&mut self) -> bool {
        let shared = self.shared.clone();
        let mut q = shared.queue.lock();
        loop {
            // Drop cancelled waiters at once.
            let (cancelled, kept): (Vec<_>, Vec<_>) = q.pending.drain(..).partition(|p| p.cancel.load(Ordering::Acquire));
            q.pending = kept.into();
            for mut p in cancelled {
                (p.sink)(GenEvent::Done { reason: FinishReason::Cancelled, prompt_tokens: p.req.prompt.len(), completion_tokens: 0, cached_tokens: 0 });
            }
            while self.busy.iter().any(|b| !b) {
                let Some(p) = q.pending.pop_front() else { break };
                self.start(p);
            }
            if q.shutdown {
                for mut s in std::mem::take(&mut self.live) {
                    (s.sink)(GenEvent::Error("the runtime shut down".into()));
                }
                for mut p in q.pending.drain(..) {
                    (p.sink)(GenEvent::Error("the runtime shut down".into()));
                }
                return false;
            }
            if !self.live.is_empty() {
                return true;
            }
            shared.wake.wait(&mut q);
        }
    }

    fn start(&mut self, p: Pending) {
        // The free slot holding the longest prefix of this prompt. At least the last prompt
        // token is fed: its row gives the first logits.
        let common = |held: &[u32]| held.iter().zip(&p.req.prompt).take_while(|(a, b)| a == b).count().min(p.req.prompt.len() - 1);
        // Among equal prefixes the slot holding the least is overwritten, keeping other
        // sessions' caches for their next turn.
        let slot = (0..self.busy.len())
            .filter(|&s| !self.busy[s])
            .max_by_key(|&s| (common(&self.slot_tokens[s]), std::cmp::Reverse(self.slot_tokens[s].len()), std::cmp::Reverse(s)))
            .unwrap();
        let cached = common(&self.slot_tokens[slot]);
        self.busy[slot] = true;
        self.slot_tokens[slot].truncate(cached);
        let seed = p.req.sampling.seed;
        self.live.push(Session {
            slot: slot as u32,
            req: p.req,
            sink: p.sink,
            cancel: p.cancel,
            fed: cached,
            cached,
            generated: vec![],
            next: None,
            rng: Rng::new(seed),
            decoder: StreamDecoder::new(),
            held: String::new(),
        });
    }

    /// One forward step over every live session, then their picks.
    fn step(&mut self) -> Result<()> {
        // Cancelled sessions end before the step.
        let mut i = 0;
        while i < self.live.len() {
            if self.live[i].cancel.load(Ordering::Acquire) {
                let s = self.live.swap_remove(i);
                self.finish(s, FinishReason::Cancelled);
            } else {
                i += 1;
            }
        }
        if self.live.is_empty() {
            return Ok(());
        }
        let mut rows = vec![];
        // (session index, row index) of rows whose logits pick a token.
        let mut picks: Vec<(usize, usize)> = vec![];
        let mut budget = self.chunk;
        let mut prompt_rows = 0u64;
        for (si, s) in self.live.iter_mut().enumerate() {
            if let Some(tok) = s.next {
                let pos = s.pos();
                rows.push(Row { slot: s.slot, pos: pos as u32, token: tok });
                self.slot_tokens[s.slot as usize].push(tok);
                picks.push((si, rows.len() - 1));
            } else if budget > 0 {
                let n = (s.req.prompt.len() - s.fed).min(budget);
                for j in 0..n {
                    let pos = s.fed + j;
                    rows.push(Row { slot: s.slot, pos: pos as u32, token: s.req.prompt[pos] });
                }
                self.slot_tokens[s.slot as usize].extend_from_slice(&s.req.prompt[s.fed..s.fed + n]);
                s.fed += n;
                budget -= n;
                prompt_rows += n as u64;
                if s.fed == s.req.prompt.len() {
                    picks.push((si, rows.len() - 1));
                }
            }
        }
        if rows.is_empty() {
            return Ok(());
        }
        let want: Vec<usize> = picks.iter().map(|p| p.1).collect();
        let device_argmax = picks.iter().all(|&(si, _)| self.live[si].req.sampling.device_argmax_suffices());
        let chosen: Vec<std::result::Result<Pick, String>> = if device_argmax {
            self.llm.forward_greedy(&rows, &want)?.into_iter().map(|id| Ok(Pick { id, logprob: f32::NAN, top: vec![] })).collect()
        } else {
            let logits = self.llm.forward(&rows, &want)?;
            let mut out = Vec::with_capacity(picks.len());
            for (&(si, _), l) in picks.iter().zip(&logits) {
                let s = &mut self.live[si];
                let mut history: Vec<u32> = s.req.prompt.clone();
                history.extend_from_slice(&s.generated);
                // A row that cannot be sampled (every logit NaN) ends its own session only.
                out.push(sample(l, &s.req.sampling, &history, &mut s.rng).map_err(|e| e.to_string()));
            }
            out
        };
        {
            let mut st = self.shared.stats.lock();
            st.steps += 1;
            st.rows += rows.len() as u64;
            st.max_batch = st.max_batch.max(self.live.len() as u64);
            st.prompt_tokens += prompt_rows;
            st.generated_tokens += chosen.len() as u64;
            st.device_argmax_steps += device_argmax as u64;
        }
        // Apply picks; finished sessions leave (highest index first keeps indices valid).
        let mut done: Vec<(usize, std::result::Result<FinishReason, String>)> = vec![];
        for (&(si, _), pick) in picks.iter().zip(chosen) {
            match pick {
                Ok(pick) => {
                    if let Some(reason) = self.accept(si, pick) {
                        done.push((si, Ok(reason)));
                    }
                }
                Err(e) => done.push((si, Err(e))),
            }
        }
        done.sort_by(|a, b| b.0.cmp(&a.0));
        for (si, end) in done {
            let mut s = self.live.swap_remove(si);
            match end {
                Ok(reason) => self.finish(s, reason),
                Err(e) => {
                    self.busy[s.slot as usize] = false;
                    self.slot_tokens[s.slot as usize].clear();
                    (s.sink)(GenEvent::Error(e));
                }
            }
        }
        Ok(())
    }

    /// Takes a session's pick: emits its text, and says whether the session ends.
    fn accept(&mut self, si: usize, pick: Pick) -> Option<FinishReason> {
        let ctx = self.llm.attn.ctx;
        let tok = self.tok.clone();
        let s = &mut self.live[si];
        let is_eog = !s.req.ignore_eos && tok.is_eog(pick.id);
        s.generated.push(pick.id);
        if is_eog {
            let flushed = s.decoder.finish();
            let text = std::mem::take(&mut s.held) + &flushed;
            let alive = (s.sink)(GenEvent::Token { id: pick.id, text, logprob: pick.logprob, top: pick.top });
            return Some(if alive { FinishReason::Stop } else { FinishReason::Cancelled });
        }
        let piece = s.decoder.push(&tok, pick.id);
        s.held.push_str(&piece);
        let mut reason = None;
        let text = match stop_match(&s.held, &s.req.stop) {
            StopScan::Found(at) => {
                reason = Some(FinishReason::Stop);
                let t = s.held[..at].to_string();
                s.held.clear();
                t
            }
            StopScan::Hold(keep_from) => {
                let t = s.held[..keep_from].to_string();
                s.held.drain(..keep_from);
                t
            }
        };
        if reason.is_none() && (s.generated.len() >= s.req.max_tokens || s.pos() >= ctx) {
            reason = Some(FinishReason::Length);
        }
        let text = if reason.is_some() && reason != Some(FinishReason::Stop) { text + &std::mem::take(&mut s.held) + &s.decoder.finish() } else { text };
        let alive = (s.sink)(GenEvent::Token { id: pick.id, text, logprob: pick.logprob, top: pick.top });
        if !alive {
            return Some(FinishReason::Cancelled);
        }
        if reason.is_none() {
            s.next = Some(pick.id);
        }
        reason
    }

    fn finish(&mut self, mut s: Session, reason: FinishReason) {
        // Counters first: a caller that sees Done sees its session counted.
        self.shared.stats.lock().cached_tokens += s.cached as u64;
        self.busy[s.slot as usize] = false;
        // The cache holds the prompt and every fed generated token (the last pick was never fed).
        let held = &mut self.slot_tokens[s.slot as usize];
        held.truncate(s.pos().min(held.len()));
        (s.sink)(GenEvent::Done { reason, prompt_tokens: s.req.prompt.len(), completion_tokens: s.generated.len(), cached_tokens: s.cached });
    }
}

enum StopScan {
    /// A stop string starts at this byte.
    Found(usize),
    /// Text from this byte on may be the start of a stop string: hold it back.
    Hold(usize),
}

fn stop_match(text: &str, stops: &[String]) -> StopScan {
    if let Some(at) = stops.iter().filter_map(|s| text.find(s.as_str())).min() {
        return StopScan::Found(at);
    }
    // The earliest char boundary from which the rest of the text is a proper prefix of a stop.
    for (i, _) in text.char_indices() {
        let tail = &text[i..];
        if stops.iter().any(|s| s.len() > tail.len() && s.starts_with(tail)) {
            return StopScan::Hold(i);
        }
    }
    StopScan::Hold(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_strings_are_found_or_held_back() {
        let stops = vec!["\nUser:".to_string(), "END".to_string()];
        assert!(matches!(stop_match("hello", &stops), StopScan::Hold(5)));
        assert!(matches!(stop_match("hello\nUs", &stops), StopScan::Hold(5)));
        assert!(matches!(stop_match("hello EN", &stops), StopScan::Hold(6)));
        assert!(matches!(stop_match("hello END more", &stops), StopScan::Found(6)));
        assert!(matches!(stop_match("a\nUser: b", &stops), StopScan::Found(1)));
        assert!(matches!(stop_match("é", &[]), StopScan::Hold(2)));
    }
}
