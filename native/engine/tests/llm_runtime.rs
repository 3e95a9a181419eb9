//! The generation runtime (llm/runtime.rs) on random-weight fixtures: greedy generation equals
//! the float64 reference's tokens, sessions run together equal each session alone (tokens and
//! log-probabilities, bit for bit) while sharing steps, a repeated prompt reuses its slot's
//! cache, chunked prefill changes nothing, stop strings, cancellation, and bad requests.

mod common;

use common::llm_fixtures::{fixture, fixtures};
use common::on_engine;
use nx_vulkan_engine::llm::gguf::Gguf;
use nx_vulkan_engine::llm::model::{Llm, LlmOptions};
use nx_vulkan_engine::llm::runtime::{FinishReason, GenEvent, GenRequest, LlmRuntime, RuntimeOptions};
use nx_vulkan_engine::llm::sample::SamplingParams;
use nx_vulkan_engine::llm::tokenizer::LlmTokenizer;
use std::path::PathBuf;

fn fixture_path(name: &str) -> PathBuf {
    fixtures().join(format!("{name}.gguf"))
}

fn runtime(name: &str, slots: usize, options: RuntimeOptions) -> LlmRuntime {
    let g = Gguf::open(fixture_path(name)).unwrap();
    let tok = LlmTokenizer::from_gguf(&g).unwrap();
    let llm = Llm::from_gguf(common::ctx(), &g, &LlmOptions { context: Some(96), slots, kv_f16: false, ..LlmOptions::default() }, &|_, _| {}).unwrap();
    LlmRuntime::new(llm, tok, options).unwrap()
}

fn reference(name: &str) -> (Vec<u32>, Vec<u32>, Vec<f64>) {
    let f = fixture(name);
    (f.prompt, f.greedy, f.margins)
}

fn request(prompt: Vec<u32>, max_tokens: usize) -> GenRequest {
    GenRequest { prompt, sampling: SamplingParams::default(), max_tokens, stop: vec![], ignore_eos: true }
}

/// (ids, logprobs, text, finish reason, cached prompt tokens) of a finished generation.
fn outcome(events: &[GenEvent]) -> (Vec<u32>, Vec<u32>, String, FinishReason, usize) {
    let mut ids = vec![];
    let mut lps = vec![];
    let mut text = String::new();
    for e in events {
        match e {
            GenEvent::Token { id, text: t, logprob, .. } => {
                ids.push(*id);
                lps.push(logprob.to_bits());
                text.push_str(t);
            }
            GenEvent::Done { reason, completion_tokens, cached_tokens, .. } => {
                assert_eq!(*completion_tokens, ids.len());
                return (ids, lps, text, *reason, *cached_tokens);
            }
            GenEvent::Error(m) => panic!("generation failed: {m}"),
        }
    }
    panic!("no Done event in {events:?}");
}

#[test]
fn greedy_generation_equals_the_reference_and_batching_changes_nothing() {
    on_engine(|_| {
        // llama-q8_0 and qwen2-q4_k: every one of the 32 reference steps has a margin > 1e-2,
        // so free-running greedy must reproduce all of them.
        for name in ["llama-q8_0", "qwen2-q4_k"] {
            let (prompt, greedy, margins) = reference(name);
            assert!(margins.iter().all(|&m| m > 1e-2));
            let rt = runtime(name, 4, RuntimeOptions::default());
            let alone = outcome(&rt.generate_blocking(request(prompt.clone(), 32)).unwrap());
            assert_eq!(alone.0, greedy, "{name}: greedy tokens");
            assert_eq!(alone.3, FinishReason::Length);
            let s0 = rt.stats();
            assert!(s0.device_argmax_steps > 0, "greedy without logprobs should pick on the device");

            // Four sessions at once: three other prompts beside the reference one, with
            // log-probabilities (so the host samples), against each alone on a fresh runtime.
            let prompts: Vec<Vec<u32>> = (0..4).map(|s| prompt.iter().skip(s).copied().chain(prompt.iter().take(s).copied()).collect()).collect();
            let with_lp = |p: Vec<u32>| GenRequest { sampling: SamplingParams { logprobs: 2, ..Default::default() }, ..request(p, 20) };
            let solo: Vec<_> = prompts
                .iter()
                .map(|p| {
                    let rt = runtime(name, 1, RuntimeOptions::default());
                    outcome(&rt.generate_blocking(with_lp(p.clone())).unwrap())
                })
                .collect();
            let rt = runtime(name, 4, RuntimeOptions::default());
            let (tx, rx) = std::sync::mpsc::channel();
            for (i, p) in prompts.iter().enumerate() {
                let tx = tx.clone();
                rt.submit(with_lp(p.clone()), Box::new(move |e| tx.send((i, e)).is_ok())).unwrap();
            }
            drop(tx);
            let mut events: Vec<Vec<GenEvent>> = vec![vec![]; 4];
            for (i, e) in rx {
                events[i].push(e);
            }
            for i in 0..4 {
                let together = outcome(&events[i]);
                assert_eq!(together.0, solo[i].0, "{name}: session {i}'s tokens changed when batched");
                assert_eq!(together.1, solo[i].1, "{name}: session {i}'s log-probabilities changed when batched");
            }
            assert_eq!(solo[0].0[..20], greedy[..20]);
            let st = rt.stats();
            assert_eq!(st.max_batch, 4, "the four sessions should share steps");
            // One prefill step, then 19 decode steps of four rows.
            assert!(st.steps <= 21, "{} steps for 4 × 20 tokens", st.steps);
            assert_eq!(st.device_argmax_steps, 0);
        }
    });
}

#[test]
fn a_repeated_prompt_reuses_the_cache_and_chunked_prefill_changes_nothing() {
    on_engine(|_| {
        let name = "llama-q4_0";
        let (prompt, greedy, _) = reference(name);
        let rt = runtime(name, 2, RuntimeOptions { prefill_chunk: 5, ..Default::default() });
        let first = outcome(&rt.generate_blocking(request(prompt.clone(), 16)).unwrap());
        assert_eq!(first.0, greedy[..16]);
        assert_eq!(first.4, 0);
        // The same prompt again: every prompt token but the last comes from the slot's cache.
        let second = outcome(&rt.generate_blocking(request(prompt.clone(), 16)).unwrap());
        assert_eq!(second.0, first.0);
        assert_eq!(second.4, prompt.len() - 1);
        // The prompt extended by the first generated tokens (a chat's next turn) reuses all
        // of the old prompt and what was fed of the generation.
        let mut longer = prompt.clone();
        longer.extend_from_slice(&first.0[..8]);
        let third = outcome(&rt.generate_blocking(request(longer.clone(), 8)).unwrap());
        assert_eq!(third.0, greedy[8..16]);
        assert_eq!(third.4, longer.len() - 1);
        assert_eq!(rt.stats().cached_tokens as usize, 2 * (prompt.len() - 1) + 8);
    });
}

#[test]
fn stop_strings_cancellation_and_limits() {
    on_engine(|_| {
        let name = "llama-q8_0";
        let (prompt, _, _) = reference(name);
        let rt = runtime(name, 2, RuntimeOptions { max_queued: 2, ..Default::default() });
        let full = outcome(&rt.generate_blocking(request(prompt.clone(), 24)).unwrap());
        assert_eq!(rt.tokenizer.decode(&full.0, false), full.2, "streamed text equals the decoded tokens");
        // A stop string from the middle of the text: what precedes it, finish "stop".
        let chars: Vec<(usize, char)> = full.2.char_indices().collect();
        let (at, _) = chars[chars.len() / 2];
        let stop: String = full.2[at..].chars().take(3).collect();
        let want = &full.2[..full.2.find(&stop).unwrap()];
        let stopped = outcome(&rt.generate_blocking(GenRequest { stop: vec![stop.clone()], ..request(prompt.clone(), 24) }).unwrap());
        assert_eq!(stopped.2, want, "stop {stop:?}");
        assert_eq!(stopped.3, FinishReason::Stop);

        // Cancellation from another thread after the first tokens.
        let (tx, rx) = std::sync::mpsc::channel();
        let h = rt.submit(request(prompt.clone(), 80), Box::new(move |e| tx.send(e).is_ok())).unwrap();
        let mut n = 0;
        let mut reason = None;
        for e in rx {
            match e {
                GenEvent::Token { .. } => {
                    n += 1;
                    if n == 3 {
                        h.cancel();
                    }
                }
                GenEvent::Done { reason: r, .. } => {
                    reason = Some(r);
                    break;
                }
                GenEvent::Error(m) => panic!("{m}"),
            }
        }
        assert_eq!(reason, Some(FinishReason::Cancelled));
        assert!(n < 80);
        // A receiver that goes away cancels too; the runtime keeps serving.
        rt.submit(request(prompt.clone(), 80), Box::new(|_| false)).unwrap();
        assert_eq!(outcome(&rt.generate_blocking(request(prompt.clone(), 4)).unwrap()).0, full.0[..4]);

        // The context (96 positions) ends a long generation with "length".
        let long = outcome(&rt.generate_blocking(request(prompt.clone(), 500)).unwrap());
        assert_eq!(long.3, FinishReason::Length);
        assert_eq!(long.0.len(), 96 - prompt.len() + 1);

        // Bad requests.
        let err = |r: GenRequest| rt.submit(r, Box::new(|_| true)).err().expect("accepted").to_string();
        assert!(err(request(vec![], 4)).contains("empty"));
        assert!(err(request(prompt.clone(), 0)).contains("max_tokens"));
        assert!(err(request(vec![1; 96], 4)).contains("context"));
        assert!(err(request(vec![100_000], 4)).contains("vocabulary"));
        assert!(err(GenRequest { sampling: SamplingParams { top_p: 2.0, ..Default::default() }, ..request(prompt.clone(), 4) }).contains("top_p"));
        assert!(err(GenRequest { stop: vec![String::new()], ..request(prompt.clone(), 4) }).contains("stop"));
    });
}

#[test]
fn a_full_queue_is_busy() {
    on_engine(|_| {
        let name = "llama-q4_1";
        let (prompt, _, _) = reference(name);
        let rt = runtime(name, 1, RuntimeOptions { max_queued: 1, ..Default::default() });
        let (tx, rx) = std::sync::mpsc::channel();
        // One waiting place: the second request is refused, or — if the worker already took
        // the first into the slot — the third.
        let mut busy = None;
        let mut accepted = 0;
        for i in 0..4 {
            let tx = tx.clone();
            match rt.submit(request(prompt.clone(), 40), Box::new(move |e| tx.send((i, e)).is_ok())) {
                Ok(_) => accepted += 1,
                Err(e) => {
                    busy = Some(e.to_string());
                    break;
                }
            }
        }
        drop(tx);
        let msg = busy.expect("the queue never filled");
        assert!(msg.starts_with("busy"), "{msg}");
        // Every accepted request still finishes.
        let done = rx.iter().filter(|(_, e)| matches!(e, GenEvent::Done { .. })).count();
        assert!((1..=2).contains(&accepted), "{accepted} accepted with one slot and one queue place");
        assert_eq!(done, accepted);
    });
}
