//! `nx-vulkan info --model`, `generate`, `chat` and `bench --model`: GGUF language models on
//! the engine's LLM runtime.

use clap::Args;
use nx_vulkan_engine::llm::chat::{ChatMessage, ChatTemplate};
use nx_vulkan_engine::llm::gguf::Gguf;
use nx_vulkan_engine::llm::model::{LlmOptions, Row};
use nx_vulkan_engine::llm::prefill::LlmGemmPrecision;
use nx_vulkan_engine::llm::runtime::{GenEvent, GenRequest, LlmRuntime, RuntimeOptions};
use nx_vulkan_engine::llm::sample::SamplingParams;
use nx_vulkan_engine::llm::tokenizer::LlmTokenizer;
use nx_vulkan_engine::llm::GgmlType;
use nx_vulkan_engine::{Context, EngineError, Result};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// What a model is opened with.
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// The GGUF file.
    #[arg(long)]
    pub model: PathBuf,
    /// Positions per session (default: the model's context, at most 4096).
    #[arg(long)]
    pub context: Option<usize>,
    /// KV cache type: f16 or f32.
    #[arg(long, default_value = "f16")]
    pub kv_type: String,
    /// Chat template: the file's (default), or chatml / llama3.
    #[arg(long)]
    pub template: Option<String>,
    /// Opt-in: decode matvecs on int8-quantized activations (quantized weights; faster, less
    /// accurate — bench/README.md states how much).
    #[arg(long)]
    pub int8_activations: bool,
    /// The prompt GEMM on tensor cores: split (default; f16 hi + lo operands, within the
    /// runtime's stated tolerances) or f16 (llama.cpp's precision, about twice as fast).
    #[arg(long)]
    pub prefill_precision: Option<String>,
}

#[derive(Args, Clone, Debug)]
pub struct SamplingArgs {
    /// Tokens to generate at most.
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// 0: greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0.0)]
    pub min_p: f32,
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Text that ends the generation (repeatable).
    #[arg(long)]
    pub stop: Vec<String>,
    /// Keep going past end-of-generation tokens.
    #[arg(long)]
    pub ignore_eos: bool,
}

impl SamplingArgs {
    fn request(&self, prompt: Vec<u32>) -> GenRequest {
        GenRequest {
            prompt,
            sampling: SamplingParams {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repeat_penalty: self.repeat_penalty,
                seed: self.seed,
                ..Default::default()
            },
            max_tokens: self.max_tokens,
            stop: self.stop.clone(),
            ignore_eos: self.ignore_eos,
        }
    }
}

#[derive(Args, Clone, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt text (control tokens such as <|im_start|> are parsed). With --chat, the
    /// user's message.
    #[arg(long)]
    pub prompt: String,
    /// Apply the chat template to the prompt as a user message.
    #[arg(long)]
    pub chat: bool,
    /// With --chat: a system message.
    #[arg(long)]
    pub system: Option<String>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// One JSON object at the end (text, token ids, finish reason, usage, timings) instead of
    /// streamed text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Clone, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A system message.
    #[arg(long)]
    pub system: Option<String>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

/// `info --model`: the file's metadata and tensors, checked against what the runtime reads —
/// no device, no upload.
pub fn info(path: &std::path::Path) -> Result<()> {
    let g = Gguf::open(path)?;
    println!("file: {} ({:.1} MB, GGUF v{})", path.display(), g.file_size() as f64 / 1e6, g.version);
    match nx_vulkan_engine::llm::config::LlmConfig::from_gguf(&g) {
        Ok(c) => {
            println!("model: {} ({})", c.name, c.arch.name());
            println!(
                "layers {}, embedding {}, heads {}/{} kv, head_dim {}, ffn {}, vocab {}, context {}, rope base {} ({} dims, {}), rms eps {:e}",
                c.n_layer,
                c.n_embd,
                c.n_head,
                c.n_head_kv,
                c.head_dim,
                c.n_ff,
                c.n_vocab,
                c.context_length,
                c.rope_base,
                c.rope_dims,
                if c.rope_neox { "neox" } else { "norm" },
                c.rms_eps
            );
            println!("output: {}", if c.tied_output { "tied to token_embd" } else { "output.weight" });
        }
        Err(e) => println!("model: not supported: {e}"),
    }
    match LlmTokenizer::from_gguf(&g) {
        Ok(t) => println!(
            "tokenizer: {} / {} , {} tokens, bos {:?}, eos {:?}, end-of-generation {:?}",
            g.str("tokenizer.ggml.model")?.unwrap_or("?"),
            g.str("tokenizer.ggml.pre")?.unwrap_or("-"),
            t.vocab_size(),
            t.bos(),
            t.eos(),
            t.eog_ids()
        ),
        Err(e) => println!("tokenizer: not supported: {e}"),
    }
    println!("chat template: {}", if g.str("tokenizer.chat_template")?.is_some() { "in the file" } else { "none (use --template chatml|llama3)" });
    let mut by_type: BTreeMap<String, (usize, u64, bool)> = BTreeMap::new();
    for t in &g.tensors {
        let e = by_type.entry(t.type_name()).or_insert((0, 0, t.ggml_type.is_some_and(GgmlType::is_weight_type)));
        e.0 += 1;
        e.1 += t.size;
    }
    println!("tensors: {}", g.tensors.len());
    for (ty, (n, bytes, ok)) in by_type {
        println!("  {ty:>6}: {n:>4} tensors, {:>10.1} MB{}", bytes as f64 / 1e6, if ok { "" } else { "  (not supported)" });
    }
    Ok(())
}

fn progress_bar() -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template("loading {bar:40} {bytes}/{total_bytes} {bytes_per_sec}") {
        bar.set_style(style);
    }
    bar
}

/// Opens the model with a progress bar while the weights go up.
pub fn load(ctx: Arc<Context>, args: &ModelArgs, slots: usize) -> Result<(LlmRuntime, Option<ChatTemplate>)> {
    let kv_f16 = LlmOptions::parse_kv_type(&args.kv_type)?;
    let bar = progress_bar();
    let progress = |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let prefill_precision = args.prefill_precision.as_deref().map(LlmGemmPrecision::parse).transpose()?;
    let opts = LlmOptions { context: args.context, slots, kv_f16, int8_activations: args.int8_activations, prefill_precision };
    let m = LlmRuntime::open(ctx, &args.model, &opts, args.template.as_deref(), RuntimeOptions::default(), &progress)?;
    bar.finish_and_clear();
    Ok((m.runtime, m.template))
}

fn template_or_error(t: &Option<ChatTemplate>) -> Result<&ChatTemplate> {
    t.as_ref().ok_or_else(|| EngineError::InvalidArgument("the model has no chat template: pass --template chatml or --template llama3".into()))
}

/// One finished generation: ids, the text as streamed (stop strings left out), finish
/// reason, prompt and completion tokens, seconds to the first token and after it.
struct Finished {
    ids: Vec<u32>,
    text: String,
    reason: &'static str,
    prompt_tokens: usize,
    completion_tokens: usize,
    prefill_s: f64,
    decode_s: f64,
}

/// Runs one request, writing text to `out` as it comes.
fn run_streaming(rt: &LlmRuntime, req: GenRequest, out: &mut dyn Write) -> Result<Finished> {
    let (tx, rx) = std::sync::mpsc::channel();
    let t0 = Instant::now();
    rt.submit(req, Box::new(move |e| tx.send((e, Instant::now())).is_ok()))?;
    let mut ids = vec![];
    let mut all = String::new();
    let mut first: Option<Instant> = None;
    for (e, at) in rx {
        match e {
            GenEvent::Token { id, text, .. } => {
                first.get_or_insert(at);
                ids.push(id);
                out.write_all(text.as_bytes()).ok();
                out.flush().ok();
                all.push_str(&text);
            }
            GenEvent::Done { reason, prompt_tokens, completion_tokens, .. } => {
                let first = first.unwrap_or(at);
                return Ok(Finished {
                    ids,
                    text: all,
                    reason: reason.name(),
                    prompt_tokens,
                    completion_tokens,
                    prefill_s: (first - t0).as_secs_f64(),
                    decode_s: (at - first).as_secs_f64(),
                });
            }
            GenEvent::Error(m) => return Err(EngineError::Vulkan(m)),
        }
    }
    Err(EngineError::Vulkan("the generation ended without a result".into()))
}

pub fn generate(ctx: Arc<Context>, args: GenerateArgs) -> Result<()> {
    let (rt, template) = load(ctx.clone(), &args.model, 1)?;
    let text = if args.chat {
        let mut msgs = vec![];
        if let Some(s) = &args.system {
            msgs.push(ChatMessage { role: "system".into(), content: s.clone() });
        }
        msgs.push(ChatMessage { role: "user".into(), content: args.prompt.clone() });
        template_or_error(&template)?.render(&msgs, true)?
    } else {
        args.prompt.clone()
    };
    // A rendered chat prompt already holds whatever BOS its template writes.
    let prompt = rt.tokenizer.encode(&text, !args.chat, true)?;
    let mut sink: Box<dyn Write> = if args.json { Box::new(std::io::sink()) } else { Box::new(std::io::stdout()) };
    let Finished { ids, text, reason, prompt_tokens: p, completion_tokens: c, prefill_s, decode_s } = run_streaming(&rt, args.sampling.request(prompt), &mut *sink)?;
    let decode_tps = if c > 1 { (c - 1) as f64 / decode_s } else { 0.0 };
    if args.json {
        let v = serde_json::json!({
            "model": rt.llm.config.name, "device": ctx.caps.name,
            "text": text, "tokens": ids, "finish_reason": reason,
            "usage": {"prompt_tokens": p, "completion_tokens": c},
            "prefill_s": prefill_s, "decode_tok_s": decode_tps,
        });
        println!("{v}");
    } else {
        println!();
        eprintln!("[{p} prompt tokens in {:.1} ms, {c} generated at {decode_tps:.1} tok/s, {reason}; {}]", prefill_s * 1e3, ctx.caps.name);
    }
    Ok(())
}

/// An interactive chat on standard input: one user message per line, the history kept (its
/// KV stays in the session's slot, so only new text is fed). `/reset` starts over; end of
/// input quits.
pub fn chat(ctx: Arc<Context>, args: ChatArgs) -> Result<()> {
    let (rt, template) = load(ctx.clone(), &args.model, 1)?;
    let template = template_or_error(&template)?;
    use std::io::IsTerminal;
    let interactive = std::io::stdin().is_terminal();
    let base: Vec<ChatMessage> = args.system.iter().map(|s| ChatMessage { role: "system".into(), content: s.clone() }).collect();
    let mut history = base.clone();
    if interactive {
        eprintln!("{} on {} ({}). One message per line; /reset clears the history; Ctrl-D quits.", rt.llm.config.name, ctx.caps.name, template.name());
    }
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    loop {
        if interactive {
            eprint!("> ");
        }
        let mut line = String::new();
        if stdin.lock().read_line(&mut line).map_err(|e| EngineError::InvalidArgument(format!("reading standard input: {e}")))? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        if line.trim() == "/reset" {
            history = base.clone();
            continue;
        }
        history.push(ChatMessage { role: "user".into(), content: line.to_string() });
        let prompt = rt.tokenizer.encode(&template.render(&history, true)?, false, true)?;
        let answer = run_streaming(&rt, args.sampling.request(prompt), &mut out)?;
        writeln!(out).ok();
        history.push(ChatMessage { role: "assistant".into(), content: answer.text });
    }
    Ok(())
}

#[derive(Args, Clone, Debug)]
pub struct LlmBenchArgs {
    /// Prompt tokens of the prefill measurement.
    #[arg(long, default_value_t = 512)]
    pub pp: usize,
    /// Decode steps of the generation measurement.
    #[arg(long, default_value_t = 128)]
    pub tg: usize,
    /// Timed runs (median reported) after one warm-up.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Concurrent sessions for the aggregate decode measurement (comma-separated; 0 skips).
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    pub sessions: Vec<usize>,
    /// Peak memory bandwidth in GB/s for the roofline (default: none printed besides the
    /// measured copy rate).
    #[arg(long)]
    pub peak_gbs: Option<f64>,
    /// Opt-in: decode matvecs on int8-quantized activations (quantized weights).
    #[arg(long)]
    pub int8_activations: bool,
    /// The prompt GEMM on tensor cores: split (default) or f16 (llama.cpp's precision).
    #[arg(long)]
    pub prefill_precision: Option<String>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Prompt tokens of each session of `bench --model`'s aggregate decode.
const AGGREGATE_PROMPT: usize = 32;

/// `bench --model`: prefill tok/s (one step of `pp` rows), decode tok/s (`tg` steps of one
/// row, each waiting for its token, as a chat does), aggregate decode with several sessions,
/// and the roofline: weight bytes read per decode step against the device's copy rate.
pub fn bench(ctx: Arc<Context>, model: &ModelArgs, args: &LlmBenchArgs) -> Result<()> {
    if args.pp == 0 || args.tg == 0 || args.runs == 0 {
        return Err(EngineError::InvalidArgument("--pp, --tg and --runs must be at least 1".into()));
    }
    let max_sessions = args.sessions.iter().copied().max().unwrap_or(1).max(1);
    let mut margs = model.clone();
    // room for the prefill + decode pass and for the aggregate's sessions (32-token prompts)
    let needed = args.pp.max(AGGREGATE_PROMPT) + args.tg + 8;
    margs.context = Some(margs.context.unwrap_or(needed).max(needed));
    let t_load = Instant::now();
    let (rt, _) = load(ctx.clone(), &margs, max_sessions)?;
    let load_s = t_load.elapsed().as_secs_f64();
    let llm = &rt.llm;
    let n_vocab = llm.config.n_vocab as u32;
    let prompt: Vec<u32> = (0..args.pp as u32).map(|i| (i * 7919 + 13) % n_vocab).collect();
    let rows = |slot: u32, start: usize, toks: &[u32]| -> Vec<Row> { toks.iter().enumerate().map(|(i, &t)| Row { slot, pos: (start + i) as u32, token: t }).collect() };
    // One prefill of the prompt, then `tg` greedy decode steps: their (prefill, decode) seconds.
    // `between` runs after the prefill has finished, before the decode is timed.
    let pass = |between: &dyn Fn() -> Result<()>| -> Result<(f64, f64)> {
        let t0 = Instant::now();
        let mut tok = llm.forward_greedy(&rows(0, 0, &prompt), &[args.pp - 1])?[0];
        between()?;
        let t1 = Instant::now();
        for i in 0..args.tg {
            tok = llm.forward_greedy(&[Row { slot: 0, pos: (args.pp + i) as u32, token: tok }], &[0])?[0];
        }
        Ok(((t1 - t0).as_secs_f64(), t1.elapsed().as_secs_f64()))
    };
    let mut pp = vec![];
    let mut tg = vec![];
    for run in 0..=args.runs {
        let (prefill, decode) = pass(&|| Ok(()))?;
        if run > 0 {
            pp.push(args.pp as f64 / prefill);
            tg.push(args.tg as f64 / decode);
        }
    }
    // One more decode pass with each submission timed on the device (two timestamps each, no
    // more): how much of a token's wall time the device spends working, and how much it waits
    // for the host (the read-back, sampling, recording and submitting the next step).
    // (Not while every command is being timed, `bench --profile`: that timing would stop.)
    let mut busy = None;
    if !ctx.stream.profiling_commands() && ctx.stream.profile_start_submissions().is_ok() {
        // (the prefill's submissions are dropped: timing restarts before the decode)
        let timed = pass(&|| {
            ctx.stream.profile_stop()?;
            ctx.stream.profile_start_submissions()
        });
        let spans = ctx.stream.profile_stop()?;
        let (_, wall) = timed?;
        let (runs, ns) = spans.iter().fold((0u64, 0f64), |(r, n), p| (r + p.runs, n + p.device_ns));
        busy = Some(serde_json::json!({
            "wall_us_per_token": wall * 1e6 / args.tg as f64,
            "device_busy_us_per_token": ns / 1e3 / args.tg as f64,
            "submissions_per_token": runs as f64 / args.tg as f64,
        }));
    }
    // Host time to record one decode step (not submitted): what the device waits for between
    // tokens besides the read-back.
    let mut record_us = vec![];
    for _ in 0..21 {
        let mut batch = ctx.batch()?;
        let t0 = Instant::now();
        llm.record_forward(&mut batch, &[Row { slot: 0, pos: args.pp as u32, token: 1 }], &[0])?;
        record_us.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let weights = llm.weight_bytes as f64;
    let copy_gbs = copy_gbs(&ctx)?;
    let mut report = serde_json::json!({
        "model": llm.config.name, "file": model.model.display().to_string(), "device": ctx.caps.name,
        "weight_bytes": llm.weight_bytes, "load_s": load_s, "kv_type": model.kv_type, "int8_activations": model.int8_activations,
        "prefill_precision": llm.prefill_precision.name(),
        "pp_tokens": args.pp, "pp_tok_s": median(pp.clone()), "pp_runs": pp,
        "tg_tokens": args.tg, "tg_tok_s": median(tg.clone()), "tg_runs": tg,
        "decode_record_us": median(record_us), "copy_gbs": copy_gbs, "roofline_tok_s_at_copy": copy_gbs * 1e9 / weights,
    });
    if let Some(b) = busy {
        report["tg_timeline"] = b;
    }
    if let Some(peak) = args.peak_gbs {
        report["peak_gbs"] = peak.into();
        report["roofline_tok_s_at_peak"] = (peak * 1e9 / weights).into();
    }
    // `n` sessions of a 32-token prompt and `steps` tokens each, submitted at once: generated
    // tokens per second over all of them.
    let run_sessions = |n: usize, steps: usize| -> Result<f64> {
        let (tx, rx) = std::sync::mpsc::channel();
        let t0 = Instant::now();
        for s in 0..n {
            let p: Vec<u32> = (0..AGGREGATE_PROMPT as u32).map(|i| (i * 31 + s as u32 * 101 + 7) % n_vocab).collect();
            let req = GenRequest { prompt: p, sampling: SamplingParams::default(), max_tokens: steps, stop: vec![], ignore_eos: true };
            let tx = tx.clone();
            rt.submit(req, Box::new(move |e| tx.send(e).is_ok()))?;
        }
        drop(tx);
        let mut generated = 0usize;
        let mut done = 0;
        for e in rx {
            match e {
                GenEvent::Token { .. } => generated += 1,
                GenEvent::Done { .. } => {
                    done += 1;
                    if done == n {
                        break;
                    }
                }
                GenEvent::Error(m) => return Err(EngineError::Vulkan(m)),
            }
        }
        Ok(generated as f64 / t0.elapsed().as_secs_f64())
    };
    let mut aggregate = serde_json::Map::new();
    for &n in args.sessions.iter().filter(|&&n| n > 0) {
        // A short untimed round first: steps of several rows compile their kernels the first
        // time each row count occurs, which a cold timed round would include (stop 30, run 5:
        // 8 SmolLM2-shaped sessions 105 tok/s cold, 1,841 warm).
        run_sessions(n, args.tg.min(8))?;
        aggregate.insert(n.to_string(), run_sessions(n, args.tg)?.into());
    }
    report["aggregate_tok_s"] = aggregate.into();
    println!("{report}");
    Ok(())
}

/// The device's streaming rate: a 64 Mi-element f32 add (two reads and a write per element,
/// the engine's fastest kernel), GB/s moved — what a bandwidth-bound decode step could reach.
fn copy_gbs(ctx: &Context) -> Result<f64> {
    let n = 64usize << 20;
    let a = ctx.iota(nx_vulkan_engine::DType::F32, &[n], None)?;
    let secs = crate::ops_bench::timed(ctx, 10, || ctx.binary(nx_vulkan_engine::BinaryOp::Add, &a, &a, nx_vulkan_engine::DType::F32))?;
    Ok((n * 12) as f64 / secs / 1e9)
}
