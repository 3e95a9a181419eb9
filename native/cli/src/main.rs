//! `nx-vulkan`: the engine from the command line (no BEAM).
//!
//! `info` lists devices and capabilities; `demo` runs a few ops and checks them; `bench` is the
//! GPU bench harness (elementwise bandwidth, SGEMM, per-op latency), printing one JSON object
//! per measurement so `bench/` scripts can set it beside a peer measured in the same run.
//! `encode` embeds JSON lines with an encoder checkpoint; `serve` serves it over HTTP
//! (OpenAI's `/v1/embeddings`).

use clap::{Parser, Subcommand};
use nx_vulkan_engine::matmul::DotPrecision;
use nx_vulkan_engine::{exec, BinaryOp, Context, DType, DeviceSelector, FloatMath, Result, UnaryOp};

mod embedding;
mod encode_bench;
mod llm;
mod llm_gemm_bench;
mod ops_bench;
mod probe;

#[derive(Parser)]
#[command(name = "nx-vulkan", version, about = "GPU compute on Vulkan: device info, demo, benchmarks, text embeddings")]
struct Cli {
    /// Device to use: an index or part of a name (default: NX_VULKAN_DEVICE, else the first GPU).
    #[arg(long, global = true)]
    device: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List Vulkan devices and what they can do; with --model, a GGUF file's metadata and
    /// tensors and whether this runtime reads them (no device needed, nothing uploaded).
    Info {
        #[arg(long)]
        model: Option<std::path::PathBuf>,
    },
    /// Generate text from a GGUF model (streamed to standard output).
    Generate(llm::GenerateArgs),
    /// Chat with a GGUF model on standard input (one message per line, the chat template
    /// applied, the history kept).
    Chat(llm::ChatArgs),
    /// Run a few ops on the device and check them against the CPU.
    Demo,
    /// Hash the outputs of every float op on a fixed input set (compare devices bit for bit).
    Digest,
    /// GEMM throughput per type: f16/bf16 through DotPrecision::TensorCore (cooperative
    /// matrices where the device has them), f32 as SGEMM (f32 accumulation). JSON lines; the
    /// PyTorch side is bench/torch_gemm.py.
    Gemm {
        /// Types: f16, bf16, f32, split-f32 (f32 through DotPrecision::SplitF32: two f16
        /// parts per operand on the tensor cores), s8 (int8 × int8 → int32 through
        /// DotPrecision::TensorCore; its "tflops" are tera-ops), f64 (the tiled f64 GEMM:
        /// rounded products), exact (Nx.dot's default on f32: f32 operands summed on the f64
        /// GEMM with fused exact products, then rounded to f32) (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "f16,bf16,f32,split-f32")]
        types: Vec<String>,
        /// Problems as batch:m:n:k (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "1:4096:4096:4096,1:2048:2048:2048,1:1024:1024:1024,32:512:512:512")]
        sizes: Vec<String>,
        /// Timed runs (median reported); each run is `calls` back-to-back dots and one wait.
        #[arg(long, default_value_t = 7)]
        reps: usize,
        #[arg(long, default_value_t = 10)]
        calls: usize,
        /// Also time the cooperative-matrix variants the device can run: the subgroup-scope
        /// kernel's workgroup tiles (128×128/256×128/128×256), K steps (32/64) and
        /// multiply-only probe, and the coopmat2 kernel's tiles (f32 output).
        #[arg(long)]
        coopmat_all: bool,
        /// B stored as [batch, n, k] (k contiguous: PyTorch's Linear weight) instead of
        /// [batch, k, n].
        #[arg(long)]
        b_transposed: bool,
        /// f64 and exact: also time every f64 tile the device can run (square 64/128 with K
        /// steps of 8 and 16, 128×64, 64×128), forced; exact's forced tiles write the f64 sums
        /// (the rounding pass left out).
        #[arg(long)]
        tiles_all: bool,
    },
    /// The LLM prefill GEMM (tensor cores) against the decode matvec on one quantized matrix
    /// × T token rows, with random blocks (JSON lines; default: 8B FFN shapes, Q4_K, T = 512).
    LlmGemmBench(llm_gemm_bench::LlmGemmBenchArgs),
    /// Measure elementwise bandwidth, SGEMM and per-op latency.
    Bench {
        /// Small sizes (for lavapipe / smoke runs).
        #[arg(long)]
        quick: bool,
        /// Elements in the bandwidth test (default 256M, quick 4M).
        #[arg(long)]
        elements: Option<usize>,
        /// SGEMM sizes (square), comma-separated (default 1024,4096; quick 256).
        #[arg(long, value_delimiter = ',')]
        gemm: Option<Vec<usize>>,
        /// Timed repetitions per measurement (median reported).
        #[arg(long, default_value_t = 20)]
        reps: usize,
        /// The op-family table instead: tiny-op latency, unary/binary/reduce/arg-reduce/scan/
        /// sort/gather/softmax/transfers per size, dot, conv2d, fft (JSON lines; the PyTorch
        /// side is bench/torch_ops.py).
        #[arg(long)]
        ops: bool,
        /// Also time every kernel on the device (timestamps) and print the totals per kernel.
        #[arg(long)]
        profile: bool,
        /// Element counts for --ops (default 1024,1048576,16777216).
        #[arg(long, value_delimiter = ',')]
        sizes: Option<Vec<usize>>,
        /// Only these rows of --ops (bench names as printed, comma-separated: `cumsum,sum`);
        /// every other row, and the setup only it needs, is skipped.
        #[arg(long, value_delimiter = ',')]
        only: Option<Vec<String>>,
        /// A GGUF model instead: prefill (pp) and decode (tg) tok/s, aggregate decode with
        /// several sessions, and the bandwidth roofline (one JSON object).
        #[arg(long)]
        model: Option<std::path::PathBuf>,
        #[arg(long, default_value = "f16")]
        kv_type: String,
        #[command(flatten)]
        llm: llm::LlmBenchArgs,
    },
    /// Embed JSON lines with an encoder checkpoint: one JSON line out per line in, in order.
    Encode(embedding::EncodeArgs),
    /// Serve an encoder checkpoint over HTTP: POST /v1/embeddings (OpenAI's shape), GET
    /// /health, GET /metrics. Stops gracefully on SIGINT/SIGTERM.
    Serve(embedding::ServeArgs),
    /// Encoder throughput: warmed inputs/s per batch×seq (JSON lines; the PyTorch side is
    /// bench/encoder/torch_encoder.py).
    EncodeBench(encode_bench::EncodeBenchArgs),
    /// How many workgroups of each size and shared-memory footprint the device keeps resident
    /// per multiprocessor (a latency-bound probe kernel; JSON lines).
    ProbeShared {
        /// Invocations per workgroup (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "64,128,256")]
        workgroups: Vec<u32>,
        /// Shared memory per workgroup in KiB (comma-separated; past the device's limit skipped).
        #[arg(long, value_delimiter = ',', default_value = "0,1,2,4,6,8,10,12,14,16,20,24,28,32,40,48")]
        shared_kib: Vec<u32>,
        /// Multiprocessors to fill (the full grid holds 2,048 invocations per multiprocessor).
        #[arg(long, default_value_t = 132)]
        sms: u32,
        /// Dependent loads per invocation.
        #[arg(long, default_value_t = 4000)]
        iters: u32,
        /// Timed dispatches per grid (mean reported).
        #[arg(long, default_value_t = 5)]
        reps: usize,
    },
    /// Read bandwidth of one streaming dispatch per size, workgroup size, grid and loads in
    /// flight per invocation (JSON lines).
    ProbeStream {
        /// MiB read per dispatch (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "8,32,64,256")]
        mib: Vec<u32>,
        #[arg(long, value_delimiter = ',', default_value = "128,256")]
        workgroups: Vec<u32>,
        /// Workgroups per multiprocessor in the grid (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "4,8,16")]
        groups_per_sm: Vec<u32>,
        /// 16-byte loads in flight per invocation (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
        unroll: Vec<u32>,
        #[arg(long, default_value_t = 132)]
        sms: u32,
        #[arg(long, default_value_t = 10)]
        reps: usize,
    },
}

fn main() {
    // Quietly stop when the reader goes away (`nx-vulkan bench | head -1`), as Unix tools do,
    // instead of panicking on a broken pipe.
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string();
        if msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        eprintln!("{msg}");
    }));
    let Cli { device, command } = Cli::parse();
    // encode and serve keep the model on a thread of their own and the caller free.
    let result: std::result::Result<(), Box<dyn std::error::Error>> = match command {
        Command::Encode(args) => embedding::encode(device, args),
        Command::Serve(args) => embedding::serve(device, args),
        Command::EncodeBench(args) => encode_bench::run(device, args).map_err(Into::into),
        command => exec::run(move || run(device, command)).map_err(Into::into),
    };
    if let Err(e) = result {
        eprintln!("nx-vulkan: {e}");
        std::process::exit(1);
    }
}

fn open(device: &Option<String>) -> Result<std::sync::Arc<Context>> {
    let selector = device.as_deref().map(DeviceSelector::parse).unwrap_or_else(DeviceSelector::from_env);
    Context::open(&selector)
}

fn run(device: Option<String>, command: Command) -> Result<()> {
    match command {
        Command::Info { model: Some(path) } => llm::info(&path),
        Command::Info { model: None } => {
            if let Some(d) = &device {
                std::env::set_var("NX_VULKAN_DEVICE", d);
            }
            print!("{}", nx_vulkan_engine::device::info_report()?);
            Ok(())
        }
        Command::Digest => digest(&*open(&device)?),
        Command::Demo => demo(&*open(&device)?),
        Command::Gemm { types, sizes, reps, calls, coopmat_all, b_transposed, tiles_all } => {
            gemm(&*open(&device)?, &types, &sizes, reps, calls, GemmVariants { coopmat_all, tiles_all }, b_transposed)
        }
        Command::ProbeShared { workgroups, shared_kib, sms, iters, reps } => probe::probe_shared(&*open(&device)?, &workgroups, &shared_kib, sms, iters, reps),
        Command::ProbeStream { mib, workgroups, groups_per_sm, unroll, sms, reps } => probe::probe_stream(&*open(&device)?, &mib, &workgroups, &groups_per_sm, &unroll, sms, reps),
        Command::LlmGemmBench(args) => llm_gemm_bench::run(&*open(&device)?, &args),
        Command::Generate(args) => llm::generate(open(&device)?, args),
        Command::Chat(args) => llm::chat(open(&device)?, args),
        Command::Bench { quick, elements, gemm, reps, ops, sizes, only, profile, model, kv_type, llm: llm_args } => {
            let ctx = open(&device)?;
            if profile {
                ctx.stream.profile_start()?;
            }
            if let Some(path) = model {
                let margs = llm::ModelArgs { model: path, context: None, kv_type, template: None, int8_activations: llm_args.int8_activations, prefill_precision: llm_args.prefill_precision.clone() };
                llm::bench(ctx.clone(), &margs, &llm_args)?;
            } else if ops {
                let sizes = sizes.unwrap_or(if quick { vec![1 << 10, 1 << 16] } else { vec![1 << 10, 1 << 20, 1 << 24] });
                let dots = gemm.unwrap_or(if quick { vec![128] } else { vec![1024, 4096] });
                ops_bench::run(&ctx, &sizes, &dots, reps, only.as_deref())?;
            } else {
                let elements = elements.unwrap_or(if quick { 4 << 20 } else { 256 << 20 });
                let gemm = gemm.unwrap_or(if quick { vec![256] } else { vec![1024, 4096] });
                bench(&ctx, elements, &gemm, reps)?;
            }
            if profile {
                // Device time per kernel over the whole run (warm-ups included), longest first.
                for k in ctx.stream.profile_stop()? {
                    println!(
                        "{{\"profile\":{:?},\"runs\":{},\"device_us\":{:.1},\"mean_us\":{:.2},\"bytes\":{}}}",
                        k.name,
                        k.runs,
                        k.device_ns / 1e3,
                        k.device_ns / 1e3 / k.runs as f64,
                        k.bytes
                    );
                }
            }
            Ok(())
        }
        Command::Encode(_) | Command::Serve(_) | Command::EncodeBench(_) => unreachable!("run on the main thread"),
    }
}

/// Throughput of one kernel family per type and size: each timed run queues `calls` dots
/// back to back and waits once (the device's sustained rate, as a peer's loop of launches and
/// one synchronize measures it); the median of `reps` runs after a warm-up.
/// Which forced kernels `gemm` times beside each type's own choice.
#[derive(Clone, Copy)]
struct GemmVariants {
    coopmat_all: bool,
    tiles_all: bool,
}

fn gemm(ctx: &Context, types: &[String], sizes: &[String], reps: usize, calls: usize, more: GemmVariants, b_transposed: bool) -> Result<()> {
    use nx_vulkan_engine::matmul::{choose_kernel, coopmat2_kernel, coopmat_runs_here, split_f32_kernel, tensor_core_kernel, CoopStaging, MatmulKernel};
    let bad = |what: String| nx_vulkan_engine::EngineError::InvalidArgument(what);
    let dev = &ctx.caps.name;
    let coopmat_all = more.coopmat_all;
    for ty in types {
        let split = ty == "split-f32";
        let exact = ty == "exact";
        let t = if split || exact { DType::F32 } else { DType::parse(ty).map_err(|_| bad(format!("unknown type {ty}")))? };
        for spec in sizes {
            let d: Vec<usize> = spec.split(':').map(|x| x.parse::<usize>()).collect::<std::result::Result<_, _>>().map_err(|_| bad(format!("size {spec}: want b:m:n:k")))?;
            let [bsz, m, n, k] = d[..] else { return Err(bad(format!("size {spec}: want b:m:n:k"))) };
            // Inputs: iota along one axis, stored as t (the values do not change the speed).
            let a = ctx.convert(&ctx.iota(DType::F32, &[bsz, m, k], Some(2))?, t)?;
            let (b, cb) = if b_transposed {
                (ctx.convert(&ctx.iota(DType::F32, &[bsz, n, k], Some(2))?, t)?, 2)
            } else {
                (ctx.convert(&ctx.iota(DType::F32, &[bsz, k, n], Some(1))?, t)?, 1)
            };
            // (label, forced kernel): None runs the precision's own choice
            let mut variants: Vec<(String, Option<MatmulKernel>)> = vec![];
            if split {
                variants.push((format!("SplitF32 over {:?}", split_f32_kernel(&ctx.caps)), None));
            } else if exact || t == DType::F64 {
                let chosen = choose_kernel(&ctx.caps, DType::F64, bsz, m, n, k);
                variants.push((if exact { format!("Exact over {chosen:?}") } else { format!("{chosen:?}") }, None));
                if more.tiles_all {
                    for (bm, bn, bk) in [(64, 64, 8), (64, 64, 16), (128, 128, 8), (128, 128, 16), (128, 64, 8), (64, 128, 8)] {
                        let forced = MatmulKernel::Tiled { dtype: DType::F64, bm, bn, bk };
                        let shared = 2 * bk as usize * ((bm / 4 + 1) + (bn / 4 + 1)) as usize * 32;
                        if shared <= ctx.caps.max_shared_memory as usize {
                            variants.push((format!("{forced:?}"), Some(forced)));
                        }
                    }
                }
            } else if t == DType::F32 {
                variants.push((format!("{:?}", choose_kernel(&ctx.caps, t, bsz, m, n, k)), None));
            } else {
                let chosen = tensor_core_kernel(&ctx.caps, t);
                // (int8 without cooperative matrices runs the exact integer kernel)
                let label = if t == DType::S8 && !matches!(chosen, MatmulKernel::CoopMat { .. }) { "Simple".to_string() } else { format!("{chosen:?}") };
                variants.push((label, None));
                // With --coopmat-all: the KHR kernel's workgroup tiles, K steps and its
                // multiply-only probe, and the coopmat2 kernel's tiles.
                let khr_shape = ctx.caps.coopmat_shape(match t {
                    DType::BF16 => nx_vulkan_engine::device::CoopMatType::BF16,
                    DType::S8 => nx_vulkan_engine::device::CoopMatType::I8,
                    _ => nx_vulkan_engine::device::CoopMatType::F16,
                });
                // (int8: raw-word staging, K steps of 64 and 128)
                let (steps, staged) = if t == DType::S8 { ([64, 128], CoopStaging::SharedWords) } else { ([32, 64], CoopStaging::SharedTyped) };
                if let (true, Some(shape)) = (coopmat_all, khr_shape) {
                    for (bm, bn) in [(128, 128), (256, 128), (128, 256)] {
                        for bk in steps {
                            for staging in [staged, CoopStaging::SharedDouble, CoopStaging::ProbeMultiplyOnly] {
                                let forced = MatmulKernel::CoopMat { input: t, m: shape.m, n: shape.n, k: shape.k, bm, bn, bk, staging };
                                if forced != chosen && coopmat_runs_here(&ctx.caps, forced) {
                                    variants.push((format!("{forced:?}"), Some(forced)));
                                }
                            }
                        }
                    }
                }
                if coopmat_all && t != DType::S8 {
                    for (bm, bn, bk) in [(128, 128, 32), (128, 128, 64), (128, 256, 32), (128, 256, 64), (256, 128, 32), (256, 128, 64), (64, 128, 64)] {
                        if let Some(forced) = coopmat2_kernel(&ctx.caps, t, bm, bn, bk) {
                            if forced != chosen {
                                variants.push((format!("{forced:?}"), Some(forced)));
                            }
                        }
                    }
                }
            }
            for (kernel, forced) in variants {
                let precision = match t {
                    DType::F32 if split => DotPrecision::SplitF32,
                    DType::F32 if exact => DotPrecision::Exact,
                    DType::F64 => DotPrecision::Exact,
                    DType::F32 => DotPrecision::F32Accumulate,
                    _ => DotPrecision::TensorCore,
                };
                // (int8 products are int32; exact's forced f64 tiles write their f64 sums)
                let out_t = match (t, forced) {
                    (DType::S8, _) => DType::S32,
                    (_, Some(MatmulKernel::Tiled { dtype: DType::F64, .. })) => DType::F64,
                    _ => t,
                };
                let run = || -> Result<()> {
                    for _ in 0..calls {
                        match forced {
                            None => ctx.dot_with(precision, &a, &[2], &[0], &b, &[cb], &[0], out_t)?,
                            // coopmat2 writes f32 (DotPrecision::TensorCore adds the rounding pass)
                            Some(kf @ MatmulKernel::CoopMat2 { .. }) => ctx.dot_using(Some(kf), &a, &[2], &[0], &b, &[cb], &[0], DType::F32)?,
                            Some(kf) => ctx.dot_using(Some(kf), &a, &[2], &[0], &b, &[cb], &[0], out_t)?,
                        };
                    }
                    ctx.synchronize()
                };
                // Warm-up: at least 0.3 s of runs, so the GPU's clocks have left their idle state
                // (short bursts on the H200 ran at idle clocks and gave 5× spreads).
                let w0 = std::time::Instant::now();
                while w0.elapsed().as_secs_f64() < 0.3 {
                    run()?;
                }
                let mut times = vec![];
                for _ in 0..reps {
                    let t0 = std::time::Instant::now();
                    run()?;
                    times.push(t0.elapsed().as_secs_f64() / calls as f64);
                }
                times.sort_by(|x, y| x.total_cmp(y));
                let med = times[times.len() / 2];
                let tflops = 2.0 * (bsz * m * n * k) as f64 / med / 1e12;
                println!(
                    "{{\"bench\":\"gemm\",\"type\":\"{ty}\",\"batch\":{bsz},\"m\":{m},\"n\":{n},\"k\":{k},\"median_ms\":{:.4},\"tflops\":{tflops:.2},\"kernel\":{kernel:?},\"forced\":{},\"b_transposed\":{b_transposed},\"device\":{dev:?},\"reps\":{reps},\"calls\":{calls}}}",
                    med * 1e3,
                    forced.is_some()
                );
            }
        }
    }
    Ok(())
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_from(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn demo(ctx: &Context) -> Result<()> {
    println!("device: {} ({} {})", ctx.caps.name, ctx.caps.driver_name, ctx.caps.driver_info);
    let n = 1000;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.01 - 5.0).collect();
    let ta = ctx.upload(DType::F32, &[n], &f32_bytes(&a))?;
    let sum = ctx.binary(BinaryOp::Add, &ta, &ta, DType::F32)?;
    let got = f32_from(&ctx.download(&sum)?);
    let ok = got.iter().zip(&a).all(|(g, x)| g.to_bits() == (x + x).to_bits());
    println!("add      {n} f32: {}", if ok { "matches the CPU bit for bit" } else { "MISMATCH" });
    let e = ctx.unary(UnaryOp::Exp, &ta, DType::F32)?;
    let got = f32_from(&ctx.download(&e)?);
    let worst = got.iter().zip(&a).map(|(g, x)| ((*g as f64) - (*x as f64).exp()).abs() / (*x as f64).exp()).fold(0.0, f64::max);
    println!("exp      {n} f32: max relative error vs f64 exp {worst:.2e}");
    let t = ta.reshape(&[10, 100])?.transpose(&[1, 0])?;
    let tt = ctx.contiguous(&t)?;
    println!("transpose 10x100 -> {:?}: {} bytes", tt.shape(), ctx.download(&tt)?.len());
    let s = ctx.stats();
    println!("engine: {} dispatches, {} submits, {} pipelines, {} live buffers", s.dispatches, s.submits, s.pipelines, s.pool.live_buffers);
    if !ok {
        return Err(nx_vulkan_engine::EngineError::Vulkan("demo result mismatch".into()));
    }
    Ok(())
}

fn bench(ctx: &Context, elements: usize, gemm: &[usize], reps: usize) -> Result<()> {
    let dev = &ctx.caps.name;
    // Elementwise add: read 2, write 1 f32 per element.
    let a = ctx.iota(DType::F32, &[elements], None)?;
    let b = ctx.iota(DType::F32, &[elements], None)?;
    let secs = ops_bench::timed(ctx, reps, || ctx.binary(BinaryOp::Add, &a, &b, DType::F32))?;
    let gbs = (elements * 12) as f64 / secs / 1e9;
    println!("{{\"bench\":\"add_f32\",\"device\":{dev:?},\"elements\":{elements},\"median_ms\":{:.4},\"gb_per_s\":{gbs:.1},\"reps\":{reps}}}", secs * 1e3);
    drop((a, b));
    // SGEMM (f32, f32 accumulation).
    for &n in gemm {
        let m = ctx.iota(DType::F32, &[n, n], Some(1))?;
        let secs = ops_bench::timed(ctx, reps.min(10), || {
            ctx.dot_with(DotPrecision::F32Accumulate, &m, &[1], &[], &m, &[0], &[], DType::F32)
        })?;
        let tflops = 2.0 * (n as f64).powi(3) / secs / 1e12;
        println!("{{\"bench\":\"sgemm\",\"device\":{dev:?},\"n\":{n},\"median_ms\":{:.4},\"tflops\":{tflops:.2},\"reps\":{}}}", secs * 1e3, reps.min(10));
    }
    // Per-op latency: a 1-element add, submitted and waited for, warm.
    let one = ctx.upload(DType::F32, &[1], &1.0f32.to_le_bytes())?;
    let lat_reps = 1000;
    let secs = ops_bench::timed(ctx, lat_reps, || ctx.binary(BinaryOp::Add, &one, &one, DType::F32))?;
    println!("{{\"bench\":\"op_latency\",\"device\":{dev:?},\"median_us\":{:.2},\"reps\":{lat_reps}}}", secs * 1e6);
    Ok(())
}

/// Fixed inputs: dense ranges, huge/tiny magnitudes and special values.
fn digest_inputs() -> Vec<f64> {
    let mut v = vec![0.0, -0.0, 1.0, -1.0, 0.5, -0.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::MIN_POSITIVE, 5e-324, -5e-324, f64::MAX, -f64::MAX, 1e300, -1e300, 1e-300, 709.78, -745.0, std::f64::consts::PI, std::f64::consts::FRAC_PI_2, 1e22, 0.9999999, -0.9999999];
    for i in 0..4000 {
        v.push(-20.0 + 40.0 * (i as f64) / 4000.0 + 1e-7 * (i % 7) as f64);
    }
    for i in 0..600 {
        v.push(f64::powi(1.1, i - 300) * if i % 2 == 0 { 1.0 } else { -1.0 });
    }
    v
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x100000001b3))
}

fn digest(ctx: &Context) -> Result<()> {
    let xs = digest_inputs();
    let bytes: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    let x64 = ctx.upload(DType::F64, &[xs.len()], &bytes)?;
    let x32 = ctx.convert(&x64, DType::F32)?;
    let rev = x64.reverse(&[0])?;
    let rev32 = x32.reverse(&[0])?;
    let mut all = 0u64;
    for &op in UnaryOp::ALL {
        for (t, x) in [(DType::F64, &x64), (DType::F32, &x32)] {
            let Ok(y) = ctx.unary(op, x, if matches!(op, UnaryOp::IsNan | UnaryOp::IsInfinity | UnaryOp::LogicalNot) { DType::U8 } else { t }) else { continue };
            let h = fnv(&ctx.download(&y)?);
            all ^= h.rotate_left((op as u32) * 3 + t.bits() as u32);
            println!("{{\"op\":\"{}\",\"type\":\"{t}\",\"digest\":\"{h:016x}\"}}", op.name());
        }
    }
    for &op in BinaryOp::ALL {
        for (t, a, b) in [(DType::F64, &x64, &rev), (DType::F32, &x32, &rev32)] {
            let out = if op.is_comparison() || op.is_logical() { DType::U8 } else { t };
            let Ok(y) = ctx.binary(op, a, b, out) else { continue };
            let h = fnv(&ctx.download(&y)?);
            all ^= h.rotate_left((op as u32) * 5 + t.bits() as u32 + 1);
            println!("{{\"op\":\"{}\",\"type\":\"{t}\",\"digest\":\"{h:016x}\"}}", op.name());
        }
    }
    println!("{{\"op\":\"ALL\",\"device\":{:?},\"digest\":\"{all:016x}\"}}", ctx.caps.name);
    let more = digest_more(ctx, &x64, &x32)?;
    println!("{{\"op\":\"ALL_MORE\",\"device\":{:?},\"digest\":\"{more:016x}\"}}", ctx.caps.name);
    let fast = digest_fast(ctx, &x32, &rev32)?;
    println!("{{\"op\":\"ALL_FAST\",\"device\":{:?},\"digest\":\"{fast:016x}\"}}", ctx.caps.name);
    Ok(())
}

/// Every unary and binary op on f32 and f16 under `precision: :fast` (FloatMath::Fast, our f32
/// library): a total of its own (`ALL_FAST`), which must also be the same on every device.
fn digest_fast(ctx: &Context, x32: &nx_vulkan_engine::Tensor, rev32: &nx_vulkan_engine::Tensor) -> Result<u64> {
    let (x16, rev16) = (ctx.convert(x32, DType::F16)?, ctx.convert(rev32, DType::F16)?);
    let mut all = 0u64;
    for (t, x, r) in [(DType::F32, x32, rev32), (DType::F16, &x16, &rev16)] {
        for &op in UnaryOp::ALL {
            let out = if matches!(op, UnaryOp::IsNan | UnaryOp::IsInfinity | UnaryOp::LogicalNot) { DType::U8 } else { t };
            let Ok(y) = ctx.unary_with(FloatMath::Fast, op, x, out) else { continue };
            let h = fnv(&ctx.download(&y)?);
            all ^= h.rotate_left((op as u32) * 3 + t.bits() as u32);
            println!("{{\"op\":\"{}\",\"type\":\"{t}\",\"precision\":\"fast\",\"digest\":\"{h:016x}\"}}", op.name());
        }
        for &op in BinaryOp::ALL {
            let out = if op.is_comparison() || op.is_logical() { DType::U8 } else { t };
            let Ok(y) = ctx.binary_with(FloatMath::Fast, op, x, r, out) else { continue };
            let h = fnv(&ctx.download(&y)?);
            all ^= h.rotate_left((op as u32) * 5 + t.bits() as u32 + 1);
            println!("{{\"op\":\"{}\",\"type\":\"{t}\",\"precision\":\"fast\",\"digest\":\"{h:016x}\"}}", op.name());
        }
    }
    Ok(all)
}

/// The other kernel families on the same inputs seen as 68×68 (reductions, arg-reductions,
/// exact dots, scans, sorts, FFT): a separate total (`ALL_MORE`) so `ALL` keeps its meaning
/// for digests recorded before.
fn digest_more(ctx: &Context, x64: &nx_vulkan_engine::Tensor, x32: &nx_vulkan_engine::Tensor) -> Result<u64> {
    use nx_vulkan_engine::reduce::{ArgOp, ReduceOp, TieBreak};
    use nx_vulkan_engine::scan::ScanOp;
    use nx_vulkan_engine::sort::Direction;
    let side = 68; // 68 * 68 = 4624 inputs
    let mut all = 0u64;
    let mut line = |name: &str, t: DType, bytes: &[u8], salt: u32| {
        let h = fnv(bytes);
        all ^= h.rotate_left(salt);
        println!("{{\"op\":\"{name}\",\"type\":\"{t}\",\"digest\":\"{h:016x}\"}}");
    };
    let x16 = ctx.convert(x32, DType::F16)?;
    let mut salt = 0;
    for (t, x) in [(DType::F64, x64), (DType::F32, x32), (DType::F16, &x16)] {
        let m = x.reshape(&[side, side])?;
        for (name, op) in [("sum", ReduceOp::Sum), ("product", ReduceOp::Product), ("reduce_max", ReduceOp::Max), ("reduce_min", ReduceOp::Min)] {
            salt += 1;
            line(name, t, &ctx.download(&ctx.reduce(op, &m, &[1], false, t)?)?, salt);
            salt += 1;
            line(&format!("{name}_all"), t, &ctx.download(&ctx.reduce(op, &m, &[0, 1], false, t)?)?, salt);
        }
        for (name, op) in [("argmax", ArgOp::ArgMax), ("argmin", ArgOp::ArgMin)] {
            salt += 1;
            line(name, t, &ctx.download(&ctx.arg_reduce(op, &m, Some(0), false, TieBreak::Low, DType::S64)?)?, salt);
        }
        salt += 1;
        line("dot", t, &ctx.download(&ctx.dot(&m, &[1], &[], &m, &[0], &[], t)?)?, salt);
        for (name, op) in [("cumulative_sum", ScanOp::Sum), ("cumulative_max", ScanOp::Max)] {
            salt += 1;
            line(name, t, &ctx.download(&ctx.cumulative(op, &m, 1, false)?)?, salt);
        }
        salt += 1;
        line("sort", t, &ctx.download(&ctx.sort(&m, 1, Direction::Asc)?)?, salt);
        salt += 1;
        line("argsort", t, &ctx.download(&ctx.argsort(&m, 1, Direction::Desc, true, DType::S64)?)?, salt);
        if t != DType::F16 {
            salt += 1;
            line("fft", t, &ctx.download(&ctx.fft(&m, 1, side, 0.0)?)?, salt);
        }
    }
    Ok(all)
}
