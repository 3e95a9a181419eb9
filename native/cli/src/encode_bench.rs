//! `nx-vulkan encode-bench`: warmed inputs/s of the encoder per (batch, seq), the shapes of
//! bench/encoder/torch_encoder.py, with the same texts (single-token words, so each input is
//! exactly `seq` tokens with [CLS]/[SEP]; distinct texts per row). One JSON line per
//! measurement: `scope` "e2e" is `Encoder::embed` (tokenize, upload, forward, read back),
//! "forward" is `Encoder::embed_tokens` on already tokenized inputs.

use clap::Args;
use nx_vulkan_engine::encoder::{Encoder, EncoderOptions, Precision};
use nx_vulkan_engine::{exec, Context, DeviceSelector};
use std::path::PathBuf;
use std::time::Instant;

/// Seconds of warm-up before each timed shape (besides `--warmup` runs).
const WARMUP_S: f64 = 0.5;

#[derive(Args)]
pub struct EncodeBenchArgs {
    /// Checkpoint folder.
    #[arg(long)]
    model: PathBuf,
    /// Precisions (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "fp32")]
    precisions: Vec<String>,
    /// Shapes as BATCHxSEQ (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1x32,2x32,4x32,8x32,64x128")]
    shapes: Vec<String>,
    #[arg(long, default_value_t = 30)]
    reps: usize,
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Also time every kernel on the device (timestamps) and print the totals per kernel.
    #[arg(long)]
    profile: bool,
}

// bench/encoder/torch_encoder.py's WORDS: single WordPiece tokens in the uncased BERT vocabulary.
const WORDS: &str = "the of and to in is was for on as with by he at from his an were are which this be \
     or has had not first one their its new after who they have her she two been other when \
     there all also into during time more school only city would may year world some most \
     then where later used people made over team war state known game part two film him \
     years many such these back best well three them out life album city music day band \
     house small west north south east club long high work name make town left way down \
     party four found great last while under home could both good water early old public \
     side line own five big play area main like place did set took";

/// `n` distinct texts of exactly `seq` tokens (torch_encoder.py's `texts_of_len`).
fn texts_of_len(n: usize, seq: usize, salt: usize) -> Vec<String> {
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    (0..n)
        .map(|r| (0..seq - 2).map(|k| words[(r * 7 + salt * 13 + k * (r % 5 + 1)) % words.len()]).collect::<Vec<_>>().join(" "))
        .collect()
}

fn median_s(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

pub fn run(device: Option<String>, args: EncodeBenchArgs) -> nx_vulkan_engine::Result<()> {
    let selector = device.as_deref().map(DeviceSelector::parse).unwrap_or_else(DeviceSelector::from_env);
    exec::run(move || {
        let ctx = Context::open(&selector)?;
        if args.profile {
            ctx.stream.profile_start()?;
        }
        let model = args.model.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for p in &args.precisions {
            let precision = Precision::parse(p)?;
            let t0 = Instant::now();
            let enc = Encoder::load(ctx.clone(), &args.model, &EncoderOptions { precision, max_tokens: None })?;
            let load_ms = t0.elapsed().as_secs_f64() * 1e3;
            let device = &enc.info().device;
            println!("{}", serde_json::json!({"peer": "nx_vulkan", "bench": "load", "model": model, "device": device, "precision": p, "load_ms": load_ms}));
            for shape in &args.shapes {
                let (batch, seq) = shape
                    .split_once('x')
                    .and_then(|(b, s)| Some((b.parse::<usize>().ok()?, s.parse::<usize>().ok()?)))
                    .filter(|&(b, s)| b > 0 && s > 2)
                    .ok_or_else(|| nx_vulkan_engine::EngineError::InvalidArgument(format!("shape {shape:?}: expected BATCHxSEQ")))?;
                let texts = texts_of_len(batch, seq, batch);
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                let tokens: Vec<_> = refs.iter().map(|t| enc.tokenize(t)).collect::<nx_vulkan_engine::Result<_>>()?;
                if tokens.iter().any(|t| t.ids.len() != seq) {
                    return Err(nx_vulkan_engine::EngineError::InvalidArgument(format!("texts do not tokenize to {seq} tokens")));
                }
                for (scope, run) in [
                    ("forward", &(|| enc.embed_tokens(&tokens).map(drop)) as &dyn Fn() -> nx_vulkan_engine::Result<()>),
                    ("e2e", &|| enc.embed(&refs).map(drop)),
                ] {
                    // At least `warmup` runs and WARMUP_S seconds of them: the H200 timed short
                    // bursts at idle clocks (bench/encoder/torch_encoder.py warms up the same way).
                    let w0 = Instant::now();
                    let mut n = 0;
                    while n < args.warmup || w0.elapsed().as_secs_f64() < WARMUP_S {
                        run()?;
                        n += 1;
                    }
                    let mut times = Vec::with_capacity(args.reps);
                    for _ in 0..args.reps {
                        let t = Instant::now();
                        run()?;
                        times.push(t.elapsed().as_secs_f64());
                    }
                    let med = median_s(times);
                    println!(
                        "{}",
                        serde_json::json!({"peer": "nx_vulkan", "bench": "encode", "scope": scope, "model": model, "device": device,
                            "precision": p, "batch": batch, "seq": seq, "inputs_per_s": batch as f64 / med,
                            "tokens_per_s": (batch * seq) as f64 / med, "median_ms": med * 1e3, "reps": args.reps, "warmup": args.warmup})
                    );
                }
            }
        }
        if args.profile {
            for k in ctx.stream.profile_stop()? {
                println!("{}", serde_json::json!({"profile": k.name, "runs": k.runs, "device_us": k.device_ns / 1e3, "mean_us": k.device_ns / 1e3 / k.runs as f64}));
            }
        }
        Ok(())
    })
}
