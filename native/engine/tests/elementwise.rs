//! Elementwise kernels against a plain CPU model of Nx.BinaryBackend (tests/common), bit for bit:
//! every dtype, every non-transcendental unary/binary op, select, clip, as_type between every
//! pair of types, bitcast, iota, full; odd sizes, special values, broadcasting, strided views,
//! fusion and a tensor beyond lavapipe's 128 MiB binding limit.
//!
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test -p nx_vulkan_engine --test elementwise

mod common;
use common::*;
use nx_vulkan_engine::*;

const N_RANDOM: usize = 2001;

/// Inputs for a unary op: every special value, then random ones.
fn unary_inputs(t: DType, seed: u64) -> Vec<u64> {
    let mut v = specials(t);
    let mut rng = Rng(seed);
    v.extend(random_values(t, N_RANDOM, &mut rng));
    v
}

/// Inputs for a binary op: every pair of special values, then random pairs.
fn binary_inputs(lt: DType, rt: DType, op: BinaryOp, seed: u64) -> (Vec<u64>, Vec<u64>) {
    let (sa, sb) = (specials(lt), specials(rt));
    let (mut a, mut b) = (vec![], vec![]);
    for &x in &sa {
        for &y in &sb {
            a.push(x);
            b.push(y);
        }
    }
    let mut rng = Rng(seed);
    a.extend(random_values(lt, N_RANDOM, &mut rng));
    let shift_like = matches!(op, BinaryOp::LeftShift | BinaryOp::RightShift | BinaryOp::Pow);
    for _ in 0..N_RANDOM {
        let y = if shift_like && rng.below(4) != 0 {
            // mostly amounts around the width, some negative (signed only)
            let lo = if rt.kind() == dtype::Kind::Signed { -4 } else { 0 };
            write(rt, N::I(rng.range(lo, rt.bits() as i64 + 4) as i128))
        } else {
            random_values(rt, 1, &mut rng)[0]
        };
        b.push(y);
    }
    (a, b)
}

fn unary_out(op: UnaryOp, t: DType) -> Option<DType> {
    use UnaryOp::*;
    match op {
        Negate | Abs | Sign | Ceil | Floor | Round => Some(t),
        Sqrt => Some(if t.is_float() { t } else { F32 }),
        IsNan | IsInfinity | LogicalNot => Some(U8),
        BitwiseNot | CountLeadingZeros | PopulationCount => t.is_integer().then_some(t),
        _ => None, // transcendental: someone else's suite
    }
}

fn binary_out(op: BinaryOp, t: DType) -> Option<DType> {
    use BinaryOp::*;
    match op {
        Add | Subtract | Multiply | Max | Min | Remainder => Some(t),
        Divide => Some(if t.is_float() { t } else { F32 }),
        Pow | Quotient | BitwiseAnd | BitwiseOr | BitwiseXor | LeftShift | RightShift => t.is_integer().then_some(t),
        Equal | NotEqual | Greater | Less | GreaterEqual | LessEqual | LogicalAnd | LogicalOr | LogicalXor => Some(U8),
        Atan2 => None,
    }
}

#[test]
fn unary_ops_every_dtype() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut kernels = 0;
        for (k, &t) in DType::ALL.iter().enumerate() {
            let xs = unary_inputs(t, 100 + k as u64);
            let x = upload(ctx, t, &[xs.len()], &xs);
            for &op in UnaryOp::ALL {
                let Some(out) = unary_out(op, t) else { continue };
                let got = download(ctx, &ctx.unary(op, &x, out).unwrap());
                kernels += 1;
                for i in 0..xs.len() {
                    let want = write(out, ref_unary(op, t, read(t, xs[i])));
                    f.check(|| format!("{}({t} {}) -> {out}: got {} want {}", op.name(), show(t, xs[i]), show(out, got[i]), show(out, want)), got[i], want);
                }
            }
        }
        eprintln!("unary: {kernels} kernels");
        f.finish("unary ops");
    });
}

fn run_binary(ctx: &Context, f: &mut Failures, op: BinaryOp, lt: DType, rt: DType, out: DType, seed: u64) {
    let (xa, xb) = binary_inputs(lt, rt, op, seed);
    let a = upload(ctx, lt, &[xa.len()], &xa);
    let b = upload(ctx, rt, &[xb.len()], &xb);
    let got = download(ctx, &ctx.binary(op, &a, &b, out).unwrap());
    for i in 0..xa.len() {
        let want = write(out, ref_binary(op, read(lt, xa[i]), read(rt, xb[i])));
        f.check(
            || format!("{}({lt} {}, {rt} {}) -> {out}: got {} want {}", op.name(), show(lt, xa[i]), show(rt, xb[i]), show(out, got[i]), show(out, want)),
            got[i],
            want,
        );
    }
}

fn binary_group(name: &str, ops: &[BinaryOp]) {
    let ops = ops.to_vec();
    let name = name.to_string();
    on_engine(move |ctx| {
        let mut f = Failures::default();
        let mut kernels = 0;
        for (k, &t) in DType::ALL.iter().enumerate() {
            for (j, &op) in ops.iter().enumerate() {
                let Some(out) = binary_out(op, t) else { continue };
                run_binary(ctx, &mut f, op, t, t, out, (k * 100 + j) as u64);
                kernels += 1;
            }
        }
        eprintln!("{name}: {kernels} kernels");
        f.finish(&name);
    });
}

#[test]
fn arithmetic_every_dtype() {
    use BinaryOp::*;
    binary_group("arithmetic", &[Add, Subtract, Multiply, Divide, Remainder, Quotient, Pow, Max, Min]);
}

#[test]
fn bitwise_and_shifts_every_integer_dtype() {
    use BinaryOp::*;
    binary_group("bitwise", &[BitwiseAnd, BitwiseOr, BitwiseXor, LeftShift, RightShift]);
}

#[test]
fn comparisons_and_logical_every_dtype() {
    use BinaryOp::*;
    binary_group("comparisons", &[Equal, NotEqual, Greater, Less, GreaterEqual, LessEqual, LogicalAnd, LogicalOr, LogicalXor]);
}

/// Operands of different types, with the result type Nx.Type.merge picks.
#[test]
fn mixed_operand_types() {
    use BinaryOp::*;
    on_engine(|ctx| {
        let mut f = Failures::default();
        let combos = [
            (S8, U8, S16),
            (U32, S8, S64),
            (U64, S64, S64),
            (S32, F16, F16),
            (S64, BF16, BF16),
            (F16, BF16, F16),
            (S64, F64, F64),
            (U64, F32, F32),
            (F32, F64, F64),
            (U8, F32, F32),
        ];
        for (k, &(lt, rt, out)) in combos.iter().enumerate() {
            for (j, &op) in [Add, Subtract, Multiply, Max, Min, Remainder, Less, Equal, GreaterEqual].iter().enumerate() {
                let o = if op.is_comparison() { U8 } else { out };
                run_binary(ctx, &mut f, op, lt, rt, o, (k * 10 + j) as u64);
                if !op.is_comparison() {
                    // and the other way round
                    run_binary(ctx, &mut f, op, rt, lt, o, (k * 10 + j + 5000) as u64);
                }
            }
            if out.is_float() {
                run_binary(ctx, &mut f, Divide, lt, rt, out, k as u64);
            }
        }
        // u64 against s64 comparisons need more than a 64-bit signed compare
        for op in [Less, Greater, Equal, LessEqual, NotEqual] {
            run_binary(ctx, &mut f, op, U64, S64, U8, 77);
            run_binary(ctx, &mut f, op, S64, U64, U8, 78);
        }
        f.finish("mixed types");
    });
}

#[test]
fn as_type_every_pair() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        for (k, &from) in DType::ALL.iter().enumerate() {
            let xs = unary_inputs(from, 500 + k as u64);
            let x = upload(ctx, from, &[xs.len()], &xs);
            for &to in &DType::ALL {
                let got = download(ctx, &ctx.convert(&x, to).unwrap());
                for i in 0..xs.len() {
                    // as_type to the same type returns the tensor itself: bits (NaN payloads) kept
                    let want = if from == to { xs[i] } else { write(to, read(from, xs[i])) };
                    f.check(|| format!("as_type({from} {}) -> {to}: got {} want {}", show(from, xs[i]), show(to, got[i]), show(to, want)), got[i], want);
                }
            }
        }
        // integer -> f32 goes through f64 first (Erlang does): 2^53 + 2^29 + 1 rounds twice
        let x = upload(ctx, S64, &[1], &[(1u64 << 53) + (1 << 29) + 1]);
        let got = download(ctx, &ctx.convert(&x, F32).unwrap());
        f.check(|| format!("s64 2^53+2^29+1 -> f32 {:#x}", got[0]), got[0], 0x5A00_0000);
        f.finish("as_type");
    });
}

#[test]
fn bitcast_keeps_bits() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        for (k, &from) in DType::ALL.iter().enumerate() {
            let xs = unary_inputs(from, 900 + k as u64);
            let x = upload(ctx, from, &[xs.len()], &xs);
            for &to in DType::ALL.iter().filter(|t| t.bits() == from.bits()) {
                // as a view (no kernel) and as an expression node inside a kernel
                let view = download(ctx, &x.bitcast(to).unwrap());
                let e = Expr::Bitcast { arg: Box::new(Expr::Input(0)), dtype: to };
                let kern = download(ctx, &ctx.map(&e, &[&x]).unwrap());
                // bitcast of a computed value: negate twice (canonical NaN), then reinterpret
                let neg = |a| Expr::unary(UnaryOp::Negate, a, from);
                let e2 = Expr::Bitcast { arg: Box::new(neg(neg(Expr::Input(0)))), dtype: to };
                let comp = download(ctx, &ctx.map(&e2, &[&x]).unwrap());
                for i in 0..xs.len() {
                    f.check(|| format!("bitcast view {from}->{to} {:#x} got {:#x}", xs[i], view[i]), view[i], xs[i]);
                    f.check(|| format!("bitcast expr {from}->{to} {:#x} got {:#x}", xs[i], kern[i]), kern[i], xs[i]);
                    let nn = write(from, ref_unary(UnaryOp::Negate, from, ref_unary(UnaryOp::Negate, from, read(from, xs[i]))));
                    f.check(|| format!("bitcast(negate(negate)) {from}->{to} {:#x} got {:#x} want {nn:#x}", xs[i], comp[i]), comp[i], nn);
                }
            }
        }
        assert!(ctx.map(&Expr::Bitcast { arg: Box::new(Expr::Input(0)), dtype: U16 }, &[&upload(ctx, U8, &[1], &[1])]).is_err());
        assert!(upload(ctx, U8, &[1], &[1]).bitcast(F16).is_err());
        f.finish("bitcast");
    });
}

#[test]
fn select_and_clip() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let n = 3001;
        let mut rng = Rng(42);
        // select: predicate types (NaN and -0.0 in a float predicate), mixed branch types
        for (k, &(pt, tt, ft, out)) in [(U8, S8, F32, F32), (F32, F16, F16, F16), (S64, U64, U64, U64), (BF16, F64, S32, F64), (U8, S32, U8, S32)].iter().enumerate() {
            let p: Vec<u64> = (0..n).map(|i| if i < specials(pt).len() { specials(pt)[i] } else if rng.below(2) == 0 { 0 } else { random_values(pt, 1, &mut rng)[0] }).collect();
            let a = random_values(tt, n, &mut rng);
            let b = random_values(ft, n, &mut rng);
            let g = download(
                ctx,
                &ctx.select(&upload(ctx, pt, &[n], &p), &upload(ctx, tt, &[n], &a), &upload(ctx, ft, &[n], &b), out).unwrap(),
            );
            for i in 0..n {
                let v = if read(pt, p[i]).truthy() { read(tt, a[i]) } else { read(ft, b[i]) };
                let want = write(out, v);
                f.check(|| format!("select#{k}({}, {}, {}) -> {out}: got {} want {}", show(pt, p[i]), show(tt, a[i]), show(ft, b[i]), show(out, g[i]), show(out, want)), g[i], want);
            }
        }
        // select with broadcast scalar predicate and branches
        let s = ctx.select(&upload(ctx, U8, &[], &[1]), &upload(ctx, S32, &[3], &[1, 2, 3]), &upload(ctx, S32, &[2, 3], &[9; 6]), S32).unwrap();
        assert_eq!(s.shape(), &[2, 3]);
        assert_eq!(download(ctx, &s), vec![1, 2, 3, 1, 2, 3]);

        // clip: scalar bounds of various types, NaN in x and in the bounds, lo > hi
        let cases: Vec<(DType, DType, DType, DType)> = vec![(F32, F32, F32, F32), (U8, F32, S32, F32), (S32, U8, U8, S32), (F16, F16, F16, F16), (S64, F64, F64, F64), (BF16, F32, BF16, F32), (U64, S8, U64, S64)];
        for (k, &(xt, lt, ht, out)) in cases.iter().enumerate() {
            let xs = unary_inputs(xt, 1000 + k as u64);
            let x = upload(ctx, xt, &[xs.len()], &xs);
            let bounds: Vec<(u64, u64)> = {
                let (sl, sh) = (specials(lt), specials(ht));
                let mut v: Vec<(u64, u64)> = (0..6).map(|_| (sl[rng.below(sl.len() as u64) as usize], sh[rng.below(sh.len() as u64) as usize])).collect();
                v.push((write(lt, N::F(-1.5)), write(ht, N::F(100.0))));
                v.push((write(lt, N::F(0.0)), write(ht, N::F(1.0))));
                v
            };
            for (lo, hi) in bounds {
                let g = download(ctx, &ctx.clip(&x, &upload(ctx, lt, &[], &[lo]), &upload(ctx, ht, &[], &[hi]), out).unwrap());
                for i in 0..xs.len() {
                    let want = write(out, ref_clip(read(xt, xs[i]), read(lt, lo), read(ht, hi)));
                    f.check(|| format!("clip({xt} {}, {lt} {}, {ht} {}) -> {out}: got {} want {}", show(xt, xs[i]), show(lt, lo), show(ht, hi), show(out, g[i]), show(out, want)), g[i], want);
                }
            }
        }
        f.finish("select/clip");
    });
}

#[test]
fn iota_and_full() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        for &t in &DType::ALL {
            let n = 70_001; // past u16/f16 range: wraps and Inf
            let g = download(ctx, &ctx.iota(t, &[n], None).unwrap());
            for i in 0..n {
                let want = write(t, N::I(i as i128));
                f.check(|| format!("iota {t} [{i}] got {:#x} want {want:#x}", g[i]), g[i], want);
            }
            let shape = [3, 5, 7];
            for axis in 0..3 {
                let g = download(ctx, &ctx.iota(t, &shape, Some(axis)).unwrap());
                for i in 0..105 {
                    let want = write(t, N::I(coords(&shape, i)[axis] as i128));
                    f.check(|| format!("iota {t} axis {axis} [{i}] got {:#x} want {want:#x}", g[i]), g[i], want);
                }
            }
            assert!(ctx.iota(t, &shape, Some(3)).is_err());
            let values: Vec<Scalar> = if t.is_float() {
                vec![Scalar::F(0.1), Scalar::F(-0.0), Scalar::F(f64::NAN), Scalar::F(1e300), Scalar::F(-1e-300), Scalar::I(-3), Scalar::U(u64::MAX)]
            } else {
                vec![Scalar::I(-1), Scalar::I(300), Scalar::U(u64::MAX), Scalar::I(i64::MIN)]
            };
            for v in values {
                let g = download(ctx, &ctx.full(v, t, &[5, 3]).unwrap());
                let n = match v {
                    Scalar::F(x) => N::F(x),
                    Scalar::I(i) => N::I(i as i128),
                    Scalar::U(u) => N::I(u as i128),
                };
                let want = write(t, n);
                for i in 0..15 {
                    f.check(|| format!("full {v:?} {t}: got {:#x} want {want:#x}", g[i]), g[i], want);
                }
            }
        }
        assert!(ctx.full(Scalar::F(1.5), S32, &[2]).is_err());
        assert_eq!(ctx.full(Scalar::I(1), S32, &[0, 4]).unwrap().numel(), 0);
        f.finish("iota/full");
    });
}

/// Sizes around the workgroup size (256) and zero, for one op per kind of type.
#[test]
fn odd_sizes() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(7);
        for n in [0usize, 1, 7, 255, 256, 257, 1023, 1025, 4099, 65_537] {
            for (t, op) in [(F32, BinaryOp::Add), (S8, BinaryOp::Multiply), (F16, BinaryOp::Subtract), (U64, BinaryOp::BitwiseXor)] {
                let xa = random_values(t, n, &mut rng);
                let xb = random_values(t, n, &mut rng);
                let c = ctx.binary(op, &upload(ctx, t, &[n], &xa), &upload(ctx, t, &[n], &xb), t).unwrap();
                assert_eq!(c.shape(), &[n]);
                let g = download(ctx, &c);
                assert_eq!(g.len(), n);
                for i in 0..n {
                    let want = write(t, ref_binary(op, read(t, xa[i]), read(t, xb[i])));
                    f.check(|| format!("n={n} {}({}, {}) {t}: got {:#x} want {want:#x}", op.name(), xa[i], xb[i], g[i]), g[i], want);
                }
            }
        }
        f.finish("odd sizes");
    });
}

/// Broadcasting (scalar, row, column, middle axis) and inputs read through strided, transposed
/// and reversed views.
#[test]
fn broadcasting_and_views() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(9);
        let t = F32;
        let (r, c) = (37, 41);
        let ma = random_values(t, r * c, &mut rng);
        let a = upload(ctx, t, &[r, c], &ma);
        let row = random_values(t, c, &mut rng);
        let col = random_values(t, r, &mut rng);
        let sc = random_values(t, 1, &mut rng);
        let check = |f: &mut Failures, name: &str, got: &[u64], want: &dyn Fn(usize, usize) -> u64| {
            for i in 0..r {
                for j in 0..c {
                    let w = want(i, j);
                    f.check(|| format!("{name} [{i},{j}] got {:#x} want {w:#x}", got[i * c + j]), got[i * c + j], w);
                }
            }
        };
        let add = |x: u64, y: u64| write(t, ref_binary(BinaryOp::Subtract, read(t, x), read(t, y)));
        // scalar on either side, row [c], column [r, 1]
        let g = download(ctx, &ctx.binary(BinaryOp::Subtract, &a, &upload(ctx, t, &[], &sc), t).unwrap());
        check(&mut f, "a - scalar", &g, &|i, j| add(ma[i * c + j], sc[0]));
        let g = download(ctx, &ctx.binary(BinaryOp::Subtract, &upload(ctx, t, &[], &sc), &a, t).unwrap());
        check(&mut f, "scalar - a", &g, &|i, j| add(sc[0], ma[i * c + j]));
        let g = download(ctx, &ctx.binary(BinaryOp::Subtract, &a, &upload(ctx, t, &[c], &row), t).unwrap());
        check(&mut f, "a - row", &g, &|i, j| add(ma[i * c + j], row[j]));
        let g = download(ctx, &ctx.binary(BinaryOp::Subtract, &upload(ctx, t, &[r, 1], &col), &a, t).unwrap());
        check(&mut f, "col - a", &g, &|i, j| add(col[i], ma[i * c + j]));
        let g = download(ctx, &ctx.binary(BinaryOp::Subtract, &upload(ctx, t, &[r, 1], &col), &upload(ctx, t, &[1, c], &row), t).unwrap());
        check(&mut f, "col - row", &g, &|i, j| add(col[i], row[j]));
        assert!(ctx.binary(BinaryOp::Add, &a, &upload(ctx, t, &[r], &col), t).is_err());

        // a transposed view [c, r] minus a reversed view, minus a stepped slice
        let big = random_values(t, 3 * r * 2 * c, &mut rng);
        let tb = upload(ctx, t, &[3 * r, 2 * c], &big);
        let sl = tb.slice(&[1, 1], &[r, c], &[3, 2]).unwrap(); // rows 1,4,..; cols 1,3,..
        let at = a.transpose(&[1, 0]).unwrap(); // [c, r]
        let att = at.transpose(&[1, 0]).unwrap(); // back to [r, c] through two views
        let rev = a.reverse(&[0, 1]).unwrap();
        let g = download(ctx, &ctx.binary(BinaryOp::Subtract, &rev, &sl, t).unwrap());
        check(&mut f, "reverse(a) - slice", &g, &|i, j| add(ma[(r - 1 - i) * c + (c - 1 - j)], big[(1 + 3 * i) * 2 * c + 1 + 2 * j]));
        let g = download(ctx, &ctx.binary(BinaryOp::Subtract, &att, &rev.reverse(&[1]).unwrap(), t).unwrap());
        check(&mut f, "a - reverse0(a)", &g, &|i, j| add(ma[i * c + j], ma[(r - 1 - i) * c + j]));
        let g = download(ctx, &ctx.unary(UnaryOp::Negate, &at, t).unwrap());
        for i in 0..c {
            for j in 0..r {
                let w = write(t, ref_unary(UnaryOp::Negate, t, read(t, ma[j * c + i])));
                f.check(|| format!("negate(transpose) [{i},{j}]"), g[i * r + j], w);
            }
        }
        // a broadcast view along the middle axis, through Tensor::broadcast
        let b3 = upload(ctx, t, &[r], &col).broadcast(&[r, 5, 2], &[0]).unwrap();
        let g = download(ctx, &ctx.unary(UnaryOp::Abs, &b3, t).unwrap());
        for i in 0..r * 10 {
            let w = write(t, ref_unary(UnaryOp::Abs, t, read(t, col[i / 10])));
            f.check(|| format!("abs(broadcast) [{i}]"), g[i], w);
        }
        // integer mixed views: s8 transposed + u16 reversed -> s32
        let xs = random_values(S8, 6 * 7, &mut rng);
        let ys = random_values(U16, 7 * 6, &mut rng);
        let x = upload(ctx, S8, &[6, 7], &xs).transpose(&[1, 0]).unwrap();
        let y = upload(ctx, U16, &[7, 6], &ys).reverse(&[1]).unwrap();
        let g = download(ctx, &ctx.binary(BinaryOp::Add, &x, &y, S32).unwrap());
        for i in 0..7 {
            for j in 0..6 {
                let w = write(S32, ref_binary(BinaryOp::Add, read(S8, xs[j * 7 + i]), read(U16, ys[i * 6 + 5 - j])));
                f.check(|| format!("s8ᵀ + rev(u16) [{i},{j}]"), g[i * 6 + j], w);
            }
        }
        f.finish("broadcasting/views");
    });
}

/// convert(add(mul(a, b), c)) as one expression equals the op-by-op result and is one dispatch.
#[test]
fn fused_chain_equals_unfused() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(11);
        let n = 4097;
        for (t, out) in [(F32, F16), (BF16, F32), (F16, BF16), (S16, F32), (F64, S32), (U8, S8)] {
            let (xa, xb, xc) = (random_values(t, n, &mut rng), random_values(t, n, &mut rng), random_values(t, n, &mut rng));
            let (a, b, c) = (upload(ctx, t, &[n], &xa), upload(ctx, t, &[n], &xb), upload(ctx, t, &[n], &xc));
            let mul = ctx.binary(BinaryOp::Multiply, &a, &b, t).unwrap();
            let add = ctx.binary(BinaryOp::Add, &mul, &c, t).unwrap();
            let unfused = download(ctx, &ctx.convert(&add, out).unwrap());
            let e = Expr::convert(
                Expr::binary(BinaryOp::Add, Expr::binary(BinaryOp::Multiply, Expr::Input(0), Expr::Input(1), t), Expr::Input(2), t),
                out,
            );
            let _warm = ctx.map(&e, &[&a, &b, &c]).unwrap(); // compile outside the count
            let before = ctx.stats().dispatches;
            let fused = ctx.map(&e, &[&a, &b, &c]).unwrap();
            let after = ctx.stats().dispatches;
            assert_eq!(after - before, 1, "fused chain {t}->{out} must be one dispatch");
            let fused = download(ctx, &fused);
            for i in 0..n {
                let m = write(t, ref_binary(BinaryOp::Multiply, read(t, xa[i]), read(t, xb[i])));
                let s = write(t, ref_binary(BinaryOp::Add, read(t, m), read(t, xc[i])));
                let want = write(out, read(t, s));
                assert_eq!(unfused[i], want, "unfused {t}->{out} at {i}: a={:#x} b={:#x} c={:#x}", xa[i], xb[i], xc[i]);
                assert_eq!(fused[i], unfused[i], "fused != unfused {t}->{out} at {i}: a={:#x} b={:#x} c={:#x}", xa[i], xb[i], xc[i]);
            }
        }
        // several outputs from one kernel (map_multi) with a shared subexpression
        let xs = random_values(F32, 1025, &mut rng);
        let x = upload(ctx, F32, &[1025], &xs);
        let sq = Expr::binary(BinaryOp::Multiply, Expr::Input(0), Expr::Input(0), F32);
        let before = ctx.stats().dispatches;
        let outs = ctx
            .map_multi(&[Expr::binary(BinaryOp::Add, sq.clone(), Expr::Input(0), F32), Expr::convert(sq, F64)], &[&x], &[1025])
            .unwrap();
        assert_eq!(ctx.stats().dispatches - before, 1);
        let (o1, o2) = (download(ctx, &outs[0]), download(ctx, &outs[1]));
        for i in 0..1025 {
            let s = write(F32, ref_binary(BinaryOp::Multiply, read(F32, xs[i]), read(F32, xs[i])));
            assert_eq!(o1[i], write(F32, ref_binary(BinaryOp::Add, read(F32, s), read(F32, xs[i]))), "multi out 0 at {i}");
            assert_eq!(o2[i], write(F64, read(F32, s)), "multi out 1 at {i}");
        }
    });
}

/// 40M f32 (160 MB): beyond lavapipe's 128 MiB per-binding limit.
#[test]
fn add_on_a_tensor_over_128_mib() {
    on_engine(|ctx| {
        let n = 40_000_000usize;
        let bits: Vec<u64> = (0..n).map(|i| (((i % 1_000_003) as f32) * 0.25).to_bits() as u64).collect();
        let a = upload(ctx, F32, &[n], &bits);
        drop(bits);
        let b = upload(ctx, F32, &[], &[1.5f32.to_bits() as u64]);
        let c = ctx.binary(BinaryOp::Add, &a, &b, F32).unwrap();
        let bytes = ctx.download(&c).unwrap();
        assert_eq!(bytes.len(), n * 4);
        let mut rng = Rng(5);
        let mut idx: Vec<usize> = (0..20_000).map(|_| rng.below(n as u64) as usize).collect();
        idx.extend([0, 1, n / 2, n - 2, n - 1, (1 << 25) - 1, 1 << 25, 33_554_432 + 7]);
        for i in idx {
            let got = f32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
            let want = (((i % 1_000_003) as f32) * 0.25) as f64 + 1.5;
            assert_eq!(got.to_bits(), (want as f32).to_bits(), "at {i}");
        }
    });
}

/// Transcendentals are someone else's suite: only check that one runs and keeps its shape/type.
#[test]
fn transcendental_smoke() {
    on_engine(|ctx| {
        let x = upload(ctx, S32, &[7], &[0, 1, 2, 3, 4, 5, 6]);
        let y = ctx.unary(UnaryOp::Exp, &x, F32).unwrap();
        assert_eq!((y.dtype(), y.shape()), (F32, &[7usize][..]));
        assert_eq!(download(ctx, &y)[0], 1.0f32.to_bits() as u64);
    });
}

#[test]
fn invalid_type_combinations_are_errors() {
    on_engine(|ctx| {
        let x = upload(ctx, F32, &[2], &[0, 0]);
        for op in [UnaryOp::BitwiseNot, UnaryOp::CountLeadingZeros, UnaryOp::PopulationCount] {
            assert!(ctx.unary(op, &x, F32).is_err(), "{op:?} on f32");
        }
        for op in [BinaryOp::BitwiseAnd, BinaryOp::LeftShift, BinaryOp::Quotient] {
            assert!(ctx.binary(op, &x, &x, F32).is_err(), "{op:?} on f32");
        }
        let i = upload(ctx, S32, &[2], &[0, 0]);
        assert!(ctx.unary(UnaryOp::Sqrt, &i, S32).is_err(), "sqrt with an integer result");
        assert!(ctx.upload(F32, &[3], &[0u8; 8]).is_err());
    });
}

/// The four-wide f32 add/subtract/multiply kernel: same bits as the CPU model for normal and
/// special operands, tails that are not multiples of four, and offset views (which must take
/// the generic kernel when their offset is not 16-byte aligned).
#[test]
fn vec4_f32_kernel_matches_the_exact_path() {
    on_engine(|ctx| vec4_cases(ctx));
}

fn vec4_cases(ctx: &Context) {
    let specials = [0.0f32, -0.0, 1.0, -1.5, f32::MIN_POSITIVE, 1e-40, -3e-42, f32::MAX, -f32::MAX, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 3.4e38, 1.0e-38, 2.5e-38];
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for n in [2usize, 3, 4, 5, 7, 8, 37, 1001, 4099] {
        let a: Vec<f32> = (0..n + 4).map(|i| if i % 5 == 0 { specials[(next() % specials.len() as u64) as usize] } else { f32::from_bits(next() as u32) }).collect();
        let b: Vec<f32> = (0..n + 4).map(|i| if i % 3 == 0 { specials[(next() % specials.len() as u64) as usize] } else { (next() % 2000) as f32 * 0.37 - 370.0 }).collect();
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let ta = ctx.upload(DType::F32, &[n + 4], &bytes(&a)).unwrap();
        let tb = ctx.upload(DType::F32, &[n + 4], &bytes(&b)).unwrap();
        for start in [0usize, 1, 4] {
            let va = ta.slice(&[start], &[n], &[1]).unwrap();
            let vb = tb.slice(&[start], &[n], &[1]).unwrap();
            for (op, f) in [(BinaryOp::Add, (|x: f32, y: f32| x + y) as fn(f32, f32) -> f32), (BinaryOp::Subtract, |x, y| x - y), (BinaryOp::Multiply, |x, y| x * y)] {
                let r = ctx.binary(op, &va, &vb, DType::F32).unwrap();
                let got: Vec<u32> = ctx.download(&r).unwrap().chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
                for i in 0..n {
                    let want = f(a[start + i], b[start + i]);
                    let want = if want.is_nan() { 0x7FC0_0000 } else { want.to_bits() };
                    assert_eq!(got[i], want, "{op:?} n={n} start={start} i={i}: {} {}", a[start + i], b[start + i]);
                }
            }
        }
    }
    assert!(ctx.kernels.cached("vec4 f32 +").is_some(), "the four-wide kernel ran");
}

/// Four elements per invocation (`Context::wide_elementwise_min`, the ` x4` kernels): the same
/// bits as the one-element kernel for every size's tail (1, 3, 4, 5, 4097, 4099 elements),
/// 32-, 16- and 8-bit streams (f32, s32, u32, f16, bf16, s16, u8, s8; packed four to a word),
/// a broadcast element of another type, flat and per-axis iota, several outputs, comparisons
/// into u8, both float maths; the exact f32 add with a broadcast operand (its native fast path
/// returns from inside the four-element loop) and the f32 -> bf16 / s8 conversions against the
/// CPU model too. Whether a kernel ran wide is read from the profile's kernel names: an offset
/// that is not a multiple of four, a 64-bit stream or a transposed view must not.
#[test]
fn wide_kernels_give_the_one_element_kernels_bits() {
    use std::sync::atomic::Ordering::Relaxed;
    on_engine_alone(|ctx| {
        let mut rng = Rng(404);
        let un = |op, a, t| Expr::unary(op, a, t);
        let bin = |op, a, b, t| Expr::binary(op, a, b, t);
        let x = || Expr::Input(0);
        let y = || Expr::Input(1);
        let s = || Expr::Input(2);
        // chain10 over x, y (f32) with the broadcast s (f16) folded in
        let chain = {
            let v = bin(BinaryOp::Multiply, x(), Expr::Const { value: elementwise::Scalar::F(2.0), dtype: F32 }, F32);
            let v = un(UnaryOp::Tanh, bin(BinaryOp::Add, v, y(), F32), F32);
            let v = un(UnaryOp::Abs, bin(BinaryOp::Subtract, v, x(), F32), F32);
            let v = un(UnaryOp::Exp, bin(BinaryOp::Max, v, y(), F32), F32);
            let v = un(UnaryOp::Negate, bin(BinaryOp::Divide, v, Expr::convert(s(), F32), F32), F32);
            bin(BinaryOp::Min, v, x(), F32)
        };
        let ints = |t: DType| {
            let xi = Expr::convert(x(), t);
            let yi = Expr::convert(y(), t);
            let v = bin(BinaryOp::Add, bin(BinaryOp::Multiply, xi, yi, t), Expr::Iota { axis: None, dtype: t }, t);
            bin(BinaryOp::BitwiseXor, v, Expr::Iota { axis: Some(1), dtype: t }, t)
        };
        // the 16- and 8-bit streams: x and y converted, combined, compared
        let narrow = |t: DType| {
            let v = bin(BinaryOp::Multiply, Expr::convert(x(), t), Expr::convert(y(), t), t);
            bin(BinaryOp::Subtract, v, Expr::convert(s(), t), t)
        };
        let cases: Vec<(&str, Vec<Expr>)> = vec![
            ("chain", vec![chain.clone()]),
            ("chain + s32 + u32", vec![chain, ints(S32), ints(U32)]),
            ("add", vec![bin(BinaryOp::Add, x(), Expr::convert(s(), F32), F32)]),
            ("f16 bf16 s16", vec![narrow(F16), narrow(BF16), narrow(S16)]),
            ("u8 s8 greater", vec![narrow(U8), narrow(S8), bin(BinaryOp::Greater, x(), y(), U8)]),
            ("to bf16 s8", vec![Expr::convert(x(), BF16), Expr::convert(x(), S8)]),
            // contiguous 16- and 8-bit inputs (unpacked from one word)
            ("f16 s8 in", vec![bin(BinaryOp::Add, Expr::Input(3), Expr::convert(Expr::Input(4), F16), F16), bin(BinaryOp::Multiply, Expr::Input(4), Expr::Input(4), S8)]),
        ];
        for n in [1usize, 3, 4, 5, 4097, 4099] {
            let shape = [n, 1];
            let (xs, ys) = (random_values(F32, n, &mut rng), random_values(F32, n, &mut rng));
            let sv = random_values(F16, 1, &mut rng);
            let xt = upload(ctx, F32, &shape, &xs);
            let yt = upload(ctx, F32, &shape, &ys);
            let st = upload(ctx, F16, &[1, 1], &sv).broadcast_to(&shape).unwrap();
            let (hs, bs) = (random_values(F16, n, &mut rng), random_values(S8, n, &mut rng));
            let ht = upload(ctx, F16, &shape, &hs);
            let bt = upload(ctx, S8, &shape, &bs);
            for (name, exprs) in &cases {
                for math in [FloatMath::Exact, FloatMath::Fast] {
                    let run = |min: usize| {
                        ctx.wide_elementwise_min.store(min, Relaxed);
                        ctx.stream.profile_start().unwrap();
                        let outs = ctx.map_multi_with(math, exprs, &[&xt, &yt, &st, &ht, &bt], &shape).unwrap();
                        let kernels: Vec<String> = ctx.stream.profile_stop().unwrap().into_iter().map(|k| k.name).collect();
                        (outs.iter().map(|o| download(ctx, o)).collect::<Vec<_>>(), kernels)
                    };
                    let (one, k1) = run(usize::MAX);
                    let (wide, k4) = run(1);
                    let what = format!("{name} {n} {math:?}");
                    assert!(k1.iter().all(|k| !k.contains(" x4")) && k4.len() == 1 && k4[0].contains(" x4"), "{what}: {k1:?} / {k4:?}");
                    for (o, (a, b)) in one.iter().zip(&wide).enumerate() {
                        for i in 0..n {
                            assert_eq!(a[i], b[i], "{what}: output {o} element {i} (x {:#x}, y {:#x})", xs[i], ys[i]);
                        }
                    }
                    if *name == "add" && math == FloatMath::Exact {
                        for i in 0..n {
                            let want = write(F32, ref_binary(BinaryOp::Add, read(F32, xs[i]), read(F16, sv[0])));
                            assert_eq!(wide[0][i], want, "add {n}: x {:#x} + s {:#x}", xs[i], sv[0]);
                        }
                    }
                    if *name == "f16 s8 in" && math == FloatMath::Exact {
                        for i in 0..n {
                            let want = write(S8, ref_binary(BinaryOp::Multiply, read(S8, bs[i]), read(S8, bs[i])));
                            assert_eq!(wide[1][i], want, "s8 {n}: b {:#x}", bs[i]);
                        }
                    }
                    if *name == "to bf16 s8" && math == FloatMath::Exact {
                        for i in 0..n {
                            assert_eq!(wide[0][i], write(BF16, read(F32, xs[i])), "bf16 {n}: x {:#x}", xs[i]);
                            assert_eq!(wide[1][i], write(S8, read(F32, xs[i])), "s8 {n}: x {:#x}", xs[i]);
                        }
                    }
                }
            }
        }
        // not wide: an offset that is not a multiple of four, a 64-bit stream, a transposed view
        let n = 4099;
        let xs = random_values(F32, n + 1, &mut rng);
        let xt = upload(ctx, F32, &[n + 1], &xs);
        let h = upload(ctx, F64, &[n], &random_values(F64, n, &mut rng));
        let m = upload(ctx, F32, &[64, 64], &random_values(F32, 4096, &mut rng)).transpose(&[1, 0]).unwrap();
        ctx.wide_elementwise_min.store(1, Relaxed);
        for (what, input, shape) in [("offset 1", xt.slice(&[1], &[n], &[1]).unwrap(), vec![n]), ("f64", h, vec![n]), ("transposed", m, vec![64, 64])] {
            let e = Expr::convert(un(UnaryOp::Abs, x(), input.dtype()), F32);
            ctx.stream.profile_start().unwrap();
            let _ = ctx.map_multi_with(FloatMath::Exact, &[e], &[&input], &shape).unwrap();
            let kernels: Vec<String> = ctx.stream.profile_stop().unwrap().into_iter().map(|k| k.name).collect();
            assert!(kernels.len() == 1 && !kernels[0].contains(" x4"), "{what}: {kernels:?}");
        }
        ctx.wide_elementwise_min.store(elementwise::WIDE_MIN_ELEMENTS, Relaxed);
    });
}

/// f32 chains with their native nodes speculated (`elementwise::speculative_block`) give the
/// checked kernels' bits under Exact and Fast, one element per invocation and four, on values
/// made to leave the native range: zeros of both signs, subnormals, products that underflow
/// or overflow, exact cancellations, NaN and infinities — and, under Exact, Nx.BinaryBackend's.
#[test]
fn speculative_chains_give_the_checked_paths_bits() {
    use std::sync::atomic::Ordering::Relaxed;
    on_engine_alone(|ctx| {
        let mut rng = Rng(515);
        let bin = |op, a, b| Expr::binary(op, a, b, F32);
        let un = |op, a| Expr::unary(op, a, F32);
        let c = |v: f64| Expr::Const { value: elementwise::Scalar::F(v), dtype: F32 };
        let (x, y) = (|| Expr::Input(0), || Expr::Input(1));
        // (name, expression, speculated under Exact: every f32 chain; not a conversion)
        let cases: Vec<(&str, Expr, bool)> = vec![
            ("relu(x y + x)", bin(BinaryOp::Max, bin(BinaryOp::Add, bin(BinaryOp::Multiply, x(), y()), x()), c(0.0)), true),
            ("(x - y)(x + y) - x x", bin(BinaryOp::Subtract, bin(BinaryOp::Multiply, bin(BinaryOp::Subtract, x(), y()), bin(BinaryOp::Add, x(), y())), bin(BinaryOp::Multiply, x(), x())), true),
            ("min(-|x|, 2y) * -0.0 + x", bin(BinaryOp::Add, bin(BinaryOp::Multiply, bin(BinaryOp::Min, un(UnaryOp::Negate, un(UnaryOp::Abs, x())), bin(BinaryOp::Multiply, c(2.0), y())), c(-0.0)), x()), true),
            ("x * 1e-30 * y + NaN const", bin(BinaryOp::Add, bin(BinaryOp::Multiply, bin(BinaryOp::Multiply, x(), c(1e-30)), y()), c(f64::NAN)), true),
            ("chain10_arith", {
                let v = bin(BinaryOp::Add, bin(BinaryOp::Multiply, c(2.0), x()), y());
                let v = un(UnaryOp::Abs, bin(BinaryOp::Subtract, bin(BinaryOp::Multiply, c(0.5), v), x()));
                let v = bin(BinaryOp::Divide, bin(BinaryOp::Add, c(1.0), bin(BinaryOp::Max, v, y())), c(3.0));
                bin(BinaryOp::Min, un(UnaryOp::Negate, v), x())
            }, true),
            ("tanh(x y + x) * y - y", bin(BinaryOp::Subtract, bin(BinaryOp::Multiply, un(UnaryOp::Tanh, bin(BinaryOp::Add, bin(BinaryOp::Multiply, x(), y()), x())), y()), y()), true),
            ("exp(x / y) - pow(x, 2)", bin(BinaryOp::Subtract, un(UnaryOp::Exp, bin(BinaryOp::Divide, x(), y())), bin(BinaryOp::Pow, x(), c(2.0))), true),
            ("x y as f64", Expr::convert(bin(BinaryOp::Multiply, x(), y()), F64), false),
        ];
        // values at the edges of the native range, and ordinary ones
        let edge = |rng: &mut Rng| -> u64 {
            let sp = specials(F32);
            match rng.below(6) {
                0 => sp[rng.below(sp.len() as u64) as usize],
                1 => write(F32, N::F(((rng.next() >> 40) as f64 + 1.0) * 2f64.powi(rng.range(-150, -100) as i32))), // tiny: products underflow
                2 => write(F32, N::F(((rng.next() >> 40) as f64 + 1.0) * 2f64.powi(rng.range(40, 80) as i32))), // huge: products overflow
                _ => random_values(F32, 1, rng)[0],
            }
        };
        for n in [5usize, 4099] {
            let mut xs: Vec<u64> = (0..n).map(|_| edge(&mut rng)).collect();
            let mut ys: Vec<u64> = (0..n).map(|_| edge(&mut rng)).collect();
            for i in (0..n).step_by(7) {
                ys[i] = xs[i]; // x - y cancels exactly
            }
            for i in (3..n).step_by(11) {
                ys[i] = xs[i] ^ 0x8000_0000; // x + y cancels exactly
            }
            xs[0] = 0x8000_0000; // -0.0
            let xt = upload(ctx, F32, &[n], &xs);
            let yt = upload(ctx, F32, &[n], &ys);
            for (name, e, exact_spec) in &cases {
                for math in [FloatMath::Exact, FloatMath::Fast] {
                    for wide in [usize::MAX, 1] {
                        let run = |speculate: bool| {
                            ctx.wide_elementwise_min.store(wide, Relaxed);
                            ctx.speculate_elementwise.store(speculate, Relaxed);
                            ctx.stream.profile_start().unwrap();
                            let out = ctx.map_multi_with(math, std::slice::from_ref(e), &[&xt, &yt], &[n]).unwrap();
                            let kernels: Vec<String> = ctx.stream.profile_stop().unwrap().into_iter().map(|k| k.name).collect();
                            (download(ctx, &out[0]), kernels)
                        };
                        let (checked, k0) = run(false);
                        let (spec, k1) = run(true);
                        ctx.speculate_elementwise.store(true, Relaxed);
                        let what = format!("{name} n={n} {math:?} wide_min={wide}");
                        assert!(k0.len() == 1 && k0[0].contains(" nospec") && k1.len() == 1 && !k1[0].contains("nospec"), "{what}: {k0:?} / {k1:?}");
                        for i in 0..n {
                            assert_eq!(spec[i], checked[i], "{what} element {i}: x {:#x}, y {:#x}", xs[i], ys[i]);
                        }
                        if math == FloatMath::Exact && *exact_spec && name.starts_with("relu") {
                            for i in 0..n {
                                let (xv, yv) = (read(F32, xs[i]), read(F32, ys[i]));
                                let p = read(F32, write(F32, ref_binary(BinaryOp::Multiply, xv.clone(), yv)));
                                let s = read(F32, write(F32, ref_binary(BinaryOp::Add, p, xv)));
                                let want = write(F32, ref_binary(BinaryOp::Max, s, N::F(0.0)));
                                assert_eq!(spec[i], want, "{what} element {i} against BinaryBackend: x {:#x}, y {:#x}", xs[i], ys[i]);
                            }
                        }
                    }
                }
            }
        }
        // Division under Exact is the checked path's correctly rounded one, not the :fast
        // library's faithful quotient (which differs for about 1 in 2,400 random pairs).
        let n = 1 << 16;
        let xs = random_values(F32, n, &mut rng);
        let ys = random_values(F32, n, &mut rng);
        let (xt, yt) = (upload(ctx, F32, &[n], &xs), upload(ctx, F32, &[n], &ys));
        let e = bin(BinaryOp::Divide, bin(BinaryOp::Add, x(), y()), y());
        ctx.wide_elementwise_min.store(usize::MAX, Relaxed);
        let spec = download(ctx, &ctx.map_multi_with(FloatMath::Exact, std::slice::from_ref(&e), &[&xt, &yt], &[n]).unwrap()[0]);
        for i in 0..n {
            let (xv, yv) = (read(F32, xs[i]), read(F32, ys[i]));
            let s = read(F32, write(F32, ref_binary(BinaryOp::Add, xv, yv)));
            assert_eq!(spec[i], write(F32, ref_binary(BinaryOp::Divide, s, yv)), "(x + y) / y at {i}: x {:#x}, y {:#x}", xs[i], ys[i]);
        }
        // A driver that refuses the kernel with its speculative copy: the checked kernel alone
        // (` nospec`), the same bits, the refusal counted.
        let e = bin(BinaryOp::Add, bin(BinaryOp::Multiply, x(), c(7.25)), y());
        ctx.speculate_elementwise.store(false, Relaxed);
        let want = download(ctx, &ctx.map_multi_with(FloatMath::Exact, std::slice::from_ref(&e), &[&xt, &yt], &[n]).unwrap()[0]);
        ctx.speculate_elementwise.store(true, Relaxed);
        let speculative_key = format!("ew r1 out:Contiguous f32:Contiguous f32:Contiguous => {e:?}");
        ctx.kernels.inject_refusal(Some(&speculative_key));
        let before = ctx.stats().refused_kernels;
        ctx.stream.profile_start().unwrap();
        let got = ctx.map_multi_with(FloatMath::Exact, std::slice::from_ref(&e), &[&xt, &yt], &[n]).unwrap();
        let kernels: Vec<String> = ctx.stream.profile_stop().unwrap().into_iter().map(|k| k.name).collect();
        let got = download(ctx, &got[0]); // (outside the profile: a GPU's read-back copies)
        ctx.kernels.inject_refusal(None);
        assert_eq!(ctx.stats().refused_kernels - before, 1, "{kernels:?}");
        assert!(kernels.len() == 1 && kernels[0].contains(" nospec"), "{kernels:?}");
        assert!(got == want, "the checked kernel after a refusal gave other bits");
        ctx.wide_elementwise_min.store(elementwise::WIDE_MIN_ELEMENTS, Relaxed);
    });
}
