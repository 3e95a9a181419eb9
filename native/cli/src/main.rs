//! `nx-vulkan`: the engine from the command line (no BEAM).
//!
//! `info` lists devices and capabilities; `demo` runs a few ops and checks them; `bench` is the
//! GPU bench harness (elementwise bandwidth, SGEMM, per-op latency), printing one JSON object
//! per measurement so `bench/` scripts can set it beside a peer measured in the same run.

use clap::{Parser, Subcommand};
use nx_vulkan_engine::{exec, BinaryOp, Context, DType, DeviceSelector, Result, UnaryOp};
use std::time::Instant;

#[derive(Parser)]
#[command(name = "nx-vulkan", version, about = "GPU compute on Vulkan: device info, demo, benchmarks")]
struct Cli {
    /// Device to use: an index or part of a name (default: NX_VULKAN_DEVICE, else the first GPU).
    #[arg(long, global = true)]
    device: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List Vulkan devices and what they can do.
    Info,
    /// Run a few ops on the device and check them against the CPU.
    Demo,
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
    },
}

fn main() {
    let cli = Cli::parse();
    let result = exec::run(move || run(cli));
    if let Err(e) = result {
        eprintln!("nx-vulkan: {e}");
        std::process::exit(1);
    }
}

fn open(device: &Option<String>) -> Result<std::sync::Arc<Context>> {
    let selector = device.as_deref().map(DeviceSelector::parse).unwrap_or_else(DeviceSelector::from_env);
    Context::open(&selector)
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Info => {
            if let Some(d) = &cli.device {
                std::env::set_var("NX_VULKAN_DEVICE", d);
            }
            print!("{}", nx_vulkan_engine::device::info_report()?);
            Ok(())
        }
        Command::Demo => demo(&*open(&cli.device)?),
        Command::Bench { quick, elements, gemm, reps } => {
            let ctx = open(&cli.device)?;
            let elements = elements.unwrap_or(if quick { 4 << 20 } else { 256 << 20 });
            let gemm = gemm.unwrap_or(if quick { vec![256] } else { vec![1024, 4096] });
            bench(&*ctx, elements, &gemm, reps)
        }
    }
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time<T>(reps: usize, mut f: impl FnMut() -> Result<T>) -> Result<f64> {
    for _ in 0..3 {
        f()?; // warm-up: pipelines built, pool primed
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = Instant::now();
        f()?;
        times.push(t0.elapsed().as_secs_f64());
    }
    Ok(median(times))
}

fn bench(ctx: &Context, elements: usize, gemm: &[usize], reps: usize) -> Result<()> {
    let dev = &ctx.caps.name;
    // Elementwise add: read 2, write 1 f32 per element.
    let a = ctx.iota(DType::F32, &[elements], None)?;
    let b = ctx.iota(DType::F32, &[elements], None)?;
    let secs = time(reps, || ctx.binary(BinaryOp::Add, &a, &b, DType::F32))?;
    let gbs = (elements * 12) as f64 / secs / 1e9;
    println!("{{\"bench\":\"add_f32\",\"device\":{dev:?},\"elements\":{elements},\"median_ms\":{:.4},\"gb_per_s\":{gbs:.1},\"reps\":{reps}}}", secs * 1e3);
    drop((a, b));
    // SGEMM (f32, f32 accumulation).
    for &n in gemm {
        let m = ctx.iota(DType::F32, &[n, n], Some(1))?;
        let secs = time(reps.min(10), || ctx.dot(&m, &[1], &[], &m, &[0], &[], DType::F32))?;
        let tflops = 2.0 * (n as f64).powi(3) / secs / 1e12;
        println!("{{\"bench\":\"sgemm\",\"device\":{dev:?},\"n\":{n},\"median_ms\":{:.4},\"tflops\":{tflops:.2},\"reps\":{}}}", secs * 1e3, reps.min(10));
    }
    // Per-op latency: a 1-element add, submitted and waited for, warm.
    let one = ctx.upload(DType::F32, &[1], &1.0f32.to_le_bytes())?;
    let lat_reps = 1000;
    let secs = time(lat_reps, || ctx.binary(BinaryOp::Add, &one, &one, DType::F32))?;
    println!("{{\"bench\":\"op_latency\",\"device\":{dev:?},\"median_us\":{:.2},\"reps\":{lat_reps}}}", secs * 1e6);
    Ok(())
}
