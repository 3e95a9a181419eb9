//! Nx.exp, Nx.expm1, Nx.log, Nx.tanh, Nx.sigmoid and Nx.erf with an f32 result run `m_exp_f32`,
//! `m_expm1_f32`, `m_log_f32`, `m_tanh_f32`, `m_sigmoid_f32` and `m_erf_f32` (math_f64.glsl): cheaper
//! plain-double evaluations whose f32 rounding is taken only where it cannot differ from the
//! full f64 function rounded to f32, the latter deciding near rounding boundaries and outside
//! each path's range (a bf16 result takes the same path, then the node's bf16 rounding).
//! Their bits must be exactly those of the full path, which the engine still computes for an
//! f64 result: every test here compares op(x) written as f32 (or bf16) with op(x) written as
//! f64 and rounded on the host (to nearest even, NaN canonical). Inputs (every bf16, and): f32 bit patterns strided over the whole range, the branch
//! edges and special values, f32 inputs whose result lies near an f32 midpoint (the fallback's
//! cases: found by the ignored exhaustive test), and s32 inputs. The f64 library's own
//! accuracy is tests/math_ulp.rs's.
//!
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test --release -p nx_vulkan_engine --test unary_f32
//! Every f32 (a few minutes per op on lavapipe): add `-- --ignored --nocapture`
//! (`NX_VULKAN_EVERY_F32=tanh` limits it to one op).

mod common;
use common::*;
use nx_vulkan_engine::*;

/// f64 bits rounded to f32 as the engine rounds a computed node (BinaryBackend's, NaN canonical).
fn to_f32_bits(d: u64) -> u64 {
    write(F32, N::F(f64::from_bits(d)))
}

/// `op` of `xs` (f32 bits) through the f32-result kernel and through the f64 one, downloaded:
/// (f32 result, f64 result rounded to f32).
fn both_paths(ctx: &Context, op: UnaryOp, xs: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let x = upload(ctx, F32, &[xs.len()], xs);
    let fast = download(ctx, &ctx.unary(op, &x, F32).unwrap());
    (fast, full_path(ctx, op, &x))
}

/// `op` of `x` through the f64-result kernel, rounded to f32 on the host.
fn full_path(ctx: &Context, op: UnaryOp, x: &Tensor) -> Vec<u64> {
    download(ctx, &ctx.unary(op, x, F64).unwrap()).into_iter().map(to_f32_bits).collect()
}

fn compare(f: &mut Failures, op: UnaryOp, xs: &[u64], fast: &[u64], full: &[u64], what: &str) {
    for i in 0..xs.len() {
        f.check(|| format!("{op:?} {what} of {} (bits {:#010x}): f32 path {} full path {}", show(F32, xs[i]), xs[i], show(F32, fast[i]), show(F32, full[i])), fast[i], full[i]);
    }
}

/// 81 f32 bit patterns around each of `points`, and the special values.
fn around(points: &[f32]) -> Vec<u64> {
    let mut v: Vec<u64> = specials(F32);
    for p in points {
        let b = p.to_bits() as i64;
        v.extend((-40i64..=40).map(|d| (b + d) as u32 as u64));
    }
    v
}

/// Each path's branch edges (range limits, where k changes, tiny and large inputs), both signs.
fn edges(op: UnaryOp) -> Vec<u64> {
    let points: Vec<f32> = match op {
        UnaryOp::Exp => vec![-87.0, 88.5, -87.33654, 88.72284, -103.97208, -0.0, 0.0, 1e-30, -1e-30, 0.3465736, -0.3465736],
        UnaryOp::Tanh => vec![9.5, 9.01, 9.0109, 0.1732868, 0.5198604, 7.52316e-37, 1.1754944e-38, 1e-30, 3.0e-8, 2.4414062e-4, 0.55, 22.0],
        UnaryOp::Expm1 => vec![-17.0, -17.33, 88.5, 88.72284, 0.3465736, 1.0397208, 7.52316e-37, 1.1754944e-38, 1e-30, 3.0e-8, 44.0, 40.0],
        UnaryOp::Log => vec![1.0, 1.4142135, 0.70710677, 1.1754944e-38, 3.4028235e38, 2.0, 0.5, 2.7182817, 1e-30, 1e30, 1.0000001, 0.99999994, 5.0e-39],
        UnaryOp::Erf => vec![4.0, 3.92, 3.9199, 1.0, 0.5, 0.75, 1.875, 2.25, 3.5, 7.52316e-37, 1.1754944e-38, 1e-30, 3.7252903e-9, 6.0],
        _ => vec![18.0, 17.33, 17.328679, -87.0, -87.33654, -88.72284, -103.0, 0.3465736, 1e-30, 5.9604645e-8, 40.0, -746.0],
    };
    let mut all: Vec<f32> = points.clone();
    all.extend(points.iter().map(|p| -p));
    around(&all)
}

/// Inputs whose result lies near an f32 midpoint, inside the window where the cheap path defers
/// to the full function (their results come from the fallback): the first 48 `every_f32_input`
/// printed per op. That run (lavapipe): all 2^32 f32 inputs the same bits by both paths.
fn near_midpoint(op: UnaryOp) -> &'static [u32] {
    match op {
        UnaryOp::Exp => NEAR_MIDPOINT_EXP,
        UnaryOp::Tanh => NEAR_MIDPOINT_TANH,
        UnaryOp::Log => NEAR_MIDPOINT_LOG,
        UnaryOp::Expm1 => NEAR_MIDPOINT_EXPM1,
        UnaryOp::Erf => NEAR_MIDPOINT_ERF,
        _ => NEAR_MIDPOINT_SIGMOID,
    }
}

/// exp (stop 37's exhaustive run: none differing from glibc's exp rounded to f32 either):
/// small x, where exp(x) = 1 + x + ... sits next to 1's half-ulp points.
const NEAR_MIDPOINT_EXP: &[u32] = &[
    0x337ffff8, 0x337ffff9, 0x337ffffa, 0x337ffffb, 0x337ffffc, 0x337ffffd, 0x337ffffe, 0x337fffff,
    0x33800000, 0x33800001, 0x33800002, 0x33800003, 0x343ffffd, 0x343ffffe, 0x343fffff, 0x34400000,
    0x349ffffe, 0x349fffff, 0x34dffffc, 0x34dffffd, 0x350ffffd, 0x352ffffc, 0x354ffffb, 0x356ffff9,
    0x35a7fff9, 0x35c7fff6, 0x35e7fff3, 0x35f7fff1, 0x361bfff4, 0x3653ffea, 0x3673ffe3, 0x367bffe1,
    0x3695ffea, 0x36b1ffe1, 0x36f9ffc3, 0x36fdffc1, 0x3734ffc0, 0x3758ffa4, 0x377cff83, 0x377eff81,
    0x37937fab, 0x37a57f95, 0x37fe7f03, 0x37ff7f01, 0x383a3ef1, 0x38643e69, 0x387e3e07, 0x38ad9e29,
];

/// expm1 (stop 39's exhaustive run: none differing from glibc's expm1 rounded to f32 either).
const NEAR_MIDPOINT_EXPM1: &[u32] = &[
    0x337ffffc, 0x337ffffd, 0x337ffffe, 0x337fffff, 0x33b504f1, 0x33b504f2, 0x33b504f3, 0x33b504f4,
    0x33b504f5, 0x34000000, 0x34000001, 0x345db3d6, 0x345db3d7, 0x347fffff, 0x349cc470, 0x34ca62c1,
    0x34ef774f, 0x34ffffff, 0x350f1bbc, 0x352953fc, 0x35544393, 0x3566c158, 0x3577def3, 0x357ffffd,
    0x3587c3b5, 0x359617e1, 0x35a32b29, 0x35af456c, 0x35c542de, 0x35d908d5, 0x35f3b465, 0x362646dd,
    0x36322b1b, 0x364ce65e, 0x368d4ede, 0x36a1978a, 0x36b66d8b, 0x36ee64f4, 0x3766330b, 0x379153a9,
    0x37923475, 0x37ab34f7, 0x37b1ceea, 0x37b61385, 0x381c271e, 0x3851fd1d, 0x385b3bae, 0x389e7dac,
];

/// log (stop 39's exhaustive run: none differing from glibc's log rounded to f32 either).
const NEAR_MIDPOINT_LOG: &[u32] = &[
    0x00a82679, 0x00dfe9c0, 0x01265067, 0x0187fc28, 0x0189d238, 0x01b5b6ff, 0x01c2aa2a, 0x01f100d0,
    0x022ae487, 0x0233a37e, 0x0252f7cc, 0x02537745, 0x02a28c29, 0x02ae0dec, 0x02c7a933, 0x02ff713c,
    0x0312f9d3, 0x031c2829, 0x039656e7, 0x03b0ffa6, 0x03b10057, 0x03cc5ec7, 0x03d2f29f, 0x03d427af,
    0x03f22eec, 0x040b0c25, 0x04294560, 0x04366d72, 0x044e8fb7, 0x045b3d7e, 0x0468abae, 0x047d188c,
    0x047ee6e7, 0x04d056a6, 0x04ebac6b, 0x04f442ca, 0x053c8e9b, 0x05814364, 0x05c0ed9c, 0x05ca6664,
    0x05eee8e6, 0x05f1f6c7, 0x06175575, 0x064cb44b, 0x066c06e8, 0x06878568, 0x0694c6fa, 0x06e230ed,
];

/// tanh (stop 39's exhaustive run: none differing from glibc's tanh rounded to f32 either).
const NEAR_MIDPOINT_TANH: &[u32] = &[
    0x39b89ba1, 0x39b89ba2, 0x39b89ba3, 0x39b89ba4, 0x3a27ba3b, 0x3a46dce7, 0x3a5e773a, 0x3abc6065,
    0x3ac37de2, 0x3ad058bd, 0x3adbc904, 0x3af41fd8, 0x3afc9f57, 0x3b2f8394, 0x3b80d407, 0x3bab6e65,
    0x3bb5ecff, 0x3bc11b0b, 0x3bc8b605, 0x3be46e2b, 0x3c0eb4b4, 0x3c15f90e, 0x3c4e34b0, 0x3c5a35d5,
    0x3c96ae2e, 0x3ca1e990, 0x3cc854ca, 0x3cd41b91, 0x3d2cd0ca, 0x3d35a6ac, 0x3d56023a, 0x3d592ba5,
    0x3d7c3055, 0x3da6889b, 0x3da99442, 0x3dc95db7, 0x3ddca6fc, 0x3dee483b, 0x3e150cd4, 0x3e3044f2,
    0x3e6cd3e1, 0x3e82a780, 0x3e99e4bb, 0x3eb018d6, 0x3ebf2e81, 0x3ec7f3c6, 0x3eecff89, 0x3eee0566,
];

/// sigmoid (stop 39's exhaustive run; against BinaryBackend's formula 1 / (1 + exp(-x)) in
/// glibc's f64, whose two extra roundings move 20 of the 2^32 f32 results, the full path's
/// too: the engine rounds the exact sigmoid).
const NEAR_MIDPOINT_SIGMOID: &[u32] = &[
    0x33fffff8, 0x33fffff9, 0x33fffffa, 0x33fffffb, 0x33fffffc, 0x33fffffd, 0x33fffffe, 0x33ffffff,
    0x34000000, 0x34000001, 0x34000002, 0x34000003, 0x34000004, 0x34bffffe, 0x34bfffff, 0x34c00000,
    0x34c00001, 0x34c00002, 0x351fffff, 0x35200000, 0x35200001, 0x355fffff, 0x35600000, 0x35600001,
    0x35900000, 0x35b00000, 0x35d00000, 0x35f00000, 0x36080000, 0x36180000, 0x36280000, 0x36380000,
    0x36480000, 0x36580000, 0x36680000, 0x36780000, 0x36840000, 0x368c0000, 0x36940000, 0x369c0000,
    0x36a40000, 0x36ac0000, 0x36b40000, 0x36bc0000, 0x36c40000, 0x36cc0000, 0x36d40000, 0x36dc0000,
];

/// erf (stop 39's exhaustive run: none differing from glibc's erf rounded to f32 either).
const NEAR_MIDPOINT_ERF: &[u32] = &[
    0x03aa320c, 0x03aea3d2, 0x03b31598, 0x04214e80, 0x0425c046, 0x042a320c, 0x042ea3d2, 0x04331598,
    0x04a14e80, 0x04a5c046, 0x04aa320c, 0x04aea3d2, 0x04b31598, 0x05214e80, 0x0525c046, 0x052a320c,
    0x052ea3d2, 0x05331598, 0x05a14e80, 0x05a5c046, 0x05aa320c, 0x05aea3d2, 0x05b31598, 0x06214e80,
    0x0625c046, 0x062a320c, 0x062ea3d2, 0x06331598, 0x06a14e80, 0x06a5c046, 0x06aa320c, 0x06aea3d2,
    0x06b31598, 0x07214e80, 0x0725c046, 0x072a320c, 0x072ea3d2, 0x07331598, 0x07a14e80, 0x07a5c046,
    0x07aa320c, 0x07aea3d2, 0x07b31598, 0x08214e80, 0x0825c046, 0x082a320c, 0x082ea3d2, 0x08331598,
];

fn matches_the_full_path(op: UnaryOp) {
    on_engine(move |ctx| {
        let mut f = Failures::default();
        // 2^22 bit patterns strided over all of them (odd stride: every exponent, both signs)
        let strided: Vec<u64> = (0..1u64 << 22).map(|i| (i * 1023 + 7) & 0xFFFF_FFFF).collect();
        let (fast, full) = both_paths(ctx, op, &strided);
        compare(&mut f, op, &strided, &fast, &full, "strided");
        let e = edges(op);
        let (fast, full) = both_paths(ctx, op, &e);
        compare(&mut f, op, &e, &fast, &full, "edge");
        let near: Vec<u64> = near_midpoint(op).iter().map(|&b| b as u64).collect();
        let (fast, full) = both_paths(ctx, op, &near);
        compare(&mut f, op, &near, &fast, &full, "near a midpoint");
        // s32 inputs (the op of an integer is f32 in Nx): exact in double, same kernel path
        let ints: Vec<u64> = (-120i32..=120).chain([i32::MIN, i32::MAX, 88, 89, -87, -88]).map(|i| i as u32 as u64).collect();
        let xi = upload(ctx, S32, &[ints.len()], &ints);
        let fast = download(ctx, &ctx.unary(op, &xi, F32).unwrap());
        let xf: Vec<u64> = ints.iter().map(|&v| (v as u32 as i32 as f32).to_bits() as u64).collect();
        let full = full_path(ctx, op, &upload(ctx, F32, &[xf.len()], &xf));
        for (i, &v) in ints.iter().enumerate() {
            // (|i| < 2^24 is exact in f32; beyond it both paths see the f32 value's neighbourhood
            // only through the full path, so compare those with glibc's f64 result instead)
            let want = if (v as u32 as i32).unsigned_abs() < 1 << 24 { full[i] } else { to_f32_bits(libm(op, v as u32 as i32 as f64).to_bits()) };
            f.check(|| format!("{op:?} of s32 {}: got {} want {}", v as u32 as i32, show(F32, fast[i]), show(F32, want)), fast[i], want);
        }
        f.finish(&format!("{op:?}_f32_matches_the_full_path"));
    });
}

extern "C" {
    /// glibc's erf (Rust's std has none on stable).
    fn erf(x: f64) -> f64;
}

/// What Nx.BinaryBackend computes in f64 (glibc through Erlang's :math).
fn libm(op: UnaryOp, v: f64) -> f64 {
    match op {
        UnaryOp::Exp => v.exp(),
        UnaryOp::Tanh => v.tanh(),
        UnaryOp::Log => v.ln(),
        UnaryOp::Expm1 => v.exp_m1(),
        // SAFETY: a pure libm function of one double
        UnaryOp::Erf => unsafe { erf(v) },
        _ => 1.0 / (1.0 + (-v).exp()),
    }
}

/// A bf16 result (Nx: the op of a bf16 tensor) takes the f32 path and the node's bf16
/// rounding, which depends on the f32 value alone (Nx rounds to f32, then keeps the top 16
/// bits): every bf16 input, each function, against the full path's f64 result rounded to bf16
/// on the host.
#[test]
fn every_bf16_input_gets_the_full_paths_bits() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let xs: Vec<u64> = (0..1u64 << 16).collect();
        let x = upload(ctx, BF16, &[xs.len()], &xs);
        for op in [UnaryOp::Exp, UnaryOp::Expm1, UnaryOp::Log, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Erf] {
            let got = download(ctx, &ctx.unary(op, &x, BF16).unwrap());
            let full = download(ctx, &ctx.unary(op, &x, F64).unwrap());
            for i in 0..xs.len() {
                let want = write(BF16, N::F(f64::from_bits(full[i])));
                f.check(|| format!("{op:?} of bf16 {} (bits {:#06x}): bf16 result {} want {}", show(BF16, xs[i]), xs[i], show(BF16, got[i]), show(BF16, want)), got[i], want);
            }
        }
        f.finish("every_bf16_input_gets_the_full_paths_bits");
    });
}

#[test]
fn exp_f32_matches_the_full_path() {
    matches_the_full_path(UnaryOp::Exp);
}

#[test]
fn expm1_f32_matches_the_full_path() {
    matches_the_full_path(UnaryOp::Expm1);
}

#[test]
fn log_f32_matches_the_full_path() {
    matches_the_full_path(UnaryOp::Log);
}

#[test]
fn tanh_f32_matches_the_full_path() {
    matches_the_full_path(UnaryOp::Tanh);
}

#[test]
fn sigmoid_f32_matches_the_full_path() {
    matches_the_full_path(UnaryOp::Sigmoid);
}

#[test]
fn erf_f32_matches_the_full_path() {
    matches_the_full_path(UnaryOp::Erf);
}

/// Every f32 bit pattern, in chunks: the f32-result kernel against the full path, and both
/// against glibc's f64 function (what Nx.BinaryBackend calls) — the latter only counted: the
/// f64 library is within 1 ulp, not correctly rounded, and double rounding may then differ.
/// Prints the inputs whose result lies near an f32 midpoint (for `near_midpoint`).
#[test]
#[ignore]
fn every_f32_input() {
    let only = std::env::var("NX_VULKAN_EVERY_F32").ok();
    for (op, lo, hi) in [(UnaryOp::Exp, -87.0, 88.5), (UnaryOp::Expm1, -17.0, 88.5), (UnaryOp::Log, 1.1754944e-38, 3.5e38), (UnaryOp::Tanh, 0.0, 9.5), (UnaryOp::Sigmoid, -87.0, 18.0), (UnaryOp::Erf, 0.0, 4.0)] {
        if only.as_deref().is_some_and(|o| o != op.name()) {
            continue;
        }
        on_engine(move |ctx| {
            let mut f = Failures::default();
            let chunk = 1u64 << 24;
            let (mut near, mut differ_from_libm) = (vec![], 0u64);
            for c in 0..(1u64 << 32) / chunk {
                let xs: Vec<u64> = (c * chunk..(c + 1) * chunk).collect();
                let (fast, full) = both_paths(ctx, op, &xs);
                compare(&mut f, op, &xs, &fast, &full, "every");
                for (i, &x) in xs.iter().enumerate() {
                    let v = f32::from_bits(x as u32) as f64;
                    let reference = libm(op, v);
                    if to_f32_bits(reference.to_bits()) != fast[i] {
                        differ_from_libm += 1;
                    }
                    let off = (reference.abs().to_bits() & 0x1FFF_FFFF) as i64 - 0x1000_0000;
                    let inside = if matches!(op, UnaryOp::Tanh | UnaryOp::Erf) { v.abs() > 1e-36 && v.abs() < hi } else { v > lo && v < hi };
                    if inside && off.abs() <= 0x80 && near.len() < 48 {
                        near.push(x as u32);
                    }
                }
            }
            println!("{op:?}, every f32: differ from libm in {differ_from_libm}; near a midpoint: {near:#010x?}");
            f.finish(&format!("every_f32_input {op:?}"));
        });
    }
}
