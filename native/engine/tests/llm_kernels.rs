//! The quantized matrix × activations kernel against a plain CPU reference (the host
//! dequantizer, bit-exact with gguf-py, and an f64 dot), at model-sized rows (K = 4096: every
//! lane of the GPU kernel takes several units), for both kernels (row per invocation, as on
//! CPU drivers, and the workgroup reduction GPUs run), with bias, residual and SwiGLU
//! epilogues and with the RMSNorm fused in front, odd row counts and several token columns; a
//! column's bits must not depend on how many columns share the dispatch. (The tests set the
//! process environment to pick kernels, so they run alone.)

mod common;

use common::on_engine_alone;
use nx_vulkan_engine::llm::kernels::{llm_norm_blocks, Epilogue, NextNorm, NormSums, QMatrix, RmsNorm};
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

/// The block sums of squares a residual product or the norm-sums kernel writes for a row: per
/// block of 8 values, from zero, ascending, each square rounded before it is added.
fn block_sums(row: &[f32]) -> Vec<f32> {
    row.chunks(8).map(|b| b.iter().fold(0f32, |a, &v| a + v * v)).collect()
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits())
}

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
                    // The quants' older float form (2^23 + q, minus 2^23: NX_VULKAN_LLM_QUANT_MANTISSA=0,
                    // a measurement) stays within the same bound, and is not the default's bits
                    // (1 + q·2^-bits), so the switch is seen to reach the kernel.
                    if t == 3 && matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K) {
                        std::env::set_var("NX_VULKAN_LLM_QUANT_MANTISSA", "0");
                        let old_form = run(&ctx, &w, None, &x, None, None);
                        std::env::remove_var("NX_VULKAN_LLM_QUANT_MANTISSA");
                        let (mut worst_old, mut worst_new) = (0f64, 0f64);
                        for c in 0..t {
                            for r in 0..n {
                                let (mut d, mut mag) = (0f64, 0f64);
                                for j in 0..k {
                                    let p = wd[r * k + j] as f64 * xv[c * k + j] as f64;
                                    d += p;
                                    mag += p.abs();
                                }
                                let tol = mag * 4.0 * k as f64 * f32::EPSILON as f64 / 64.0 + 1e-6;
                                let v = old_form[c * n + r] as f64;
                                assert!((v - d).abs() <= tol, "{kernel} {ty:?} row {r} col {c} (old quant form): {v} vs {d}");
                                worst_old = worst_old.max((v - d).abs() / (mag * f32::EPSILON as f64));
                                worst_new = worst_new.max((plain[c * n + r] as f64 - d).abs() / (mag * f32::EPSILON as f64));
                            }
                        }
                        // (Seen with --nocapture: the worst error in units of f32 ε · Σ |w·x|.)
                        eprintln!("{kernel} {ty:?}: worst error {worst_new:.3} (1 + q·2^-bits) vs {worst_old:.3} (2^23 + q) ε·Σ|w·x|");
                        assert!(old_form.iter().zip(&plain).any(|(a, b)| a.to_bits() != b.to_bits()), "{kernel} {ty:?}: NX_VULKAN_LLM_QUANT_MANTISSA=0 changed no bit");
                    }
                    // The GPU kernel's rows per lane group share reads of x and nothing else; no
                    // bit changes with them, nor with a grid of two workgroups looping over the
                    // row groups, nor with the reduction tree wholly in shared memory instead of
                    // its low levels in subgroup registers (the default where the device has
                    // shuffles: lavapipe's subgroups of 8 take three of 64 lanes' six levels),
                    // nor with the workgroup size (that for two formats and one T: lavapipe
                    // compiles each barrier kernel slowly).
                    if kernel == "workgroup" {
                        let mut variants = vec![("NX_VULKAN_LLM_ROWS", "1"), ("NX_VULKAN_LLM_SUBGROUP_TREE", "0"), ("NX_VULKAN_LLM_GROUPS", "2")];
                        if matches!(ty, GgmlType::Q4_K | GgmlType::Q8_0) && t == 3 {
                            variants.push(("NX_VULKAN_LLM_WG", "256"));
                        }
                        for (var, value) in variants {
                            std::env::set_var(var, value);
                            let one = run(&ctx, &w, None, &x, None, None);
                            let glu_one = run(&ctx, &w, Some(&u), &x, None, None);
                            let normed_one = run_normed(&ctx, &w, Some(&u), &x, &gt, None);
                            std::env::remove_var(var);
                            assert!(same_bits(&one, &plain) && same_bits(&glu_one, &glu) && same_bits(&normed_one, &normed_glu), "{ty:?} T={t}: {var}={value} changed a bit");
                        }
                    }
                    // Steps of several columns with the Q4_K/Q5_K/Q6_K quant words made floats once
                    // for all of them (the default, in both kernels): the bits of the per-column
                    // path (NX_VULKAN_LLM_BATCH_SHARE=0, a measurement).
                    if t > 1 && matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K) {
                        std::env::set_var("NX_VULKAN_LLM_BATCH_SHARE", "0");
                        let per_column = run(&ctx, &w, None, &x, None, None);
                        let glu_per_column = run(&ctx, &w, Some(&u), &x, None, None);
                        let normed_per_column = run_normed(&ctx, &w, Some(&u), &x, &gt, None);
                        std::env::remove_var("NX_VULKAN_LLM_BATCH_SHARE");
                        assert!(same_bits(&per_column, &plain) && same_bits(&glu_per_column, &glu) && same_bits(&normed_per_column, &normed_glu), "{ty:?} T={t}: NX_VULKAN_LLM_BATCH_SHARE=0 changed a bit");
                    }
                    // Column 0 alone gives the same bits as column 0 among t.
                    if t > 1 {
                        let x0 = f32_tensor(&ctx, &[1, k], &xv[..k]);
                        let alone = run(&ctx, &w, None, &x0, None, None);
                        assert!(same_bits(&alone, &plain[..n]), "{kernel} {ty:?}: column 0 changed with T={t}");
                        let alone = run_normed(&ctx, &w, Some(&u), &x0, &gt, None);
                        assert!(same_bits(&alone, &normed_glu[..n]), "{kernel} {ty:?}: normed column 0 changed with T={t}");
                    }
                }
            }
        }
        std::env::remove_var("NX_VULKAN_LLM_MATVEC");
    });
}

/// RMSNorms by block sums (the runtime's NX_VULKAN_LLM_NORM=sums): a residual product also writes its output
/// times the next norm's weight and each row's sums of squares of blocks of 8 outputs, bit for
/// bit as the CPU computes them from the product's output (rows not a multiple of 8: a short
/// last block); the norm-sums kernel writes the same for given rows; and the products after the
/// norm, reading those rows and sums, match rmsnorm(x) · W in f64 within the normed product's
/// bound, read the sums (not x's squares: scaled sums move the result), and give column 0 the
/// same bits alone and among others. Both kernels.
#[test]
fn summed_norms_match_the_cpu_reference_in_both_kernels() {
    on_engine_alone(|_| {
        let ctx = common::ctx();
        let mut rng = Rng::new(23);
        let k = 4096usize;
        for kernel in ["row", "workgroup"] {
            std::env::set_var("NX_VULKAN_LLM_MATVEC", kernel);
            assert!(ctx.llm_summed_norms_fit(), "{kernel}: the default shapes fit");
            for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0] {
                for t in [1usize, 3, 9] {
                    // The producer: out = res + W·a over 37 rows (blocks of 8, 8, 8, 8, 5).
                    let n = 37usize;
                    let wb = random_rows(ty, n, k, &mut rng);
                    let w = QMatrix::upload(&ctx, ty, n, k, &wb).unwrap();
                    let av: Vec<f32> = (0..t * k).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
                    let resv: Vec<f32> = (0..t * n).map(|i| (i % 7) as f32 - 3.0).collect();
                    let gnext: Vec<f32> = (0..n).map(|_| (rng.next_f64() * 1.5 + 0.25) as f32).collect();
                    let (a, res, gt) = (f32_tensor(&ctx, &[t, k], &av), f32_tensor(&ctx, &[t, n], &resv), f32_tensor(&ctx, &[n], &gnext));
                    let (out, scaled, sums) = (ctx.empty(DType::F32, &[t, n]).unwrap(), ctx.empty(DType::F32, &[t, n]).unwrap(), ctx.empty(DType::F32, &[t, llm_norm_blocks(n)]).unwrap());
                    let mut batch = ctx.batch().unwrap();
                    ctx.record_llm_matvec_norm_out(&mut batch, &w, &a, Epilogue { bias: None, residual: Some(&res) }, &out, NextNorm { gamma: &gt, scaled: &scaled, sums: &sums }).unwrap();
                    batch.finish().unwrap();
                    let (ov, sv, bv) = (download(&ctx, &out), download(&ctx, &scaled), download(&ctx, &sums));
                    if t == 3 {
                        // Misuse is an error, not a race or an out-of-range write: the next
                        // norm's outputs in a buffer the product reads or writes, sums of the
                        // wrong shape, a product without a residual.
                        let mut batch = ctx.batch().unwrap();
                        let bad_sums = ctx.empty(DType::F32, &[t, 4]).unwrap();
                        let epi = Epilogue { bias: None, residual: Some(&res) };
                        assert!(ctx.record_llm_matvec_norm_out(&mut batch, &w, &a, epi, &out, NextNorm { gamma: &gt, scaled: &out, sums: &sums }).is_err(), "scaled = out");
                        assert!(ctx.record_llm_matvec_norm_out(&mut batch, &w, &a, epi, &out, NextNorm { gamma: &gt, scaled: &scaled, sums: &res }).is_err(), "sums = residual");
                        assert!(ctx.record_llm_matvec_norm_out(&mut batch, &w, &a, epi, &out, NextNorm { gamma: &gt, scaled: &scaled, sums: &bad_sums }).is_err(), "sums [T, 4]");
                        assert!(ctx.record_llm_matvec_norm_out(&mut batch, &w, &a, Epilogue::default(), &out, NextNorm { gamma: &gt, scaled: &scaled, sums: &sums }).is_err(), "no residual");
                        let bad_k = ctx.empty(DType::F32, &[t, 9]).unwrap();
                        assert!(ctx.record_llm_normed_matvec(&mut batch, &w, None, &a, NormSums { sums: &bad_k, eps: NORM_EPS }, Epilogue::default(), &out).is_err(), "norm sums [T, 9] for K = 4096");
                        batch.finish().unwrap();
                    }
                    assert!(same_bits(&ov, &run(&ctx, &w, None, &a, None, Some(&res))), "{kernel} {ty:?} T={t}: the product's output changed");
                    for c in 0..t {
                        let row = &ov[c * n..(c + 1) * n];
                        let want: Vec<f32> = row.iter().zip(&gnext).map(|(v, g)| v * g).collect();
                        assert!(same_bits(&sv[c * n..(c + 1) * n], &want), "{kernel} {ty:?} T={t} col {c}: scaled rows");
                        assert!(same_bits(&bv[c * 5..(c + 1) * 5], &block_sums(row)), "{kernel} {ty:?} T={t} col {c}: block sums {:?} vs {:?}", &bv[c * 5..(c + 1) * 5], block_sums(row));
                    }
                }
                // The products after a norm, on K = 4096 rows prepared by the norm-sums kernel.
                let n = 37usize;
                let (wb, ub) = (random_rows(ty, n, k, &mut rng), random_rows(ty, n, k, &mut rng));
                let (mut wd, mut ud) = (vec![0f32; n * k], vec![0f32; n * k]);
                dequantize(ty, &wb, &mut wd).unwrap();
                dequantize(ty, &ub, &mut ud).unwrap();
                let (w, u) = (QMatrix::upload(&ctx, ty, n, k, &wb).unwrap(), QMatrix::upload(&ctx, ty, n, k, &ub).unwrap());
                let gamma: Vec<f32> = (0..k).map(|_| (rng.next_f64() * 1.5 + 0.25) as f32).collect();
                let gt = f32_tensor(&ctx, &[k], &gamma);
                let mut first_column = None;
                for t in [1usize, 3, 9] {
                    // (column 0 the same in every T, for the alone-versus-among check)
                    let mut xv: Vec<f32> = first_column.clone().unwrap_or_default();
                    xv.extend((xv.len()..t * k).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32));
                    if t == 9 {
                        // a row of tiny values: its sums underflow to subnormals and zeros
                        xv[5 * k..6 * k].iter_mut().for_each(|v| *v *= 1e-22);
                    }
                    first_column.get_or_insert_with(|| xv[..k].to_vec());
                    let x = f32_tensor(&ctx, &[t, k], &xv);
                    let (scaled, sums) = (ctx.empty(DType::F32, &[t, k]).unwrap(), ctx.empty(DType::F32, &[t, llm_norm_blocks(k)]).unwrap());
                    let mut batch = ctx.batch().unwrap();
                    ctx.record_llm_norm_sums(&mut batch, &x, &gt, &scaled, &sums).unwrap();
                    batch.finish().unwrap();
                    let (sv, bv) = (download(&ctx, &scaled), download(&ctx, &sums));
                    for c in 0..t {
                        let row = &xv[c * k..(c + 1) * k];
                        let want: Vec<f32> = row.iter().zip(&gamma).map(|(v, g)| v * g).collect();
                        assert!(same_bits(&sv[c * k..(c + 1) * k], &want) && same_bits(&bv[c * 512..(c + 1) * 512], &block_sums(row)), "{ty:?} T={t} col {c}: the norm-sums kernel");
                    }
                    let product = |up: Option<&QMatrix>, sums: &nx_vulkan_engine::Tensor| {
                        let out = ctx.empty(DType::F32, &[t, n]).unwrap();
                        let mut batch = ctx.batch().unwrap();
                        ctx.record_llm_normed_matvec(&mut batch, &w, up, &scaled, NormSums { sums, eps: NORM_EPS }, Epilogue::default(), &out).unwrap();
                        batch.finish().unwrap();
                        download(&ctx, &out)
                    };
                    let (normed, normed_glu) = (product(None, &sums), product(Some(&u), &sums));
                    if kernel == "workgroup" {
                        // the sum's chains over the dot sums' tree (a measurement): the same bits
                        std::env::set_var("NX_VULKAN_LLM_SUMS_IN_TREE", "1");
                        let in_tree = product(Some(&u), &sums);
                        std::env::remove_var("NX_VULKAN_LLM_SUMS_IN_TREE");
                        assert!(same_bits(&in_tree, &normed_glu), "{ty:?} T={t}: NX_VULKAN_LLM_SUMS_IN_TREE=1 changed a bit");
                    }
                    // four times the sums: the scale halves (up to eps's share)
                    let quadrupled = f32_tensor(&ctx, &[t, 512], &bv.iter().map(|v| v * 4.0).collect::<Vec<_>>());
                    let halved = product(None, &quadrupled);
                    for c in 0..t {
                        let row = &xv[c * k..(c + 1) * k];
                        let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / k as f64;
                        let rs = 1.0 / (ms + NORM_EPS as f64).sqrt();
                        let rs4 = 1.0 / (4.0 * ms + NORM_EPS as f64).sqrt();
                        for r in 0..n {
                            let (mut d, mut du, mut mag) = (0f64, 0f64, 0f64);
                            for j in 0..k {
                                let xj = row[j] as f64 * gamma[j] as f64;
                                d += wd[r * k + j] as f64 * xj;
                                du += ud[r * k + j] as f64 * xj;
                                mag += (wd[r * k + j] as f64 * xj).abs() + (ud[r * k + j] as f64 * xj).abs();
                            }
                            let tol = mag * rs * 4.0 * k as f64 * f32::EPSILON as f64 / 64.0 + 1e-6;
                            let at = c * n + r;
                            let what = format!("{kernel} {ty:?} T={t} row {r} col {c}");
                            assert!((normed[at] as f64 - d * rs).abs() <= tol, "{what} summed norm: {} vs {}", normed[at], d * rs);
                            assert!((halved[at] as f64 - d * rs4).abs() <= tol, "{what} quadrupled sums: {} vs {}", halved[at], d * rs4);
                            let wg = silu(d * rs) * du * rs;
                            assert!((normed_glu[at] as f64 - wg).abs() <= tol * (1.0 + (du * rs).abs() + (d * rs).abs()), "{what} summed norm swiglu: {} vs {wg}", normed_glu[at]);
                        }
                    }
                    if t > 1 {
                        let x0 = f32_tensor(&ctx, &[1, k], &xv[..k]);
                        let (s0, b0) = (ctx.empty(DType::F32, &[1, k]).unwrap(), ctx.empty(DType::F32, &[1, 512]).unwrap());
                        let mut batch = ctx.batch().unwrap();
                        ctx.record_llm_norm_sums(&mut batch, &x0, &gt, &s0, &b0).unwrap();
                        let out = ctx.empty(DType::F32, &[1, n]).unwrap();
                        ctx.record_llm_normed_matvec(&mut batch, &w, Some(&u), &s0, NormSums { sums: &b0, eps: NORM_EPS }, Epilogue::default(), &out).unwrap();
                        batch.finish().unwrap();
                        assert!(same_bits(&download(&ctx, &out), &normed_glu[..n]), "{kernel} {ty:?}: summed-norm column 0 changed with T={t}");
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
/// and Q2_K meet the exact Σ x), beyond f32 rounding. Checked in both kernels against an f64
/// dot of the unquantized x (that bound) and of the quantization emulated on the host (f32
/// rounding), with a zero group, an outlier, -0.0, a denormal and odd row counts; the results
/// must differ from the f32-activation path (the int8 one ran), and a column's bits must not
/// depend on its batch-mates.
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
                        assert!(same_bits(&alone, &got[..n]), "{at}: int8 column 0 changed with T={t}");
                    }
                }
            }
        }
        std::env::remove_var("NX_VULKAN_LLM_MATVEC");
    });
}

/// The Q, K and V products with the rotation and the cache stores fused into them
/// (`record_llm_qkv_rope`) give the bits of the products followed by llm_rope.glsl's dispatch
/// (`record_llm_qkv`, then `record_llm_rope_store`): adjacent-pair (llama) and NEOX (qwen2)
/// rotation, every dimension of a head rotated and only the first half (`rope_dims` <
/// `head_dim`, which no fixture model has), f32 and f16 caches, both kernels, with biases. And
/// the rotated q is within f32 rounding of a host rotation (f64) of the host product.
#[test]
fn fused_rope_store_gives_the_separate_bits() {
    use nx_vulkan_engine::llm::kernels::{AttnShape, RopeStore};
    on_engine_alone(|_| {
        let ctx = common::ctx();
        let mut rng = Rng::new(31);
        let (n_head, n_head_kv, hd, k) = (4usize, 2usize, 64usize, 256usize);
        let widths = [n_head * hd, n_head_kv * hd, n_head_kv * hd];
        let ty = GgmlType::Q8_0;
        let (mut w, mut wd, mut bias, mut bias_t) = (vec![], vec![], vec![], vec![]);
        for &n in &widths {
            let wb = random_rows(ty, n, k, &mut rng);
            let mut d = vec![0f32; n * k];
            dequantize(ty, &wb, &mut d).unwrap();
            w.push(QMatrix::upload(&ctx, ty, n, k, &wb).unwrap());
            wd.push(d);
            let b: Vec<f32> = (0..n).map(|_| (rng.next_f64() - 0.5) as f32).collect();
            bias_t.push(f32_tensor(&ctx, &[n], &b));
            bias.push(b);
        }
        // three rows: (slot, position)
        let rows = [(0u32, 5u32), (1, 0), (1, 17)];
        let t = rows.len();
        let row_bytes: Vec<u8> = rows.iter().flat_map(|&(s, p)| [s.to_le_bytes(), p.to_le_bytes()].concat()).collect();
        let rows_t = ctx.upload(DType::U32, &[t, 2], &row_bytes).unwrap();
        let xv: Vec<f32> = (0..t * k).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
        let x = f32_tensor(&ctx, &[t, k], &xv);
        let ctx_len = 24usize;
        for kernel in ["row", "workgroup"] {
            std::env::set_var("NX_VULKAN_LLM_MATVEC", kernel);
            for (neox, rope_dims) in [(false, 64usize), (true, 64), (true, 32), (false, 32)] {
                let half = rope_dims / 2;
                let mut table = vec![0f32; ctx_len * half * 2];
                for pos in 0..ctx_len {
                    for i in 0..half {
                        let theta = pos as f64 * 10000f64.powf(-2.0 * i as f64 / rope_dims as f64);
                        table[(pos * half + i) * 2] = theta.cos() as f32;
                        table[(pos * half + i) * 2 + 1] = theta.sin() as f32;
                    }
                }
                let cos_sin = f32_tensor(&ctx, &[ctx_len, half, 2], &table);
                for kv_f16 in [false, true] {
                    let shape = AttnShape { n_head, n_head_kv, head_dim: hd, rope_dims, rope_neox: neox, ctx: ctx_len, slots: 2, kv_f16 };
                    let at = format!("{kernel} neox {neox} rope_dims {rope_dims} f16 cache {kv_f16}");
                    let run = |fused: bool| {
                        let cs = shape.cache_shape();
                        let zeros = vec![0u8; cs.iter().product::<usize>() * shape.kv_dtype().size()];
                        let (ck, cv) = (ctx.upload(shape.kv_dtype(), &cs, &zeros).unwrap(), ctx.upload(shape.kv_dtype(), &cs, &zeros).unwrap());
                        let q = ctx.empty(DType::F32, &[t, widths[0]]).unwrap();
                        let ws = [&w[0], &w[1], &w[2]];
                        let bs = [Some(&bias_t[0]), Some(&bias_t[1]), Some(&bias_t[2])];
                        if fused {
                            let mut batch = ctx.batch().unwrap();
                            let store = RopeStore { shape: &shape, rows: &rows_t, cos_sin: &cos_sin, cache_k: &ck, cache_v: &cv };
                            ctx.record_llm_qkv_rope(&mut batch, ws, &x, None, bs, &q, store).unwrap();
                            batch.finish().unwrap();
                        } else {
                            let (kt, vt) = (ctx.empty(DType::F32, &[t, widths[1]]).unwrap(), ctx.empty(DType::F32, &[t, widths[2]]).unwrap());
                            let mut batch = ctx.batch().unwrap();
                            ctx.record_llm_qkv(&mut batch, ws, &x, None, bs, [&q, &kt, &vt]).unwrap();
                            batch.finish().unwrap();
                            let mut batch = ctx.batch().unwrap();
                            ctx.record_llm_rope_store(&mut batch, &shape, &q, &kt, &vt, &rows_t, &cos_sin, None, &ck, &cv).unwrap();
                            batch.finish().unwrap();
                        }
                        (download(&ctx, &q), ctx.download(&ck).unwrap(), ctx.download(&cv).unwrap())
                    };
                    let (q_sep, k_sep, v_sep) = run(false);
                    let (q_fused, k_fused, v_fused) = run(true);
                    assert!(same_bits(&q_sep, &q_fused), "{at}: q differs");
                    assert!(k_sep == k_fused, "{at}: the k cache differs");
                    assert!(v_sep == v_fused, "{at}: the v cache differs");
                    assert!(k_fused.iter().any(|&b| b != 0), "{at}: nothing reached the k cache");
                    // q against the host: product (f64) + bias, then the rotation
                    let (qd, wq) = (widths[0], &wd[0]);
                    for (r, &(_, pos)) in rows.iter().enumerate() {
                        let xr = &xv[r * k..(r + 1) * k];
                        let prod = |n: usize| -> (f64, f64) {
                            let wr = &wq[n * k..(n + 1) * k];
                            let v = wr.iter().zip(xr).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() + bias[0][n] as f64;
                            let mag = wr.iter().zip(xr).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum::<f64>() + (bias[0][n] as f64).abs();
                            (v, mag)
                        };
                        for n in 0..qd {
                            let (h, d) = (n / hd, n % hd);
                            let (want, mag) = if d >= rope_dims {
                                prod(n)
                            } else {
                                // (first, second) members of d's pair and which one d is
                                let (i, a, b, first) = if neox {
                                    let i = d % half;
                                    (i, h * hd + i, h * hd + i + half, d < half)
                                } else {
                                    (d / 2, h * hd + d - d % 2, h * hd + d - d % 2 + 1, d % 2 == 0)
                                };
                                let (c, s) = (table[(pos as usize * half + i) * 2] as f64, table[(pos as usize * half + i) * 2 + 1] as f64);
                                let ((x0, m0), (x1, m1)) = (prod(a), prod(b));
                                (if first { x0 * c - x1 * s } else { x0 * s + x1 * c }, m0 + m1)
                            };
                            let got = q_fused[r * qd + n] as f64;
                            let tol = mag * 8.0 * k as f64 * f32::EPSILON as f64 / 64.0 + 1e-6;
                            assert!((got - want).abs() <= tol, "{at}: q[{r}, {n}] = {got}, host {want}");
                        }
                    }
                }
            }
        }
        std::env::remove_var("NX_VULKAN_LLM_MATVEC");
    });
}

/// Byte offsets of a block's f16 scales (d, and the dmin / m beside it where the format has
/// one).
fn scale_offsets(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q5_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        _ => &[],
    }
}

/// The kernels read each block's f16 scales with the device's conversion where the value is
/// normal and their own where a device may flush or canonicalise it (llm_qdot.glsl's
/// f16_exact): rows whose every scale is an f16 subnormal (a device that flushed them would
/// give zero rows), zero or -0.0 among normal scales, in both kernels and every quantized
/// format, against the host dequantizer's exact values in an f64 dot; a scale of Inf gives a
/// non-finite result.
#[test]
fn scales_of_every_f16_class_are_read_exactly() {
    on_engine_alone(|_| {
        let ctx = common::ctx();
        let mut rng = Rng::new(29);
        let (n, k) = (6usize, 1024usize);
        let types = [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q5_K, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K];
        // f16 bits: subnormals (the largest, a middle one, negative ones), zeros, normals
        let subnormal = [0x03FFu16, 0x0201, 0x83FF, 0x8155, 0x03C0];
        let mixed = [0x0000u16, 0x8000, 0x1C00, 0x0800, 0x9C00];
        let xv: Vec<f32> = (0..k).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
        let x = f32_tensor(&ctx, &[1, k], &xv);
        // the device's conversion where the probe found it exact, and the select form
        let conversions: &[&str] = if ctx.f16_conversion_is_exact().unwrap() { &["device", "software"] } else { &["software"] };
        for (kernel, conversion) in ["row", "workgroup"].into_iter().flat_map(|k| conversions.iter().map(move |c| (k, *c))) {
            std::env::set_var("NX_VULKAN_LLM_MATVEC", kernel);
            std::env::set_var("NX_VULKAN_LLM_F16", conversion);
            let kernel = format!("{kernel} ({conversion} f16 conversion)");
            for ty in types {
                let mut wb = random_rows(ty, n, k, &mut rng);
                let bb = ty.block_bytes() as usize;
                let per_row = k / ty.block_size() as usize;
                for (b, block) in wb.chunks_exact_mut(bb).enumerate() {
                    let row = b / per_row;
                    for (i, &at) in scale_offsets(ty).iter().enumerate() {
                        // rows 0-2 all subnormal, rows 3-4 zeros among normals, row 5 as drawn
                        let bits = match row {
                            0..=2 => subnormal[(b + i + row) % subnormal.len()],
                            3 | 4 => mixed[(b + i) % mixed.len()],
                            _ => continue,
                        };
                        block[at..at + 2].copy_from_slice(&bits.to_le_bytes());
                    }
                }
                let mut wd = vec![0f32; n * k];
                dequantize(ty, &wb, &mut wd).unwrap();
                let w = QMatrix::upload(&ctx, ty, n, k, &wb).unwrap();
                let got = run(&ctx, &w, None, &x, None, None);
                for r in 0..n {
                    let (mut d, mut mag) = (0f64, 0f64);
                    for j in 0..k {
                        d += wd[r * k + j] as f64 * xv[j] as f64;
                        mag += (wd[r * k + j] as f64 * xv[j] as f64).abs();
                    }
                    let tol = mag * 4.0 * k as f64 * f32::EPSILON as f64 / 64.0;
                    assert!(mag > 0.0, "{ty:?} row {r}: the test's row is all zeros");
                    assert!((got[r] as f64 - d).abs() <= tol, "{kernel} {ty:?} row {r}: {} vs {d} (tol {tol:e}, magnitude {mag:e})", got[r]);
                }
                // one scale of Inf in row 5's first block
                let at = 5 * per_row * bb + scale_offsets(ty)[0];
                wb[at..at + 2].copy_from_slice(&0x7C00u16.to_le_bytes());
                let w = QMatrix::upload(&ctx, ty, n, k, &wb).unwrap();
                let got = run(&ctx, &w, None, &x, None, None);
                assert!(!got[5].is_finite(), "{kernel} {ty:?}: an Inf scale gave {}", got[5]);
                assert!(got[..5].iter().all(|v| v.is_finite()), "{kernel} {ty:?}: other rows changed");
            }
        }
        std::env::remove_var("NX_VULKAN_LLM_MATVEC");
        std::env::remove_var("NX_VULKAN_LLM_F16");
    });
}
