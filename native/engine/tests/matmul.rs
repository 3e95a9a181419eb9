//! Nx.dot/6 against plain CPU references (naive loops): every dtype, odd sizes (tile
//! remainders), transposed/strided operands, batch axes, special values, reruns.
//!
//! Bounds: f32 accumulates in f32 (one fma per product, ascending k), so each element is
//! checked against an f64 reference with the classical bound |c - ref| <= (K + 2) * 2^-24 *
//! sum_k |a_k * b_k| (gamma_K for recursive summation with fused products), and the whole result
//! with ||c - ref||_F / ||ref||_F < 1e-5. f64, f16/bf16 (f64 accumulation, one rounding) and
//! integers (64-bit wrapping) are compared bit for bit.

use half::{bf16, f16};
use nx_vulkan_engine::matmul::{choose_kernel, MatmulKernel};
use nx_vulkan_engine::*;
use std::sync::Arc;

fn ctx() -> Arc<Context> {
    Context::global().expect("device")
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum V {
    F(f64),
    I(i128),
}

impl V {
    fn f(self) -> f64 {
        match self {
            V::F(x) => x,
            V::I(i) => i as f64,
        }
    }
    fn i(self) -> i128 {
        match self {
            V::I(i) => i,
            V::F(x) => x as i128,
        }
    }
}

fn signed(t: DType) -> bool {
    matches!(t, DType::S8 | DType::S16 | DType::S32 | DType::S64)
}

fn enc(t: DType, v: V) -> Vec<u8> {
    match t {
        DType::F32 => (v.f() as f32).to_le_bytes().to_vec(),
        DType::F64 => v.f().to_le_bytes().to_vec(),
        DType::F16 => f16::from_f64(v.f()).to_le_bytes().to_vec(),
        DType::BF16 => (((v.f() as f32).to_bits() >> 16) as u16).to_le_bytes().to_vec(),
        _ => (v.i() as u128).to_le_bytes()[..t.size()].to_vec(),
    }
}

fn dec(t: DType, b: &[u8]) -> V {
    match t {
        DType::F32 => V::F(f32::from_le_bytes(b.try_into().unwrap()) as f64),
        DType::F64 => V::F(f64::from_le_bytes(b.try_into().unwrap())),
        DType::F16 => V::F(f16::from_le_bytes(b.try_into().unwrap()).to_f64()),
        DType::BF16 => V::F(bf16::from_le_bytes(b.try_into().unwrap()).to_f64()),
        _ => {
            let mut w = [0u8; 16];
            w[..t.size()].copy_from_slice(b);
            let u = u128::from_le_bytes(w);
            let bits = t.bits() as u32;
            if signed(t) {
                V::I(((u << (128 - bits)) as i128) >> (128 - bits))
            } else {
                V::I(u as i128)
            }
        }
    }
}

fn bytes(t: DType, vals: &[V]) -> Vec<u8> {
    vals.iter().flat_map(|v| enc(t, *v)).collect()
}

fn download(ctx: &Context, t: &Tensor) -> Vec<V> {
    let b = ctx.download(t).unwrap();
    b.chunks(t.dtype().size()).map(|c| dec(t.dtype(), c)).collect()
}

/// Random data already representable in `t` (floats in [-1, 1) with fractional bits).
fn data(t: DType, n: usize, seed: u64) -> Vec<V> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15).wrapping_add(0x2545F4914F6CDD1D);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            let v = match t {
                DType::F32 | DType::F64 => V::F(2.0 * u - 1.0),
                DType::F16 | DType::BF16 => V::F(((2.0 * u - 1.0) * 64.0).round() / 16.0),
                DType::U64 => V::I((s >> 1) as i128), // large: products and sums wrap
                DType::S64 => V::I(s as i64 as i128),
                _ if signed(t) => V::I((s % 201) as i128 - 100),
                _ => V::I((s % 200) as i128),
            };
            dec(t, &enc(t, v))
        })
        .collect()
}

/// The logical (row-major) elements of a view, read on the CPU through its strides.
fn logical(t: &Tensor, physical: &[V]) -> Vec<V> {
    let shape = t.shape();
    let n: usize = shape.iter().product();
    (0..n)
        .map(|i| {
            let mut rest = i;
            let mut at = t.offset() as isize;
            for d in (0..shape.len()).rev() {
                at += (rest % shape[d]) as isize * t.strides()[d];
                rest /= shape[d];
            }
            physical[at as usize]
        })
        .collect()
}

fn flat(shape: &[usize], idx: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

fn unflat(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut out = vec![0; dims.len()];
    for d in (0..dims.len()).rev() {
        out[d] = i % dims[d];
        i /= dims[d];
    }
    out
}

/// Naive Nx.dot/6: for each output element, `f` folds the (a, b) pairs in contraction order.
#[allow(clippy::too_many_arguments)]
fn ref_dot(
    sa: &[usize],
    va: &[V],
    ca: &[usize],
    ba: &[usize],
    sb: &[usize],
    vb: &[V],
    cb: &[usize],
    bb: &[usize],
    f: impl Fn(&[(V, V)]) -> V,
) -> Vec<V> {
    let fa: Vec<usize> = (0..sa.len()).filter(|d| !ca.contains(d) && !ba.contains(d)).collect();
    let fb: Vec<usize> = (0..sb.len()).filter(|d| !cb.contains(d) && !bb.contains(d)).collect();
    let bdims: Vec<usize> = ba.iter().map(|&d| sa[d]).collect();
    let fadims: Vec<usize> = fa.iter().map(|&d| sa[d]).collect();
    let fbdims: Vec<usize> = fb.iter().map(|&d| sb[d]).collect();
    let kdims: Vec<usize> = ca.iter().map(|&d| sa[d]).collect();
    let n_out: usize = bdims.iter().chain(&fadims).chain(&fbdims).product();
    let n_k: usize = kdims.iter().product();
    let mut out_dims = bdims.clone();
    out_dims.extend(&fadims);
    out_dims.extend(&fbdims);
    let mut pairs = Vec::with_capacity(n_k);
    (0..n_out)
        .map(|o| {
            let c = unflat(o, &out_dims);
            let (bi, rest) = c.split_at(bdims.len());
            let (ai, bi2) = rest.split_at(fadims.len());
            let mut ia = vec![0; sa.len()];
            let mut ib = vec![0; sb.len()];
            for (j, &d) in ba.iter().enumerate() {
                ia[d] = bi[j];
                ib[bb[j]] = bi[j];
            }
            for (j, &d) in fa.iter().enumerate() {
                ia[d] = ai[j];
            }
            for (j, &d) in fb.iter().enumerate() {
                ib[d] = bi2[j];
            }
            pairs.clear();
            for k in 0..n_k {
                let kc = unflat(k, &kdims);
                for (j, &d) in ca.iter().enumerate() {
                    ia[d] = kc[j];
                    ib[cb[j]] = kc[j];
                }
                pairs.push((va[flat(sa, &ia)], vb[flat(sb, &ib)]));
            }
            f(&pairs)
        })
        .collect()
}

/// Exact reference for f64 / f16 / bf16 / integer outputs.
fn exact(out: DType, pairs: &[(V, V)]) -> V {
    let v = if out.is_float() {
        let mut acc = 0.0f64;
        for (x, y) in pairs {
            acc += x.f() * y.f(); // Rust does not contract: product rounded, then sum
        }
        V::F(acc)
    } else {
        let mut acc: i64 = 0;
        for (x, y) in pairs {
            let (x, y) = if signed(out) { (x.i() as i64, y.i() as i64) } else { (x.i() as u64 as i64, y.i() as u64 as i64) };
            acc = acc.wrapping_add(x.wrapping_mul(y));
        }
        V::I(acc as i128)
    };
    dec(out, &enc(out, v))
}

fn same(a: V, b: V) -> bool {
    match (a, b) {
        (V::F(x), V::F(y)) => (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

struct Case<'a> {
    sa: &'a [usize],
    ca: &'a [usize],
    ba: &'a [usize],
    sb: &'a [usize],
    cb: &'a [usize],
    bb: &'a [usize],
}

/// Runs `dot` on `a`/`b` (any views of the uploaded `pa`/`pb`) and compares with the reference.
fn run(ctx: &Context, a: &Tensor, pa: &[V], b: &Tensor, pb: &[V], c: &Case, out: DType, what: &str) -> Vec<u8> {
    let before = ctx.stats().dispatches;
    let t = ctx.dot(a, c.ca, c.ba, b, c.cb, c.bb, out).unwrap();
    let got = download(ctx, &t);
    if got.is_empty() {
        // nothing to compute
    } else {
        assert!(ctx.stats().dispatches > before, "{what}: ran on the device");
    }
    let (la, lb) = (logical(a, pa), logical(b, pb));
    if out == DType::F32 {
        let want = ref_dot(c.sa, &la, c.ca, c.ba, c.sb, &lb, c.cb, c.bb, |p| V::F(p.iter().map(|(x, y)| x.f() * y.f()).sum()));
        let bound = ref_dot(c.sa, &la, c.ca, c.ba, c.sb, &lb, c.cb, c.bb, |p| V::F(p.iter().map(|(x, y)| (x.f() * y.f()).abs()).sum()));
        let k = p_len(c);
        let (mut err2, mut ref2) = (0.0f64, 0.0f64);
        for i in 0..got.len() {
            let (g, w) = (got[i].f(), want[i].f());
            if w.is_nan() || w.is_infinite() {
                assert!(same(got[i], want[i]), "{what}: at {i}: {g} vs {w}");
                continue;
            }
            let tol = (k as f64 + 2.0) * 2f64.powi(-24) * bound[i].f() + 1e-300;
            assert!((g - w).abs() <= tol, "{what}: at {i}: got {g}, want {w} (tolerance {tol})");
            err2 += (g - w) * (g - w);
            ref2 += w * w;
        }
        if ref2 > 0.0 {
            assert!((err2 / ref2).sqrt() < 1e-5, "{what}: relative Frobenius error {}", (err2 / ref2).sqrt());
        }
    } else {
        let want = ref_dot(c.sa, &la, c.ca, c.ba, c.sb, &lb, c.cb, c.bb, |p| exact(out, p));
        assert_eq!(got.len(), want.len());
        for i in 0..got.len() {
            assert!(same(got[i], want[i]), "{what}: at {i}: got {:?}, want {:?}", got[i], want[i]);
        }
    }
    ctx.download(&t).unwrap()
}

fn p_len(c: &Case) -> usize {
    c.ca.iter().map(|&d| c.sa[d]).product()
}

/// Plain matmul [B?, M, K] x [B?, K, N] in dtype `t` -> `out`.
fn matmul(ctx: &Context, t: DType, out: DType, bsz: usize, m: usize, n: usize, k: usize, seed: u64) {
    let (sa, sb) = if bsz == 0 { (vec![m, k], vec![k, n]) } else { (vec![bsz, m, k], vec![bsz, k, n]) };
    let pa = data(t, sa.iter().product(), seed);
    let pb = data(t, sb.iter().product(), seed + 1);
    let a = ctx.upload(t, &sa, &bytes(t, &pa)).unwrap();
    let b = ctx.upload(t, &sb, &bytes(t, &pb)).unwrap();
    let r = sa.len();
    let (ba, bb): (&[usize], &[usize]) = if bsz == 0 { (&[], &[]) } else { (&[0], &[0]) };
    let case = Case { sa: &sa, ca: &[r - 1], ba, sb: &sb, cb: &[r - 2], bb };
    run(ctx, &a, &pa, &b, &pb, &case, out, &format!("{t}->{out} b{bsz} {m}x{n}x{k}"));
}

#[test]
fn f32_sizes_and_tile_remainders() {
    let ctx = ctx();
    for (m, n, k) in [(1, 1, 1), (7, 7, 7), (65, 33, 17), (64, 64, 16), (128, 128, 8), (130, 70, 9), (1, 1023, 3), (3, 5, 300), (100, 4, 36)] {
        matmul(&ctx, DType::F32, DType::F32, 0, m, n, k, (m * 1000 + n) as u64);
    }
    // batched, enough tiles for the 128x128 kernel
    matmul(&ctx, DType::F32, DType::F32, 130, 65, 33, 17, 9);
    matmul(&ctx, DType::F32, DType::F32, 128, 128, 128, 16, 10);
    assert!(matches!(choose_kernel(&ctx.caps, DType::F32, 128, 65, 33, 17), MatmulKernel::Tiled { .. }));
    // Large f64 GEMMs prefer 128×128 tiles; a device whose shared memory cannot hold them
    // (lavapipe) still gets a tiled kernel, never the simple one.
    match choose_kernel(&ctx.caps, DType::F64, 1, 4096, 4096, 4096) {
        MatmulKernel::Tiled { dtype: DType::F64, bm, .. } => {
            assert!(bm == 128 || ctx.caps.max_shared_memory < 33 * 1024, "128x128 tiles fit here but were not chosen")
        }
        other => panic!("f64 4096^3 got {other:?}"),
    }
    // 1024³ takes 128×64 tiles where they fit (H100: 8.9 TFLOP/s against 64×64's 7.7).
    match choose_kernel(&ctx.caps, DType::F64, 1, 1024, 1024, 1024) {
        MatmulKernel::Tiled { dtype: DType::F64, bm, bn, .. } => {
            assert!((bm, bn) == (128, 64) || ctx.caps.max_shared_memory < 25 * 1024, "128x64 tiles fit here but were not chosen: {bm}x{bn}")
        }
        other => panic!("f64 1024^3 got {other:?}"),
    }
}

#[test]
fn every_tiled_variant() {
    let ctx = ctx();
    let t = DType::F32;
    for (bm, bk) in [(128, 8), (128, 16), (64, 16), (64, 8)] {
        let kernel = Some(MatmulKernel::Tiled { dtype: t, bm, bn: bm, bk });
        for (m, n, k, ta, tb) in [(130, 70, 9, false, false), (128, 128, 32, false, true), (65, 33, 17, true, false), (64, 64, 16, true, true)] {
            let (sa, sb) = (if ta { [k, m] } else { [m, k] }, if tb { [n, k] } else { [k, n] });
            let pa = data(t, m * k, bm as u64 + 1);
            let pb = data(t, n * k, bk as u64 + 2);
            let a = ctx.upload(t, &sa, &bytes(t, &pa)).unwrap();
            let b = ctx.upload(t, &sb, &bytes(t, &pb)).unwrap();
            let (ca, cb) = (if ta { [0] } else { [1] }, if tb { [1] } else { [0] });
            let case = Case { sa: &sa, ca: &ca, ba: &[], sb: &sb, cb: &cb, bb: &[] };
            let what = format!("{bm}x{bk} {m}x{n}x{k} ta:{ta} tb:{tb}");
            // 2 buffers × bk rows × (bm/4 + 1) vec4 × 2 operands
            if 2 * bk as usize * (bm as usize / 4 + 1) * 16 * 2 > ctx.caps.max_shared_memory as usize {
                assert!(ctx.dot_using(kernel, &a, &ca, &[], &b, &cb, &[], t).is_err(), "{what}: too much shared memory");
                continue;
            }
            let got = ctx.download(&ctx.dot_using(kernel, &a, &ca, &[], &b, &cb, &[], t).unwrap()).unwrap();
            let want = run(&ctx, &a, &pa, &b, &pb, &case, t, &what);
            // the forced kernel's result passes the same bound (compare through run's checks)
            let gv: Vec<V> = got.chunks(4).map(|c| dec(t, c)).collect();
            let wv: Vec<V> = want.chunks(4).map(|c| dec(t, c)).collect();
            for (i, (g, w)) in gv.iter().zip(&wv).enumerate() {
                let tol = (k as f64 + 2.0) * 2f64.powi(-23) * (g.f().abs() + w.f().abs() + 1.0);
                assert!((g.f() - w.f()).abs() <= tol, "{what}: at {i}: {g:?} vs {w:?}");
            }
        }
    }
    let bad = Some(MatmulKernel::Tiled { dtype: t, bm: 32, bn: 32, bk: 8 });
    let a = ctx.upload(t, &[2, 2], &[0; 16]).unwrap();
    assert!(ctx.dot_using(bad, &a, &[1], &[], &a, &[0], &[], t).is_err());
    // a cooperative-matrix kernel for f16 operands cannot take f32 ones (tests/coopmat.rs)
    let coop = MatmulKernel::CoopMat { input: DType::F16, m: 16, n: 16, k: 16, bm: 128, bn: 128, bk: 32, staging: nx_vulkan_engine::matmul::CoopStaging::SharedTyped };
    assert!(ctx.dot_using(Some(coop), &a, &[1], &[], &a, &[0], &[], t).is_err());
}

/// Every f64 tile the kernel builds (square and 128×64 / 64×128, K steps of 8 and 16) is
/// Nx.BinaryBackend's f64 sum to the bit, on tile remainders and transposed operands: f64
/// operands (each product rounded, then added) and f32 × f32, f32 × s16 operands (products
/// exact in f64, sums not: the kernel fuses them, the same bits by construction, which this
/// pins on devices that fuse). Tiles whose shared memory the device lacks are refused, not run.
/// The exact f32 dot and the f64 dot say in their profiles which form they took.
#[test]
fn every_f64_tile_is_exact() {
    let ctx = ctx();
    let shared = |bm: usize, bn: usize, bk: usize| 2 * bk * ((bm / 4 + 1) + (bn / 4 + 1)) * 32;
    for (bm, bn, bk) in [(64, 64, 8), (64, 64, 16), (128, 64, 8), (64, 128, 8), (128, 128, 8)] {
        let kernel = Some(MatmulKernel::Tiled { dtype: DType::F64, bm, bn, bk });
        for (ta_t, tb_t) in [(DType::F64, DType::F64), (DType::F32, DType::F32), (DType::F32, DType::S16)] {
            for (m, n, k, ta, tb) in [(130, 70, 9, false, false), (128, 128, 32, false, true), (65, 133, 17, true, false), (64, 64, 16, true, true)] {
                let (sa, sb) = (if ta { [k, m] } else { [m, k] }, if tb { [n, k] } else { [k, n] });
                let pa = data(ta_t, m * k, (bm + bk) as u64);
                let pb = data(tb_t, n * k, (bn + 3 * bk) as u64);
                let a = ctx.upload(ta_t, &sa, &bytes(ta_t, &pa)).unwrap();
                let b = ctx.upload(tb_t, &sb, &bytes(tb_t, &pb)).unwrap();
                let (ca, cb) = (if ta { [0] } else { [1] }, if tb { [1] } else { [0] });
                let what = format!("f64 {bm}x{bn}x{bk} {ta_t}x{tb_t} {m}x{n}x{k} ta:{ta} tb:{tb}");
                if shared(bm as usize, bn as usize, bk as usize) > ctx.caps.max_shared_memory as usize {
                    assert!(ctx.dot_using(kernel, &a, &ca, &[], &b, &cb, &[], DType::F64).is_err(), "{what}: too much shared memory");
                    continue;
                }
                let got = download(&ctx, &ctx.dot_using(kernel, &a, &ca, &[], &b, &cb, &[], DType::F64).unwrap());
                let want = ref_dot(&sa, &logical(&a, &pa), &ca, &[], &sb, &logical(&b, &pb), &cb, &[], |p| exact(DType::F64, p));
                for i in 0..want.len() {
                    assert!(same(got[i], want[i]), "{what}: at {i}: got {:?}, want {:?}", got[i], want[i]);
                }
            }
        }
    }
    // Which form each dot took (kernel names are their configurations).
    for (t, fused) in [(DType::F32, true), (DType::F64, false)] {
        let a = ctx.upload(t, &[70, 9], &bytes(t, &data(t, 70 * 9, 5))).unwrap();
        ctx.stream.profile_start().unwrap();
        download(&ctx, &ctx.dot(&a, &[1], &[], &a, &[1], &[], t).unwrap());
        let kernels: Vec<String> = ctx.stream.profile_stop().unwrap().into_iter().map(|k| k.name).collect();
        let tiled: Vec<&String> = kernels.iter().filter(|k| k.contains("TileCfg")).collect();
        assert!(!tiled.is_empty() && tiled.iter().all(|k| k.contains(&format!("exact_products: {fused}"))), "{t} dot: kernels {kernels:?}");
    }
}

#[test]
fn f32_transposed_and_strided_operands() {
    let ctx = ctx();
    let t = DType::F32;
    for (m, n, k) in [(33, 20, 12), (64, 64, 32), (17, 9, 5)] {
        let pa = data(t, m * k, 1);
        let pb = data(t, k * n, 2);
        // a stored as [k, m] (A^T), b stored as [n, k] (B^T): contract a's axis 0 with b's axis 1
        let at = ctx.upload(t, &[k, m], &bytes(t, &pa)).unwrap();
        let bt = ctx.upload(t, &[n, k], &bytes(t, &pb)).unwrap();
        let case = Case { sa: &[k, m], ca: &[0], ba: &[], sb: &[n, k], cb: &[1], bb: &[] };
        run(&ctx, &at, &pa, &bt, &pb, &case, t, &format!("A^T B^T {m}x{n}x{k}"));
        // the same data seen through transposed views (transpose then contract the last/first)
        let av = at.transpose(&[1, 0]).unwrap();
        let bv = bt.transpose(&[1, 0]).unwrap();
        let case = Case { sa: &[m, k], ca: &[1], ba: &[], sb: &[k, n], cb: &[0], bb: &[] };
        run(&ctx, &av, &pa, &bv, &pb, &case, t, &format!("views {m}x{n}x{k}"));
        // strided slices and a reversed axis (negative strides)
        let big = data(t, (2 * m + 1) * (k + 3), 3);
        let base = ctx.upload(t, &[2 * m + 1, k + 3], &bytes(t, &big)).unwrap();
        let sl = base.slice(&[1, 2], &[m, k], &[2, 1]).unwrap().reverse(&[1]).unwrap();
        let b2 = ctx.upload(t, &[k, n], &bytes(t, &pb)).unwrap();
        let case = Case { sa: &[m, k], ca: &[1], ba: &[], sb: &[k, n], cb: &[0], bb: &[] };
        run(&ctx, &sl, &big, &b2, &pb, &case, t, &format!("slice/reverse {m}x{n}x{k}"));
    }
}

#[test]
fn dot6_axes_order_and_batches() {
    let ctx = ctx();
    for t in [DType::F32, DType::F64, DType::S32] {
        // a [2, 3, 4, 5]: batch 0, contract [3, 1]; b [2, 5, 6, 3]: batch 0, contract [1, 3]
        let sa = [2, 3, 4, 5];
        let sb = [2, 5, 6, 3];
        let pa = data(t, 120, 4);
        let pb = data(t, 180, 5);
        let a = ctx.upload(t, &sa, &bytes(t, &pa)).unwrap();
        let b = ctx.upload(t, &sb, &bytes(t, &pb)).unwrap();
        let case = Case { sa: &sa, ca: &[3, 1], ba: &[0], sb: &sb, cb: &[1, 3], bb: &[0] };
        run(&ctx, &a, &pa, &b, &pb, &case, t, &format!("{t} dot6"));
        assert_eq!(ctx.dot(&a, &[3, 1], &[0], &b, &[1, 3], &[0], t).unwrap().shape(), &[2, 4, 6]);
        // two batch axes in swapped order, free axes on both sides
        let sa = [3, 2, 4, 2];
        let sb = [2, 4, 3, 5];
        let pa = data(t, 48, 6);
        let pb = data(t, 120, 7);
        let a = ctx.upload(t, &sa, &bytes(t, &pa)).unwrap();
        let b = ctx.upload(t, &sb, &bytes(t, &pb)).unwrap();
        let case = Case { sa: &sa, ca: &[2], ba: &[1, 0], sb: &sb, cb: &[1], bb: &[0, 2] };
        run(&ctx, &a, &pa, &b, &pb, &case, t, &format!("{t} two batch axes"));
        assert_eq!(ctx.dot(&a, &[2], &[1, 0], &b, &[1], &[0, 2], t).unwrap().shape(), &[2, 3, 2, 5]);
        // outer product (no contraction) and full contraction (scalar)
        let case = Case { sa: &[3, 4], ca: &[], ba: &[], sb: &[5], cb: &[], bb: &[] };
        let a = ctx.upload(t, &[3, 4], &bytes(t, &pa[..12])).unwrap();
        let b = ctx.upload(t, &[5], &bytes(t, &pb[..5])).unwrap();
        run(&ctx, &a, &pa[..12], &b, &pb[..5], &case, t, &format!("{t} outer"));
        let b = ctx.upload(t, &[3, 4], &bytes(t, &pb[..12])).unwrap();
        let case = Case { sa: &[3, 4], ca: &[0, 1], ba: &[], sb: &[3, 4], cb: &[0, 1], bb: &[] };
        run(&ctx, &a, &pa[..12], &b, &pb[..12], &case, t, &format!("{t} full contraction"));
    }
    // broadcast batch operand (stride 0)
    let t = DType::F32;
    let pa = data(t, 6 * 4, 8);
    let pb = data(t, 4 * 5, 9);
    let a = ctx.upload(t, &[6, 4], &bytes(t, &pa)).unwrap();
    let b = ctx.upload(t, &[4, 5], &bytes(t, &pb)).unwrap().broadcast(&[3, 4, 5], &[1, 2]).unwrap();
    let a3 = a.broadcast(&[3, 6, 4], &[1, 2]).unwrap();
    let case = Case { sa: &[3, 6, 4], ca: &[2], ba: &[0], sb: &[3, 4, 5], cb: &[1], bb: &[0] };
    run(&ctx, &a3, &pa, &b, &pb, &case, t, "broadcast batch");
    // bad arguments
    assert!(ctx.dot(&a, &[0], &[], &a, &[1], &[], t).is_err(), "sizes 6 and 4");
    assert!(ctx.dot(&a, &[1, 1], &[], &a, &[1, 1], &[], t).is_err(), "repeated axis");
    assert!(ctx.dot(&a, &[1], &[], &a, &[1, 0], &[], t).is_err(), "counts differ");
    assert!(ctx.dot(&a, &[2], &[], &a, &[1], &[], t).is_err(), "out of range");
}

#[test]
fn f64_is_exact() {
    let ctx = ctx();
    for (m, n, k) in [(1, 1, 1), (7, 7, 7), (65, 33, 17), (64, 64, 8), (70, 130, 40)] {
        matmul(&ctx, DType::F64, DType::F64, 0, m, n, k, (m + n + k) as u64);
    }
    matmul(&ctx, DType::F64, DType::F64, 3, 20, 10, 9, 77);
}

#[test]
fn half_types_and_integers_are_exact() {
    let ctx = ctx();
    for t in [DType::F16, DType::BF16, DType::S8, DType::S16, DType::S32, DType::S64, DType::U8, DType::U16, DType::U32, DType::U64] {
        matmul(&ctx, t, t, 0, 7, 5, 13, 1 + t as u64);
        matmul(&ctx, t, t, 2, 9, 3, 33, 2 + t as u64);
    }
    // mixed: f16 x s8 into f32 (operands converted), s8 x u8 into s16
    let pa = data(DType::F16, 5 * 6, 1);
    let pb = data(DType::S8, 6 * 7, 2);
    let a = ctx.upload(DType::F16, &[5, 6], &bytes(DType::F16, &pa)).unwrap();
    let b = ctx.upload(DType::S8, &[6, 7], &bytes(DType::S8, &pb)).unwrap();
    let case = Case { sa: &[5, 6], ca: &[1], ba: &[], sb: &[6, 7], cb: &[0], bb: &[] };
    run(&ctx, &a, &pa, &b, &pb, &case, DType::F32, "f16 x s8 -> f32");
    run(&ctx, &a, &pa, &b, &pb, &case, DType::F64, "f16 x s8 -> f64");
    let pa = data(DType::S8, 5 * 6, 3);
    let pb = data(DType::U8, 6 * 7, 4);
    let a = ctx.upload(DType::S8, &[5, 6], &bytes(DType::S8, &pa)).unwrap();
    let b = ctx.upload(DType::U8, &[6, 7], &bytes(DType::U8, &pb)).unwrap();
    run(&ctx, &a, &pa, &b, &pb, &case, DType::S16, "s8 x u8 -> s16");
}

#[test]
fn empty_and_special_values() {
    let ctx = ctx();
    for t in [DType::F32, DType::F64, DType::S32, DType::F16] {
        // K = 0: zeros; M = 0 / N = 0: empty results
        let a = ctx.upload(t, &[4, 0], &[]).unwrap();
        let b = ctx.upload(t, &[0, 3], &[]).unwrap();
        let c = ctx.dot(&a, &[1], &[], &b, &[0], &[], t).unwrap();
        assert_eq!(c.shape(), &[4, 3]);
        let got = download(&ctx, &c);
        assert!(got.iter().all(|v| v.f() == 0.0 && v.f().to_bits() == 0), "{t}: {got:?}");
        let a = ctx.upload(t, &[0, 5], &[]).unwrap();
        let b = ctx.upload(t, &[5, 3], &bytes(t, &data(t, 15, 1))).unwrap();
        let c = ctx.dot(&a, &[1], &[], &b, &[0], &[], t).unwrap();
        assert_eq!(c.shape(), &[0, 3]);
        assert!(ctx.download(&c).unwrap().is_empty());
    }
    // K = 0 with tile-multiple M and N takes the tiled kernel
    let a = ctx.upload(DType::F32, &[64, 0], &[]).unwrap();
    let b = ctx.upload(DType::F32, &[0, 64], &[]).unwrap();
    assert!(download(&ctx, &ctx.dot(&a, &[1], &[], &b, &[0], &[], DType::F32).unwrap()).iter().all(|v| v.f().to_bits() == 0));
    let (nan, inf) = (f64::NAN, f64::INFINITY);
    for t in [DType::F32, DType::F64, DType::F16] {
        let pa: Vec<V> = [1.0, nan, 2.0, inf, 0.0, 1.0, -0.0, -0.0, 3.0].iter().map(|&x| V::F(x)).collect();
        let pb: Vec<V> = [1.0, 2.0, 0.0, -1.0, inf, 1.0, 5.0, -inf, -0.0].iter().map(|&x| V::F(x)).collect();
        let a = ctx.upload(t, &[3, 3], &bytes(t, &pa)).unwrap();
        let b = ctx.upload(t, &[3, 3], &bytes(t, &pb)).unwrap();
        let case = Case { sa: &[3, 3], ca: &[1], ba: &[], sb: &[3, 3], cb: &[0], bb: &[] };
        run(&ctx, &a, &pa, &b, &pb, &case, t, &format!("{t} special"));
    }
}

#[test]
fn reruns_are_bit_identical() {
    let ctx = ctx();
    for t in [DType::F32, DType::F64] {
        let (m, n, k) = (65, 70, 300);
        let pa = data(t, m * k, 11);
        let pb = data(t, k * n, 12);
        let a = ctx.upload(t, &[m, k], &bytes(t, &pa)).unwrap();
        let b = ctx.upload(t, &[k, n], &bytes(t, &pb)).unwrap();
        let case = Case { sa: &[m, k], ca: &[1], ba: &[], sb: &[k, n], cb: &[0], bb: &[] };
        let x = run(&ctx, &a, &pa, &b, &pb, &case, t, "rerun 1");
        let y = ctx.download(&ctx.dot(&a, &[1], &[], &b, &[0], &[], t).unwrap()).unwrap();
        assert_eq!(x, y, "{t}");
    }
}

/// Timing, not a check (run on a real GPU): `NX_BENCH_DOT="4096x4096x4096,2048x2048x2048"`
/// `cargo test --test matmul -- --ignored bench_dot --nocapture`. Prints the median of 15 runs
/// (after at least 0.5 s of warm-up) per shape for f32 (A·B and A·Bᵀ) and f64. Each run is one `dot` call:
/// one submission and its fence wait.
#[test]
#[ignore]
fn bench_dot() {
    let ctx = ctx();
    eprintln!("device: {} ({} {})", ctx.caps.name, ctx.caps.driver_name, ctx.caps.driver_info);
    let shapes = std::env::var("NX_BENCH_DOT").unwrap_or_else(|_| "256x256x256".into());
    let dtypes = std::env::var("NX_BENCH_TYPES").unwrap_or_else(|_| "f32,f32t,f64".into());
    // NX_BENCH_TILES="128x128x8,64x64x16": force tiled kernels (f32 only); default: chosen
    let tiles: Vec<Option<MatmulKernel>> = match std::env::var("NX_BENCH_TILES") {
        Ok(v) => v
            .split(',')
            .map(|t| {
                let d: Vec<u32> = t.split('x').map(|x| x.parse().unwrap()).collect();
                Some(MatmulKernel::Tiled { dtype: DType::F32, bm: d[0], bn: d[1], bk: d[2] })
            })
            .collect(),
        Err(_) => vec![None],
    };
    for shape in shapes.split(',') {
        let d: Vec<usize> = shape.split('x').map(|x| x.parse().unwrap()).collect();
        let (m, n, k) = (d[0], d[1], d[2]);
        for (ty, &tile) in dtypes.split(',').flat_map(|ty| tiles.iter().map(move |t| (ty, t))) {
            // f32t: B stored transposed ([n, k]); f32ta: A stored transposed ([k, m])
            let (t, trans_b, trans_a) = match ty {
                "f32" => (DType::F32, false, false),
                "f32t" => (DType::F32, true, false),
                "f32ta" => (DType::F32, false, true),
                "f64" => (DType::F64, false, false),
                other => panic!("unknown type {other}"),
            };
            let tile = if t == DType::F32 { tile } else { None };
            let a = ctx.upload(t, &if trans_a { [k, m] } else { [m, k] }, &bytes(t, &data(t, m * k, 1))).unwrap();
            let b = ctx.upload(t, &if trans_b { [n, k] } else { [k, n] }, &bytes(t, &data(t, k * n, 2))).unwrap();
            let ca: &[usize] = if trans_a { &[0] } else { &[1] };
            let cb: &[usize] = if trans_b { &[1] } else { &[0] };
            let mut times = vec![];
            // warm up for at least 0.5 s (clocks ramp up), then time 15 runs
            let warm = std::time::Instant::now();
            let mut i = 0;
            while i < 15 {
                let start = std::time::Instant::now();
                let c = match ctx.dot_using(tile, &a, ca, &[], &b, cb, &[], t) {
                    Ok(c) => c,
                    Err(e) => {
                        println!("BENCH {ty} {tile:?}: {e}");
                        break;
                    }
                };
                let dt = start.elapsed().as_secs_f64();
                drop(c);
                if warm.elapsed().as_secs_f64() > 0.5 {
                    times.push(dt);
                    i += 1;
                }
            }
            if times.is_empty() {
                continue;
            }
            times.sort_by(|x, y| x.partial_cmp(y).unwrap());
            let med = times[times.len() / 2];
            let tflops = 2.0 * (m * n * k) as f64 / med / 1e12;
            let tile = tile.map(|t| format!("{t:?}")).unwrap_or("chosen".into());
            println!("BENCH nx_vulkan {ty} {m}x{n}x{k} {tile}: median {:.3} ms, {tflops:.2} TFLOP/s (min {:.3} ms)", med * 1e3, times[0] * 1e3);
        }
    }
}

/// The default f32 dot is Nx.BinaryBackend's: f64 products and ascending-k sums, one rounding.
/// The SGEMM policy (f32 accumulation) stays available and is close but not bit-identical.
#[test]
fn f32_dot_is_exact_by_default_and_sgemm_on_request() {
    use nx_vulkan_engine::matmul::DotPrecision;
    let ctx = ctx();
    let (m, k, n) = (9usize, 301usize, 7usize);
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1.37e-3 + 1e-7 * i as f32).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 104729 % 997) as f32 - 498.0) * 2.9e-2).collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let ta = ctx.upload(DType::F32, &[m, k], &bytes(&a)).unwrap();
    let tb = ctx.upload(DType::F32, &[k, n], &bytes(&b)).unwrap();
    let read = |t: &Tensor| -> Vec<f32> { ctx.download(t).unwrap().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect() };
    let exact = read(&ctx.dot(&ta, &[1], &[], &tb, &[0], &[], DType::F32).unwrap());
    let fast = read(&ctx.dot_with(DotPrecision::F32Accumulate, &ta, &[1], &[], &tb, &[0], &[], DType::F32).unwrap());
    let mut differ = 0;
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f64;
            for l in 0..k {
                acc = (a[i * k + l] as f64) * (b[l * n + j] as f64) + acc;
            }
            assert_eq!(exact[i * n + j].to_bits(), (acc as f32).to_bits(), "exact dot at ({i},{j})");
            let rel = ((fast[i * n + j] as f64) - acc).abs() / acc.abs().max(1e-30);
            assert!(rel < 1e-4, "f32-accumulated dot at ({i},{j}): {rel}");
            differ += (fast[i * n + j].to_bits() != exact[i * n + j].to_bits()) as usize;
        }
    }
    eprintln!("f32 accumulation differs from the exact dot in {differ} of {} elements", m * n);
}

/// f32-accumulated products with few output tiles and a long K are split along K (slices
/// summed in order by a second kernel): checked against an f64 reference within the f32
/// accumulation bound, for shapes on both sides of the split (tile multiples or not, K not a
/// step multiple, N = 10 as the MLP's logits), with Inf and NaN operands, and the profile
/// says which shapes were split.
#[test]
fn few_tile_f32_products_split_k() {
    use nx_vulkan_engine::matmul::DotPrecision;
    let ctx = ctx();
    // (m, k, n, split expected)
    let cases = [
        (128usize, 784usize, 512usize, true),
        (128, 512, 10, true),
        (9, 301, 7, true),
        (1, 1000, 1, true),
        (65, 37, 3, false),      // 3 K steps: fewer than two per slice
        (70, 64, 5, true),       // 4 steps: two slices of two
        (3, 16, 3, false),       // one K step
        (512, 128, 784, false),  // 104 tiles: enough workgroups already
    ];
    for &(m, k, n, want_split) in &cases {
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1.37e-3 + 1e-7 * i as f32).collect();
        let mut b: Vec<f32> = (0..k * n).map(|i| ((i * 104729 % 997) as f32 - 498.0) * 2.9e-2).collect();
        // a NaN in column 0 and an Inf in column n - 1 of B (rows late in K: the last slice)
        b[(k - 1) * n] = f32::NAN;
        if n > 1 {
            b[(k / 2) * n + n - 1] = f32::INFINITY;
        }
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let ta = ctx.upload(DType::F32, &[m, k], &bytes(&a)).unwrap();
        let tb = ctx.upload(DType::F32, &[k, n], &bytes(&b)).unwrap();
        ctx.stream.profile_start().unwrap();
        let c = ctx.dot_with(DotPrecision::F32Accumulate, &ta, &[1], &[], &tb, &[0], &[], DType::F32).unwrap();
        ctx.synchronize().unwrap();
        let kernels: Vec<String> = ctx.stream.profile_stop().unwrap().into_iter().map(|k| k.name).collect();
        let got: Vec<f32> = ctx.download(&c).unwrap().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        let split = kernels.iter().any(|k| k.contains("split-K sum"));
        assert_eq!(split, want_split, "{m}x{k}x{n}: kernels {kernels:?}");
        for i in 0..m {
            for j in 0..n {
                let (mut acc, mut mag) = (0.0f64, 0.0f64);
                for l in 0..k {
                    let p = (a[i * k + l] as f64) * (b[l * n + j] as f64);
                    acc += p;
                    mag += p.abs();
                }
                let g = got[i * n + j] as f64;
                if acc.is_nan() {
                    assert!(g.is_nan(), "{m}x{k}x{n} ({i},{j}): {g}, want NaN");
                } else if acc.is_infinite() {
                    assert_eq!(g, acc, "{m}x{k}x{n} ({i},{j})");
                } else {
                    // f32 accumulation over k terms: |error| <= k * 2^-24 * sum |products| (+ rounding)
                    let bound = (k as f64 + 2.0) * 2f64.powi(-24) * mag;
                    assert!((g - acc).abs() <= bound, "{m}x{k}x{n} ({i},{j}): {g} vs {acc} (bound {bound})");
                }
            }
        }
    }
}

/// A NaN computed by a dot (Inf × 0) is stored as the canonical positive quiet NaN, whatever
/// the hardware made (x86 makes a negative one, NVIDIA a positive one): the exact paths are
/// the same bits on every device, as BinaryBackend writes NaN.
#[test]
fn computed_nans_are_canonical() {
    let ctx = ctx();
    for t in [DType::F64, DType::F32, DType::F16, DType::BF16] {
        let a = ctx.upload(t, &[1, 2], &bytes(t, &[V::F(f64::INFINITY), V::F(1.0)])).unwrap();
        let b = ctx.upload(t, &[2, 1], &bytes(t, &[V::F(0.0), V::F(1.0)])).unwrap();
        let got = ctx.download(&ctx.dot(&a, &[1], &[], &b, &[0], &[], t).unwrap()).unwrap();
        let bits = u64::from_le_bytes({
            let mut w = [0u8; 8];
            w[..got.len()].copy_from_slice(&got);
            w
        });
        let want: u64 = match t {
            DType::F64 => 0x7FF8_0000_0000_0000,
            DType::F32 => 0x7FC0_0000,
            DType::F16 => 0x7E00,
            _ => 0x7FC0,
        };
        assert_eq!(bits, want, "{t}: canonical NaN, got {bits:#x}");
    }
}
