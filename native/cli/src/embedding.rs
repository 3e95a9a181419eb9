//! `nx-vulkan encode` and `nx-vulkan serve`: an encoder checkpoint on the device, fed from
//! JSON lines or over HTTP. The work itself lives in `nx_vulkan_server` (the encode loop, the
//! queue, the API), where it is tested without a GPU; here are the flags, the device and the
//! terminal.

use clap::Args;
use nx_vulkan_engine::encoder::{EncoderOptions, Precision};
use nx_vulkan_engine::{exec, Context, DeviceSelector};
use nx_vulkan_server::{encode_lines, EngineEmbedder, QueueConfig, ServerConfig};
use std::error::Error;
use std::io::{BufRead, BufReader, BufWriter, IsTerminal};
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Which model, how, on which device.
#[derive(Args)]
pub struct ModelArgs {
    /// Checkpoint folder (config.json, model.safetensors, tokenizer.json). For `serve`, a
    /// GGUF file here serves text generation instead (same as --llm).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Projection precision: fp32, compensated, fp16 or bf16. One the device cannot run is an
    /// error, never replaced by another.
    #[arg(long, default_value = "fp32")]
    precision: String,
    /// Most tokens per input (default: the checkpoint's limit); longer inputs are cut and
    /// reported as truncated.
    #[arg(long)]
    max_tokens: Option<usize>,
    /// Most inputs per batch (one device submission each).
    #[arg(long, default_value_t = 32)]
    batch: usize,
}

#[derive(Args)]
pub struct EncodeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// JSON lines to embed: a file, or - for standard input. Each line is a JSON string or
    /// {"text": ..., "id"?: ...}; embeddings come out on standard output in input order.
    #[arg(long, default_value = "-")]
    input: String,
}

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Longest an input waits for its batch to fill, in milliseconds.
    #[arg(long, default_value_t = 2)]
    max_wait_ms: u64,
    /// Most inputs waiting; a request that does not fit gets 503 with Retry-After.
    #[arg(long, default_value_t = 1024)]
    queue: usize,
    /// Require `Authorization: Bearer KEY` on /v1/* (or set NX_VULKAN_API_KEY).
    #[arg(long, env = "NX_VULKAN_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Largest request body accepted (413 above).
    #[arg(long, default_value_t = 2 << 20)]
    max_body_bytes: usize,
    /// A GGUF language model: /v1/completions and /v1/chat/completions beside the embeddings.
    #[arg(long)]
    llm: Option<PathBuf>,
    /// Generation sessions decoded together (KV-cache slots).
    #[arg(long, default_value_t = 8)]
    slots: usize,
    /// Positions per session (default: the model's context, at most 4096).
    #[arg(long)]
    context: Option<usize>,
    /// KV cache type: f16 or f32.
    #[arg(long, default_value = "f16")]
    kv_type: String,
    /// Chat template: the file's (default), or chatml / llama3.
    #[arg(long)]
    template: Option<String>,
    /// Generation requests waiting for a session at most (503 beyond).
    #[arg(long, default_value_t = 64)]
    gen_queue: usize,
    /// Opt-in for a GGUF model: decode matvecs on int8-quantized activations (quantized
    /// weights; faster, less accurate — bench/README.md states how much), as
    /// `generate --int8-activations`.
    #[arg(long)]
    int8_activations: bool,
    /// The prompt GEMM on tensor cores: split (default) or f16 (llama.cpp's precision).
    #[arg(long)]
    prefill_precision: Option<String>,
}

/// Opens the device (on an engine thread: it may compile) and loads the checkpoint.
fn open(device: Option<String>) -> Result<std::sync::Arc<Context>> {
    let selector = device.as_deref().map(DeviceSelector::parse).unwrap_or_else(DeviceSelector::from_env);
    Ok(exec::run(move || Context::open(&selector))?)
}

fn load(ctx: std::sync::Arc<Context>, args: &ModelArgs, model: PathBuf) -> Result<EngineEmbedder> {
    let precision = Precision::parse(&args.precision)?;
    let options = EncoderOptions { precision, max_tokens: args.max_tokens };
    Ok(EngineEmbedder::load(ctx, model, options)?)
}

pub fn encode(device: Option<String>, args: EncodeArgs) -> Result<()> {
    // Open the input first: a missing file is reported before the model loads.
    let (input, size): (Box<dyn BufRead>, Option<u64>) = if args.input == "-" {
        (Box::new(BufReader::new(std::io::stdin())), None)
    } else {
        let file = std::fs::File::open(&args.input).map_err(|e| format!("{}: {e}", args.input))?;
        let size = file.metadata().ok().map(|m| m.len());
        (Box::new(BufReader::new(file)), size)
    };
    let model = args.model.model.clone().ok_or("--model (the checkpoint folder) is required")?;
    let mut embedder = load(open(device)?, &args.model, model)?;
    let bar = match size {
        Some(len) if std::io::stderr().is_terminal() => {
            let bar = indicatif::ProgressBar::new(len);
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
                    .expect("a valid template"),
            );
            Some(bar)
        }
        _ => None,
    };
    let output = BufWriter::new(std::io::stdout().lock());
    let summary = encode_lines(&mut embedder, input, output, args.model.batch, &mut |read| {
        if let Some(bar) = &bar {
            bar.set_position(read);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    eprintln!(
        "nx-vulkan: encoded {} inputs ({} truncated, {} bad lines)",
        summary.inputs, summary.truncated, summary.bad_lines
    );
    Ok(())
}

pub fn serve(device: Option<String>, args: ServeArgs) -> Result<()> {
    let addr = (args.host.as_str(), args.port)
        .to_socket_addrs()
        .map_err(|e| format!("{}:{}: {e}", args.host, args.port))?
        .next()
        .ok_or_else(|| format!("{}:{}: no address", args.host, args.port))?;
    let is_gguf = |p: &PathBuf| p.is_file() && p.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    let (encoder_dir, gguf) = match (args.model.model.clone(), args.llm.clone()) {
        (Some(m), None) if is_gguf(&m) => (None, Some(m)),
        (m, l) => (m, l),
    };
    if encoder_dir.is_none() && gguf.is_none() {
        return Err("nothing to serve: give --model (an encoder checkpoint folder or a GGUF file) and/or --llm".into());
    }
    let ctx = open(device)?;
    let embedder = match &encoder_dir {
        Some(dir) => Some(load(ctx.clone(), &args.model, dir.clone())?),
        None => None,
    };
    let generator = match &gguf {
        Some(path) => {
            let margs = crate::llm::ModelArgs { model: path.clone(), context: args.context, kv_type: args.kv_type.clone(), template: args.template.clone(), int8_activations: args.int8_activations, prefill_precision: args.prefill_precision.clone() };
            let (runtime, template) = {
                let ctx = ctx.clone();
                exec::run(move || crate::llm::load(ctx, &margs, args.slots))?
            };
            let g = nx_vulkan_engine::llm::gguf::Gguf::open(path)?;
            let quant = g.tensor("blk.0.ffn_down.weight").map(|t| t.type_name()).unwrap_or_default();
            let id = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| runtime.llm.config.name.clone());
            let device_name = ctx.caps.name.clone();
            let generator: std::sync::Arc<dyn nx_vulkan_server::Generator> =
                std::sync::Arc::new(nx_vulkan_server::EngineGenerator::new(std::sync::Arc::new(runtime), template, id, device_name, quant));
            Some(generator)
        }
        None => None,
    };
    let info = embedder.as_ref().map(nx_vulkan_server::Embedder::info);
    let gen_info = generator.as_ref().map(|g| g.info());
    let config = ServerConfig {
        queue: QueueConfig { batch: args.model.batch, max_wait: Duration::from_millis(args.max_wait_ms), capacity: args.queue },
        api_key: args.api_key,
        max_body_bytes: args.max_body_bytes,
    };
    let generation = nx_vulkan_server::GenConfig { max_sessions: args.slots, queue: args.gen_queue };
    let embedder = embedder.map(|e| Box::new(e) as Box<dyn nx_vulkan_server::Embedder>);
    nx_vulkan_server::serve_until_signal_with(addr, embedder, generator, config, generation, |bound| {
        if let Some(info) = &info {
            eprintln!("nx-vulkan: serving {} ({} dims, {}) on {} at http://{bound}/v1/embeddings", info.model, info.dimensions, info.precision, info.device);
        }
        if let Some(g) = &gen_info {
            eprintln!("nx-vulkan: serving {} ({}, context {}) on {} at http://{bound}/v1/chat/completions", g.id, g.quantization, g.context_length, g.device);
        }
    })?;
    eprintln!("nx-vulkan: stopped");
    Ok(())
}
