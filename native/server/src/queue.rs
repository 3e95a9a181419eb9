//! The bounded batching queue: many requests in, batches of at most `batch` inputs out to one
//! worker thread that owns the [`Embedder`].
//!
//! - **Bounded.** The queue holds at most `capacity` inputs not yet taken by a batch; a request
//!   that does not fit is refused at once ([`SubmitError::Full`], HTTP 503), never half-queued.
//! - **Batching.** The worker starts a batch as soon as `batch` inputs wait, or when the oldest
//!   waiting input has waited `max_wait`, whichever comes first.
//! - **Split, assembled in order.** A request's inputs may be spread over several batches; each
//!   output goes to its own slot and the request is answered once every slot is filled.
//! - **Nothing accepted is lost.** After [`BatchQueue::close`] no request is accepted, but the
//!   worker runs every accepted input before it stops. A batch the embedder fails (or panics in)
//!   answers each of its requests with the error; the worker goes on with the next batch.
//! - **Abandoned requests cost nothing.** A caller that drops its receiver (a client that went
//!   away) has its inputs skipped when their turn comes, and results already made are dropped.

use crate::embedder::{EmbedOutput, Embedder, ModelInfo};
use crate::metrics::Metrics;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How the queue batches.
#[derive(Clone, Debug)]
pub struct QueueConfig {
    /// Most inputs per batch.
    pub batch: usize,
    /// Longest the oldest waiting input waits for a batch to fill.
    pub max_wait: Duration,
    /// Most inputs waiting (not yet in a batch).
    pub capacity: usize,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig { batch: 32, max_wait: Duration::from_millis(2), capacity: 1024 }
    }
}

/// Why a request was not queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubmitError {
    /// No room now: `waiting` inputs queued of `capacity`. Worth retrying later.
    Full { waiting: usize, capacity: usize },
    /// The request alone has more inputs than the queue can ever hold.
    TooLarge { inputs: usize, capacity: usize },
    /// The queue is shutting down.
    Closed,
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubmitError::Full { waiting, capacity } => write!(f, "the queue is full ({waiting} of {capacity} inputs waiting); retry later"),
            SubmitError::TooLarge { inputs, capacity } => write!(f, "{inputs} inputs in one request; at most {capacity} are accepted"),
            SubmitError::Closed => write!(f, "the server is shutting down"),
        }
    }
}

/// A request's answer: its outputs in input order, or the embedder's error.
pub type Answer = Result<Vec<EmbedOutput>, String>;

/// Where a request's outputs are gathered until the last one arrives.
struct Sink {
    slots: Vec<Option<EmbedOutput>>,
    missing: usize,
    /// Taken when the answer is sent (or the request fails).
    reply: Option<oneshot::Sender<Answer>>,
}

impl Sink {
    fn abandoned(&self) -> bool {
        self.reply.as_ref().is_none_or(|r| r.is_closed())
    }

    fn fail(&mut self, message: &str) {
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(Err(message.to_string()));
        }
    }

    fn fill(&mut self, start: usize, outputs: impl Iterator<Item = EmbedOutput>) {
        for (slot, out) in self.slots[start..].iter_mut().zip(outputs) {
            *slot = Some(out);
            self.missing -= 1;
        }
        if self.missing == 0 {
            if let Some(reply) = self.reply.take() {
                // A closed receiver (the client left) just drops the answer.
                let _ = reply.send(Ok(self.slots.iter_mut().map(|s| s.take().expect("every slot filled")).collect()));
            }
        }
    }
}

struct Job {
    texts: Vec<String>,
    /// Inputs before `next` are in a batch already.
    next: usize,
    sink: Arc<Mutex<Sink>>,
    enqueued: Instant,
}

struct State {
    jobs: VecDeque<Job>,
    /// Inputs not yet in a batch.
    waiting: usize,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    config: QueueConfig,
    metrics: Arc<Metrics>,
}

/// The queue and its worker thread. Dropping it closes it and waits for the worker to finish
/// what was accepted.
pub struct BatchQueue {
    shared: Arc<Shared>,
    info: ModelInfo,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl BatchQueue {
    /// Starts the worker thread, which owns `embedder` from now on.
    pub fn start<E: Embedder>(mut embedder: E, config: QueueConfig, metrics: Arc<Metrics>) -> std::io::Result<BatchQueue> {
        let config = QueueConfig { batch: config.batch.max(1), capacity: config.capacity.max(1), ..config };
        let info = embedder.info();
        let shared = Arc::new(Shared {
            state: Mutex::new(State { jobs: VecDeque::new(), waiting: 0, closed: false }),
            wake: Condvar::new(),
            config,
            metrics,
        });
        let worker = {
            let shared = shared.clone();
            // An engine thread's stack, so an embedder that calls the engine directly may.
            std::thread::Builder::new()
                .name("nx-vulkan-batcher".into())
                .stack_size(nx_vulkan_engine::exec::STACK_BYTES)
                .spawn(move || work(&shared, &mut embedder))?
        };
        Ok(BatchQueue { shared, info, worker: Mutex::new(Some(worker)) })
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    pub fn config(&self) -> &QueueConfig {
        &self.shared.config
    }

    /// Inputs waiting for a batch now.
    pub fn depth(&self) -> usize {
        self.shared.state.lock().waiting
    }

    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().closed
    }

    /// Queues `texts` as one request; the receiver gets their outputs in order. Dropping the
    /// receiver abandons the request. Never blocks.
    pub fn submit(&self, texts: Vec<String>) -> Result<oneshot::Receiver<Answer>, SubmitError> {
        let capacity = self.shared.config.capacity;
        let n = texts.len();
        let (tx, rx) = oneshot::channel();
        let mut state = self.shared.state.lock();
        if state.closed {
            return Err(SubmitError::Closed);
        }
        if n > capacity {
            return Err(SubmitError::TooLarge { inputs: n, capacity });
        }
        if state.waiting + n > capacity {
            return Err(SubmitError::Full { waiting: state.waiting, capacity });
        }
        if n == 0 {
            let _ = tx.send(Ok(vec![]));
            return Ok(rx);
        }
        let sink = Sink { slots: vec![None; n], missing: n, reply: Some(tx) };
        state.jobs.push_back(Job { texts, next: 0, sink: Arc::new(Mutex::new(sink)), enqueued: Instant::now() });
        state.waiting += n;
        drop(state);
        self.shared.wake.notify_one();
        Ok(rx)
    }

    /// Stops accepting requests; the worker still runs everything accepted.
    pub fn close(&self) {
        self.shared.state.lock().closed = true;
        self.shared.wake.notify_one();
    }

    /// Closes the queue and waits until the worker has answered everything accepted.
    pub fn close_and_join(&self) {
        self.close();
        if let Some(worker) = self.worker.lock().take() {
            let _ = worker.join();
        }
    }
}

impl Drop for BatchQueue {
    fn drop(&mut self) {
        self.close_and_join();
    }
}

/// One batch's inputs and where each run of them goes.
struct Batch {
    texts: Vec<String>,
    /// (request, first slot, count), in the order of `texts`.
    pieces: Vec<(Arc<Mutex<Sink>>, usize, usize)>,
}

/// The worker: wait for work, fill a batch, run it, deliver; until closed and empty.
fn work(shared: &Shared, embedder: &mut dyn Embedder) {
    let QueueConfig { batch: size, max_wait, .. } = shared.config;
    loop {
        let batch = {
            let mut state = shared.state.lock();
            while state.waiting == 0 && !state.closed {
                shared.wake.wait(&mut state);
            }
            if state.waiting == 0 {
                return; // closed and drained
            }
            // Fill: until `size` inputs wait, the oldest has waited `max_wait`, or closing.
            let deadline = state.jobs.front().map_or_else(Instant::now, |j| j.enqueued) + max_wait;
            while state.waiting < size && !state.closed {
                if shared.wake.wait_until(&mut state, deadline).timed_out() {
                    break;
                }
            }
            take(&mut state, size, &shared.metrics)
        };
        if batch.texts.is_empty() {
            continue; // everything taken was abandoned
        }
        run(shared, embedder, batch);
    }
}

/// Takes up to `size` inputs from the front of the queue, skipping abandoned requests.
fn take(state: &mut State, size: usize, metrics: &Metrics) -> Batch {
    let mut batch = Batch { texts: Vec::with_capacity(size), pieces: vec![] };
    while batch.texts.len() < size {
        let Some(job) = state.jobs.front_mut() else { break };
        let left = job.texts.len() - job.next;
        if job.sink.lock().abandoned() {
            state.waiting -= left;
            metrics.abandoned(left);
            state.jobs.pop_front();
            continue;
        }
        let k = left.min(size - batch.texts.len());
        batch.texts.extend(job.texts[job.next..job.next + k].iter_mut().map(std::mem::take));
        batch.pieces.push((job.sink.clone(), job.next, k));
        metrics.queue_wait(job.enqueued.elapsed().as_secs_f64(), k);
        job.next += k;
        state.waiting -= k;
        if job.next == job.texts.len() {
            state.jobs.pop_front();
        }
    }
    batch
}

/// Runs one batch on the embedder and hands each request its outputs.
fn run(shared: &Shared, embedder: &mut dyn Embedder, batch: Batch) {
    let n = batch.texts.len();
    let t0 = Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| embedder.embed(&batch.texts)))
        .unwrap_or_else(|_| Err("internal error: the embedder panicked".into()))
        .and_then(|outs| {
            if outs.len() == n {
                Ok(outs)
            } else {
                Err(format!("internal error: the embedder answered {} outputs for {n} inputs", outs.len()))
            }
        });
    let seconds = t0.elapsed().as_secs_f64();
    match result {
        Ok(outs) => {
            shared.metrics.batch(n, outs.iter().map(|o| o.tokens).sum(), seconds);
            let mut outs = outs.into_iter();
            for (sink, start, k) in batch.pieces {
                sink.lock().fill(start, outs.by_ref().take(k));
            }
        }
        Err(message) => {
            shared.metrics.failed_batch();
            for (sink, _, _) in batch.pieces {
                sink.lock().fail(&message);
            }
        }
    }
}
