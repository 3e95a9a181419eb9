//! c64/c128 through the elementwise compiler, reductions and dot, against a plain CPU model of
//! the `complex` library (0.5.0) clauses as Nx.BinaryBackend calls them. Arithmetic, abs, sqrt,
//! conversions, predicates and comparisons are checked bit for bit; transcendental functions
//! (exp, log, sin, cos, tan, pow, ...) against std's f64 functions within a relative bound.

mod common;
use common::on_engine;
use common::on_engine_alone;
use nx_vulkan_engine::reduce::ReduceOp;
use nx_vulkan_engine::*;

type C = (f64, f64);

fn rdiv(x: f64, y: f64) -> f64 {
    let (xf, yf) = (!x.is_finite(), !y.is_finite());
    if xf && yf {
        f64::NAN
    } else if xf {
        if x.is_nan() || y >= 0.0 {
            x
        } else {
            -x
        }
    } else if y.is_nan() {
        f64::NAN
    } else if y.is_infinite() {
        0.0
    } else if x == 0.0 && y == 0.0 {
        f64::NAN
    } else {
        x / y
    }
}
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
fn cdiv(x: C, y: C) -> C {
    if y.1 == 0.0 {
        (rdiv(x.0, y.0), rdiv(x.1, y.0))
    } else if y.0 == 0.0 {
        (rdiv(x.1, y.1), -rdiv(x.0, y.1))
    } else {
        let den = y.0 * y.0 + y.1 * y.1;
        (rdiv(x.0 * y.0 + x.1 * y.1, den), rdiv(x.1 * y.0 - x.0 * y.1, den))
    }
}
/// Kernel.abs on this OTP keeps -0.0.
fn kabs(x: f64) -> f64 {
    if x < 0.0 {
        -x
    } else {
        x
    }
}
fn cabs(z: C) -> f64 {
    if z.0.is_nan() && z.1.is_nan() {
        return f64::NAN;
    }
    if !z.0.is_finite() || !z.1.is_finite() {
        return f64::INFINITY;
    }
    let (x, y) = (kabs(z.0), kabs(z.1));
    if x == 0.0 {
        y
    } else if y == 0.0 {
        x
    } else if x > y {
        let q = y / x;
        x * (1.0 + q * q).sqrt()
    } else {
        let q = x / y;
        y * (1.0 + q * q).sqrt()
    }
}
fn csqrt(z: C) -> C {
    let (r, i) = z;
    if r.is_nan() || i.is_nan() {
        return (f64::NAN, f64::NAN);
    }
    if i.is_infinite() {
        return (f64::INFINITY, i);
    }
    if r.is_infinite() {
        return if r > 0.0 { (r, 0.0) } else { (0.0, f64::INFINITY) };
    }
    if r == 0.0 && i == 0.0 {
        return z;
    }
    let (x, y) = (kabs(r), kabs(i));
    let w = if x >= y {
        let q = y / x;
        x.sqrt() * (0.5 * (1.0 + (1.0 + q * q).sqrt())).sqrt()
    } else {
        let q = x / y;
        y.sqrt() * (0.5 * (q + (1.0 + q * q).sqrt())).sqrt()
    };
    if r >= 0.0 {
        (w, i / (2.0 * w))
    } else {
        let i2 = if i >= 0.0 { w } else { -w };
        (i / (2.0 * i2), i2)
    }
}

/// An operand as BinaryBackend holds it: a real number or a complex.
#[derive(Clone, Copy, Debug)]
enum V {
    R(f64),
    Z(C),
}

fn binop(op: BinaryOp, a: V, b: V) -> C {
    use BinaryOp::*;
    let nf = |x: f64| !x.is_finite();
    match (a, b) {
        (V::Z(x), V::Z(y)) => match op {
            Add => (x.0 + y.0, x.1 + y.1),
            Subtract => (x.0 - y.0, x.1 - y.1),
            Multiply => cmul(x, y),
            Divide => cdiv(x, y),
            _ => unreachable!(),
        },
        (V::R(r), V::Z(z)) => match op {
            _ if r.is_nan() => (f64::NAN, 0.0),
            Add | Subtract if nf(r) => (r, 0.0),
            Add => (r + z.0, 0.0 + z.1),
            Subtract => (r - z.0, 0.0 - z.1),
            Multiply => (z.0 * r, z.1 * r),
            Divide => cdiv((r, 0.0), z),
            _ => unreachable!(),
        },
        (V::Z(z), V::R(r)) => match op {
            _ if r.is_nan() => (f64::NAN, 0.0),
            Add if nf(r) => (r, 0.0),
            Subtract if nf(r) => (-r, 0.0),
            Add => (z.0 + r, z.1 + 0.0),
            Subtract => (z.0 - r, z.1 - 0.0),
            Multiply => (z.0 * r, z.1 * r),
            Divide if nf(r) => (0.0, 0.0),
            Divide => (rdiv(z.0, r), rdiv(z.1, r)),
            _ => unreachable!(),
        },
        _ => unreachable!(),
    }
}

fn canon32(x: f64) -> u64 {
    if x.is_nan() {
        0x7FC0_0000
    } else {
        (x as f32).to_bits() as u64
    }
}
fn canon64(x: f64) -> u64 {
    if x.is_nan() {
        0x7FF8_0000_0000_0000
    } else {
        x.to_bits()
    }
}
/// Stored bits of a complex result (each part rounded once, NaN canonical).
fn wbits(t: DType, z: C) -> (u64, u64) {
    match t {
        DType::C64 => (canon32(z.0), canon32(z.1)),
        _ => (canon64(z.0), canon64(z.1)),
    }
}

fn special_parts(single: bool) -> Vec<f64> {
    let mut v = vec![0.0, -0.0, 1.0, -1.5, 2.0, 0.375, -3.25, 1e-3, 7.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];
    v.push(if single { 1e-40 } else { 1e-310 }); // subnormal
    v.push(if single { 3e38 } else { 1e300 });
    v
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 6.0 - 3.0
    }
}

/// Values of type `t` (complex or real): specials crossed, then random ones; `n` of them.
fn inputs(t: DType, n: usize, seed: u64) -> Vec<C> {
    let single = matches!(t, DType::C64 | DType::F32);
    let sp = special_parts(single);
    let mut rng = Rng(seed);
    let mut v = vec![];
    for (i, &a) in sp.iter().enumerate() {
        for (j, &b) in sp.iter().enumerate() {
            if (i * 7 + j * 3 + seed as usize) % 3 == 0 {
                v.push((a, b));
            }
        }
    }
    while v.len() < n {
        v.push((rng.next(), rng.next()));
    }
    v.truncate(n);
    v.into_iter().map(|(a, b)| if single { (a as f32 as f64, b as f32 as f64) } else { (a, b) }).collect()
}

fn bytes(t: DType, vals: &[C]) -> Vec<u8> {
    let mut b = vec![];
    for &(re, im) in vals {
        match t {
            DType::F32 => b.extend((re as f32).to_le_bytes()),
            DType::F64 => b.extend(re.to_le_bytes()),
            DType::S32 => b.extend((if re.is_finite() { re as i32 } else { 5 }).to_le_bytes()),
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
fn value(t: DType, z: C) -> V {
    match t {
        DType::F32 | DType::F64 => V::R(z.0),
        DType::S32 => V::R((if z.0.is_finite() { z.0 as i32 } else { 5 }) as f64),
        _ => V::Z(z),
    }
}

fn download_bits(ctx: &Context, t: &Tensor) -> Vec<(u64, u64)> {
    let b = ctx.download(t).unwrap();
    match t.dtype() {
        DType::C64 => b.chunks(8).map(|c| (u32::from_le_bytes(c[..4].try_into().unwrap()) as u64, u32::from_le_bytes(c[4..].try_into().unwrap()) as u64)).collect(),
        DType::C128 => b.chunks(16).map(|c| (u64::from_le_bytes(c[..8].try_into().unwrap()), u64::from_le_bytes(c[8..].try_into().unwrap()))).collect(),
        DType::F32 => b.chunks(4).map(|c| (u32::from_le_bytes(c.try_into().unwrap()) as u64, 0)).collect(),
        DType::F64 => b.chunks(8).map(|c| (u64::from_le_bytes(c.try_into().unwrap()), 0)).collect(),
        DType::U8 => b.iter().map(|&x| (x as u64, 0)).collect(),
        DType::S32 => b.chunks(4).map(|c| (u32::from_le_bytes(c.try_into().unwrap()) as u64, 0)).collect(),
        t => panic!("{t}"),
    }
}
fn to_c(t: DType, bits: (u64, u64)) -> C {
    match t {
        DType::C64 => (f32::from_bits(bits.0 as u32) as f64, f32::from_bits(bits.1 as u32) as f64),
        _ => (f64::from_bits(bits.0), f64::from_bits(bits.1)),
    }
}

#[derive(Default)]
struct Failures(Vec<String>, usize);
impl Failures {
    fn check(&mut self, ok: bool, msg: impl FnOnce() -> String) {
        self.1 += 1;
        if !ok && self.0.len() < 20 {
            self.0.push(msg());
        }
    }
    fn finish(self, what: &str) {
        assert!(self.0.is_empty(), "{what}: failures ({} checks):\n{}", self.1, self.0.join("\n"));
        eprintln!("{what}: {} checks", self.1);
    }
}

const N: usize = 1023;

#[test]
fn arithmetic_bit_exact_with_mixed_operands() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let pairs = [
            (DType::C64, DType::C64, DType::C64),
            (DType::C128, DType::C128, DType::C128),
            (DType::C64, DType::F32, DType::C64),
            (DType::F32, DType::C64, DType::C64),
            (DType::S32, DType::C128, DType::C128),
            (DType::C128, DType::F64, DType::C128),
            (DType::C64, DType::C128, DType::C128),
        ];
        for (k, &(lt, rt, out)) in pairs.iter().enumerate() {
            let xa = inputs(lt, N, 10 + k as u64);
            let mut xb = inputs(rt, N, 20 + k as u64);
            xb.rotate_left(5 + k);
            let a = ctx.upload(lt, &[N], &bytes(lt, &xa)).unwrap();
            let b = ctx.upload(rt, &[N], &bytes(rt, &xb)).unwrap();
            for op in [BinaryOp::Add, BinaryOp::Subtract, BinaryOp::Multiply, BinaryOp::Divide] {
                let got = download_bits(ctx, &ctx.binary(op, &a, &b, out).unwrap());
                for i in 0..N {
                    let (va, vb) = (value(lt, xa[i]), value(rt, xb[i]));
                    let want = wbits(out, binop(op, va, vb));
                    f.check(got[i] == want, || format!("{}({lt} {va:?}, {rt} {vb:?}) -> {out}: got {:?} want {:?}", op.name(), to_c(out, got[i]), to_c(out, want)));
                }
            }
        }
        f.finish("complex arithmetic");
    });
}

#[test]
fn unary_exact_ops_and_conversions() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        for (k, &t) in [DType::C64, DType::C128].iter().enumerate() {
            let part = t.real_part();
            let xs = inputs(t, N, 40 + k as u64);
            let x = ctx.upload(t, &[N], &bytes(t, &xs)).unwrap();
            let raw = download_bits(ctx, &x);
            let cases: Vec<(UnaryOp, DType, Box<dyn Fn(C) -> C>)> = vec![
                (UnaryOp::Negate, t, Box::new(|z: C| (-z.0, -z.1))),
                (UnaryOp::Conjugate, t, Box::new(|z: C| (z.0, -z.1))),
                (UnaryOp::Sqrt, t, Box::new(csqrt)),
                (UnaryOp::Sign, t, Box::new(|_| (1.0, 0.0))),
                (UnaryOp::Abs, part, Box::new(|z: C| (cabs(z), 0.0))),
            ];
            for (op, out, model) in cases {
                let got = download_bits(ctx, &ctx.unary(op, &x, out).unwrap());
                for i in 0..N {
                    let w = model(xs[i]);
                    let want = if out.is_complex() { wbits(out, w) } else { (wbits(t, w).0, 0) };
                    f.check(got[i] == want, || format!("{}({t} {:?}) -> {out}: got {:?} want {:?}", op.name(), xs[i], got[i], want));
                }
            }
            // real/imag copy the stored part bits (NaN payloads included)
            let re = download_bits(ctx, &ctx.unary(UnaryOp::Real, &x, part).unwrap());
            let im = download_bits(ctx, &ctx.unary(UnaryOp::Imag, &x, part).unwrap());
            for i in 0..N {
                f.check(re[i].0 == raw[i].0 && im[i].0 == raw[i].1, || format!("real/imag {i}"));
            }
            // predicates
            let nan = download_bits(ctx, &ctx.unary(UnaryOp::IsNan, &x, DType::U8).unwrap());
            let inf = download_bits(ctx, &ctx.unary(UnaryOp::IsInfinity, &x, DType::U8).unwrap());
            let not = download_bits(ctx, &ctx.unary(UnaryOp::LogicalNot, &x, DType::U8).unwrap());
            for i in 0..N {
                let z = xs[i];
                f.check(nan[i].0 == (z.0.is_nan() || z.1.is_nan()) as u64, || format!("is_nan {z:?}"));
                f.check(inf[i].0 == (z.0.is_infinite() || z.1.is_infinite()) as u64, || format!("is_infinity {z:?}"));
                f.check(not[i].0 == (z.0 == 0.0 && z.1 == 0.0) as u64, || format!("logical_not {z:?}"));
            }
            // as_type: complex -> real takes the real part; -> s32 truncates it (NaN 0, Inf max)
            let to_f = download_bits(ctx, &ctx.convert(&x, DType::F64).unwrap());
            let to_i = download_bits(ctx, &ctx.convert(&x, DType::S32).unwrap());
            let other = if t == DType::C64 { DType::C128 } else { DType::C64 };
            let to_c = download_bits(ctx, &ctx.convert(&x, other).unwrap());
            for i in 0..N {
                let z = xs[i];
                f.check(to_f[i].0 == canon64(z.0), || format!("as_type f64 {z:?}"));
                let wi = if z.0.is_nan() { 0 } else if z.0 == f64::INFINITY { i32::MAX } else if z.0 == f64::NEG_INFINITY { i32::MIN } else if z.0.abs() >= 2f64.powi(120) { 0 } else { z.0.trunc() as i128 as i32 };
                f.check(to_i[i].0 == wi as u32 as u64, || format!("as_type s32 {z:?}: {:?}", to_i[i]));
                f.check(to_c[i] == wbits(other, z), || format!("as_type {other} {z:?}"));
            }
        }
        // real -> complex: (x, +0.0); conjugate of a real: (x, -0.0), of a non-finite real (x, +0.0)
        let xs = inputs(DType::F32, N, 60);
        let x = ctx.upload(DType::F32, &[N], &bytes(DType::F32, &xs)).unwrap();
        let c = download_bits(ctx, &ctx.convert(&x, DType::C64).unwrap());
        let cj = download_bits(ctx, &ctx.unary(UnaryOp::Conjugate, &x, DType::C64).unwrap());
        let im = download_bits(ctx, &ctx.unary(UnaryOp::Imag, &x, DType::F32).unwrap());
        for i in 0..N {
            let r = xs[i].0;
            f.check(c[i] == (canon32(r), 0), || format!("f32 -> c64 {r}"));
            let wim = if r.is_finite() { 0x8000_0000 } else { 0 };
            f.check(cj[i] == (canon32(r), wim), || format!("conjugate f32 {r}: {:?}", cj[i]));
            f.check(im[i].0 == 0, || format!("imag f32 {r}"));
        }
        f.finish("complex unary/conversions");
    });
}

#[test]
fn comparisons_follow_elixir_equality() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let xa = inputs(DType::C128, N, 70);
        let mut xb = xa.clone();
        for (i, z) in xb.iter_mut().enumerate() {
            match i % 4 {
                0 => {}
                1 => *z = (if z.0 == 0.0 { -z.0 } else { z.0 }, z.1), // -0.0 == 0.0
                2 => z.1 += 1.0,
                _ => *z = (z.1, z.0),
            }
        }
        let a = ctx.upload(DType::C128, &[N], &bytes(DType::C128, &xa)).unwrap();
        let b = ctx.upload(DType::C128, &[N], &bytes(DType::C128, &xb)).unwrap();
        let eq = download_bits(ctx, &ctx.binary(BinaryOp::Equal, &a, &b, DType::U8).unwrap());
        let ne = download_bits(ctx, &ctx.binary(BinaryOp::NotEqual, &a, &b, DType::U8).unwrap());
        let same = |x: f64, y: f64| x == y || (x.is_nan() && y.is_nan()); // NaN parts are atoms there
        for i in 0..N {
            let w = same(xa[i].0, xb[i].0) && same(xa[i].1, xb[i].1);
            f.check(eq[i].0 == w as u64 && ne[i].0 == !w as u64, || format!("equal {:?} {:?}", xa[i], xb[i]));
        }
        // a complex never equals a real number
        let r = ctx.upload(DType::F64, &[N], &bytes(DType::F64, &xa)).unwrap();
        let eq = download_bits(ctx, &ctx.binary(BinaryOp::Equal, &a, &r, DType::U8).unwrap());
        let ne = download_bits(ctx, &ctx.binary(BinaryOp::NotEqual, &r, &a, DType::U8).unwrap());
        for i in 0..N {
            f.check(eq[i].0 == 0 && ne[i].0 == 1, || format!("complex vs real {:?}", xa[i]));
        }
        assert!(ctx.binary(BinaryOp::Greater, &a, &b, DType::U8).is_err());
        assert!(ctx.binary(BinaryOp::Max, &a, &b, DType::C128).is_err());
        assert!(ctx.unary(UnaryOp::Asin, &a, DType::C128).is_err());
        assert!(ctx.unary(UnaryOp::Exp, &a, DType::F64).is_err());
        assert!(ctx.reduce(ReduceOp::Max, &a, &[0], false, DType::C128).is_err());
        f.finish("complex comparisons");
    });
}

fn close(got: C, want: C, rtol: f64) -> bool {
    let scale = want.0.abs() + want.1.abs();
    (got.0 - want.0).abs() <= rtol * scale + 1e-300 && (got.1 - want.1).abs() <= rtol * scale + 1e-300
}

#[test]
fn transcendental_functions_within_bounds() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        type F = fn(C) -> C;
        let cexp: F = |z| (z.0.exp() * z.1.cos(), z.0.exp() * z.1.sin());
        let clog: F = |z| (cabs(z).ln(), z.1.atan2(z.0));
        let csin: F = |z| (z.0.sin() * z.1.cosh(), z.0.cos() * z.1.sinh());
        let ccos: F = |z| (z.0.cos() * z.1.cosh(), -z.0.sin() * z.1.sinh());
        let ops: Vec<(UnaryOp, F)> = vec![
            (UnaryOp::Exp, cexp),
            (UnaryOp::Log, clog),
            (UnaryOp::Sin, csin),
            (UnaryOp::Cos, ccos),
            (UnaryOp::Tan, |z| cdiv((z.0.sin() * z.1.cosh(), z.0.cos() * z.1.sinh()), (z.0.cos() * z.1.cosh(), -z.0.sin() * z.1.sinh()))),
            (UnaryOp::Expm1, |z| (z.0.exp() * z.1.cos() - 1.0, z.0.exp() * z.1.sin())),
            (UnaryOp::Log1p, |z| {
                let w = (z.0 + 1.0, z.1);
                (cabs(w).ln(), w.1.atan2(w.0))
            }),
            (UnaryOp::Sigmoid, |z| {
                let e = ((-z.0).exp() * (-z.1).cos() + 1.0, (-z.0).exp() * (-z.1).sin());
                cdiv((1.0, 0.0), e)
            }),
            (UnaryOp::Rsqrt, |z| cdiv((1.0, 0.0), csqrt(z))),
        ];
        for &(t, rtol) in &[(DType::C64, 2.5e-7), (DType::C128, 2e-14)] {
            let mut rng = Rng(90);
            let xs: Vec<C> = (0..N).map(|_| (rng.next(), rng.next())).map(|(a, b)| if t == DType::C64 { (a as f32 as f64, b as f32 as f64) } else { (a, b) }).collect();
            let x = ctx.upload(t, &[N], &bytes(t, &xs)).unwrap();
            for (op, model) in &ops {
                let got = download_bits(ctx, &ctx.unary(*op, &x, t).unwrap());
                for i in 0..N {
                    let w = model(xs[i]);
                    let g = to_c(t, got[i]);
                    f.check(close(g, w, rtol), || format!("{}({t} {:?}): got {g:?} want {w:?}", op.name(), xs[i]));
                }
            }
            // pow with a complex and with a real exponent
            let ys: Vec<C> = (0..N).map(|_| (rng.next() * 0.5, rng.next() * 0.5)).map(|(a, b)| if t == DType::C64 { (a as f32 as f64, b as f32 as f64) } else { (a, b) }).collect();
            let y = ctx.upload(t, &[N], &bytes(t, &ys)).unwrap();
            let got = download_bits(ctx, &ctx.binary(BinaryOp::Pow, &x, &y, t).unwrap());
            for i in 0..N {
                let (z, e) = (xs[i], ys[i]);
                let (rho, th) = (cabs(z), z.1.atan2(z.0));
                let s = rho.powf(e.0) * (-e.1 * th).exp();
                let r = e.0 * th + e.1 * rho.ln();
                let w = (s * r.cos(), s * r.sin());
                let g = to_c(t, got[i]);
                f.check(close(g, w, rtol * 4.0), || format!("pow({z:?}, {e:?}): got {g:?} want {w:?}"));
            }
        }
        // special values of exp follow the library's clauses exactly
        let sp = [(f64::NEG_INFINITY, f64::NAN), (f64::INFINITY, f64::NAN), (f64::INFINITY, 0.0), (f64::INFINITY, -2.0), (1.0, f64::INFINITY), (f64::NAN, 0.0), (0.0, 0.0)];
        let want = [(0.0, 0.0), (f64::INFINITY, f64::NAN), (f64::INFINITY, f64::NAN), (f64::INFINITY, f64::NEG_INFINITY), (f64::NAN, f64::NAN), (f64::NAN, f64::NAN), (1.0, 0.0)];
        let x = ctx.upload(DType::C128, &[sp.len()], &bytes(DType::C128, &sp)).unwrap();
        let got = download_bits(ctx, &ctx.unary(UnaryOp::Exp, &x, DType::C128).unwrap());
        for i in 0..sp.len() {
            f.check(got[i] == wbits(DType::C128, want[i]), || format!("exp{:?}: got {:?}", sp[i], to_c(DType::C128, got[i])));
        }
        f.finish("complex transcendental");
    });
}

#[test]
fn fused_expression_equals_op_by_op_in_one_dispatch() {
    on_engine_alone(|ctx| {
        let xs = inputs(DType::C64, 777, 5);
        let rs = inputs(DType::F32, 777, 6);
        let a = ctx.upload(DType::C64, &[777], &bytes(DType::C64, &xs)).unwrap();
        let r = ctx.upload(DType::F32, &[777], &bytes(DType::F32, &rs)).unwrap();
        // abs(conj(a) * a + r) / 2 with a c128 intermediate, written as c64 via sqrt
        let e = Expr::unary(
            UnaryOp::Sqrt,
            Expr::binary(
                BinaryOp::Add,
                Expr::binary(BinaryOp::Multiply, Expr::unary(UnaryOp::Conjugate, Expr::Input(0), DType::C64), Expr::convert(Expr::Input(0), DType::C128), DType::C128),
                Expr::Input(1),
                DType::C128,
            ),
            DType::C64,
        );
        let before = ctx.stats().dispatches;
        let fused = download_bits(ctx, &ctx.map(&e, &[&a, &r]).unwrap());
        assert_eq!(ctx.stats().dispatches - before, 1);
        let c = ctx.unary(UnaryOp::Conjugate, &a, DType::C64).unwrap();
        let a2 = ctx.convert(&a, DType::C128).unwrap();
        let m = ctx.binary(BinaryOp::Multiply, &c, &a2, DType::C128).unwrap();
        let s = ctx.binary(BinaryOp::Add, &m, &r, DType::C128).unwrap();
        let unfused = download_bits(ctx, &ctx.unary(UnaryOp::Sqrt, &s, DType::C64).unwrap());
        assert_eq!(fused, unfused);
        // select with a complex predicate and complex branches; a complex constant
        let k = Expr::Const { value: Scalar::F(2.5), dtype: DType::C64 };
        let e = Expr::select(Expr::Input(0), Expr::binary(BinaryOp::Multiply, Expr::Input(0), k, DType::C64), Expr::Input(1), DType::C64);
        let got = download_bits(ctx, &ctx.map(&e, &[&a, &r]).unwrap());
        for i in 0..777 {
            let z = xs[i];
            let want = if z.0 == 0.0 && z.1 == 0.0 { wbits(DType::C64, (rs[i].0, 0.0)) } else { wbits(DType::C64, cmul(z, (2.5, 0.0))) };
            assert_eq!(got[i], want, "select {z:?}");
        }
        // a strided (reversed, broadcast) view of a c128
        let b = ctx.upload(DType::C128, &[3], &bytes(DType::C128, &[(1.0, 2.0), (3.0, -4.0), (f64::NAN, 0.5)])).unwrap();
        let v = b.reverse(&[0]).unwrap().broadcast(&[2, 3], &[1]).unwrap();
        let got = download_bits(ctx, &ctx.contiguous(&v).unwrap());
        let row: Vec<(u64, u64)> = [(f64::NAN, 0.5f64), (3.0, -4.0), (1.0, 2.0)].iter().map(|z| (z.0.to_bits(), z.1.to_bits())).collect();
        assert_eq!(got, [row.clone(), row].concat());
    });
}

#[test]
fn sum_product_and_dot() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        for &t in &[DType::C64, DType::C128] {
            // [rows, len]: 200-long rows are folded sequentially (per output, BinaryBackend's
            // order: exact), 3000-long ones by a workgroup tree (fixed order: within bounds)
            for &(rows, len) in &[(5usize, 200usize), (2, 3000), (700, 3)] {
                let mut rng = Rng((rows * len) as u64);
                let xs: Vec<C> = (0..rows * len)
                    .map(|_| (rng.next(), rng.next()))
                    .map(|(a, b)| if t == DType::C64 { (a as f32 as f64, b as f32 as f64) } else { (a, b) })
                    .collect();
                // products of many values overflow: scale them towards 1
                let ps: Vec<C> = xs.iter().map(|z| (1.0 + z.0 / 64.0, z.1 / 64.0)).map(|(a, b)| if t == DType::C64 { (a as f32 as f64, b as f32 as f64) } else { (a, b) }).collect();
                let x = ctx.upload(t, &[rows, len], &bytes(t, &xs)).unwrap();
                let p = ctx.upload(t, &[rows, len], &bytes(t, &ps)).unwrap();
                let sum = download_bits(ctx, &ctx.reduce(ReduceOp::Sum, &x, &[1], false, t).unwrap());
                let prod = download_bits(ctx, &ctx.reduce(ReduceOp::Product, &p, &[1], false, t).unwrap());
                let exact = len < 256;
                let tol = if t == DType::C64 { 3e-7 } else { 1e-13 };
                for r in 0..rows {
                    let mut s = (0.0, 0.0);
                    let mut m: Option<C> = None;
                    for k in 0..len {
                        let z = xs[r * len + k];
                        s = (s.0 + z.0, s.1 + z.1);
                        let w = ps[r * len + k];
                        m = Some(match m { None => w, Some(a) => cmul(a, w) });
                    }
                    let m = m.unwrap();
                    let scale: f64 = xs[r * len..(r + 1) * len].iter().map(|z| z.0.abs() + z.1.abs()).sum();
                    if exact {
                        f.check(sum[r] == wbits(t, s), || format!("sum {t} row {r}: {:?} vs {s:?}", to_c(t, sum[r])));
                        f.check(prod[r] == wbits(t, m), || format!("product {t} row {r}: {:?} vs {m:?}", to_c(t, prod[r])));
                    } else {
                        let g = to_c(t, sum[r]);
                        f.check((g.0 - s.0).abs() <= tol * scale && (g.1 - s.1).abs() <= tol * scale, || format!("sum {t} [{rows}, {len}] row {r}: {g:?} vs {s:?}"));
                        let g = to_c(t, prod[r]);
                        f.check(close(g, m, tol * 10.0), || format!("product {t} [{rows}, {len}] row {r}: {g:?} vs {m:?}"));
                    }
                }
            }
            // sum([-0.0 - 0.0i]) = +0.0 + 0.0i (BinaryBackend's integer seed); product keeps -0.0
            let z = ctx.upload(t, &[1], &bytes(t, &[(-0.0, -0.0)])).unwrap();
            f.check(download_bits(ctx, &ctx.reduce(ReduceOp::Sum, &z, &[0], false, t).unwrap())[0] == (0, 0), || "sum -0".into());
            f.check(download_bits(ctx, &ctx.reduce(ReduceOp::Product, &z, &[0], false, t).unwrap())[0] == wbits(t, (-0.0, -0.0)), || "product -0".into());
            let any = download_bits(ctx, &ctx.reduce(ReduceOp::Any, &z, &[0], false, DType::U8).unwrap());
            f.check(any[0].0 == 0, || "any(-0-0i)".into());
        }
        // dot: [m, k] x [k, n] with complex x complex and real x complex, f64 accumulation in
        // ascending k (BinaryBackend's order: exact)
        for &(ta, tb, out) in &[(DType::C64, DType::C64, DType::C64), (DType::C128, DType::C128, DType::C128), (DType::F32, DType::C64, DType::C64), (DType::C128, DType::S32, DType::C128)] {
            let (m, k, n) = (7usize, 33usize, 5usize);
            let mut rng = Rng(77);
            let xa: Vec<C> = (0..m * k).map(|_| (rng.next(), rng.next())).collect();
            let xb: Vec<C> = (0..k * n).map(|_| (rng.next(), rng.next())).collect();
            let a = ctx.upload(ta, &[m, k], &bytes(ta, &xa)).unwrap();
            let b = ctx.upload(tb, &[k, n], &bytes(tb, &xb)).unwrap();
            let got = download_bits(ctx, &ctx.dot(&a, &[1], &[], &b, &[0], &[], out).unwrap());
            let rd = |t: DType, z: C| match value(t, if t == DType::C64 || t == DType::F32 { (z.0 as f32 as f64, z.1 as f32 as f64) } else { z }) {
                V::R(r) => V::R(r),
                V::Z(z) => V::Z(z),
            };
            for i in 0..m {
                for j in 0..n {
                    let mut acc = (0.0, 0.0);
                    for l in 0..k {
                        let p = match (rd(ta, xa[i * k + l]), rd(tb, xb[l * n + j])) {
                            (V::Z(x), V::Z(y)) => cmul(x, y),
                            (V::R(r), V::Z(z)) | (V::Z(z), V::R(r)) => (z.0 * r, z.1 * r),
                            _ => unreachable!(),
                        };
                        acc = (acc.0 + p.0, acc.1 + p.1);
                    }
                    f.check(got[i * n + j] == wbits(out, acc), || format!("dot {ta}x{tb} [{i},{j}]: {:?} vs {acc:?}", to_c(out, got[i * n + j])));
                }
            }
        }
        f.finish("complex reductions and dot");
    });
}
