//! Window reductions and window scatters against plain CPU models of Nx.BinaryBackend's
//! `window_reduce` and `select_and_scatter` (naive loops over padded positions), every dtype,
//! special values (NaN, ±Inf, ±0, subnormals), strided and transposed views, negative padding,
//! padding larger than the input, dilations; plus a few results pinned from Nx 0.7.2 itself.
//!
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test --release -p nx_vulkan_engine --test window

mod common;
use common::*;
use nx_vulkan_engine::window::{window_output_shape, ScatterOp, WindowOp};
use nx_vulkan_engine::*;
use std::cmp::Ordering;

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Nx.Type.min_binary / max_binary as values (s16: Nx 0.7.2's -32678 / 32677).
fn extreme(t: DType, max: bool) -> N {
    if t.is_float() {
        N::F(if max { f64::NEG_INFINITY } else { f64::INFINITY })
    } else {
        let (lo, hi) = int_limits(t);
        N::I(if max { lo } else { hi })
    }
}

#[allow(clippy::too_many_arguments)]
/// BinaryBackend's window_reduce: pad with the identity, then fold every window position
/// (padding included) row-major with `fun(x, acc)`.
fn ref_window(op: WindowOp, t: DType, shape: &[usize], data: &[u64], win: &[usize], st: &[usize], pad: &[(i64, i64)], dil: &[usize]) -> Vec<u64> {
    let out_shape = window_output_shape(shape, win, st, pad, dil).unwrap();
    let rank = shape.len();
    let ident = match op {
        WindowOp::Sum => if t.is_float() { N::F(0.0) } else { N::I(0) },
        WindowOp::Product => if t.is_float() { N::F(1.0) } else { N::I(1) },
        WindowOp::Max => extreme(t, true),
        WindowOp::Min => extreme(t, false),
    };
    let mut out = vec![];
    for o in 0..numel(&out_shape) {
        let oc = coords(&out_shape, o);
        let mut acc = ident;
        for k in 0..numel(win) {
            let wc = coords(win, k);
            let mut inside = true;
            let mut ic = vec![0; rank];
            for d in 0..rank {
                let q = (oc[d] * st[d] + wc[d] * dil[d]) as i64 - pad[d].0;
                if q < 0 || q >= shape[d] as i64 {
                    inside = false;
                } else {
                    ic[d] = q as usize;
                }
            }
            let x = if inside { read(t, data[flat_of(shape, &ic)]) } else { ident };
            acc = match (op, x, acc) {
                (WindowOp::Sum, N::F(a), N::F(b)) => N::F(a + b),
                (WindowOp::Sum, N::I(a), N::I(b)) => N::I(((a + b) as u64 as i128) & 0xFFFF_FFFF_FFFF_FFFF),
                (WindowOp::Product, N::F(a), N::F(b)) => N::F(a * b),
                (WindowOp::Product, N::I(a), N::I(b)) => N::I((a as u64).wrapping_mul(b as u64) as i128),
                (WindowOp::Max | WindowOp::Min, x, acc) => {
                    if x.is_nan() || acc.is_nan() {
                        N::F(f64::NAN)
                    } else {
                        let c = cmp(x, acc).unwrap();
                        let take = if op == WindowOp::Max { c != Ordering::Less } else { c != Ordering::Greater };
                        if take { x } else { acc }
                    }
                }
                _ => unreachable!(),
            };
        }
        out.push(write(t, acc));
    }
    out
}

struct Case {
    shape: Vec<usize>,
    win: Vec<usize>,
    st: Vec<usize>,
    pad: Vec<(i64, i64)>,
    dil: Vec<usize>,
}

fn case(shape: &[usize], win: &[usize], st: &[usize], pad: &[(i64, i64)], dil: &[usize]) -> Case {
    Case { shape: shape.to_vec(), win: win.to_vec(), st: st.to_vec(), pad: pad.to_vec(), dil: dil.to_vec() }
}

#[allow(clippy::too_many_arguments)]
fn check_window(ctx: &Context, f: &mut Failures, op: WindowOp, t: DType, c: &Case, x: &Tensor, data: &[u64], what: &str) {
    let before = ctx.stats().dispatches;
    let y = ctx.window_reduce(op, x, &c.win, &c.st, &c.pad, &c.dil).unwrap();
    assert!(ctx.stats().dispatches > before, "window_reduce dispatched nothing");
    assert_eq!(y.dtype(), t);
    let got = download(ctx, &y);
    let want = ref_window(op, t, &c.shape, data, &c.win, &c.st, &c.pad, &c.dil);
    assert_eq!(got.len(), want.len());
    for i in 0..want.len() {
        f.check(
            || format!("{op:?} {t} {what} shape {:?} win {:?} st {:?} pad {:?} dil {:?} at {i}: got {} want {}", c.shape, c.win, c.st, c.pad, c.dil, show(t, got[i]), show(t, want[i])),
            got[i],
            want[i],
        );
    }
}

#[test]
fn window_reductions_every_dtype() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(11);
        let cases = [
            case(&[4, 5], &[2, 3], &[1, 2], &[(1, -1), (3, 2)], &[2, 1]),
            case(&[7, 3], &[3, 1], &[2, 1], &[(2, 1), (0, 0)], &[1, 1]),
            // padding larger than the input: windows made only of padding
            case(&[2, 1], &[2, 2], &[1, 3], &[(4, 5), (3, 3)], &[1, 2]),
        ];
        for t in DType::ALL {
            for op in [WindowOp::Sum, WindowOp::Product, WindowOp::Max, WindowOp::Min] {
                for c in &cases {
                    let mut data = random_values(t, numel(&c.shape), &mut rng);
                    if op == WindowOp::Product && t.is_float() {
                        // keep some products finite and non-zero
                        for v in data.iter_mut().step_by(2) {
                            *v = write(t, N::F(rng.range(-8, 8) as f64 * 0.25));
                        }
                    }
                    let x = upload(ctx, t, &c.shape, &data);
                    check_window(ctx, &mut f, op, t, c, &x, &data, "");
                }
            }
        }
        f.finish("window_reductions_every_dtype");
    });
}

#[test]
fn windows_over_views_and_other_ranks() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(12);
        for t in [DType::F32, DType::S32, DType::BF16, DType::U8] {
            for op in [WindowOp::Sum, WindowOp::Max, WindowOp::Min, WindowOp::Product] {
                // a transposed, reversed rank-3 view
                let base_shape = [3, 5, 4];
                let base = random_values(t, numel(&base_shape), &mut rng);
                let x = upload(ctx, t, &base_shape, &base).transpose(&[2, 0, 1]).unwrap().reverse(&[1]).unwrap();
                let shape = x.shape().to_vec();
                let mut data = vec![0; numel(&shape)];
                for (i, v) in data.iter_mut().enumerate() {
                    let c = coords(&shape, i);
                    *v = base[flat_of(&base_shape, &[shape[1] - 1 - c[1], c[2], c[0]])];
                }
                let c = case(&shape, &[2, 2, 3], &[1, 2, 2], &[(0, 1), (-1, 2), (2, 0)], &[3, 1, 2]);
                check_window(ctx, &mut f, op, t, &c, &x, &data, "transposed view");
                // a stepped slice, rank 1
                let base = random_values(t, 40, &mut rng);
                let x = upload(ctx, t, &[40], &base).slice(&[3], &[12], &[3]).unwrap();
                let data: Vec<u64> = (0..12).map(|i| base[3 + 3 * i]).collect();
                check_window(ctx, &mut f, op, t, &case(&[12], &[4], &[3], &[(2, 3)], &[2]), &x, &data, "sliced view");
                // a scalar (rank 0)
                let data = random_values(t, 1, &mut rng);
                let x = upload(ctx, t, &[], &data);
                check_window(ctx, &mut f, op, t, &case(&[], &[], &[], &[], &[]), &x, &data, "scalar");
            }
        }
        f.finish("windows_over_views_and_other_ranks");
    });
}

/// Results printed by Nx 0.7.2 (Nx.BinaryBackend), pinned.
#[test]
fn window_results_pinned_from_nx() {
    on_engine(|ctx| {
        let f32s = |v: &[f32]| v.iter().map(|x| x.to_bits() as u64).collect::<Vec<_>>();
        // ties: the later element wins (max(x, acc) returns x)
        let x = upload(ctx, DType::F32, &[3], &f32s(&[-0.0, 0.0, -0.0]));
        let y = ctx.window_reduce(WindowOp::Max, &x, &[2], &[1], &[(0, 0)], &[1]).unwrap();
        assert_eq!(download(ctx, &y), vec![0x0, 0x8000_0000]);
        let x = upload(ctx, DType::F32, &[3], &f32s(&[0.0, -0.0, 0.0]));
        let y = ctx.window_reduce(WindowOp::Min, &x, &[2], &[1], &[(0, 0)], &[1]).unwrap();
        assert_eq!(download(ctx, &y), vec![0x8000_0000, 0x0]);
        // sum starts at +0.0, product at 1.0
        let x = upload(ctx, DType::F32, &[2], &f32s(&[-0.0, -0.0]));
        assert_eq!(download(ctx, &ctx.window_reduce(WindowOp::Sum, &x, &[2], &[1], &[(0, 0)], &[1]).unwrap()), vec![0x0]);
        let x = upload(ctx, DType::F32, &[2], &f32s(&[-0.0, 1.0]));
        assert_eq!(download(ctx, &ctx.window_reduce(WindowOp::Product, &x, &[2], &[1], &[(0, 0)], &[1]).unwrap()), vec![0x8000_0000]);
        // u8 sums wrap; negative padding crops
        let x = upload(ctx, DType::U8, &[5], &[1, 2, 3, 4, 5]);
        assert_eq!(download(ctx, &ctx.window_reduce(WindowOp::Sum, &x, &[2], &[1], &[(-1, 2)], &[1]).unwrap()), vec![5, 7, 9, 5, 0]);
        let x = upload(ctx, DType::U8, &[3], &[200, 100, 3]);
        assert_eq!(download(ctx, &ctx.window_reduce(WindowOp::Sum, &x, &[2], &[1], &[(0, 0)], &[1]).unwrap()), vec![44, 103]);
        // s16's min_binary is -32678 in Nx 0.7.2
        let x = upload(ctx, DType::S16, &[2], &[(-32700i64 as u64) & 0xFFFF, 0x8000]);
        let y = ctx.window_reduce(WindowOp::Max, &x, &[1], &[1], &[(1, 0)], &[1]).unwrap();
        assert_eq!(download(ctx, &y), vec![(-32678i64 as u64) & 0xFFFF; 3]);
        // dilation with padding
        let x = upload(ctx, DType::F32, &[5], &f32s(&[1.0, 2.0, 3.0, 4.0, 5.0]));
        let y = ctx.window_reduce(WindowOp::Max, &x, &[2], &[1], &[(3, 3)], &[2]).unwrap();
        assert_eq!(download(ctx, &y), f32s(&[f32::NEG_INFINITY, 1.0, 2.0, 3.0, 4.0, 5.0, 4.0, 5.0, f32::NEG_INFINITY]));
        // NaN propagates
        let x = upload(ctx, DType::F32, &[3], &f32s(&[1.0, f32::NAN, 3.0]));
        assert_eq!(download(ctx, &ctx.window_reduce(WindowOp::Max, &x, &[2], &[1], &[(0, 0)], &[1]).unwrap()), vec![0x7FC0_0000; 2]);
    });
}

#[test]
fn window_shape_errors() {
    on_engine(|ctx| {
        let x = upload(ctx, DType::F32, &[3], &[0, 0, 0]);
        assert!(ctx.window_reduce(WindowOp::Sum, &x, &[4], &[1], &[(0, 0)], &[1]).is_err());
        assert!(ctx.window_reduce(WindowOp::Sum, &x, &[2], &[0], &[(0, 0)], &[1]).is_err());
        assert!(ctx.window_reduce(WindowOp::Sum, &x, &[2, 1], &[1], &[(0, 0)], &[1]).is_err());
        assert!(ctx.window_reduce(WindowOp::Sum, &x, &[2], &[1], &[(0, -2)], &[1]).is_err());
        assert!(ctx.window_reduce(WindowOp::Sum, &x, &[2], &[1], &[(0, 0)], &[3]).is_err());
    });
}

// ---- window scatter ----

#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
fn ref_scatter(op: ScatterOp, t: DType, shape: &[usize], data: &[u64], src_t: DType, src: &[u64], init_t: DType, init: u64, out: DType, win: &[usize], st: &[usize], pad: &[(i64, i64)]) -> Vec<u64> {
    let rank = shape.len();
    let wshape = window_output_shape(shape, win, st, pad, &vec![1; rank]).unwrap();
    let init_v = read(init_t, init);
    // padding value: init converted to the tensor's type
    let padv = read(t, write(t, init_v));
    let start = read(out, write(out, init_v));
    let mut acc = vec![start; numel(shape)];
    for w in 0..numel(&wshape) {
        let oc = coords(&wshape, w);
        let mut best = N::I(0);
        let mut chosen: Option<usize> = None;
        for k in 0..numel(win) {
            let wc = coords(win, k);
            let mut ic = vec![0; rank];
            let mut inside = true;
            for d in 0..rank {
                let q = (oc[d] * st[d] + wc[d]) as i64 - pad[d].0;
                if q < 0 || q >= shape[d] as i64 {
                    inside = false;
                } else {
                    ic[d] = q as usize;
                }
            }
            let v = if inside { read(t, data[flat_of(shape, &ic)]) } else { padv };
            let take = k == 0
                || match cmp(v, best) {
                    Some(Ordering::Equal) => true,
                    Some(Ordering::Greater) => op == ScatterOp::Max,
                    Some(Ordering::Less) => op == ScatterOp::Min,
                    None => false,
                };
            if take {
                best = v;
                chosen = inside.then(|| flat_of(shape, &ic));
            }
        }
        if let Some(p) = chosen {
            let s = read(src_t, src[w]);
            let sum = match (s, acc[p]) {
                (N::I(a), N::I(b)) => N::I(a + b),
                (a, b) => N::F(a.f() + b.f()),
            };
            acc[p] = read(out, write(out, sum));
        }
    }
    acc.into_iter().map(|v| write(out, v)).collect()
}

#[allow(clippy::too_many_arguments)]
fn check_scatter(ctx: &Context, f: &mut Failures, op: ScatterOp, x: &Tensor, data: &[u64], src_t: DType, init_t: DType, out: DType, win: &[usize], st: &[usize], pad: &[(i64, i64)], rng: &mut Rng) {
    let t = x.dtype();
    let shape = x.shape().to_vec();
    let wshape = window_output_shape(&shape, win, st, pad, &vec![1; shape.len()]).unwrap();
    // small source values so sums stay readable; a few specials
    let src: Vec<u64> = (0..numel(&wshape))
        .map(|i| if i % 7 == 3 { random_values(src_t, 1, rng)[0] } else if src_t.is_float() { write(src_t, N::F(rng.range(-20, 20) as f64 * 0.375)) } else { write(src_t, N::I(rng.range(-20, 60) as i128)) })
        .collect();
    let init = if init_t.is_float() { write(init_t, N::F(rng.range(-4, 4) as f64 * 0.5)) } else { write(init_t, N::I(rng.range(0, 5) as i128)) };
    let source = upload(ctx, src_t, &wshape, &src);
    let init_x = upload(ctx, init_t, &[], &[init]);
    let before = ctx.stats().dispatches;
    let y = ctx.window_scatter(op, x, &source, &init_x, win, st, pad, out).unwrap();
    assert!(ctx.stats().dispatches >= before + 2, "window_scatter should dispatch two passes");
    assert_eq!(y.shape(), &shape[..]);
    let got = download(ctx, &y);
    let want = ref_scatter(op, t, &shape, data, src_t, &src, init_t, init, out, win, st, pad);
    for i in 0..want.len() {
        f.check(
            || format!("{op:?} t {t} src {src_t} init {init_t} -> {out} shape {shape:?} win {win:?} st {st:?} pad {pad:?} at {:?}: got {} want {}", coords(&shape, i), show(out, got[i]), show(out, want[i])),
            got[i],
            want[i],
        );
    }
}

/// Values with many ties (small integers), some NaN/±Inf/±0 for floats.
fn tie_values(t: DType, n: usize, rng: &mut Rng) -> Vec<u64> {
    (0..n)
        .map(|i| {
            if t.is_float() && i % 5 == 2 {
                let sp = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0];
                write(t, N::F(sp[rng.below(5) as usize]))
            } else if t.is_float() {
                write(t, N::F(rng.range(-3, 3) as f64))
            } else {
                write(t, N::I(rng.range(0, 4) as i128))
            }
        })
        .collect()
}

#[test]
fn window_scatter_every_dtype() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(21);
        for t in DType::ALL {
            for op in [ScatterOp::Max, ScatterOp::Min] {
                for (shape, win, st, pad) in [
                    (vec![6, 7], vec![2, 3], vec![2, 2], vec![(0, 0), (1, 1)]),
                    (vec![5, 4], vec![3, 2], vec![1, 1], vec![(1, -1), (2, 0)]),
                ] {
                    let data = tie_values(t, numel(&shape), &mut rng);
                    let x = upload(ctx, t, &shape, &data);
                    check_scatter(ctx, &mut f, op, &x, &data, t, t, t, &win, &st, &pad, &mut rng);
                }
            }
        }
        f.finish("window_scatter_every_dtype");
    });
}

#[test]
fn window_scatter_mixed_types_and_views() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(22);
        // integer tensor, float source/init: elements compared exactly (2^40 + 1 > 2^40 although
        // they are equal as f32)
        let data: Vec<u64> = (0..24).map(|i| write(DType::S64, N::I((1 << 40) + (i % 3) as i128))).collect();
        let x = upload(ctx, DType::S64, &[4, 6], &data);
        for op in [ScatterOp::Max, ScatterOp::Min] {
            check_scatter(ctx, &mut f, op, &x, &data, DType::F32, DType::F32, DType::F32, &[2, 2], &[2, 2], &[(0, 0), (0, 0)], &mut rng);
            // s8 tensor, u8 source, s16 init -> s16 output
            let d8 = tie_values(DType::S8, 24, &mut rng);
            let x8 = upload(ctx, DType::S8, &[4, 6], &d8);
            check_scatter(ctx, &mut f, op, &x8, &d8, DType::U8, DType::S16, DType::S16, &[3, 2], &[1, 2], &[(1, 1), (0, 1)], &mut rng);
            // f16 tensor, f32 source, f16 init -> f32; transposed tensor view; window over all
            let base = tie_values(DType::F16, 30, &mut rng);
            let xv = upload(ctx, DType::F16, &[5, 6], &base).transpose(&[1, 0]).unwrap();
            let vdata: Vec<u64> = (0..30).map(|i| { let c = coords(&[6, 5], i); base[c[1] * 6 + c[0]] }).collect();
            check_scatter(ctx, &mut f, op, &xv, &vdata, DType::F32, DType::F16, DType::F32, &[2, 3], &[2, 1], &[(0, 0), (2, 2)], &mut rng);
            // rank 1 and rank 3
            let d1 = tie_values(DType::F64, 9, &mut rng);
            let x1 = upload(ctx, DType::F64, &[9], &d1);
            check_scatter(ctx, &mut f, op, &x1, &d1, DType::F64, DType::F64, DType::F64, &[3], &[2], &[(1, 2)], &mut rng);
            let d3 = tie_values(DType::S32, 2 * 3 * 4, &mut rng);
            let x3 = upload(ctx, DType::S32, &[2, 3, 4], &d3);
            check_scatter(ctx, &mut f, op, &x3, &d3, DType::S32, DType::S32, DType::S32, &[1, 2, 2], &[1, 1, 2], &[(0, 0), (0, 1), (1, 1)], &mut rng);
        }
        f.finish("window_scatter_mixed_types_and_views");
    });
}

/// Nx.window_scatter_max/min doc examples and a tie case, as Nx 0.7.2 prints them.
#[test]
fn window_scatter_pinned_from_nx() {
    on_engine(|ctx| {
        let s64 = |v: &[i64]| v.iter().map(|&x| x as u64).collect::<Vec<_>>();
        let t = upload(ctx, DType::S64, &[4, 4], &s64(&[7, 2, 5, 3, 3, 8, 9, 3, 1, 5, 7, 5, 0, 6, 2, 8]));
        let src = upload(ctx, DType::S64, &[2, 2], &s64(&[2, 6, 3, 1]));
        let zero = upload(ctx, DType::S64, &[], &[0]);
        let y = ctx.window_scatter(ScatterOp::Max, &t, &src, &zero, &[2, 2], &[2, 2], &[(0, 0), (0, 0)], DType::S64).unwrap();
        assert_eq!(download(ctx, &y), s64(&[0, 0, 0, 0, 0, 2, 6, 0, 0, 0, 0, 0, 0, 3, 0, 1]));
        let t = upload(ctx, DType::S64, &[4, 6], &s64(&[7, 2, 5, 3, 10, 2, 3, 8, 9, 3, 4, 2, 1, 5, 7, 5, 6, 1, 0, 6, 2, 7, 2, 8]));
        let y = ctx.window_scatter(ScatterOp::Min, &t, &src, &zero, &[2, 3], &[2, 3], &[(0, 0), (0, 0)], DType::S64).unwrap();
        assert_eq!(download(ctx, &y), s64(&[0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 1, 3, 0, 0, 0, 0, 0]));
        // ties select the last equal element
        let ones = upload(ctx, DType::F32, &[3], &[0x3F80_0000; 3]);
        let src = upload(ctx, DType::F32, &[2], &[5.0f32.to_bits() as u64, 7.0f32.to_bits() as u64]);
        let z = upload(ctx, DType::F32, &[], &[0]);
        let y = ctx.window_scatter(ScatterOp::Max, &ones, &src, &z, &[2], &[1], &[(0, 0)], DType::F32).unwrap();
        assert_eq!(download(ctx, &y), vec![0, 5.0f32.to_bits() as u64, 7.0f32.to_bits() as u64]);
        // an s64 tensor compared exactly; f32 source and init
        let t = upload(ctx, DType::S64, &[2], &[(1 << 40) + 1, 1 << 40]);
        let src = upload(ctx, DType::F32, &[1], &[5.0f32.to_bits() as u64]);
        let y = ctx.window_scatter(ScatterOp::Max, &t, &src, &z, &[2], &[1], &[(0, 0)], DType::F32).unwrap();
        assert_eq!(download(ctx, &y), vec![5.0f32.to_bits() as u64, 0]);
        // NaN is selected only as a window's first element
        let nan = f32::NAN.to_bits() as u64;
        let t = upload(ctx, DType::F32, &[4], &[nan, 0x3F80_0000, 0, nan]);
        let src = upload(ctx, DType::F32, &[3], &[5.0f32.to_bits() as u64, 6.0f32.to_bits() as u64, 7.0f32.to_bits() as u64]);
        let y = ctx.window_scatter(ScatterOp::Min, &t, &src, &z, &[2], &[1], &[(0, 0)], DType::F32).unwrap();
        assert_eq!(download(ctx, &y), vec![5.0f32.to_bits() as u64, 0, 13.0f32.to_bits() as u64, 0]);
    });
}
