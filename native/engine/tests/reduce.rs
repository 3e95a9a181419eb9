//! Reductions against plain CPU references (naive loops), per dtype, over views, odd and empty
//! sizes, special values, all three strategies, and reruns (bit-identical); float sums
//! bit-exact against a CPU model of the engine's fixed combination order at every strategy
//! switch and over 16 Mi elements.

use half::{bf16, f16};
use nx_vulkan_engine::reduce::{choose_strategy, split_len, ArgOp, ReduceOp, Strategy, TieBreak, SPLIT_GROUPS};
use nx_vulkan_engine::*;
use std::sync::Arc;

fn ctx() -> Arc<Context> {
    Context::global().expect("device")
}

/// A value as the reference computes it: floats in f64, integers exactly.
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

fn enc(t: DType, v: V) -> Vec<u8> {
    match t {
        DType::F32 => (v.f() as f32).to_le_bytes().to_vec(),
        DType::F64 => v.f().to_le_bytes().to_vec(),
        DType::F16 => f16::from_f64(v.f()).to_le_bytes().to_vec(),
        // Nx.BinaryBackend: round to f32, keep the top 16 bits.
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
            if matches!(t, DType::S8 | DType::S16 | DType::S32 | DType::S64) {
                V::I(((u << (128 - bits)) as i128) >> (128 - bits))
            } else {
                V::I(u as i128)
            }
        }
    }
}

/// Wraps/rounds a reference value to what type `t` stores.
fn store(t: DType, v: V) -> V {
    dec(t, &enc(t, v))
}

fn bytes(t: DType, vals: &[V]) -> Vec<u8> {
    vals.iter().flat_map(|v| enc(t, *v)).collect()
}

fn download(ctx: &Context, t: &Tensor) -> Vec<V> {
    let b = ctx.download(t).unwrap();
    b.chunks(t.dtype().size()).map(|c| dec(t.dtype(), c)).collect()
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

fn same(a: V, b: V) -> bool {
    match (a, b) {
        (V::F(x), V::F(y)) => (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// Deterministic test data: small integers (so float sums are exact in any order), with a
/// few fractions for floats.
fn data(t: DType, n: usize, seed: u64) -> Vec<V> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let r = (s >> 33) as i64;
            match t.kind_name() {
                'f' => V::F(((r % 17) - 8) as f64 * 0.5),
                's' => V::I(((r % 9) - 4) as i128),
                _ => V::I((r % 7) as i128),
            }
        })
        .collect()
}

trait KindName {
    fn kind_name(self) -> char;
}
impl KindName for DType {
    fn kind_name(self) -> char {
        if self.is_float() {
            'f'
        } else if matches!(self, DType::S8 | DType::S16 | DType::S32 | DType::S64) {
            's'
        } else {
            'u'
        }
    }
}

fn type_min(t: DType) -> V {
    match t.kind_name() {
        'f' => V::F(f64::NEG_INFINITY),
        's' => V::I(-(1i128 << (t.bits() - 1))),
        _ => V::I(0),
    }
}
fn type_max(t: DType) -> V {
    match t.kind_name() {
        'f' => V::F(f64::INFINITY),
        's' => V::I((1i128 << (t.bits() - 1)) - 1),
        _ => V::I((1i128 << t.bits()) - 1),
    }
}

/// Sequential reference over `vals` (the reduced elements in row-major order).
fn ref_reduce(op: ReduceOp, in_t: DType, out: DType, vals: &[V]) -> V {
    let r = match op {
        ReduceOp::Sum | ReduceOp::Product => {
            let sum = op == ReduceOp::Sum;
            if out.is_float() {
                let mut acc = if sum { 0.0 } else { 1.0 };
                for v in vals {
                    acc = if sum { acc + v.f() } else { acc * v.f() };
                }
                V::F(acc)
            } else {
                let mut acc: i128 = if sum { 0 } else { 1 };
                for v in vals {
                    // wrap to 64 bits each step, as the kernel does
                    let x = v.i();
                    acc = if sum { acc.wrapping_add(x) } else { acc.wrapping_mul(x) };
                    acc = acc as i64 as i128;
                }
                V::I(acc)
            }
        }
        ReduceOp::Max | ReduceOp::Min => {
            let max = op == ReduceOp::Max;
            let mut acc: Option<V> = None;
            for &v in vals {
                acc = Some(match acc {
                    None => v,
                    Some(a) => {
                        if in_t.is_float() {
                            let (x, y) = (a.f(), v.f());
                            if x.is_nan() {
                                a
                            } else if y.is_nan() || (max && y > x) || (!max && y < x) {
                                v
                            } else {
                                a
                            }
                        } else if (max && v.i() > a.i()) || (!max && v.i() < a.i()) {
                            v
                        } else {
                            a
                        }
                    }
                });
            }
            acc.unwrap_or(if max { type_min(in_t) } else { type_max(in_t) })
        }
        ReduceOp::All => V::I(vals.iter().all(|v| v.f() != 0.0 || v.f().is_nan()) as i128),
        ReduceOp::Any => V::I(vals.iter().any(|v| v.f() != 0.0 || v.f().is_nan()) as i128),
    };
    store(out, r)
}

/// Nx.BinaryBackend's scan: seed = first element; `gt(x, cur)` (or `x == cur` for :high) with
/// every comparison against NaN false, except that NaN == NaN (atoms) is a tie.
fn ref_arg(op: ArgOp, tie: TieBreak, vals: &[V]) -> V {
    let mut best: Option<(usize, V)> = None;
    for (i, &v) in vals.iter().enumerate() {
        let take = match best {
            None => true,
            Some((_, b)) => {
                let (x, y) = (b.f(), v.f());
                if x.is_nan() && y.is_nan() {
                    tie == TieBreak::High
                } else if x.is_nan() || y.is_nan() {
                    false
                } else if matches!((b, v), (V::I(p), V::I(q)) if p == q) || (b.is_float_v() && x == y) {
                    tie == TieBreak::High
                } else if op == ArgOp::ArgMax {
                    match (b, v) {
                        (V::I(p), V::I(q)) => q > p,
                        _ => y > x,
                    }
                } else {
                    match (b, v) {
                        (V::I(p), V::I(q)) => q < p,
                        _ => y < x,
                    }
                }
            }
        };
        if take {
            best = Some((i, v));
        }
    }
    V::I(best.map(|b| b.0).unwrap_or(0) as i128)
}

trait IsF {
    fn is_float_v(self) -> bool;
}
impl IsF for V {
    fn is_float_v(self) -> bool {
        matches!(self, V::F(_))
    }
}

/// Reference reduction of the logical row-major `vals` of `shape` over `axes`.
fn reference(shape: &[usize], axes: &[usize], vals: &[V], f: impl Fn(&[V]) -> V) -> Vec<V> {
    let rank = shape.len();
    let kept: Vec<usize> = (0..rank).filter(|d| !axes.contains(d)).collect();
    let red: Vec<usize> = (0..rank).filter(|d| axes.contains(d)).collect();
    let o_n: usize = kept.iter().map(|&d| shape[d]).product();
    let r_n: usize = red.iter().map(|&d| shape[d]).product();
    let strides: Vec<usize> = (0..rank).map(|d| shape[d + 1..].iter().product()).collect();
    let coords = |mut i: usize, dims: &[usize]| -> usize {
        let mut at = 0;
        for &d in dims.iter().rev() {
            at += (i % shape[d]) * strides[d];
            i /= shape[d];
        }
        at
    };
    (0..o_n)
        .map(|o| {
            let base = coords(o, &kept);
            let group: Vec<V> = (0..r_n).map(|r| vals[base + coords(r, &red)]).collect();
            f(&group)
        })
        .collect()
}

fn check(got: &[V], want: &[V], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(same(*g, *w), "{what}: at {i}: got {g:?}, want {w:?}");
    }
}

/// Nx's output type for sum/product.
fn sum_type(t: DType) -> DType {
    match t.kind_name() {
        'f' => t,
        's' => DType::S64,
        _ => DType::U64,
    }
}

fn run_reduce(ctx: &Context, op: ReduceOp, x: &Tensor, phys: &[V], axes: &[usize], out: DType) -> (Vec<V>, Vec<V>) {
    let t = ctx.reduce(op, x, axes, false, out).unwrap();
    let got = download(ctx, &t);
    let vals = logical(x, phys);
    let want = reference(x.shape(), axes, &vals, |g| ref_reduce(op, x.dtype(), out, g));
    (got, want)
}

#[test]
fn every_op_and_dtype_matches_the_reference() {
    let ctx = ctx();
    let shape = [7usize, 13];
    for &t in DType::ALL.iter() {
        let phys = data(t, 91, t as u64);
        let x = ctx.upload(t, &shape, &bytes(t, &phys)).unwrap();
        for op in [ReduceOp::Sum, ReduceOp::Product, ReduceOp::Max, ReduceOp::Min, ReduceOp::All, ReduceOp::Any] {
            let out = match op {
                ReduceOp::Sum | ReduceOp::Product => sum_type(t),
                ReduceOp::All | ReduceOp::Any => DType::U8,
                _ => t,
            };
            for axes in [&[1usize][..], &[0], &[0, 1]] {
                let before = ctx.stats().dispatches;
                let (got, want) = run_reduce(&ctx, op, &x, &phys, axes, out);
                assert!(ctx.stats().dispatches > before, "ran on the device");
                check(&got, &want, &format!("{op:?} {t} axes {axes:?}"));
            }
        }
    }
}

#[test]
fn narrow_outputs_wrap_and_round() {
    let ctx = ctx();
    // s8 sum into s8 wraps; u8 product into u8 wraps; f32 sum of f16 rounds once.
    let vals: Vec<V> = (0..50).map(|i| V::I(100 + i)).collect();
    let x = ctx.upload(DType::S16, &[50], &bytes(DType::S16, &vals)).unwrap();
    for out in [DType::S8, DType::U8, DType::S16, DType::U32] {
        let t = ctx.reduce(ReduceOp::Sum, &x, &[0], false, out).unwrap();
        check(&download(&ctx, &t), &[ref_reduce(ReduceOp::Sum, DType::S16, out, &vals)], &format!("sum into {out}"));
        let t = ctx.reduce(ReduceOp::Product, &x, &[0], false, out).unwrap();
        check(&download(&ctx, &t), &[ref_reduce(ReduceOp::Product, DType::S16, out, &vals)], &format!("product into {out}"));
    }
    // u64 sums wrap mod 2^64
    let big: Vec<V> = (0..5).map(|i| V::I((u64::MAX - i) as i128)).collect();
    let x = ctx.upload(DType::U64, &[5], &bytes(DType::U64, &big)).unwrap();
    let t = ctx.reduce(ReduceOp::Sum, &x, &[0], false, DType::U64).unwrap();
    let want = ((0..5u64).fold(0u64, |a, i| a.wrapping_add(u64::MAX - i))) as i128;
    check(&download(&ctx, &t), &[V::I(want)], "u64 wrap");
    // s64 extremes
    let ext = [V::I(i64::MIN as i128), V::I(i64::MAX as i128), V::I(-1)];
    let x = ctx.upload(DType::S64, &[3], &bytes(DType::S64, &ext)).unwrap();
    for op in [ReduceOp::Max, ReduceOp::Min, ReduceOp::Sum] {
        let t = ctx.reduce(op, &x, &[0], false, DType::S64).unwrap();
        check(&download(&ctx, &t), &[ref_reduce(op, DType::S64, DType::S64, &ext)], &format!("s64 {op:?}"));
    }
}

#[test]
fn float_sums_accumulate_in_f64_and_round_once() {
    let ctx = ctx();
    // 1 + many tiny values: an f32 accumulator would lose them all.
    let mut vals = vec![V::F(1.0)];
    vals.extend((0..200).map(|_| V::F(2f64.powi(-30))));
    for t in [DType::F32, DType::F16, DType::BF16] {
        let x = ctx.upload(t, &[vals.len()], &bytes(t, &vals)).unwrap();
        let phys = download(&ctx, &x);
        let got = download(&ctx, &ctx.reduce(ReduceOp::Sum, &x, &[0], false, t).unwrap());
        check(&got, &[ref_reduce(ReduceOp::Sum, t, t, &phys)], &format!("{t} sum"));
        let got = download(&ctx, &ctx.reduce(ReduceOp::Sum, &x, &[0], false, DType::F64).unwrap());
        let exact: f64 = phys.iter().map(|v| v.f()).sum();
        check(&got, &[V::F(exact)], &format!("{t} sum into f64"));
    }
    // f32 values with fractional bits: sequential f64 sum rounded once.
    let vals: Vec<V> = (0..200).map(|i| V::F(((i as f32) * 0.1f32 + 1.0 / 3.0) as f64)).collect();
    let x = ctx.upload(DType::F32, &[200], &bytes(DType::F32, &vals)).unwrap();
    let got = download(&ctx, &ctx.reduce(ReduceOp::Sum, &x, &[0], false, DType::F32).unwrap());
    check(&got, &[ref_reduce(ReduceOp::Sum, DType::F32, DType::F32, &vals)], "f32 sum");
    let got = download(&ctx, &ctx.reduce(ReduceOp::Product, &x.slice(&[1], &[20], &[1]).unwrap(), &[0], false, DType::F32).unwrap());
    check(&got, &[ref_reduce(ReduceOp::Product, DType::F32, DType::F32, &vals[1..21])], "f32 product");
}

#[test]
fn views_transposed_sliced_reversed_broadcast() {
    let ctx = ctx();
    for t in [DType::F32, DType::S32, DType::U8, DType::F64] {
        let phys = data(t, 6 * 5 * 4, 3);
        let base = ctx.upload(t, &[6, 5, 4], &bytes(t, &phys)).unwrap();
        let views = [
            base.transpose(&[2, 0, 1]).unwrap(),
            base.slice(&[1, 0, 1], &[3, 5, 2], &[2, 1, 2]).unwrap(),
            base.reverse(&[0, 2]).unwrap().transpose(&[1, 2, 0]).unwrap(),
            base.slice(&[0, 2, 0], &[6, 1, 4], &[1, 1, 1]).unwrap().broadcast(&[6, 3, 4], &[0, 1, 2]).unwrap(),
        ];
        for (vi, v) in views.iter().enumerate() {
            for axes in [&[0usize][..], &[2], &[0, 2], &[1, 0], &[0, 1, 2], &[]] {
                for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
                    let out = if op == ReduceOp::Sum { sum_type(t) } else { t };
                    let (got, want) = run_reduce(&ctx, op, v, &phys, axes, out);
                    check(&got, &want, &format!("{t} view {vi} {op:?} axes {axes:?}"));
                }
            }
        }
    }
}

#[test]
fn keep_axes_shapes() {
    let ctx = ctx();
    let x = ctx.upload(DType::F32, &[2, 3, 4], &bytes(DType::F32, &data(DType::F32, 24, 1))).unwrap();
    assert_eq!(ctx.reduce(ReduceOp::Sum, &x, &[1], true, DType::F32).unwrap().shape(), &[2, 1, 4]);
    assert_eq!(ctx.reduce(ReduceOp::Sum, &x, &[0, 2], false, DType::F32).unwrap().shape(), &[3]);
    assert_eq!(ctx.reduce(ReduceOp::Sum, &x, &[0, 1, 2], false, DType::F32).unwrap().shape(), &[] as &[usize]);
    assert_eq!(ctx.reduce(ReduceOp::Sum, &x, &[0, 1, 2], true, DType::F32).unwrap().shape(), &[1, 1, 1]);
    let a = ctx.arg_reduce(ArgOp::ArgMax, &x, Some(2), true, TieBreak::Low, DType::S64).unwrap();
    assert_eq!(a.shape(), &[2, 3, 1]);
    let a = ctx.arg_reduce(ArgOp::ArgMax, &x, None, false, TieBreak::Low, DType::S64).unwrap();
    assert_eq!(a.shape(), &[] as &[usize]);
    assert!(ctx.reduce(ReduceOp::Sum, &x, &[3], false, DType::F32).is_err());
    assert!(ctx.reduce(ReduceOp::Sum, &x, &[1, 1], false, DType::F32).is_err());
    assert!(ctx.arg_reduce(ArgOp::ArgMax, &x, Some(0), false, TieBreak::Low, DType::F32).is_err());
}

#[test]
fn empty_reductions_give_the_identity() {
    let ctx = ctx();
    for t in [DType::F32, DType::BF16, DType::S8, DType::S32, DType::U16, DType::U64, DType::S64] {
        let x = ctx.upload(t, &[0, 5], &[]).unwrap();
        for op in [ReduceOp::Sum, ReduceOp::Product, ReduceOp::Max, ReduceOp::Min, ReduceOp::All, ReduceOp::Any] {
            let out = match op {
                ReduceOp::Sum | ReduceOp::Product => sum_type(t),
                ReduceOp::All | ReduceOp::Any => DType::U8,
                _ => t,
            };
            let got = download(&ctx, &ctx.reduce(op, &x, &[0], false, out).unwrap());
            let want = vec![ref_reduce(op, t, out, &[]); 5];
            check(&got, &want, &format!("empty {op:?} {t}"));
            // empty outputs
            let e = ctx.reduce(op, &x, &[1], false, out).unwrap();
            assert_eq!(e.shape(), &[0]);
            assert!(download(&ctx, &e).is_empty());
        }
        let got = download(&ctx, &ctx.arg_reduce(ArgOp::ArgMin, &x, Some(0), false, TieBreak::Low, DType::S64).unwrap());
        check(&got, &vec![V::I(0); 5], "empty argmin");
    }
    let s = ctx.upload(DType::F32, &[0], &[]).unwrap();
    let got = download(&ctx, &ctx.reduce(ReduceOp::Max, &s, &[0], false, DType::F32).unwrap());
    check(&got, &[V::F(f64::NEG_INFINITY)], "max of nothing");
    // a scalar reduced over no axes is itself
    let one = ctx.upload(DType::S32, &[], &bytes(DType::S32, &[V::I(-7)])).unwrap();
    check(&download(&ctx, &ctx.reduce(ReduceOp::Product, &one, &[], false, DType::S64).unwrap()), &[V::I(-7)], "scalar");
}

#[test]
fn special_values() {
    let ctx = ctx();
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    let rows: Vec<Vec<f64>> = vec![
        vec![1.0, nan, 3.0, -inf],
        vec![-0.0, 0.0, -0.0, -1.0],
        vec![0.0, -0.0, 0.0, 1.0],
        vec![inf, -inf, 2.0, 2.0],
        vec![nan, 5.0, nan, -5.0],
        vec![-inf, -inf, -inf, -inf],
    ];
    let flat: Vec<V> = rows.iter().flatten().map(|&x| V::F(x)).collect();
    for t in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let x = ctx.upload(t, &[6, 4], &bytes(t, &flat)).unwrap();
        let phys = download(&ctx, &x);
        for op in [ReduceOp::Sum, ReduceOp::Product, ReduceOp::Max, ReduceOp::Min, ReduceOp::All, ReduceOp::Any] {
            let out = if matches!(op, ReduceOp::All | ReduceOp::Any) { DType::U8 } else { t };
            for axes in [&[1usize][..], &[0]] {
                let (got, want) = run_reduce(&ctx, op, &x, &phys, axes, out);
                check(&got, &want, &format!("{t} {op:?} axes {axes:?}"));
            }
        }
        // -0.0 vs 0.0: the first one wins (signs checked bit for bit by `same`)
        let got = download(&ctx, &ctx.reduce(ReduceOp::Max, &x, &[1], false, t).unwrap());
        assert_eq!(got[1].f().to_bits(), (-0.0f64).to_bits());
        let got = download(&ctx, &ctx.reduce(ReduceOp::Min, &x, &[1], false, t).unwrap());
        assert_eq!(got[2].f().to_bits(), 0.0f64.to_bits());
        for op in [ArgOp::ArgMax, ArgOp::ArgMin] {
            for tie in [TieBreak::Low, TieBreak::High] {
                let got = download(&ctx, &ctx.arg_reduce(op, &x, Some(1), false, tie, DType::S64).unwrap());
                let want = reference(&[6, 4], &[1], &phys, |g| ref_arg(op, tie, g));
                check(&got, &want, &format!("{t} {op:?} {tie:?}"));
            }
        }
    }
    // spot checks of the rule itself
    let x = ctx.upload(DType::F32, &[6, 4], &bytes(DType::F32, &flat)).unwrap();
    let am = download(&ctx, &ctx.arg_reduce(ArgOp::ArgMax, &x, Some(1), false, TieBreak::High, DType::S64).unwrap());
    assert_eq!(am[0], V::I(2), "[1, NaN, 3, -Inf]: NaN ignored");
    assert_eq!(am[3], V::I(0), "inf");
    assert_eq!(am[4], V::I(2), "[NaN, 5, NaN, -5] high: NaN seed, last NaN");
    assert_eq!(am[5], V::I(3), "all equal, high");
    let am = download(&ctx, &ctx.arg_reduce(ArgOp::ArgMax, &x, Some(1), false, TieBreak::Low, DType::S64).unwrap());
    assert_eq!(am[4], V::I(0), "NaN seed, low");
    // SEMANTICS.md's examples
    for (vals, op, want) in [
        (vec![1.0, f64::NAN, 3.0, f64::NAN], ArgOp::ArgMax, 2),
        (vec![f64::NAN, 1.0, 3.0], ArgOp::ArgMax, 0),
        (vec![1.0, f64::NAN, 0.0], ArgOp::ArgMin, 2),
    ] {
        let v: Vec<V> = vals.iter().map(|&x| V::F(x)).collect();
        let x = ctx.upload(DType::F32, &[v.len()], &bytes(DType::F32, &v)).unwrap();
        let got = download(&ctx, &ctx.arg_reduce(op, &x, None, false, TieBreak::Low, DType::S64).unwrap());
        assert_eq!(got, vec![V::I(want)], "{vals:?}");
    }
}

#[test]
fn arg_reduce_every_dtype_axis_and_tie() {
    let ctx = ctx();
    for &t in DType::ALL.iter() {
        let phys = data(t, 5 * 6 * 7, 11 + t as u64);
        let base = ctx.upload(t, &[5, 6, 7], &bytes(t, &phys)).unwrap();
        let x = base.transpose(&[1, 2, 0]).unwrap();
        let vals = logical(&x, &phys);
        for op in [ArgOp::ArgMax, ArgOp::ArgMin] {
            for tie in [TieBreak::Low, TieBreak::High] {
                for axis in [Some(0usize), Some(1), Some(2), None] {
                    let out = if axis == Some(1) { DType::U8 } else { DType::S64 };
                    let got = download(&ctx, &ctx.arg_reduce(op, &x, axis, false, tie, out).unwrap());
                    let axes: Vec<usize> = axis.map(|a| vec![a]).unwrap_or(vec![0, 1, 2]);
                    let want = reference(x.shape(), &axes, &vals, |g| ref_arg(op, tie, g));
                    check(&got, &want, &format!("{t} {op:?} {tie:?} axis {axis:?}"));
                }
            }
        }
    }
}

#[test]
fn strategies_by_shape() {
    use Strategy::*;
    assert_eq!(choose_strategy(40000, 3), PerOutput);
    assert_eq!(choose_strategy(3, 1023), PerGroup);
    assert!(matches!(choose_strategy(2, 70000), Split { .. }));
    // the switches: PerOutput below 256 elements or from 32768 outputs
    assert_eq!(choose_strategy(1, 255), PerOutput);
    assert_eq!(choose_strategy(1, 256), PerGroup);
    assert_eq!(choose_strategy(32767, 256), PerGroup);
    assert_eq!(choose_strategy(32768, 256), PerOutput);
    assert_eq!(choose_strategy(32768, 1 << 20), PerOutput);
    // Split from 8192 elements below 256 outputs, from 65536 below 1024
    assert_eq!(choose_strategy(1, 8191), PerGroup);
    assert_eq!(choose_strategy(1, 8192), Split { segments: 4 });
    assert_eq!(choose_strategy(1, 8193), Split { segments: 5 });
    assert_eq!(choose_strategy(255, 8192), Split { segments: 4 });
    assert_eq!(choose_strategy(256, 8192), PerGroup);
    assert_eq!(choose_strategy(256, 65535), PerGroup);
    assert_eq!(choose_strategy(256, 65536), Split { segments: 4 });
    assert_eq!(choose_strategy(1023, 65536), Split { segments: 2 });
    assert_eq!(choose_strategy(1024, 65536), PerGroup);
    assert_eq!(choose_strategy(255, 1 << 30), Split { segments: 5 });
    // about 1024 workgroups (SPLIT_GROUPS), segments of whole 2048-element rounds
    assert_eq!(choose_strategy(1, 1 << 20), Split { segments: 512 });
    assert_eq!(split_len(1 << 20, 512), 2048);
    assert_eq!(SPLIT_GROUPS, 1024);
    assert_eq!(choose_strategy(1, 1 << 24), Split { segments: 1024 });
    assert_eq!(split_len(1 << 24, 1024), 16384);
    // rounding segments up to whole rounds can cut the count (820 of 10240 here, not 1024)
    assert_eq!(choose_strategy(1, 1 << 23), Split { segments: 1024 });
    assert_eq!(choose_strategy(1, (1 << 23) + 1), Split { segments: 820 });
    assert_eq!(split_len((1 << 23) + 1, 820), 10240);
    assert_eq!(choose_strategy(2, 70001), Split { segments: 35 });
    assert_eq!(choose_strategy(1, i32::MAX as usize), Split { segments: 1024 });
    // every split: a whole number of rounds per segment, none empty, at least 2
    for outputs in [1usize, 2, 3, 7, 100, 255, 256, 300, 1000, 1023] {
        for len in [8192usize, 8193, 10000, 65535, 65536, 70001, 1 << 20, 1_000_003, (1 << 23) + 1, 1 << 24, 1 << 26, (1 << 31) - 1] {
            if let Split { segments } = choose_strategy(outputs, len) {
                let l = split_len(len, segments);
                assert!(segments >= 2 && l.is_multiple_of(2048), "{outputs} x {len}");
                assert_eq!(len.div_ceil(l), segments as usize, "{outputs} x {len}: no empty segment");
                assert!(outputs * segments as usize <= SPLIT_GROUPS + outputs, "{outputs} x {len}: about SPLIT_GROUPS groups");
            }
        }
    }
}

#[test]
fn large_reductions_every_strategy() {
    let ctx = ctx();
    // (shape, axes): PerOutput, PerGroup (1023 and 7*1023 long), Split (two outputs of 70001;
    // three of 9*1023 over two reduced axes; three of 70001 strided by 3)
    let cases: [(&[usize], &[usize]); 7] = [
        (&[40000, 3], &[1]),
        (&[3, 1023], &[1]),
        (&[1023, 3], &[0]),
        (&[7, 3, 1023], &[0, 2]),
        (&[2, 70001], &[1]),
        (&[9, 3, 1023], &[0, 2]),
        (&[70001, 3], &[0]),
    ];
    for (shape, axes) in cases {
        let n: usize = shape.iter().product();
        for t in [DType::F32, DType::S32, DType::F16] {
            let mut phys = data(t, n, n as u64);
            if t.is_float() {
                phys[n / 2 + 17] = V::F(100.0); // a unique max
                phys[n / 3 + 5] = V::F(-100.0);
            }
            let x = ctx.upload(t, shape, &bytes(t, &phys)).unwrap();
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Any, ReduceOp::All] {
                let out = match op {
                    ReduceOp::Sum => sum_type(t),
                    ReduceOp::All | ReduceOp::Any => DType::U8,
                    _ => t,
                };
                let (got, want) = run_reduce(&ctx, op, &x, &phys, axes, out);
                check(&got, &want, &format!("{t} {op:?} {shape:?} axes {axes:?}"));
            }
            if axes.len() == 1 {
                for (op, tie) in [(ArgOp::ArgMax, TieBreak::Low), (ArgOp::ArgMin, TieBreak::High)] {
                    let got = download(&ctx, &ctx.arg_reduce(op, &x, Some(axes[0]), false, tie, DType::S64).unwrap());
                    let want = reference(shape, axes, &phys, |g| ref_arg(op, tie, g));
                    check(&got, &want, &format!("{t} {op:?} {shape:?}"));
                }
            }
        }
    }
    // NaN placement in a split reduction: row 0 has a NaN seed (only NaNs count), row 1 NaNs
    // elsewhere (ignored by argmax); max is NaN for both.
    let mut phys = data(DType::F32, 2 * 70001, 5);
    phys[70001 + 60000] = V::F(f64::NAN);
    phys[70001 + 50000] = V::F(f64::NAN);
    phys[70001 + 777] = V::F(100.0);
    phys[0] = V::F(f64::NAN);
    phys[40000] = V::F(f64::NAN);
    let x = ctx.upload(DType::F32, &[2, 70001], &bytes(DType::F32, &phys)).unwrap();
    let got = download(&ctx, &ctx.arg_reduce(ArgOp::ArgMax, &x, Some(1), false, TieBreak::High, DType::S64).unwrap());
    check(&got, &[V::I(40000), V::I(777)], "NaN rules in a split reduction");
    let got = download(&ctx, &ctx.arg_reduce(ArgOp::ArgMin, &x, Some(1), false, TieBreak::Low, DType::S64).unwrap());
    check(&got, &reference(&[2, 70001], &[1], &phys, |g| ref_arg(ArgOp::ArgMin, TieBreak::Low, g)), "argmin split");
    let got = download(&ctx, &ctx.reduce(ReduceOp::Min, &x, &[1], false, DType::F32).unwrap());
    assert!(got.iter().all(|v| v.f().is_nan()));
}

#[test]
fn reruns_are_bit_identical() {
    let ctx = ctx();
    // fractional f32 values: the sum depends on the order, so identical bits show a fixed order
    for shape in [[1usize, 100003], [5, 3001], [300, 77]] {
        let n = shape[0] * shape[1];
        let vals: Vec<V> = (0..n).map(|i| V::F(((i as f32 * 0.7311).sin() * 1000.0) as f64)).collect();
        let x = ctx.upload(DType::F32, &shape, &bytes(DType::F32, &vals)).unwrap();
        let a = ctx.download(&ctx.reduce(ReduceOp::Sum, &x, &[1], false, DType::F32).unwrap()).unwrap();
        let b = ctx.download(&ctx.reduce(ReduceOp::Sum, &x, &[1], false, DType::F32).unwrap()).unwrap();
        assert_eq!(a, b, "{shape:?}");
        // and close to the sequential f64 sum (any fixed order in f64 is within ~1e-13 here)
        let got = download(&ctx, &ctx.reduce(ReduceOp::Sum, &x, &[1], false, DType::F64).unwrap());
        let want = reference(&shape, &[1], &vals, |g| V::F(g.iter().map(|v| v.f()).sum()));
        for (g, w) in got.iter().zip(&want) {
            assert!((g.f() - w.f()).abs() <= 1e-9 * w.f().abs().max(1.0), "{shape:?}: {g:?} vs {w:?}");
        }
    }
}

/// BinaryBackend holds NaN as an atom and writes it as the positive quiet NaN: so do we, whatever
/// sign or payload the input NaN or the hardware produced.
#[test]
fn reductions_write_canonical_nans() {
    use nx_vulkan_engine::reduce::ReduceOp;
    let ctx = ctx();
    let words: [u32; 4] = [0xFFC0_0001, 0x3F80_0000, 0x7F80_0001, 0xBF80_0000];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let x = ctx.upload(DType::F32, &[4], &bytes).unwrap();
    for op in [ReduceOp::Sum, ReduceOp::Product, ReduceOp::Max, ReduceOp::Min] {
        let r = ctx.reduce(op, &x, &[0], false, DType::F32).unwrap();
        assert_eq!(ctx.download(&r).unwrap(), 0x7FC0_0000u32.to_le_bytes().to_vec(), "{op:?}");
    }
}

// ---- the fixed combination order, modelled on the CPU (see the module docs of reduce.rs) ----

/// One workgroup's fold of `vals` as a float sum: lane `t` adds elements `t, t+256, ...` in
/// order (in f64, from +0.0), then the tree: for `h = 128, 64, ..., 1`, lane `t < h` absorbs
/// lane `t + h`.
fn group_fold(vals: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 256];
    for (i, v) in vals.iter().enumerate() {
        lanes[i % 256] += v;
    }
    let mut h = 128;
    while h > 0 {
        for t in 0..h {
            lanes[t] += lanes[t + h];
        }
        h /= 2;
    }
    lanes[0]
}

/// The f64 float sum (before the single rounding) of one output's `vals`, in the order the
/// engine's strategy for `outputs` results of `vals.len()` elements uses.
fn model_sum(outputs: usize, vals: &[f64]) -> f64 {
    match choose_strategy(outputs, vals.len()) {
        Strategy::PerOutput => vals.iter().fold(0.0, |a, v| a + v),
        Strategy::PerGroup => group_fold(vals),
        Strategy::Split { segments } => {
            let partials: Vec<f64> = vals.chunks(split_len(vals.len(), segments)).map(group_fold).collect();
            assert_eq!(partials.len(), segments as usize);
            group_fold(&partials)
        }
    }
}

/// Fractional f32 values of many magnitudes (2^-41 .. 2^20): their f64 sums depend on the order.
fn fractional_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let m = (s >> 40) as f64 / (1u64 << 24) as f64 - 0.5;
            (m * 2f64.powi(((s >> 13) % 61) as i32 - 40)) as f32
        })
        .collect()
}

/// Nx.BinaryBackend's argmax/argmin scan over floats (as `ref_arg`, without the `V` boxing).
fn ref_arg_f64(op: ArgOp, tie: TieBreak, vals: &[f64]) -> i64 {
    let mut best: Option<(usize, f64)> = None;
    for (i, &y) in vals.iter().enumerate() {
        let take = match best {
            None => true,
            Some((_, x)) if x.is_nan() && y.is_nan() => tie == TieBreak::High,
            Some((_, x)) if x.is_nan() || y.is_nan() => false,
            Some((_, x)) if x == y => tie == TieBreak::High,
            Some((_, x)) => (op == ArgOp::ArgMax && y > x) || (op == ArgOp::ArgMin && y < x),
        };
        if take {
            best = Some((i, y));
        }
    }
    best.map_or(0, |b| b.0 as i64)
}

/// Max (`max`) or min over floats: NaN if any, else the extreme, the first of equals (-0.0/+0.0).
fn ref_extreme_f64(max: bool, vals: &[f64]) -> f64 {
    let mut acc = if max { f64::NEG_INFINITY } else { f64::INFINITY };
    for &v in vals {
        if v.is_nan() {
            return f64::NAN;
        }
        if (max && v > acc) || (!max && v < acc) {
            acc = v;
        }
    }
    acc
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}
fn f64s(b: &[u8]) -> Vec<f64> {
    b.chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
}
fn i64s(b: &[u8]) -> Vec<i64> {
    b.chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Canonical NaN bits (BinaryBackend writes every NaN as the positive quiet NaN).
fn canon32(x: f64) -> u32 {
    if x.is_nan() {
        0x7FC0_0000
    } else {
        (x as f32).to_bits()
    }
}
fn canon64(x: f64) -> u64 {
    if x.is_nan() {
        0x7FF8_0000_0000_0000
    } else {
        x.to_bits()
    }
}

fn upload_f32(ctx: &Context, shape: &[usize], vals: &[f32]) -> Tensor {
    ctx.upload(DType::F32, shape, &vals.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap()
}

/// Rows `[outputs, len]` of f32 (`x`, logical values `vals`) reduced over axis 1: sums bit-exact
/// against the modelled order (f32 and f64 outputs). Returns whether some row's modelled sum
/// differs from the sequential sum (the order showed).
fn check_sums_f32(ctx: &Context, x: &Tensor, vals: &[f32], what: &str) -> bool {
    let (outputs, len) = (x.shape()[0], x.shape()[1]);
    let rows: Vec<Vec<f64>> = vals.chunks(len).map(|r| r.iter().map(|&v| v as f64).collect()).collect();
    let model: Vec<f64> = rows.iter().map(|r| model_sum(outputs, r)).collect();
    let got32 = f32s(&ctx.download(&ctx.reduce(ReduceOp::Sum, x, &[1], false, DType::F32).unwrap()).unwrap());
    let got64 = f64s(&ctx.download(&ctx.reduce(ReduceOp::Sum, x, &[1], false, DType::F64).unwrap()).unwrap());
    for o in 0..outputs {
        assert_eq!(got32[o].to_bits(), canon32(model[o]), "{what}: f32 sum of row {o}: got {}, want {}", got32[o], model[o]);
        assert_eq!(got64[o].to_bits(), canon64(model[o]), "{what}: f64 sum of row {o}: got {}, want {}", got64[o], model[o]);
    }
    rows.iter().zip(&model).any(|(r, m)| r.iter().fold(0.0, |a, v| a + v).to_bits() != m.to_bits())
}

/// Max/min (`extremes`) and every argmax/argmin of the rows of `x` against the sequential scan.
fn check_order_stats_f32(ctx: &Context, x: &Tensor, vals: &[f32], extremes: bool, what: &str) {
    let len = x.shape()[1];
    let rows: Vec<Vec<f64>> = vals.chunks(len).map(|r| r.iter().map(|&v| v as f64).collect()).collect();
    for max in [true, false].into_iter().filter(|_| extremes) {
        let op = if max { ReduceOp::Max } else { ReduceOp::Min };
        let got = f32s(&ctx.download(&ctx.reduce(op, x, &[1], false, DType::F32).unwrap()).unwrap());
        for (o, row) in rows.iter().enumerate() {
            assert_eq!(got[o].to_bits(), canon32(ref_extreme_f64(max, row)), "{what}: {op:?} of row {o}");
        }
    }
    for op in [ArgOp::ArgMax, ArgOp::ArgMin] {
        for tie in [TieBreak::Low, TieBreak::High] {
            let got = i64s(&ctx.download(&ctx.arg_reduce(op, x, Some(1), false, tie, DType::S64).unwrap()).unwrap());
            for (o, row) in rows.iter().enumerate() {
                assert_eq!(got[o], ref_arg_f64(op, tie, row), "{what}: {op:?} {tie:?} of row {o}");
            }
        }
    }
}

#[test]
fn cpu_models_agree_with_the_boxed_references() {
    // the CPU helpers agree with the boxed references on small data with specials
    let vals = [1.0, f64::NAN, 3.0, -0.0, 0.0, 3.0, f64::NEG_INFINITY, f64::NAN];
    for start in 0..vals.len() {
        let v = &vals[start..];
        let boxed: Vec<V> = v.iter().map(|&x| V::F(x)).collect();
        for op in [ArgOp::ArgMax, ArgOp::ArgMin] {
            for tie in [TieBreak::Low, TieBreak::High] {
                assert_eq!(V::I(ref_arg_f64(op, tie, v) as i128), ref_arg(op, tie, &boxed));
            }
        }
        for (max, op) in [(true, ReduceOp::Max), (false, ReduceOp::Min)] {
            assert!(same(V::F(ref_extreme_f64(max, v)), ref_reduce(op, DType::F64, DType::F64, &boxed)));
        }
    }
    // PerOutput is exactly the sequential sum; a single lane's worth is too
    let v: Vec<f64> = fractional_f32(300, 1).iter().map(|&x| x as f64).collect();
    assert_eq!(model_sum(40000, &v).to_bits(), v.iter().fold(0.0, |a, x| a + x).to_bits());
}

#[test]
fn float_sums_follow_the_fixed_order_at_every_switch() {
    let ctx = ctx();
    // (outputs, len) on both sides of each switch (see `strategies_by_shape`), odd lengths,
    // one-element last segments, whole rounds, and tails after the unrolled rounds.
    let cases: &[(usize, usize)] = &[
        (1, 7),
        (5, 255),
        (5, 256),
        (3, 2047),
        (1, 8191),
        (1, 8192),
        (1, 8193),
        (2, 70001),
        (255, 8192),
        (256, 8192),
        (1, 1 << 20),
        (2, 1_000_003),
        (33000, 45),
        (32768, 256),
    ];
    let mut order_showed = 0;
    for (i, &(outputs, len)) in cases.iter().enumerate() {
        let mut vals = fractional_f32(outputs * len, 100 + i as u64);
        // a unique extreme per row somewhere, and -0.0s
        for o in 0..outputs {
            vals[o * len + (o * 7919) % len] = 5000.0;
            vals[o * len + (o * 104729 + len / 2) % len] = -0.0;
        }
        let what = format!("{outputs} x {len} ({:?})", choose_strategy(outputs, len));
        let x = upload_f32(&ctx, &[outputs, len], &vals);
        order_showed += check_sums_f32(&ctx, &x, &vals, &what) as usize;
        check_order_stats_f32(&ctx, &x, &vals, true, &what);
    }
    assert!(order_showed >= 8, "the data must tell orders apart ({order_showed} cases did)");
}

#[test]
fn split_sums_over_views_follow_the_fixed_order() {
    let ctx = ctx();
    // reduced axes that are strided (a column) or two non-mergeable axes; f64 and f16 inputs
    let mut order_showed = false;
    for (t, shape, axes) in [
        (DType::F32, &[70001usize, 3][..], &[0usize][..]),
        (DType::F32, &[9, 3, 1023], &[0, 2]),
        (DType::F64, &[3, 9, 1023], &[1, 2]),
        (DType::F16, &[2, 20000], &[1]),
    ] {
        let n: usize = shape.iter().product();
        let phys: Vec<V> = fractional_f32(n, 7).iter().map(|&x| V::F(x as f64)).collect();
        let x = ctx.upload(t, shape, &bytes(t, &phys)).unwrap();
        let phys = download(&ctx, &x); // as stored (f16 rounds)
        let outputs = n / axes.iter().map(|&a| shape[a]).product::<usize>();
        let len = n / outputs;
        assert!(matches!(choose_strategy(outputs, len), Strategy::Split { .. }), "{shape:?}");
        let seq = reference(shape, axes, &phys, |g| V::F(g.iter().fold(0.0, |a, v| a + v.f())));
        let modelled = reference(shape, axes, &phys, |g| V::F(model_sum(outputs, &g.iter().map(|v| v.f()).collect::<Vec<_>>())));
        order_showed |= seq.iter().zip(&modelled).any(|(a, b)| !same(*a, *b));
        for out in [t, DType::F64] {
            let (got, _) = run_reduce(&ctx, ReduceOp::Sum, &x, &phys, axes, out);
            let want = reference(shape, axes, &phys, |g| {
                store(out, V::F(model_sum(outputs, &g.iter().map(|v| v.f()).collect::<Vec<_>>())))
            });
            check(&got, &want, &format!("{t} {shape:?} axes {axes:?} into {out}"));
        }
    }
    assert!(order_showed, "the data must tell orders apart");
}

/// 16 Mi f32 elements into one output (a 1024-segment split): the sum bit-exact against the
/// modelled order, then NaN / ±Inf / -0.0 rules for sum, max/min and argmax/argmin.
#[test]
fn sixteen_mi_elements() {
    let ctx = ctx();
    let n = 1usize << 24;
    assert_eq!(choose_strategy(1, n), Strategy::Split { segments: 1024 });
    let mut vals = fractional_f32(n, 2024);
    for i in (5..n).step_by(999_983) {
        vals[i] = -0.0;
    }
    let x = upload_f32(&ctx, &[1, n], &vals);
    assert!(check_sums_f32(&ctx, &x, &vals, "16Mi"), "the order must show in the sum");
    check_order_stats_f32(&ctx, &x, &vals, true, "16Mi");

    // ±Inf twice each (ties), NaNs (never the first): argmax/argmin skip the NaNs; max/min/sum NaN
    let (inf, ninf, nan) = (f32::INFINITY, f32::NEG_INFINITY, f32::NAN);
    for (i, v) in [(123_457, inf), (15_000_001, inf), (777, ninf), (9_999_999, ninf), (4_000_000, nan), (1 << 23, nan), (n - 1, nan)] {
        vals[i] = v;
    }
    let x = upload_f32(&ctx, &[1, n], &vals);
    for (op, max) in [(ReduceOp::Max, true), (ReduceOp::Min, false)] {
        let got = ctx.download(&ctx.reduce(op, &x, &[1], false, DType::F32).unwrap()).unwrap();
        assert_eq!(got, 0x7FC0_0000u32.to_le_bytes(), "{op:?}: NaN, canonical");
        assert!(ref_extreme_f64(max, &vals.iter().map(|&v| v as f64).collect::<Vec<_>>()).is_nan());
    }
    let row: Vec<f64> = vals.iter().map(|&v| v as f64).collect();
    let arg = |op, tie| i64s(&ctx.download(&ctx.arg_reduce(op, &x, None, false, tie, DType::S64).unwrap()).unwrap())[0];
    for (op, tie, want) in [
        (ArgOp::ArgMax, TieBreak::Low, 123_457),
        (ArgOp::ArgMax, TieBreak::High, 15_000_001),
        (ArgOp::ArgMin, TieBreak::Low, 777),
        (ArgOp::ArgMin, TieBreak::High, 9_999_999),
    ] {
        assert_eq!(ref_arg_f64(op, tie, &row), want, "the reference agrees");
        assert_eq!(arg(op, tie), want, "{op:?} {tie:?}");
    }
    let sum = ctx.download(&ctx.reduce(ReduceOp::Sum, &x, &[1], false, DType::F32).unwrap()).unwrap();
    assert_eq!(sum, 0x7FC0_0000u32.to_le_bytes(), "NaN sum, canonical");

    // a NaN first element: nothing beats it; ties with the later NaNs (High: the last one)
    vals[0] = nan;
    let x = upload_f32(&ctx, &[1, n], &vals);
    let row: Vec<f64> = vals.iter().map(|&v| v as f64).collect();
    for op in [ArgOp::ArgMax, ArgOp::ArgMin] {
        for (tie, want) in [(TieBreak::Low, 0), (TieBreak::High, n as i64 - 1)] {
            assert_eq!(ref_arg_f64(op, tie, &row), want, "the reference agrees");
            let got = i64s(&ctx.download(&ctx.arg_reduce(op, &x, None, false, tie, DType::S64).unwrap()).unwrap());
            assert_eq!(got[0], want, "NaN first: {op:?} {tie:?}");
        }
    }
}

/// Every reduction kind of rows `shapes` (outputs, len) with ties, -0.0 and a NaN: sum and
/// product into f64, max and min (of the data and of all-zero rows of mixed signs), any and
/// all, argmax/argmin with both tie-breaks, s64 sums that wrap and s64 max. Returns the
/// downloaded results and the names of the kernels that ran.
fn every_reduction_kind(ctx: &Context, shapes: &[(usize, usize)]) -> (Vec<Vec<u8>>, Vec<String>) {
    ctx.stream.profile_start().unwrap();
    let mut results = vec![];
    for (i, &(outputs, len)) in shapes.iter().enumerate() {
        let n = outputs * len;
        let mut vals = fractional_f32(n, 40 + i as u64);
        for o in 0..outputs {
            // two equal maxima per row (ties for the arg-reductions), a -0.0 in every row,
            // a NaN in row 1
            vals[o * len + (o * 7919) % len] = 5000.0;
            vals[o * len + (o * 7919 + len / 3) % len] = 5000.0;
            vals[o * len + len / 2] = -0.0;
            if o == 1 {
                vals[o * len + len - 2] = f32::NAN;
            }
        }
        let x = upload_f32(ctx, &[outputs, len], &vals);
        for op in [ReduceOp::Sum, ReduceOp::Product, ReduceOp::Max, ReduceOp::Min, ReduceOp::Any, ReduceOp::All] {
            let out = match op {
                ReduceOp::Sum | ReduceOp::Product => DType::F64,
                ReduceOp::All | ReduceOp::Any => DType::U8,
                _ => DType::F32,
            };
            results.push(ctx.download(&ctx.reduce(op, &x, &[1], false, out).unwrap()).unwrap());
        }
        // zeros' signs decide max over an all-zero row
        let zeros: Vec<f32> = (0..n).map(|j| if (j * 31 + i) % 7 == 0 { 0.0 } else { -0.0 }).collect();
        let z = upload_f32(ctx, &[outputs, len], &zeros);
        results.push(ctx.download(&ctx.reduce(ReduceOp::Max, &z, &[1], false, DType::F32).unwrap()).unwrap());
        results.push(ctx.download(&ctx.reduce(ReduceOp::Min, &z, &[1], false, DType::F32).unwrap()).unwrap());
        for op in [ArgOp::ArgMax, ArgOp::ArgMin] {
            for tie in [TieBreak::Low, TieBreak::High] {
                results.push(ctx.download(&ctx.arg_reduce(op, &x, Some(1), false, tie, DType::S64).unwrap()).unwrap());
            }
        }
        // signed 64-bit sums that wrap
        let ints: Vec<u8> = (0..n as i64).flat_map(|j| (j.wrapping_mul(0x5DEECE66D) ^ (j << 50)).to_le_bytes()).collect();
        let xi = ctx.upload(DType::S64, &[outputs, len], &ints).unwrap();
        results.push(ctx.download(&ctx.reduce(ReduceOp::Sum, &xi, &[1], false, DType::S64).unwrap()).unwrap());
        results.push(ctx.download(&ctx.reduce(ReduceOp::Max, &xi, &[1], false, DType::S64).unwrap()).unwrap());
    }
    let names = ctx.stream.profile_stop().unwrap().into_iter().map(|k| k.name).collect();
    (results, names)
}

/// Where the device has subgroup shuffles, the tree's last levels run in registers: the same
/// pairs in the same order as the shared-memory tree, so the same bits — checked for every
/// accumulator kind (f64 and s64 as two words, u64 flags, f32 extremes' bits and s64 extremes
/// with their indices) and every strategy with a tree, on a context of its own (the toggle and
/// the profile are per context).
#[test]
fn subgroup_tree_gives_the_shared_tree_bits() {
    let ctx = Context::open(&DeviceSelector::from_env()).unwrap();
    let shuffles = ctx.caps.subgroup_shuffle_relative;
    eprintln!("subgroup size {}, shuffle-relative {shuffles}", ctx.caps.subgroup_size);
    // (outputs, len): PerGroup short rows (row_k), PerGroup long rows, Split (pass 1 and 2)
    let shapes: &[(usize, usize)] = &[(4, 1024), (3, 3001), (2, 70001), (1, 1 << 20)];
    let ran = |on: bool| {
        ctx.subgroup_reduction.store(on, std::sync::atomic::Ordering::Relaxed);
        every_reduction_kind(&ctx, shapes)
    };
    let (with_tree, names_on) = ran(true);
    let (without, names_off) = ran(false);
    assert!(names_off.iter().all(|k| !k.contains("sgtree")), "turned off: {names_off:?}");
    let reductions = names_on.iter().filter(|k| k.starts_with("reduce")).count();
    let tree = names_on.iter().filter(|k| k.contains("sgtree")).count();
    if shuffles {
        // every reduction kernel of these shapes has a tree (none is PerOutput)
        assert!(reductions >= 10 && tree == reductions, "{tree} of {reductions}: {names_on:?}");
    } else {
        assert_eq!(tree, 0);
    }
    assert_eq!(with_tree.len(), without.len());
    for (k, (a, b)) in with_tree.iter().zip(&without).enumerate() {
        assert_eq!(a, b, "result {k}: the subgroup tree changed bits");
    }
    // and the shuffled tree still follows the modelled order (f32 sums of fractional values)
    ctx.subgroup_reduction.store(shuffles, std::sync::atomic::Ordering::Relaxed);
    let vals = fractional_f32(3 * 3001, 9);
    let x = upload_f32(&ctx, &[3, 3001], &vals);
    assert!(check_sums_f32(&ctx, &x, &vals, "3 x 3001, subgroup tree"), "the data must tell orders apart");
}

/// Short rows (256 < R <= 4096) run on narrow workgroups (`reduce::narrow_lanes`: 64 or 128
/// invocations, each holding 4 or 2 of the tree's 256 partials and taking the tree's top
/// levels itself): the same bits as 256 invocations for every accumulator kind, with and
/// without subgroup shuffles, at every row_k the rule maps to 64, 128 and 256 lanes (R = 257,
/// 768, 1024, 1025, 2048, 2049, 4096), and f32 sums follow the modelled fold order. On a
/// context of its own (the toggles and the profile are per context).
#[test]
fn narrow_rows_give_the_wide_rows_bits() {
    let ctx = Context::open(&DeviceSelector::from_env()).unwrap();
    let shapes: &[(usize, usize)] = &[(3, 257), (5, 768), (4, 1024), (3, 1025), (2, 2048), (3, 2049), (2, 4096)];
    for shuffles in [false, true].into_iter().filter(|&on| !on || ctx.caps.subgroup_shuffle_relative) {
        ctx.subgroup_reduction.store(shuffles, std::sync::atomic::Ordering::Relaxed);
        let ran = |on: bool| {
            ctx.narrow_rows.store(on, std::sync::atomic::Ordering::Relaxed);
            every_reduction_kind(&ctx, shapes)
        };
        let (narrow, names_on) = ran(true);
        let (wide, names_off) = ran(false);
        assert!(names_off.iter().all(|k| !k.contains(" lanes")), "turned off: {names_off:?}");
        for lanes in [64, 128] {
            if ctx.caps.subgroup_size <= lanes {
                let n = names_on.iter().filter(|k| k.contains(&format!(" lanes{lanes} "))).count();
                assert!(n >= 8, "shuffles {shuffles}: {n} kernels with {lanes} lanes: {names_on:?}");
            }
        }
        // rows of 2049 and 4096 (row_k 9 and 16) keep 256 lanes
        assert!(names_on.iter().any(|k| k.contains(" rowk16 ") && !k.contains(" lanes")), "{names_on:?}");
        assert_eq!(narrow.len(), wide.len());
        for (k, (a, b)) in narrow.iter().zip(&wide).enumerate() {
            assert_eq!(a, b, "shuffles {shuffles}, result {k}: narrow rows changed bits");
        }
        ctx.narrow_rows.store(true, std::sync::atomic::Ordering::Relaxed);
        for (i, &(outputs, len)) in shapes.iter().enumerate() {
            let vals = fractional_f32(outputs * len, 70 + i as u64);
            let x = upload_f32(&ctx, &[outputs, len], &vals);
            assert!(check_sums_f32(&ctx, &x, &vals, &format!("{outputs} x {len}, narrow rows")), "the data must tell orders apart");
        }
    }
}

/// f32 max/min/argmax/argmin compare stored bits as integer keys (`Spec::bits_extreme`): on
/// rows drawn from subnormals, signed zeros, infinities, NaNs of either sign and payload and
/// normals of both signs, every strategy gives the CPU scan's choice, and the same bits as the
/// same values reduced as f64 (the double comparison path).
#[test]
fn f32_extremes_compare_bits_like_f64() {
    let ctx = ctx();
    let mut s = 0x9E3779B97F4A7C15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut special = move || -> u32 {
        let r = next();
        let sign = ((r >> 63) as u32) << 31;
        let pick = (r >> 32) as u32;
        sign | match r % 10 {
            0 => 0,                              // zero
            1 => 1 + pick % 0x7FFFFF,            // subnormal
            2 => 0x7F800000,                     // Inf
            3 if r % 7 == 0 => 0x7F800001 + pick % 0x3FFFFF, // NaN, some payload
            4 => 0x3F800000 + pick % 16,         // near 1: ties and near-ties
            _ => 0x00800000 + pick % 0x7E000000, // normal
        }
    };
    for (rows, len) in [(5usize, 1usize), (40000, 3), (7, 300), (6, 1024), (4, 3001), (2, 70001)] {
        let bits: Vec<u32> = (0..rows * len).map(|_| special()).collect();
        let f: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
        let x32 = ctx.upload(DType::F32, &[rows, len], &bits.iter().flat_map(|b| b.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        let x64 = ctx.upload(DType::F64, &[rows, len], &f.iter().flat_map(|&v| (v as f64).to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        let what = format!("{rows} x {len} ({:?})", choose_strategy(rows, len));
        check_order_stats_f32(&ctx, &x32, &f, true, &what);
        for op in [ReduceOp::Max, ReduceOp::Min] {
            let a = f32s(&ctx.download(&ctx.reduce(op, &x32, &[1], false, DType::F32).unwrap()).unwrap());
            let b = f32s(&ctx.download(&ctx.reduce(op, &x64, &[1], false, DType::F32).unwrap()).unwrap());
            for o in 0..rows {
                assert_eq!(a[o].to_bits(), b[o].to_bits(), "{what}: {op:?} of row {o}, f32 vs f64 input");
            }
        }
        for op in [ArgOp::ArgMax, ArgOp::ArgMin] {
            let a = ctx.download(&ctx.arg_reduce(op, &x32, Some(1), false, TieBreak::Low, DType::S64).unwrap()).unwrap();
            let b = ctx.download(&ctx.arg_reduce(op, &x64, Some(1), false, TieBreak::Low, DType::S64).unwrap()).unwrap();
            assert_eq!(a, b, "{what}: {op:?}, f32 vs f64 input");
        }
    }
}
