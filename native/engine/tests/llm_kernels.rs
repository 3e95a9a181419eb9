//! The quantized matrix × activations kernel against a plain CPU reference (the host
//! dequantizer, bit-exact with gguf-py, and an f64 dot), at model-sized rows (K = 4096: every
//! lane of the GPU kernel takes several units), for both kernels (row per invocation, as on
//! CPU drivers, and the workgroup reduction GPUs run), with bias, residual and SwiGLU
//! epilogues, odd row counts and several token columns; a column's bits must not depend on
//! how many columns share the dispatch.

mod common;

use common::on_engine;
use nx_vulkan_engine::llm::kernels::{Epilogue, QMatrix};
use nx_vulkan_engine::llm::quant::{dequantize, GgmlType};
use nx_vulkan_engine::llm::sample::Rng;
use nx_vulkan_engine::{Context, DType, Tensor};

/// Random blocks of `ty` with their f16 scale fields pinned to small values (random f16 bits
/// would be mostly huge or NaN), as bench/llm/gen_model.py writes them.
fn random_rows(ty: GgmlType, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let bb = ty.block_bytes() as usize;
    let nb = rows * cols / ty.block_size() as usize;
    let f16 = |v: f32| half::f16::from_f32(v).to_bits().to_le_bytes();
    let mut out = Vec::with_capacity(nb * bb);
    for _ in 0..nb {
        let mut b: Vec<u8> = (0..bb).map(|_| rng.next_u64() as u8).collect();
        let pin = |b: &mut Vec<u8>, at: usize, v: f32| b[at..at + 2].copy_from_slice(&f16(v));
        match ty {
            GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q5_0 => pin(&mut b, 0, 1e-2),
            GgmlType::Q4_1 | GgmlType::Q5_1 => {
                pin(&mut b, 0, 1e-2);
                pin(&mut b, 2, -4e-2);
            }
            GgmlType::Q4_K | GgmlType::Q5_K => {
                pin(&mut b, 0, 2e-3);
                pin(&mut b, 2, 1e-2);
            }
            GgmlType::Q6_K => pin(&mut b, 208, 1e-3),
            GgmlType::Q2_K => {
                pin(&mut b, 80, 2e-3);
                pin(&mut b, 82, 1e-2);
            }
            GgmlType::Q3_K => pin(&mut b, 108, 2e-3),
            _ => {}
        }
        out.extend(b);
    }
    out
}

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

fn silu(g: f64) -> f64 {
    g / (1.0 + (-g).exp())
}

#[test]
fn matvec_matches_the_cpu_reference_in_both_kernels() {
    on_engine(|_| {
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
                    for c in 0..t {
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
                    // Column 0 alone gives the same bits as column 0 among t.
                    if t > 1 {
                        let x0 = f32_tensor(&ctx, &[1, k], &xv[..k]);
                        let alone = run(&ctx, &w, None, &x0, None, None);
                        assert!(alone.iter().zip(&plain[..n]).all(|(a, b)| a.to_bits() == b.to_bits()), "{kernel} {ty:?}: column 0 changed with T={t}");
                    }
                }
            }
        }
        std::env::remove_var("NX_VULKAN_LLM_MATVEC");
    });
}
