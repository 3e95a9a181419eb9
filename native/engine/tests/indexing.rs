//! The indexing family (gather, take, take_along_axis, indexed_add, indexed_put) against plain
//! CPU references written here as naive loops over Nx.BinaryBackend's (Nx 0.7.2) rules, per
//! dtype, through transposed/sliced views, with odd and empty shapes, duplicate indices, every
//! integer index type, both scatter strategies and out-of-range indices.
//!
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test --release -p nx_vulkan_engine --test indexing

mod common;
use common::*;
use nx_vulkan_engine::indexing::{IndexedOp, ScatterStrategy};
use nx_vulkan_engine::*;

const INDEX_TYPES: [DType; 8] = [U8, U16, U32, U64, S8, S16, S32, S64];

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Random in-range index values (< bound) for each position, `bound_of(pos)`.
fn index_bits(it: DType, n: usize, rng: &mut Rng, bound_of: impl Fn(usize) -> usize) -> Vec<u64> {
    (0..n).map(|p| write(it, N::I(rng.below(bound_of(p).max(1) as u64) as i128))).collect()
}

fn index_value(it: DType, bits: u64) -> usize {
    match read(it, bits) {
        N::I(i) => i as usize,
        _ => unreachable!(),
    }
}

/// Uploads `data` (row-major for `shape`) and returns it as a transposed view of a tensor
/// laid out in the reverse axis order (so the kernels must use the strides).
fn upload_transposed(ctx: &Context, t: DType, shape: &[usize], data: &[u64]) -> Tensor {
    let rank = shape.len();
    let rev: Vec<usize> = shape.iter().rev().copied().collect();
    let mut stored = vec![0u64; data.len()];
    for (i, v) in data.iter().enumerate() {
        let c = coords(shape, i);
        let rc: Vec<usize> = c.iter().rev().copied().collect();
        stored[flat_of(&rev, &rc)] = *v;
    }
    let base = upload(ctx, t, &rev, &stored);
    let perm: Vec<usize> = (0..rank).rev().collect();
    base.transpose(&perm).unwrap()
}

fn maybe_view(ctx: &Context, t: DType, shape: &[usize], data: &[u64], view: bool) -> Tensor {
    if view && shape.len() > 1 {
        upload_transposed(ctx, t, shape, data)
    } else {
        upload(ctx, t, shape, data)
    }
}

// ---------------------------------------------------------------- gather

fn ref_gather(shape: &[usize], x: &[u64], ishape: &[usize], idx: &[u64], it: DType, axes: &[usize]) -> (Vec<usize>, Vec<u64>) {
    let rank = shape.len();
    let depth = *ishape.last().unwrap();
    let outer = &ishape[..ishape.len() - 1];
    let rest: Vec<usize> = (0..rank).filter(|d| !axes.contains(d)).collect();
    let mut out_shape = outer.to_vec();
    out_shape.extend(rest.iter().map(|&d| shape[d]));
    let mut out = vec![];
    for i in 0..numel(&out_shape) {
        let c = coords(&out_shape, i);
        let row = flat_of(outer, &c[..outer.len()]);
        let mut src = vec![0; rank];
        for (q, &a) in axes.iter().enumerate() {
            src[a] = index_value(it, idx[row * depth + q]);
        }
        for (j, &d) in rest.iter().enumerate() {
            src[d] = c[outer.len() + j];
        }
        out.push(x[flat_of(shape, &src)]);
    }
    (out_shape, out)
}

#[test]
fn gather_every_dtype_views_and_index_types() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(11);
        let before = ctx.stats().dispatches;
        for (n, &t) in DType::ALL.iter().enumerate() {
            for rep in 0..3 {
                let rank = 1 + (n + rep) % 4;
                let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(5) as usize).collect();
                let data = random_values(t, numel(&shape), &mut rng);
                // a random increasing subset of axes (possibly empty, possibly all)
                let axes: Vec<usize> = (0..rank).filter(|_| rng.below(2) == 0).collect();
                let it = INDEX_TYPES[(n + rep) % 8];
                let mut ishape: Vec<usize> = (0..rep).map(|_| 1 + rng.below(4) as usize).collect();
                if rep == 2 && n % 3 == 0 {
                    ishape[0] = 0; // an empty index set
                }
                ishape.push(axes.len());
                let idx = index_bits(it, numel(&ishape), &mut rng, |p| shape[axes[p % axes.len().max(1)]]);
                let view = rep != 1;
                let x = maybe_view(ctx, t, &shape, &data, view);
                let ix = maybe_view(ctx, it, &ishape, &idx, view);
                let y = ctx.gather(&x, &ix, &axes).unwrap();
                let (want_shape, want) = ref_gather(&shape, &data, &ishape, &idx, it, &axes);
                assert_eq!(y.shape(), &want_shape[..], "gather {t} {shape:?} {ishape:?} {axes:?}");
                let got = download(ctx, &y);
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    f.check(|| format!("gather {t} {shape:?} idx {it}{ishape:?} axes {axes:?} at {i}: {} want {}", show(t, g), show(t, w)), g, w);
                }
            }
        }
        assert!(ctx.stats().dispatches > before);
        f.finish("gather");
    });
}

// ---------------------------------------------------------------- take / take_along_axis

#[test]
fn take_every_dtype() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(12);
        for (n, &t) in DType::ALL.iter().enumerate() {
            for rep in 0..3 {
                let rank = 1 + (n + rep) % 3;
                let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(6) as usize).collect();
                let data = random_values(t, numel(&shape), &mut rng);
                let axis = rng.below(rank as u64) as usize;
                let it = INDEX_TYPES[(n * 3 + rep) % 8];
                let ishape: Vec<usize> = (0..rep).map(|_| rng.below(4) as usize + (rep != 2) as usize).collect();
                let idx = index_bits(it, numel(&ishape), &mut rng, |_| shape[axis]);
                let x = maybe_view(ctx, t, &shape, &data, rep != 0);
                let ix = maybe_view(ctx, it, &ishape, &idx, true);
                let y = ctx.take(&x, &ix, axis).unwrap();
                let mut want_shape = shape[..axis].to_vec();
                want_shape.extend_from_slice(&ishape);
                want_shape.extend_from_slice(&shape[axis + 1..]);
                assert_eq!(y.shape(), &want_shape[..]);
                let got = download(ctx, &y);
                let ir = ishape.len();
                for i in 0..numel(&want_shape) {
                    let c = coords(&want_shape, i);
                    let mut src = c[..axis].to_vec();
                    src.push(index_value(it, idx[flat_of(&ishape, &c[axis..axis + ir])]));
                    src.extend_from_slice(&c[axis + ir..]);
                    let w = data[flat_of(&shape, &src)];
                    f.check(|| format!("take {t} {shape:?} axis {axis} idx {ishape:?} at {c:?}: {} want {}", show(t, got[i]), show(t, w)), got[i], w);
                }
            }
        }
        f.finish("take");
    });
}

#[test]
fn take_along_axis_every_dtype_canonical_nans() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(13);
        for (n, &t) in DType::ALL.iter().enumerate() {
            for rep in 0..3 {
                let rank = 1 + (n + rep) % 3;
                let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(6) as usize).collect();
                let data = random_values(t, numel(&shape), &mut rng);
                let axis = rng.below(rank as u64) as usize;
                let it = INDEX_TYPES[(n * 5 + rep) % 8];
                let mut ishape = shape.clone();
                ishape[axis] = rng.below(7) as usize;
                let idx = index_bits(it, numel(&ishape), &mut rng, |_| shape[axis]);
                let x = maybe_view(ctx, t, &shape, &data, rep != 1);
                let ix = maybe_view(ctx, it, &ishape, &idx, rep == 2);
                let y = ctx.take_along_axis(&x, &ix, axis).unwrap();
                assert_eq!(y.shape(), &ishape[..]);
                let got = download(ctx, &y);
                for i in 0..numel(&ishape) {
                    let mut c = coords(&ishape, i);
                    c[axis] = index_value(it, idx[i]);
                    let raw = data[flat_of(&shape, &c)];
                    // BinaryBackend reads the number and writes it back: NaN canonical
                    let w = if t.is_float() { write(t, read(t, raw)) } else { raw };
                    f.check(|| format!("take_along_axis {t} {shape:?} axis {axis} at {i}: {} want {}", show(t, got[i]), show(t, w)), got[i], w);
                }
            }
        }
        f.finish("take_along_axis");
    });
}

// ---------------------------------------------------------------- indexed_add / indexed_put

struct Case {
    tshape: Vec<usize>,
    axes: Vec<usize>,
    /// updates' row shape (each dim <= the target's non-indexed dim)
    ushape_rest: Vec<usize>,
    n: usize,
}

/// The permuted target `axes ++ rest` coordinates of permuted flat position `p`, mapped back.
fn target_flat(tshape: &[usize], axes: &[usize], p: usize) -> usize {
    let rank = tshape.len();
    let rest: Vec<usize> = (0..rank).filter(|d| !axes.contains(d)).collect();
    let perm: Vec<usize> = axes.iter().chain(rest.iter()).copied().collect();
    let pshape: Vec<usize> = perm.iter().map(|&d| tshape[d]).collect();
    let pc = coords(&pshape, p);
    let mut c = vec![0; rank];
    for (m, &d) in perm.iter().enumerate() {
        c[d] = pc[m];
    }
    flat_of(tshape, &c)
}

#[allow(clippy::too_many_arguments)]
fn ref_indexed(op: IndexedOp, case: &Case, tt: DType, target: &[u64], it: DType, idx: &[u64], ut: DType, upd: &[u64], out: DType) -> Vec<u64> {
    let k = case.axes.len();
    let s_size: usize = (0..case.tshape.len()).filter(|d| !case.axes.contains(d)).map(|d| case.tshape[d]).product();
    let u_size: usize = numel(&case.ushape_rest);
    // untouched: raw bits when the type is kept, else number_to_binary of the value
    let mut res: Vec<u64> = target.iter().map(|&b| if tt == out { b } else { write(out, read(tt, b)) }).collect();
    let key = |i: usize| -> usize {
        let mut s = 0;
        for q in 0..k {
            s = s * case.tshape[case.axes[q]] + index_value(it, idx[i * k + q]);
        }
        s
    };
    let mut slices: Vec<usize> = (0..case.n).map(key).collect();
    slices.sort();
    slices.dedup();
    for s in slices {
        let rows: Vec<usize> = (0..case.n).filter(|&i| key(i) == s).collect();
        for e in 0..u_size {
            let tf = target_flat(&case.tshape, &case.axes, s * s_size + e);
            let u = |i: usize| read(ut, upd[i * u_size + e]);
            res[tf] = match op {
                IndexedOp::Put => write(out, u(*rows.last().unwrap())),
                IndexedOp::Add => {
                    // Enum.reduce(row, 0, &+/2), then left + sum (64-bit integer sums)
                    let mut acc = if ut.is_float() { N::F(0.0) } else { N::I(0) };
                    for &i in &rows {
                        acc = match (acc, u(i)) {
                            (N::F(a), N::F(b)) => N::F(a + b),
                            (N::I(a), N::I(b)) => N::I(a + b),
                            _ => unreachable!(),
                        };
                    }
                    if let N::I(a) = acc {
                        acc = N::I(if ut == U64 { a as u64 as i128 } else { a as i64 as i128 });
                    }
                    let left = read(tt, target[tf]);
                    let v = match (left, acc) {
                        (N::I(a), N::I(b)) => N::I(a + b),
                        (a, b) => N::F(a.f() + b.f()),
                    };
                    write(out, v)
                }
            };
        }
    }
    res
}

fn merged(a: DType, b: DType) -> DType {
    // the cases below only need these combinations
    if a == b {
        return a;
    }
    match (a, b) {
        (U8, S8) => S16,
        (S32, F32) | (F32, S64) | (U16, F32) => F32,
        (F16, BF16) => F32,
        (F16, F32) | (F32, F16) => F32,
        (S32, S64) => S64,
        (U64, S8) => S64,
        (F64, F32) => F64,
        _ => panic!("no merged type for {a} {b}"),
    }
}

fn run_indexed_case(ctx: &Context, f: &mut Failures, rng: &mut Rng, op: IndexedOp, case: &Case, tt: DType, ut: DType, it: DType, strategy: Option<ScatterStrategy>, views: bool) {
    let out = merged(tt, ut);
    let target = random_values(tt, numel(&case.tshape), rng);
    let k = case.axes.len();
    // few distinct values so rows repeat
    let idx = index_bits(it, case.n * k, rng, |p| case.tshape[case.axes[p % k.max(1)]].min(3));
    let mut ushape = vec![case.n];
    ushape.extend_from_slice(&case.ushape_rest);
    let upd = if ut.is_float() && op == IndexedOp::Add && rng.below(2) == 0 {
        // ordinary values so sums are exercised rather than NaN-swamped
        (0..numel(&ushape)).map(|_| write(ut, N::F(rng.range(-2000, 2000) as f64 / 7.0))).collect()
    } else {
        random_values(ut, numel(&ushape), rng)
    };
    let x = maybe_view(ctx, tt, &case.tshape, &target, views);
    let ix = maybe_view(ctx, it, &[case.n, k], &idx, views);
    let u = maybe_view(ctx, ut, &ushape, &upd, views);
    let y = ctx.indexed(op, &x, &ix, &u, &case.axes, out, strategy).unwrap();
    assert_eq!(y.shape(), &case.tshape[..]);
    assert_eq!(y.dtype(), out);
    let got = download(ctx, &y);
    let want = ref_indexed(op, case, tt, &target, it, &idx, ut, &upd, out);
    for i in 0..want.len() {
        f.check(
            || format!("{op:?} {tt}+{ut}->{out} {:?} axes {:?} rows {:?}x{} {strategy:?} at {i}: {} want {}", case.tshape, case.axes, case.ushape_rest, case.n, show(out, got[i]), show(out, want[i])),
            got[i],
            want[i],
        );
    }
}

fn cases(rng: &mut Rng) -> Vec<Case> {
    vec![
        Case { tshape: vec![7], axes: vec![0], ushape_rest: vec![], n: 5 },
        Case { tshape: vec![4, 3], axes: vec![0], ushape_rest: vec![3], n: 9 },
        Case { tshape: vec![4, 3], axes: vec![1], ushape_rest: vec![4], n: 40 },
        Case { tshape: vec![3, 2, 5], axes: vec![0, 2], ushape_rest: vec![2], n: 6 },
        // update rows smaller than the slice: BinaryBackend writes them flat
        Case { tshape: vec![2, 2, 3], axes: vec![0], ushape_rest: vec![2, 2], n: 3 },
        Case { tshape: vec![2, 3], axes: vec![0, 1], ushape_rest: vec![], n: 70 },
        Case { tshape: vec![5, 1 + rng.below(4) as usize], axes: vec![], ushape_rest: vec![5, 1], n: 2 },
        Case { tshape: vec![3, 4], axes: vec![0], ushape_rest: vec![4], n: 0 },
    ]
}

#[test]
fn indexed_add_and_put_every_dtype_both_strategies() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(14);
        let before = ctx.stats().dispatches;
        let all_cases = cases(&mut rng);
        for (n, &t) in DType::ALL.iter().enumerate() {
            for op in [IndexedOp::Add, IndexedOp::Put] {
                for (c, case) in all_cases.iter().enumerate() {
                    if (n + c) % 2 == 1 && c > 1 {
                        continue; // keep the run short: every dtype sees half the shapes
                    }
                    let it = INDEX_TYPES[(n + c) % 8];
                    let strategy = match c % 3 {
                        0 => None,
                        1 => Some(ScatterStrategy::Scan),
                        _ => Some(ScatterStrategy::Segmented),
                    };
                    run_indexed_case(ctx, &mut f, &mut rng, op, case, t, t, it, strategy, c % 2 == 0);
                }
            }
        }
        assert!(ctx.stats().dispatches > before);
        f.finish("indexed same type");
    });
}

#[test]
fn indexed_mixed_types_and_strategies_agree() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(15);
        let pairs = [(U8, S8), (S32, F32), (F32, S64), (U16, F32), (F16, BF16), (F16, F32), (S32, S64), (U64, S8), (F64, F32)];
        let case = Case { tshape: vec![3, 4], axes: vec![0], ushape_rest: vec![4], n: 50 };
        for (i, &(tt, ut)) in pairs.iter().enumerate() {
            for op in [IndexedOp::Add, IndexedOp::Put] {
                for strategy in [ScatterStrategy::Scan, ScatterStrategy::Segmented] {
                    run_indexed_case(ctx, &mut f, &mut rng, op, &case, tt, ut, INDEX_TYPES[i % 8], Some(strategy), i % 2 == 0);
                }
            }
        }
        f.finish("indexed mixed");
    });
}

#[test]
fn binary_backend_examples() {
    on_engine(|ctx| {
        // Nx docs: indexed_add of [[0,0,0],[0,1,1],[0,0,0],[0,0,2],[0,1,2]] into iota({1,2,3})
        let t = ctx.upload(S64, &[1, 2, 3], &to_bytes(S64, &(0..6).collect::<Vec<u64>>())).unwrap();
        let idx: Vec<u64> = [0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 2, 0, 1, 2].to_vec();
        let ix = upload(ctx, S64, &[5, 3], &idx);
        let upd = upload(ctx, S64, &[5], &[1, 3, 1, (-2i64) as u64, 5]);
        let y = ctx.indexed_add(&t, &ix, &upd, &[0, 1, 2], S64).unwrap();
        assert_eq!(download(ctx, &y), vec![2, 1, 0, 3, 7, 10]);
        // -0.0 + -0.0 at an updated position is +0.0 (the sum starts at integer 0)
        let t = upload(ctx, F32, &[2], &[0x8000_0000, 0x4000_0000]);
        let ix = upload(ctx, S32, &[1, 1], &[0]);
        let upd = upload(ctx, F32, &[1], &[0x8000_0000]);
        assert_eq!(download(ctx, &ctx.indexed_add(&t, &ix, &upd, &[0], F32).unwrap()), vec![0, 0x4000_0000]);
        // small update rows land flat: iota({2,2,3}) put [[10,11],[12,13]] at [1]
        let t = ctx.upload(S64, &[2, 2, 3], &to_bytes(S64, &(0..12).collect::<Vec<u64>>())).unwrap();
        let ix = upload(ctx, S64, &[1, 1], &[1]);
        let upd = upload(ctx, S64, &[1, 2, 2], &[10, 11, 12, 13]);
        let y = ctx.indexed_put(&t, &ix, &upd, &[0], S64).unwrap();
        assert_eq!(download(ctx, &y), vec![0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 10, 11]);
        // gather with axes [1, 2] of iota({2,3,4})
        let x = ctx.upload(S64, &[2, 3, 4], &to_bytes(S64, &(0..24).collect::<Vec<u64>>())).unwrap();
        let ix = upload(ctx, S64, &[2, 2], &[2, 1, 0, 3]);
        let y = ctx.gather(&x, &ix, &[1, 2]).unwrap();
        assert_eq!(y.shape(), &[2, 2]);
        assert_eq!(download(ctx, &y), vec![9, 21, 3, 15]);
    });
}

// ---------------------------------------------------------------- out of range, counts

#[test]
fn out_of_range_indices_are_argument_errors() {
    on_engine(|ctx| {
        let x = upload(ctx, F32, &[2, 3], &[0; 6]);
        let msg = |r: Result<Tensor>| match r {
            Err(EngineError::InvalidArgument(m)) => m,
            other => panic!("expected an argument error, got {other:?}"),
        };
        let ix = upload(ctx, S8, &[2], &[1, (-1i64) as u64 & 0xFF]);
        assert_eq!(msg(ctx.take(&x, &ix, 0)), "index -1 is out of bounds for axis 0 in shape {2, 3}");
        let ix = upload(ctx, U64, &[3], &[0, 1u64 << 63, 5]);
        assert_eq!(msg(ctx.take(&x, &ix, 1)), "index 9223372036854775808 is out of bounds for axis 1 in shape {2, 3}");
        let ix = upload(ctx, S32, &[2, 2], &[0, 2, 1, 3]);
        assert_eq!(msg(ctx.gather(&x, &ix, &[0, 1])), "index 3 is out of bounds for axis 1 in shape {2, 3}");
        let ix = upload(ctx, U8, &[2, 3], &[0, 1, 2, 0, 7, 1]);
        assert_eq!(msg(ctx.take_along_axis(&x, &ix, 1)), "index 7 is out of bounds for axis 1 in shape {2, 3}");
        let ix = upload(ctx, S16, &[2, 1], &[1, 2]);
        let upd = upload(ctx, F32, &[2, 3], &[0; 6]);
        for op in [IndexedOp::Add, IndexedOp::Put] {
            for s in [ScatterStrategy::Scan, ScatterStrategy::Segmented] {
                assert_eq!(msg(ctx.indexed(op, &x, &ix, &upd, &[0], F32, Some(s))), "index 2 is out of bounds for axis 0 in shape {2, 3}");
            }
        }
        // checked even when no output element reads the index (an empty non-indexed axis)
        let e = upload(ctx, F32, &[2, 0], &[]);
        let ix = upload(ctx, S64, &[1, 1], &[4]);
        assert_eq!(msg(ctx.gather(&e, &ix, &[0])), "index 4 is out of bounds for axis 0 in shape {2, 0}");
        // bad arguments
        let fi = upload(ctx, F32, &[1, 1], &[0]);
        assert!(ctx.gather(&x, &fi, &[0]).is_err());
        let ix = upload(ctx, S64, &[1, 2], &[0, 0]);
        assert!(ctx.gather(&x, &ix, &[1, 0]).is_err());
        assert!(ctx.indexed_add(&x, &ix, &upload(ctx, F32, &[2], &[0, 0]), &[0, 1], F32).is_err());
        assert!(ctx.indexed_add(&x, &upload(ctx, S64, &[1, 1], &[0]), &upload(ctx, F32, &[1, 3], &[0; 3]), &[0], S32).is_err());
    });
}

#[test]
fn dispatch_counts() {
    on_engine_alone(|ctx| {
        let x = upload(ctx, F32, &[4, 3], &[0; 12]);
        let ix = upload(ctx, S64, &[5, 1], &[0, 1, 1, 3, 0]);
        let s0 = ctx.stats();
        ctx.gather(&x, &ix, &[0]).unwrap();
        let s1 = ctx.stats();
        assert_eq!((s1.dispatches - s0.dispatches, s1.recordings - s0.recordings), (2, 1), "gather: check + read in one recording");
        let upd = upload(ctx, F32, &[5, 3], &[0; 15]);
        let s1 = ctx.stats();
        ctx.indexed(IndexedOp::Add, &x, &ix, &upd, &[0], F32, Some(ScatterStrategy::Scan)).unwrap();
        let s2 = ctx.stats();
        assert_eq!((s2.dispatches - s1.dispatches, s2.recordings - s1.recordings), (2, 1), "scan: keys + scatter");
        ctx.indexed(IndexedOp::Add, &x, &ix, &upd, &[0], F32, Some(ScatterStrategy::Segmented)).unwrap();
        let s3 = ctx.stats();
        assert_eq!((s3.dispatches - s2.dispatches, s3.recordings - s2.recordings), (7, 1), "buckets: keys, zero, count, scan, fill, sort, scatter");
        ctx.indexed(IndexedOp::Put, &x, &ix, &upd, &[0], F32, Some(ScatterStrategy::Segmented)).unwrap();
        let s4 = ctx.stats();
        assert_eq!((s4.dispatches - s3.dispatches, s4.recordings - s3.recordings), (4, 1), "winner: keys, zero, winner, scatter");
    });
}

/// A larger add (many rows into few slices, the segmented path) against the scan path and the
/// reference; reruns are bit-identical.
#[test]
fn segmented_add_is_deterministic() {
    on_engine(|ctx| {
        let mut rng = Rng(16);
        let n = 3000;
        let tshape = [16usize, 8];
        let target = random_values(F32, 128, &mut rng);
        let idx: Vec<u64> = (0..n).map(|_| rng.below(16)).collect();
        let upd: Vec<u64> = (0..n * 8).map(|_| write(F32, N::F((rng.range(-1_000_000, 1_000_000) as f64) * 1e-3))).collect();
        let x = upload(ctx, F32, &tshape, &target);
        let ix = upload(ctx, S32, &[n, 1], &idx);
        let u = upload(ctx, F32, &[n, 8], &upd);
        let a = download(ctx, &ctx.indexed(IndexedOp::Add, &x, &ix, &u, &[0], F32, Some(ScatterStrategy::Segmented)).unwrap());
        let b = download(ctx, &ctx.indexed(IndexedOp::Add, &x, &ix, &u, &[0], F32, Some(ScatterStrategy::Segmented)).unwrap());
        let c = download(ctx, &ctx.indexed(IndexedOp::Add, &x, &ix, &u, &[0], F32, Some(ScatterStrategy::Scan)).unwrap());
        assert_eq!(a, b);
        assert_eq!(a, c);
        let case = Case { tshape: tshape.to_vec(), axes: vec![0], ushape_rest: vec![8], n };
        let want = ref_indexed(IndexedOp::Add, &case, F32, &target, S32, &idx, F32, &upd, F32);
        assert_eq!(a, want);
    });
}

/// Complex tensors (when the engine has them): gather/take move the bits of both parts;
/// take_along_axis writes each NaN part as the canonical NaN.
#[test]
fn complex_reads_when_available() {
    on_engine(|ctx| {
        let mut rng = Rng(17);
        for name in ["c64", "c128"] {
            let Ok(t) = DType::parse(name) else { return };
            let words = t.size() / 8;
            let part_nan: u64 = if words == 1 { 0xFFC0_0001_7F80_0001 } else { 0xFFF8_0000_0000_0001 };
            let n = 6;
            let mut data: Vec<u64> = (0..n * words).map(|_| rng.next()).collect();
            data[1] = part_nan;
            let bytes: Vec<u8> = data.iter().flat_map(|w| w.to_le_bytes()).collect();
            let x = ctx.upload(t, &[2, 3], &bytes).unwrap();
            let ix = upload(ctx, S32, &[4], &[2, 0, 1, 2]);
            let elem = |i: usize| data[i * words..(i + 1) * words].to_vec();
            let got = |y: &Tensor| -> Vec<u64> { ctx.download(y).unwrap().chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect() };
            // take along axis 1 of the transposed view [3, 2]: x^T[r][c] = x[c][r]
            let xt = x.transpose(&[1, 0]).unwrap();
            let y = ctx.take(&xt, &ix, 0).unwrap();
            let want: Vec<u64> = [2usize, 0, 1, 2].iter().flat_map(|&r| [elem(r), elem(3 + r)].concat()).collect();
            assert_eq!(got(&y), want, "{name} take");
            let gi = upload(ctx, S64, &[2, 2], &[1, 2, 0, 0]);
            let y = ctx.gather(&x, &gi, &[0, 1]).unwrap();
            assert_eq!(got(&y), [elem(5), elem(0)].concat(), "{name} gather");
            let ai = upload(ctx, U8, &[2, 1], &[0, 0]);
            let y = ctx.take_along_axis(&x, &ai, 1).unwrap();
            let canon = |w: u64| -> u64 {
                if words == 2 {
                    if (w & !(1u64 << 63)) > 0x7FF0_0000_0000_0000 { 0x7FF8_0000_0000_0000 } else { w }
                } else {
                    let c = |h: u32| if (h & 0x7FFF_FFFF) > 0x7F80_0000 { 0x7FC0_0000 } else { h };
                    ((c((w >> 32) as u32) as u64) << 32) | c(w as u32) as u64
                }
            };
            let want: Vec<u64> = [elem(0), elem(3)].concat().into_iter().map(canon).collect();
            assert_eq!(got(&y), want, "{name} take_along_axis");
        }
    });
}
