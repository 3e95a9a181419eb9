//! The prefill GEMM (llm/prefill.rs) against a plain CPU reference: the host dequantizer
//! (bit-exact with gguf-py) and an f64 dot, for every weight type, T ∈ {1, 7, 33, 130} token
//! rows, N = 37 and 40, K = 4096 and a small K, with bias, residual (also aliasing the output)
//! and SwiGLU epilogues, at both precisions (split on a subset of types); a row's bits must not
//! depend on T; bad input is an error. On lavapipe (CI) the dot is the f32 fallback of the
//! tensor-core dot (the same f16 operands, f32 accumulation). Also the fixtures' prompt logits
//! with every matrix product of the forward step on the GEMM, against their float64 reference.
//!
//! Tolerance per output element, derived from the kernel's arithmetic, u = 2^-11, a = 2^-25:
//! - **F16**: both operands rounded to f16 (round to nearest even: |f16(v) − v| ≤ u·|v| + a, a
//!   for the subnormal range), each product exact in f32 (11 × 11 significant bits), the K
//!   products summed in f32 in some order (|error| ≤ γ·Σ|terms|, γ = (K−1)·2^-24 / (1 −
//!   (K−1)·2^-24), any order: a worst case). So |got − Σ w·x| ≤ (2u + u²)·Σ|w x| +
//!   a(1 + u)·Σ(|w| + |x|) + K·a² + γ·Σ|ŵ x̂|, with Σ|ŵ x̂| ≤ (1 + u)²·Σ|w x| +
//!   a(1 + u)·Σ(|w| + |x|) + K·a².
//! - **Split**: v = hi + lo + e with |e| ≤ δ = u²|v| + a(1 + u) and |lo| ≤ λ = (u + u²)|v| +
//!   a(2 + u); the three products sum to (x − e_x)(w − e_w) − x_lo·w_lo, so per term
//!   |error| ≤ δ_x|w| + δ_w|x| + δ_x δ_w + λ_x λ_w, summed over k. The f32 summation of 3K
//!   terms is bounded statistically, not in the worst case (which, at 2^-10.4 relative for
//!   K = 4096, would hide the split's gain): 4·√(3K)·2^-24·Σ|terms| — rounding errors of
//!   random sign grow as √n, and Σ|terms| bounds every partial sum.
//!
//! Epilogues add their f32 roundings (bias, residual: 2^-24 of each sum) and for SwiGLU the
//! propagation of both sums' bounds through silu(g)·u (|silu'| ≤ 1.1) plus 1e-6 relative for
//! the driver's exp. `a_dropped_block_would_fail` checks that the F16 bound is tight enough to
//! see one unit of 32 weights dropped or one block's scale doubled.

mod common;

use common::llm_fixtures::{all_fixtures, fixture, fixtures, max_abs};
use common::on_engine;
use nx_vulkan_engine::llm::kernels::{Epilogue, QMatrix};
use nx_vulkan_engine::llm::model::{Llm, LlmOptions, Row};
use nx_vulkan_engine::llm::prefill::{llm_gemm_pays, LlmGemmPrecision, LLM_GEMM_MIN_ROWS};
use nx_vulkan_engine::llm::quant::{dequantize, random_rows, GgmlType};
use nx_vulkan_engine::llm::sample::Rng;
use nx_vulkan_engine::{Context, DType, Tensor};

const U: f64 = 1.0 / 2048.0; // 2^-11
const A: f64 = 1.0 / 33_554_432.0; // 2^-25
const E32: f64 = 1.0 / 16_777_216.0; // 2^-24

fn f32_tensor(ctx: &Context, shape: &[usize], v: &[f32]) -> Tensor {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    ctx.upload(DType::F32, shape, &bytes).unwrap()
}

fn download(ctx: &Context, t: &Tensor) -> Vec<f32> {
    ctx.download(t).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// One product through the GEMM at `precision`: out [T, N]. F16 through `record_llm_gemm`
/// (its own scratch), Split through a scratch of that precision.
fn gemm(ctx: &Context, precision: LlmGemmPrecision, w: &QMatrix, up: Option<&QMatrix>, x: &Tensor, bias: Option<&Tensor>, res: Option<&Tensor>) -> Vec<f32> {
    let t = x.shape()[0];
    let out = ctx.empty(DType::F32, &[t, w.rows]).unwrap();
    let mut batch = ctx.batch().unwrap();
    let epi = Epilogue { bias, residual: res };
    match precision {
        LlmGemmPrecision::F16 => ctx.record_llm_gemm(&mut batch, w, up, x, epi, &out).unwrap(),
        p => {
            let s = ctx.llm_gemm_scratch(t, &[(w, up.is_some())], p).unwrap();
            ctx.record_llm_gemm_in(&mut batch, &s, w, up, x, epi, &out).unwrap()
        }
    }
    batch.finish().unwrap();
    download(ctx, &out)
}

fn silu(g: f64) -> f64 {
    g / (1.0 + (-g).exp())
}

/// The exact dot of one weight row with one activation row and its error bound (module docs).
#[derive(Clone, Copy)]
struct Dot {
    exact: f64,
    bound: f64,
}

fn dot(w: &[f32], x: &[f32], precision: LlmGemmPrecision) -> Dot {
    let (mut exact, mut mag, mut sum_abs, mut split) = (0f64, 0f64, 0f64, 0f64);
    for (&wk, &xk) in w.iter().zip(x) {
        let (wk, xk) = (wk as f64, xk as f64);
        exact += wk * xk;
        mag += (wk * xk).abs();
        sum_abs += wk.abs() + xk.abs();
        if precision == LlmGemmPrecision::Split {
            let delta = |v: f64| U * U * v.abs() + A * (1.0 + U);
            let lambda = |v: f64| (U + U * U) * v.abs() + A * (2.0 + U);
            split += delta(xk) * wk.abs() + delta(wk) * xk.abs() + delta(xk) * delta(wk) + lambda(xk) * lambda(wk);
        }
    }
    let k = w.len() as f64;
    let bound = match precision {
        LlmGemmPrecision::F16 => {
            let gamma = (k - 1.0) * E32 / (1.0 - (k - 1.0) * E32);
            let operand = (2.0 * U + U * U) * mag + A * (1.0 + U) * sum_abs + k * A * A;
            let terms = (1.0 + U) * (1.0 + U) * mag + A * (1.0 + U) * sum_abs + k * A * A;
            operand + gamma * terms
        }
        LlmGemmPrecision::Split => {
            // Σ|terms| ≤ Σ(|x_hi w_hi| + |x_lo w_hi| + |x_hi w_lo|) ≤ (1 + 3u + ...)·Σ|w x| + ...
            let terms = (1.0 + 4.0 * U) * mag + 4.0 * A * sum_abs;
            split + 4.0 * (3.0 * k).sqrt() * E32 * terms
        }
    };
    Dot { exact, bound }
}

/// Bound for silu(g)·u from the bounds of g and u, plus f32 rounding and the driver's exp.
fn swiglu_bound(g: Dot, u: Dot) -> f64 {
    let want = silu(g.exact) * u.exact;
    1.1 * g.bound * (u.exact.abs() + u.bound) + silu(g.exact).abs() * u.bound + want.abs() * 1e-6
}

struct Case {
    wd: Vec<f32>,
    ud: Vec<f32>,
    w: QMatrix,
    u: QMatrix,
}

fn case(ctx: &Context, ty: GgmlType, n: usize, k: usize, rng: &mut Rng) -> Case {
    let (wb, ub) = (random_rows(ty, n, k, rng), random_rows(ty, n, k, rng));
    let mut wd = vec![0f32; n * k];
    let mut ud = vec![0f32; n * k];
    dequantize(ty, &wb, &mut wd).unwrap();
    dequantize(ty, &ub, &mut ud).unwrap();
    assert!(wd.iter().chain(&ud).all(|v| v.is_finite()), "{ty:?}: random blocks should be finite");
    Case { w: QMatrix::upload(ctx, ty, n, k, &wb).unwrap(), u: QMatrix::upload(ctx, ty, n, k, &ub).unwrap(), wd, ud }
}

const TYPES: [GgmlType; 13] = [
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::Q8_0,
    GgmlType::Q4_1,
    GgmlType::Q5_K,
    GgmlType::F16,
    GgmlType::F32,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
];

/// One weight type at one precision: every T, both K, plain / bias + residual (also aliased) /
/// SwiGLU, each element within its bound, rows independent of T. Returns a report line per K.
fn check_type(ctx: &Context, ty: GgmlType, n: usize, precision: LlmGemmPrecision, rng: &mut Rng) -> Vec<String> {
    let mut report = vec![];
    let small = if ty.block_size() == 256 { 256 } else { 96 };
    for k in [4096usize, small] {
        let c = case(ctx, ty, n, k, rng);
        let tmax = 130usize;
        let xv: Vec<f32> = (0..tmax * k).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
        let bias: Vec<f32> = (0..n).map(|i| i as f32 * 0.01 - 0.1).collect();
        let resv: Vec<f32> = (0..tmax * n).map(|i| (i % 7) as f32 - 3.0).collect();
        // The reference for all 130 rows; smaller T take the first rows.
        let dots: Vec<(Dot, Dot)> = (0..tmax * n)
            .map(|i| {
                let (t, r) = (i / n, i % n);
                let xr = &xv[t * k..(t + 1) * k];
                (dot(&c.wd[r * k..(r + 1) * k], xr, precision), dot(&c.ud[r * k..(r + 1) * k], xr, precision))
            })
            .collect();
        let (mut worst, mut worst_abs) = (0f64, 0f64);
        let mut full: Option<Vec<f32>> = None;
        let what = |t: usize| format!("{ty:?} {precision:?} N={n} K={k} T={t}");
        for t in [tmax, 1, 7, 33] {
            let x = f32_tensor(ctx, &[t, k], &xv[..t * k]);
            let bt = f32_tensor(ctx, &[n], &bias);
            let rt = f32_tensor(ctx, &[t, n], &resv[..t * n]);
            let plain = gemm(ctx, precision, &c.w, None, &x, None, None);
            let epi = gemm(ctx, precision, &c.w, None, &x, Some(&bt), Some(&rt));
            let glu = gemm(ctx, precision, &c.w, Some(&c.u), &x, None, None);
            // Residual aliasing the output: read before written, element by element.
            let aliased = f32_tensor(ctx, &[t, n], &resv[..t * n]);
            let s = ctx.llm_gemm_scratch(t, &[(&c.w, false)], precision).unwrap();
            let mut batch = ctx.batch().unwrap();
            ctx.record_llm_gemm_in(&mut batch, &s, &c.w, None, &x, Epilogue { bias: Some(&bt), residual: Some(&aliased) }, &aliased).unwrap();
            batch.finish().unwrap();
            let aliased = download(ctx, &aliased);
            assert!(aliased.iter().zip(&epi).all(|(a, b)| a.to_bits() == b.to_bits()), "{}: residual aliasing out changed bits", what(t));
            for at in 0..t * n {
                let r = at % n;
                let (g, u) = dots[at];
                let err = (plain[at] as f64 - g.exact).abs();
                assert!(err <= g.bound, "{} element {at}: {} vs {} (bound {})", what(t), plain[at], g.exact, g.bound);
                worst = worst.max(err / g.bound);
                worst_abs = worst_abs.max(err);
                let want = g.exact + bias[r] as f64 + resv[at] as f64;
                let epi_bound = g.bound + 2.0 * E32 * (g.exact.abs() + (bias[r] as f64).abs() + (resv[at] as f64).abs() + g.bound);
                assert!((epi[at] as f64 - want).abs() <= epi_bound, "{} element {at} epilogue: {} vs {want}", what(t), epi[at]);
                let wg = silu(g.exact) * u.exact;
                assert!((glu[at] as f64 - wg).abs() <= swiglu_bound(g, u), "{} element {at} swiglu: {} vs {wg} (bound {})", what(t), glu[at], swiglu_bound(g, u));
            }
            // A row's bits do not depend on how many rows share the product (the 130-row call
            // runs first; every smaller T is a prefix of its rows).
            match &full {
                None => full = Some([plain.clone(), epi.clone(), glu.clone()].concat()),
                Some(f) => {
                    let (p1, rest) = f.split_at(tmax * n);
                    let (e1, g1) = rest.split_at(tmax * n);
                    for (got, all, name) in [(&plain, p1, "plain"), (&epi, e1, "epilogue"), (&glu, g1, "swiglu")] {
                        assert!(got.iter().zip(all).all(|(a, b)| a.to_bits() == b.to_bits()), "{}: {name} rows changed from T={tmax}", what(t));
                    }
                }
            }
        }
        report.push(format!("{ty:?} {precision:?} N={n} K={k}: max |err| {worst_abs:.2e}, max err/bound {worst:.3}"));
    }
    report
}

#[test]
fn gemm_matches_the_cpu_reference_for_every_type() {
    on_engine(|_| {
        let ctx = common::ctx();
        let mut rng = Rng::new(23);
        let mut report = vec![];
        for (i, ty) in TYPES.into_iter().enumerate() {
            // Odd N (padded to 40 columns, the epilogue copies) or N = 40 (the dot writes the
            // output itself when there is no epilogue).
            let n = if i % 2 == 0 { 37usize } else { 40 };
            report.extend(check_type(&ctx, ty, n, LlmGemmPrecision::F16, &mut rng));
        }
        println!("{}", report.join("\n"));
    });
}

#[test]
fn split_precision_matches_the_cpu_reference() {
    on_engine(|_| {
        let ctx = common::ctx();
        let mut rng = Rng::new(29);
        let mut report = vec![];
        for (ty, n) in [(GgmlType::Q4_K, 37), (GgmlType::Q6_K, 40), (GgmlType::Q8_0, 40), (GgmlType::F16, 37), (GgmlType::F32, 40)] {
            report.extend(check_type(&ctx, ty, n, LlmGemmPrecision::Split, &mut rng));
        }
        println!("{}", report.join("\n"));
    });
}

/// The bound is tight enough to fail a kernel that drops one unit of 32 weights of a row or
/// doubles one block's scale: on the CPU, the reference with that fault differs from the true
/// one beyond the bound in some token row, for most weight rows.
#[test]
fn a_dropped_block_would_fail() {
    let mut rng = Rng::new(5);
    let (n, t) = (16usize, 33usize);
    for (ty, k) in [(GgmlType::Q4_K, 4096usize), (GgmlType::Q8_0, 4096), (GgmlType::Q6_K, 256), (GgmlType::Q4_1, 96)] {
        let wb = random_rows(ty, n, k, &mut rng);
        let mut wd = vec![0f32; n * k];
        dequantize(ty, &wb, &mut wd).unwrap();
        let xv: Vec<f32> = (0..t * k).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
        let bs = ty.block_size() as usize;
        let (mut dropped, mut doubled) = (0, 0);
        for r in 0..n {
            let row = &wd[r * k..(r + 1) * k];
            let (mut seen_drop, mut seen_double) = (false, false);
            for c in 0..t {
                let xr = &xv[c * k..(c + 1) * k];
                let d = dot(row, xr, LlmGemmPrecision::F16);
                // The last unit of 32 dropped; the last block's values doubled.
                let unit: f64 = (k - 32..k).map(|j| row[j] as f64 * xr[j] as f64).sum();
                let block: f64 = (k - bs..k).map(|j| row[j] as f64 * xr[j] as f64).sum();
                seen_drop |= unit.abs() > d.bound;
                seen_double |= block.abs() > d.bound;
            }
            dropped += seen_drop as usize;
            doubled += seen_double as usize;
        }
        println!("{ty:?} K={k}: a dropped unit is seen in {dropped}/{n} rows, a doubled block scale in {doubled}/{n}");
        assert!(dropped * 4 >= n * 3 && doubled * 4 >= n * 3, "{ty:?} K={k}: the bound is too loose ({dropped}, {doubled} of {n})");
    }
}

#[test]
fn bad_input_is_an_error() {
    on_engine(|_| {
        let ctx = common::ctx();
        let mut rng = Rng::new(3);
        let c = case(&ctx, GgmlType::Q8_0, 8, 64, &mut rng);
        let other = case(&ctx, GgmlType::Q4_0, 8, 64, &mut rng);
        let x = f32_tensor(&ctx, &[3, 64], &[0.5; 192]);
        let x_wrong = f32_tensor(&ctx, &[3, 32], &[0.5; 96]);
        let out = ctx.empty(DType::F32, &[3, 8]).unwrap();
        let bias = f32_tensor(&ctx, &[8], &[0.0; 8]);
        let mut batch = ctx.batch().unwrap();
        let none = Epilogue::default();
        assert!(ctx.record_llm_gemm(&mut batch, &c.w, None, &x_wrong, none, &out).is_err(), "K mismatch");
        assert!(ctx.record_llm_gemm(&mut batch, &c.w, Some(&other.w), &x, none, &out).is_err(), "gate and up of different types");
        assert!(ctx.record_llm_gemm(&mut batch, &c.w, Some(&c.u), &x, Epilogue { bias: Some(&bias), residual: None }, &out).is_err(), "SwiGLU with a bias");
        assert!(ctx.record_llm_gemm(&mut batch, &c.w, None, &x, none, &ctx.empty(DType::F32, &[3, 9]).unwrap()).is_err(), "output shape");
        let small = ctx.llm_gemm_scratch(2, &[(&c.w, false)], LlmGemmPrecision::F16).unwrap();
        assert!(ctx.record_llm_gemm_in(&mut batch, &small, &c.w, None, &x, none, &out).is_err(), "scratch for 2 rows, 3 given");
        let no_up = ctx.llm_gemm_scratch(3, &[(&c.w, false)], LlmGemmPrecision::F16).unwrap();
        assert!(ctx.record_llm_gemm_in(&mut batch, &no_up, &c.w, Some(&c.u), &x, none, &out).is_err(), "scratch without room for the up matrix");
        ctx.record_llm_gemm_in(&mut batch, &no_up, &c.w, None, &x, none, &out).unwrap();
        batch.finish().unwrap();
    });
}

/// x and out may be row ranges of larger tensors (a step's prompt rows beside its decode
/// rows): the same bits as dense tensors, nothing outside the range written.
#[test]
fn row_ranges_of_x_and_out() {
    on_engine(|_| {
        let ctx = common::ctx();
        let mut rng = Rng::new(41);
        let (n, k, t) = (40usize, 256usize, 9usize);
        let c = case(&ctx, GgmlType::Q4_K, n, k, &mut rng);
        let xv: Vec<f32> = (0..(t + 1) * k).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
        let x_big = f32_tensor(&ctx, &[t + 1, k], &xv);
        let x_rows = x_big.slice(&[1, 0], &[t, k], &[1, 1]).unwrap();
        let x = f32_tensor(&ctx, &[t, k], &xv[k..]);
        let resv: Vec<f32> = (0..(t + 3) * n).map(|i| (i % 5) as f32 - 2.0).collect();
        for precision in [LlmGemmPrecision::F16, LlmGemmPrecision::Split] {
            for residual in [false, true] {
                let dense_res = f32_tensor(&ctx, &[t, n], &resv[2 * n..(t + 2) * n]);
                let dense = gemm(&ctx, precision, &c.w, None, &x, None, residual.then_some(&dense_res));
                let big = f32_tensor(&ctx, &[t + 3, n], &resv);
                let rows = big.slice(&[2, 0], &[t, n], &[1, 1]).unwrap();
                let s = ctx.llm_gemm_scratch(t, &[(&c.w, false)], precision).unwrap();
                let mut batch = ctx.batch().unwrap();
                ctx.record_llm_gemm_in(&mut batch, &s, &c.w, None, &x_rows, Epilogue { bias: None, residual: residual.then_some(&rows) }, &rows).unwrap();
                batch.finish().unwrap();
                let got = download(&ctx, &big);
                let what = format!("{precision:?} residual {residual}");
                assert!(got[..2 * n] == resv[..2 * n] && got[(t + 2) * n..] == resv[(t + 2) * n..], "{what}: rows outside the range written");
                assert!(got[2 * n..(t + 2) * n].iter().zip(&dense).all(|(a, b)| a.to_bits() == b.to_bits()), "{what}: a row range differs from the dense product");
            }
        }
    });
}

#[test]
fn the_predicate_needs_tensor_cores_unless_forced() {
    on_engine(|_| {
        let ctx = common::ctx();
        std::env::remove_var("NX_VULKAN_LLM_GEMM");
        let coopmat = matches!(nx_vulkan_engine::matmul::tensor_core_kernel(&ctx.caps, DType::F16), nx_vulkan_engine::matmul::MatmulKernel::CoopMat { .. });
        assert!(!llm_gemm_pays(&ctx.caps, LLM_GEMM_MIN_ROWS - 1), "below the threshold");
        assert_eq!(llm_gemm_pays(&ctx.caps, 512), coopmat, "512 rows on {}", ctx.caps.name);
        std::env::set_var("NX_VULKAN_LLM_GEMM", "on");
        assert!(llm_gemm_pays(&ctx.caps, 1));
        std::env::set_var("NX_VULKAN_LLM_GEMM", "off");
        assert!(!llm_gemm_pays(&ctx.caps, 512));
        std::env::remove_var("NX_VULKAN_LLM_GEMM");
    });
}

// ---- The fixtures' prompt logits with the GEMM in the forward step ----

/// `Llm::record_forward` with every matrix product on `record_llm_gemm` (until model.rs
/// chooses it with `llm_gemm_pays`): the prompt's logits, all rows, in one step.
fn forward_gemm(m: &Llm, rows: &[Row], precision: LlmGemmPrecision) -> Vec<Vec<f32>> {
    let ctx = &*m.ctx;
    let cfg = &m.config;
    let t = rows.len();
    let want: Vec<usize> = (0..t).collect();
    let (h, qd, kvd, ff) = (cfg.n_embd, cfg.q_dim(), cfg.kv_dim(), cfg.n_ff);
    let mut batch = ctx.batch().unwrap();
    let b = &mut batch;
    let u32s = |v: Vec<u32>| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let ids = ctx.record_upload(b, DType::U32, &[t], &u32s(rows.iter().map(|r| r.token).collect())).unwrap();
    let meta = ctx.record_upload(b, DType::U32, &[t, 2], &u32s(rows.iter().flat_map(|r| [r.slot, r.pos]).collect())).unwrap();
    let wanted = ctx.record_upload(b, DType::U32, &[t], &u32s(want.iter().map(|&w| w as u32).collect())).unwrap();
    let e = |shape: &[usize]| ctx.empty(DType::F32, shape).unwrap();
    let (x, xn, q, k, v, att, act) = (e(&[t, h]), e(&[t, h]), e(&[t, qd]), e(&[t, kvd]), e(&[t, kvd]), e(&[t, qd]), e(&[t, ff]));
    let mut products: Vec<(&QMatrix, bool)> = vec![(m.output_matrix(), false)];
    for l in &m.layers {
        products.extend([(&l.wq, false), (&l.wk, false), (&l.wv, false), (&l.wo, false), (&l.gate, true), (&l.down, false)]);
    }
    let s = ctx.llm_gemm_scratch(t, &products, precision).unwrap();
    ctx.record_llm_get_rows(b, &m.token_embd, &ids, &x).unwrap();
    let scale = 1.0 / (cfg.head_dim as f32).sqrt();
    let max_pos = rows.iter().map(|r| r.pos as usize).max().unwrap_or(0);
    let scratch = ctx.llm_attention_scratch(&m.attn, t, max_pos).unwrap();
    for l in &m.layers {
        ctx.record_llm_rmsnorm(b, &x, None, &l.attn_norm, cfg.rms_eps, &xn).unwrap();
        let bias = |i: usize| l.qkv_bias.as_ref().map(|bs| [&bs.0, &bs.1, &bs.2][i]);
        ctx.record_llm_gemm_in(b, &s, &l.wq, None, &xn, Epilogue { bias: bias(0), residual: None }, &q).unwrap();
        ctx.record_llm_gemm_in(b, &s, &l.wk, None, &xn, Epilogue { bias: bias(1), residual: None }, &k).unwrap();
        ctx.record_llm_gemm_in(b, &s, &l.wv, None, &xn, Epilogue { bias: bias(2), residual: None }, &v).unwrap();
        let qk_norm = l.qk_norm.as_ref().map(|(a, c)| (a, c, cfg.rms_eps));
        ctx.record_llm_rope_store(b, &m.attn, &q, &k, &v, &meta, &m.cos_sin, qk_norm, &l.cache_k, &l.cache_v).unwrap();
        ctx.record_llm_attention(b, &m.attn, &q, &meta, &l.cache_k, &l.cache_v, scale, &scratch, &att).unwrap();
        ctx.record_llm_gemm_in(b, &s, &l.wo, None, &att, Epilogue { bias: None, residual: Some(&x) }, &x).unwrap();
        ctx.record_llm_rmsnorm(b, &x, None, &l.ffn_norm, cfg.rms_eps, &xn).unwrap();
        ctx.record_llm_gemm_in(b, &s, &l.gate, Some(&l.up), &xn, Epilogue::default(), &act).unwrap();
        ctx.record_llm_gemm_in(b, &s, &l.down, None, &act, Epilogue { bias: None, residual: Some(&x) }, &x).unwrap();
    }
    let fin = e(&[t, h]);
    ctx.record_llm_rmsnorm(b, &x, Some(&wanted), &m.output_norm, cfg.rms_eps, &fin).unwrap();
    let logits = e(&[t, cfg.n_vocab]);
    ctx.record_llm_gemm_in(b, &s, m.output_matrix(), None, &fin, Epilogue::default(), &logits).unwrap();
    scratch.keep(b);
    for keep in [&x, &xn, &q, &k, &v, &att, &act, &fin, &ids, &meta, &wanted] {
        b.keep(keep.buffer());
    }
    batch.finish().unwrap();
    download(ctx, &logits).chunks_exact(cfg.n_vocab).map(|r| r.to_vec()).collect()
}

/// Every fixture's prompt logits through the GEMM forward at both precisions, against the
/// float64 reference (and beside the matvec forward's error). F16 operands move logits by more
/// than the matvec's 1e-3: measured on lavapipe 1.5e-3 (f16 weights: activations rounded only)
/// to 7.2e-3 (quantized weights, whose dequantized values are rounded too), logits of size
/// 2.5–4.6, against ≈ 1e-5 for the matvec; its ceiling, 2e-2 as for the f16 KV cache, still
/// fails a broken product, whose errors are of the logits' own size. Split meets the issue's
/// 1e-3.
#[test]
fn fixture_prompt_logits_with_the_gemm() {
    on_engine(|_| {
        let (mut worst_f16, mut worst_split) = (0f64, 0f64);
        for name in all_fixtures() {
            let f = fixture(&name);
            let prompt = &f.prompt;
            let opts = LlmOptions { context: Some(64), slots: 1, kv_f16: false, ..LlmOptions::default() };
            let m = Llm::load(common::ctx(), fixtures().join(format!("{name}.gguf")), &opts, &|_, _| {}).unwrap();
            let rows: Vec<Row> = prompt.iter().enumerate().map(|(i, &token)| Row { slot: 0, pos: i as u32, token }).collect();
            let err = |logits: &[Vec<f32>]| (0..rows.len()).map(|i| max_abs(&logits[i], &f.logits[i])).fold(0.0, f64::max);
            let f16 = err(&forward_gemm(&m, &rows, LlmGemmPrecision::F16));
            let split = err(&forward_gemm(&m, &rows, LlmGemmPrecision::Split));
            let matvec = err(&m.forward(&rows, &(0..rows.len()).collect::<Vec<_>>()).unwrap());
            let scale = f.logits[..rows.len()].iter().flatten().map(|v| v.abs() as f64).fold(0.0, f64::max);
            println!("{name}: prompt ({} rows) max |logit err| gemm f16 {f16:.2e}, split {split:.2e}, matvec {matvec:.2e} (max |logit| {scale:.2})", rows.len());
            (worst_f16, worst_split) = (worst_f16.max(f16), worst_split.max(split));
            assert!(f16 < 2e-2, "{name}: F16 GEMM prompt logits off by {f16}");
            assert!(split < 1e-3, "{name}: split GEMM prompt logits off by {split}");
        }
        println!("worst GEMM prompt logit error over the fixtures: f16 {worst_f16:.2e}, split {worst_split:.2e}");
    });
}
