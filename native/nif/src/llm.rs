//! The LLM runtime (engine `llm/`): a GGUF model loaded into a resource (`llm_load`), its
//! tokenizer and chat template, and generations whose events are sent to an Elixir process as
//! messages `{:nx_vulkan_llm, tag, event}` from the runtime's worker thread. Translation only.

use crate::list::List;
use crate::encode_result;
use nx_vulkan_engine::llm::chat::{ChatMessage, ChatTemplate};
use nx_vulkan_engine::llm::model::LlmOptions;
use nx_vulkan_engine::llm::prefill::LlmGemmPrecision;
use nx_vulkan_engine::llm::runtime::{GenEvent, GenRequest, LlmRuntime, RuntimeOptions, SessionHandle};
use nx_vulkan_engine::llm::sample::SamplingParams;
use nx_vulkan_engine::{self as engine, Context, EngineError};
use rustler::{Encoder as _, Env, LocalPid, NifMap, OwnedEnv, ResourceArc, Term};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod atoms {
    rustler::atoms! { nx_vulkan_llm, token, done, error }
}

pub struct LlmRef {
    runtime: Arc<LlmRuntime>,
    template: Option<ChatTemplate>,
    model: String,
    device: String,
}

#[rustler::resource_impl]
impl rustler::Resource for LlmRef {}

pub struct SessionRef {
    handle: SessionHandle,
}

#[rustler::resource_impl]
impl rustler::Resource for SessionRef {}

#[derive(NifMap)]
struct LoadOptions {
    context: usize,
    slots: usize,
    kv_type: String,
    template: String,
    prefill_chunk: usize,
    int8_activations: bool,
    prefill_precision: String,
}

/// Loads `path` on the process-wide device. `context` 0: the model's (at most 4096);
/// `template` "" uses the file's chat template, else a built-in one ("chatml", "llama3").
#[rustler::nif(schedule = "DirtyIo")]
fn llm_load(env: Env<'_>, path: String, opts: LoadOptions) -> Term<'_> {
    let r = (|| {
        let kv_f16 = LlmOptions::parse_kv_type(&opts.kv_type)?;
        engine::exec::run(move || {
            let ctx = Context::global()?;
            let prefill_precision = (!opts.prefill_precision.is_empty()).then(|| LlmGemmPrecision::parse(&opts.prefill_precision)).transpose()?;
            let model = LlmOptions { context: (opts.context > 0).then_some(opts.context), slots: opts.slots, kv_f16, int8_activations: opts.int8_activations, prefill_precision };
            let template = (!opts.template.is_empty()).then_some(opts.template.as_str());
            let runtime = RuntimeOptions { prefill_chunk: opts.prefill_chunk.max(1), ..Default::default() };
            let m = LlmRuntime::open(ctx.clone(), &path, &model, template, runtime, &|_, _| {})?;
            Ok(LlmRef { runtime: Arc::new(m.runtime), template: m.template, model: m.name, device: ctx.caps.name.clone() })
        })
    })();
    encode_result(env, r, |env, l| ResourceArc::new(l).encode(env))
}

/// `{:ok, %{...}}`: what was loaded.
#[rustler::nif]
fn llm_info(env: Env<'_>, llm: ResourceArc<LlmRef>) -> Term<'_> {
    let m = &llm.runtime.llm;
    let c = &m.config;
    let pairs: Vec<(&str, Term)> = vec![
        ("model", llm.model.encode(env)),
        ("architecture", c.arch.name().encode(env)),
        ("device", llm.device.encode(env)),
        ("vocab_size", c.n_vocab.encode(env)),
        ("layers", c.n_layer.encode(env)),
        ("embedding_length", c.n_embd.encode(env)),
        ("context", m.attn.ctx.encode(env)),
        ("trained_context", c.context_length.encode(env)),
        ("slots", m.attn.slots.encode(env)),
        ("kv_type", (if m.attn.kv_f16 { "f16" } else { "f32" }).encode(env)),
        ("prefill_precision", m.prefill_precision.name().encode(env)),
        ("weight_bytes", m.weight_bytes.encode(env)),
        ("cache_bytes", m.cache_bytes.encode(env)),
        ("chat_template", llm.template.as_ref().map(|t| t.name().to_string()).encode(env)),
        ("eog_ids", llm.runtime.tokenizer.eog_ids().to_vec().encode(env)),
    ];
    let map = Term::map_from_pairs(env, &pairs.into_iter().map(|(k, v)| (rustler::Atom::from_str(env, k).unwrap().encode(env), v)).collect::<Vec<_>>()).unwrap();
    encode_result(env, Ok(()), |_, ()| map)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn llm_tokenize(env: Env<'_>, llm: ResourceArc<LlmRef>, text: String, add_special: bool, parse_special: bool) -> Term<'_> {
    let r = llm.runtime.tokenizer.encode(&text, add_special, parse_special);
    encode_result(env, r, |env, ids| ids.encode(env))
}

#[rustler::nif(schedule = "DirtyCpu")]
fn llm_detokenize(env: Env<'_>, llm: ResourceArc<LlmRef>, ids: List<u32>, skip_special: bool) -> Term<'_> {
    let n = llm.runtime.tokenizer.vocab_size();
    let r = match ids.iter().find(|&&i| i as usize >= n) {
        Some(i) => Err(EngineError::InvalidArgument(format!("token id {i} is outside the vocabulary of {n}"))),
        None => Ok(llm.runtime.tokenizer.decode(&ids, skip_special)),
    };
    encode_result(env, r, |env, s| s.encode(env))
}

/// Renders `messages` (`[{role, content}]`) with the model's chat template.
#[rustler::nif(schedule = "DirtyCpu")]
fn llm_chat_prompt(env: Env<'_>, llm: ResourceArc<LlmRef>, messages: List<(String, String)>, add_generation_prompt: bool) -> Term<'_> {
    let r = match &llm.template {
        None => Err(EngineError::InvalidArgument("the model has no chat template; load it with template: \"chatml\" or \"llama3\"".into())),
        Some(t) => {
            let msgs: Vec<ChatMessage> = messages.into_iter().map(|(role, content)| ChatMessage { role, content }).collect();
            t.render(&msgs, add_generation_prompt)
        }
    };
    encode_result(env, r, |env, s| s.encode(env))
}

#[derive(NifMap)]
struct GenOptions {
    max_tokens: usize,
    temperature: f64,
    top_k: usize,
    top_p: f64,
    min_p: f64,
    repeat_penalty: f64,
    repeat_last_n: usize,
    seed: u64,
    logprobs: usize,
    stop: List<String>,
    ignore_eos: bool,
}

/// Starts a generation of `prompt` (token ids); its events go to `pid` as
/// `{:nx_vulkan_llm, tag, {:token, id, text, logprob, top} | {:done, reason, prompt_tokens,
/// completion_tokens, cached_tokens} | {:error, message}}`. `{:ok, session}`.
#[rustler::nif]
fn llm_start(env: Env<'_>, llm: ResourceArc<LlmRef>, prompt: List<u32>, opts: GenOptions, pid: LocalPid, tag: u64) -> Term<'_> {
    let req = GenRequest {
        prompt: prompt.0,
        sampling: SamplingParams {
            temperature: opts.temperature as f32,
            top_k: opts.top_k,
            top_p: opts.top_p as f32,
            min_p: opts.min_p as f32,
            repeat_penalty: opts.repeat_penalty as f32,
            repeat_last_n: opts.repeat_last_n,
            seed: opts.seed,
            logprobs: opts.logprobs,
        },
        max_tokens: opts.max_tokens,
        stop: opts.stop.0,
        ignore_eos: opts.ignore_eos,
    };
    // Armed once the runtime has accepted the request: a refused request's sink is dropped
    // here, on a scheduler thread, where nothing may be sent (and nothing needs to be).
    let armed = Arc::new(AtomicBool::new(false));
    let mut sender = EventSender { pid, tag, ended: false, armed: armed.clone() };
    let sink = Box::new(move |e: GenEvent| sender.send(e));
    let r = llm.runtime.submit(req, sink);
    if r.is_ok() {
        armed.store(true, Ordering::Release);
    }
    encode_result(env, r, |env, h| ResourceArc::new(SessionRef { handle: h }).encode(env))
}

/// Sends a session's events to its Elixir process. If the runtime drops it before the last
/// event (a worker failure), the process gets an error instead of waiting forever.
struct EventSender {
    pid: LocalPid,
    tag: u64,
    ended: bool,
    armed: Arc<AtomicBool>,
}

impl EventSender {
    fn send(&mut self, e: GenEvent) -> bool {
        self.ended |= matches!(e, GenEvent::Done { .. } | GenEvent::Error(_));
        let tag = self.tag;
        OwnedEnv::new()
            .send_and_clear(&self.pid, |env| {
                let event = match e {
                    GenEvent::Token { id, text, logprob, top } => {
                        let lp = if logprob.is_nan() { None } else { Some(logprob as f64) };
                        (atoms::token(), id, text, lp, top.into_iter().map(|(i, l)| (i, l as f64)).collect::<Vec<_>>()).encode(env)
                    }
                    GenEvent::Done { reason, prompt_tokens, completion_tokens, cached_tokens } => {
                        (atoms::done(), rustler::Atom::from_str(env, reason.name()).unwrap(), prompt_tokens, completion_tokens, cached_tokens).encode(env)
                    }
                    GenEvent::Error(m) => (atoms::error(), m).encode(env),
                };
                (atoms::nx_vulkan_llm(), tag, event).encode(env)
            })
            .is_ok()
    }
}

impl Drop for EventSender {
    fn drop(&mut self) {
        if !self.ended && self.armed.load(Ordering::Acquire) {
            self.send(GenEvent::Error("the generation ended without a result (the runtime's worker stopped)".into()));
        }
    }
}

#[rustler::nif]
fn llm_cancel(env: Env<'_>, session: ResourceArc<SessionRef>) -> Term<'_> {
    session.handle.cancel();
    encode_result(env, Ok(()), |env, ()| ().encode(env))
}

/// `{:ok, %{steps, rows, max_batch, prompt_tokens, cached_tokens, generated_tokens,
/// device_argmax_steps}}`.
#[rustler::nif]
fn llm_stats(env: Env<'_>, llm: ResourceArc<LlmRef>) -> Term<'_> {
    let s = llm.runtime.stats();
    let pairs = [
        ("steps", s.steps),
        ("rows", s.rows),
        ("max_batch", s.max_batch),
        ("prompt_tokens", s.prompt_tokens),
        ("cached_tokens", s.cached_tokens),
        ("generated_tokens", s.generated_tokens),
        ("device_argmax_steps", s.device_argmax_steps),
    ];
    let kv: Vec<(Term, Term)> = pairs.iter().map(|(k, v)| (rustler::Atom::from_str(env, k).unwrap().encode(env), v.encode(env))).collect();
    let map = Term::map_from_pairs(env, &kv).unwrap();
    encode_result(env, Ok(()), |_, ()| map)
}
