//! A plain CPU model of Nx.BinaryBackend (Nx 0.7.2) element semantics, shared by the
//! elementwise and layout tests. Values are read from stored bits into `N` (an exact integer or
//! an f64), computed with naive code, and written back with `write` (number_to_binary).
#![allow(dead_code)]

use half::f16;
use nx_vulkan_engine::*;
use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;

pub use DType::*;

pub mod llm_fixtures;

pub fn ctx() -> Arc<Context> {
    Context::global().expect("device")
}

/// Runs `f` on an engine thread (deep stack for lavapipe/glslang); a failed assertion inside
/// comes back as a panic here with its message.
pub fn on_engine<T: Send + 'static>(f: impl FnOnce(&Context) -> T + Send + 'static) -> T {
    let _shared = GATE.read().unwrap_or_else(|e| e.into_inner());
    run_engine(f)
}

/// As `on_engine`, with no other test of this binary running (for assertions on the engine's
/// global counters).
pub fn on_engine_alone<T: Send + 'static>(f: impl FnOnce(&Context) -> T + Send + 'static) -> T {
    let _alone = GATE.write().unwrap_or_else(|e| e.into_inner());
    run_engine(f)
}

/// Where the fetch scripts keep models: `NX_VULKAN_MODEL_CACHE`, else ~/.cache/nx_vulkan/models.
pub fn model_cache() -> PathBuf {
    std::env::var_os("NX_VULKAN_MODEL_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/nx_vulkan/models")))
        .expect("neither NX_VULKAN_MODEL_CACHE nor HOME is set")
}

static GATE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn run_engine<T: Send + 'static>(f: impl FnOnce(&Context) -> T + Send + 'static) -> T {
    match exec::run(move || Ok(f(&ctx()))) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}

/// A number as BinaryBackend holds it: an exact integer or a float (NaN/±Inf included).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum N {
    I(i128),
    F(f64),
}

impl N {
    pub fn f(self) -> f64 {
        match self {
            N::I(i) => i as f64,
            N::F(f) => f,
        }
    }
    pub fn is_nan(self) -> bool {
        matches!(self, N::F(f) if f.is_nan())
    }
    /// Nx's truthiness: 0 and -0.0 are false, everything else (NaN included) true.
    pub fn truthy(self) -> bool {
        match self {
            N::I(i) => i != 0,
            N::F(f) => f != 0.0 || f.is_nan(),
        }
    }
}

pub fn mask(t: DType) -> u64 {
    if t.bits() == 64 {
        u64::MAX
    } else {
        (1u64 << t.bits()) - 1
    }
}

pub fn canonical_nan(t: DType) -> u64 {
    match t {
        F16 => 0x7E00,
        BF16 => 0x7FC0,
        F32 => 0x7FC0_0000,
        F64 => 0x7FF8_0000_0000_0000,
        _ => unreachable!(),
    }
}

/// Stored bits -> value.
pub fn read(t: DType, bits: u64) -> N {
    let b = bits & mask(t);
    match t {
        U8 | U16 | U32 | U64 => N::I(b as i128),
        S8 => N::I(b as u8 as i8 as i128),
        S16 => N::I(b as u16 as i16 as i128),
        S32 => N::I(b as u32 as i32 as i128),
        S64 => N::I(b as i64 as i128),
        F16 => N::F(f16::from_bits(b as u16).to_f64()),
        BF16 => N::F(f32::from_bits((b as u32) << 16) as f64),
        F32 => N::F(f32::from_bits(b as u32) as f64),
        F64 => N::F(f64::from_bits(b)),
        C64 | C128 => unreachable!("complex values are read in tests/complex.rs"),
    }
}

/// Nx.Type.max_finite_binary / min_finite_binary as integers (note Nx 0.7.2's s16 entries,
/// 32677 and -32678, reproduced deliberately).
pub fn int_limits(t: DType) -> (i128, i128) {
    match t {
        U8 => (0, 255),
        U16 => (0, 65535),
        U32 => (0, u32::MAX as i128),
        U64 => (0, u64::MAX as i128),
        S8 => (-128, 127),
        S16 => (-32678, 32677),
        S32 => (i32::MIN as i128, i32::MAX as i128),
        S64 => (i64::MIN as i128, i64::MAX as i128),
        _ => unreachable!(),
    }
}

/// Float -> integer value as Nx.as_type does it: NaN 0, ±Inf the type's finite extremes,
/// otherwise truncate and wrap.
pub fn float_to_int_bits(t: DType, f: f64) -> u64 {
    let (lo, hi) = int_limits(t);
    let v: i128 = if f.is_nan() {
        0
    } else if f == f64::INFINITY {
        hi
    } else if f == f64::NEG_INFINITY {
        lo
    } else if f.abs() >= 2f64.powi(120) {
        0 // a multiple of 2^64
    } else {
        f.trunc() as i128
    };
    (v as u64) & mask(t)
}

/// number_to_binary: value -> stored bits of `t` (rounding once; NaN canonical).
pub fn write(t: DType, v: N) -> u64 {
    if t.is_float() {
        let f = v.f();
        if f.is_nan() {
            return canonical_nan(t);
        }
        match t {
            F64 => f.to_bits(),
            F32 => (f as f32).to_bits() as u64,
            F16 => f16::from_f64(f).to_bits() as u64,
            BF16 => ((f as f32).to_bits() >> 16) as u64,
            _ => unreachable!(),
        }
    } else {
        match v {
            N::I(i) => (i as u64) & mask(t),
            N::F(f) => float_to_int_bits(t, f),
        }
    }
}

/// Exact comparison (Erlang compares integers with floats exactly); None when a NaN is involved.
pub fn cmp(x: N, y: N) -> Option<Ordering> {
    match (x, y) {
        (N::I(a), N::I(b)) => Some(a.cmp(&b)),
        (N::F(a), N::F(b)) => a.partial_cmp(&b),
        (N::I(a), N::F(b)) => cmp_if(a, b),
        (N::F(a), N::I(b)) => cmp_if(b, a).map(Ordering::reverse),
    }
}

fn cmp_if(i: i128, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    if f == f64::INFINITY {
        return Some(Ordering::Less);
    }
    if f == f64::NEG_INFINITY {
        return Some(Ordering::Greater);
    }
    if f >= 2f64.powi(100) {
        return Some(Ordering::Less);
    }
    if f <= -(2f64.powi(100)) {
        return Some(Ordering::Greater);
    }
    let t = f.trunc();
    let ti = t as i128;
    match i.cmp(&ti) {
        Ordering::Equal => {
            let frac = f - t;
            Some(if frac > 0.0 { Ordering::Less } else if frac < 0.0 { Ordering::Greater } else { Ordering::Equal })
        }
        o => Some(o),
    }
}

pub fn b(v: bool) -> N {
    N::I(v as i128)
}

/// BinaryBackend's unary ops (non-transcendental), with the engine's rules where BinaryBackend
/// raises (see ops.glsl).
pub fn ref_unary(op: UnaryOp, bits_in: DType, x: N) -> N {
    use UnaryOp::*;
    match op {
        Negate => match x {
            N::I(i) => N::I(-i),
            N::F(f) => N::F(-f),
        },
        Abs => match x {
            N::I(i) => N::I(i.abs()),
            N::F(f) => N::F(if f.is_nan() { f } else if f < 0.0 { -f } else { f }),
        },
        Sign => match x {
            N::I(i) => N::I(i.signum()),
            // element_sign: `n < 0 -> -1; n > 0 -> 1; else n`, and the atoms :nan, :infinity and
            // :neg_infinity all compare greater than numbers in Erlang's term order.
            N::F(f) if f.is_nan() || f.is_infinite() => N::F(1.0),
            N::F(f) => N::F(if f < 0.0 { -1.0 } else if f > 0.0 { 1.0 } else { f }),
        },
        Ceil => match x {
            N::F(f) => N::F(f.ceil()),
            i => i,
        },
        Floor => match x {
            N::F(f) => N::F(f.floor()),
            i => i,
        },
        Round => match x {
            // :erlang.round returns an integer, so -0.4 and -0.0 become +0.0.
            N::F(f) if f.is_finite() => {
                let r = f.round();
                N::F(if r == 0.0 { 0.0 } else { r })
            }
            other => other, // NaN/±Inf: BinaryBackend raises; the engine passes them through
        },
        Sqrt => N::F(x.f().sqrt()),
        IsNan => b(x.is_nan()),
        IsInfinity => b(matches!(x, N::F(f) if f.is_infinite())),
        LogicalNot => b(!x.truthy()),
        BitwiseNot => match x {
            N::I(i) => N::I(!i),
            _ => unreachable!(),
        },
        CountLeadingZeros => {
            let v = (write(bits_in, x)) & mask(bits_in);
            N::I((v.leading_zeros() as i128) - (64 - bits_in.bits() as i128))
        }
        PopulationCount => {
            let v = write(bits_in, x) & mask(bits_in);
            N::I(v.count_ones() as i128)
        }
        _ => panic!("no reference for {op:?}"),
    }
}

fn fdiv(x: f64, y: f64) -> f64 {
    // Complex.divide's clauses, in order.
    let (xn, yn) = (!x.is_finite(), !y.is_finite());
    if xn && yn {
        return f64::NAN;
    }
    if xn && y >= 0.0 {
        return x; // includes y == -0.0: Inf / -0.0 is +Inf in BinaryBackend
    }
    if x == 0.0 && y == 0.0 {
        return f64::NAN;
    }
    if x.is_nan() || y.is_nan() {
        return f64::NAN;
    }
    if xn {
        return -x; // ±Inf / negative
    }
    if y.is_infinite() {
        return 0.0; // an integer 0 in Complex.divide: +0.0 whatever the signs
    }
    x / y // y == 0: BinaryBackend raises; the engine gives IEEE ±Inf
}

pub fn ref_binary(op: BinaryOp, x: N, y: N) -> N {
    use BinaryOp::*;
    let ints = matches!((x, y), (N::I(_), N::I(_)));
    match op {
        Add | Subtract | Multiply if ints => {
            let (a, b) = match (x, y) {
                (N::I(a), N::I(b)) => (a, b),
                _ => unreachable!(),
            };
            N::I(match op {
                Add => a + b,
                Subtract => a - b,
                _ => a.wrapping_mul(b),
            })
        }
        Add => N::F(x.f() + y.f()),
        Subtract => N::F(x.f() - y.f()),
        Multiply => N::F(x.f() * y.f()),
        Divide => N::F(fdiv(x.f(), y.f())),
        Remainder => match (x, y) {
            (N::I(_), N::I(0)) => N::I(0),
            (N::I(a), N::I(b)) => N::I(a % b),
            _ => N::F(x.f() % y.f()),
        },
        Quotient => match (x, y) {
            (N::I(_), N::I(0)) => N::I(0),
            (N::I(a), N::I(b)) => N::I(a / b),
            _ => unreachable!(),
        },
        Pow => match (x, y) {
            (N::I(a), N::I(e)) => {
                if e < 0 {
                    N::I(if a == 1 { 1 } else if a == -1 { if e % 2 == 0 { 1 } else { -1 } } else { 0 })
                } else {
                    let (mut base, mut e, mut r) = (a as u64, e as u128, 1u64);
                    while e > 0 {
                        if e & 1 == 1 {
                            r = r.wrapping_mul(base);
                        }
                        base = base.wrapping_mul(base);
                        e >>= 1;
                    }
                    N::I(r as i128)
                }
            }
            _ => panic!("float pow is transcendental"),
        },
        Max | Min => {
            if x.is_nan() || y.is_nan() {
                return N::F(f64::NAN);
            }
            let (inf, ninf) = (N::F(f64::INFINITY), N::F(f64::NEG_INFINITY));
            if op == Max {
                if x == inf || y == inf {
                    return inf;
                }
                if x == ninf {
                    return y;
                }
                if y == ninf {
                    return x;
                }
                // Erlang max/2: the first argument when they compare equal
                if cmp(y, x) == Some(Ordering::Greater) { y } else { x }
            } else {
                if x == inf {
                    return y;
                }
                if y == inf {
                    return x;
                }
                if x == ninf || y == ninf {
                    return ninf;
                }
                if cmp(y, x) == Some(Ordering::Less) { y } else { x }
            }
        }
        BitwiseAnd | BitwiseOr | BitwiseXor | LeftShift | RightShift => {
            let (a, s) = match (x, y) {
                (N::I(a), N::I(b)) => (a, b),
                _ => unreachable!(),
            };
            N::I(match op {
                BitwiseAnd => a & s,
                BitwiseOr => a | s,
                BitwiseXor => a ^ s,
                // Negative amounts (BinaryBackend raises) shift the other way.
                LeftShift if s >= 0 => shl(a, s),
                LeftShift => shr(a, -s),
                RightShift if s >= 0 => shr(a, s),
                _ => shl(a, -s),
            })
        }
        Equal => b(cmp(x, y) == Some(Ordering::Equal)),
        NotEqual => b(cmp(x, y) != Some(Ordering::Equal)),
        Greater => b(cmp(x, y) == Some(Ordering::Greater)),
        Less => b(cmp(x, y) == Some(Ordering::Less)),
        GreaterEqual => b(matches!(cmp(x, y), Some(Ordering::Greater | Ordering::Equal))),
        LessEqual => b(matches!(cmp(x, y), Some(Ordering::Less | Ordering::Equal))),
        LogicalAnd => b(x.truthy() && y.truthy()),
        LogicalOr => b(x.truthy() || y.truthy()),
        LogicalXor => b(x.truthy() != y.truthy()),
        Atan2 => panic!("transcendental"),
    }
}

fn shl(a: i128, s: i128) -> i128 {
    if s >= 64 {
        0
    } else {
        ((a as u64) << s) as i128
    }
}
fn shr(a: i128, s: i128) -> i128 {
    if s >= 127 {
        if a < 0 { -1 } else { 0 }
    } else {
        a >> s
    }
}

/// Nx.clip's BinaryBackend loop: `t = x > lo ? x : lo; t < hi ? t : hi`.
pub fn ref_clip(x: N, lo: N, hi: N) -> N {
    let t = if cmp(x, lo) == Some(Ordering::Greater) { x } else { lo };
    if cmp(t, hi) == Some(Ordering::Less) { t } else { hi }
}

// ---- data ----

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }
}

/// Special values of `t`, as stored bits.
pub fn specials(t: DType) -> Vec<u64> {
    let mut v = vec![];
    if t.is_float() {
        for f in [
            0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -7.0, 0.1, 100.0, 255.0, 256.0, 65504.0, 65520.0,
            1e10, -1e10, 2147483648.0, -2147483649.0, 9.3e18, -9.3e18, 1.8446744073709552e19, 1e30, 1e300, -1e300,
            1e-300, 5e-324, 1e-40, f64::INFINITY, f64::NEG_INFINITY, f64::NAN,
        ] {
            v.push(write(t, N::F(f)));
        }
        let (m, e) = match t {
            F16 => (10, 5),
            BF16 => (7, 8),
            F32 => (23, 8),
            _ => (52, 11),
        };
        let sign = 1u64 << (m + e);
        let expmax = ((1u64 << e) - 1) << m;
        v.extend([
            1,                        // smallest subnormal
            sign | 1,                 // its negative
            (1 << m) - 1,             // largest subnormal
            1 << m,                   // smallest normal
            expmax - 1,               // largest finite
            sign | (expmax - 1),      // most negative finite
            sign | expmax | (1 << (m - 1)), // negative quiet NaN
            expmax | 1,               // signalling NaN
            expmax | (1 << (m - 1)) | 3, // quiet NaN with payload
        ]);
    } else {
        for i in [
            0i128, 1, -1, 2, -2, 3, 7, -7, 8, 31, 32, 63, 64, 100, -100, 127, 128, -128, -129, 255, 256, 32767, 32768,
            65535, i32::MAX as i128, i32::MIN as i128, u32::MAX as i128, (1 << 53) + 1, i64::MAX as i128,
            i64::MIN as i128, u64::MAX as i128, 0x5555_5555_5555_5555,
        ] {
            v.push(write(t, N::I(i)));
        }
    }
    v
}

/// `n` values of `t`: random bit patterns, small and "nice" values, and specials.
pub fn random_values(t: DType, n: usize, rng: &mut Rng) -> Vec<u64> {
    let sp = specials(t);
    (0..n)
        .map(|_| match rng.below(8) {
            0 => sp[rng.below(sp.len() as u64) as usize],
            1 | 2 => rng.next() & mask(t),
            3 | 4 if t.is_float() => write(t, N::F(rng.range(-300, 300) as f64 * 0.5)),
            _ if t.is_float() => {
                let m = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 + 1.0;
                let e = rng.range(-40, 40) as i32;
                let s = if rng.below(2) == 0 { 1.0 } else { -1.0 };
                write(t, N::F(s * m * 2f64.powi(e)))
            }
            _ => write(t, N::I(rng.range(-300, 300) as i128)),
        })
        .collect()
}

pub fn to_bytes(t: DType, bits: &[u64]) -> Vec<u8> {
    let w = t.size();
    bits.iter().flat_map(|x| x.to_le_bytes()[..w].to_vec()).collect()
}

pub fn from_bytes(t: DType, bytes: &[u8]) -> Vec<u64> {
    let w = t.size();
    bytes
        .chunks(w)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..w].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect()
}

pub fn upload(ctx: &Context, t: DType, shape: &[usize], bits: &[u64]) -> Tensor {
    ctx.upload(t, shape, &to_bytes(t, bits)).expect("upload")
}

pub fn download(ctx: &Context, x: &Tensor) -> Vec<u64> {
    from_bytes(x.dtype(), &ctx.download(x).expect("download"))
}

pub fn show(t: DType, bits: u64) -> String {
    format!("{:#x}={:?}", bits, read(t, bits))
}

/// Collects mismatches; panics with the first few when dropped via `finish`.
#[derive(Default)]
pub struct Failures {
    pub lines: Vec<String>,
    pub count: usize,
    pub checked: usize,
}

impl Failures {
    pub fn check(&mut self, what: impl FnOnce() -> String, got: u64, want: u64) {
        self.checked += 1;
        if got != want {
            self.count += 1;
            if self.lines.len() < 60 {
                self.lines.push(format!("{}: {got:#x}, expected {want:#x}", what()));
            }
        }
    }
    pub fn finish(self, name: &str) {
        eprintln!("{name}: {} values checked, {} mismatches", self.checked, self.count);
        if self.count > 0 {
            panic!("{name}: {} of {} values differ; first ones:\n{}", self.count, self.checked, self.lines.join("\n"));
        }
    }
}

/// Row-major element index -> flat offset in a tensor of `shape` read through `strides`/`offset`.
pub fn strided_index(shape: &[usize], strides: &[isize], offset: isize, flat: usize) -> usize {
    let mut rest = flat;
    let mut idx = offset;
    for d in (0..shape.len()).rev() {
        let c = rest % shape[d];
        rest /= shape[d];
        idx += c as isize * strides[d];
    }
    idx as usize
}

pub fn coords(shape: &[usize], mut flat: usize) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = flat % shape[d];
        flat /= shape[d];
    }
    c
}

pub fn flat_of(shape: &[usize], c: &[usize]) -> usize {
    let mut f = 0;
    for d in 0..shape.len() {
        f = f * shape[d] + c[d];
    }
    f
}
