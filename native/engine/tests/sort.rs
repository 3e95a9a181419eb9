//! sort / argsort / top_k against a plain CPU reference: a stable sort with Nx.BinaryBackend's
//! comparator clauses written out (binary_backend.ex, do_sort), per dtype, odd and long rows,
//! special values (NaN with payloads, ±Inf, -0.0), duplicate keys (stability), every axis of
//! views.

mod common;
use common::*;
use nx_vulkan_engine::sort::Direction;
use nx_vulkan_engine::*;
use std::cmp::Ordering;

/// BinaryBackend's comparator: true when `a` may come before `b`.
fn before(dir: Direction, a: N, b: N) -> bool {
    let cls = |v: N| -> i32 {
        // 0 -inf, 1 number, 2 +inf, 3 nan (the atoms)
        match v {
            N::F(f) if f.is_nan() => 3,
            N::F(f) if f == f64::INFINITY => 2,
            N::F(f) if f == f64::NEG_INFINITY => 0,
            _ => 1,
        }
    };
    let (ca, cb) = (cls(a), cls(b));
    if ca == cb && ca != 1 {
        return true; // {x, x}
    }
    match dir {
        Direction::Asc => {
            if ca == 0 { return true; }
            if cb == 0 { return false; }
            if ca == 3 { return false; }
            if cb == 3 { return true; }
            if ca == 2 { return false; }
            if cb == 2 { return true; }
            cmp(a, b) != Some(Ordering::Greater)
        }
        Direction::Desc => {
            if ca == 0 { return false; }
            if cb == 0 { return true; }
            if ca == 3 { return true; }
            if cb == 3 { return false; }
            if ca == 2 { return true; }
            if cb == 2 { return false; }
            cmp(a, b) != Some(Ordering::Less)
        }
    }
}

/// Stable argsort of one row.
fn ref_argsort(t: DType, row: &[u64], dir: Direction) -> Vec<usize> {
    let mut ix: Vec<usize> = (0..row.len()).collect();
    ix.sort_by(|&i, &j| {
        let (a, b) = (read(t, row[i]), read(t, row[j]));
        match (before(dir, a, b), before(dir, b, a)) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            _ => Ordering::Greater,
        }
    });
    ix
}

/// Input values with many duplicates (for stability) and special values.
fn values(t: DType, n: usize, rng: &mut Rng) -> Vec<u64> {
    let sp = specials(t);
    let mut v = random_values(t, n, rng);
    for x in v.iter_mut() {
        match rng.below(4) {
            0 => *x = write(t, N::I(rng.range(-3, 3) as i128)), // small range: ties
            1 => *x = sp[rng.below(sp.len() as u64) as usize],
            _ => {}
        }
    }
    v
}

/// Checks sort and argsort of `x` (a view of `shape`/`strides` over `data`) along `axis`.
#[allow(clippy::too_many_arguments)]
fn check(ctx: &Context, f: &mut Failures, t: DType, data: &[u64], view: &Tensor, axis: usize, dir: Direction, it: DType) {
    let shape = view.shape().to_vec();
    let strides = view.strides().to_vec();
    let offset = view.offset() as isize;
    let sorted = ctx.sort(view, axis, dir).expect("sort");
    let idx = ctx.argsort(view, axis, dir, true, it).expect("argsort");
    assert_eq!(sorted.shape(), &shape[..]);
    assert_eq!(idx.shape(), &shape[..]);
    assert_eq!(idx.dtype(), it);
    let got_v = download(ctx, &sorted);
    let got_i = download(ctx, &idx);
    let n = shape[axis];
    let total: usize = shape.iter().product();
    // every row along `axis`
    for base in 0..total {
        let c = coords(&shape, base);
        if c[axis] != 0 {
            continue;
        }
        let at = |k: usize| {
            let mut cc = c.clone();
            cc[axis] = k;
            cc
        };
        let row: Vec<u64> = (0..n).map(|k| data[strided_index(&shape, &strides, offset, flat_of(&shape, &at(k)))]).collect();
        let want = ref_argsort(t, &row, dir);
        for k in 0..n {
            let o = flat_of(&shape, &at(k));
            f.check(|| format!("{t} {shape:?} axis {axis} {dir:?} value at {:?}: got {} want {}", at(k), show(t, got_v[o]), show(t, row[want[k]])), got_v[o], row[want[k]]);
            let wi = (want[k] as u64) & mask(it);
            f.check(|| format!("{t} {shape:?} axis {axis} {dir:?} index at {:?}: got {} want {wi}", at(k), got_i[o]), got_i[o], wi);
        }
    }
}

#[test]
fn every_dtype_every_axis_both_directions() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(11);
        for t in DType::ALL {
            for shape in [vec![1usize], vec![7], vec![3, 37], vec![4, 5, 6]] {
                let n: usize = shape.iter().product();
                let data = values(t, n, &mut rng);
                let x = upload(ctx, t, &shape, &data);
                for axis in 0..shape.len() {
                    for dir in [Direction::Asc, Direction::Desc] {
                        check(ctx, &mut f, t, &data, &x, axis, dir, DType::S64);
                    }
                }
            }
        }
        f.finish("sort dtypes");
    });
}

#[test]
fn long_rows_use_the_global_merge() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(12);
        for (t, shape) in [
            (DType::F32, vec![4097]),
            (DType::F64, vec![1023]),
            (DType::S32, vec![2, 1500]),
            (DType::U8, vec![5000]), // few distinct keys: stability over global passes
            (DType::BF16, vec![3000, 2]),
            // stages of 4 and 5 global steps (a pass of three, then one or two), several rows
            (DType::F32, vec![20000]),
            (DType::S32, vec![3, 9000]),
        ] {
            let n: usize = shape.iter().product();
            let data = values(t, n, &mut rng);
            let x = upload(ctx, t, &shape, &data);
            let axis = if shape.len() == 2 && shape[1] == 2 { 0 } else { shape.len() - 1 };
            for dir in [Direction::Asc, Direction::Desc] {
                check(ctx, &mut f, t, &data, &x, axis, dir, DType::U32);
            }
        }
        f.finish("sort long rows");
    });
}

#[test]
fn views_and_index_types() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(13);
        let t = DType::F16;
        let data = values(t, 6 * 9 * 5, &mut rng);
        let x = upload(ctx, t, &[6, 9, 5], &data);
        let tr = x.transpose(&[2, 0, 1]).unwrap();
        let rev = x.reverse(&[1]).unwrap().slice(&[1, 0, 1], &[4, 5, 3], &[1, 2, 1]).unwrap();
        let bc = upload(ctx, t, &[9], &data[..9]).broadcast(&[4, 9], &[1]).unwrap();
        for (v, d) in [(&tr, &data), (&rev, &data)] {
            for axis in 0..3 {
                check(ctx, &mut f, t, d, v, axis, Direction::Desc, DType::S16);
                check(ctx, &mut f, t, d, v, axis, Direction::Asc, DType::U64);
            }
        }
        let d9 = data[..9].to_vec();
        check(ctx, &mut f, t, &d9, &bc, 0, Direction::Asc, DType::S32);
        check(ctx, &mut f, t, &d9, &bc, 1, Direction::Asc, DType::S32);
        // indices that do not fit the index type wrap as number_to_binary writes them
        let long = values(DType::S16, 300, &mut rng);
        let lx = upload(ctx, DType::S16, &[300], &long);
        check(ctx, &mut f, DType::S16, &long, &lx, 0, Direction::Asc, DType::U8);
        check(ctx, &mut f, DType::S16, &long, &lx, 0, Direction::Desc, DType::S8);
        f.finish("sort views");
    });
}

#[test]
fn binary_backend_examples() {
    on_engine(|ctx| {
        // Nx 0.7.2 (oracle): argsort([3.0, nan, -0.0, 0.0, -inf, 1.0, inf, 0.0, -0.0, nan, 1.0])
        let vals = [3.0, f64::NAN, -0.0, 0.0, f64::NEG_INFINITY, 1.0, f64::INFINITY, 0.0, -0.0, f64::NAN, 1.0];
        let bits: Vec<u64> = vals.iter().map(|&v| (v as f32).to_bits() as u64).collect();
        let x = upload(ctx, DType::F32, &[11], &bits);
        let asc = download(ctx, &ctx.argsort(&x, 0, Direction::Asc, false, DType::S64).unwrap());
        assert_eq!(asc, [4, 2, 3, 7, 8, 5, 10, 0, 6, 1, 9]);
        let desc = download(ctx, &ctx.argsort(&x, 0, Direction::Desc, false, DType::S64).unwrap());
        assert_eq!(desc, [1, 9, 6, 0, 5, 10, 2, 3, 7, 8, 4]);
        // sort moves stored bits: the order of -0.0 and 0.0 is kept
        let s = download(ctx, &ctx.sort(&x, 0, Direction::Desc).unwrap());
        assert_eq!(
            s,
            [0x7FC00000, 0x7FC00000, 0x7F800000, 0x40400000, 0x3F800000, 0x3F800000, 0x80000000, 0, 0, 0x80000000, 0xFF800000]
        );
        let (v, i) = ctx.top_k(&x, 4, DType::S64).unwrap();
        assert_eq!(download(ctx, &i), [1, 9, 6, 0]);
        assert_eq!(download(ctx, &v), [0x7FC00000, 0x7FC00000, 0x7F800000, 0x40400000]);
        // argsort(u8 [1,1,0,0,1], desc) => [0, 1, 4, 2, 3]
        let u = upload(ctx, DType::S64, &[5], &[1, 1, 0, 0, 1]);
        assert_eq!(download(ctx, &ctx.argsort(&u, 0, Direction::Desc, true, DType::U8).unwrap()), [0, 1, 4, 2, 3]);
        // a scalar sorts to itself; its argsort is 0
        let sc = upload(ctx, DType::F32, &[], &[0x40490FDB]);
        let ss = ctx.sort(&sc, 0, Direction::Asc).unwrap();
        assert_eq!(ss.shape(), &[] as &[usize]);
        assert_eq!(download(ctx, &ss), [0x40490FDB]);
        assert_eq!(download(ctx, &ctx.argsort(&sc, 0, Direction::Asc, true, DType::S64).unwrap()), [0]);
    });
}

#[test]
fn top_k_matches_the_descending_argsort() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(14);
        for (t, shape, k) in [
            (DType::F32, vec![3, 10], 4),
            (DType::S8, vec![2, 3, 7], 7),
            (DType::F64, vec![1], 1),
            (DType::U16, vec![2, 2000], 5),
        ] {
            let n: usize = shape.iter().product();
            let data = values(t, n, &mut rng);
            let x = upload(ctx, t, &shape, &data);
            let (v, i) = ctx.top_k(&x, k, DType::S64).unwrap();
            let mut oshape = shape.clone();
            *oshape.last_mut().unwrap() = k;
            assert_eq!(v.shape(), &oshape[..]);
            assert_eq!(i.shape(), &oshape[..]);
            let (gv, gi) = (download(ctx, &v), download(ctx, &i));
            let len = *shape.last().unwrap();
            for r in 0..n / len {
                let row = &data[r * len..(r + 1) * len];
                let want = ref_argsort(t, row, Direction::Desc);
                for j in 0..k {
                    f.check(|| format!("top_k {t} row {r} value {j}"), gv[r * k + j], row[want[j]]);
                    f.check(|| format!("top_k {t} row {r} index {j}"), gi[r * k + j], want[j] as u64);
                }
            }
        }
        f.finish("top_k");
    });
}

#[test]
fn errors_and_empty_tensors() {
    on_engine(|ctx| {
        let x = upload(ctx, DType::F32, &[2, 3], &[0; 6]);
        assert!(ctx.sort(&x, 2, Direction::Asc).is_err());
        assert!(ctx.argsort(&x, 0, Direction::Asc, true, DType::F32).is_err());
        assert!(ctx.top_k(&x, 4, DType::S64).is_err());
        assert!(ctx.top_k(&x, 0, DType::S64).is_err());
        assert!(Direction::parse("up").is_err());
        let e = ctx.empty(DType::S32, &[0, 4]).unwrap();
        assert_eq!(ctx.sort(&e, 1, Direction::Asc).unwrap().shape(), &[0, 4]);
        assert_eq!(ctx.argsort(&e, 0, Direction::Desc, true, DType::S64).unwrap().shape(), &[0, 4]);
    });
}

#[test]
fn runs_on_the_device_and_reruns_bit_identically() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(15);
        let data = values(DType::F32, 2 * 3000, &mut rng);
        let x = upload(ctx, DType::F32, &[2, 3000], &data);
        let before = ctx.stats();
        let a = download(ctx, &ctx.argsort(&x, 1, Direction::Asc, true, DType::S32).unwrap());
        let mid = ctx.stats();
        // init + presort + (stage 2048: 1 global + 1 local) + (4096: its 2 global steps in 1
        // pass + 1 local) + out
        assert_eq!(mid.dispatches - before.dispatches, 7, "{before:?} -> {mid:?}");
        // One recording for the sort; the download needs one more only through a staging copy
        // (host-visible device memory, as on lavapipe, is read in place).
        let download_recordings = if x.buffer().host_visible() { 0 } else { 1 };
        assert_eq!(mid.recordings - before.recordings, 1 + download_recordings, "one recording for the sort");
        let b = download(ctx, &ctx.argsort(&x, 1, Direction::Asc, true, DType::S32).unwrap());
        assert_eq!(a, b);
    });
}
