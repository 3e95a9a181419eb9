//! Accuracy of our f64 math library (src/kernels/math_f64.glsl) on the device, against MPFR
//! (through `rug`): every function's result must be within 1 ulp of the correctly rounded f64
//! result, for dense ranges, points near special ones (0, ±1, multiples of π, overflow and
//! underflow thresholds, subnormals, huge arguments) and special values (NaN, ±Inf, ±0 with their
//! signs). f32: the engine evaluates f32 math in f64 and rounds once; the result is compared with
//! the correctly rounded f32 result (double rounding can make rare 1-ulp differences: they are
//! counted and printed, and must stay within 1 f32 ulp).
//!
//! Prints a table (function, points, max ulp, mean ulp; f32 points, max ulp, mismatches).
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json \
//!      cargo test -p nx_vulkan_engine --test math_ulp -- --nocapture
//! MATH_ULP_POINTS=n scales the dense ranges (default 20000 points per function).

use nx_vulkan_engine::*;
use rug::ops::Pow;
use rug::Float;

/// Working precision of the reference (then rounded once to f64 / f32 by MPFR).
const PREC: u32 = 192;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / 9007199254740992.0)
    }
    fn uni(&mut self, a: f64, b: f64, n: usize) -> Vec<f64> {
        (0..n).map(|_| a + (b - a) * self.unit()).collect()
    }
    /// Random bit patterns of doubles with magnitude in [lo, hi] (covers subnormals evenly).
    fn bits(&mut self, lo: f64, hi: f64, n: usize, both: bool) -> Vec<f64> {
        let (a, b) = (lo.to_bits(), hi.to_bits());
        (0..n)
            .map(|i| {
                let x = f64::from_bits(a + self.next() % (b - a + 1));
                if both && i % 2 == 1 {
                    -x
                } else {
                    x
                }
            })
            .collect()
    }
}

/// Values around `x`: x itself and its neighbours up to `k` ulps away.
fn around(x: f64, k: i64) -> Vec<f64> {
    (-k..=k)
        .map(|d| {
            let b = x.to_bits() as i64 + if x >= 0.0 { d } else { -d };
            f64::from_bits(b as u64)
        })
        .filter(|v| v.is_finite())
        .collect()
}

fn specials() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        f64::MIN_POSITIVE,
        -f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        1e-300,
        -1e-300,
        1e300,
        -1e300,
        1e22,
        6381956970095103.0 * 2f64.powi(797), // the double closest to a multiple of pi/2
        -6381956970095103.0 * 2f64.powi(797),
        5.0e-324,
        -5.0e-324,
        1e-310,
        -1e-310,
        2.2250738585072009e-308,
    ];
    for x in [
        std::f64::consts::PI,
        std::f64::consts::FRAC_PI_2,
        std::f64::consts::FRAC_PI_4,
        3.0 * std::f64::consts::FRAC_PI_2,
        2.0 * std::f64::consts::PI,
        100.0 * std::f64::consts::PI,
        1e6 * std::f64::consts::PI,
        709.782712893384,   // exp overflow
        710.4758600739439,  // sinh/cosh overflow
        -708.3964185322641, // exp: last normal result
        -745.1332191019411, // exp: last nonzero result
        -745.1332191019412,
        -744.44007192138122,
        26.55,   // erfc: subnormal results
        27.2262, // erfc underflow
        5.92,    // erf reaches 1
        22.0,
        40.0,
        0.34657359027997264, // ln2 / 2
        0.6931471805599453,
        1.0,
        0.5,
        1e-8,
        1e-16,
        1.4142135623730951,
    ] {
        v.extend(around(x, 3));
        v.extend(around(-x, 3));
    }
    v
}

fn ord64(x: f64) -> i64 {
    let b = x.to_bits() as i64;
    if b < 0 {
        i64::MIN - b
    } else {
        b
    }
}
fn ord32(x: f32) -> i64 {
    let b = x.to_bits() as i32 as i64;
    if b < 0 {
        i32::MIN as i64 - b
    } else {
        b
    }
}

/// Distance in ulps; NaN must match NaN, signed zeros must match, Inf must match exactly.
fn dist64(got: f64, want: f64) -> f64 {
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if got.is_infinite() || want.is_infinite() {
        return if got == want { 0.0 } else { f64::INFINITY };
    }
    if got == 0.0 && want == 0.0 && got.to_bits() != want.to_bits() {
        return f64::INFINITY;
    }
    (ord64(got) - ord64(want)).unsigned_abs() as f64
}
fn dist32(got: f32, want: f32) -> f64 {
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if got == 0.0 && want == 0.0 && got.to_bits() != want.to_bits() {
        return f64::INFINITY;
    }
    // ±Inf next to ±MAX counts as one ulp (the ordering of the bits does that)
    (ord32(got) - ord32(want)).unsigned_abs() as f64
}

fn fl(x: f64) -> Float {
    Float::with_val(PREC, x)
}

fn sigmoid_ref(x: f64) -> Float {
    let e = (-fl(x)).exp();
    Float::with_val(PREC, 1) / (e + 1u32)
}

/// erf_inv by Newton's method at PREC bits from `guess` (the device's answer, within an ulp when
/// the device is right); the residual is checked so that a wrong guess cannot make a wrong reference.
fn erf_inv_ref(x: f64, guess: f64) -> Float {
    if x.is_nan() || x.abs() > 1.0 {
        return Float::with_val(PREC, rug::float::Special::Nan);
    }
    if x.abs() == 1.0 || x == 0.0 {
        return if x == 0.0 { fl(x) } else { fl(x * f64::INFINITY) };
    }
    let xf = fl(x);
    let start = if guess.is_finite() && guess != 0.0 && (guess > 0.0) == (x > 0.0) { guess } else { x };
    let mut y = fl(start);
    let c = Float::with_val(PREC, rug::float::Constant::Pi).sqrt().recip() * 2u32;
    for _ in 0..60 {
        let e = y.clone().erf() - &xf;
        let d = (-(y.clone().square())).exp() * &c;
        let step = e / d;
        y -= &step;
        let small = step.is_zero() || (step.clone().abs() / y.clone().abs()).to_f64() < 1e-55;
        if small {
            break;
        }
    }
    y
}

/// With MATH_ULP_DUMP=dir, writes each function's inputs and device results (f64 then f32, raw
/// little-endian) to dir/<name>.bin: compare two devices' files to find where bits differ.
fn dump(name: &str, parts: &[&[u64]]) {
    if let Ok(dir) = std::env::var("MATH_ULP_DUMP") {
        let bytes: Vec<u8> = parts.iter().flat_map(|p| p.iter().flat_map(|w| w.to_le_bytes())).collect();
        std::fs::write(format!("{dir}/{name}.bin"), bytes).expect("dump");
    }
}

/// FNV-1a over the result bits: equal digests on two devices mean bit-identical results.
fn digest(words: impl Iterator<Item = u64>) -> u64 {
    let mut h = 0xcbf29ce484222325u64;
    for w in words {
        for i in 0..8 {
            h ^= (w >> (8 * i)) & 0xff;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}

struct Row {
    name: String,
    digest: u64,
    n: usize,
    max: f64,
    mean: f64,
    n32: usize,
    max32: f64,
    mism32: usize,
}

fn upload_f64(ctx: &Context, xs: &[f64]) -> Tensor {
    let bytes: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    ctx.upload(DType::F64, &[xs.len()], &bytes).expect("upload f64")
}
fn upload_f32(ctx: &Context, xs: &[f32]) -> Tensor {
    let bytes: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    ctx.upload(DType::F32, &[xs.len()], &bytes).expect("upload f32")
}
fn down_f64(ctx: &Context, t: &Tensor) -> Vec<f64> {
    ctx.download(t).expect("download").chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
}
fn down_f32(ctx: &Context, t: &Tensor) -> Vec<f32> {
    ctx.download(t).expect("download").chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Compares device results with references; prints the first few failures.
fn score64(name: &str, args: &[String], got: &[f64], want: &[f64]) -> (f64, f64) {
    let (mut max, mut sum, mut shown) = (0.0f64, 0.0f64, 0);
    for i in 0..got.len() {
        let d = dist64(got[i], want[i]);
        if d > 1.0 && shown < 6 {
            eprintln!("  {name}({}) = {:e} want {:e} ({d} ulp)", args[i], got[i], want[i]);
            shown += 1;
        }
        max = max.max(d);
        sum += if d.is_finite() { d } else { 1e6 };
    }
    (max, sum / got.len() as f64)
}
fn score32(name: &str, args: &[String], got: &[f32], want: &[f32]) -> (f64, usize) {
    let (mut max, mut mism, mut shown) = (0.0f64, 0, 0);
    for i in 0..got.len() {
        let d = dist32(got[i], want[i]);
        if d > 0.0 {
            mism += 1;
            if shown < 3 && d > 1.0 {
                eprintln!("  f32 {name}({}) = {:e} want {:e} ({d} ulp)", args[i], got[i], want[i]);
                shown += 1;
            }
        }
        max = max.max(d);
    }
    (max, mism)
}

type RefFn = fn(Float) -> Float;

fn unary_case(ctx: &Context, name: &str, op: UnaryOp, xs: &[f64], r: &dyn Fn(f64, f64) -> Float) -> Row {
    let x = upload_f64(ctx, xs);
    let got = down_f64(ctx, &ctx.unary(op, &x, DType::F64).expect("unary f64"));
    let want: Vec<f64> = xs.iter().zip(&got).map(|(&a, &g)| r(a, g).to_f64()).collect();
    let args: Vec<String> = xs.iter().map(|a| format!("{a:e}")).collect();
    let (max, mean) = score64(name, &args, &got, &want);
    // f32: the same points rounded to f32 (plus the f32 specials they produce)
    let xs32: Vec<f32> = xs.iter().map(|&a| a as f32).collect();
    let x32 = upload_f32(ctx, &xs32);
    let got32 = down_f32(ctx, &ctx.unary(op, &x32, DType::F32).expect("unary f32"));
    let want32: Vec<f32> = xs32.iter().zip(&got32).map(|(&a, &g)| r(a as f64, g as f64).to_f32()).collect();
    let args32: Vec<String> = xs32.iter().map(|a| format!("{a:e}")).collect();
    let (max32, mism32) = score32(name, &args32, &got32, &want32);
    let digest = digest(got.iter().map(|v| v.to_bits()).chain(got32.iter().map(|v| v.to_bits() as u64)));
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
    let g32: Vec<u64> = got32.iter().map(|v| v.to_bits() as u64).collect();
    dump(name, &[&bits(xs), &bits(&got), &g32]);
    Row { name: name.into(), digest, n: xs.len(), max, mean, n32: xs32.len(), max32, mism32 }
}

fn binary_case(ctx: &Context, name: &str, op: BinaryOp, ps: &[(f64, f64)], r: &dyn Fn(f64, f64) -> Float) -> Row {
    let a: Vec<f64> = ps.iter().map(|p| p.0).collect();
    let b: Vec<f64> = ps.iter().map(|p| p.1).collect();
    let (ta, tb) = (upload_f64(ctx, &a), upload_f64(ctx, &b));
    let got = down_f64(ctx, &ctx.binary(op, &ta, &tb, DType::F64).expect("binary f64"));
    let want: Vec<f64> = ps.iter().map(|&(x, y)| r(x, y).to_f64()).collect();
    let args: Vec<String> = ps.iter().map(|(x, y)| format!("{x:e}, {y:e}")).collect();
    let (max, mean) = score64(name, &args, &got, &want);
    let a32: Vec<f32> = a.iter().map(|&v| v as f32).collect();
    let b32: Vec<f32> = b.iter().map(|&v| v as f32).collect();
    let (ta, tb) = (upload_f32(ctx, &a32), upload_f32(ctx, &b32));
    let got32 = down_f32(ctx, &ctx.binary(op, &ta, &tb, DType::F32).expect("binary f32"));
    let want32: Vec<f32> = a32.iter().zip(&b32).map(|(&x, &y)| r(x as f64, y as f64).to_f32()).collect();
    let args32: Vec<String> = a32.iter().zip(&b32).map(|(x, y)| format!("{x:e}, {y:e}")).collect();
    let (max32, mism32) = score32(name, &args32, &got32, &want32);
    let digest = digest(got.iter().map(|v| v.to_bits()).chain(got32.iter().map(|v| v.to_bits() as u64)));
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
    let g32: Vec<u64> = got32.iter().map(|v| v.to_bits() as u64).collect();
    dump(name, &[&bits(&a), &bits(&b), &bits(&got), &g32]);
    Row { name: name.into(), digest, n: ps.len(), max, mean, n32: a32.len(), max32, mism32 }
}

fn cat(parts: Vec<Vec<f64>>) -> Vec<f64> {
    parts.into_iter().flatten().collect()
}

fn run_all(ctx: &Context) -> Vec<Row> {
    let n: usize = std::env::var("MATH_ULP_POINTS").ok().and_then(|s| s.parse().ok()).unwrap_or(20000);
    let mut rng = Rng(0x5eed_1234_abcd_0042);
    let s = specials();
    let mut rows = vec![];

    let simple: Vec<(&str, UnaryOp, RefFn, Vec<f64>)> = vec![
        ("exp", UnaryOp::Exp, |x| x.exp(), cat(vec![s.clone(), rng.uni(-746.0, 710.0, n / 2), rng.uni(-2.0, 2.0, n / 4), rng.bits(1e-320, 1.0, n / 4, true)])),
        ("expm1", UnaryOp::Expm1, |x| x.exp_m1(), cat(vec![s.clone(), rng.uni(-40.0, 710.0, n / 4), rng.uni(-1.0, 1.0, n / 4), rng.bits(1e-320, 2.0, n / 2, true)])),
        ("log", UnaryOp::Log, |x| x.ln(), cat(vec![s.clone(), rng.bits(4.9e-324, f64::MAX, n / 2, false), rng.uni(0.5, 2.0, n / 4), rng.uni(0.999, 1.001, n / 4)])),
        ("log1p", UnaryOp::Log1p, |x| x.ln_1p(), cat(vec![s.clone(), rng.uni(-1.0, 1.0, n / 4), rng.bits(4.9e-324, f64::MAX, n / 4, false), rng.bits(4.9e-324, 1.0, n / 2, true)])),
        ("sin", UnaryOp::Sin, |x| x.sin(), cat(vec![s.clone(), rng.uni(-10.0, 10.0, n / 4), rng.uni(-1e6, 1e6, n / 4), rng.bits(4.9e-324, f64::MAX, n / 2, true)])),
        ("cos", UnaryOp::Cos, |x| x.cos(), cat(vec![s.clone(), rng.uni(-10.0, 10.0, n / 4), rng.uni(-1e6, 1e6, n / 4), rng.bits(4.9e-324, f64::MAX, n / 2, true)])),
        ("tan", UnaryOp::Tan, |x| x.tan(), cat(vec![s.clone(), rng.uni(-10.0, 10.0, n / 4), rng.uni(-1e6, 1e6, n / 4), rng.bits(4.9e-324, f64::MAX, n / 2, true)])),
        ("asin", UnaryOp::Asin, |x| x.asin(), cat(vec![s.clone(), rng.uni(-1.0, 1.0, n / 2), rng.bits(4.9e-324, 1.0, n / 4, true), rng.uni(0.999, 1.0, n / 8), rng.uni(-1.0, -0.999, n / 8)])),
        ("acos", UnaryOp::Acos, |x| x.acos(), cat(vec![s.clone(), rng.uni(-1.0, 1.0, n / 2), rng.bits(4.9e-324, 1.0, n / 4, true), rng.uni(0.999, 1.0, n / 8), rng.uni(-1.0, -0.999, n / 8)])),
        ("atan", UnaryOp::Atan, |x| x.atan(), cat(vec![s.clone(), rng.uni(-5.0, 5.0, n / 2), rng.bits(4.9e-324, f64::MAX, n / 2, true)])),
        ("sinh", UnaryOp::Sinh, |x| x.sinh(), cat(vec![s.clone(), rng.uni(-30.0, 30.0, n / 2), rng.uni(-711.0, 711.0, n / 4), rng.bits(4.9e-324, 1.0, n / 4, true)])),
        ("cosh", UnaryOp::Cosh, |x| x.cosh(), cat(vec![s.clone(), rng.uni(-30.0, 30.0, n / 2), rng.uni(-711.0, 711.0, n / 4), rng.bits(4.9e-324, 1.0, n / 4, true)])),
        ("tanh", UnaryOp::Tanh, |x| x.tanh(), cat(vec![s.clone(), rng.uni(-25.0, 25.0, n / 2), rng.bits(4.9e-324, 1.0, n / 2, true)])),
        ("asinh", UnaryOp::Asinh, |x| x.asinh(), cat(vec![s.clone(), rng.uni(-10.0, 10.0, n / 2), rng.bits(4.9e-324, f64::MAX, n / 2, true)])),
        ("acosh", UnaryOp::Acosh, |x| x.acosh(), cat(vec![s.clone(), rng.uni(1.0, 10.0, n / 2), rng.bits(1.0, f64::MAX, n / 4, false), rng.uni(1.0, 1.001, n / 4)])),
        ("atanh", UnaryOp::Atanh, |x| x.atanh(), cat(vec![s.clone(), rng.uni(-1.0, 1.0, n / 2), rng.bits(4.9e-324, 1.0, n / 4, true), rng.uni(0.999, 1.0, n / 8), rng.uni(-1.0, -0.999, n / 8)])),
        ("erf", UnaryOp::Erf, |x| x.erf(), cat(vec![s.clone(), rng.uni(-6.0, 6.0, n / 2), rng.bits(4.9e-324, 1.0, n / 4, true), rng.uni(-30.0, 30.0, n / 4)])),
        ("erfc", UnaryOp::Erfc, |x| x.erfc(), cat(vec![s.clone(), rng.uni(-6.0, 28.0, n / 2), rng.bits(4.9e-324, 1.0, n / 4, true), rng.uni(26.0, 27.3, n / 4)])),
        ("cbrt", UnaryOp::Cbrt, |x| x.cbrt(), cat(vec![s.clone(), rng.bits(4.9e-324, f64::MAX, n / 2, true), rng.uni(-10.0, 10.0, n / 2)])),
        ("rsqrt", UnaryOp::Rsqrt, |x| x.recip_sqrt(), cat(vec![s.clone(), rng.bits(4.9e-324, f64::MAX, n / 2, false), rng.uni(0.0, 10.0, n / 2)])),
    ];
    for (name, op, f, xs) in simple {
        rows.push(unary_case(ctx, name, op, &xs, &|x, _| f(fl(x))));
    }
    let xs = cat(vec![s.clone(), rng.uni(-750.0, 50.0, n / 2), rng.uni(-40.0, 40.0, n / 2)]);
    rows.push(unary_case(ctx, "sigmoid", UnaryOp::Sigmoid, &xs, &|x, _| sigmoid_ref(x)));
    let xs = cat(vec![
        s.clone(),
        rng.uni(-1.0, 1.0, n / 2),
        rng.bits(4.9e-324, 1.0, n / 4, true),
        rng.bits(0.999999, 1.0, n / 8, true),
        rng.uni(0.5, 1.0, n / 8),
    ]);
    rows.push(unary_case(ctx, "erf_inv", UnaryOp::ErfInv, &xs, &|x, g| erf_inv_ref(x, g)));

    // pow: magnitudes that keep x^y in range, integers, negative bases, near-1 bases, specials
    let mut ps: Vec<(f64, f64)> = vec![];
    for _ in 0..n / 2 {
        let x = (rng.unit() * 60.0 - 30.0).exp();
        let y = (rng.unit() * 2.0 - 1.0) * 745.0 / x.ln().abs();
        ps.push((x, y));
    }
    for _ in 0..n / 8 {
        ps.push((rng.unit() * 4.0, (rng.unit() * 2.0 - 1.0) * 20.0));
        ps.push((-(rng.unit() * 10.0).floor(), ((rng.unit() * 2.0 - 1.0) * 30.0).floor()));
        ps.push((1.0 + (rng.unit() - 0.5) * 1e-6, (rng.unit() * 2.0 - 1.0) * 1e9));
        ps.push(((rng.unit() * 1400.0 - 700.0).exp(), rng.unit() * 3.0 - 1.5));
    }
    let sp = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1e300, 5e-324, -5e-324, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1.0 + f64::EPSILON, 1.0 - f64::EPSILON / 2.0, 0.3, -7.5, 1e20, 1e-20];
    for &x in &sp {
        for &y in &sp {
            ps.push((x, y));
        }
    }
    rows.push(binary_case(ctx, "pow", BinaryOp::Pow, &ps, &|x, y| fl(x).pow(&fl(y))));

    let mut ps: Vec<(f64, f64)> = vec![];
    for _ in 0..n / 2 {
        ps.push(((rng.unit() * 2.0 - 1.0) * 10.0, (rng.unit() * 2.0 - 1.0) * 10.0));
    }
    let big = rng.bits(4.9e-324, f64::MAX, n / 2, true);
    for i in 0..n / 4 {
        ps.push((big[2 * i], big[2 * i + 1]));
    }
    for &x in &sp {
        for &y in &sp {
            ps.push((x, y));
        }
    }
    rows.push(binary_case(ctx, "atan2", BinaryOp::Atan2, &ps, &|y, x| fl(y).atan2(&fl(x))));
    rows
}

#[test]
fn math_f64_ulp() {
    let t0 = std::time::Instant::now();
    let rows = exec::run(|| {
        let ctx = Context::global()?;
        Ok(run_all(&ctx))
    })
    .expect("engine");
    let dev = exec::run(|| Ok(Context::global()?.caps.name.clone())).unwrap_or_default();
    println!("\nmath_f64 ulp table on {dev}");
    println!("| function | f64 points | max ulp | mean ulp | f32 points | f32 max ulp | f32 ≠ CR32 | result digest |");
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for r in &rows {
        println!("| {} | {} | {} | {:.4} | {} | {} | {} | {:016x} |", r.name, r.n, r.max, r.mean, r.n32, r.max32, r.mism32, r.digest);
    }
    println!("({:.1} s)", t0.elapsed().as_secs_f64());
    let bad: Vec<&str> = rows.iter().filter(|r| r.max > 1.0 || r.max32 > 1.0).map(|r| r.name.as_str()).collect();
    assert!(bad.is_empty(), "functions beyond 1 ulp: {bad:?}");
}
