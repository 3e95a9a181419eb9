//! `DotPrecision::SplitF32`: f32 products as three f16 products (per-row/column power-of-two
//! scales, two f16 parts per operand; `split_f32.rs`), against an f64 reference.
//!
//! Error bound. With a = 2^-ea (ha + la + δa), |δa| ≤ 2^-11 |la| ≤ 2^-22 |a·2^ea| (and the
//! same for b), the three products ha·hb + ha·lb + la·hb (each exact in f32) differ from a·b
//! by the dropped la·lb and the δ terms: at most 2^-20 |a b| in all. They are summed in f32 —
//! 3·Kp terms on the fallback (lavapipe), in the tensor cores' own order on cooperative
//! matrices — with a unit roundoff of 2^-23 assumed (tensor cores may truncate), so
//! |c − ref| ≤ (3·Kp·2^-23 + 2^-20) · Σ_k |a_k b_k| · (1 + 2^-10). The unscaling is exact.
//!
//! Beside that bound, each case measures the SGEMM's (`F32Accumulate`) error on the same
//! inputs and prints both (the goal: split-f32 within 2× of an FP32 GEMM's error).

use nx_vulkan_engine::matmul::{split_f32_kernel, tensor_core_kernel, DotPrecision, MatmulKernel};
use nx_vulkan_engine::*;
use std::sync::Arc;

fn ctx() -> Arc<Context> {
    Context::global().expect("device")
}

/// f32 values in [-2, 2) with all 24 bits of significand in play.
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0) as f32
        })
        .collect()
}

fn upload(ctx: &Context, shape: &[usize], v: &[f32]) -> Tensor {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    ctx.upload(DType::F32, shape, &bytes).unwrap()
}

fn read(ctx: &Context, t: &Tensor) -> Vec<f32> {
    ctx.download(t).unwrap().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// The worst errors (max |c − ref| / Σ|ab| over the outputs) of a case.
struct Errors {
    split: f64,
    sgemm: f64,
}

/// `a` is `[bsz, m, k]` (`[bsz, k, m]` when `a_t`), `b` `[bsz, k, n]` (`[bsz, n, k]` when
/// `b_t`); checks the split-f32 dot against f64 sums with the stated bound and measures the
/// SGEMM's error beside it.
fn check(ctx: &Context, [bsz, m, n, k]: [usize; 4], a_t: bool, b_t: bool, a: &[f32], b: &[f32]) -> Errors {
    let a_shape = if a_t { [bsz, k, m] } else { [bsz, m, k] };
    let b_shape = if b_t { [bsz, n, k] } else { [bsz, k, n] };
    let (ta, tb) = (upload(ctx, &a_shape, a), upload(ctx, &b_shape, b));
    let (ca, cb) = (if a_t { 1 } else { 2 }, if b_t { 2 } else { 1 });
    let split = read(ctx, &ctx.dot_with(DotPrecision::SplitF32, &ta, &[ca], &[0], &tb, &[cb], &[0], DType::F32).unwrap());
    let sgemm = read(ctx, &ctx.dot_with(DotPrecision::F32Accumulate, &ta, &[ca], &[0], &tb, &[cb], &[0], DType::F32).unwrap());
    let kp = k.div_ceil(8).max(1) * 8;
    let unit = (3 * kp) as f64 * 2f64.powi(-23) + 2f64.powi(-20);
    let mut errs = Errors { split: 0.0, sgemm: 0.0 };
    for z in 0..bsz {
        for i in 0..m {
            for j in 0..n {
                let (mut exact, mut mag) = (0.0f64, 0.0f64);
                for l in 0..k {
                    let x = if a_t { a[z * k * m + l * m + i] } else { a[z * m * k + i * k + l] } as f64;
                    let y = if b_t { b[z * n * k + j * k + l] } else { b[z * k * n + l * n + j] } as f64;
                    exact += x * y; // each product exact in f64; the sum's error is negligible here
                    mag += (x * y).abs();
                }
                let at = z * m * n + i * n + j;
                let (g, s) = (split[at] as f64, sgemm[at] as f64);
                let bound = unit * mag * (1.0 + 2f64.powi(-10));
                let err = (g - exact).abs();
                assert!(
                    err <= bound,
                    "[{bsz},{m},{k}]x[{k},{n}] a_t={a_t} b_t={b_t} at ({z},{i},{j}): got {g}, exact {exact}, error {err:e} > bound {bound:e}"
                );
                if mag > 0.0 {
                    errs.split = errs.split.max(err / mag);
                    errs.sgemm = errs.sgemm.max((s - exact).abs() / mag);
                }
            }
        }
    }
    errs
}

fn report(what: &str, e: &Errors) {
    eprintln!(
        "{what}: split-f32 worst error {:.3e} of sum|ab|, SGEMM {:.3e} (ratio {:.2})",
        e.split,
        e.sgemm,
        if e.sgemm > 0.0 { e.split / e.sgemm } else { f64::NAN }
    );
}

/// Which GEMM multiplies the parts is visible: cooperative matrices (f16) exactly where the
/// device has them (never on lavapipe), else the f32 tiled kernel; and the split runs as its
/// seven dispatches (fill, two max passes, two split passes, the GEMM, the unscaling), two of
/// them without a barrier in front — on a context of its own, so other tests' work is not
/// counted.
#[test]
fn kernel_and_dispatches_follow_the_device() {
    let ctx = Context::open(&DeviceSelector::from_env()).unwrap();
    let gemm = split_f32_kernel(&ctx.caps);
    match tensor_core_kernel(&ctx.caps, DType::F16) {
        k @ MatmulKernel::CoopMat { .. } => assert_eq!(gemm, k),
        _ => assert!(matches!(gemm, MatmulKernel::Tiled { dtype: DType::F32, .. }), "{gemm:?}"),
    }
    eprintln!("{}: split-f32 multiplies its parts with {gemm:?}", ctx.caps.name);
    // (K = 8: two K steps, too few for the fallback to split K into slices)
    let (a, b) = (upload(&ctx, &[9, 8], &data(72, 1)), upload(&ctx, &[8, 11], &data(88, 2)));
    ctx.synchronize().unwrap();
    let before = ctx.stats();
    let c = ctx.dot_with(DotPrecision::SplitF32, &a, &[1], &[], &b, &[0], &[], DType::F32).unwrap();
    ctx.synchronize().unwrap();
    let after = ctx.stats();
    assert_eq!(c.shape(), &[9, 11]);
    assert_eq!(after.dispatches - before.dispatches, 7);
    assert_eq!(after.concurrent_dispatches - before.concurrent_dispatches, 2);
}

/// Sizes 1, 7, tile remainders, K = 4099, K not a multiple of 8 (zero padding), batches.
#[test]
fn odd_sizes_long_k_and_batches() {
    let ctx = ctx();
    for (i, dims) in [[1, 1, 1, 1], [1, 7, 5, 3], [1, 33, 17, 129], [3, 65, 130, 300], [1, 129, 131, 4099], [2, 16, 8, 64]].into_iter().enumerate() {
        let [bsz, m, n, k] = dims;
        let (a, b) = (data(bsz * m * k, 10 + i as u64), data(bsz * k * n, 20 + i as u64));
        let e = check(&ctx, dims, false, false, &a, &b);
        report(&format!("{dims:?}"), &e);
    }
}

/// Transposed operands (the split passes read strided views).
#[test]
fn transposed_operands() {
    let ctx = ctx();
    let dims = [2, 37, 41, 75];
    let [bsz, m, n, k] = dims;
    for (a_t, b_t) in [(true, false), (false, true), (true, true)] {
        let (a, b) = (data(bsz * m * k, 3), data(bsz * k * n, 4));
        let e = check(&ctx, dims, a_t, b_t, &a, &b);
        report(&format!("{dims:?} a_t={a_t} b_t={b_t}"), &e);
    }
}

/// The scales: rows of A over 2^±100 and columns of B over 2^±20 (f16 alone would overflow
/// to Inf or flush to zero on most of them) keep the bound relative to each output's Σ|ab|;
/// then rows over 2^±120 against a plain B (outputs stay normal f32s: flushing devices agree).
#[test]
fn per_row_and_column_scales_cover_f32_range() {
    let ctx = ctx();
    let (m, n, k) = (12usize, 10usize, 97usize);
    let row_exp = [-100, -60, -30, -14, -1, 0, 3, 16, 17, 40, 70, 100];
    let col_exp = [-20, -15, -11, -10, 0, 5, 11, 15, 17, 20];
    let mut a = data(m * k, 5);
    let mut b = data(k * n, 6);
    for i in 0..m {
        for l in 0..k {
            a[i * k + l] *= 2f32.powi(row_exp[i]);
        }
    }
    for l in 0..k {
        for j in 0..n {
            b[l * n + j] *= 2f32.powi(col_exp[j]);
        }
    }
    let e = check(&ctx, [1, m, n, k], false, false, &a, &b);
    report("scaled rows/columns", &e);
    let mut a = data(m * k, 7);
    for i in 0..m {
        for l in 0..k {
            a[i * k + l] *= 2f32.powi([-120, -100, -64, -20, 0, 20, 64, 100, 120, -110, 110, 1][i]);
        }
    }
    let e = check(&ctx, [1, m, n, k], false, false, &a, &data(k * n, 8));
    report("rows over 2^±120", &e);
}

/// NaN and ±Inf give IEEE's answers (the outputs they reach are recomputed as plain f32 dots)
/// and do not set a row's scale: the other outputs of that row keep their precision. K = 0
/// gives zeros; an empty output nothing.
#[test]
fn special_values_and_empty() {
    let ctx = ctx();
    let (m, n, k) = (4usize, 4usize, 9usize);
    let mut a = data(m * k, 9);
    let mut b: Vec<f32> = data(k * n, 10).iter().map(|x| x.abs() + 0.25).collect();
    a[0] = f32::NAN; // row 0: NaN everywhere
    a[k] = f32::INFINITY; // row 1: +Inf where b > 0 ...
    b[n - 1] = 0.0; // ... and NaN in column n-1 (Inf · 0)
    a[2 * k + 1] = 3.0e38; // row 2: a large finite value sets the scale
    a[3 * k + 3] = f32::NEG_INFINITY; // row 3: -Inf + Inf = NaN
    a[3 * k + 5] = f32::INFINITY;
    b[4 * n + 1] = f32::NAN; // column 1: NaN in every row
    let c = read(&ctx, &ctx.dot_with(DotPrecision::SplitF32, &upload(&ctx, &[m, k], &a), &[1], &[], &upload(&ctx, &[k, n], &b), &[0], &[], DType::F32).unwrap());
    for i in 0..m {
        for j in 0..n {
            let got = c[i * n + j];
            let nan = i == 0 || i == 3 || j == 1 || (i == 1 && j == n - 1);
            if nan {
                assert!(got.is_nan(), "({i},{j}): {got}");
                assert_eq!(got.to_bits(), 0x7FC0_0000, "canonical NaN");
            } else if i == 1 {
                assert_eq!(got, f32::INFINITY, "({i},{j})");
            } else {
                let exact: f64 = (0..k).map(|l| a[i * k + l] as f64 * b[l * n + j] as f64).sum();
                let mag: f64 = (0..k).map(|l| (a[i * k + l] as f64 * b[l * n + j] as f64).abs()).sum();
                if exact.abs() < f32::MAX as f64 {
                    assert!((got as f64 - exact).abs() <= 1e-5 * mag, "({i},{j}): {got} vs {exact}");
                } else {
                    assert!(got.is_infinite(), "({i},{j}): {got} vs {exact}");
                }
            }
        }
    }
    // K = 0: zeros
    let z = ctx.dot_with(DotPrecision::SplitF32, &upload(&ctx, &[3, 0], &[]), &[1], &[], &upload(&ctx, &[0, 2], &[]), &[0], &[], DType::F32).unwrap();
    assert_eq!(read(&ctx, &z), vec![0.0; 6]);
    // an empty output
    let e = ctx.dot_with(DotPrecision::SplitF32, &upload(&ctx, &[0, 5], &[]), &[1], &[], &upload(&ctx, &[5, 2], &data(10, 1)), &[0], &[], DType::F32).unwrap();
    assert_eq!(e.shape(), &[0, 2]);
}

/// Denormal inputs are scaled from their bits: a row of denormals times columns of 2^40 gives
/// normal outputs within the bound, also where the device flushes f32 denormals (the H200,
/// whose SGEMM reads them as zero).
#[test]
fn denormal_inputs_are_kept() {
    let ctx = ctx();
    let (m, n, k) = (3usize, 5usize, 33usize);
    let mut a = data(m * k, 12);
    for l in 0..k {
        // row 1: denormals of every size (mantissa bits only), both signs
        let bits = ((l as u32 * 2_654_435_761) >> 9) & 0x7F_FFFF | 1;
        a[k + l] = f32::from_bits(bits | if l % 3 == 0 { 0x8000_0000 } else { 0 });
    }
    let b: Vec<f32> = data(k * n, 13).iter().map(|x| x * 2f32.powi(40)).collect();
    let e = check(&ctx, [1, m, n, k], false, false, &a, &b);
    report("denormal row", &e);
}

/// Other operand or output types under SplitF32 take F32Accumulate's path (the same bits), and
/// a shape mismatch is an error, not a panic.
#[test]
fn other_types_and_bad_shapes() {
    let ctx = ctx();
    let a = ctx.convert(&upload(&ctx, &[5, 8], &data(40, 11)), DType::F16).unwrap();
    let b = ctx.convert(&upload(&ctx, &[8, 3], &data(24, 12)), DType::F16).unwrap();
    let split = ctx.download(&ctx.dot_with(DotPrecision::SplitF32, &a, &[1], &[], &b, &[0], &[], DType::F32).unwrap()).unwrap();
    let sgemm = ctx.download(&ctx.dot_with(DotPrecision::F32Accumulate, &a, &[1], &[], &b, &[0], &[], DType::F32).unwrap()).unwrap();
    assert_eq!(split, sgemm);
    let x = upload(&ctx, &[4, 5], &data(20, 1));
    let err = ctx.dot_with(DotPrecision::SplitF32, &x, &[1], &[], &x, &[1], &[], DType::F32);
    assert!(err.is_ok(), "x · xᵀ contracts 5 with 5");
    assert!(ctx.dot_with(DotPrecision::SplitF32, &x, &[1], &[], &x, &[0], &[], DType::F32).is_err(), "5 against 4");
}

/// The error table (`cargo test --release --test split_f32 -- --ignored --nocapture
/// error_table`): split-f32 and the SGEMM against f64 on fixed inputs, as JSON lines;
/// `bench/split_f32_errors.py` measures PyTorch's FP32 (cuBLAS) and bf16 GEMMs on the same
/// inputs (the same generator). Metrics: the worst |c − ref| / Σ|ab| over the outputs, and
/// the relative Frobenius error ‖c − ref‖ / ‖ref‖.
#[test]
#[ignore]
fn error_table() {
    let ctx = ctx();
    for (m, n, k, sa, sb) in [(256usize, 256usize, 4096usize, 101u64, 102u64), (1024, 1024, 1024, 103, 104)] {
        let (a, b) = (data(m * k, sa), data(k * n, sb));
        let (ta, tb) = (upload(&ctx, &[m, k], &a), upload(&ctx, &[k, n], &b));
        let mut exact = vec![0f64; m * n];
        let mut mag = vec![0f64; m * n];
        for i in 0..m {
            for l in 0..k {
                let x = a[i * k + l] as f64;
                for j in 0..n {
                    let p = x * b[l * n + j] as f64;
                    exact[i * n + j] += p;
                    mag[i * n + j] += p.abs();
                }
            }
        }
        for (name, precision) in [("split-f32", DotPrecision::SplitF32), ("sgemm", DotPrecision::F32Accumulate)] {
            let c = read(&ctx, &ctx.dot_with(precision, &ta, &[1], &[], &tb, &[0], &[], DType::F32).unwrap());
            let (mut worst, mut e2, mut r2) = (0f64, 0f64, 0f64);
            for i in 0..m * n {
                let e = c[i] as f64 - exact[i];
                worst = worst.max(e.abs() / mag[i]);
                e2 += e * e;
                r2 += exact[i] * exact[i];
            }
            println!(
                "{{\"case\":\"{m}x{n}x{k}\",\"seeds\":[{sa},{sb}],\"impl\":\"{name}\",\"max_err_of_sum_abs\":{worst:e},\"rel_fro\":{:e},\"device\":{:?},\"mode\":{:?}}}",
                (e2 / r2).sqrt(),
                ctx.caps.name,
                std::env::var("NX_VULKAN_SPLIT_F32").unwrap_or_default()
            );
        }
    }
}

/// `DotPrecision::TensorCore` (`:fast`) takes split-f32 for large f32 products on devices
/// with f16 cooperative matrices only: the rule, and on such a device one 2048³ product run
/// both ways (the same bits, seven dispatches); elsewhere the SGEMM's bits.
#[test]
fn tensor_core_precision_splits_large_f32_products_only() {
    use nx_vulkan_engine::matmul::tensor_core_f32_uses_split;
    let ctx = Context::open(&DeviceSelector::from_env()).unwrap();
    let coop = matches!(split_f32_kernel(&ctx.caps), MatmulKernel::CoopMat { .. });
    assert_eq!(tensor_core_f32_uses_split(&ctx.caps, 2048, 2048, 2048), coop);
    assert_eq!(tensor_core_f32_uses_split(&ctx.caps, 4096, 4096, 512), coop);
    assert!(!tensor_core_f32_uses_split(&ctx.caps, 1024, 1024, 1024));
    assert!(!tensor_core_f32_uses_split(&ctx.caps, 2048, 2048, 2047));
    let (m, n, k) = if coop { (2048, 2048, 2048) } else { (64, 48, 40) };
    let (a, b) = (upload(&ctx, &[m, k], &data(m * k, 31)), upload(&ctx, &[k, n], &data(k * n, 32)));
    ctx.synchronize().unwrap();
    let before = ctx.stats().dispatches;
    let tc = ctx.download(&ctx.dot_with(DotPrecision::TensorCore, &a, &[1], &[], &b, &[0], &[], DType::F32).unwrap()).unwrap();
    let dispatches = ctx.stats().dispatches - before;
    let other = if coop { DotPrecision::SplitF32 } else { DotPrecision::F32Accumulate };
    let want = ctx.download(&ctx.dot_with(other, &a, &[1], &[], &b, &[0], &[], DType::F32).unwrap()).unwrap();
    assert_eq!(tc, want, "TensorCore gives {other:?}'s bits here");
    if coop {
        assert_eq!(dispatches, 7);
    }
}
