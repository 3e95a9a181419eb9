//! Cumulative sum/product/max/min against plain CPU references: Nx 0.7.2's associative_scan
//! fallback written out literally (the recursion over even/odd slices, every op rounding or
//! wrapping to the tensor's type), and a sequential loop where the op is exactly associative
//! (integers). Per dtype, odd and long axes, every axis, reverse, views, special values.

mod common;
use common::*;
use nx_vulkan_engine::scan::{self, ScanOp};
use nx_vulkan_engine::*;
use std::cmp::Ordering;

/// Nx.add/multiply/max/min of two stored values of type `t` (BinaryBackend: computed exactly
/// or in f64, written once; max/min: NaN wins, ties keep the left operand).
fn op(o: ScanOp, t: DType, a: u64, b: u64) -> u64 {
    let (x, y) = (read(t, a), read(t, b));
    let r = match (o, x, y) {
        (ScanOp::Sum, N::I(p), N::I(q)) => N::I(p.wrapping_add(q)),
        (ScanOp::Product, N::I(p), N::I(q)) => N::I(p.wrapping_mul(q)),
        (ScanOp::Sum, _, _) => N::F(x.f() + y.f()),
        (ScanOp::Product, _, _) => N::F(x.f() * y.f()),
        (ScanOp::Max | ScanOp::Min, _, _) => {
            if x.is_nan() || y.is_nan() {
                N::F(f64::NAN)
            } else {
                let want = if o == ScanOp::Max { Ordering::Greater } else { Ordering::Less };
                if cmp(y, x) == Some(want) { y } else { x }
            }
        }
    };
    write(t, r)
}

/// Nx.associative_scan (nx.ex, do_associative_scan) on one row of stored values.
fn nx_scan(o: ScanOp, t: DType, x: &[u64]) -> Vec<u64> {
    let n = x.len();
    if n < 2 {
        return x.to_vec();
    }
    let even: Vec<u64> = x[..n - 1].iter().step_by(2).copied().collect();
    let odd: Vec<u64> = x[1..].iter().step_by(2).copied().collect();
    let reduced: Vec<u64> = odd.iter().zip(&even).map(|(&a, &b)| op(o, t, a, b)).collect();
    let so = nx_scan(o, t, &reduced);
    if n == 2 {
        return [even, reduced].concat();
    }
    let mut out = vec![];
    if n.is_multiple_of(2) {
        let mut se = vec![even[0]];
        se.extend((0..n / 2 - 1).map(|i| op(o, t, so[i], even[i + 1])));
        for i in 0..n / 2 {
            out.push(se[i]);
            out.push(so[i]);
        }
    } else {
        let rest: Vec<u64> = x[2..].iter().step_by(2).copied().collect();
        let se: Vec<u64> = so.iter().zip(&rest).map(|(&a, &b)| op(o, t, a, b)).collect();
        out.push(x[0]);
        for i in 0..so.len() {
            out.push(so[i]);
            out.push(se[i]);
        }
    }
    out
}

fn nx_scan_rev(o: ScanOp, t: DType, x: &[u64], reverse: bool) -> Vec<u64> {
    if !reverse {
        return nx_scan(o, t, x);
    }
    let r: Vec<u64> = x.iter().rev().copied().collect();
    let mut s = nx_scan(o, t, &r);
    s.reverse();
    s
}

const OPS: [ScanOp; 4] = [ScanOp::Sum, ScanOp::Product, ScanOp::Max, ScanOp::Min];

fn values(t: DType, n: usize, rng: &mut Rng) -> Vec<u64> {
    let mut v = random_values(t, n, rng);
    for x in v.iter_mut() {
        if rng.below(3) == 0 {
            // small values keep products finite for a while; ±0.0 and ±1 ties for max/min
            let s = [-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.0][rng.below(9) as usize];
            *x = if t.is_float() { write(t, N::F(s)) } else { write(t, N::I(s as i128)) };
        }
    }
    v
}

/// Checks `op` of the view `v` (elements `data` through its strides) along `axis`.
#[allow(clippy::too_many_arguments)]
fn check(ctx: &Context, f: &mut Failures, o: ScanOp, t: DType, data: &[u64], v: &Tensor, axis: usize, reverse: bool) {
    let shape = v.shape().to_vec();
    let (strides, offset) = (v.strides().to_vec(), v.offset() as isize);
    let out = ctx.cumulative(o, v, axis, reverse).expect("cumulative");
    assert_eq!(out.shape(), &shape[..]);
    assert_eq!(out.dtype(), t);
    let got = download(ctx, &out);
    let n = shape[axis];
    let total: usize = shape.iter().product();
    for base in 0..total {
        let c = coords(&shape, base);
        if c[axis] != 0 {
            continue;
        }
        let at = |k: usize| {
            let mut cc = c.clone();
            cc[axis] = k;
            flat_of(&shape, &cc)
        };
        let row: Vec<u64> = (0..n).map(|k| data[strided_index(&shape, &strides, offset, at(k))]).collect();
        let want = nx_scan_rev(o, t, &row, reverse);
        if t.is_integer() && !reverse {
            // exactly associative: a sequential loop gives the same
            let mut acc = row[0];
            for k in 1..n {
                acc = op(o, t, acc, row[k]);
                assert_eq!(acc, want[k], "{o:?} {t} sequential vs tree");
            }
        }
        for k in 0..n {
            let g = got[at(k)];
            f.check(|| format!("{o:?} {t} {shape:?} axis {axis} rev {reverse} at {k}: got {} want {}", show(t, g), show(t, want[k])), g, want[k]);
        }
    }
}

#[test]
fn every_op_every_dtype_odd_sizes() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(21);
        for t in DType::ALL {
            // below a register block (16 positions, 8 for 64-bit types), one, one and a bit, more
            for n in [1usize, 2, 3, 7, 8, 9, 16, 17, 64, 1023] {
                let data = values(t, n, &mut rng);
                let x = upload(ctx, t, &[n], &data);
                for o in OPS {
                    for reverse in [false, true] {
                        check(ctx, &mut f, o, t, &data, &x, 0, reverse);
                    }
                }
            }
        }
        f.finish("scan dtypes");
    });
}

/// Finite values for sums and products that stay finite and NaN-free for long stretches, so a
/// row's later positions are checked too: small and large magnitudes, subnormals, signed
/// zeros, and pairs that cancel into the subnormal range (where the f32 library leaves the
/// native add for its integer path).
fn finite_values(t: DType, n: usize, rng: &mut Rng) -> Vec<u64> {
    let (m, e) = match t {
        DType::F16 => (10, 5),
        DType::BF16 => (7, 8),
        DType::F32 => (23, 8),
        _ => (52, 11),
    };
    let mut v: Vec<u64> = Vec::with_capacity(n);
    while v.len() < n {
        let x = match rng.below(8) {
            0 => rng.next() & ((1u64 << m) - 1) | (rng.below(2) << (m + e)), // subnormal or ±0
            1 => write(t, N::F([-0.0, 0.0, 1.0, -1.0][rng.below(4) as usize])),
            2 if v.last().is_some() => {
                // nearly the negative of the previous value: the sum cancels to a few ulps
                let p = *v.last().unwrap() ^ (1u64 << (m + e));
                if rng.below(2) == 0 { p ^ 1 } else { p }
            }
            3 => write(t, N::F((rng.range(-3000, 3000) as f64) * 2f64.powi(-(m as i32) - 2))),
            _ => {
                let mant = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 + 1.0;
                let sign = if rng.below(2) == 0 { 1.0 } else { -1.0 };
                write(t, N::F(sign * mant * 2f64.powi(rng.range(-6, 6) as i32)))
            }
        };
        v.push(x);
    }
    v
}

/// The register blocks (16 positions per invocation, 8 for 64-bit types) at every placement
/// the kernel distinguishes — one block per row, several segments per workgroup, a row's last
/// block partly past its end, several workgroups per row, inner axes, a view read through its
/// strides — and the f32 library's add and multiply (the f32 sum and product), on values
/// whose sums keep going for the whole row, against Nx's tree.
#[test]
fn register_blocks_keep_the_tree() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(25);
        for t in [DType::F32, DType::F64, DType::F16, DType::BF16, DType::S32, DType::U8] {
            let r = ctx.scan_tile(t) / 256;
            for (rows, n) in [(5, r), (3, r + 1), (37, 40), (9, 1000), (2, 5 * ctx.scan_tile(t) + 3)] {
                let data = if t.is_float() { finite_values(t, rows * n, &mut rng) } else { values(t, rows * n, &mut rng) };
                let x = upload(ctx, t, &[rows, n], &data);
                for o in OPS {
                    check(ctx, &mut f, o, t, &data, &x, 1, false);
                }
                check(ctx, &mut f, ScanOp::Sum, t, &data, &x, 1, true);
                // inner axis (rows along axis 0 of the [rows, n] tensor's transpose) and a
                // strided view
                let tr = x.transpose(&[1, 0]).unwrap();
                check(ctx, &mut f, ScanOp::Sum, t, &data, &tr, 0, false);
                let upload_t = upload(ctx, t, &[n, rows], &data);
                let data_t = data.clone();
                check(ctx, &mut f, ScanOp::Sum, t, &data_t, &upload_t, 0, true);
            }
        }
        f.finish("scan register blocks");
    });
}

#[test]
fn every_axis_and_views() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(22);
        for t in [DType::F32, DType::BF16, DType::S8, DType::U64, DType::F64] {
            let data = values(t, 5 * 6 * 7, &mut rng);
            let x = upload(ctx, t, &[5, 6, 7], &data);
            let tr = x.transpose(&[2, 0, 1]).unwrap();
            let sl = x.reverse(&[2]).unwrap().slice(&[1, 0, 0], &[2, 3, 7], &[2, 2, 1]).unwrap();
            for o in OPS {
                for v in [&x, &tr, &sl] {
                    for axis in 0..3 {
                        check(ctx, &mut f, o, t, &data, v, axis, axis == 1);
                    }
                }
            }
        }
        f.finish("scan axes");
    });
}

#[test]
fn long_axes() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(23);
        // Rows past one segment (4,096 positions, 2,048 for 64-bit types, where the device has
        // the shared memory: lavapipe, the GPUs measured) take a second stride (3 passes), past
        // its square a third (5); short rows pack many to a workgroup.
        assert_eq!((scan::tile(DType::F32), scan::tile(DType::F16), scan::tile(DType::F64)), (4096, 4096, 2048));
        let cases = [
            (DType::F32, vec![4097], 0),
            (DType::F16, vec![3, 9000], 1),
            (DType::S32, vec![8193, 2], 0),
            (DType::S16, vec![3001, 2], 1),
            (DType::F64, vec![700, 3], 1),
            (DType::F64, vec![2, 2049], 1),
            (DType::F32, vec![1_100_003], 0),
            (DType::F64, vec![2048 * 2048 + 2049], 0),
        ];
        for (t, shape, axis) in cases {
            let n: usize = shape.iter().product();
            let data = values(t, n, &mut rng);
            let x = upload(ctx, t, &shape, &data);
            let ops: &[ScanOp] = if n > 1_000_000 { &[ScanOp::Sum, ScanOp::Max] } else { &OPS };
            for &o in ops {
                check(ctx, &mut f, o, t, &data, &x, axis, false);
            }
            check(ctx, &mut f, ScanOp::Sum, t, &data, &x, axis, true);
        }
        f.finish("scan long");
    });
}

#[test]
fn binary_backend_examples() {
    on_engine(|ctx| {
        // Nx 0.7.2 (oracle): cumulative_max(f32 [-0.0, 0.0, -0.0, 0.0, -0.0]) is
        // [-0.0, 0.0, 0.0, 0.0, 0.0] (a sequential max would keep -0.0 throughout)
        let z = upload(ctx, DType::F32, &[5], &[0x80000000, 0, 0x80000000, 0, 0x80000000]);
        assert_eq!(download(ctx, &ctx.cumulative(ScanOp::Max, &z, 0, false).unwrap()), [0x80000000, 0, 0, 0, 0]);
        // cumulative_sum(f32 [1.0e8, 1.0 x 6]) stays 1.0e8 (every step rounds to f32)
        let big = (1.0e8f32).to_bits() as u64;
        let one = 1.0f32.to_bits() as u64;
        let x = upload(ctx, DType::F32, &[7], &[big, one, one, one, one, one, one]);
        assert_eq!(download(ctx, &ctx.cumulative(ScanOp::Sum, &x, 0, false).unwrap()), [big; 7]);
        // Nx doctests: cumulative_product(iota({3,3}), axis: 1, reverse: true)
        let it = upload(ctx, DType::S64, &[3, 3], &(0..9).collect::<Vec<u64>>());
        assert_eq!(download(ctx, &ctx.cumulative(ScanOp::Product, &it, 1, true).unwrap()), [0, 2, 2, 60, 20, 5, 336, 56, 8]);
        // u8 stays u8 and wraps
        let u = upload(ctx, DType::U8, &[3], &[200, 100, 1]);
        assert_eq!(download(ctx, &ctx.cumulative(ScanOp::Sum, &u, 0, false).unwrap()), [200, 44, 45]);
        assert!(ScanOp::parse("cumulative_sum").is_ok() && ScanOp::parse("cumsum").is_err());
        assert!(ctx.cumulative(ScanOp::Sum, &u, 1, false).is_err());
        let e = ctx.empty(DType::F32, &[0, 3]).unwrap();
        assert_eq!(ctx.cumulative(ScanOp::Min, &e, 1, false).unwrap().shape(), &[0, 3]);
    });
}

#[test]
fn runs_on_the_device_and_reruns_bit_identically() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(24);
        // a pass per stride up and back down: 1 (one segment of the device's tile: 4,096 f32
        // or 2,048 f64 where it has the shared memory), 1 + tile, then that squared
        let (t32, t64) = (ctx.scan_tile(DType::F32), ctx.scan_tile(DType::F64));
        let cases = [
            (DType::F32, 1000usize, if 1000 <= t32 { 1u64 } else { 3 }),
            (DType::F32, t32, 1),
            (DType::F32, t32 + 1, 3),
            (DType::F32, 1_048_576.min(t32 * t32), 3),
            (DType::F64, t64, 1),
            (DType::F64, t64 + 1, 3),
            (DType::F64, t64 * (t64 + 1), 5),
        ];
        for (t, n, passes) in cases {
            let data = values(t, n, &mut rng);
            let x = upload(ctx, t, &[n], &data);
            let before = ctx.stats();
            let a = ctx.cumulative(ScanOp::Sum, &x, 0, false).unwrap();
            let mid = ctx.stats();
            assert_eq!(mid.dispatches - before.dispatches, passes, "n = {n}: {before:?} -> {mid:?}");
            assert_eq!(mid.recordings - before.recordings, 1, "one recording for the scan");
            let b = ctx.cumulative(ScanOp::Sum, &x, 0, false).unwrap();
            assert_eq!(download(ctx, &a), download(ctx, &b));
        }
    });
}
