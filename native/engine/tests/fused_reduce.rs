//! Reductions with their prologue and epilogue fused (`Context::record_reduce_fused`): every
//! result must equal, bit for bit, the unfused sequence it stands for — `map` of the prologue
//! into a temporary, the plain reduction of that temporary, `map` of the epilogue with the
//! reduced value broadcast back — over every strategy, dtype, axis layout and view, special
//! values and empty tensors included; a few cases are also checked against CPU references, and
//! softmax and layernorm against f64 references, with their dispatch counts asserted.
//!
//! Every test runs alone (`on_engine_alone`): dispatch counts are read from the global counters.
//!
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test --release -p nx_vulkan_engine --test fused_reduce

mod common;
use common::*;
use nx_vulkan_engine::reduce::{
    epilogue_in_kernel, fused_reduce_dispatches, reduction_strategy, row_reduction_fits, ArgOp, Finish, FusedReduce, ReduceOp, Reduction, RowReduction, Strategy,
    TieBreak,
};
use nx_vulkan_engine::*;

fn un(op: UnaryOp, a: Expr, t: DType) -> Expr {
    Expr::unary(op, a, t)
}
fn bin(op: BinaryOp, a: Expr, b: Expr, t: DType) -> Expr {
    Expr::binary(op, a, b, t)
}
fn cnst(v: f64, t: DType) -> Expr {
    Expr::Const { value: Scalar::F(v), dtype: t }
}

/// The reduction's result shape with the reduced axes kept as 1s (broadcastable back).
fn kept_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    (0..shape.len()).map(|d| if axes.contains(&d) { 1 } else { shape[d] }).collect()
}

/// One fused reduction's description (owned, so cases can be built before tensors exist).
struct Case {
    op: Reduction,
    prologue: Expr,
    inputs: Vec<Tensor>,
    shape: Vec<usize>,
    axes: Vec<usize>,
    out: DType,
    epilogue: Vec<Expr>,
    finish: Option<Finish>,
}

/// The fused result: (reduced bits, each epilogue output's bits), and the dispatches recorded.
fn fused(ctx: &Context, c: &Case) -> (Vec<u8>, Vec<Vec<u8>>, u64) {
    let in_types: Vec<DType> = c.inputs.iter().map(|t| t.dtype()).collect();
    let mut epi_types = in_types.clone();
    epi_types.push(c.out);
    let out = ctx.empty(c.out, &kept_shape(&c.shape, &c.axes)).unwrap();
    let epi_out: Vec<Tensor> = c.epilogue.iter().map(|e| ctx.empty(e.dtype(&epi_types).unwrap(), &c.shape).unwrap()).collect();
    let before = ctx.stats().dispatches;
    let mut batch = ctx.batch().unwrap();
    let r = FusedReduce {
        op: c.op,
        prologue: c.prologue.clone(),
        inputs: c.inputs.iter().collect(),
        shape: c.shape.clone(),
        axes: c.axes.clone(),
        out: &out,
        epilogue: c.epilogue.iter().cloned().zip(epi_out.iter()).collect(),
    };
    ctx.record_reduce_finished(&mut batch, &r, c.finish.as_ref()).unwrap();
    batch.finish().unwrap();
    let dispatches = ctx.stats().dispatches - before;
    (ctx.download(&out).unwrap(), epi_out.iter().map(|t| ctx.download(t).unwrap()).collect(), dispatches)
}

/// The same through the unfused sequence of plain ops.
fn unfused(ctx: &Context, c: &Case) -> (Vec<u8>, Vec<Vec<u8>>) {
    let inputs: Vec<&Tensor> = c.inputs.iter().collect();
    let tmp = ctx.map_multi(std::slice::from_ref(&c.prologue), &inputs, &c.shape).unwrap().remove(0);
    let red_t = c.finish.as_ref().map_or(c.out, |f| f.reduced);
    let red = match c.op {
        Reduction::Reduce(op) => ctx.reduce(op, &tmp, &c.axes, true, red_t).unwrap(),
        Reduction::Arg { op, tie_break } => {
            let axis = match c.axes[..] {
                [a] => Some(a),
                _ => {
                    assert_eq!(c.axes, (0..c.shape.len()).collect::<Vec<_>>(), "arg cases reduce one axis or all");
                    None
                }
            };
            let r = ctx.arg_reduce(op, &tmp, axis, true, tie_break, red_t).unwrap();
            if axis.is_none() { r.reshape(&vec![1; c.shape.len()]).unwrap() } else { r }
        }
    };
    // the finish: a map over the kept positions (the inputs sliced to index 0 along the
    // reduced axes)
    let red = match &c.finish {
        None => red,
        Some(f) => {
            let keep1 = kept_shape(&c.shape, &c.axes);
            let at_kept: Vec<Tensor> = c.inputs.iter().map(|t| t.slice(&vec![0; keep1.len()], &keep1, &vec![1; keep1.len()]).unwrap()).collect();
            let mut all: Vec<&Tensor> = at_kept.iter().collect();
            all.push(&red);
            ctx.map_multi(std::slice::from_ref(&f.expr), &all, &keep1).unwrap().remove(0)
        }
    };
    let epi = if c.epilogue.is_empty() {
        vec![]
    } else {
        let back = red.broadcast_to(&c.shape).unwrap();
        let mut all = inputs.clone();
        all.push(&back);
        ctx.map_multi(&c.epilogue, &all, &c.shape).unwrap().iter().map(|t| ctx.download(t).unwrap()).collect()
    };
    (ctx.download(&red).unwrap(), epi)
}

fn expect_same(ctx: &Context, c: &Case, what: &str) -> (Vec<u8>, Vec<Vec<u8>>) {
    let (r, e, dispatches) = fused(ctx, c);
    let (ur, ue) = unfused(ctx, c);
    assert_eq!(r, ur, "{what}: reduced bits differ from the unfused sequence");
    assert_eq!(e.len(), ue.len());
    for (q, (a, b)) in e.iter().zip(&ue).enumerate() {
        if a != b {
            let t = c.epilogue[q].dtype(&c.inputs.iter().map(|t| t.dtype()).chain([c.out]).collect::<Vec<_>>()).unwrap();
            let (a, b) = (from_bytes(t, a), from_bytes(t, b));
            let i = a.iter().zip(&b).position(|(x, y)| x != y).unwrap();
            panic!("{what}: epilogue {q} differs at element {i}: fused {} unfused {}", show(t, a[i]), show(t, b[i]));
        }
    }
    let red_t = c.finish.as_ref().map_or(c.out, |f| f.reduced);
    let want = fused_reduce_dispatches(&c.shape, &c.axes, red_t, !c.epilogue.is_empty(), c.finish.is_some()).unwrap();
    assert_eq!(dispatches as usize, want, "{what}: dispatches");
    (r, e)
}

/// A view of shape `shape` over fresh data of type `t`: contiguous, transposed, strided
/// (every other element, from an offset), reversed, or broadcast along some axes.
fn view(ctx: &Context, t: DType, shape: &[usize], kind: u64, rng: &mut Rng) -> Tensor {
    let rank = shape.len();
    let data = |n: usize, rng: &mut Rng| random_values(t, n, rng);
    match kind {
        1 if rank >= 2 => {
            // stored with its axes reversed, read transposed back
            let perm: Vec<usize> = (0..rank).rev().collect();
            let stored: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
            let n = stored.iter().product();
            upload(ctx, t, &stored, &data(n, rng)).transpose(&perm).unwrap()
        }
        2 => {
            let big: Vec<usize> = shape.iter().map(|&d| 2 * d + 1).collect();
            let n = big.iter().product();
            let start = vec![1; rank];
            upload(ctx, t, &big, &data(n, rng)).slice(&start, shape, &vec![2; rank]).unwrap()
        }
        3 => {
            let n = shape.iter().product();
            upload(ctx, t, shape, &data(n, rng)).reverse(&(0..rank).filter(|d| d % 2 == 0).collect::<Vec<_>>()).unwrap()
        }
        4 => {
            let small: Vec<usize> = shape.iter().map(|&d| if rng.below(2) == 0 { 1 } else { d }).collect();
            let n = small.iter().product();
            upload(ctx, t, &small, &data(n, rng)).broadcast_to(shape).unwrap()
        }
        _ => {
            let n = shape.iter().product();
            upload(ctx, t, shape, &data(n, rng))
        }
    }
}

/// A prologue over x = input 0 and y = input 1 of type `t` (and iotas over `rank` axes).
fn prologue(t: DType, rank: usize, rng: &mut Rng) -> Expr {
    let (x, y) = (Expr::Input(0), Expr::Input(1));
    if t.is_float() {
        match rng.below(8) {
            0 => x,
            1 => bin(BinaryOp::Multiply, x, y, t),
            2 => un(UnaryOp::Exp, bin(BinaryOp::Subtract, x, y, t), t),
            3 => Expr::convert(bin(BinaryOp::Add, x, y, t), DType::F64),
            4 => bin(BinaryOp::Add, x, Expr::convert(Expr::Iota { axis: Some(rng.below(rank as u64) as usize), dtype: DType::S32 }, t), t),
            5 => Expr::select(bin(BinaryOp::Greater, x.clone(), y.clone(), DType::U8), x, un(UnaryOp::Negate, y, t), t),
            6 => bin(BinaryOp::Divide, x, y, t),
            _ => bin(BinaryOp::Multiply, bin(BinaryOp::Subtract, x.clone(), y, t), bin(BinaryOp::Add, x, cnst(0.25, t), t), t),
        }
    } else {
        match rng.below(6) {
            0 => x,
            1 => bin(BinaryOp::Multiply, x, y, t),
            2 => bin(BinaryOp::Add, x, Expr::convert(Expr::Iota { axis: None, dtype: DType::S64 }, t), t),
            3 => Expr::convert(bin(BinaryOp::Subtract, x, y, t), DType::S64),
            4 => Expr::select(bin(BinaryOp::Less, x.clone(), y.clone(), DType::U8), x, y, t),
            _ => bin(BinaryOp::Add, x, Expr::convert(Expr::Iota { axis: Some(rng.below(rank as u64) as usize), dtype: DType::S64 }, t), t),
        }
    }
}

/// An epilogue over x, y and the reduced value r = input 2 of type `out`.
fn epilogue(t: DType, out: DType, rng: &mut Rng) -> Vec<Expr> {
    let (x, y, r) = (Expr::Input(0), Expr::Input(1), Expr::Input(2));
    let et = if out.is_float() || t.is_float() { if out.is_float() { out } else { t } } else { DType::S64 };
    match rng.below(4) {
        0 => vec![bin(BinaryOp::Subtract, x, r, et)],
        1 if et.is_float() => vec![bin(BinaryOp::Divide, un(UnaryOp::Exp, bin(BinaryOp::Subtract, x, y, et), et), r, et)],
        2 => vec![bin(BinaryOp::Subtract, x, r.clone(), et), bin(BinaryOp::Multiply, r, y, et)],
        _ => vec![r],
    }
}

/// A shape and reduced axes aimed at one strategy.
fn shape_for(strategy: u64, rng: &mut Rng) -> (Vec<usize>, Vec<usize>) {
    let odd = |rng: &mut Rng, lo: u64, hi: u64| (lo + rng.below(hi - lo)) as usize | 1;
    match strategy {
        // PerOutput: short reductions
        0 => match rng.below(5) {
            0 => (vec![odd(rng, 3, 40), odd(rng, 3, 60)], vec![1]),
            3 => (vec![odd(rng, 3, 9), odd(rng, 3, 9), odd(rng, 3, 20)], vec![2]),
            4 => (vec![odd(rng, 3, 7), odd(rng, 3, 7), odd(rng, 5, 15), odd(rng, 5, 15)], vec![2, 3]),
            1 => (vec![odd(rng, 3, 9), odd(rng, 3, 20), odd(rng, 3, 9)], vec![0, 2]),
            _ => (vec![odd(rng, 3, 30), odd(rng, 3, 7), odd(rng, 3, 5)], vec![1]),
        },
        // PerGroup
        1 => match rng.below(4) {
            0 => (vec![odd(rng, 3, 40), odd(rng, 300, 2000)], vec![1]),
            3 => (vec![odd(rng, 3, 9), odd(rng, 20, 40), odd(rng, 20, 40)], vec![1, 2]),
            1 => (vec![odd(rng, 300, 700), odd(rng, 3, 9)], vec![0]),
            _ => (vec![odd(rng, 20, 40), odd(rng, 3, 9), odd(rng, 20, 40)], vec![0, 2]),
        },
        // Split: long reductions into few outputs
        _ => match rng.below(4) {
            0 => (vec![odd(rng, 1, 4), odd(rng, 8200, 12000)], vec![1]),
            3 => (vec![odd(rng, 1, 4), odd(rng, 90, 110), odd(rng, 90, 110)], vec![1, 2]),
            1 => (vec![odd(rng, 9000, 11000), odd(rng, 1, 4)], vec![0]),
            _ => (vec![odd(rng, 90, 110), odd(rng, 1, 3), odd(rng, 90, 110)], vec![0, 2]),
        },
    }
}

#[test]
fn random_fused_reductions_equal_the_unfused_sequence() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(0x5eed_f00d);
        let types = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::S32, DType::U8];
        let mut seen = [0usize; 3];
        for case in 0..72 {
            let t = types[case % types.len()];
            let (shape, axes) = shape_for((case / types.len()) as u64 % 3, &mut rng);
            let x = view(ctx, t, &shape, rng.below(4), &mut rng);
            let y = view(ctx, t, &shape, [0, 1, 4, 4][rng.below(4) as usize], &mut rng);
            let pro = prologue(t, shape.len(), &mut rng);
            let vt = pro.dtype(&[t, t]).unwrap();
            let op = [ReduceOp::Sum, ReduceOp::Product, ReduceOp::Max, ReduceOp::Min, ReduceOp::All, ReduceOp::Any][rng.below(6) as usize];
            let out = match op {
                ReduceOp::All | ReduceOp::Any => DType::U8,
                ReduceOp::Sum | ReduceOp::Product if vt.is_integer() && rng.below(2) == 0 => DType::S64,
                _ => vt,
            };
            let (finish, out) = match rng.below(3) {
                0 => {
                    let r = Expr::Input(2);
                    let (expr, fin_t) = if out.is_float() {
                        let n: usize = axes.iter().map(|&a| shape[a]).product();
                        (bin(BinaryOp::Divide, r, cnst(n as f64, out), out), out)
                    } else if out == DType::U8 {
                        (Expr::convert(r, DType::F32), DType::F32)
                    } else {
                        (bin(BinaryOp::Multiply, r, Expr::Const { value: Scalar::I(-3), dtype: DType::S64 }, DType::S64), DType::S64)
                    };
                    (Some(Finish { reduced: out, expr }), fin_t)
                }
                _ => (None, out),
            };
            let epi = if rng.below(3) > 0 { epilogue(t, out, &mut rng) } else { vec![] };
            let red_t = finish.as_ref().map_or(out, |f| f.reduced);
            let strategy = reduction_strategy(&shape, &axes, red_t).unwrap();
            seen[match strategy {
                Strategy::PerOutput => 0,
                Strategy::PerGroup => 1,
                Strategy::Split { .. } => 2,
            }] += 1;
            let c = Case { op: op.into(), prologue: pro, inputs: vec![x, y], shape, axes, out, epilogue: epi, finish };
            let what = format!(
                "case {case}: {op:?} {t} {:?} over {:?} -> {out} {strategy:?} pro {:?} epi {:?} finish {:?}",
                c.shape, c.axes, c.prologue, c.epilogue, c.finish
            );
            expect_same(ctx, &c, &what);
        }
        assert!(seen.iter().all(|&n| n >= 10), "each strategy covered: {seen:?}");
    });
}

#[test]
fn fused_arg_reductions_equal_the_unfused_sequence() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(77);
        for case in 0..24 {
            let t = [DType::F32, DType::F16, DType::S32, DType::F64][case % 4];
            let (shape, _) = shape_for(case as u64 % 3, &mut rng);
            let axes = match rng.below(3) {
                0 => (0..shape.len()).collect(),
                _ => vec![rng.below(shape.len() as u64) as usize],
            };
            let x = view(ctx, t, &shape, rng.below(5), &mut rng);
            let y = view(ctx, t, &shape, 4, &mut rng);
            let pro = prologue(t, shape.len(), &mut rng);
            let op = if rng.below(2) == 0 { ArgOp::ArgMax } else { ArgOp::ArgMin };
            let tie_break = if rng.below(2) == 0 { TieBreak::Low } else { TieBreak::High };
            let epi = if rng.below(2) == 0 { vec![bin(BinaryOp::Add, Expr::Input(2), Expr::Input(1), DType::F64)] } else { vec![] };
            let finish = (rng.below(2) == 0).then(|| Finish { reduced: DType::S64, expr: Expr::convert(Expr::Input(2), DType::F32) });
            let out = if finish.is_some() { DType::F32 } else { DType::S64 };
            let c = Case { op: Reduction::Arg { op, tie_break }, prologue: pro, inputs: vec![x, y], shape, axes, out, epilogue: epi, finish };
            let what = format!("arg case {case}: {op:?} {tie_break:?} {t} {:?} over {:?} pro {:?}", c.shape, c.axes, c.prologue);
            expect_same(ctx, &c, &what);
        }
    });
}

#[test]
fn special_values_and_empty_tensors() {
    on_engine_alone(|ctx| {
        for t in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let sp = specials(t);
            for (shape, axes) in [(vec![sp.len(), 3], vec![0]), (vec![3, sp.len()], vec![1]), (vec![3, 300], vec![1])] {
                let n: usize = shape.iter().product();
                let bits: Vec<u64> = (0..n).map(|i| sp[(i * 7) % sp.len()]).collect();
                let x = upload(ctx, t, &shape, &bits);
                let y = upload(ctx, t, &shape, &bits.iter().rev().copied().collect::<Vec<_>>());
                for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Any] {
                    let out = if op == ReduceOp::Any { DType::U8 } else { t };
                    let c = Case {
                        op: op.into(),
                        prologue: bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), t),
                        inputs: vec![x.clone(), y.clone()],
                        shape: shape.clone(),
                        axes: axes.clone(),
                        out,
                        epilogue: vec![bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(2), t)],
                        finish: None,
                    };
                    expect_same(ctx, &c, &format!("specials {t} {op:?} {shape:?}"));
                }
            }
        }
        // empty: no output element; outputs of the identity with an empty epilogue
        for (shape, axes) in [(vec![0, 5], vec![1]), (vec![5, 0], vec![1]), (vec![0], vec![0]), (vec![4, 0, 3], vec![0, 2])] {
            let x = ctx.empty(DType::F32, &shape).unwrap();
            for op in [ReduceOp::Sum, ReduceOp::Product, ReduceOp::Max] {
                let c = Case {
                    op: op.into(),
                    prologue: un(UnaryOp::Exp, Expr::Input(0), DType::F32),
                    inputs: vec![x.clone(), x.clone()],
                    shape: shape.clone(),
                    axes: axes.clone(),
                    out: DType::F32,
                    epilogue: vec![bin(BinaryOp::Add, Expr::Input(0), Expr::Input(2), DType::F32)],
                    finish: None,
                };
                expect_same(ctx, &c, &format!("empty {shape:?} over {axes:?} {op:?}"));
            }
        }
    });
}

/// Integer work is exact, so a CPU model gives the bits: sum over axis 1 of x*y + iota(axis 0)
/// (s32, wrapping), accumulated in s64, with epilogue x - r (s64).
#[test]
fn integer_sum_with_prologue_and_epilogue_matches_cpu() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(5);
        for (rows, cols) in [(7usize, 33usize), (5, 1001), (3, 20001)] {
            let xs: Vec<i32> = (0..rows * cols).map(|_| rng.range(-70000, 70000) as i32).collect();
            let ys: Vec<i32> = (0..rows * cols).map(|_| rng.range(-70000, 70000) as i32).collect();
            let bits = |v: &[i32]| v.iter().map(|&a| a as u32 as u64).collect::<Vec<_>>();
            let x = upload(ctx, DType::S32, &[rows, cols], &bits(&xs));
            let y = upload(ctx, DType::S32, &[rows, cols], &bits(&ys));
            let iota = Expr::convert(Expr::Iota { axis: Some(0), dtype: DType::S32 }, DType::S32);
            let c = Case {
                op: ReduceOp::Sum.into(),
                prologue: bin(BinaryOp::Add, bin(BinaryOp::Multiply, Expr::Input(0), Expr::Input(1), DType::S32), iota, DType::S32),
                inputs: vec![x, y],
                shape: vec![rows, cols],
                axes: vec![1],
                out: DType::S64,
                epilogue: vec![bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(2), DType::S64)],
                finish: None,
            };
            let (r, e) = expect_same(ctx, &c, &format!("s32 {rows}x{cols}"));
            let sums: Vec<i64> = (0..rows)
                .map(|i| (0..cols).map(|j| xs[i * cols + j].wrapping_mul(ys[i * cols + j]).wrapping_add(i as i32) as i64).sum())
                .collect();
            let got: Vec<i64> = from_bytes(DType::S64, &r).iter().map(|&b| b as i64).collect();
            assert_eq!(got, sums);
            let got_e: Vec<i64> = from_bytes(DType::S64, &e[0]).iter().map(|&b| b as i64).collect();
            let want_e: Vec<i64> = (0..rows * cols).map(|k| xs[k] as i64 - sums[k / cols]).collect();
            assert_eq!(got_e, want_e);
        }
    });
}

/// Max of |x - y| over f32 is exact whatever the order (no NaN here): a CPU model gives it.
#[test]
fn float_max_with_prologue_matches_cpu() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(9);
        for (shape, axes) in [(vec![9usize, 131usize, 5usize], vec![1usize]), (vec![40, 700], vec![1]), (vec![12001, 3], vec![0])] {
            let n: usize = shape.iter().product();
            let xs: Vec<f32> = (0..n).map(|_| (rng.range(-100000, 100000) as f32) / 64.0).collect();
            let ys: Vec<f32> = (0..n).map(|_| (rng.range(-100000, 100000) as f32) / 128.0).collect();
            let x = upload(ctx, DType::F32, &shape, &xs.iter().map(|v| v.to_bits() as u64).collect::<Vec<_>>());
            let y = upload(ctx, DType::F32, &shape, &ys.iter().map(|v| v.to_bits() as u64).collect::<Vec<_>>());
            let c = Case {
                op: ReduceOp::Max.into(),
                prologue: un(UnaryOp::Abs, bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), DType::F32), DType::F32),
                inputs: vec![x, y],
                shape: shape.clone(),
                axes: axes.clone(),
                out: DType::F32,
                epilogue: vec![],
                finish: None,
            };
            let (r, _) = expect_same(ctx, &c, &format!("max |x-y| {shape:?}"));
            let got: Vec<f32> = from_bytes(DType::F32, &r).iter().map(|&b| f32::from_bits(b as u32)).collect();
            let mut want = vec![f32::NEG_INFINITY; got.len()];
            for k in 0..n {
                let cs = coords(&shape, k);
                let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
                let o = kept.iter().fold(0, |acc, &d| acc * shape[d] + cs[d]);
                want[o] = want[o].max((xs[k] - ys[k]).abs());
            }
            assert_eq!(got, want, "{shape:?}");
        }
    });
}

/// Softmax over the last axis of [rows, cols] as the compiler will record it: a max, then a
/// sum of exp(x - max) whose epilogue writes exp(x - max) / sum. Returns (softmax, dispatches).
fn softmax_fused(ctx: &Context, x: &Tensor) -> (Tensor, u64) {
    let shape = x.shape().to_vec();
    let f = DType::F32;
    let m = ctx.empty(f, &[shape[0], 1]).unwrap();
    let s = ctx.empty(f, &[shape[0], 1]).unwrap();
    let y = ctx.empty(f, &shape).unwrap();
    let before = ctx.stats().dispatches;
    let mut batch = ctx.batch().unwrap();
    ctx.record_reduce(&mut batch, ReduceOp::Max, x, &[1], &m).unwrap();
    let mb = m.broadcast_to(&shape).unwrap();
    let e = un(UnaryOp::Exp, bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), f), f);
    let r = FusedReduce {
        op: ReduceOp::Sum.into(),
        prologue: e.clone(),
        inputs: vec![x, &mb],
        shape: shape.clone(),
        axes: vec![1],
        out: &s,
        epilogue: vec![(bin(BinaryOp::Divide, e, Expr::Input(2), f), &y)],
    };
    ctx.record_reduce_fused(&mut batch, &r).unwrap();
    batch.finish().unwrap();
    (y, ctx.stats().dispatches - before)
}

fn softmax_unfused(ctx: &Context, x: &Tensor) -> Tensor {
    let shape = x.shape().to_vec();
    let f = DType::F32;
    let m = ctx.reduce(ReduceOp::Max, x, &[1], true, f).unwrap().broadcast_to(&shape).unwrap();
    let e = ctx.map(&un(UnaryOp::Exp, bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), f), f), &[x, &m]).unwrap();
    let s = ctx.reduce(ReduceOp::Sum, &e, &[1], true, f).unwrap().broadcast_to(&shape).unwrap();
    ctx.map(&bin(BinaryOp::Divide, Expr::Input(0), Expr::Input(1), f), &[&e, &s]).unwrap()
}

fn f32_data(n: usize, rng: &mut Rng, scale: f32) -> Vec<f32> {
    (0..n).map(|_| (rng.range(-1_000_000, 1_000_000) as f32) / 1_000_000.0 * scale).collect()
}

#[test]
fn softmax_is_two_dispatches_and_equals_unfused_and_f64() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(11);
        // PerGroup (the [4096, 1024] layout at a lavapipe-friendly size), PerOutput, Split
        for (rows, cols, want) in [(512usize, 1024usize, 2u64), (700, 1001, 2), (4099, 100, 2), (3, 9001, 5)] {
            let xs = f32_data(rows * cols, &mut rng, 8.0);
            let x = upload(ctx, DType::F32, &[rows, cols], &xs.iter().map(|v| v.to_bits() as u64).collect::<Vec<_>>());
            let (y, dispatches) = softmax_fused(ctx, &x);
            assert_eq!(dispatches, want, "softmax {rows}x{cols} dispatches");
            assert_eq!(epilogue_in_kernel(&[rows, cols], &[1], DType::F32).unwrap(), want == 2);
            let got = ctx.download(&y).unwrap();
            assert_eq!(got, ctx.download(&softmax_unfused(ctx, &x)).unwrap(), "softmax {rows}x{cols}: fused != unfused");
            let got: Vec<f32> = from_bytes(DType::F32, &got).iter().map(|&b| f32::from_bits(b as u32)).collect();
            for i in 0..rows {
                let row = &xs[i * cols..(i + 1) * cols];
                let m = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
                let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
                for j in 0..cols {
                    let want = (row[j] as f64 - m).exp() / s;
                    let g = got[i * cols + j] as f64;
                    assert!((g - want).abs() <= 4e-6 * want.abs() + 1e-12, "softmax[{i},{j}] = {g}, f64 reference {want}");
                }
            }
        }
        // a new shape of the same structure compiles nothing
        let x = upload(ctx, DType::F32, &[300, 777], &f32_data(300 * 777, &mut rng, 4.0).iter().map(|v| v.to_bits() as u64).collect::<Vec<_>>());
        let before = ctx.stats().pipelines;
        softmax_fused(ctx, &x);
        assert_eq!(ctx.stats().pipelines, before, "kernels are keyed by structure, not shape");
    });
}

/// Short rows (256 < R <= 4096, `reduce::row_k`) are read with all of an invocation's loads
/// issued before any candidate is combined; for an epilogue that reads the prologue, the
/// prologue's values and the loaded bits are kept in registers and read where it would
/// evaluate the prologue (softmax's exp(x - max)) or load an input again. The fused results equal the unfused
/// sequence bit for bit for every float type under both precisions, special values included,
/// at row lengths on both edges of the path and just past it, and at rows one invocation
/// reduces (R = 1, 10, 16, 17: the general loop's round and lone loads); the profile shows
/// which kernels took the path, and that none ran on narrow workgroups (`exp` is library
/// math: `reduce::narrow_lanes` keeps 256 lanes).
#[test]
fn short_rows_keep_the_prologue_and_loads_for_the_epilogue() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(4242);
        for t in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            for (rows, cols) in [(9usize, 1usize), (4, 10), (3, 16), (5, 17), (3, 257), (5, 1024), (1, 4096), (2, 4097)] {
                for (math, with_quotient) in [(FloatMath::Exact, true), (FloatMath::Fast, true), (FloatMath::Exact, false), (FloatMath::Fast, false)] {
                    let shape = vec![rows, cols];
                    // finite rows (a NaN or Inf anywhere in a row makes the whole row NaN), and
                    // every other row with special values (subnormals, -0.0, Inf, NaN) too
                    let sp = specials(t);
                    let data: Vec<u64> = (0..rows * cols)
                        .map(|i| if (i / cols) % 2 == 1 && rng.below(16) == 0 { sp[rng.below(sp.len() as u64) as usize] } else { write(t, N::F(rng.range(-8000, 8000) as f64 / 1000.0)) })
                        .collect();
                    let x = upload(ctx, t, &shape, &data);
                    let m = ctx.reduce(ReduceOp::Max, &x, &[1], true, t).unwrap();
                    let mb = m.broadcast_to(&shape).unwrap();
                    let e = un(UnaryOp::Exp, bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), t), t);
                    // softmax's quotient (reads the prologue: kept values), and one output that
                    // reads x itself (alone: an epilogue loop that loads x again)
                    let mut epilogue = vec![bin(BinaryOp::Multiply, Expr::Input(0), Expr::Input(2), t)];
                    if with_quotient {
                        epilogue.insert(0, bin(BinaryOp::Divide, e.clone(), Expr::Input(2), t));
                    }
                    let s = ctx.empty(t, &[rows, 1]).unwrap();
                    let ys: Vec<Tensor> = epilogue.iter().map(|_| ctx.empty(t, &shape).unwrap()).collect();
                    ctx.stream.profile_start().unwrap();
                    let mut batch = ctx.batch().unwrap();
                    let r = FusedReduce {
                        op: ReduceOp::Sum.into(),
                        prologue: e.clone(),
                        inputs: vec![&x, &mb],
                        shape: shape.clone(),
                        axes: vec![1],
                        out: &s,
                        epilogue: epilogue.iter().cloned().zip(ys.iter()).collect(),
                    };
                    ctx.record_reduce_finished_with(&mut batch, math, &r, None).unwrap();
                    batch.finish().unwrap();
                    let kernels: Vec<String> = ctx.stream.profile_stop().unwrap().into_iter().map(|k| k.name).collect();
                    let what = format!("{t} {rows}x{cols} {math:?} quotient {with_quotient}");
                    let want = match cols {
                        257..=4096 => format!(" rowk{} ", cols.div_ceil(256)),
                        _ => String::new(),
                    };
                    assert_eq!(kernels.len(), 1, "{what}: one kernel, got {kernels:?}");
                    assert_eq!(kernels[0].contains(" rowk"), !want.is_empty(), "{what}: {}", kernels[0]);
                    assert!(kernels[0].contains(&want), "{what}: {}", kernels[0]);
                    // exp(x - max) is library math: 256 lanes (`reduce::narrow_lanes`)
                    assert!(!kernels[0].contains(" lanes"), "{what}: {}", kernels[0]);
                    // unfused: the prologue mapped, reduced, the epilogue mapped over it
                    let tmp = ctx.map_multi_with(math, std::slice::from_ref(&e), &[&x, &mb], &shape).unwrap().remove(0);
                    let red = ctx.reduce(ReduceOp::Sum, &tmp, &[1], true, t).unwrap();
                    assert_eq!(ctx.download(&s).unwrap(), ctx.download(&red).unwrap(), "{what}: sums differ");
                    let rb = red.broadcast_to(&shape).unwrap();
                    let want = ctx.map_multi_with(math, &epilogue, &[&x, &mb, &rb], &shape).unwrap();
                    for (q, (y, w)) in ys.iter().zip(&want).enumerate() {
                        let (a, b) = (from_bytes(t, &ctx.download(y).unwrap()), from_bytes(t, &ctx.download(w).unwrap()));
                        if let Some(i) = a.iter().zip(&b).position(|(p, q)| p != q) {
                            panic!("{what}: epilogue {q} differs at element {i}: fused {} unfused {}", show(t, a[i]), show(t, b[i]));
                        }
                        // the finite rows give finite values (so a misplaced value would show)
                        assert!(a[..cols].iter().all(|&v| read(t, v).f().is_finite()), "{what}: epilogue {q} row 0 not finite");
                    }
                }
            }
        }
    });
}

#[test]
fn layernorm_is_two_dispatches_and_equals_unfused_and_f64() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(12);
        let f = DType::F32;
        for (rows, cols) in [(256usize, 1024usize), (1000, 37)] {
            let n = cols as f64;
            let xs = f32_data(rows * cols, &mut rng, 3.0);
            let shape = [rows, cols];
            let x = upload(ctx, f, &shape, &xs.iter().map(|v| v.to_bits() as u64).collect::<Vec<_>>());
            let mean = |s: Expr| bin(BinaryOp::Divide, s, cnst(n, f), f);
            let centred = |s: Expr| bin(BinaryOp::Subtract, Expr::Input(0), mean(s), f);
            let sq = |s: Expr| bin(BinaryOp::Multiply, centred(s.clone()), centred(s), f);
            // (x - mean) / sqrt(var + eps), var = sum((x - mean)^2) / n
            let norm = |s: Expr, v: Expr| {
                let var = bin(BinaryOp::Divide, v, cnst(n, f), f);
                bin(BinaryOp::Divide, centred(s), un(UnaryOp::Sqrt, bin(BinaryOp::Add, var, cnst(1e-5, f), f), f), f)
            };
            // fused: sum; then sum of squares with the normalisation as epilogue
            let s = ctx.empty(f, &[rows, 1]).unwrap();
            let v = ctx.empty(f, &[rows, 1]).unwrap();
            let y = ctx.empty(f, &shape).unwrap();
            let fused = |narrow: bool| -> Vec<String> {
                ctx.narrow_rows.store(narrow, std::sync::atomic::Ordering::Relaxed);
                let before = ctx.stats().dispatches;
                ctx.stream.profile_start().unwrap();
                let mut batch = ctx.batch().unwrap();
                ctx.record_reduce(&mut batch, ReduceOp::Sum, &x, &[1], &s).unwrap();
                let sb = s.broadcast_to(&shape).unwrap();
                let r = FusedReduce {
                    op: ReduceOp::Sum.into(),
                    prologue: sq(Expr::Input(1)),
                    inputs: vec![&x, &sb],
                    shape: shape.to_vec(),
                    axes: vec![1],
                    out: &v,
                    epilogue: vec![(norm(Expr::Input(1), Expr::Input(2)), &y)],
                };
                ctx.record_reduce_fused(&mut batch, &r).unwrap();
                batch.finish().unwrap();
                assert_eq!(ctx.stats().dispatches - before, 2, "layernorm {rows}x{cols} dispatches");
                ctx.stream.profile_stop().unwrap().into_iter().map(|k| k.name).collect()
            };
            // on 256-invocation workgroups first, then (rows of 1024) both kernels on narrow
            // ones (`reduce::narrow_lanes`): the sum is plain, and the variance's prologue
            // costs no library call per element (its mean, a division, is row-constant) —
            // the same bits
            let kernels = fused(false);
            assert!(kernels.iter().all(|k| !k.contains(" lanes")), "{kernels:?}");
            let wide = ctx.download(&y).unwrap();
            let kernels = fused(true);
            let narrow = cols == 1024 && ctx.caps.subgroup_size <= 64;
            assert_eq!(kernels.iter().filter(|k| k.contains(" lanes64 ")).count(), if narrow { 2 } else { 0 }, "layernorm {rows}x{cols}: {kernels:?}");
            assert_eq!(ctx.download(&y).unwrap(), wide, "layernorm {rows}x{cols}: narrow workgroups changed bits");
            // unfused: every step its own op
            let s2 = ctx.reduce(ReduceOp::Sum, &x, &[1], true, f).unwrap().broadcast_to(&shape).unwrap();
            let d2 = ctx.map(&sq(Expr::Input(1)), &[&x, &s2]).unwrap();
            let v2 = ctx.reduce(ReduceOp::Sum, &d2, &[1], true, f).unwrap().broadcast_to(&shape).unwrap();
            let y2 = ctx.map(&norm(Expr::Input(1), Expr::Input(2)), &[&x, &s2, &v2]).unwrap();
            let got = ctx.download(&y).unwrap();
            assert_eq!(got, ctx.download(&y2).unwrap(), "layernorm {rows}x{cols}: fused != unfused");
            let got: Vec<f32> = from_bytes(f, &got).iter().map(|&b| f32::from_bits(b as u32)).collect();
            for i in 0..rows {
                let row: Vec<f64> = xs[i * cols..(i + 1) * cols].iter().map(|&v| v as f64).collect();
                let m = row.iter().sum::<f64>() / n;
                let var = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n;
                for j in 0..cols {
                    let want = (row[j] - m) / (var + 1e-5).sqrt();
                    let g = got[i * cols + j] as f64;
                    assert!((g - want).abs() <= 1e-4, "layernorm[{i},{j}] = {g}, f64 reference {want}");
                }
            }
        }
    });
}

#[test]
fn bad_arguments_are_errors() {
    on_engine_alone(|ctx| {
        let x = upload(ctx, DType::F32, &[4, 6], &[0; 24]);
        let run = |out: &Tensor, epi: Vec<(Expr, &Tensor)>, axes: Vec<usize>, op: Reduction| {
            let mut batch = ctx.batch().unwrap();
            let r = FusedReduce { op, prologue: Expr::Input(0), inputs: vec![&x], shape: vec![4, 6], axes, out, epilogue: epi };
            ctx.record_reduce_fused(&mut batch, &r).map(|_| ()).map_err(|e| e.to_string())
        };
        let good = ctx.empty(DType::F32, &[4]).unwrap();
        assert!(run(&good, vec![], vec![1], ReduceOp::Sum.into()).is_ok());
        let wrong_count = ctx.empty(DType::F32, &[6]).unwrap();
        assert!(run(&wrong_count, vec![], vec![1], ReduceOp::Sum.into()).unwrap_err().contains("4 elements"));
        assert!(run(&good, vec![], vec![2], ReduceOp::Sum.into()).unwrap_err().contains("out of range"));
        assert!(run(&good, vec![], vec![1], Reduction::Arg { op: ArgOp::ArgMax, tie_break: TieBreak::Low }).unwrap_err().contains("integer"));
        let wrong_type = ctx.empty(DType::F64, &[4, 6]).unwrap();
        let e = run(&good, vec![(Expr::Input(1), &wrong_type)], vec![1], ReduceOp::Sum.into()).unwrap_err();
        assert!(e.contains("epilogue"), "{e}");
        let transposed = ctx.empty(DType::F32, &[6, 4]).unwrap().transpose(&[1, 0]).unwrap();
        let e = run(&good, vec![(Expr::Input(1), &transposed)], vec![1], ReduceOp::Sum.into()).unwrap_err();
        assert!(e.contains("epilogue"), "{e}");
    });
}

/// logsumexp over the last axis: a max, then a sum of exp(x - max) finished as
/// log(sum) + max — 2 dispatches (4 under Split: 2 + 1 + the finish).
#[test]
fn logsumexp_is_two_dispatches_and_equals_unfused_and_f64() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(13);
        let f = DType::F32;
        for (rows, cols, want) in [(512usize, 1024usize, 2u64), (2001, 65, 2), (2, 10001, 5)] {
            let xs = f32_data(rows * cols, &mut rng, 20.0);
            let shape = vec![rows, cols];
            let x = upload(ctx, f, &shape, &xs.iter().map(|v| v.to_bits() as u64).collect::<Vec<_>>());
            let m = ctx.empty(f, &[rows, 1]).unwrap();
            let lse = ctx.empty(f, &[rows]).unwrap();
            let before = ctx.stats().dispatches;
            let mut batch = ctx.batch().unwrap();
            ctx.record_reduce(&mut batch, ReduceOp::Max, &x, &[1], &m).unwrap();
            let mb = m.broadcast_to(&shape).unwrap();
            let r = FusedReduce {
                op: ReduceOp::Sum.into(),
                prologue: un(UnaryOp::Exp, bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), f), f),
                inputs: vec![&x, &mb],
                shape: shape.clone(),
                axes: vec![1],
                out: &lse,
                epilogue: vec![],
            };
            let lse_finish = Finish { reduced: f, expr: bin(BinaryOp::Add, un(UnaryOp::Log, Expr::Input(2), f), Expr::Input(1), f) };
            ctx.record_reduce_finished(&mut batch, &r, Some(&lse_finish)).unwrap();
            batch.finish().unwrap();
            assert_eq!(ctx.stats().dispatches - before, want, "logsumexp {rows}x{cols} dispatches");
            // unfused
            let m2 = ctx.reduce(ReduceOp::Max, &x, &[1], true, f).unwrap();
            let e2 = ctx.map(&un(UnaryOp::Exp, bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), f), f), &[&x, &m2.broadcast_to(&shape).unwrap()]).unwrap();
            let s2 = ctx.reduce(ReduceOp::Sum, &e2, &[1], true, f).unwrap();
            let l2 = ctx.map(&bin(BinaryOp::Add, un(UnaryOp::Log, Expr::Input(0), f), Expr::Input(1), f), &[&s2, &m2]).unwrap();
            let got = ctx.download(&lse).unwrap();
            assert_eq!(got, ctx.download(&l2).unwrap(), "logsumexp {rows}x{cols}: fused != unfused");
            let got: Vec<f32> = from_bytes(f, &got).iter().map(|&b| f32::from_bits(b as u32)).collect();
            for i in 0..rows {
                let row = &xs[i * cols..(i + 1) * cols];
                let m = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
                let want = row.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln() + m;
                assert!((got[i] as f64 - want).abs() <= 1e-5 * want.abs().max(1.0), "logsumexp[{i}] = {}, f64 reference {want}", got[i]);
            }
        }
    });
}

/// Mean and variance over the last axis: sum finished as sum / n (the mean), then the sum of
/// (x - mean)^2 finished as / n — 2 dispatches.
#[test]
fn mean_and_variance_are_two_dispatches_and_equal_unfused_and_f64() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(14);
        let f = DType::F32;
        for (rows, cols) in [(512usize, 1024usize), (3000, 31)] {
            let n = cnst(cols as f64, f);
            let xs = f32_data(rows * cols, &mut rng, 5.0);
            let shape = vec![rows, cols];
            let x = upload(ctx, f, &shape, &xs.iter().map(|v| v.to_bits() as u64).collect::<Vec<_>>());
            let mean = ctx.empty(f, &[rows, 1]).unwrap();
            let var = ctx.empty(f, &[rows, 1]).unwrap();
            let per_n = Finish { reduced: f, expr: bin(BinaryOp::Divide, Expr::Input(1), n.clone(), f) };
            let sq = {
                let d = bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), f);
                bin(BinaryOp::Multiply, d.clone(), d, f)
            };
            let before = ctx.stats().dispatches;
            let mut batch = ctx.batch().unwrap();
            let r = FusedReduce::plain(ReduceOp::Sum.into(), &x, &[1], &mean);
            ctx.record_reduce_finished(&mut batch, &r, Some(&per_n)).unwrap();
            let mb = mean.broadcast_to(&shape).unwrap();
            let r = FusedReduce {
                op: ReduceOp::Sum.into(),
                prologue: sq.clone(),
                inputs: vec![&x, &mb],
                shape: shape.clone(),
                axes: vec![1],
                out: &var,
                epilogue: vec![],
            };
            let var_finish = Finish { reduced: f, expr: bin(BinaryOp::Divide, Expr::Input(2), n.clone(), f) };
            ctx.record_reduce_finished(&mut batch, &r, Some(&var_finish)).unwrap();
            batch.finish().unwrap();
            assert_eq!(ctx.stats().dispatches - before, 2, "mean/variance {rows}x{cols} dispatches");
            let div = bin(BinaryOp::Divide, Expr::Input(0), n.clone(), f);
            let mean2 = ctx.map(&div, &[&ctx.reduce(ReduceOp::Sum, &x, &[1], true, f).unwrap()]).unwrap();
            let d2 = ctx.map(&sq, &[&x, &mean2.broadcast_to(&shape).unwrap()]).unwrap();
            let var2 = ctx.map(&div, &[&ctx.reduce(ReduceOp::Sum, &d2, &[1], true, f).unwrap()]).unwrap();
            assert_eq!(ctx.download(&mean).unwrap(), ctx.download(&mean2).unwrap(), "mean {rows}x{cols}: fused != unfused");
            let got = ctx.download(&var).unwrap();
            assert_eq!(got, ctx.download(&var2).unwrap(), "variance {rows}x{cols}: fused != unfused");
            let got: Vec<f32> = from_bytes(f, &got).iter().map(|&b| f32::from_bits(b as u32)).collect();
            for i in 0..rows {
                let row: Vec<f64> = xs[i * cols..(i + 1) * cols].iter().map(|&v| v as f64).collect();
                let m = row.iter().sum::<f64>() / cols as f64;
                let want = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / cols as f64;
                assert!((got[i] as f64 - want).abs() <= 1e-5 * want.max(1e-3), "variance[{i}] = {}, f64 reference {want}", got[i]);
            }
        }
    });
}

#[test]
fn a_finish_reading_a_varying_input_is_an_error() {
    on_engine(|ctx| {
        let x = upload(ctx, DType::F32, &[4, 6], &[0; 24]);
        let out = ctx.empty(DType::F32, &[4]).unwrap();
        let r = FusedReduce::plain(ReduceOp::Sum.into(), &x, &[1], &out);
        let finish = Finish { reduced: DType::F32, expr: bin(BinaryOp::Add, Expr::Input(0), Expr::Input(1), DType::F32) };
        let mut batch = ctx.batch().unwrap();
        let e = ctx.record_reduce_finished(&mut batch, &r, Some(&finish)).unwrap_err().to_string();
        assert!(e.contains("varies along the reduced axes"), "{e}");
        let finish = Finish { reduced: DType::F32, expr: Expr::convert(Expr::Input(1), DType::F64) };
        let e = ctx.record_reduce_finished(&mut batch, &r, Some(&finish)).unwrap_err().to_string();
        assert!(e.contains("finish gives f64"), "{e}");
    });
}

/// Empty rows: the finish still reads its kept inputs at each output, though no element of the
/// row exists (sum over nothing = 0, finished as 0 + m = m).
#[test]
fn a_finish_over_empty_rows_reads_its_kept_inputs() {
    on_engine_alone(|ctx| {
        let f = DType::F32;
        let x = ctx.empty(f, &[5, 0]).unwrap();
        let ms: Vec<f32> = vec![1.5, -2.0, 3.25, 4.0, -5.5];
        let m = upload(ctx, f, &[5, 1], &ms.iter().map(|v| v.to_bits() as u64).collect::<Vec<_>>());
        let mb = m.broadcast_to(&[5, 0]).unwrap();
        let out = ctx.empty(f, &[5]).unwrap();
        let finish = bin(BinaryOp::Add, Expr::Input(2), Expr::Input(1), f);
        let r = FusedReduce {
            op: ReduceOp::Sum.into(),
            prologue: un(UnaryOp::Exp, bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), f), f),
            inputs: vec![&x, &mb],
            shape: vec![5, 0],
            axes: vec![1],
            out: &out,
            epilogue: vec![],
        };
        let mut batch = ctx.batch().unwrap();
        ctx.record_reduce_finished(&mut batch, &r, Some(&Finish { reduced: f, expr: finish })).unwrap();
        batch.finish().unwrap();
        let s2 = ctx.reduce(ReduceOp::Sum, &x, &[1], true, f).unwrap();
        let l2 = ctx.map(&bin(BinaryOp::Add, Expr::Input(0), Expr::Input(1), f), &[&s2, &m]).unwrap();
        let got = ctx.download(&out).unwrap();
        assert_eq!(got, ctx.download(&l2).unwrap());
        let got: Vec<f32> = from_bytes(f, &got).iter().map(|&b| f32::from_bits(b as u32)).collect();
        assert_eq!(got, ms);
    });
}

/// A fused reduction whose pipeline crashed NVIDIA's shader compiler on the H200 (driver
/// 580.159, SIGSEGV in libnvidia-gpucomp; random-graph case 91 of tests/plan.rs): an f64 max
/// over `select(x < y, y, x)` with the epilogue `select(x < y, y, x) - max`, one invocation
/// per output. `NX_VULKAN_CRASH_VARIANT` picks it (0) or a variant with one thing changed, run
/// each in a process of its own. Variants 0 (the kernel) and 4 (the epilogue is the select
/// alone) crashed; built from the saved source, the kernel crashed unless its main loop was not
/// unrolled, its NaN test was removed, its epilogue loop was removed, or the epilogue read its
/// inputs through references of its own — which the generator now does: since then all seven
/// build and run on the H200 (stop 21, bench/results/2026-12-02-h200-stop21). Ignored: a
/// regression would crash the process, which no test can catch in-process.
#[test]
#[ignore]
fn nvidia_compiler_crash_variants() {
    let variant: u32 = std::env::var("NX_VULKAN_CRASH_VARIANT").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    on_engine(move |ctx| {
        let t = if variant == 3 { F32 } else { F64 };
        let (rows, cols) = if variant == 6 { (7, 1000) } else { (7, 13) };
        let mut rng = Rng(91);
        let x = upload(ctx, t, &[rows, cols], &random_values(t, rows * cols, &mut rng));
        let y = upload(ctx, t, &[rows, cols], &random_values(t, rows * cols, &mut rng));
        let pick = Expr::select(Expr::binary(BinaryOp::Less, Expr::Input(0), Expr::Input(1), U8), Expr::Input(1), Expr::Input(0), t);
        let prologue = match variant {
            2 => Expr::Input(0),
            _ => pick.clone(),
        };
        let epilogue = match variant {
            1 => vec![],
            2 => vec![Expr::binary(BinaryOp::Subtract, Expr::Input(0), Expr::Input(2), t)],
            4 => vec![pick.clone()],
            _ => vec![Expr::binary(BinaryOp::Subtract, pick.clone(), Expr::Input(2), t)],
        };
        let op: Reduction = if variant == 5 { ReduceOp::Sum.into() } else { ReduceOp::Max.into() };
        let out = ctx.empty(t, &[rows]).unwrap();
        let epi_out: Vec<Tensor> = epilogue.iter().map(|_| ctx.empty(t, &[rows, cols]).unwrap()).collect();
        let mut batch = ctx.batch().unwrap();
        let r = FusedReduce {
            op,
            prologue,
            inputs: vec![&x, &y],
            shape: vec![rows, cols],
            axes: vec![1],
            out: &out,
            epilogue: epilogue.into_iter().zip(epi_out.iter()).collect(),
        };
        ctx.record_reduce_fused(&mut batch, &r).unwrap();
        batch.finish().unwrap();
        ctx.download(&out).unwrap();
        eprintln!("variant {variant} built and ran");
    });
}

/// A row max, min or sum computed inside the kernel of the reduction that reads it
/// (`record_reduce_with_row_reduction`: softmax's sum of exp(x - max) with its quotient as the
/// epilogue, logsumexp's log(sum) + max as the finish, a min beside a sum of x - min, and
/// layernorm's sum beside the sum of (x - sum / n)^2): one kernel, and the row reduction it
/// writes, the reduced value and every epilogue output equal the unfused sequence (the plain
/// max/min/sum, then the fused sum reading it) bit for bit — rows with NaNs (several: the
/// first by index wins), ±Inf, ties of -0.0 and +0.0 in either order, all equal, all -0.0;
/// R from 257 to 4096, both maths, narrow and 256-lane workgroups. The row reduction's tensor
/// starts filled with a sentinel, so a row the kernel did not write shows. Long rows, an
/// arg-reduction, a product and a non-f32 input are refused.
#[test]
fn row_reduction_in_the_next_kernel_equals_the_plain_reduction() {
    on_engine_alone(|ctx| {
        use std::sync::atomic::Ordering::Relaxed;
        let mut rng = Rng(5151);
        let f = DType::F32;
        let nan2 = 0x7FC0_1234u64;
        for (rows, cols) in [(7usize, 257usize), (9, 1000), (6, 1024), (6, 4096)] {
            let shape = vec![rows, cols];
            let mut data: Vec<u64> = (0..rows * cols).map(|_| write(f, N::F(rng.range(-8000, 8000) as f64 / 1000.0))).collect();
            // row 1: two NaNs of different payloads; row 2: +Inf and -Inf; row 3: the largest
            // value is zero, -0.0 first then +0.0; row 4: +0.0 first; row 5: all equal
            let r = |i: usize, c: usize| i * cols + c;
            data[r(1, cols / 2)] = nan2;
            data[r(1, cols - 1)] = 0x7FC0_0000;
            data[r(2, 3)] = 0x7F80_0000;
            data[r(2, cols - 2)] = 0xFF80_0000;
            for (row, first) in [(3, 0x8000_0000u64), (4, 0)] {
                for c in 0..cols {
                    data[r(row, c)] = write(f, N::F(-1.0 - (c % 7) as f64));
                }
                data[r(row, 5)] = first;
                data[r(row, cols - 3)] = first ^ 0x8000_0000;
            }
            if rows > 5 {
                for c in 0..cols {
                    data[r(5, c)] = write(f, N::F(2.5));
                }
            }
            if rows > 6 {
                for c in 0..cols {
                    data[r(6, c)] = 0x8000_0000;
                }
            }
            let x = upload(ctx, f, &shape, &data);
            for op in [ReduceOp::Max, ReduceOp::Min, ReduceOp::Sum] {
                let max = op == ReduceOp::Max;
                for math in [FloatMath::Exact, FloatMath::Fast] {
                    for narrow in [true, false] {
                        ctx.narrow_rows.store(narrow, Relaxed);
                        let what = format!("{rows}x{cols} {op:?} {math:?} narrow {narrow}");
                        // max: softmax (exp(x - m), quotient) and logsumexp's finish; min: x - m;
                        // sum: layernorm's (x - m / n)^2
                        let pro = match op {
                            ReduceOp::Max => un(UnaryOp::Exp, bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), f), f),
                            ReduceOp::Min => bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), f),
                            _ => {
                                let d = bin(BinaryOp::Subtract, Expr::Input(0), bin(BinaryOp::Divide, Expr::Input(1), cnst(cols as f64, f), f), f);
                                bin(BinaryOp::Multiply, d.clone(), d, f)
                            }
                        };
                        let epilogue = vec![bin(BinaryOp::Divide, pro.clone(), Expr::Input(2), f)];
                        let finish = max.then(|| Finish { reduced: f, expr: bin(BinaryOp::Add, un(UnaryOp::Log, Expr::Input(2), f), Expr::Input(1), f) });
                        // unfused: the plain extreme, then the fused sum reading it
                        let m = ctx.reduce(op, &x, &[1], true, f).unwrap();
                        let run = |pre: Option<RowReduction>, m: &Tensor| {
                            let mb = m.broadcast_to(&shape).unwrap();
                            let s = ctx.empty(f, &[rows, 1]).unwrap();
                            let y = ctx.empty(f, &shape).unwrap();
                            ctx.stream.profile_start().unwrap();
                            let mut batch = ctx.batch().unwrap();
                            let r = FusedReduce {
                                op: ReduceOp::Sum.into(),
                                prologue: pro.clone(),
                                inputs: vec![&x, &mb],
                                shape: shape.clone(),
                                axes: vec![1],
                                out: &s,
                                epilogue: vec![(epilogue[0].clone(), &y)],
                            };
                            ctx.record_reduce_with_row_reduction(&mut batch, math, &r, finish.as_ref(), pre).unwrap();
                            batch.finish().unwrap();
                            let kernels: Vec<String> = ctx.stream.profile_stop().unwrap().into_iter().map(|k| k.name).collect();
                            (ctx.download(&s).unwrap(), ctx.download(&y).unwrap(), kernels)
                        };
                        let (s0, y0, _) = run(None, &m);
                        let m1 = ctx.full(Scalar::F(-12345.0), f, &[rows, 1]).unwrap();
                        let (s1, y1, kernels) = run(Some(RowReduction { of: 0, into: 1, op }), &m1);
                        assert!(kernels.len() == 1 && kernels[0].contains(" pre:"), "{what}: {kernels:?}");
                        assert_eq!(from_bytes(f, &ctx.download(&m1).unwrap()), from_bytes(f, &ctx.download(&m).unwrap()), "{what}: the extreme");
                        assert_eq!(from_bytes(f, &s1), from_bytes(f, &s0), "{what}: the reduced values");
                        let (a, b) = (from_bytes(f, &y1), from_bytes(f, &y0));
                        if let Some(i) = a.iter().zip(&b).position(|(p, q)| p != q) {
                            panic!("{what}: epilogue differs at element {i}: fused {} unfused {}", show(f, a[i]), show(f, b[i]));
                        }
                    }
                }
            }
            // the special rows' extremes themselves, against the CPU
            let m = from_bytes(f, &ctx.download(&ctx.reduce(ReduceOp::Max, &x, &[1], true, f).unwrap()).unwrap());
            assert_eq!(m[1], canonical_nan(f), "{rows}x{cols}: a NaN row's max");
            assert_eq!((m[2], m[3], m[4]), (0x7F80_0000, 0x8000_0000, 0), "{rows}x{cols}: Inf and the zeros' ties");
        }
        ctx.narrow_rows.store(true, Relaxed);
        // refused: long rows, an arg-reduction, an f16 input
        assert!(!row_reduction_fits(&[2, 4097], &[1], f).unwrap() && row_reduction_fits(&[2, 4096], &[1], f).unwrap());
        let x = upload(ctx, f, &[2, 5000], &vec![0; 10000]);
        let m = ctx.reduce(ReduceOp::Max, &x, &[1], true, f).unwrap();
        let mb = m.broadcast_to(&[2, 5000]).unwrap();
        let s = ctx.empty(f, &[2, 1]).unwrap();
        let pro = bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), f);
        let r = FusedReduce { op: ReduceOp::Sum.into(), prologue: pro.clone(), inputs: vec![&x, &mb], shape: vec![2, 5000], axes: vec![1], out: &s, epilogue: vec![] };
        let mut batch = ctx.batch().unwrap();
        let err = ctx.record_reduce_with_row_reduction(&mut batch, FloatMath::Exact, &r, None, Some(RowReduction { of: 0, into: 1, op: ReduceOp::Max })).unwrap_err();
        assert!(err.to_string().contains("rows whole"), "{err}");
        let x = upload(ctx, f, &[2, 100], &vec![0; 200]);
        let m = ctx.reduce(ReduceOp::Max, &x, &[1], true, f).unwrap();
        let mb = m.broadcast_to(&[2, 100]).unwrap();
        let (i, h) = (ctx.empty(DType::S32, &[2, 1]).unwrap(), upload(ctx, DType::F16, &[2, 100], &vec![0; 200]));
        let arg = FusedReduce { op: Reduction::Arg { op: ArgOp::ArgMax, tie_break: TieBreak::Low }, prologue: pro.clone(), inputs: vec![&x, &mb], shape: vec![2, 100], axes: vec![1], out: &i, epilogue: vec![] };
        let err = ctx.record_reduce_with_row_reduction(&mut batch, FloatMath::Exact, &arg, None, Some(RowReduction { of: 0, into: 1, op: ReduceOp::Max })).unwrap_err();
        assert!(err.to_string().contains("rows whole"), "{err}");
        let s = ctx.empty(DType::F16, &[2, 1]).unwrap();
        let half = FusedReduce { op: ReduceOp::Sum.into(), prologue: bin(BinaryOp::Subtract, Expr::Input(0), Expr::Input(1), DType::F16), inputs: vec![&h, &mb], shape: vec![2, 100], axes: vec![1], out: &s, epilogue: vec![] };
        let err = ctx.record_reduce_with_row_reduction(&mut batch, FloatMath::Exact, &half, None, Some(RowReduction { of: 0, into: 1, op: ReduceOp::Max })).unwrap_err();
        assert!(err.to_string().contains("two f32 inputs"), "{err}");
        let s = ctx.empty(f, &[2, 1]).unwrap();
        let r = FusedReduce { op: ReduceOp::Sum.into(), prologue: pro.clone(), inputs: vec![&x, &mb], shape: vec![2, 100], axes: vec![1], out: &s, epilogue: vec![] };
        let err = ctx.record_reduce_with_row_reduction(&mut batch, FloatMath::Exact, &r, None, Some(RowReduction { of: 0, into: 1, op: ReduceOp::Product })).unwrap_err();
        assert!(err.to_string().contains("not a max, min or sum"), "{err}");
        drop(batch);
    });
}
