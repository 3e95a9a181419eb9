//! `precision: :fast` (FloatMath::Fast): our f32 library (src/kernels/math_f32.glsl) on the
//! device against MPFR (through `rug`) and against the exact path.
//!
//! * exp, expm1, log, log1p, tanh, sigmoid, erf, sqrt, rsqrt, pow: within 2 ulp of the correctly rounded f32 result
//!   over dense ranges, random bit patterns of every class (subnormals included), points near
//!   thresholds and special values; NaN/Inf/zero results equal the exact path's bits.
//! * add, subtract, multiply (correctly rounded by construction), max, min, negate, abs, sign
//!   and the comparisons: the exact path's bits (BinaryBackend's) for every input pair, special
//!   values and subnormals included — for f32, f16 and bf16.
//! * divide: within 1 ulp of the exact path's (correctly rounded) quotient, zeros, Inf and NaN
//!   its bits — for f32, f16 and bf16 (the table counts the quotients that differ).
//! * f16/bf16 transcendental results (computed in f32, rounded once): within 1 ulp of their
//!   type's correctly rounded result.
//!
//! Prints a table (op, points, max ulp, mean ulp, results that differ from the exact path).
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json \
//!      cargo test --release -p nx_vulkan_engine --test math_f32_ulp -- --nocapture
//! MATH_ULP_POINTS=n scales the random sets (default 20000 per op).

use nx_vulkan_engine::*;
use rug::Float;

const PREC: u32 = 160;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / 9007199254740992.0)
    }
    fn uni(&mut self, a: f64, b: f64, n: usize) -> Vec<f32> {
        (0..n).map(|_| (a + (b - a) * self.unit()) as f32).collect()
    }
    /// Any f32 bit pattern (every class: subnormals, NaNs with payloads, Inf).
    fn bits(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| f32::from_bits(self.next() as u32)).collect()
    }
}

fn around(x: f32, k: i32) -> Vec<f32> {
    (-k..=k).map(|d| f32::from_bits((x.to_bits() as i32 + d) as u32)).collect()
}

fn specials() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7F800001),
        f32::from_bits(0xFFC12345),
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::from_bits(0x007F_FFFF),
        f32::from_bits(0x8040_0000),
        f32::EPSILON,
        1e-30,
        -1e-30,
        1e30,
        -1e30,
    ];
    for x in [
        1.0f32, 0.5, 2.0, 3.0, 1.4142135, 0.7071068, 0.625, 9.0, 9.02, 17.34, 3.92, 3.9192, 88.72284, 89.0, 87.33655,
        103.97208, 104.0, 0.34657359, 0.6931472, 1e-4, 2.4414062e-4, 5.9604645e-8, 2.9802322e-8, 7.888609e-31,
    ] {
        v.extend(around(x, 3));
        v.extend(around(-x, 3));
    }
    v
}

fn ord32(x: f32) -> i64 {
    ord_bits(DType::F32, x.to_bits() as u64)
}

/// The stored bits of an f32, f16 or bf16 as an integer monotone in the value, one apart per
/// ulp (-0.0 and +0.0 both 0).
fn ord_bits(t: DType, bits: u64) -> i64 {
    let sign = 1u64 << (t.size() * 8 - 1);
    if bits & sign != 0 {
        -((bits & (sign - 1)) as i64)
    } else {
        bits as i64
    }
}

/// The value of f32, f16 or bf16 stored bits.
fn bits_to_f32(t: DType, bits: u64) -> f32 {
    match t {
        DType::F32 => f32::from_bits(bits as u32),
        DType::F16 => half::f16::from_bits(bits as u16).to_f32(),
        _ => half::bf16::from_bits(bits as u16).to_f32(),
    }
}

/// Distance in ulps; NaN must match NaN, zeros their sign, Inf exactly (±Inf next to ±MAX is one).
fn dist32(got: f32, want: f32) -> f64 {
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if got == 0.0 && want == 0.0 && got.to_bits() != want.to_bits() {
        return f64::INFINITY;
    }
    (ord32(got) - ord32(want)).unsigned_abs() as f64
}

fn fl(x: f32) -> Float {
    Float::with_val(PREC, x)
}

fn up(ctx: &Context, t: DType, bits: &[u64]) -> Tensor {
    let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()[..t.size()].to_vec()).collect();
    ctx.upload(t, &[bits.len()], &bytes).expect("upload")
}
fn down(ctx: &Context, t: DType, x: &Tensor) -> Vec<u64> {
    let bytes = ctx.download(x).expect("download");
    bytes
        .chunks(t.size())
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect()
}

struct Row {
    name: String,
    n: usize,
    max: f64,
    mean: f64,
    differ: usize,
}

/// `op` on f32 points under :fast and :exact: (fast, exact) results.
fn unary_both(ctx: &Context, op: UnaryOp, t: DType, xs: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let x = up(ctx, t, xs);
    let fast = ctx.unary_with(FloatMath::Fast, op, &x, t).expect("fast");
    let exact = ctx.unary(op, &x, t).expect("exact");
    (down(ctx, t, &fast), down(ctx, t, &exact))
}
fn binary_both(ctx: &Context, op: BinaryOp, t: DType, out: DType, a: &[u64], b: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let (x, y) = (up(ctx, t, a), up(ctx, t, b));
    let fast = ctx.binary_with(FloatMath::Fast, op, &x, &y, out).expect("fast");
    let exact = ctx.binary(op, &x, &y, out).expect("exact");
    (down(ctx, out, &fast), down(ctx, out, &exact))
}

fn f32s(xs: &[f32]) -> Vec<u64> {
    xs.iter().map(|x| x.to_bits() as u64).collect()
}

/// An f32 op against MPFR: ulp statistics; special results must be the exact path's bits.
fn accuracy(ctx: &Context, name: &str, op: UnaryOp, xs: &[f32], r: &dyn Fn(Float) -> Float, bad: &mut Vec<String>) -> Row {
    let (fast, exact) = unary_both(ctx, op, DType::F32, &f32s(xs));
    let (mut max, mut sum, mut differ, mut shown) = (0.0f64, 0.0, 0, 0);
    for (i, &x) in xs.iter().enumerate() {
        let got = f32::from_bits(fast[i] as u32);
        let want = r(fl(x)).to_f32();
        let d = dist32(got, want);
        let special = !got.is_finite() || !want.is_finite() || got == 0.0;
        if (special && fast[i] != exact[i]) || (got.is_nan() && fast[i] != 0x7FC0_0000) {
            bad.push(format!("{name}({x:e} = {:#x}): {:#x}, the exact path gives {:#x}", x.to_bits(), fast[i], exact[i]));
        }
        if d > 2.0 && shown < 6 {
            eprintln!("  {name}({x:e} = {:#x}) = {got:e} want {want:e} ({d} ulp)", x.to_bits());
            shown += 1;
        }
        differ += (fast[i] != exact[i]) as usize;
        max = max.max(d);
        sum += if d.is_finite() { d } else { 1e6 };
    }
    Row { name: name.into(), n: xs.len(), max, mean: sum / xs.len() as f64, differ }
}

/// pow on f32 pairs against MPFR, as `accuracy`.
fn accuracy_pow(ctx: &Context, pts: &[(f32, f32)], bad: &mut Vec<String>) -> Row {
    let (a, b): (Vec<f32>, Vec<f32>) = pts.iter().copied().unzip();
    let (fast, exact) = binary_both(ctx, BinaryOp::Pow, DType::F32, DType::F32, &f32s(&a), &f32s(&b));
    let (mut max, mut sum, mut differ, mut shown) = (0.0f64, 0.0, 0, 0);
    for (i, &(x, y)) in pts.iter().enumerate() {
        let got = f32::from_bits(fast[i] as u32);
        let want = rug::ops::Pow::pow(fl(x), &fl(y)).to_f32();
        let d = dist32(got, want);
        let special = !got.is_finite() || !want.is_finite();
        if (special && fast[i] != exact[i]) || (got.is_nan() && fast[i] != 0x7FC0_0000) {
            bad.push(format!("pow({x:e}, {y:e}): {:#x}, the exact path gives {:#x}", fast[i], exact[i]));
        }
        if d > 2.0 && shown < 6 {
            eprintln!("  pow({x:e}, {y:e}) = {got:e} want {want:e} ({d} ulp)");
            shown += 1;
        }
        differ += (fast[i] != exact[i]) as usize;
        max = max.max(d);
        sum += if d.is_finite() { d } else { 1e6 };
    }
    Row { name: "pow".into(), n: pts.len(), max, mean: sum / pts.len() as f64, differ }
}

/// f16/bf16: the f32 computation rounded once, within 1 ulp of the type's correctly rounded result.
fn accuracy_half(ctx: &Context, t: DType, name: &str, op: UnaryOp, r: &dyn Fn(Float) -> Float, bad: &mut Vec<String>) -> Row {
    let xs: Vec<u64> = (0..1u64 << 16).collect(); // every f16 / bf16 value
    let (fast, exact) = unary_both(ctx, op, t, &xs);
    let to_f32 = |b: u64| bits_to_f32(t, b);
    let ord = |b: u64| ord_bits(t, b);
    let (mut max, mut sum, mut differ) = (0.0f64, 0.0, 0);
    for (i, &x) in xs.iter().enumerate() {
        let want = r(fl(to_f32(x)));
        // correctly rounded to the type, as BinaryBackend would write it (bf16: the f32's top half)
        let wbits = match t {
            DType::F16 => half::f16::from_f64(want.to_f64()).to_bits() as u64, // f64 first: innocuous for f16
            _ => (want.to_f32().to_bits() >> 16) as u64,
        };
        let (g, w) = (to_f32(fast[i]), to_f32(wbits));
        let d = if g.is_nan() || w.is_nan() {
            if g.is_nan() && w.is_nan() {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            (ord(fast[i]) - ord(wbits)).unsigned_abs() as f64
        };
        if !g.is_finite() && fast[i] != exact[i] {
            bad.push(format!("{t} {name}({:#x}): {:#x}, the exact path gives {:#x}", x, fast[i], exact[i]));
        }
        differ += (fast[i] != exact[i]) as usize;
        max = max.max(d);
        sum += if d.is_finite() { d } else { 1e6 };
    }
    Row { name: format!("{name} ({t})"), n: xs.len(), max, mean: sum / xs.len() as f64, differ }
}

/// Ops whose :fast results must be the exact path's bits (correctly rounded, or exact).
fn same_as_exact(ctx: &Context, t: DType, pts: &[(u64, u64)], bad: &mut Vec<String>) -> Vec<Row> {
    let (a, b): (Vec<u64>, Vec<u64>) = pts.iter().copied().unzip();
    let mut rows = vec![];
    let show = |v: u64| format!("{v:#x}");
    for op in [
        BinaryOp::Add,
        BinaryOp::Subtract,
        BinaryOp::Multiply,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Equal,
        BinaryOp::NotEqual,
        BinaryOp::Less,
        BinaryOp::LessEqual,
        BinaryOp::Greater,
        BinaryOp::GreaterEqual,
        BinaryOp::LogicalAnd,
        BinaryOp::LogicalXor,
    ] {
        let out = if op.is_comparison() || op.is_logical() { DType::U8 } else { t };
        let (fast, exact) = binary_both(ctx, op, t, out, &a, &b);
        let differ = (0..a.len()).filter(|&i| fast[i] != exact[i]).count();
        for i in (0..a.len()).filter(|&i| fast[i] != exact[i]).take(4) {
            bad.push(format!("{t} {}({}, {}): {}, the exact path gives {}", op.name(), show(a[i]), show(b[i]), show(fast[i]), show(exact[i])));
        }
        rows.push(Row { name: format!("{} ({t})", op.name()), n: a.len(), max: if differ > 0 { f64::INFINITY } else { 0.0 }, mean: 0.0, differ });
    }
    for op in [UnaryOp::Negate, UnaryOp::Abs, UnaryOp::Sign, UnaryOp::Sqrt, UnaryOp::IsNan, UnaryOp::IsInfinity] {
        let out = if matches!(op, UnaryOp::IsNan | UnaryOp::IsInfinity) { DType::U8 } else { t };
        let x = up(ctx, t, &a);
        let fast = down(ctx, out, &ctx.unary_with(FloatMath::Fast, op, &x, out).expect("fast"));
        let exact = down(ctx, out, &ctx.unary(op, &x, out).expect("exact"));
        let differ = (0..a.len()).filter(|&i| fast[i] != exact[i]).count();
        for i in (0..a.len()).filter(|&i| fast[i] != exact[i]).take(4) {
            bad.push(format!("{t} {}({}): {}, the exact path gives {}", op.name(), show(a[i]), show(fast[i]), show(exact[i])));
        }
        rows.push(Row { name: format!("{} ({t})", op.name()), n: a.len(), max: if differ > 0 { f64::INFINITY } else { 0.0 }, mean: 0.0, differ });
    }
    rows
}

/// Division under :fast is faithful (within 1 ulp of the exact path's correctly rounded
/// quotient, and nearly always equal to it): ulp distance from the exact path in `t`; results
/// that are zero, Inf or NaN on either side must be the exact bits.
fn divide_row(ctx: &Context, t: DType, pts: &[(u64, u64)], bad: &mut Vec<String>) -> Row {
    let (a, b): (Vec<u64>, Vec<u64>) = pts.iter().copied().unzip();
    let (fast, exact) = binary_both(ctx, BinaryOp::Divide, t, t, &a, &b);
    let (value, ord) = (|b: u64| bits_to_f32(t, b), |b: u64| ord_bits(t, b));
    let (mut max, mut sum, mut differ) = (0.0f64, 0.0, 0);
    for i in 0..a.len() {
        let (g, w) = (value(fast[i]), value(exact[i]));
        let special = !g.is_finite() || !w.is_finite() || g == 0.0 || w == 0.0;
        let d = if special {
            if fast[i] != exact[i] {
                bad.push(format!("{t} divide({:#x}, {:#x}): {:#x}, the exact path gives {:#x}", a[i], b[i], fast[i], exact[i]));
            }
            0.0
        } else {
            (ord(fast[i]) - ord(exact[i])).unsigned_abs() as f64
        };
        differ += (fast[i] != exact[i]) as usize;
        max = max.max(d);
        sum += d;
    }
    Row { name: format!("divide ({t})"), n: a.len(), max, mean: sum / a.len() as f64, differ }
}

fn pairs(rng: &mut Rng, t: DType, n: usize) -> Vec<(u64, u64)> {
    let width = t.size() * 8;
    let mask = (1u64 << width) - 1;
    let sp: Vec<u64> = match t {
        DType::F32 => f32s(&specials()),
        _ => specials().iter().map(|&x| if t == DType::F16 { half::f16::from_f32(x).to_bits() as u64 } else { half::bf16::from_f32(x).to_bits() as u64 }).collect(),
    };
    let mut v = vec![];
    for &x in sp.iter().step_by(3) {
        for &y in sp.iter().step_by(5) {
            v.push((x, y));
        }
    }
    for _ in 0..n {
        let x = rng.next() & mask;
        // random partners, near partners (cancellation, results near subnormal) and subnormals
        let y = match rng.next() % 4 {
            0 => rng.next() & mask,
            1 => (x ^ (rng.next() & 0xFF)) & mask,
            2 => (x ^ (1u64 << (width - 1))) ^ (rng.next() & 0xF),
            _ => rng.next() & (mask >> 9) | (rng.next() & (1u64 << (width - 1))),
        };
        v.push((x, y));
    }
    v
}

#[test]
fn fast_f32_math_within_two_ulp() {
    let t0 = std::time::Instant::now();
    let (rows, bad) = exec::run(|| {
        let ctx = Context::global()?;
        let n: usize = std::env::var("MATH_ULP_POINTS").ok().and_then(|s| s.parse().ok()).unwrap_or(20000);
        let mut rng = Rng(0xf32f_a57e);
        let s = specials();
        let cat = |parts: Vec<Vec<f32>>| -> Vec<f32> { parts.into_iter().flatten().collect() };
        let mut bad = vec![];
        let mut rows = vec![];
        type RefFn = fn(Float) -> Float;
        let cases: Vec<(&str, UnaryOp, RefFn, Vec<f32>)> = vec![
            ("exp", UnaryOp::Exp, |x| x.exp(), cat(vec![s.clone(), rng.bits(n / 4), rng.uni(-104.0, 89.0, n / 2), rng.uni(-1.0, 1.0, n / 4)])),
            ("log", UnaryOp::Log, |x| x.ln(), cat(vec![s.clone(), rng.bits(n / 2), rng.uni(0.5, 2.0, n / 4), rng.uni(0.999, 1.001, n / 4)])),
            ("expm1", UnaryOp::Expm1, |x| x.exp_m1(), cat(vec![s.clone(), rng.bits(n / 4), rng.uni(-18.0, 89.0, n / 4), rng.uni(-1.0, 1.0, n / 4), rng.uni(-0.4, 0.4, n / 4)])),
            ("log1p", UnaryOp::Log1p, |x| x.ln_1p(), cat(vec![s.clone(), rng.bits(n / 4), rng.uni(-1.0, 1.0, n / 4), rng.uni(-1e-3, 1e-3, n / 4), rng.uni(1.0, 1e8, n / 4)])),
            ("tanh", UnaryOp::Tanh, |x| x.tanh(), cat(vec![s.clone(), rng.bits(n / 4), rng.uni(-10.0, 10.0, n / 2), rng.uni(-1.0, 1.0, n / 4)])),
            ("sigmoid", UnaryOp::Sigmoid, |x| Float::with_val(PREC, 1) / ((-x).exp() + 1u32), cat(vec![s.clone(), rng.bits(n / 4), rng.uni(-110.0, 30.0, n / 2), rng.uni(-2.0, 2.0, n / 4)])),
            ("erf", UnaryOp::Erf, |x| x.erf(), cat(vec![s.clone(), rng.bits(n / 4), rng.uni(-5.0, 5.0, n / 2), rng.uni(-1.0, 1.0, n / 4)])),
            ("sqrt", UnaryOp::Sqrt, |x| x.sqrt(), cat(vec![s.clone(), rng.bits(n / 2), rng.uni(0.0, 4.0, n / 2)])),
            ("rsqrt", UnaryOp::Rsqrt, |x| x.recip_sqrt(), cat(vec![s.clone(), rng.bits(n / 2), rng.uni(0.0, 4.0, n / 2)])),
        ];
        for (name, op, r, xs) in &cases {
            rows.push(accuracy(&ctx, name, *op, xs, r, &mut bad));
        }
        // pow: results in range, integer and negative bases, bases near 1 with huge exponents,
        // subnormal bases, special values
        let mut pp: Vec<(f32, f32)> = vec![];
        for _ in 0..n / 2 {
            let x = (rng.unit() * 40.0 - 20.0).exp();
            let y = (rng.unit() * 2.0 - 1.0) * 88.0 / x.ln().abs().max(1e-3);
            pp.push((x as f32, y as f32));
        }
        for _ in 0..n / 8 {
            pp.push(((rng.unit() * 4.0) as f32, ((rng.unit() * 2.0 - 1.0) * 20.0) as f32));
            pp.push((-(rng.unit() * 10.0).floor() as f32, ((rng.unit() * 2.0 - 1.0) * 30.0).floor() as f32));
            pp.push(((1.0 + (rng.unit() - 0.5) * 1e-4) as f32, ((rng.unit() * 2.0 - 1.0) * 1e6) as f32));
            pp.push((f32::from_bits((rng.next() as u32) & 0x007F_FFFF), (rng.unit() * 1.5) as f32));
        }
        let sp: Vec<f32> = vec![0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1e30, 1e-45, -1e-45, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1.0000001, 0.99999994, 0.3, -7.5, 1e10, 1e-10, 16777216.0, 16777215.0, 8388609.0, 2e19];
        for &x in &sp {
            for &y in &sp {
                pp.push((x, y));
            }
        }
        rows.push(accuracy_pow(&ctx, &pp, &mut bad));
        // the correctly rounded or exact ops: the same bits as the exact path; division faithful
        for t in [DType::F32, DType::F16, DType::BF16] {
            let pts = pairs(&mut rng, t, n);
            rows.extend(same_as_exact(&ctx, t, &pts, &mut bad));
            rows.push(divide_row(&ctx, t, &pts, &mut bad));
        }
        for t in [DType::F16, DType::BF16] {
            for (name, op, r, _) in &cases {
                rows.push(accuracy_half(&ctx, t, name, *op, r, &mut bad));
            }
        }
        Ok((rows, bad))
    })
    .expect("engine");
    println!("\n:fast f32 math (math_f32.glsl) against MPFR, and against the exact path");
    println!("| op | points | max ulp | mean ulp | ≠ exact path |");
    println!("|---|---:|---:|---:|---:|");
    for r in &rows {
        println!("| {} | {} | {} | {:.4} | {} |", r.name, r.n, r.max, r.mean, r.differ);
    }
    println!("({:.1} s)", t0.elapsed().as_secs_f64());
    for b in bad.iter().take(20) {
        eprintln!("  {b}");
    }
    assert!(bad.is_empty(), "{} results differ from the exact path where they must not", bad.len());
    let limit = |r: &Row| if r.name.contains("(f16)") || r.name.contains("(bf16)") { 1.0 } else { 2.0 };
    let limit = |r: &Row| if r.name.starts_with("divide") { 1.0 } else { limit(r) };
    let over: Vec<&str> = rows.iter().filter(|r| r.max > limit(r)).map(|r| r.name.as_str()).collect();
    assert!(over.is_empty(), "beyond the bound: {over:?}");
}
