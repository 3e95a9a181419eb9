//! `nx-vulkan llm-gemm-bench`: the prefill GEMM (`record_llm_gemm`, tensor cores) against the
//! decode matvec (`record_llm_matvec`) on one quantized matrix × T token rows, with random
//! blocks (no model file; values do not change the speed). Default: the 8B FFN shapes
//! (14336×4096 gate/up, 4096×14336 down) in Q4_K at T = 512. One JSON line per (shape, T,
//! kernel): median µs per product over `reps` runs of `calls` products and one wait, effective
//! TFLOP/s (2·T·N·K per matrix; `--swiglu` adds the gate+up pair, 2 matrices), and for the
//! GEMM (f16 and split precision) its largest difference from the matvec's output (a check
//! that the tensor-core path computes the same product, beside the size of the values).

use clap::Args;
use nx_vulkan_engine::llm::kernels::{Epilogue, QMatrix, RmsNorm};
use nx_vulkan_engine::llm::prefill::{llm_gemm_pays, LlmGemmPrecision};
use nx_vulkan_engine::llm::quant::{random_rows, GgmlType};
use nx_vulkan_engine::llm::sample::Rng;
use nx_vulkan_engine::matmul::tensor_core_kernel;
use nx_vulkan_engine::{Context, DType, EngineError, Result, Tensor};
use std::time::Instant;

#[derive(Args)]
pub struct LlmGemmBenchArgs {
    /// Weight type (ggml name, e.g. Q4_K, Q6_K, Q8_0).
    #[arg(long = "type", default_value = "Q4_K")]
    ty: String,
    /// Matrices as NxK (rows × columns of the weight), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "14336x4096,4096x14336")]
    shapes: Vec<String>,
    /// Token rows per product (comma-separated; e.g. 8,16,32,64,128,512 for the crossover).
    #[arg(long, value_delimiter = ',', default_value = "512")]
    rows: Vec<usize>,
    /// Timed runs (median reported); each run is `calls` products and one wait.
    #[arg(long, default_value_t = 7)]
    reps: usize,
    #[arg(long, default_value_t = 5)]
    calls: usize,
    /// Also time each kernel on the device (timestamps) and print totals per kernel.
    #[arg(long)]
    profile: bool,
    /// Also time the SwiGLU product (the matrix as both gate and up, as the FFN's gate/up
    /// step runs it: one GEMM over both, one matvec dispatch reading both).
    #[arg(long)]
    swiglu: bool,
    /// Also time the matvecs with the RMSNorm fused in front (as the forward pass runs the
    /// products that read a norm).
    #[arg(long)]
    norm: bool,
    /// Only the matvecs (decode-sized steps; no GEMM).
    #[arg(long)]
    matvec_only: bool,
    /// Record a run's `calls` products into one submission, with the barriers between them
    /// that a forward step has (device time per product as a decode step pays it), instead of
    /// one submission each.
    #[arg(long)]
    one_batch: bool,
    /// Copies of each matrix (random blocks each) that successive products cycle through: with
    /// enough of them the working set exceeds the GPU's L2 cache and the weights stream from
    /// device memory, as in a decode step (one matrix repeated partly stays in L2).
    #[arg(long, default_value_t = 1)]
    distinct: usize,
}

fn download(ctx: &Context, t: &Tensor) -> Result<Vec<f32>> {
    Ok(ctx.download(t)?.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

pub fn run(ctx: &Context, args: &LlmGemmBenchArgs) -> Result<()> {
    let bad = |what: String| EngineError::InvalidArgument(what);
    let ty = GgmlType::ALL.into_iter().find(|t| t.name().eq_ignore_ascii_case(&args.ty)).ok_or_else(|| bad(format!("unknown type {}", args.ty)))?;
    if args.reps == 0 || args.calls == 0 || args.distinct == 0 {
        return Err(bad("--reps, --calls and --distinct must be positive".into()));
    }
    let dev = &ctx.caps.name;
    let dot_kernel = format!("{:?}", tensor_core_kernel(&ctx.caps, DType::F16));
    if args.profile {
        ctx.stream.profile_start()?;
    }
    let mut rng = Rng::new(7);
    for spec in &args.shapes {
        let dims: Vec<usize> = spec.split('x').map(|v| v.parse()).collect::<std::result::Result<_, _>>().map_err(|_| bad(format!("shape {spec}: want NxK")))?;
        let [n, k] = dims[..] else { return Err(bad(format!("shape {spec}: want NxK"))) };
        let ws = (0..args.distinct).map(|_| QMatrix::upload(ctx, ty, n, k, &random_rows(ty, n, k, &mut rng))).collect::<Result<Vec<_>>>()?;
        let w = &ws[0];
        for &t in &args.rows {
            let xv: Vec<u8> = (0..t * k).flat_map(|_| ((rng.next_f64() * 2.0 - 1.0) as f32).to_le_bytes()).collect();
            let x = ctx.upload(DType::F32, &[t, k], &xv)?;
            let out = ctx.empty(DType::F32, &[t, n])?;
            let f16 = ctx.llm_gemm_scratch(t, &[(w, args.swiglu)], LlmGemmPrecision::F16)?;
            let split = ctx.llm_gemm_scratch(t, &[(w, args.swiglu)], LlmGemmPrecision::Split)?;
            let gamma = ctx.upload(DType::F32, &[k], &1f32.to_le_bytes().repeat(k))?;
            let norm = RmsNorm { gamma: &gamma, eps: 1e-5 };
            // (label, SwiGLU (the matrix as gate and up), GEMM scratch or None for the matvec,
            // fused norm); each product's matvec first.
            let mut kernels = vec![("matvec", false, None, false), ("gemm", false, Some(&f16), false), ("gemm_split", false, Some(&split), false)];
            if args.swiglu {
                kernels.extend([("matvec_swiglu", true, None, false), ("gemm_swiglu", true, Some(&f16), false), ("gemm_split_swiglu", true, Some(&split), false)]);
            }
            if args.matvec_only {
                kernels.retain(|k| k.2.is_none());
            }
            if args.norm {
                kernels.push(("matvec_norm", false, None, true));
                if args.swiglu {
                    kernels.push(("matvec_swiglu_norm", true, None, true));
                }
            }
            let mut matvec_out = vec![];
            for (kernel, swiglu, scratch, normed) in kernels {
                // Product i reads copy i mod distinct (as gate and up alike with SwiGLU).
                let next = std::cell::Cell::new(0usize);
                let products = |count: usize| -> Result<()> {
                    let mut batch = ctx.batch()?;
                    for _ in 0..count {
                        let w = &ws[next.get() % ws.len()];
                        next.set(next.get() + 1);
                        let up = swiglu.then_some(w);
                        match scratch {
                            Some(s) => ctx.record_llm_gemm_in(&mut batch, s, w, up, &x, Epilogue::default(), &out)?,
                            None if normed => ctx.record_llm_normed_matvec(&mut batch, w, up, &x, norm, Epilogue::default(), &out)?,
                            None => ctx.record_llm_matvec(&mut batch, w, up, &x, Epilogue::default(), &out)?,
                        }
                    }
                    batch.finish()
                };
                products(1)?;
                ctx.synchronize()?;
                let got = download(ctx, &out)?;
                let mut times = vec![];
                for _ in 0..args.reps {
                    let t0 = Instant::now();
                    if args.one_batch {
                        products(args.calls)?;
                    } else {
                        for _ in 0..args.calls {
                            products(1)?;
                        }
                    }
                    ctx.synchronize()?;
                    times.push(t0.elapsed().as_secs_f64() / args.calls as f64);
                }
                times.sort_by(f64::total_cmp);
                let med = times[times.len() / 2];
                let products = if swiglu { 2.0 } else { 1.0 };
                let tflops = products * 2.0 * (t * n * k) as f64 / med / 1e12;
                let weight_gbs = products * w.bytes() as f64 / med / 1e9;
                // The GEMM's largest difference from the matvec's output, beside its largest value.
                let check = if scratch.is_none() {
                    if !normed {
                        matvec_out = got;
                    }
                    String::new()
                } else {
                    let diff = matvec_out.iter().zip(&got).map(|(a, b)| (*a as f64 - *b as f64).abs()).fold(0.0, f64::max);
                    let scale = matvec_out.iter().map(|a| a.abs() as f64).fold(0.0, f64::max);
                    format!(",\"max_abs_diff_vs_matvec\":{diff:.3e},\"max_abs_matvec\":{scale:.3e}")
                };
                println!(
                    "{{\"bench\":\"llm_gemm\",\"kernel\":\"{kernel}\",\"type\":\"{}\",\"n\":{n},\"k\":{k},\"rows\":{t},\"median_us\":{:.1},\"tflops\":{tflops:.2},\"weight_gb_per_s\":{weight_gbs:.0}{check},\"dot_kernel\":{dot_kernel:?},\"gemm_pays\":{},\"device\":{dev:?},\"reps\":{},\"calls\":{}}}",
                    ty.name(),
                    med * 1e6,
                    llm_gemm_pays(&ctx.caps, t),
                    args.reps,
                    args.calls
                );
            }
        }
    }
    if args.profile {
        for p in ctx.stream.profile_stop()? {
            println!("{{\"profile\":{:?},\"runs\":{},\"device_us\":{:.1},\"mean_us\":{:.2}}}", p.name, p.runs, p.device_ns / 1e3, p.device_ns / 1e3 / p.runs as f64);
        }
    }
    Ok(())
}
