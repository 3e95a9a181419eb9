//! The encoder's kernels (encoder/kernels.rs) against plain CPU references written here: f64
//! accumulation of the same f32 (or f16/bf16-rounded) inputs, compared with stated bounds.
//! Odd sizes (tile remainders), ragged batches, special values, empty batches, argument errors,
//! one dispatch per kernel, and the batch-independence contract (a row's / a sequence's bits
//! do not change with the rest of the batch).
//!
//! Bounds (u = 2^-24, f32's unit roundoff):
//! - linear: each output is an f32 fma chain over K, so |gpu - ref| <= (K + 2)·u·S with
//!   (fp16/bf16 on tensor cores, `linear_uses_tensor_cores`: 2u per addition, the hardware's
//!   order and alignment; never on lavapipe, so CI checks the shared-memory path and the H200
//!   run this one)
//!   S = Σ_k |x_k·w_k| + |bias| (recursive summation); GELU's derivative is at most 1.13 and
//!   its own error a few ulp, plus |v|·2^-22 where 1 + erf(v/√2) cancels (v < 0: PyTorch's f32
//!   formula loses the same bits); the residual add one more rounding.
//! - compensated linear: against the same split done in f64 (bf16 hi = bf16(v), lo =
//!   bf16(v - hi), products hi·hi + hi·lo + lo·hi): (K + 3)·u·S (two f32 chains, the lo chain
//!   2^-7 of the size of the hi one, and their sum); against the exact Σ x·w that plus the
//!   split's own 3.01·2^-16·Σ|x·w| (lo·lo, x·δw, δx·w with |δ| <= 2^-16·|v|).
//! - erf: within 2 ulp of MPFR's erf rounded to f32 (`rug`).
//! - layernorm: relative to the row's scale: 1e-5·(|γ|·|x̂| + |β|) + 1e-6 (f32 mean/variance
//!   over H <= 1024 values, a tree sum: error O(log H · u) of the row's magnitude).
//! - attention: per query, max_j |δs_j| with δs_j = (D + 2)·u·scale·Σ_d |q_d·k_jd| (the score
//!   error) moves the softmax weights by at most 2·δs relatively, so |gpu - ref| <=
//!   (2·δs + 1e-5)·max|v| (exp about an ulp, the accumulation over <= 512 keys).
//! - pooling: mean of <= 64 rows in f32: 1e-5 relative to max|x|; normalisation a few ulp.

mod common;
use common::on_engine;
use common::on_engine_alone;
use half::{bf16, f16};
use nx_vulkan_engine::encoder::kernels::{linear_tile, linear_uses_tensor_cores, AttentionScores};
use nx_vulkan_engine::matmul::CoopLinearTile;
use nx_vulkan_engine::encoder::{Activation, Pooling, Precision};
use nx_vulkan_engine::*;

const U: f64 = 1.0 / 16777216.0;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [-a, a).
    fn f(&mut self, a: f32) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * a
    }
    fn vec(&mut self, n: usize, a: f32) -> Vec<f32> {
        (0..n).map(|_| self.f(a)).collect()
    }
}

fn up_f32(ctx: &Context, shape: &[usize], v: &[f32]) -> Tensor {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    ctx.upload(DType::F32, shape, &bytes).unwrap()
}

fn up_u32(ctx: &Context, v: &[u32]) -> Tensor {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    ctx.upload(DType::U32, &[v.len()], &bytes).unwrap()
}

fn down(ctx: &Context, t: &Tensor) -> Vec<f32> {
    ctx.download(t).unwrap().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The weights as the precision stores them (uploaded) and their values as f64.
fn weights(ctx: &Context, p: Precision, n: usize, k: usize, w: &[f32]) -> (Tensor, Vec<f64>) {
    match p {
        Precision::Fp16 => {
            let h: Vec<f16> = w.iter().map(|&x| f16::from_f32(x)).collect();
            let bytes: Vec<u8> = h.iter().flat_map(|x| x.to_le_bytes()).collect();
            (ctx.upload(DType::F16, &[n, k], &bytes).unwrap(), h.iter().map(|x| x.to_f64()).collect())
        }
        Precision::Bf16 => {
            let h: Vec<bf16> = w.iter().map(|&x| bf16::from_f32(x)).collect();
            let bytes: Vec<u8> = h.iter().flat_map(|x| x.to_le_bytes()).collect();
            (ctx.upload(DType::BF16, &[n, k], &bytes).unwrap(), h.iter().map(|x| x.to_f64()).collect())
        }
        _ => (up_f32(ctx, &[n, k], w), w.iter().map(|&x| x as f64).collect()),
    }
}

/// An activation as the precision rounds it on load.
fn round_x(p: Precision, x: f32) -> f64 {
    match p {
        Precision::Fp16 => f16::from_f32(x).to_f64(),
        Precision::Bf16 => bf16::from_f32(x).to_f64(),
        _ => x as f64,
    }
}

fn erf64(x: f64) -> f64 {
    rug::Float::with_val(53, x).erf().to_f64()
}

fn gelu64(v: f64) -> f64 {
    0.5 * v * (1.0 + erf64(v / std::f64::consts::SQRT_2))
}

struct LinearCase {
    t: usize,
    n: usize,
    k: usize,
    act: Activation,
    residual: bool,
    precision: Precision,
    /// x and w scaled by random powers of two (x by 2^-24..2^24, w by 2^-16..2^16)
    wide: bool,
}

/// v's compensated parts as f64: (bf16(v), bf16(v - bf16(v))).
fn split(v: f32) -> (f64, f64) {
    let hi = bf16::from_f32(v).to_f32();
    (hi as f64, bf16::from_f32(v - hi).to_f64())
}

/// The worst |gpu - exact| / S seen for each precision (printed by the tests, for the record).
static WORST: std::sync::Mutex<Vec<(Precision, f64)>> = std::sync::Mutex::new(Vec::new());

fn note_worst(p: Precision, e: f64) {
    let mut w = WORST.lock().unwrap();
    match w.iter_mut().find(|(q, _)| *q == p) {
        Some((_, v)) => *v = v.max(e),
        None => w.push((p, e)),
    }
}

/// Runs one projection and checks it against the reference; returns the output.
fn check_linear(ctx: &Context, c: &LinearCase, seed: u64) -> Vec<f32> {
    check_linear_on(ctx, c, seed, None)
}

/// `check_linear` through `record_encoder_linear` (`None`), or through the tensor-core
/// projection with a forced tile (`Some((tile, bias))`: with the case's epilogue and a bias, or
/// with no bias either, the kernel's plain store).
fn check_linear_on(ctx: &Context, c: &LinearCase, seed: u64, coop: Option<(CoopLinearTile, bool)>) -> Vec<f32> {
    let mut rng = Rng(seed);
    let mut x = rng.vec(c.t * c.k, 2.0);
    let mut w = rng.vec(c.n * c.k, 0.5);
    if c.wide {
        x.iter_mut().for_each(|v| *v *= 2f32.powi((rng.next() % 49) as i32 - 24));
        w.iter_mut().for_each(|v| *v *= 2f32.powi((rng.next() % 33) as i32 - 16));
    }
    let mut b = rng.vec(c.n, 1.0);
    if coop.is_some_and(|(_, bias)| !bias) {
        b.fill(0.0);
    }
    let r = rng.vec(c.t * c.n, 1.0);
    let xt = up_f32(ctx, &[c.t, c.k], &x);
    let (wt, w64) = weights(ctx, c.precision, c.n, c.k, &w);
    let bt = up_f32(ctx, &[c.n], &b);
    let rt = up_f32(ctx, &[c.t, c.n], &r);
    let out = ctx.empty(DType::F32, &[c.t, c.n]).unwrap();
    let mut batch = ctx.batch().unwrap();
    match coop {
        None => ctx.record_encoder_linear(&mut batch, &xt, &wt, &bt, c.act, c.residual.then_some(&rt), c.precision, &out).unwrap(),
        Some((tile, bias)) => {
            let (gelu, res) = (c.act == Activation::Gelu, c.residual.then_some(&rt));
            ctx.record_coopmat_linear_tiled(&mut batch, &xt, &wt, bias.then_some(&bt), gelu, res, &out, Some(tile)).unwrap()
        }
    }
    batch.finish().unwrap();
    let got = down(ctx, &out);
    let comp = c.precision == Precision::Compensated;
    let tensor_cores = coop.is_some() || linear_uses_tensor_cores(ctx, c.precision);
    let wsplit: Vec<(f64, f64)> = if comp { w.iter().map(|&v| split(v)).collect() } else { Vec::new() };
    // (want, tol) after the epilogue for a pre-activation `acc` known to within `tol`
    let finish = |acc: f64, mut tol: f64, t: usize, n: usize| {
        let mut want = acc;
        if c.act == Activation::Gelu {
            want = gelu64(acc);
            tol = 1.2 * tol + 8.0 * U * want.abs() + acc.abs() * 2f64.powi(-22);
        }
        if c.residual {
            want += r[t * c.n + n] as f64;
            tol += 2.0 * U * want.abs();
        }
        (want, tol)
    };
    let mut worst = 0.0f64;
    for t in 0..c.t {
        let xsplit: Vec<(f64, f64)> = if comp { x[t * c.k..(t + 1) * c.k].iter().map(|&v| split(v)).collect() } else { Vec::new() };
        for n in 0..c.n {
            let (mut acc, mut s, mut acc_split) = (b[n] as f64, (b[n] as f64).abs(), b[n] as f64);
            for k in 0..c.k {
                let p = round_x(c.precision, x[t * c.k + k]) * w64[n * c.k + k];
                acc += p;
                s += p.abs();
                if comp {
                    let ((xh, xl), (wh, wl)) = (xsplit[k], wsplit[n * c.k + k]);
                    acc_split += xh * wh + (xh * wl + xl * wh);
                }
            }
            let g = got[t * c.n + n] as f64;
            let at = || format!("{:?} T={} N={} K={} wide={} tile={coop:?} [{t},{n}]", c.precision, c.t, c.n, c.k, c.wide);
            // Tensor cores sum in their own order and may truncate while aligning: 2^-23 per
            // addition (tests/coopmat.rs) instead of f32's 2^-24.
            let per_add = if tensor_cores { 2.0 * U } else { U };
            let chain = if comp { (c.k + 3) as f64 } else { (c.k + 2) as f64 } * per_add * s;
            if comp {
                let (want, tol) = finish(acc_split, chain, t, n);
                assert!((g - want).abs() <= tol + 1e-30, "{} against the split in f64: {g} vs {want} (tol {tol})", at());
            }
            let split_err = if comp { 3.01 * 2f64.powi(-16) * (s - (b[n] as f64).abs()) } else { 0.0 };
            let (want, tol) = finish(acc, chain + split_err, t, n);
            assert!((g - want).abs() <= tol + 1e-30, "{}: {g} vs {want} (tol {tol})", at());
            if c.act == Activation::None && !c.residual && s > 0.0 {
                worst = worst.max((g - want).abs() / s);
            }
        }
    }
    note_worst(c.precision, worst);
    got
}

#[test]
fn linear_fp32_odd_sizes_activations_residuals() {
    on_engine(|ctx| {
        let cases = [(1, 5, 3), (7, 64, 64), (33, 70, 37), (257, 128, 100), (8, 1152, 384), (65, 384, 1536)];
        for (i, &(t, n, k)) in cases.iter().enumerate() {
            for (act, residual) in [(Activation::None, false), (Activation::Gelu, false), (Activation::None, true), (Activation::Gelu, true)] {
                check_linear(ctx, &LinearCase { t, n, k, act, residual, precision: Precision::Fp32, wide: false }, 11 + i as u64);
            }
        }
    });
}

#[test]
fn linear_half_precisions_round_activations_and_weights() {
    on_engine(|ctx| {
        for precision in [Precision::Fp16, Precision::Bf16] {
            // (the last two: several tensor-core tiles, with and without remainders)
            for (i, &(t, n, k)) in [(1, 5, 3), (33, 70, 37), (40, 384, 384), (257, 66, 130), (300, 260, 136), (256, 256, 512)].iter().enumerate() {
                check_linear(ctx, &LinearCase { t, n, k, act: Activation::Gelu, residual: true, precision, wide: false }, 101 + i as u64);
                check_linear(ctx, &LinearCase { t, n, k, act: Activation::None, residual: false, precision, wide: false }, 201 + i as u64);
            }
        }
    });
}

/// Every tile of the tensor-core projection, forced, against the reference at odd sizes
/// (T = 1, 7, 33, 100; N = 70, 384; K = 37 — strided loads, a K remainder —, 384, 1536), with
/// bias + GELU + residual and with no epilogue at all. Nothing runs without cooperative
/// matrices (lavapipe), where a forced tile is an error.
#[test]
fn coopmat_linear_every_tile() {
    on_engine(|ctx| {
        let mut ran = 0;
        for precision in [Precision::Fp16, Precision::Bf16] {
            let tiles = ctx.coopmat_linear_tiles(precision.weight_dtype());
            assert_eq!(tiles.is_empty(), !linear_uses_tensor_cores(ctx, precision), "{precision:?}");
            for tile in tiles {
                for (i, t) in [1, 7, 33, 100].into_iter().enumerate() {
                    for (j, n) in [70, 384].into_iter().enumerate() {
                        for (l, k) in [37, 384, 1536].into_iter().enumerate() {
                            let seed = 401 + (i * 6 + j * 3 + l) as u64;
                            let case = |act, residual| LinearCase { t, n, k, act, residual, precision, wide: false };
                            check_linear_on(ctx, &case(Activation::Gelu, true), seed, Some((tile, true)));
                            check_linear_on(ctx, &case(Activation::None, false), seed, Some((tile, false)));
                        }
                    }
                }
                ran += 1;
                eprintln!("checked {precision:?} tile {tile:?}");
            }
        }
        eprintln!("{ran} tensor-core projection tiles checked");
    });
}

/// An output's bits do not depend on the tensor-core projection's tile (the tile is chosen
/// from T: `matmul::pick_linear_tile`): every tile, forced, gives the same bits for the same
/// rows, with and without the epilogue, at sizes with and without remainders. Without
/// cooperative matrices a forced tile is refused.
#[test]
fn coopmat_linear_tiles_keep_bits() {
    on_engine(|ctx| {
        for precision in [Precision::Fp16, Precision::Bf16] {
            let tiles = ctx.coopmat_linear_tiles(precision.weight_dtype());
            if tiles.is_empty() {
                let x = up_f32(ctx, &[1, 8], &[1.0; 8]);
                let (w, _) = weights(ctx, precision, 2, 8, &[0.5; 16]);
                let out = ctx.empty(DType::F32, &[1, 2]).unwrap();
                let mut batch = ctx.batch().unwrap();
                let tile = CoopLinearTile { rows: 16, cols: 16 };
                assert!(ctx.record_coopmat_linear_tiled(&mut batch, &x, &w, None, false, None, &out, Some(tile)).is_err());
                continue;
            }
            for &(t, n, k) in &[(1, 384, 384), (33, 70, 37), (100, 384, 1536), (257, 1536, 384), (128, 128, 128)] {
                let mut rng = Rng(23);
                let x = rng.vec(t * k, 3.0);
                let w = rng.vec(n * k, 0.5);
                let b = up_f32(ctx, &[n], &rng.vec(n, 1.0));
                let res = up_f32(ctx, &[t, n], &rng.vec(t * n, 1.0));
                let (wt, _) = weights(ctx, precision, n, k, &w);
                let xt = up_f32(ctx, &[t, k], &x);
                for epilogue in [false, true] {
                    let run = |tile: CoopLinearTile| {
                        let out = ctx.empty(DType::F32, &[t, n]).unwrap();
                        let mut batch = ctx.batch().unwrap();
                        let (bias, res) = (epilogue.then_some(&b), epilogue.then_some(&res));
                        ctx.record_coopmat_linear_tiled(&mut batch, &xt, &wt, bias, epilogue, res, &out, Some(tile)).unwrap();
                        batch.finish().unwrap();
                        bits(&down(ctx, &out))
                    };
                    let first = run(tiles[0]);
                    for &tile in &tiles[1..] {
                        assert!(run(tile) == first, "{precision:?} T={t} N={n} K={k} epilogue={epilogue}: {tile:?} differs from {:?}", tiles[0]);
                    }
                }
            }
            eprintln!("{precision:?}: tiles {tiles:?} give the same bits");
        }
    });
}

/// Where fp16/bf16 projections run is visible and the device's: tensor cores exactly where
/// the device has a cooperative-matrix kernel for the weight type (never lavapipe), fp32 and
/// compensated never.
#[test]
fn linear_path_follows_the_device() {
    on_engine(|ctx| {
        use nx_vulkan_engine::device::CoopMatType;
        for (p, t) in [(Precision::Fp16, CoopMatType::F16), (Precision::Bf16, CoopMatType::BF16)] {
            assert_eq!(linear_uses_tensor_cores(ctx, p), ctx.caps.coopmat_shape(t).is_some(), "{p:?}");
        }
        assert!(!linear_uses_tensor_cores(ctx, Precision::Fp32) && !linear_uses_tensor_cores(ctx, Precision::Compensated));
        eprintln!("fp16 projections on tensor cores: {}", linear_uses_tensor_cores(ctx, Precision::Fp16));
    });
}

/// Compensated projections against f64 (the exact sum and the same split done in f64), odd
/// sizes, every epilogue, values of a wide dynamic range; fp32 on the same cases for scale.
#[test]
fn linear_compensated_is_near_fp32() {
    on_engine(|ctx| {
        let cases = [(1, 5, 3), (7, 64, 64), (33, 70, 37), (257, 128, 100), (7, 384, 1536), (33, 1152, 384)];
        for (i, &(t, n, k)) in cases.iter().enumerate() {
            for wide in [false, true] {
                for (act, residual) in [(Activation::None, false), (Activation::Gelu, false), (Activation::None, true), (Activation::Gelu, true)] {
                    for precision in [Precision::Compensated, Precision::Fp32] {
                        check_linear(ctx, &LinearCase { t, n, k, act, residual, precision, wide }, 301 + i as u64);
                    }
                }
            }
        }
        // measured: worst |gpu - exact| / Σ|x·w| over the cases without an epilogue
        for (p, e) in WORST.lock().unwrap().iter() {
            eprintln!("linear {p:?}: worst error {e:.3e} of Σ|x·w| (2^{:.1})", e.log2());
        }
    });
}

/// Inf and NaN pass through the split as they pass through an f32 product (Inf · a finite w
/// is Inf even where w's lo part is 0); values near f32's max (whose bf16 rounding overflows)
/// are split without overflow.
#[test]
fn linear_compensated_special_values() {
    on_engine(|ctx| {
        let big = f32::MAX; // bf16(MAX) rounds to Inf; the split must truncate instead
        let x = up_f32(ctx, &[4, 2], &[f32::INFINITY, 0.0, f32::NAN, 0.0, big, 0.0, 1.0, 2.0]);
        let w = up_f32(ctx, &[2, 2], &[1.0, 1.0, 0.25, -3.0]);
        let b = up_f32(ctx, &[2], &[0.0; 2]);
        let out = ctx.empty(DType::F32, &[4, 2]).unwrap();
        let mut batch = ctx.batch().unwrap();
        ctx.record_encoder_linear(&mut batch, &x, &w, &b, Activation::None, None, Precision::Compensated, &out).unwrap();
        batch.finish().unwrap();
        let got = down(ctx, &out);
        assert_eq!(got[0], f32::INFINITY);
        assert_eq!(got[1], f32::INFINITY);
        assert!(got[2].is_nan() && got[3].is_nan());
        // truncated parts there: within 2^-14 relative
        assert!(got[4].is_finite() && ((got[4] - big) / big).abs() <= 2f32.powi(-14), "{}", got[4]);
        assert!(((got[5] - big * 0.25) / (big * 0.25)).abs() <= 2f32.powi(-14), "{}", got[5]);
        assert_eq!(&got[6..], &[3.0, -5.75]);
    });
}

/// A row's bits are the same alone, as a prefix of a batch, or in the middle of a bigger one.
#[test]
fn linear_rows_are_batch_independent() {
    on_engine(|ctx| {
        for precision in [Precision::Fp32, Precision::Compensated, Precision::Fp16, Precision::Bf16] {
            for &(n, k) in &[(384, 384), (70, 37)] {
                let big = 257;
                let mut rng = Rng(5);
                let x = rng.vec(big * k, 3.0);
                let w = rng.vec(n * k, 0.5);
                let b = rng.vec(n, 1.0);
                let res = rng.vec(big * n, 1.0);
                let (wt, _) = weights(ctx, precision, n, k, &w);
                let bt = up_f32(ctx, &[n], &b);
                let run = |rows: std::ops::Range<usize>| linear_gelu_residual_rows(ctx, &x, &res, &wt, &bt, precision, rows);
                let all = run(0..big);
                for rows in [0..1, 0..7, 100..133, 200..201, 64..128, 250..257] {
                    assert_eq!(run(rows.clone()), all[rows.start * n..rows.end * n], "{precision:?} N={n} K={k} rows {rows:?}");
                }
            }
        }
    });
}

/// `rows` of a GELU + residual projection, computed as a batch of their own: the output bits.
fn linear_gelu_residual_rows(ctx: &Context, x: &[f32], res: &[f32], wt: &Tensor, bt: &Tensor, precision: Precision, rows: std::ops::Range<usize>) -> Vec<u32> {
    let (n, k) = (wt.shape()[0], wt.shape()[1]);
    let t = rows.len();
    let xt = up_f32(ctx, &[t, k], &x[rows.start * k..rows.end * k]);
    let rt = up_f32(ctx, &[t, n], &res[rows.start * n..rows.end * n]);
    let out = ctx.empty(DType::F32, &[t, n]).unwrap();
    let mut batch = ctx.batch().unwrap();
    ctx.record_encoder_linear(&mut batch, &xt, wt, bt, Activation::Gelu, Some(&rt), precision, &out).unwrap();
    batch.finish().unwrap();
    bits(&down(ctx, &out))
}

/// The projection's tile depends on T (small grids get small tiles), its arithmetic does not:
/// the same rows computed in batches on either side of each tile switch give the same bits —
/// the portable kernel's tiles (`linear_tile`) and, for fp16/bf16 on tensor cores, the
/// tensor-core kernel's (`Context::coopmat_linear_tile`).
#[test]
fn linear_tile_switch_keeps_bits() {
    use std::sync::atomic::Ordering::Relaxed;
    /// Puts the device's own threshold back, even when an assertion fails.
    struct Restore<'a>(&'a Context, usize);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            self.0.linear_min_groups.store(self.1, Relaxed);
        }
    }
    on_engine_alone(|ctx| {
        // On a GPU MiniLM's small-T case gets a grid of ~100 workgroups, large T the 64 × 64
        // tile; on a CPU device (lavapipe) every T gets 64 × 64.
        let gpu = 128;
        let groups = |n: usize, t: usize| {
            let tile = linear_tile(n, t, gpu);
            n.div_ceil(tile.cols as usize) * t.div_ceil(tile.rows as usize)
        };
        assert!(groups(384, 32) >= 96, "{:?}", linear_tile(384, 32, gpu));
        assert_eq!((linear_tile(384, 4096, gpu).rows, linear_tile(384, 4096, gpu).cols), (64, 64));
        assert_eq!((linear_tile(384, 1, 1).rows, linear_tile(384, 1, 1).cols), (64, 64));
        let device_min = ctx.linear_min_groups.load(Relaxed);
        assert_eq!(device_min, if ctx.caps.device_type == "cpu" { 1 } else { gpu }, "{}", ctx.caps.device_type);
        // the GPU's choice, so that every tile is reached on any device
        ctx.linear_min_groups.store(gpu, Relaxed);
        let _restore = Restore(ctx, device_min);
        for &(n, k) in &[(384usize, 384usize), (70, 37)] {
            for precision in [Precision::Fp32, Precision::Compensated, Precision::Fp16, Precision::Bf16] {
                // the tile record_encoder_linear uses for T rows, and the T up to which every
                // tile is reached (the tensor-core tiles: 128 × 128 from T = 16257 at N = 70)
                let tensor_cores = linear_uses_tensor_cores(ctx, precision);
                let tile_of = |t: usize| match tensor_cores {
                    true => format!("{:?}", ctx.coopmat_linear_tile(precision.weight_dtype(), t, n).unwrap()),
                    false => format!("{:?}", linear_tile(n, t, gpu)),
                };
                let (last_t, tile_count) = if tensor_cores { (20_000, ctx.coopmat_linear_tiles(precision.weight_dtype()).len()) } else { (5000, 3) };
                // the T at which the tile changes
                let switches: Vec<usize> = (2..last_t).filter(|&t| tile_of(t) != tile_of(t - 1)).collect();
                assert_eq!(switches.len(), tile_count - 1, "{precision:?} N={n}: {tile_count} tiles over T = 1..{last_t} ({switches:?})");
                let big = switches[switches.len() - 1] + 1;
                let mut rng = Rng(17);
                let x = rng.vec(big * k, 3.0);
                let w = rng.vec(n * k, 0.5);
                let b = rng.vec(n, 1.0);
                let res = rng.vec(big * n, 1.0);
                let bt = up_f32(ctx, &[n], &b);
                let (wt, _) = weights(ctx, precision, n, k, &w);
                let run = |rows: std::ops::Range<usize>| linear_gelu_residual_rows(ctx, &x, &res, &wt, &bt, precision, rows);
                let all = run(0..big);
                let mut tiles = vec![tile_of(big)];
                for &s in &switches {
                    for rows in [0..s - 1, 0..s, big - s..big, big - s + 1..big] {
                        tiles.push(tile_of(rows.len()));
                        assert_eq!(run(rows.clone()), all[rows.start * n..rows.end * n], "{precision:?} N={n} K={k} rows {rows:?} ({})", tile_of(rows.len()));
                    }
                }
                tiles.sort();
                tiles.dedup();
                assert_eq!(tiles.len(), tile_count, "every tile was used");
            }
        }
    });
}

#[test]
fn linear_one_dispatch_empty_batch_and_errors() {
    on_engine_alone(|ctx| {
        let x = up_f32(ctx, &[3, 8], &[0.5; 24]);
        let w = up_f32(ctx, &[4, 8], &[0.25; 32]);
        let b = up_f32(ctx, &[4], &[1.0; 4]);
        let out = ctx.empty(DType::F32, &[3, 4]).unwrap();
        let before = ctx.stats().dispatches;
        let mut batch = ctx.batch().unwrap();
        ctx.record_encoder_linear(&mut batch, &x, &w, &b, Activation::None, None, Precision::Fp32, &out).unwrap();
        batch.finish().unwrap();
        assert_eq!(down(ctx, &out), vec![2.0; 12]); // 8 · 0.5 · 0.25 + 1, exact
        assert_eq!(ctx.stats().dispatches - before, 1);
        // empty T: no dispatch
        let x0 = ctx.empty(DType::F32, &[0, 8]).unwrap();
        let out0 = ctx.empty(DType::F32, &[0, 4]).unwrap();
        let before = ctx.stats().dispatches;
        let mut batch = ctx.batch().unwrap();
        ctx.record_encoder_linear(&mut batch, &x0, &w, &b, Activation::None, None, Precision::Fp32, &out0).unwrap();
        assert!(batch.is_empty());
        batch.finish().unwrap();
        assert_eq!(ctx.stats().dispatches, before);
        let mut batch = ctx.batch().unwrap();
        let err = |r: Result<()>| r.unwrap_err().to_string();
        let e = err(ctx.record_encoder_linear(&mut batch, &x, &w, &b, Activation::None, None, Precision::Fp16, &out));
        assert!(e.contains("w must be f16"), "{e}");
        let wh = ctx.upload(DType::F16, &[4, 8], &[0u8; 64]).unwrap();
        let e = err(ctx.record_encoder_linear(&mut batch, &x, &wh, &b, Activation::None, None, Precision::Compensated, &out));
        assert!(e.contains("w must be f32"), "{e}");
        let w5 = up_f32(ctx, &[4, 5], &[0.0; 20]);
        let e = err(ctx.record_encoder_linear(&mut batch, &x, &w5, &b, Activation::None, None, Precision::Fp32, &out));
        assert!(e.contains("[N, K]"), "{e}");
        let b3 = up_f32(ctx, &[3], &[0.0; 3]);
        let e = err(ctx.record_encoder_linear(&mut batch, &x, &w, &b3, Activation::None, None, Precision::Fp32, &out));
        assert!(e.contains("bias must have shape [4]"), "{e}");
        let e = err(ctx.record_encoder_linear(&mut batch, &x, &w, &b, Activation::None, Some(&x), Precision::Fp32, &out));
        assert!(e.contains("residual is [3, 8]"), "{e}");
        let wrong = ctx.empty(DType::F32, &[4, 3]).unwrap();
        assert!(ctx.record_encoder_linear(&mut batch, &x, &w, &b, Activation::None, None, Precision::Fp32, &wrong).is_err());
        let xt = x.transpose(&[1, 0]).unwrap();
        let e = err(ctx.record_encoder_linear(&mut batch, &xt, &w, &b, Activation::None, None, Precision::Fp32, &out));
        assert!(e.contains("x must be"), "{e}");
        assert!(batch.is_empty());
    });
}

#[test]
fn erf_is_within_two_ulp_of_mpfr() {
    on_engine(|ctx| {
        let mut xs: Vec<f32> = (-6000..=6000).map(|i| i as f32 / 1000.0).collect();
        xs.extend([0.0, -0.0, 1e-30, -1e-30, 1e-7, 0.99999994, 1.0, 1.0000001, 3.9999998, 4.0, 10.0, -10.0, f32::INFINITY, f32::NEG_INFINITY, f32::MIN_POSITIVE]);
        let mut rng = Rng(77);
        xs.extend((0..4000).map(|_| rng.f(4.5)));
        let got = down(ctx, &ctx.encoder_erf(&up_f32(ctx, &[xs.len()], &xs)).unwrap());
        let mut worst = 0.0f64;
        for (&x, &g) in xs.iter().zip(&got) {
            let want = erf64(x as f64) as f32;
            let ulp = f32::from_bits(want.abs().to_bits() + 1) - want.abs();
            let e = ((g - want) as f64).abs() / ulp as f64;
            worst = worst.max(e);
            assert!(e <= 2.0, "erf({x:e}) = {g:e}, MPFR {want:e} ({e} ulp)");
        }
        let nan = down(ctx, &ctx.encoder_erf(&up_f32(ctx, &[1], &[f32::NAN])).unwrap());
        assert!(nan[0].is_nan());
        eprintln!("erf: worst {worst} ulp");
    });
}

fn ln_ref(v: &[f32], g: &[f32], b: &[f32], eps: f32) -> Vec<(f64, f64)> {
    let h = v.len() as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / h;
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / h;
    let r = 1.0 / (var + eps as f64).sqrt();
    v.iter()
        .enumerate()
        .map(|(i, &x)| {
            let xh = (x as f64 - mean) * r;
            (xh * g[i] as f64 + b[i] as f64, 1e-5 * ((g[i] as f64 * xh).abs() + (b[i] as f64).abs()) + 1e-6)
        })
        .collect()
}

#[test]
fn layernorm_rows() {
    on_engine(|ctx| {
        for (i, &(t, h)) in [(1, 384), (7, 1000), (33, 5), (257, 384), (3, 1024)].iter().enumerate() {
            let mut rng = Rng(31 + i as u64);
            let mut x = rng.vec(t * h, 3.0);
            // a constant row (variance 0: out = beta) and a row far from zero
            x[..h].iter_mut().for_each(|v| *v = 2.5);
            if t > 1 {
                x[h..2 * h].iter_mut().for_each(|v| *v += 1000.0);
            }
            let g = rng.vec(h, 2.0);
            let b = rng.vec(h, 1.0);
            let out = ctx.empty(DType::F32, &[t, h]).unwrap();
            let mut batch = ctx.batch().unwrap();
            ctx.record_encoder_layernorm(&mut batch, &up_f32(ctx, &[t, h], &x), &up_f32(ctx, &[h], &g), &up_f32(ctx, &[h], &b), 1e-12, &out).unwrap();
            batch.finish().unwrap();
            let got = down(ctx, &out);
            for r in 0..t {
                let want = ln_ref(&x[r * h..(r + 1) * h], &g, &b, 1e-12);
                for c in 0..h {
                    let (w, tol) = want[c];
                    // the row far from zero: its mean carries f32 rounding of ~1000·u·log2(H)
                    let tol = if r == 1 { tol + 1e-3 * (g[c] as f64).abs() } else { tol };
                    let gv = got[r * h + c] as f64;
                    assert!((gv - w).abs() <= tol, "T={t} H={h} [{r},{c}]: {gv} vs {w}");
                }
            }
        }
    });
}

#[test]
fn embeddings_gather_sum_and_normalise() {
    on_engine_alone(|ctx| {
        for &(t, h) in &[(1usize, 384usize), (33, 37), (7, 1000)] {
            let (v, p, s) = (50, 20, 2);
            let mut rng = Rng(h as u64);
            let word = rng.vec(v * h, 1.0);
            let pos = rng.vec(p * h, 0.5);
            let typ = rng.vec(s * h, 0.5);
            let g = rng.vec(h, 1.5);
            let b = rng.vec(h, 0.5);
            let ids: Vec<u32> = (0..t).map(|_| (rng.next() % v as u64) as u32).collect();
            let positions: Vec<u32> = (0..t).map(|i| (i % p) as u32).collect();
            let types: Vec<u32> = (0..t).map(|i| (i % s) as u32).collect();
            let out = ctx.empty(DType::F32, &[t, h]).unwrap();
            let before = ctx.stats().dispatches;
            let mut batch = ctx.batch().unwrap();
            ctx.record_encoder_embeddings(
                &mut batch,
                &up_u32(ctx, &ids),
                &up_u32(ctx, &positions),
                &up_u32(ctx, &types),
                &up_f32(ctx, &[v, h], &word),
                &up_f32(ctx, &[p, h], &pos),
                &up_f32(ctx, &[s, h], &typ),
                &up_f32(ctx, &[h], &g),
                &up_f32(ctx, &[h], &b),
                1e-12,
                &out,
            )
            .unwrap();
            batch.finish().unwrap();
            let got = down(ctx, &out);
            assert_eq!(ctx.stats().dispatches - before, 1);
            for r in 0..t {
                // the f32 sum in HF's order, then the layernorm reference
                let e: Vec<f32> = (0..h)
                    .map(|c| (word[ids[r] as usize * h + c] + typ[types[r] as usize * h + c]) + pos[positions[r] as usize * h + c])
                    .collect();
                let want = ln_ref(&e, &g, &b, 1e-12);
                for c in 0..h {
                    let gv = got[r * h + c] as f64;
                    assert!((gv - want[c].0).abs() <= want[c].1, "T={t} H={h} [{r},{c}]: {gv} vs {}", want[c].0);
                }
            }
        }
        // empty batch and a mismatched table
        let z = ctx.empty(DType::U32, &[0]).unwrap();
        let tab = up_f32(ctx, &[2, 4], &[0.0; 8]);
        let g = up_f32(ctx, &[4], &[1.0; 4]);
        let out = ctx.empty(DType::F32, &[0, 4]).unwrap();
        let mut batch = ctx.batch().unwrap();
        ctx.record_encoder_embeddings(&mut batch, &z, &z, &z, &tab, &tab, &tab, &g, &g, 1e-12, &out).unwrap();
        assert!(batch.is_empty());
        let tab5 = up_f32(ctx, &[2, 5], &[0.0; 10]);
        assert!(ctx.record_encoder_embeddings(&mut batch, &z, &z, &z, &tab, &tab5, &tab, &g, &g, 1e-12, &out).is_err());
    });
}

/// Packed qkv rows for sequences of `lens` with `heads` × `d`, and their offsets.
fn attention_ref(qkv: &[f32], lens: &[usize], heads: usize, d: usize, scale: f32) -> Vec<(f64, f64)> {
    let width = 3 * heads * d;
    let mut out = vec![(0.0, 0.0); lens.iter().sum::<usize>() * heads * d];
    let mut start = 0;
    for &len in lens {
        for h in 0..heads {
            for i in 0..len {
                let q = &qkv[(start + i) * width + h * d..][..d];
                let mut s = vec![0.0f64; len];
                let mut ds = 0.0f64;
                for (j, sj) in s.iter_mut().enumerate() {
                    let k = &qkv[(start + j) * width + heads * d + h * d..][..d];
                    *sj = q.iter().zip(k).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() * scale as f64;
                    let bound = (d + 2) as f64 * U * scale as f64 * q.iter().zip(k).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum::<f64>();
                    ds = ds.max(bound);
                }
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let l: f64 = p.iter().sum();
                let mut vmax = 0.0f64;
                for c in 0..d {
                    let mut o = 0.0;
                    for j in 0..len {
                        let v = qkv[(start + j) * width + 2 * heads * d + h * d + c] as f64;
                        vmax = vmax.max(v.abs());
                        o += p[j] / l * v;
                    }
                    out[(start + i) * heads * d + h * d + c].0 = o;
                }
                for c in 0..d {
                    out[(start + i) * heads * d + h * d + c].1 = (2.0 * ds + 1e-5) * vmax + 1e-30;
                }
            }
        }
        start += len;
    }
    out
}

fn run_attention(ctx: &Context, qkv: &[f32], lens: &[usize], heads: usize, d: usize, scale: f32) -> Vec<f32> {
    run_attention_using(ctx, qkv, lens, heads, d, scale, None)
}

/// `run_attention` with the scores' place forced (`None`: the device's choice).
fn run_attention_using(ctx: &Context, qkv: &[f32], lens: &[usize], heads: usize, d: usize, scale: f32, scores: Option<AttentionScores>) -> Vec<f32> {
    let t: usize = lens.iter().sum();
    let mut offsets = vec![0u32];
    for &l in lens {
        offsets.push(offsets.last().unwrap() + l as u32);
    }
    let max_len = lens.iter().copied().max().unwrap_or(0);
    let out = ctx.empty(DType::F32, &[t, heads * d]).unwrap();
    let mut batch = ctx.batch().unwrap();
    ctx.record_encoder_attention_using(&mut batch, &up_f32(ctx, &[t, 3 * heads * d], qkv), &up_u32(ctx, &offsets), lens.len(), max_len, heads, d, scale, &out, scores).unwrap();
    batch.finish().unwrap();
    down(ctx, &out)
}

#[test]
fn attention_ragged_batches() {
    on_engine(|ctx| {
        for &(lens, heads, d, a) in &[
            (&[1usize, 17, 5, 64][..], 3usize, 32usize, 1.0f32),
            (&[70, 1, 33][..], 2, 64, 1.0),
            (&[9, 40][..], 1, 128, 0.5),
            (&[130][..], 2, 48, 1.0),
            // large scores: softmax must subtract the max (e^1000 overflows)
            (&[1, 17, 40][..], 2, 32, 30.0),
        ] {
            let t: usize = lens.iter().sum();
            let mut rng = Rng(d as u64 + lens.len() as u64);
            let qkv = rng.vec(t * 3 * heads * d, a);
            let scale = 1.0 / (d as f32).sqrt();
            let got = run_attention(ctx, &qkv, lens, heads, d, scale);
            let want = attention_ref(&qkv, lens, heads, d, scale);
            for (i, (&g, &(w, tol))) in got.iter().zip(&want).enumerate() {
                assert!(g.is_finite() && (g as f64 - w).abs() <= tol, "lens {lens:?} D={d} at {i}: {g} vs {w} (tol {tol})");
            }
        }
    });
}

/// A sequence's bits are the same alone or among others (any position, any max_len).
#[test]
fn attention_is_batch_independent_one_dispatch_empty() {
    on_engine_alone(|ctx| {
        let (heads, d) = (3, 32);
        let w = 3 * heads * d;
        let lens = [1usize, 17, 5, 64, 100];
        let t: usize = lens.iter().sum();
        let mut rng = Rng(9);
        let qkv = rng.vec(t * w, 2.0);
        let before = ctx.stats().dispatches;
        let all = run_attention(ctx, &qkv, &lens, heads, d, 0.2);
        assert_eq!(ctx.stats().dispatches - before, 1);
        let mut start = 0;
        for &l in &lens {
            let alone = run_attention(ctx, &qkv[start * w..(start + l) * w], &[l], heads, d, 0.2);
            assert_eq!(bits(&alone), bits(&all[start * heads * d..(start + l) * heads * d]), "sequence of {l}");
            start += l;
        }
        // empty batch: no dispatch
        let out = ctx.empty(DType::F32, &[0, heads * d]).unwrap();
        let mut batch = ctx.batch().unwrap();
        let qkv0 = ctx.empty(DType::F32, &[0, w]).unwrap();
        ctx.record_encoder_attention(&mut batch, &qkv0, &up_u32(ctx, &[0]), 0, 0, heads, d, 0.2, &out).unwrap();
        assert!(batch.is_empty());
        // errors
        assert!(ctx.record_encoder_attention(&mut batch, &qkv0, &up_u32(ctx, &[0]), 0, 0, heads, 33, 0.2, &out).is_err());
        assert!(ctx.record_encoder_attention(&mut batch, &qkv0, &up_u32(ctx, &[0, 0]), 0, 0, heads, d, 0.2, &out).is_err());
    });
}

/// The tile's scores in registers (GPUs) or in shared memory (CPU devices) are the same
/// operations in the same order: the same bits, ragged lengths (partial key tiles, dead query
/// rows), several query blocks, huge scores and infinite keys included (heads of 8 and 16 on
/// a CPU device, whose compiler took 229 s over the unrolled tiles of heads up to 48; 8 to
/// 128 on a GPU). The device's choice: registers on a GPU up to head_dim 64, shared memory
/// otherwise.
#[test]
fn attention_scores_in_registers_or_shared_memory_give_the_same_bits() {
    on_engine_alone(|ctx| {
        let run = |qkv: &[f32], lens: &[usize], heads: usize, d: usize, scale: f32, scores: AttentionScores| -> Vec<u32> {
            let before = ctx.stats().dispatches;
            let out = run_attention_using(ctx, qkv, lens, heads, d, scale, Some(scores));
            assert_eq!(ctx.stats().dispatches - before, 1, "{scores:?} lens {lens:?} D={d}");
            // NaN payloads aside (a NaN is a NaN)
            out.iter().map(|v| if v.is_nan() { 0x7FC00000 } else { v.to_bits() }).collect()
        };
        let wide = ctx.caps.device_type != "cpu";
        let mut cases: Vec<(&[usize], usize, usize, f32, bool)> = vec![
            (&[1, 17, 5, 64, 100, 130], 3, 8, 1.0, false),
            (&[9, 40, 31, 32, 33], 1, 8, 2.0, false),
            (&[1, 17, 40], 2, 16, 30.0, false),
            (&[3, 45], 2, 16, 1.0, true),
        ];
        if wide {
            cases.push((&[1, 17, 5, 64, 100], 3, 32, 1.0, false));
            cases.push((&[3, 45], 2, 32, 1.0, true));
            cases.push((&[130], 2, 48, 1.0, false));
            cases.push((&[70, 1, 33, 130], 2, 64, 1.0, false));
            cases.push((&[9, 40], 1, 128, 0.5, false));
        }
        for (lens, heads, d, a, inf) in cases {
            let t: usize = lens.iter().sum();
            let mut rng = Rng(7 * d as u64 + lens.len() as u64);
            let mut qkv = rng.vec(t * 3 * heads * d, a);
            if inf {
                // infinite key components: infinite (or NaN) scores in their rows of tiles
                qkv[(t - 2) * 3 * heads * d + heads * d + 1] = f32::INFINITY;
                qkv[2 * 3 * heads * d + heads * d + d + 3] = f32::NEG_INFINITY;
            }
            let scale = 1.0 / (d as f32).sqrt();
            let registers = run(&qkv, lens, heads, d, scale, AttentionScores::Registers);
            let shared = run(&qkv, lens, heads, d, scale, AttentionScores::Shared);
            let differ = registers.iter().zip(&shared).filter(|(x, y)| x != y).count();
            assert_eq!(differ, 0, "lens {lens:?} D={d}: {differ} of {} outputs differ", registers.len());
        }
        for d in [8usize, 32, 64, 128] {
            let want = if wide && d <= 64 { AttentionScores::Registers } else { AttentionScores::Shared };
            assert_eq!(ctx.attention_scores(d), want, "D={d}");
        }
    });
}

#[test]
fn pooling_mean_cls_normalised() {
    on_engine(|ctx| {
        let h = 300;
        let lens = [1usize, 17, 0, 5, 64];
        let t: usize = lens.iter().sum();
        let mut rng = Rng(3);
        let mut x = rng.vec(t * h, 2.0);
        // an all-zero sequence: the norm clamp keeps it zero
        x[(1 + 17) * h..(1 + 17 + 5) * h].iter_mut().for_each(|v| *v = 0.0);
        let mut offsets = vec![0u32];
        for &l in &lens {
            offsets.push(offsets.last().unwrap() + l as u32);
        }
        let xt = up_f32(ctx, &[t, h], &x);
        let ot = up_u32(ctx, &offsets);
        for pooling in [Pooling::Mean, Pooling::Cls] {
            for normalize in [false, true] {
                let out = ctx.empty(DType::F32, &[lens.len(), h]).unwrap();
                let mut batch = ctx.batch().unwrap();
                ctx.record_encoder_pool(&mut batch, &xt, &ot, pooling, normalize, &out).unwrap();
                batch.finish().unwrap();
                let got = down(ctx, &out);
                for (b, &len) in lens.iter().enumerate() {
                    let s = offsets[b] as usize;
                    let mut row: Vec<f64> = (0..h)
                        .map(|c| match (pooling, len) {
                            (_, 0) => 0.0,
                            (Pooling::Cls, _) => x[s * h + c] as f64,
                            (Pooling::Mean, _) => (0..len).map(|r| x[(s + r) * h + c] as f64).sum::<f64>() / len as f64,
                        })
                        .collect();
                    let mut tol = 1e-5 * 2.0;
                    if normalize {
                        let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12);
                        row.iter_mut().for_each(|v| *v /= norm);
                        tol = 1e-5 * 2.0 / norm.max(1e-3) + 1e-6;
                    }
                    for c in 0..h {
                        let g = got[b * h + c] as f64;
                        assert!((g - row[c]).abs() <= tol, "{pooling:?} normalize={normalize} seq {b} col {c}: {g} vs {}", row[c]);
                    }
                }
            }
        }
    });
}

/// Projection throughput for MiniLM's shapes (not a correctness test; run on a GPU with
/// `cargo test --release --test encoder_kernels -- --ignored --nocapture linear_throughput`).
#[test]
#[ignore]
fn linear_throughput() {
    on_engine_alone(|ctx| {
        for precision in [Precision::Fp32, Precision::Compensated, Precision::Fp16, Precision::Bf16] {
            for &(n, k) in &[(1152usize, 384usize), (384, 384), (1536, 384), (384, 1536)] {
                let mut rng = Rng(1);
                let (w, _) = weights(ctx, precision, n, k, &rng.vec(n * k, 0.5));
                let b = up_f32(ctx, &[n], &rng.vec(n, 1.0));
                for &t in &[8usize, 32, 128, 512, 2048, 8192] {
                    let x = up_f32(ctx, &[t, k], &rng.vec(t * k, 1.0));
                    let out = ctx.empty(DType::F32, &[t, n]).unwrap();
                    let reps = 50;
                    let run = |reps: usize| {
                        let mut batch = ctx.batch().unwrap();
                        for _ in 0..reps {
                            ctx.record_encoder_linear(&mut batch, &x, &w, &b, Activation::Gelu, None, precision, &out).unwrap();
                        }
                        batch.finish_and_wait().unwrap();
                    };
                    run(3);
                    let t0 = std::time::Instant::now();
                    run(reps);
                    let s = t0.elapsed().as_secs_f64() / reps as f64;
                    let flops = 2.0 * (t * n * k) as f64;
                    let tensor_cores = linear_uses_tensor_cores(ctx, precision);
                    let tile = if tensor_cores { format!("{:?}", ctx.coopmat_linear_tile(precision.weight_dtype(), t, n)) } else { format!("{:?}", linear_tile(n, t, ctx.linear_min_groups.load(std::sync::atomic::Ordering::Relaxed))) };
                    eprintln!("{precision:?} N={n} K={k} T={t}: {:.1} us, {:.2} TFLOP/s ({tile})", s * 1e6, flops / s / 1e12);
                    // every tensor-core tile, forced: is the chosen one the fastest?
                    for tile in if tensor_cores { ctx.coopmat_linear_tiles(precision.weight_dtype()) } else { Vec::new() } {
                        let run = |reps: usize| {
                            let mut batch = ctx.batch().unwrap();
                            for _ in 0..reps {
                                ctx.record_coopmat_linear_tiled(&mut batch, &x, &w, Some(&b), true, None, &out, Some(tile)).unwrap();
                            }
                            batch.finish_and_wait().unwrap();
                        };
                        run(3);
                        let t0 = std::time::Instant::now();
                        run(reps);
                        let s = t0.elapsed().as_secs_f64() / reps as f64;
                        eprintln!("    forced {}x{}: {:.1} us, {:.2} TFLOP/s", tile.rows, tile.cols, s * 1e6, flops / s / 1e12);
                    }
                }
            }
        }
    });
}
