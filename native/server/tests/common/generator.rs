//! A fake text generator: deterministic tokens from the prompt, a delay per token, one thread
//! per session, and a record of what it was asked and what it saw (cancellations, the most
//! sessions open at once).

use nx_vulkan_server::{FinishReason, GenError, GenEvent, GenModelInfo, GenParams, GenPrompt, GenToken, Generator};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

pub const GEN_MODEL: &str = "fake-llm";
pub const GEN_DEVICE: &str = "fake gpu";
pub const CONTEXT: usize = 4096;

/// Token `i` of a prompt whose last word is `key`: `"{key}-{i} "`. The fake's own answer
/// (before `max_tokens` or a stop string) is `length` tokens long, then end of sequence.
/// Prompts containing `__busy__` are refused busy, `__long__` refused as too long, `__error__`
/// fail after 2 tokens. Clones share one [`Record`].
#[derive(Clone)]
pub struct FakeGenerator {
    pub delay: Duration,
    pub length: usize,
    pub record: Arc<Record>,
}

/// What the fake saw.
#[derive(Default)]
pub struct Record {
    pub started: AtomicUsize,
    /// Sessions running now, and the most at once.
    pub open: AtomicUsize,
    pub most_open: AtomicUsize,
    /// Sessions whose receiver was dropped before they finished.
    pub cancelled: AtomicUsize,
    /// Tokens sent by every session (to see that a cancelled one stopped).
    pub tokens_sent: AtomicUsize,
    pub last: Mutex<Option<(GenPrompt, GenParams)>>,
}

impl FakeGenerator {
    pub fn new(delay_ms: u64, length: usize) -> FakeGenerator {
        FakeGenerator { delay: Duration::from_millis(delay_ms), length, record: Arc::default() }
    }

    pub fn cancelled(&self) -> usize {
        self.record.cancelled.load(Ordering::SeqCst)
    }

    pub fn open(&self) -> usize {
        self.record.open.load(Ordering::SeqCst)
    }

    pub fn most_open(&self) -> usize {
        self.record.most_open.load(Ordering::SeqCst)
    }

    pub fn started(&self) -> usize {
        self.record.started.load(Ordering::SeqCst)
    }

    pub fn last(&self) -> (GenPrompt, GenParams) {
        self.record.last.lock().clone().expect("a session was started")
    }
}

/// The word the fake's tokens are made of: the prompt's (or last message's) last word.
pub fn key(prompt: &GenPrompt) -> String {
    let text = match prompt {
        GenPrompt::Text(t) => t.as_str(),
        GenPrompt::Chat(m) => m.last().map_or("", |m| m.content.as_str()),
    };
    text.split_whitespace().last().unwrap_or("_").to_string()
}

pub fn fake_token(key: &str, i: usize) -> String {
    format!("{key}-{i} ")
}

/// The text the fake answers for a prompt ending in `key`, `n` tokens of it.
pub fn fake_text(key: &str, n: usize) -> String {
    (0..n).map(|i| fake_token(key, i)).collect()
}

/// Prompt tokens as the fake counts them: words, plus 2 per chat message.
pub fn prompt_tokens(prompt: &GenPrompt) -> usize {
    match prompt {
        GenPrompt::Text(t) => t.split_whitespace().count(),
        GenPrompt::Chat(m) => m.iter().map(|m| m.content.split_whitespace().count() + 2).sum(),
    }
}

pub fn fake_logprob(i: usize) -> f32 {
    -0.125 * (i + 1) as f32
}

impl Generator for FakeGenerator {
    fn info(&self) -> GenModelInfo {
        GenModelInfo { id: GEN_MODEL.into(), device: GEN_DEVICE.into(), context_length: CONTEXT, quantization: "Q4_1".into(), activations: "f32".into() }
    }

    fn start(&self, prompt: GenPrompt, params: GenParams) -> Result<mpsc::Receiver<GenEvent>, GenError> {
        let k = key(&prompt);
        let whole = match &prompt {
            GenPrompt::Text(t) => t.clone(),
            GenPrompt::Chat(m) => m.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join(" "),
        };
        if whole.contains("__busy__") {
            return Err(GenError::Busy);
        }
        if whole.contains("__long__") {
            return Err(GenError::BadRequest("the prompt is longer than the context".into()));
        }
        let fail = whole.contains("__error__");
        let r = &self.record;
        *r.last.lock() = Some((prompt.clone(), params.clone()));
        r.started.fetch_add(1, Ordering::SeqCst);
        let open = r.open.fetch_add(1, Ordering::SeqCst) + 1;
        r.most_open.fetch_max(open, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel(4);
        let fake = self.clone();
        let prompt_tokens = prompt_tokens(&prompt);
        std::thread::spawn(move || {
            let last = run_session(&fake, &tx, &k, &params, prompt_tokens, fail);
            // The session is over once it has its last event (the server may start the next
            // one as soon as that arrives), so it stops counting as open before sending it.
            fake.record.open.fetch_sub(1, Ordering::SeqCst);
            if last.and_then(|event| tx.blocking_send(event).map_err(|_| ())).is_err() {
                fake.record.cancelled.fetch_add(1, Ordering::SeqCst);
            }
        });
        Ok(rx)
    }
}

/// One session's tokens, until length, max_tokens or a stop string; its last event (`Done` or
/// `Error`) is returned, not sent. Err when the receiver left.
fn run_session(fake: &FakeGenerator, tx: &mpsc::Sender<GenEvent>, k: &str, params: &GenParams, prompt_tokens: usize, fail: bool) -> Result<GenEvent, ()> {
    let n = fake.length.min(params.max_tokens);
    let mut text = String::new();
    for i in 0..n {
        std::thread::sleep(fake.delay);
        if fail && i == 2 {
            return Ok(GenEvent::Error("the fake was asked to fail".into()));
        }
        let piece = fake_token(k, i);
        // A stop string: emit what comes before it, then stop.
        let joined = format!("{text}{piece}");
        if let Some(at) = params.stop.iter().filter_map(|s| joined.find(s.as_str())).min() {
            let before = &joined[text.len().min(at)..at];
            if !before.is_empty() {
                send_token(fake, tx, i, before, params)?;
            }
            let completion = i + usize::from(!before.is_empty());
            return Ok(GenEvent::Done { finish_reason: FinishReason::Stop, prompt_tokens, completion_tokens: completion });
        }
        send_token(fake, tx, i, &piece, params)?;
        text = joined;
    }
    let finish_reason = if n < fake.length { FinishReason::Length } else { FinishReason::Stop };
    Ok(GenEvent::Done { finish_reason, prompt_tokens, completion_tokens: n })
}

fn send_token(fake: &FakeGenerator, tx: &mpsc::Sender<GenEvent>, i: usize, text: &str, params: &GenParams) -> Result<(), ()> {
    let (logprob, top_logprobs) = match params.logprobs {
        None => (None, vec![]),
        Some(k) => (Some(fake_logprob(i)), (0..k).map(|j| (format!("alt{j}"), fake_logprob(i) - 1.0 - j as f32)).collect()),
    };
    tx.blocking_send(GenEvent::Token(GenToken { id: i as u32, text: text.to_string(), logprob, top_logprobs })).map_err(|_| ())?;
    fake.record.tokens_sent.fetch_add(1, Ordering::SeqCst);
    Ok(())
}
