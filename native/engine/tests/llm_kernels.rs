//! The quantized matrix × activations kernel against a plain CPU reference (the host
//! dequantizer, bit-exact with gguf-py, and an f64 dot), at model-sized rows (K = 4096: every
//! lane of the GPU kernel takes several units), for both kernels (row per invocation, as on
//! CPU drivers, and the workgroup reduction GPUs run), with bias, residual and SwiGLU
//! epilogues and with the RMSNorm fused in front, odd row counts and several token columns; a
//! column's bits must not depend on how many columns share the dispatch. (The tests set the
//! process environment to pick kernels, so they run alone.)

mod common;

use common::on_engine_alone;
use nx_vulkan_engine::llm::kernels::{Epilogue, QMatrix, RmsNorm};
use nx_vulkan_engine::llm::quant::{dequantize, random_rows, GgmlType};
use nx_vulkan_engine::llm::sample::Rng;
use nx_vulkan_engine::{Context, DType, Tensor};

fn f32_tensor(ctx: &Context, shape: &[usize], v: &[f32]) -> Tensor {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    ctx.upload(DType::F32, shape, &bytes).unwrap()
}

fn download(ctx: &Context, t: &Tensor) -> Vec<f32> {
    ctx.download(t).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// One product through the kernel: out [T, N].
fn run(ctx: &Context, w: &QMatrix, up: Option<&QMatrix>, x: &Tensor, bias: Option<&Tensor>, res: Option<&Tensor>) -> Vec<f32> {
    let t = x.shape()[0];
    let out = ctx.empty(DType::F32, &[t, w.rows]).unwrap();
    let mut batch = ctx.batch().unwrap();
    ctx.record_llm_matvec(&mut batch, w, up, x, Epilogue { bias, residual: res }, &out).unwrap();
    batch.finish().unwrap();
    download(ctx, &out)
}

/// The same product of `rmsnorm(x)` (gamma, eps) with the norm fused into the kernel.
fn run_normed(ctx: &Context, w: &QMatrix, up: Option<&QMatrix>, x: &Tensor, gamma: &Tensor, bias: Option<&Tensor>) -> Vec<f32> {
    let t = x.shape()[0];
    let out = ctx.empty(DType::F32, &[t, w.rows]).unwrap();
    let mut batch = ctx.batch().unwrap();
    let norm = RmsNorm { gamma, eps: NORM_EPS };
    ctx.record_llm_normed_matvec(&mut batch, w, up, x, norm, Epilogue { bias, residual: None }, &out).unwrap();
    batch.finish().unwrap();
    download(ctx, &out)
}

const NORM_EPS: f32 = 1e-5;

fn silu(g: f64) -> f64 {
    g / (1.0 + (-g).exp())
}

#[test]
fn matvec_matches_the_cpu_reference_in_both_kernels() {
    on_engine_alone(|_| {
        let ctx = common::ctx();
        let mut rng = Rng::new(11);
        let (n, k) = (37usize, 4096usize);
        let types = [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q5_K, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K];
        for kernel in ["row", "workgroup"] {
            std::env::set_var("NX_VULKAN_LLM_MATVEC", kernel);
            for ty in types {
                let (wb, ub) = (random_rows(ty, n, k, &mut rng), random_rows(ty, n, k, &mut rng));
                let mut wd = vec![0f32; n * k];
                let mut ud = vec![0f32; n * k];
                dequantize(ty, &wb, &mut wd).unwrap();
                dequantize(ty, &ub, &mut ud).unwrap();
                assert!(wd.iter().all(|v| v.is_finite()), "{ty:?}: random blocks should be finite");
                let w = QMatrix::upload(&ctx, ty, n, k, &wb).unwrap();
                let u = QMatrix::upload(&ctx, ty, n, k, &ub).unwrap();
                for t in [1usize, 3, 9] {
                    let xv: Vec<f32> = (0..t * k).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
                    let bias: Vec<f32> = (0..n).map(|i| i as f32 * 0.01).collect();
                    let resv: Vec<f32> = (0..t * n).map(|i| (i % 7) as f32 - 3.0).collect();
                    let x = f32_tensor(&ctx, &[t, k], &xv);
                    let bt = f32_tensor(&ctx, &[n], &bias);
                    let rt = f32_tensor(&ctx, &[t, n], &resv);
                    let plain = run(&ctx, &w, None, &x, None, None);
                    let epi = run(&ctx, &w, None, &x, Some(&bt), Some(&rt));
                    let glu = run(&ctx, &w, Some(&u), &x, None, None);
                    let gamma: Vec<f32> = (0..k).map(|_| (rng.next_f64() * 1.5 + 0.25) as f32).collect();
                    let gt = f32_tensor(&ctx, &[k], &gamma);
                    let normed = run_normed(&ctx, &w, None, &x, &gt, Some(&bt));
                    let normed_glu = run_normed(&ctx, &w, Some(&u), &x, &gt, None);
                    for c in 0..t {
                        let row = &xv[c * k..(c + 1) * k];
                        let rs = 1.0 / (row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / k as f64 + NORM_EPS as f64).sqrt();
                        for r in 0..n {
                            // The normed product against rmsnorm(x) in f64.
                            let (mut dn, mut dun, mut magn) = (0f64, 0f64, 0f64);
                            for j in 0..k {
                                let xj = row[j] as f64 * rs * gamma[j] as f64;
                                dn += wd[r * k + j] as f64 * xj;
                                dun += ud[r * k + j] as f64 * xj;
                                magn += (wd[r * k + j] as f64 * xj).abs() + (ud[r * k + j] as f64 * xj).abs();
                            }
                            let tol = magn * 4.0 * k as f64 * f32::EPSILON as f64 / 64.0 + 1e-6;
                            let at = c * n + r;
                            let want = dn + bias[r] as f64;
                            assert!((normed[at] as f64 - want).abs() <= tol + 1e-6, "{kernel} {ty:?} T={t} row {r} col {c} normed: {} vs {want}", normed[at]);
                            let wg = silu(dn) * dun;
                            assert!((normed_glu[at] as f64 - wg).abs() <= tol * (1.0 + dun.abs() + dn.abs()), "{kernel} {ty:?} T={t} row {r} col {c} normed swiglu: {} vs {wg}", normed_glu[at]);
                        }
                        for r in 0..n {
                            let (mut d, mut du, mut mag) = (0f64, 0f64, 0f64);
                            for j in 0..k {
                                let xj = xv[c * k + j] as f64;
                                d += wd[r * k + j] as f64 * xj;
                                du += ud[r * k + j] as f64 * xj;
                                mag += (wd[r * k + j] as f64 * xj).abs() + (ud[r * k + j] as f64 * xj).abs();
                            }
                            // f32 accumulation over k terms: a few ulps of the magnitude sum.
                            let tol = mag * 4.0 * k as f64 * f32::EPSILON as f64 / 64.0 + 1e-6;
                            let at = c * n + r;
                            let what = format!("{kernel} {ty:?} T={t} row {r} col {c}");
                            assert!((plain[at] as f64 - d).abs() <= tol, "{what}: {} vs {d} (tol {tol})", plain[at]);
                            let want = d + bias[r] as f64 + resv[at] as f64;
                            assert!((epi[at] as f64 - want).abs() <= tol + 1e-6, "{what} epilogue: {} vs {want}", epi[at]);
                            let wg = silu(d) * du;
                            assert!((glu[at] as f64 - wg).abs() <= tol * (1.0 + du.abs() + d.abs()), "{what} swiglu: {} vs {wg}", glu[at]);
                        }
                    }
                    // The GPU kernel's rows per lane group share reads of x and nothing else; its
                    // workgroup size changes no bit either (that for two formats and one T:
                    // lavapipe compiles each barrier kernel slowly).
                    if kernel == "workgroup" {
                        let mut variants = vec![("NX_VULKAN_LLM_ROWS", "1")];
                        if matches!(ty, GgmlType::Q4_K | GgmlType::Q8_0) && t == 3 {
                            variants.push(("NX_VULKAN_LLM_WG", "256"));
                        }
                        for (var, value) in variants {
                            std::env::set_var(var, value);
                            let one = run(&ctx, &w, None, &x, None, None);
                            let glu_one = run(&ctx, &w, Some(&u), &x, None, None);
                            let normed_one = run_normed(&ctx, &w, Some(&u), &x, &gt, None);
                            std::env::remove_var(var);
                            let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits());
                            assert!(same(&one, &plain) && same(&glu_one, &glu) && same(&normed_one, &normed_glu), "{ty:?} T={t}: {var}={value} changed a bit");
                        }
                    }
                    // Column 0 alone gives the same bits as column 0 among t.
                    if t > 1 {
                        let x0 = f32_tensor(&ctx, &[1, k], &xv[..k]);
                        let alone = run(&ctx, &w, None, &x0, None, None);
                        assert!(alone.iter().zip(&plain[..n]).all(|(a, b)| a.to_bits() == b.to_bits()), "{kernel} {ty:?}: column 0 changed with T={t}");
                        let alone = run_normed(&ctx, &w, Some(&u), &x0, &gt, None);
                        assert!(alone.iter().zip(&normed_glu[..n]).all(|(a, b)| a.to_bits() == b.to_bits()), "{kernel} {ty:?}: normed column 0 changed with T={t}");
                    }
                }
            }
        }
        std::env::remove_var("NX_VULKAN_LLM_MATVEC");
    });
}

/// Opt-in int8 activations, for every quantized format (all have them): each group of x — 32
/// values, Q6_K's 16 (its weight scale group) — becomes dx·round(x / dx) with
/// dx = max|x| / 127, so the product may move by up to Σ |w_q| · dx / 2, where w_q is the part
/// of the weight multiplied by the quants (the `dmin` and `m` terms of Q4_K, Q5_K, Q4_1, Q5_1
/// and Q2_K meet the exact Σ x), beyond f32 rounding. Checked in both
/// kernels against an f64 dot of the unquantized x (that bound) and of the quantization
/// emulated on the host (f32 rounding), with a zero group, an outlier, -0.0, a denormal and
/// odd row counts; the results must differ from the f32-activation path (the int8 one ran),
/// and a column's bits must not depend on its batch-mates.
#[test]
fn int8_activations_stay_within_the_quantization_bound() {
    on_engine_alone(|_| {
        let ctx = common::ctx();
        if !ctx.caps.integer_dot_product {
            eprintln!("skipped: {} has no integer dot product", ctx.caps.name);
            return;
        }
        let mut rng = Rng::new(23);
        let k = 1024usize;
        let formats = [
            (GgmlType::Q4_K, 37usize),
            (GgmlType::Q6_K, 29),
            (GgmlType::Q8_0, 31),
            (GgmlType::Q4_0, 19),
            (GgmlType::Q4_1, 23),
            (GgmlType::Q5_0, 17),
            (GgmlType::Q5_1, 21),
            (GgmlType::Q5_K, 41),
            (GgmlType::Q2_K, 27),
            (GgmlType::Q3_K, 33),
        ];
        let listed: Vec<GgmlType> = formats.iter().map(|f| f.0).collect();
        for ty in GgmlType::ALL.into_iter().filter(|&ty| QMatrix::int8_capable(ty)) {
            assert!(listed.contains(&ty), "{ty:?} has an int8 form this test does not check");
        }
        for (ty, n) in formats {
            assert!(QMatrix::int8_capable(ty));
            let group = if ty == GgmlType::Q6_K { 16 } else { 32 };
            let wb = random_rows(ty, n, k, &mut rng);
            let mut wd = vec![0f32; n * k];
            dequantize(ty, &wb, &mut wd).unwrap();
            // w_q alone: the same blocks with the offset term's f16 zeroed (Q4_K's and Q5_K's
            // dmin, bytes 2..4 of 144 and 176; Q4_1's and Q5_1's m, bytes 2..4 of 20 and 24;
            // Q2_K's dmin, bytes 82..84 of 84).
            let mut qb = wb.clone();
            if let Some((bb, at)) = match ty {
                GgmlType::Q4_K => Some((144, 2)),
                GgmlType::Q5_K => Some((176, 2)),
                GgmlType::Q4_1 => Some((20, 2)),
                GgmlType::Q5_1 => Some((24, 2)),
                GgmlType::Q2_K => Some((84, 82)),
                _ => None,
            } {
                for blk in qb.chunks_exact_mut(bb) {
                    blk[at] = 0;
                    blk[at + 1] = 0;
                }
            }
            let mut wq = vec![0f32; n * k];
            dequantize(ty, &qb, &mut wq).unwrap();
            let exact = QMatrix::upload(&ctx, ty, n, k, &wb).unwrap();
            let w = QMatrix::upload(&ctx, ty, n, k, &wb).unwrap().with_int8_activations(&ctx, true).unwrap();
            assert!(w.x_int8 && !exact.x_int8);
            for kernel in ["row", "workgroup"] {
                std::env::set_var("NX_VULKAN_LLM_MATVEC", kernel);
                for t in [1usize, 3] {
                    let mut xv: Vec<f32> = (0..t * k).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
                    xv[..32].fill(0.0);
                    xv[40] = 50.0;
                    xv[70] = -0.0;
                    xv[100] = 1e-40;
                    let x = f32_tensor(&ctx, &[t, k], &xv);
                    let got = run(&ctx, &w, None, &x, None, None);
                    let f32_path = run(&ctx, &exact, None, &x, None, None);
                    let at = format!("{ty:?} {kernel} T={t}");
                    assert!(got.iter().zip(&f32_path).any(|(a, b)| a.to_bits() != b.to_bits()), "{at}: the int8 path gave the f32 path's bits");
                    for c in 0..t {
                        let row = &xv[c * k..(c + 1) * k];
                        for r in 0..n {
                            let (mut d, mut mag, mut bound) = (0f64, 0f64, 0f64);
                            // And the quantization emulated on the host (round half away from zero
                            // vs the device's even: a value within 1e-4 of a tie may land on either
                            // side, worth |w_q|·dx).
                            let (mut emul, mut ties) = (0f64, 0f64);
                            for (b, blk) in row.chunks_exact(group).enumerate() {
                                let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
                                let dx = amax / 127.0;
                                for (j, &xj) in blk.iter().enumerate() {
                                    let i = r * k + b * group + j;
                                    d += wd[i] as f64 * xj as f64;
                                    mag += (wd[i] as f64 * xj as f64).abs();
                                    bound += wq[i].abs() as f64 * dx * 0.502;
                                    let scaled = if amax > 0.0 { xj as f64 * 127.0 / amax } else { 0.0 };
                                    emul += wq[i] as f64 * scaled.round() * dx + (wd[i] as f64 - wq[i] as f64) * xj as f64;
                                    if ((scaled - scaled.trunc()).abs() - 0.5).abs() < 1e-4 {
                                        ties += wq[i].abs() as f64 * dx;
                                    }
                                }
                            }
                            let rounding = mag * 4.0 * k as f64 * f32::EPSILON as f64 / 64.0 + 1e-6;
                            let v = got[c * n + r] as f64;
                            assert!((v - emul).abs() <= ties + rounding, "{at} row {r} col {c}: {v} vs the emulated quantization {emul}");
                            assert!((v - d).abs() <= bound + rounding, "{at} row {r} col {c}: {v} vs {d} (bound {bound})");
                        }
                    }
                    if t > 1 {
                        let x0 = f32_tensor(&ctx, &[1, k], &xv[..k]);
                        let alone = run(&ctx, &w, None, &x0, None, None);
                        assert!(alone.iter().zip(&got[..n]).all(|(a, b)| a.to_bits() == b.to_bits()), "{at}: int8 column 0 changed with T={t}");
                    }
                }
            }
        }
        std::env::remove_var("NX_VULKAN_LLM_MATVEC");
    });
}
