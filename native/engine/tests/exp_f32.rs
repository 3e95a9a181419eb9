//! Nx.exp with an f32 result runs `m_exp_f32` (math_f64.glsl): a shorter polynomial whose f32
//! rounding is taken only where it cannot differ from the full f64 `m_exp` rounded to f32, the
//! latter deciding near rounding boundaries and outside (-87, 88.5). Its bits must be exactly
//! those of the full path, which the engine still computes for an f64 result: every test here
//! compares exp(x) written as f32 with exp(x) written as f64 and rounded to f32 on the host
//! (to nearest even, NaN canonical). Inputs: f32 bit patterns strided over the whole range, the
//! branch edges and special values, f32 inputs whose exponential lies near an f32 midpoint
//! (the fallback's cases: found by the ignored exhaustive test), and s32 inputs. The f64
//! library's own accuracy is tests/math_ulp.rs's.
//!
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test --release -p nx_vulkan_engine --test exp_f32
//! Every f32 (a few minutes on lavapipe): add `-- --ignored --nocapture`.

mod common;
use common::*;
use nx_vulkan_engine::*;

/// f64 bits rounded to f32 as the engine rounds a computed node (BinaryBackend's, NaN canonical).
fn to_f32_bits(d: u64) -> u64 {
    write(F32, N::F(f64::from_bits(d)))
}

/// exp of `xs` (f32 bits) through the f32-result kernel and through the f64 one, downloaded:
/// (f32 result, f64 result rounded to f32).
fn both_paths(ctx: &Context, xs: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let x = upload(ctx, F32, &[xs.len()], xs);
    let fast = download(ctx, &ctx.unary(UnaryOp::Exp, &x, F32).unwrap());
    let full = download(ctx, &ctx.unary(UnaryOp::Exp, &x, F64).unwrap()).into_iter().map(to_f32_bits).collect();
    (fast, full)
}

fn compare(f: &mut Failures, xs: &[u64], fast: &[u64], full: &[u64], what: &str) {
    for i in 0..xs.len() {
        f.check(|| format!("exp {what} of {} (bits {:#010x}): f32 path {} full path {}", show(F32, xs[i]), xs[i], show(F32, fast[i]), show(F32, full[i])), fast[i], full[i]);
    }
}

/// Near the edges of the cheap path's range, and special values.
fn edges() -> Vec<u64> {
    let mut v: Vec<u64> = specials(F32);
    for edge in [-87.0f32, 88.5, -87.33654, 88.72284, -103.97208, -0.0, 0.0, 1e-30, -1e-30, 0.3465736, -0.3465736] {
        let b = edge.to_bits() as i64;
        v.extend((-40i64..=40).map(|d| (b + d) as u32 as u64));
    }
    v
}

/// f32 inputs whose exponential lies within 2^7 f64 ulps of an f32 midpoint, inside the window
/// where the cheap path defers to m_exp (their results come from the fallback): the first 48
/// `every_f32_input` printed (small x, where exp(x) = 1 + x + ... sits next to 1's
/// half-ulp points). That run (lavapipe, stop 37): all 2^32 f32 inputs the same bits by both
/// paths, and none differing from glibc's exp rounded to f32.
const NEAR_MIDPOINT: &[u32] = &[
    0x337ffff8, 0x337ffff9, 0x337ffffa, 0x337ffffb, 0x337ffffc, 0x337ffffd, 0x337ffffe, 0x337fffff,
    0x33800000, 0x33800001, 0x33800002, 0x33800003, 0x343ffffd, 0x343ffffe, 0x343fffff, 0x34400000,
    0x349ffffe, 0x349fffff, 0x34dffffc, 0x34dffffd, 0x350ffffd, 0x352ffffc, 0x354ffffb, 0x356ffff9,
    0x35a7fff9, 0x35c7fff6, 0x35e7fff3, 0x35f7fff1, 0x361bfff4, 0x3653ffea, 0x3673ffe3, 0x367bffe1,
    0x3695ffea, 0x36b1ffe1, 0x36f9ffc3, 0x36fdffc1, 0x3734ffc0, 0x3758ffa4, 0x377cff83, 0x377eff81,
    0x37937fab, 0x37a57f95, 0x37fe7f03, 0x37ff7f01, 0x383a3ef1, 0x38643e69, 0x387e3e07, 0x38ad9e29,
];

#[test]
fn exp_f32_matches_the_full_path() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        // 2^22 bit patterns strided over all of them (odd stride: every exponent, both signs)
        let strided: Vec<u64> = (0..1u64 << 22).map(|i| (i * 1023 + 7) & 0xFFFF_FFFF).collect();
        let (fast, full) = both_paths(ctx, &strided);
        compare(&mut f, &strided, &fast, &full, "strided");
        let e = edges();
        let (fast, full) = both_paths(ctx, &e);
        compare(&mut f, &e, &fast, &full, "edge");
        let near: Vec<u64> = NEAR_MIDPOINT.iter().map(|&b| b as u64).collect();
        let (fast, full) = both_paths(ctx, &near);
        compare(&mut f, &near, &fast, &full, "near a midpoint");
        // s32 inputs (exp of an integer is f32 in Nx): exact in double, same kernel path
        let ints: Vec<u64> = (-120i32..=120).chain([i32::MIN, i32::MAX, 88, 89, -87, -88]).map(|i| i as u32 as u64).collect();
        let xi = upload(ctx, S32, &[ints.len()], &ints);
        let fast = download(ctx, &ctx.unary(UnaryOp::Exp, &xi, F32).unwrap());
        for (i, &v) in ints.iter().enumerate() {
            let want = to_f32_bits((v as u32 as i32 as f64).exp().to_bits());
            // glibc's exp is correctly rounded for these (checked against the f64 path too)
            f.check(|| format!("exp of s32 {}: got {} want {}", v as u32 as i32, show(F32, fast[i]), show(F32, want)), fast[i], want);
        }
        f.finish("exp_f32_matches_the_full_path");
    });
}

/// Every f32 bit pattern, in chunks: the f32-result kernel against the full path, and both
/// against glibc (Rust's f64::exp, what Nx.BinaryBackend calls) — the latter only counted: the
/// f64 library is within 1 ulp, not correctly rounded, and double rounding may then differ.
/// Prints the inputs whose exponential lies near an f32 midpoint (for `NEAR_MIDPOINT`).
#[test]
#[ignore]
fn every_f32_input() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let chunk = 1u64 << 24;
        let (mut near, mut differ_from_libm) = (vec![], 0u64);
        for c in 0..(1u64 << 32) / chunk {
            let xs: Vec<u64> = (c * chunk..(c + 1) * chunk).collect();
            let (fast, full) = both_paths(ctx, &xs);
            compare(&mut f, &xs, &fast, &full, "every");
            for (i, &x) in xs.iter().enumerate() {
                let v = f32::from_bits(x as u32) as f64;
                let libm = v.exp();
                if to_f32_bits(libm.to_bits()) != fast[i] {
                    differ_from_libm += 1;
                }
                let off = (libm.to_bits() & 0x1FFF_FFFF) as i64 - 0x1000_0000;
                if v > -87.0 && v < 88.5 && off.abs() <= 0x80 && near.len() < 48 {
                    near.push(x as u32);
                }
            }
        }
        println!("every f32: differ from libm in {differ_from_libm}; near a midpoint: {near:#010x?}");
        f.finish("every_f32_input");
    });
}
