//! FFT/IFFT against (1) a plain CPU model of Nx.BinaryBackend's algorithm (the same recursion,
//! the same complex-library operations, std's sin/cos), (2) a naive O(n²) DFT, and (3) bits
//! produced by Nx 0.7.2's BinaryBackend itself (stored below).
//!
//! Bound checked against the model: every c128 part within 1e-13 · Σ|x| (the GPU's twiddles
//! come from our m_sin/m_cos, which may differ from the host libm by an ulp), every c64 part
//! within one f32 ulp of the model's rounded value; the count of bit-identical elements is
//! reported. Against the naive DFT: within 1e-10 · Σ|x| (f64 inputs).

mod common;
use common::*;
use nx_vulkan_engine::*;

type C = (f64, f64);

fn cadd(a: C, b: C) -> C {
    (a.0 + b.0, a.1 + b.1)
}
fn csub(a: C, b: C) -> C {
    (a.0 - b.0, a.1 - b.1)
}
/// Complex.multiply's clauses (right operand zero parts first).
fn cmul(l: C, r: C) -> C {
    if r.1 == 0.0 {
        (r.0 * l.0, r.0 * l.1)
    } else if r.0 == 0.0 {
        let p = l.1 * r.1;
        (if p == 0.0 { 0.0 } else { -p }, l.0 * r.1)
    } else {
        (l.0 * r.0 - l.1 * r.1, l.1 * r.0 + l.0 * r.1)
    }
}

#[derive(Clone, Copy)]
enum V {
    R(f64),
    Z(C),
}

fn as_c(v: V) -> C {
    match v {
        V::R(x) => (x, 0.0),
        V::Z(z) => z,
    }
}

/// BinaryBackend's fft_list_base: radix-2 decimation in time down to odd lengths, then a
/// direct DFT with from_polar twiddles.
fn fft_base(data: &[V]) -> Vec<V> {
    let n = data.len();
    if n < 2 {
        return data.to_vec();
    }
    if n % 2 == 1 {
        let m2pn = -2.0 * std::f64::consts::PI / n as f64;
        return (0..n)
            .map(|k| {
                if k == 0 {
                    let mut acc = data[0];
                    for &x in &data[1..] {
                        acc = match (x, acc) {
                            (V::R(a), V::R(b)) => V::R(a + b),
                            (a, b) => V::Z(cadd(as_c(a), as_c(b))),
                        };
                    }
                    V::Z(as_c(acc))
                } else {
                    let ph = m2pn * k as f64;
                    let mut acc = (0.0, 0.0);
                    for (i, &x) in data.iter().enumerate() {
                        let phi = ph * i as f64;
                        let w = if phi == 0.0 { (1.0, 0.0) } else { (phi.cos(), phi.sin()) };
                        let t = match x {
                            V::R(x) => (w.0 * x, w.1 * x),
                            V::Z(z) => cmul(z, w),
                        };
                        acc = if i == 0 { t } else { cadd(t, acc) };
                    }
                    V::Z(acc)
                }
            })
            .collect();
    }
    let even: Vec<V> = data.iter().step_by(2).copied().collect();
    let odd: Vec<V> = data.iter().skip(1).step_by(2).copied().collect();
    let e = fft_base(&even);
    let o = fft_base(&odd);
    let t: Vec<C> = o
        .iter()
        .enumerate()
        .map(|(k, &x)| {
            let th = -2.0 * std::f64::consts::PI * k as f64 / n as f64;
            let w = (th.cos(), th.sin());
            match x {
                V::R(x) => (w.0 * x, w.1 * x),
                V::Z(z) => cmul(w, z),
            }
        })
        .collect();
    let mut out: Vec<V> = e.iter().zip(&t).map(|(&a, &b)| V::Z(cadd(as_c(a), b))).collect();
    out.extend(e.iter().zip(&t).map(|(&a, &b)| V::Z(csub(as_c(a), b))));
    out
}

/// The model: pad/truncate, (i)fft, eps clean-up; f64 results before rounding.
fn model(row: &[V], n: usize, eps: f64, inverse: bool) -> Vec<C> {
    let mut data: Vec<V> = (0..n).map(|j| if j < row.len() { row[j] } else { V::R(0.0) }).collect();
    if inverse {
        for v in data.iter_mut() {
            if let V::Z(z) = v {
                *v = V::Z((z.0, -z.1));
            }
        }
    }
    let out = fft_base(&data);
    out.into_iter()
        .map(|v| {
            let mut z = as_c(v);
            if inverse {
                z = (z.0 / n as f64, -z.1 / n as f64);
            }
            let clean = |x: f64| if x.abs() <= eps { 0.0 } else { x };
            (clean(z.0), clean(z.1))
        })
        .collect()
}

fn naive_dft(row: &[C], n: usize) -> Vec<C> {
    (0..n)
        .map(|k| {
            let mut acc = (0.0, 0.0);
            for (j, &x) in row.iter().take(n).enumerate() {
                let a = -2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                acc = cadd(acc, (x.0 * a.cos() - x.1 * a.sin(), x.0 * a.sin() + x.1 * a.cos()));
            }
            acc
        })
        .collect()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 8.0 - 4.0
    }
}

/// Host bytes of `vals` as `t` (complex values as (re, im); real types take re).
fn bytes(t: DType, vals: &[C]) -> Vec<u8> {
    let mut b = vec![];
    for &(re, im) in vals {
        match t {
            DType::F32 => b.extend((re as f32).to_le_bytes()),
            DType::F64 => b.extend(re.to_le_bytes()),
            DType::S32 => b.extend((re as i32).to_le_bytes()),
            DType::C64 => {
                b.extend((re as f32).to_le_bytes());
                b.extend((im as f32).to_le_bytes());
            }
            DType::C128 => {
                b.extend(re.to_le_bytes());
                b.extend(im.to_le_bytes());
            }
            _ => unreachable!(),
        }
    }
    b
}

/// The values as BinaryBackend reads them.
fn values(t: DType, vals: &[C]) -> Vec<V> {
    vals.iter()
        .map(|&(re, im)| match t {
            DType::F32 => V::R(re as f32 as f64),
            DType::F64 => V::R(re),
            DType::S32 => V::R((re as i32) as f64),
            DType::C64 => V::Z((re as f32 as f64, im as f32 as f64)),
            DType::C128 => V::Z((re, im)),
            _ => unreachable!(),
        })
        .collect()
}

fn download_c(ctx: &Context, t: &Tensor) -> Vec<C> {
    let b = ctx.download(t).unwrap();
    match t.dtype() {
        DType::C64 => b
            .chunks(8)
            .map(|c| (f32::from_le_bytes(c[..4].try_into().unwrap()) as f64, f32::from_le_bytes(c[4..].try_into().unwrap()) as f64))
            .collect(),
        DType::C128 => b
            .chunks(16)
            .map(|c| (f64::from_le_bytes(c[..8].try_into().unwrap()), f64::from_le_bytes(c[8..].try_into().unwrap())))
            .collect(),
        t => panic!("not complex: {t}"),
    }
}

fn f32_ulps(a: f64, b: f64) -> u64 {
    let (x, y) = ((a as f32).to_bits() as i64, (b as f32).to_bits() as i64);
    if (a as f32) == (b as f32) {
        return 0;
    }
    let key = |v: i64| if v < 0x8000_0000 { v } else { 0x8000_0000 - v };
    (key(x) - key(y)).unsigned_abs()
}

/// Checks `got` (rows × n, written as `out`) against the model; returns bit-identical count.
fn check(label: &str, out: DType, got: &[C], want: &[C], scale: &[f64], n: usize) -> usize {
    let mut same = 0;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let s = scale[i / n];
        for (gp, wp) in [(g.0, w.0), (g.1, w.1)] {
            if out == DType::C64 {
                let wr = wp as f32 as f64;
                assert!(f32_ulps(gp, wr) <= 1, "{label}[{i}]: got {gp:e} want {wr:e} (f64 {wp:e})");
                if gp.to_bits() == wr.to_bits() {
                    same += 1;
                }
            } else {
                assert!((gp - wp).abs() <= 1e-13 * s, "{label}[{i}]: got {gp:e} want {wp:e} (scale {s:e})");
                if gp.to_bits() == wp.to_bits() {
                    same += 1;
                }
            }
        }
    }
    assert_eq!(got.len(), want.len(), "{label}: length");
    same
}

fn run_case(ctx: &Context, t: DType, shape: &[usize], len: usize, inverse: bool, seed: u64) -> (usize, usize) {
    let mut rng = Rng(seed);
    let total: usize = shape.iter().product();
    let vals: Vec<C> = (0..total).map(|_| (rng.next(), rng.next())).collect();
    let x = ctx.upload(t, shape, &bytes(t, &vals)).unwrap();
    let axis = shape.len() - 1;
    let got_t = if inverse { ctx.ifft(&x, axis, len, 1e-10).unwrap() } else { ctx.fft(&x, axis, len, 1e-10).unwrap() };
    let out = t.to_complex();
    assert_eq!(got_t.dtype(), out);
    let mut want_shape = shape.to_vec();
    want_shape[axis] = len;
    assert_eq!(got_t.shape(), &want_shape[..]);
    let got = download_c(ctx, &got_t);
    let w = shape[axis];
    let vs = values(t, &vals);
    let mut want = vec![];
    let mut scale = vec![];
    for row in vs.chunks(w) {
        want.extend(model(row, len, 1e-10, inverse));
        scale.push(row.iter().map(|&v| as_c(v).0.abs() + as_c(v).1.abs()).sum::<f64>().max(1.0));
    }
    let label = format!("{}({t} {shape:?}, length {len})", if inverse { "ifft" } else { "fft" });
    (check(&label, out, &got, &want, &scale, len), 2 * got.len())
}

#[test]
fn fft_matches_binary_backend_model_every_length() {
    on_engine(|ctx| {
        let (mut same, mut all) = (0, 0);
        let mut case = 0u64;
        for &n in &[1usize, 2, 3, 4, 5, 7, 8, 12, 16, 45, 64, 96, 127, 256, 1000, 1024] {
            let types: &[DType] = if n >= 256 { &[DType::C64, DType::F64] } else { &[DType::C64, DType::C128, DType::F32, DType::F64, DType::S32] };
            for &t in types {
                for inverse in [false, true] {
                    case += 1;
                    let rows = if n >= 256 { 1 } else { 3 };
                    let (s, a) = run_case(ctx, t, &[rows, n], n, inverse, 1000 + case);
                    same += s;
                    all += a;
                }
            }
        }
        eprintln!("fft: {case} cases, {same} of {all} parts bit-identical to the model");
    });
}

#[test]
fn fft_length_pads_and_truncates() {
    on_engine(|ctx| {
        for (k, &(w, len)) in [(5usize, 8usize), (8, 5), (9, 12), (12, 9), (3, 1), (1, 4), (7, 7)].iter().enumerate() {
            for &t in &[DType::C128, DType::F32] {
                run_case(ctx, t, &[2, w], len, false, 50 + k as u64);
                run_case(ctx, t, &[w], len, true, 80 + k as u64);
            }
        }
    });
}

#[test]
fn fft_agrees_with_naive_dft() {
    on_engine(|ctx| {
        for &n in &[6usize, 17, 32, 100, 243] {
            let mut rng = Rng(n as u64);
            let vals: Vec<C> = (0..n).map(|_| (rng.next(), rng.next())).collect();
            let x = ctx.upload(DType::C128, &[n], &bytes(DType::C128, &vals)).unwrap();
            let got = download_c(ctx, &ctx.fft(&x, 0, n, 0.0).unwrap());
            let want = naive_dft(&vals, n);
            let s: f64 = vals.iter().map(|v| v.0.abs() + v.1.abs()).sum();
            for k in 0..n {
                assert!((got[k].0 - want[k].0).abs() <= 1e-10 * s && (got[k].1 - want[k].1).abs() <= 1e-10 * s, "n {n} k {k}: {:?} vs {:?}", got[k], want[k]);
            }
            // ifft(fft(x)) == x
            let y = ctx.ifft(&ctx.fft(&x, 0, n, 0.0).unwrap(), 0, n, 0.0).unwrap();
            for (k, (a, b)) in download_c(ctx, &y).iter().zip(&vals).enumerate() {
                assert!((a.0 - b.0).abs() <= 1e-12 * s && (a.1 - b.1).abs() <= 1e-12 * s, "roundtrip n {n} k {k}");
            }
        }
    });
}

#[test]
fn fft_along_other_axes_and_views() {
    on_engine(|ctx| {
        let (r, c) = (6usize, 10usize);
        let mut rng = Rng(7);
        let vals: Vec<C> = (0..r * c).map(|_| (rng.next(), rng.next())).collect();
        let x = ctx.upload(DType::C128, &[r, c], &bytes(DType::C128, &vals)).unwrap();
        // axis 0 == transpose, fft on the last axis, transpose back
        let got = download_c(ctx, &ctx.fft(&x, 0, 8, 1e-10).unwrap());
        let xt = ctx.contiguous(&x.transpose(&[1, 0]).unwrap()).unwrap();
        let want_t = download_c(ctx, &ctx.fft(&xt, 1, 8, 1e-10).unwrap());
        for i in 0..8 {
            for j in 0..c {
                assert_eq!(got[i * c + j].0.to_bits(), want_t[j * 8 + i].0.to_bits());
                assert_eq!(got[i * c + j].1.to_bits(), want_t[j * 8 + i].1.to_bits());
            }
        }
        // a reversed, sliced view is read in place and equals its materialised copy
        let v = x.reverse(&[1]).unwrap().slice(&[1, 2], &[4, 7], &[1, 1]).unwrap();
        let a = download_c(ctx, &ctx.ifft(&v, 1, 7, 1e-10).unwrap());
        let b = download_c(ctx, &ctx.ifft(&ctx.contiguous(&v).unwrap(), 1, 7, 1e-10).unwrap());
        assert_eq!(a.iter().map(|z| (z.0.to_bits(), z.1.to_bits())).collect::<Vec<_>>(), b.iter().map(|z| (z.0.to_bits(), z.1.to_bits())).collect::<Vec<_>>());
        // rank 3, middle axis
        let y = ctx.upload(DType::F64, &[2, 3, 4], &bytes(DType::F64, &vals[..24])).unwrap();
        let got = ctx.fft(&y, 1, 3, 1e-10).unwrap();
        assert_eq!(got.shape(), &[2, 3, 4]);
        assert!(ctx.fft(&y, 3, 3, 1e-10).is_err());
        assert!(ctx.fft(&y, 0, 0, 1e-10).is_err());
    });
}

#[test]
fn fft_dispatch_counts() {
    on_engine_alone(|ctx| {
        // n = 2^p q: the leaf, p radix-2 stages up to three to a pass, their twiddle table
        // where p > 0 and the leaf's where 1 < q <= 1024 (a q of 1,025 computes its twiddles
        // inline)
        for &(n, dispatches) in &[(1024usize, 1 + 4 + 1), (2048, 1 + 4 + 1), (4096, 1 + 4 + 1), (12, 1 + 1 + 1 + 1), (9, 1 + 1), (1, 1), (1025, 1)] {
            let x = ctx.upload(DType::C64, &[1, n], &vec![0u8; n * 8]).unwrap();
            let before = ctx.stats().dispatches;
            ctx.fft(&x, 1, n, 1e-10).unwrap();
            assert_eq!(ctx.stats().dispatches - before, dispatches, "n = {n}");
        }
    });
}

#[test]
fn fft_eps_cleans_small_parts() {
    on_engine(|ctx| {
        // [1, 1] -> [2, 0]; the tiny imaginary parts are cleaned to +0.0, larger ones kept
        let vals = [(1.0, 1e-12), (1.0, -3e-11)];
        let x = ctx.upload(DType::C128, &[2], &bytes(DType::C128, &vals)).unwrap();
        let got = download_c(ctx, &ctx.fft(&x, 0, 2, 1e-10).unwrap());
        assert_eq!(got[0].1.to_bits(), 0); // -2.9e-11 -> +0.0
        assert_eq!(got[1].0.to_bits(), 0);
        let got = download_c(ctx, &ctx.fft(&x, 0, 2, 1e-20).unwrap());
        assert!(got[0].1 < 0.0 && got[1].1 > 0.0);
    });
}

/// Bits written by Nx 0.7.2's BinaryBackend (32-bit words, low word first; see module docs).
fn golden(words: &str, t: DType) -> Vec<(u64, u64)> {
    let w: Vec<u64> = words.split(',').map(|h| u64::from_str_radix(h, 16).unwrap()).collect();
    match t {
        DType::C64 => w.chunks(2).map(|p| (p[0], p[1])).collect(),
        _ => w.chunks(4).map(|p| (p[0] | (p[1] << 32), p[2] | (p[3] << 32))).collect(),
    }
}

#[test]
fn fft_bits_equal_nx_binary_backend() {
    on_engine(|ctx| {
        let bits = |t: &Tensor| -> Vec<(u64, u64)> {
            download_c(ctx, t)
                .iter()
                .map(|z| if t.dtype() == DType::C64 { ((z.0 as f32).to_bits() as u64, (z.1 as f32).to_bits() as u64) } else { (z.0.to_bits(), z.1.to_bits()) })
                .collect()
        };
        let a: Vec<C> = [1.0, 2.0, -1.5, 0.25, 3.0, 4.0, -2.0, 0.5, 1.0, 7.0, 0.0, -3.0].iter().map(|&x| (x, 0.0)).collect();
        let x = ctx.upload(DType::F32, &[12], &bytes(DType::F32, &a)).unwrap();
        assert_eq!(bits(&ctx.fft(&x, 0, 12, 1e-10).unwrap()), golden("41440000,00000000,c0906ba4,40044985,c0f80000,3fddb3d7,41080000,c1740000,40500000,c08a9067,40a06ba4,403bb67b,c1140000,00000000,40a06ba4,c03bb67b,40500000,408a9067,41080000,41740000,c0f80000,bfddb3d7,c0906ba4,c0044985", DType::C64));
        let b = [(1.0, -2.0), (0.5, 0.25), (-3.0, 1.0), (2.0, 2.0), (0.0, -1.0), (1.5, 0.0), (-0.75, 4.0), (2.5, -0.5)];
        let y = ctx.upload(DType::C64, &[8], &bytes(DType::C64, &b)).unwrap();
        assert_eq!(bits(&ctx.ifft(&y, 0, 8, 1e-10).unwrap()), golden("3ef00000,3ef00000,3e59d7f5,bf3cda52,3f400000,bfa80000,bee5d2c9,3e63e1db,bf940000,3d000000,3f498a03,bd992d70,3ee00000,bf300000,bd5169ba,3db83c4a", DType::C64));
        let c: Vec<C> = [0.3, -1.7, 2.9, 4.1, -0.6, 1.1, 0.05, -2.2, 3.3].iter().map(|&x| (x, 0.0)).collect();
        let z = ctx.upload(DType::F64, &[9], &bytes(DType::F64, &c)).unwrap();
        let rv = values(DType::F64, &c);
        // c128: the CPU model (host libm twiddles) reproduces BinaryBackend's bits exactly; the
        // device's m_sin/m_cos twiddles may differ from the host libm by an ulp, which moves a
        // few parts by a few ulps: checked within 1e-14 * sum|x|.
        let near = |label: &str, got: Vec<(u64, u64)>, want: Vec<(u64, u64)>, model: Vec<C>| {
            let s: f64 = c.iter().map(|v| v.0.abs()).sum();
            let mut same = 0;
            for (k, ((g, w), m)) in got.iter().zip(&want).zip(&model).enumerate() {
                assert_eq!((m.0.to_bits(), m.1.to_bits()), *w, "{label}: model vs BinaryBackend at {k}");
                for (gp, wp) in [(g.0, w.0), (g.1, w.1)] {
                    assert!((f64::from_bits(gp) - f64::from_bits(wp)).abs() <= 1e-14 * s, "{label}[{k}]");
                    same += (gp == wp) as usize;
                }
            }
            eprintln!("{label}: {same} of {} parts bit-identical to BinaryBackend", 2 * got.len());
        };
        near("fft9", bits(&ctx.fft(&z, 0, 9, 1e-10).unwrap()), golden("ffffffff,401cffff,00000000,00000000,ad01c858,bfecb950,e904633a,c012f02d,954d0b10,bffc59ce,639e3976,401660aa,6666664e,40086666,d8278556,4024702d,23b2a200,c0053e5e,213c92a0,bfc8bcb2,23b2a1f7,c0053e5e,213c9130,3fc8bcb2,66666694,40086666,d827855a,c024702d,954d0ad7,bffc59ce,639e396e,c01660aa,ad01c8b0,bfecb950,e904633c,4012f02d", DType::C128), model(&rv, 9, 1e-10, false));
        near("fft9 length 12", bits(&ctx.fft(&z, 0, 12, 1e-10).unwrap()), golden("ffffffff,401cffff,00000000,00000000,c73a51b0,bfc5b5f3,3c8e9004,c01022ca,cccccccc,c01fcccc,3782ab78,bff8f108,999999aa,3fa99999,fffffffe,4003ffff,6666665e,40086666,d8278558,4024702d,5834faf0,3febd3e3,f6a4a332,c0171068,99999999,40129999,00000000,00000000,5834fab8,3febd3e3,f6a4a32e,40171068,66666675,40086666,d8278557,c024702d,999999d6,3fa99999,fffffffe,c003ffff,cccccccd,c01fcccc,3782ab5c,3ff8f108,c73a5180,bfc5b5f3,3c8e9004,401022ca", DType::C128), model(&rv, 12, 1e-10, false));
        near("ifft9 length 5", bits(&ctx.ifft(&z, 0, 5, 1e-10).unwrap()), golden("00000000,3ff00000,00000000,00000000,5af128a6,bff36fb4,710479b8,bfd66b54,82af1e1a,3febac35,50587efa,3fb9542f,82af1e18,3febac35,50587f1a,bfb9542f,5af128a6,bff36fb4,710479c6,3fd66b54", DType::C128), model(&rv, 5, 1e-10, true));
        let d: Vec<C> = [3, -1, 4, 1, -5, 9, 2, -6, 5, 3, 5].iter().map(|&x| (x as f64, 0.0)).collect();
        let s = ctx.upload(DType::S32, &[11], &bytes(DType::S32, &d)).unwrap();
        assert_eq!(bits(&ctx.fft(&s, 0, 16, 1e-10).unwrap()), golden("41a00000,00000000,c0aab88e,bf8f3d9d,40466ead,c0e00000,4104718e,40eb7905,c1000000,c1800000,c1008fb3,41962e90,41b7322a,40e00000,c03a1650,c11b4715,41000000,00000000,c03a1650,411b4715,41b7322a,c0e00000,c1008fb3,c1962e90,c1000000,41800000,4104718e,c0eb7905,40466ead,40e00000,c0aab88e,3f8f3d9d", DType::C64));
    });
}
