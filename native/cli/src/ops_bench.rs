//! `nx-vulkan bench --ops`: the op-family table, from Rust. Each measurement is printed as one
//! JSON object `{"bench": "<family>", "size": <elements>, "median_us": ...}` with the names
//! `bench/torch_ops.py` uses for the same work in PyTorch eager, so `bench/compare_ops.py` can
//! set them side by side. Every timed call ends with a synchronisation (ops are queued), as
//! PyTorch's side ends with `torch.cuda.synchronize()`.

use nx_vulkan_engine::conv::ConvOptions;
use nx_vulkan_engine::matmul::DotPrecision;
use nx_vulkan_engine::reduce::{ArgOp, ReduceOp, TieBreak};
use nx_vulkan_engine::scan::ScanOp;
use nx_vulkan_engine::sort::Direction;
use nx_vulkan_engine::{BinaryOp, Context, DType, Result, Tensor, UnaryOp};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Median seconds of `f` followed by a wait for the device, after warm-ups.
pub(crate) fn timed<T>(ctx: &Context, reps: usize, mut f: impl FnMut() -> Result<T>) -> Result<f64> {
    for _ in 0..3 {
        drop(f()?);
        ctx.synchronize()?;
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = Instant::now();
        let out = f()?;
        ctx.synchronize()?;
        times.push(t0.elapsed().as_secs_f64());
        drop(out);
    }
    Ok(median(times))
}

fn emit(ctx: &Context, bench: &str, size: usize, secs: f64, reps: usize) {
    println!(
        "{{\"bench\":\"{bench}\",\"size\":{size},\"median_us\":{:.2},\"reps\":{reps},\"device\":{:?}}}",
        secs * 1e6,
        ctx.caps.name
    );
}

fn reps_for(elements: usize, reps: usize) -> usize {
    if elements >= 1 << 24 { reps.min(20) } else { reps }
}

/// The table's rows; `only` keeps the named ones (every row when `None`).
pub fn run(ctx: &Context, sizes: &[usize], dots: &[usize], reps: usize, only: Option<&[String]>) -> Result<()> {
    let want = |name: &str| only.is_none_or(|names| names.iter().any(|n| n == name));
    let row = |name: &str, n: usize, r: usize, f: &mut dyn FnMut() -> Result<f64>| -> Result<()> {
        if want(name) {
            emit(ctx, name, n, f()?, r);
        }
        Ok(())
    };
    let f32t = DType::F32;
    // Per-op host cost: enqueue alone (no wait), and op + wait for it.
    let tiny = ctx.upload(f32t, &[4], &[0u8; 16])?;
    if want("tiny_add_enqueue") || want("tiny_add_sync") || want("tiny_add_readback") {
        for _ in 0..100 {
            drop(ctx.binary(BinaryOp::Add, &tiny, &tiny, f32t)?);
        }
        ctx.synchronize()?;
        let mut enqueue = vec![];
        for _ in 0..2000 {
            let t0 = Instant::now();
            let y = ctx.binary(BinaryOp::Add, &tiny, &tiny, f32t)?;
            enqueue.push(t0.elapsed().as_secs_f64());
            drop(y);
            if enqueue.len() % 100 == 0 {
                ctx.synchronize()?;
            }
        }
        if want("tiny_add_enqueue") {
            emit(ctx, "tiny_add_enqueue", 4, median(enqueue), 2000);
        }
        row("tiny_add_sync", 4, 2000, &mut || timed(ctx, 2000, || ctx.binary(BinaryOp::Add, &tiny, &tiny, f32t)))?;
        row("tiny_add_readback", 4, 2000, &mut || {
            timed(ctx, 2000, || {
                let y = ctx.binary(BinaryOp::Add, &tiny, &tiny, f32t)?;
                ctx.download(&y)
            })
        })?;
    }

    for &n in sizes {
        let r = reps_for(n, reps);
        let a = ctx.iota(f32t, &[n], None)?;
        let x = ctx.unary(UnaryOp::Sin, &a, f32t)?; // values in [-1, 1]
        row("add", n, r, &mut || timed(ctx, r, || ctx.binary(BinaryOp::Add, &x, &a, f32t)))?;
        row("exp", n, r, &mut || timed(ctx, r, || ctx.unary(UnaryOp::Exp, &x, f32t)))?;
        row("tanh", n, r, &mut || timed(ctx, r, || ctx.unary(UnaryOp::Tanh, &x, f32t)))?;
        row("sigmoid", n, r, &mut || timed(ctx, r, || ctx.unary(UnaryOp::Sigmoid, &x, f32t)))?;
        row("erf", n, r, &mut || timed(ctx, r, || ctx.unary(UnaryOp::Erf, &x, f32t)))?;
        // (of the iota 0, 1, ..., n-1: positive but for log 0 = -Inf)
        row("log", n, r, &mut || timed(ctx, r, || ctx.unary(UnaryOp::Log, &a, f32t)))?;
        row("sum", n, r, &mut || timed(ctx, r, || ctx.reduce(ReduceOp::Sum, &x, &[0], false, f32t)))?;
        row("argmax", n, r, &mut || timed(ctx, r, || ctx.arg_reduce(ArgOp::ArgMax, &x, Some(0), false, TieBreak::Low, DType::S64)))?;
        row("cumsum", n, r, &mut || timed(ctx, r, || ctx.cumulative(ScanOp::Sum, &x, 0, false)))?;
        if n <= 1 << 20 {
            row("sort", n, r, &mut || timed(ctx, r, || ctx.sort(&x, 0, Direction::Asc)))?;
        }
        // gather: n/4 rows of a [n/64, 64] table (embedding lookup shape)
        if n >= 4096 && want("gather") {
            let rows = n / 64;
            let table = x.reshape(&[rows, 64])?;
            let idx: Vec<u8> = (0..rows as i64).map(|i| (i * 7919) % rows as i64).flat_map(|v| v.to_le_bytes()).collect();
            let idx = ctx.upload(DType::S64, &[rows, 1], &idx)?;
            row("gather", n, r, &mut || timed(ctx, r, || ctx.gather(&table, &idx, &[0])))?;
        }
        // softmax over rows of 1024 as 5 eager ops: max, subtract, exp, sum, divide
        if n >= 1024 {
            let m = x.reshape(&[n / 1024, 1024])?;
            row("softmax_eager", n, r, &mut || timed(ctx, r, || softmax(ctx, &m)))?;
        }
        // transfers: n f32 elements
        let bytes = if want("upload") { vec![1u8; n * 4] } else { vec![] };
        row("upload", n, r, &mut || timed(ctx, r, || ctx.upload(f32t, &[n], &bytes)))?;
        row("download", n, r, &mut || timed(ctx, r, || ctx.download(&x)))?;
    }
    for &d in dots.iter().filter(|_| ["dot_exact", "dot_f32acc", "dot_f64"].into_iter().any(want)) {
        let r = reps.min(10);
        let a = ctx.unary(UnaryOp::Sin, &ctx.iota(f32t, &[d, d], None)?, f32t)?;
        row("dot_exact", d, r, &mut || timed(ctx, r, || ctx.dot(&a, &[1], &[], &a, &[0], &[], f32t)))?;
        row("dot_f32acc", d, r, &mut || timed(ctx, r, || ctx.dot_with(DotPrecision::F32Accumulate, &a, &[1], &[], &a, &[0], &[], f32t)))?;
        let a64 = ctx.convert(&a, DType::F64)?;
        row("dot_f64", d, r, &mut || timed(ctx, r, || ctx.dot(&a64, &[1], &[], &a64, &[0], &[], DType::F64)))?;
    }
    // conv2d: batch 8, 64 -> 64 channels, 56x56, 3x3, padding 1 (a ResNet stage)
    if ["conv2d", "conv2d_f64", "conv2d_direct"].into_iter().any(want) {
        let input = ctx.unary(UnaryOp::Sin, &ctx.iota(f32t, &[8, 64, 56, 56], None)?, f32t)?;
        let kernel = ctx.unary(UnaryOp::Cos, &ctx.iota(f32t, &[64, 64, 3, 3], None)?, f32t)?;
        let mut opts = ConvOptions::new(4);
        opts.padding = vec![(1, 1), (1, 1)];
        // (`conv` picks im2col + GEMM here; conv2d_direct is the one-invocation-per-output kernel)
        row("conv2d", 8 * 64 * 56 * 56, reps.min(10), &mut || timed(ctx, reps.min(10), || ctx.conv(&input, &kernel, &opts, f32t)))?;
        let (input64, kernel64) = (ctx.convert(&input, DType::F64)?, ctx.convert(&kernel, DType::F64)?);
        row("conv2d_f64", 8 * 64 * 56 * 56, reps.min(10), &mut || timed(ctx, reps.min(10), || ctx.conv(&input64, &kernel64, &opts, DType::F64)))?;
        let direct = nx_vulkan_engine::conv::ConvAlgorithm::Direct;
        row("conv2d_direct", 8 * 64 * 56 * 56, reps.min(5), &mut || timed(ctx, reps.min(5), || ctx.conv_using(direct, &input, &kernel, &opts, f32t)))?;
    }
    // fft: 256 rows of 4096 (c64)
    if want("fft") {
        let sig = ctx.convert(&ctx.unary(UnaryOp::Sin, &ctx.iota(f32t, &[256, 4096], None)?, f32t)?, DType::C64)?;
        row("fft", 256 * 4096, reps.min(10), &mut || timed(ctx, reps.min(10), || ctx.fft(&sig, 1, 4096, 0.0)))?;
    }
    Ok(())
}

fn softmax(ctx: &Context, m: &Tensor) -> Result<Tensor> {
    let f = DType::F32;
    let mx = ctx.reduce(ReduceOp::Max, m, &[1], true, f)?;
    let shifted = ctx.binary(BinaryOp::Subtract, m, &mx.broadcast_to(m.shape())?, f)?;
    let e = ctx.unary(UnaryOp::Exp, &shifted, f)?;
    let s = ctx.reduce(ReduceOp::Sum, &e, &[1], true, f)?;
    ctx.binary(BinaryOp::Divide, &e, &s.broadcast_to(m.shape())?, f)
}
