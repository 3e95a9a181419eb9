//! `DotPrecision::TensorCore`: f16×f16 and bf16×bf16 dots accumulated in f32 — on
//! subgroup-scope cooperative matrices (`MatmulKernel::CoopMat`) where the device has them,
//! else on the shared-memory fallback (`MatmulKernel::HalfFallback`, what lavapipe runs in CI)
//! — and the workgroup-scope VK_NV_cooperative_matrix2 kernel (`MatmulKernel::CoopMat2`, only
//! ever forced), against a CPU reference.
//!
//! Error bound. The operands are exactly f16/bf16, so every product is exact in f32 (11- or
//! 8-bit significands: at most 22 bits) and only the summation and the final rounding err.
//! With f32 accumulation in any order (tensor cores sum in their own order and may truncate
//! while aligning, so a unit roundoff of 2^-23 rather than 2^-24 per addition is assumed), the
//! classical bound for K terms is |c32 - ref| <= K * 2^-23 * sum_k |a_k b_k|. The output is
//! then rounded once: f32 adds nothing more, f16 (round to nearest) at most 2^-11 of |c32|,
//! bf16 (Nx.BinaryBackend's rule: the f32's top 16 bits, a truncation) under 2^-7 of |c32|;
//! f16/bf16 subnormal spacing (2^-24 / 2^-133) is added as an absolute term.
//!
//! Sizes: 1, 7, tile remainders (the coopmat tile is 128×128×32), K = 4099, batches, transposed
//! operands (strided loads) and special values. The default `Context::dot` stays exact.

use half::{bf16, f16};
use nx_vulkan_engine::matmul::{coopmat2_kernel, coopmat_runs_here, tensor_core_kernel, CoopStaging, DotPrecision, MatmulKernel};
use nx_vulkan_engine::*;
use std::sync::Arc;

fn ctx() -> Arc<Context> {
    Context::global().expect("device")
}

fn enc(t: DType, x: f64) -> [u8; 2] {
    match t {
        DType::F16 => f16::from_f64(x).to_le_bytes(),
        DType::BF16 => bf16::from_f64(x).to_le_bytes(),
        _ => unreachable!(),
    }
}

fn dec(t: DType, b: &[u8]) -> f64 {
    match t {
        DType::F16 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
        DType::BF16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        DType::F32 => f32::from_le_bytes(b.try_into().unwrap()) as f64,
        _ => unreachable!(),
    }
}

/// A xorshift stream from `seed` (the tests' inputs; fixed, so failures repeat).
fn xorshift(seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    std::iter::repeat_with(move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    })
}

/// Values in [-2, 2) with full f16/bf16 precision (so sums are inexact), stored and re-read.
fn data(t: DType, n: usize, seed: u64) -> Vec<f64> {
    xorshift(seed)
        .take(n)
        .map(|s| {
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            dec(t, &enc(t, 4.0 * u - 2.0))
        })
        .collect()
}

fn upload(ctx: &Context, t: DType, shape: &[usize], v: &[f64]) -> Tensor {
    let bytes: Vec<u8> = v.iter().flat_map(|&x| enc(t, x)).collect();
    ctx.upload(t, shape, &bytes).unwrap()
}

fn read(ctx: &Context, t: &Tensor) -> Vec<f64> {
    let b = ctx.download(t).unwrap();
    b.chunks(t.dtype().size()).map(|c| dec(t.dtype(), c)).collect()
}

/// The output rounding's relative and absolute terms of the bound (module docs).
fn out_terms(out: DType) -> (f64, f64) {
    match out {
        DType::F32 => (0.0, 0.0),
        DType::F16 => (2f64.powi(-11), 2f64.powi(-24)),
        DType::BF16 => (2f64.powi(-7), 2f64.powi(-133)),
        _ => unreachable!(),
    }
}

/// `a` is `[bsz, m, k]` (or `[bsz, k, m]` when `a_t`), `b` is `[bsz, k, n]` (or `[bsz, n, k]`);
/// checks the TensorCore dot against f64 sums with the stated bound. Returns the worst error
/// relative to the bound.
#[allow(clippy::too_many_arguments)]
fn check(ctx: &Context, input: DType, out: DType, bsz: usize, m: usize, n: usize, k: usize, a_t: bool, b_t: bool, seed: u64) -> f64 {
    check_with(ctx, None, input, out, [bsz, m, n, k], a_t, b_t, seed)
}

/// `check` with the kernel forced (`Some`: through `dot_using`).
#[allow(clippy::too_many_arguments)]
fn check_with(ctx: &Context, forced: Option<MatmulKernel>, input: DType, out: DType, dims: [usize; 4], a_t: bool, b_t: bool, seed: u64) -> f64 {
    let [bsz, m, n, k] = dims;
    let a = data(input, bsz * m * k, seed);
    let b = data(input, bsz * k * n, seed + 1);
    let a_shape = if a_t { [bsz, k, m] } else { [bsz, m, k] };
    let b_shape = if b_t { [bsz, n, k] } else { [bsz, k, n] };
    let ta = upload(ctx, input, &a_shape, &a);
    let tb = upload(ctx, input, &b_shape, &b);
    let (ca, cb) = (if a_t { 1 } else { 2 }, if b_t { 2 } else { 1 });
    let before = ctx.stats().dispatches;
    let c = match forced {
        None => ctx.dot_with(DotPrecision::TensorCore, &ta, &[ca], &[0], &tb, &[cb], &[0], out).unwrap(),
        Some(kernel) => ctx.dot_using(Some(kernel), &ta, &[ca], &[0], &tb, &[cb], &[0], out).unwrap(),
    };
    let got = read(ctx, &c);
    assert!(ctx.stats().dispatches > before, "ran on the device");
    assert_eq!(c.shape(), &[bsz, m, n]);
    let (rel, abs) = out_terms(out);
    let mut worst: f64 = 0.0;
    for z in 0..bsz {
        for i in 0..m {
            for j in 0..n {
                let (mut exact, mut mag) = (0.0f64, 0.0f64);
                for l in 0..k {
                    let x = if a_t { a[z * k * m + l * m + i] } else { a[z * m * k + i * k + l] };
                    let y = if b_t { b[z * n * k + j * k + l] } else { b[z * k * n + l * n + j] };
                    exact += x * y; // f64: error <= K * 2^-53 * sum, negligible against the bound
                    mag += (x * y).abs();
                }
                let bound = k as f64 * 2f64.powi(-23) * mag + rel * (exact.abs() + k as f64 * 2f64.powi(-23) * mag) + abs;
                let g = got[z * m * n + i * n + j];
                let err = (g - exact).abs();
                assert!(
                    err <= bound,
                    "{input}x{input}->{out} [{bsz},{m},{k}]x[{k},{n}] a_t={a_t} b_t={b_t} at ({z},{i},{j}): got {g}, exact {exact}, error {err:e} > bound {bound:e}"
                );
                if bound > 0.0 {
                    worst = worst.max(err / bound);
                }
            }
        }
    }
    worst
}

/// Which kernel runs is visible: cooperative matrices exactly where the device lists an
/// f32-accumulating shape for the input type (never on lavapipe), else the fallback.
#[test]
fn kernel_choice_follows_the_device() {
    let ctx = ctx();
    use nx_vulkan_engine::device::CoopMatType;
    for (t, ct) in [(DType::F16, CoopMatType::F16), (DType::BF16, CoopMatType::BF16)] {
        let k = tensor_core_kernel(&ctx.caps, t);
        match ctx.caps.coopmat_shape(ct) {
            Some(s) => assert!(
                matches!(k, MatmulKernel::CoopMat { input, m, n, k, .. } if input == t && (m, n, k) == (s.m, s.n, s.k))
                    || k == MatmulKernel::HalfFallback,
                "{t}: {k:?} for shape {s}"
            ),
            None => assert_eq!(k, MatmulKernel::HalfFallback, "{t} without cooperative matrices"),
        }
        eprintln!("{}: TensorCore dot uses {k:?} (coopmat={}, shapes={})", t, ctx.caps.cooperative_matrix, ctx.caps.coopmat_shapes.len());
    }
    if !ctx.caps.cooperative_matrix {
        assert!(ctx.caps.coopmat_shapes.is_empty());
    }
}

#[test]
fn small_and_odd_sizes() {
    let ctx = ctx();
    let mut worst: f64 = 0.0;
    for input in [DType::F16, DType::BF16] {
        for out in [DType::F32, input] {
            for (i, &(m, n, k)) in [(1, 1, 1), (7, 7, 7), (1, 5, 3), (5, 1, 9), (33, 17, 65), (130, 129, 77), (128, 128, 32), (64, 200, 40)]
                .iter()
                .enumerate()
            {
                worst = worst.max(check(&ctx, input, out, 1, m, n, k, false, false, 10 + i as u64));
            }
        }
    }
    eprintln!("worst error / bound: {worst:.3}");
}

#[test]
fn long_k_and_batches() {
    let ctx = ctx();
    let mut worst: f64 = 0.0;
    for input in [DType::F16, DType::BF16] {
        worst = worst.max(check(&ctx, input, DType::F32, 1, 3, 5, 4099, false, false, 3));
        worst = worst.max(check(&ctx, input, input, 1, 9, 131, 4099, false, false, 4));
        worst = worst.max(check(&ctx, input, DType::F32, 3, 19, 23, 41, false, false, 5));
        worst = worst.max(check(&ctx, input, input, 4, 129, 7, 33, false, false, 6));
    }
    eprintln!("worst error / bound: {worst:.3}");
}

/// Every cooperative-matrix variant the device offers (each listed f32-accumulating shape,
/// K steps 32 and 64, the GEMM's tiles and the projection's smaller ones), forced, at odd
/// sizes; nothing to run where there are none (lavapipe).
#[test]
fn every_coopmat_variant() {
    let ctx = ctx();
    let mut ran = 0;
    for input in [DType::F16, DType::BF16] {
        let mut shapes: Vec<_> = ctx.caps.coopmat_shapes.iter().map(|s| (s.m, s.n, s.k)).collect();
        shapes.sort();
        shapes.dedup();
        for (m, n, k) in shapes {
            for (bm, bn, bk, staging) in [
                (128, 128, 32, CoopStaging::SharedTyped),
                (128, 128, 64, CoopStaging::SharedTyped),
                (128, 128, 32, CoopStaging::SharedWords),
                (128, 128, 64, CoopStaging::Global),
                (256, 128, 32, CoopStaging::SharedTyped),
                (128, 256, 32, CoopStaging::SharedTyped),
                // the projection's small tiles (matmul::COOP_LINEAR_TILES), forced for a dot
                (64, 64, 64, CoopStaging::SharedTyped),
                (32, 32, 32, CoopStaging::SharedTyped),
                (16, 16, 64, CoopStaging::SharedTyped),
                (16, 16, 32, CoopStaging::SharedWords),
            ] {
                {
                    let kernel = MatmulKernel::CoopMat { input, m, n, k, bm, bn, bk, staging };
                    if !coopmat_runs_here(&ctx.caps, kernel) {
                        continue;
                    }
                    // Global staging takes only tile-multiple, contiguous operands.
                    let sizes: &[[usize; 4]] = if staging == CoopStaging::Global {
                        &[[1, 256, 256, 64], [2, 256, 512, 192]]
                    } else {
                        &[[1, 1, 1, 1], [1, 7, 7, 7], [2, 133, 70, 100], [1, 300, 260, 128]]
                    };
                    for (i, &dims) in sizes.iter().enumerate() {
                        for out in [DType::F32, input] {
                            // transposed operands: strided A loads, k-major B tiles
                            let a_t = staging != CoopStaging::Global && i % 2 == 1;
                            let b_t = staging != CoopStaging::Global && i >= 2;
                            check_with(&ctx, Some(kernel), input, out, dims, a_t, b_t, 40 + i as u64);
                        }
                    }
                    ran += 1;
                    eprintln!("checked {kernel:?}");
                }
            }
        }
    }
    eprintln!("{ran} cooperative-matrix variants checked");
}

/// Every coopmat2 tile the benchmarks try, forced (f32 output: the kernel writes f32), at
/// sizes 1, 7, tile remainders, K = 4099, batches and every operand orientation (the
/// transposing tensor views); nothing to run without VK_NV_cooperative_matrix2 (lavapipe).
#[test]
fn every_coopmat2_tile() {
    let ctx = ctx();
    let mut ran = 0;
    let mut worst: f64 = 0.0;
    for input in [DType::F16, DType::BF16] {
        for (bm, bn, bk) in [(128, 128, 32), (128, 128, 64), (128, 256, 32), (128, 256, 64), (256, 128, 32), (256, 128, 64), (64, 128, 64)] {
            let Some(kernel) = coopmat2_kernel(&ctx.caps, input, bm, bn, bk) else { continue };
            let sizes: [[usize; 4]; 6] = [[1, 1, 1, 1], [1, 7, 7, 7], [2, 133, 70, 100], [1, 300, 260, 128], [1, 3, 5, 4099], [3, 256, 256, 256]];
            for (i, &dims) in sizes.iter().enumerate() {
                let (a_t, b_t) = (i % 2 == 1, i % 3 == 2);
                worst = worst.max(check_with(&ctx, Some(kernel), input, DType::F32, dims, a_t, b_t, 70 + i as u64));
            }
            // it writes f32 only: asking for f16/bf16 output is an error
            let t = upload(&ctx, input, &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
            assert!(ctx.dot_using(Some(kernel), &t, &[1], &[], &t, &[0], &[], input).is_err());
            ran += 1;
            eprintln!("checked {kernel:?}");
        }
    }
    if !ctx.caps.coopmat2 {
        let forced = MatmulKernel::CoopMat2 { input: DType::F16, bm: 128, bn: 128, bk: 32, workgroup: 256 };
        let t = upload(&ctx, DType::F16, &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
        assert!(ctx.dot_using(Some(forced), &t, &[1], &[], &t, &[0], &[], DType::F32).is_err(), "refused without coopmat2");
    }
    eprintln!("{ran} coopmat2 tiles checked, worst error / bound {worst:.3}");
}

/// The larger workgroup tiles (256×128, 128×256: 64×64 per subgroup) of the device's chosen
/// shape, forced, at odd sizes and both output types.
#[test]
fn larger_workgroup_tiles() {
    let ctx = ctx();
    use nx_vulkan_engine::device::CoopMatType;
    for input in [DType::F16, DType::BF16] {
        let Some(shape) = ctx.caps.coopmat_shape(if input == DType::BF16 { CoopMatType::BF16 } else { CoopMatType::F16 }) else { continue };
        let (m, n, k) = (shape.m, shape.n, shape.k);
        for (bm, bn) in [(256, 128), (128, 256)] {
            let kernel = MatmulKernel::CoopMat { input, m, n, k, bm, bn, bk: 32, staging: CoopStaging::SharedTyped };
            if !coopmat_runs_here(&ctx.caps, kernel) {
                continue;
            }
            for (i, dims) in [[2, 133, 70, 100], [1, 300, 260, 128], [1, 7, 513, 33]].into_iter().enumerate() {
                for out in [DType::F32, input] {
                    check_with(&ctx, Some(kernel), input, out, dims, i == 2, false, 60 + i as u64);
                }
            }
            eprintln!("checked {kernel:?}");
        }
    }
}

/// Transposed operands (contraction axis not contiguous: the strided-load variants).
#[test]
fn transposed_operands() {
    let ctx = ctx();
    for input in [DType::F16, DType::BF16] {
        check(&ctx, input, DType::F32, 2, 37, 21, 45, true, false, 7);
        check(&ctx, input, input, 1, 37, 21, 45, false, true, 8);
        check(&ctx, input, DType::F32, 1, 130, 70, 96, true, true, 9);
    }
}

/// NaN and Inf propagate; a sum beyond f16's range is Inf in f16 and finite in f32 (the
/// accumulator is f32, rounded once).
#[test]
fn special_values() {
    let ctx = ctx();
    for input in [DType::F16, DType::BF16] {
        let (m, k, n) = (3usize, 5usize, 4usize);
        let mut a = vec![1.0; m * k];
        a[0] = f64::NAN; // row 0: NaN everywhere
        a[k] = f64::INFINITY; // row 1: +Inf times positive b
        let b = vec![0.5; k * n];
        let ta = upload(&ctx, input, &[m, k], &a);
        let tb = upload(&ctx, input, &[k, n], &b);
        let c = read(&ctx, &ctx.dot_with(DotPrecision::TensorCore, &ta, &[1], &[], &tb, &[0], &[], DType::F32).unwrap());
        for j in 0..n {
            assert!(c[j].is_nan(), "{input}: NaN row");
            assert_eq!(c[n + j], f64::INFINITY, "{input}: Inf row");
            assert_eq!(c[2 * n + j], 2.5, "{input}: finite row");
        }
        let big = upload(&ctx, input, &[1, 4], &[256.0; 4]);
        let big_b = upload(&ctx, input, &[4, 1], &[256.0; 4]);
        let as_f32 = read(&ctx, &ctx.dot_with(DotPrecision::TensorCore, &big, &[1], &[], &big_b, &[0], &[], DType::F32).unwrap());
        assert_eq!(as_f32, vec![262144.0]);
        let as_in = read(&ctx, &ctx.dot_with(DotPrecision::TensorCore, &big, &[1], &[], &big_b, &[0], &[], input).unwrap());
        if input == DType::F16 {
            assert_eq!(as_in, vec![f64::INFINITY], "beyond f16's range");
        } else {
            assert_eq!(as_in, vec![262144.0]);
        }
    }
}

/// The default dot of f16/bf16 stays exact (f64 accumulation, one rounding): TensorCore is
/// only ever chosen explicitly.
#[test]
fn default_dot_is_unchanged() {
    let ctx = ctx();
    for input in [DType::F16, DType::BF16] {
        let (m, k, n) = (6usize, 300usize, 5usize);
        let a = data(input, m * k, 21);
        let b = data(input, k * n, 22);
        let ta = upload(&ctx, input, &[m, k], &a);
        let tb = upload(&ctx, input, &[k, n], &b);
        let c = read(&ctx, &ctx.dot(&ta, &[1], &[], &tb, &[0], &[], input).unwrap());
        for i in 0..m {
            for j in 0..n {
                let exact: f64 = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
                let want = dec(input, &enc(input, exact));
                // Nx's bf16 rounding keeps the f32's top bits; f16 rounds to nearest
                let want = if input == DType::BF16 { f64::from(f32::from_bits((exact as f32).to_bits() & 0xffff_0000)) } else { want };
                assert_eq!(c[i * n + j].to_bits(), want.to_bits(), "{input} exact dot at ({i},{j})");
            }
        }
    }
}

/// Asking for the CoopMat kernel where the device cannot run it is an error, not a panic.
#[test]
fn coopmat_kernel_is_refused_where_absent() {
    let ctx = ctx();
    let t = upload(&ctx, DType::F16, &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let forced = MatmulKernel::CoopMat { input: DType::F16, m: 16, n: 16, k: 16, bm: 128, bn: 128, bk: 32, staging: CoopStaging::SharedTyped };
    let r = ctx.dot_using(Some(forced), &t, &[1], &[], &t, &[0], &[], DType::F32);
    if !coopmat_runs_here(&ctx.caps, forced) {
        assert!(r.is_err());
    }
    assert!(ctx.dot_using(Some(MatmulKernel::HalfFallback), &t, &[1], &[], &t, &[0], &[], DType::F32).is_err());
}

/// Throughput of the TensorCore dot (`cargo test --release --test coopmat -- --ignored
/// --nocapture bench_tensor_core`): sizes from NX_BENCH_SIZES (`b:m:n:k,...`).
#[test]
#[ignore]
fn bench_tensor_core() {
    let ctx = ctx();
    let sizes = std::env::var("NX_BENCH_SIZES").unwrap_or("1:1024:1024:1024".into());
    for input in [DType::F16, DType::BF16] {
        for spec in sizes.split(',') {
            let d: Vec<usize> = spec.split(':').map(|x| x.parse().unwrap()).collect();
            let (bsz, m, n, k) = (d[0], d[1], d[2], d[3]);
            let a = upload(&ctx, input, &[bsz, m, k], &data(input, bsz * m * k, 1));
            let b = upload(&ctx, input, &[bsz, k, n], &data(input, bsz * k * n, 2));
            let run = || ctx.dot_with(DotPrecision::TensorCore, &a, &[2], &[0], &b, &[1], &[0], input).unwrap();
            for _ in 0..3 {
                run();
            }
            ctx.synchronize().unwrap();
            let reps = 20;
            let mut times = vec![];
            for _ in 0..reps {
                let t0 = std::time::Instant::now();
                let c = run();
                ctx.synchronize().unwrap();
                times.push(t0.elapsed().as_secs_f64());
                drop(c);
            }
            times.sort_by(|x, y| x.partial_cmp(y).unwrap());
            let med = times[reps / 2];
            let tflops = 2.0 * (bsz * m * n * k) as f64 / med / 1e12;
            println!(
                "BENCH tensor-core {input} {bsz}x{m}x{n}x{k} {:?}: median {:.3} ms, {tflops:.1} TFLOP/s",
                tensor_core_kernel(&ctx.caps, input),
                med * 1e3
            );
        }
    }
}

/// TensorCore on operands that are not f16/bf16 is what it says it is: f32 dots are the SGEMM
/// (`F32Accumulate`, the same bits), f64 and integer dots stay exact (the default's bits).
#[test]
fn other_types_keep_their_paths() {
    let ctx = ctx();
    let (m, k, n) = (5usize, 37usize, 3usize);
    for (t, other) in [(DType::F32, DotPrecision::F32Accumulate), (DType::F64, DotPrecision::Exact), (DType::S32, DotPrecision::Exact)] {
        let vals = |len: usize, seed: usize| -> Vec<u8> {
            (0..len)
                .flat_map(|i| {
                    let x = ((i * 7919 + seed) % 201) as f64 / 16.0 - 6.0;
                    match t {
                        DType::F32 => (x as f32).to_le_bytes().to_vec(),
                        DType::F64 => x.to_le_bytes().to_vec(),
                        _ => ((x * 16.0) as i32).to_le_bytes().to_vec(),
                    }
                })
                .collect()
        };
        let a = ctx.upload(t, &[m, k], &vals(m * k, 1)).unwrap();
        let b = ctx.upload(t, &[k, n], &vals(k * n, 2)).unwrap();
        let tc = ctx.download(&ctx.dot_with(DotPrecision::TensorCore, &a, &[1], &[], &b, &[0], &[], t).unwrap()).unwrap();
        let want = ctx.download(&ctx.dot_with(other, &a, &[1], &[], &b, &[0], &[], t).unwrap()).unwrap();
        assert_eq!(tc, want, "{t}");
    }
}

/// int8 × int8 → int32 under `DotPrecision::TensorCore`: exact on cooperative matrices (int32
/// accumulation; no overflow below K = 2^17) and on the fallback (the exact integer kernel),
/// so every output equals the CPU's i64 sum — at sizes 1, 7, tile remainders, K = 4099,
/// batches, transposed operands (strided loads) and the extremes (-128 · -128 over all of K).
/// Which kernel runs is visible: the int8 cooperative-matrix kernel exactly where the device
/// lists an int8 shape with int32 accumulation.
#[test]
fn int8_products_are_exact() {
    let ctx = ctx();
    let kernel = tensor_core_kernel(&ctx.caps, DType::S8);
    let listed = ctx.caps.coopmat_shapes.iter().any(|s| {
        use nx_vulkan_engine::device::CoopMatType::{I32, I8};
        s.a == I8 && s.b == I8 && s.c == I32 && s.result == I32 && s.scope == "subgroup"
    });
    assert_eq!(matches!(kernel, MatmulKernel::CoopMat { input: DType::S8, .. }), listed && ctx.caps.cooperative_matrix, "{kernel:?}");
    eprintln!("{}: int8 TensorCore dot uses {kernel:?}", ctx.caps.name);
    let bytes = |n: usize, seed: u64, extreme: bool| -> Vec<i8> { xorshift(seed).take(n).map(|s| if extreme { -128 } else { (s >> 56) as u8 as i8 }).collect() };
    for (i, ([bsz, m, n, k], a_t, b_t, extreme)) in [
        ([1, 1, 1, 1], false, false, false),
        ([1, 7, 5, 3], false, false, false),
        ([1, 129, 131, 4099], false, false, false),
        ([3, 65, 130, 300], false, false, false),
        ([2, 128, 128, 256], false, false, false),
        ([2, 37, 41, 75], true, false, false),
        ([2, 37, 41, 75], false, true, false),
        ([1, 33, 17, 4099], false, false, true),
    ]
    .into_iter()
    .enumerate()
    {
        let a = bytes(bsz * m * k, 40 + i as u64, extreme);
        let b = bytes(bsz * k * n, 50 + i as u64, extreme);
        let a_shape = if a_t { [bsz, k, m] } else { [bsz, m, k] };
        let b_shape = if b_t { [bsz, n, k] } else { [bsz, k, n] };
        let ta = ctx.upload(DType::S8, &a_shape, &a.iter().map(|&x| x as u8).collect::<Vec<_>>()).unwrap();
        let tb = ctx.upload(DType::S8, &b_shape, &b.iter().map(|&x| x as u8).collect::<Vec<_>>()).unwrap();
        let (ca, cb) = (if a_t { 1 } else { 2 }, if b_t { 2 } else { 1 });
        let c = ctx.dot_with(DotPrecision::TensorCore, &ta, &[ca], &[0], &tb, &[cb], &[0], DType::S32).unwrap();
        let got: Vec<i32> = ctx.download(&c).unwrap().chunks(4).map(|x| i32::from_le_bytes(x.try_into().unwrap())).collect();
        for z in 0..bsz {
            for r in 0..m {
                for col in 0..n {
                    let mut want = 0i64;
                    for l in 0..k {
                        let x = if a_t { a[z * k * m + l * m + r] } else { a[z * m * k + r * k + l] } as i64;
                        let y = if b_t { b[z * n * k + col * k + l] } else { b[z * k * n + l * n + col] } as i64;
                        want += x * y;
                    }
                    assert_eq!(got[z * m * n + r * n + col] as i64, want, "[{bsz},{m},{n},{k}] a_t={a_t} b_t={b_t} at ({z},{r},{col})");
                }
            }
        }
    }
}
