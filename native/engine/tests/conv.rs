//! Nx.conv against a plain CPU model of Nx.BinaryBackend.conv/4 (materialised zero padding and
//! kernel dilation, products summed channel by channel from the first term), every float type,
//! integer and mixed operands, groups, permutations, strided and transposed views, negative
//! padding and padding larger than the input; plus results pinned from Nx 0.7.2 itself. Every
//! case by the direct kernel and, where it applies, by im2col + GEMM (one item per pass and
//! all in one), with the dispatches each records.
//!
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test --release -p nx_vulkan_engine --test conv

mod common;
use common::*;
use nx_vulkan_engine::conv::{conv_output_shape, ConvAlgorithm, ConvOptions};
use nx_vulkan_engine::*;

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// `data` (row-major over `shape`) transposed by `perm` (result axis i = axis perm[i]).
fn transpose(shape: &[usize], data: &[u64], perm: &[usize]) -> (Vec<usize>, Vec<u64>) {
    let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let mut v = Vec::with_capacity(data.len());
    for i in 0..numel(&out) {
        let oc = coords(&out, i);
        let mut ic = vec![0; shape.len()];
        for d in 0..shape.len() {
            ic[perm[d]] = oc[d];
        }
        v.push(data[flat_of(shape, &ic)]);
    }
    (out, v)
}

/// Nx.pad along the spatial axes (axes >= 2) with zeros: `(lo, hi, interior)`.
fn pad_spatial(t: DType, shape: &[usize], data: &[u64], cfg: &[(i64, i64, usize)]) -> (Vec<usize>, Vec<N>) {
    let zero = if t.is_float() { N::F(0.0) } else { N::I(0) };
    let mut out = shape.to_vec();
    for (d, &(lo, hi, int)) in cfg.iter().enumerate() {
        let n = shape[d + 2] as i64;
        out[d + 2] = (lo + (n - 1) * (int as i64 + 1) + 1 + hi) as usize;
    }
    let mut v = vec![zero; numel(&out)];
    for (i, slot) in v.iter_mut().enumerate() {
        let oc = coords(&out, i);
        let mut ic = oc.clone();
        let mut inside = true;
        for (d, &(lo, _, int)) in cfg.iter().enumerate() {
            let q = oc[d + 2] as i64 - lo;
            let step = int as i64 + 1;
            if q < 0 || q % step != 0 || q / step >= shape[d + 2] as i64 {
                inside = false;
            } else {
                ic[d + 2] = (q / step) as usize;
            }
        }
        if inside {
            *slot = read(t, data[flat_of(shape, &ic)]);
        }
    }
    (out, v)
}

fn mul(x: N, y: N) -> N {
    match (x, y) {
        (N::I(a), N::I(b)) => N::I(a.wrapping_mul(b)),
        _ => N::F(x.f() * y.f()),
    }
}

fn add(x: N, y: N) -> N {
    match (x, y) {
        (N::I(a), N::I(b)) => N::I(a.wrapping_add(b)),
        _ => N::F(x.f() + y.f()),
    }
}

/// BinaryBackend.conv/4, literally: returns the result in the final (permuted) layout.
#[allow(clippy::too_many_arguments)]
fn ref_conv(xt: DType, xshape: &[usize], xdata: &[u64], kt: DType, kshape: &[usize], kdata: &[u64], o: &ConvOptions, out: DType) -> Vec<u64> {
    let (xs, xd) = transpose(xshape, xdata, &o.input_permutation);
    let (ks, kd) = transpose(kshape, kdata, &o.kernel_permutation);
    let s = xs.len() - 2;
    let kcfg: Vec<(i64, i64, usize)> = o.kernel_dilation.iter().map(|&d| (0, 0, d - 1)).collect();
    let (kps, kp) = pad_spatial(kt, &ks, &kd, &kcfg);
    let xcfg: Vec<(i64, i64, usize)> = (0..s).map(|d| (o.padding[d].0, o.padding[d].1, o.input_dilation[d] - 1)).collect();
    let (xps, xp) = pad_spatial(xt, &xs, &xd, &xcfg);
    let (n, f, cg) = (xs[0], ks[0], ks[1]);
    let (fg, bg) = (o.feature_group_size, o.batch_group_size);
    let mut ushape = vec![n / bg, f];
    for d in 0..s {
        ushape.push((xps[d + 2] - kps[d + 2]) / o.strides[d] + 1);
    }
    let filt: Vec<usize> = kps[2..].to_vec();
    let mut u = vec![];
    for i in 0..numel(&ushape) {
        let uc = coords(&ushape, i);
        let (nq, fi) = (uc[0], uc[1]);
        let item = nq + (fi / (f / bg)) * (n / bg);
        let cbase = (fi / (f / fg)) * cg;
        let mut acc: Option<N> = None;
        for ci in 0..cg {
            for j in 0..numel(&filt) {
                let jc = coords(&filt, j);
                let mut xc = vec![item, cbase + ci];
                let mut kc = vec![fi, ci];
                for d in 0..s {
                    xc.push(uc[d + 2] * o.strides[d] + jc[d]);
                    kc.push(jc[d]);
                }
                let t = mul(xp[flat_of(&xps, &xc)], kp[flat_of(&kps, &kc)]);
                acc = Some(match acc {
                    None => t,
                    Some(a) => add(t, a),
                });
            }
        }
        u.push(write(out, acc.unwrap()));
    }
    // final axis perm[k] holds untransposed axis k
    let perm = &o.output_permutation;
    let fshape: Vec<usize> = {
        let mut inv = vec![0; perm.len()];
        for (k, &p) in perm.iter().enumerate() {
            inv[p] = k;
        }
        inv.iter().map(|&k| ushape[k]).collect()
    };
    (0..u.len())
        .map(|i| {
            let fc = coords(&fshape, i);
            let uc: Vec<usize> = perm.iter().map(|&p| fc[p]).collect();
            u[flat_of(&ushape, &uc)]
        })
        .collect()
}

/// Values for conv operands: floats with specials now and then (NaN, ±Inf, ±0, subnormals),
/// integers small enough that exact sums stay within 64 bits.
fn values(t: DType, n: usize, specials_every: usize, rng: &mut Rng) -> Vec<u64> {
    (0..n)
        .map(|i| {
            if t.is_float() {
                if specials_every > 0 && i % specials_every == specials_every - 1 {
                    random_values(t, 1, rng)[0]
                } else {
                    write(t, N::F(rng.range(-40, 40) as f64 * 0.125))
                }
            } else {
                let (lo, hi) = int_limits(t);
                let v = rng.range(-1000, 1000) as i128;
                let v = if rng.below(9) == 0 { [lo, hi][rng.below(2) as usize].clamp(-(1 << 20), 1 << 20) } else { v };
                write(t, N::I(v.clamp(lo, hi)))
            }
        })
        .collect()
}

struct Case {
    x: Vec<usize>,
    k: Vec<usize>,
    o: ConvOptions,
}

fn opts(rank: usize, f: impl FnOnce(&mut ConvOptions)) -> ConvOptions {
    let mut o = ConvOptions::new(rank);
    f(&mut o);
    o
}

fn cases() -> Vec<Case> {
    vec![
        // 1-D: strides, padding, input and kernel dilation
        Case { x: vec![2, 3, 7], k: vec![4, 3, 3], o: opts(3, |o| { o.strides = vec![2]; o.padding = vec![(2, 1)]; o.input_dilation = vec![2]; o.kernel_dilation = vec![2]; }) },
        // 2-D, feature groups, negative padding
        Case { x: vec![2, 4, 5, 6], k: vec![6, 2, 3, 2], o: opts(4, |o| { o.feature_group_size = 2; o.strides = vec![1, 2]; o.padding = vec![(1, -1), (0, 2)]; o.kernel_dilation = vec![1, 2]; }) },
        // batch groups
        Case { x: vec![4, 2, 5], k: vec![4, 2, 2], o: opts(3, |o| { o.batch_group_size = 2; o.padding = vec![(1, 1)]; }) },
        // NHWC input, HWIO kernel, NHWC output
        Case { x: vec![2, 5, 4, 3], k: vec![3, 2, 3, 4], o: opts(4, |o| { o.input_permutation = vec![0, 3, 1, 2]; o.kernel_permutation = vec![3, 2, 0, 1]; o.output_permutation = vec![0, 3, 1, 2]; o.padding = vec![(1, 1), (0, 1)]; }) },
        // padding larger than the input
        Case { x: vec![1, 1, 2], k: vec![2, 1, 2], o: opts(3, |o| { o.padding = vec![(4, 5)]; }) },
        // 3-D spatial
        Case { x: vec![1, 2, 3, 4, 3], k: vec![2, 2, 2, 2, 2], o: opts(5, |o| { o.strides = vec![1, 2, 1]; o.padding = vec![(0, 1), (1, 0), (1, 1)]; o.input_dilation = vec![1, 1, 2]; }) },
    ]
}

/// The algorithms a case runs under: the direct kernel, and for float-summed convs without
/// batch groups im2col + GEMM one item per pass and all items in one pass.
fn algorithms(c: &Case, xt: DType, kt: DType) -> Vec<ConvAlgorithm> {
    let mut v = vec![ConvAlgorithm::Direct];
    if (xt.is_float() || kt.is_float()) && c.o.batch_group_size == 1 {
        v.push(ConvAlgorithm::Im2colGemm { items_per_pass: 1 });
        v.push(ConvAlgorithm::Im2colGemm { items_per_pass: 1 << 20 });
    }
    v
}

/// Dispatches `alg` records for a case: one for the direct kernel; for im2col + GEMM the
/// kernel matrix, then per pass the gather, the GEMM and the rounding.
fn dispatches_of(alg: ConvAlgorithm, c: &Case) -> u64 {
    match alg {
        ConvAlgorithm::Direct => 1,
        ConvAlgorithm::Im2colGemm { items_per_pass } => {
            let n = c.o.input_permutation.first().map(|&p| c.x[p]).unwrap();
            1 + 3 * n.div_ceil(items_per_pass) as u64
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn check(ctx: &Context, f: &mut Failures, xt: DType, kt: DType, out: DType, c: &Case, x: &Tensor, xd: &[u64], kd: &[u64], what: &str) {
    let k = upload(ctx, kt, &c.k, kd);
    let want = ref_conv(xt, &c.x, xd, kt, &c.k, kd, &c.o, out);
    for alg in algorithms(c, xt, kt) {
        let before = ctx.stats().dispatches;
        let y = ctx.conv_using(alg, x, &k, &c.o, out).unwrap();
        let ran = ctx.stats().dispatches - before;
        f.check(|| format!("conv {xt}x{kt}->{out} {what} x {:?} k {:?} by {alg:?}: dispatches", c.x, c.k), ran, dispatches_of(alg, c));
        assert_eq!(y.shape(), &conv_output_shape(&c.x, &c.k, &c.o).unwrap()[..]);
        let got = download(ctx, &y);
        assert_eq!(got.len(), want.len());
        for i in 0..want.len() {
            f.check(
                || format!("conv {xt}x{kt}->{out} {what} by {alg:?} x {:?} k {:?} {:?} at {:?}: got {} want {}", c.x, c.k, c.o, coords(y.shape(), i), show(out, got[i]), show(out, want[i])),
                got[i],
                want[i],
            );
        }
    }
}

#[test]
fn conv_float_types_and_layouts() {
    on_engine_alone(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(31);
        for (ci, c) in cases().iter().enumerate() {
            let types: &[DType] = if ci < 2 { &[DType::F32, DType::F64, DType::F16, DType::BF16] } else { &[DType::F32] };
            for &t in types {
                let xd = values(t, numel(&c.x), 9, &mut rng);
                let kd = values(t, numel(&c.k), 7, &mut rng);
                let x = upload(ctx, t, &c.x, &xd);
                check(ctx, &mut f, t, t, t, c, &x, &xd, &kd, "");
            }
        }
        f.finish("conv_float_types_and_layouts");
    });
}

#[test]
fn conv_integer_and_mixed_operands() {
    on_engine_alone(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(32);
        let c = &cases()[1];
        for (xt, kt, out) in [
            (DType::S8, DType::S8, DType::F32),
            (DType::U8, DType::U8, DType::F32),
            (DType::S32, DType::S64, DType::F32),
            (DType::U16, DType::S16, DType::F32),
            (DType::U64, DType::U64, DType::F64),
            (DType::S32, DType::F16, DType::F16),
            (DType::F32, DType::BF16, DType::F32),
            (DType::F16, DType::F64, DType::F64),
            (DType::S16, DType::S16, DType::S32), // integer output (engine extension: wrapped)
        ] {
            let xd = values(xt, numel(&c.x), 9, &mut rng);
            let kd = values(kt, numel(&c.k), 7, &mut rng);
            let x = upload(ctx, xt, &c.x, &xd);
            check(ctx, &mut f, xt, kt, out, c, &x, &xd, &kd, "");
        }
        f.finish("conv_integer_and_mixed_operands");
    });
}

#[test]
fn conv_over_views() {
    on_engine_alone(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(33);
        for c in cases().iter().take(4) {
            // the input as a transposed view: upload it with its axes reversed, then transpose back
            let t = DType::F32;
            let xd = values(t, numel(&c.x), 5, &mut rng);
            let rank = c.x.len();
            let rev: Vec<usize> = (0..rank).rev().collect();
            let (rs, rd) = transpose(&c.x, &xd, &rev);
            let x = upload(ctx, t, &rs, &rd).transpose(&rev).unwrap();
            assert!(!x.is_contiguous());
            let kd = values(t, numel(&c.k), 5, &mut rng);
            check(ctx, &mut f, t, t, t, c, &x, &xd, &kd, "transposed view");
            // a stepped slice of a bigger tensor
            let big: Vec<usize> = c.x.iter().map(|&d| 2 * d + 1).collect();
            let bd = values(t, numel(&big), 5, &mut rng);
            let x = upload(ctx, t, &big, &bd).slice(&vec![1; rank], &c.x, &vec![2; rank]).unwrap();
            let xd: Vec<u64> = (0..numel(&c.x)).map(|i| { let ic: Vec<usize> = coords(&c.x, i).iter().map(|&v| 1 + 2 * v).collect(); bd[flat_of(&big, &ic)] }).collect();
            check(ctx, &mut f, t, t, t, c, &x, &xd, &kd, "sliced view");
        }
        f.finish("conv_over_views");
    });
}

/// Results printed by Nx 0.7.2 (Nx.BinaryBackend), pinned.
#[test]
fn conv_results_pinned_from_nx() {
    on_engine_alone(|ctx| {
        let f = |v: &[f32]| v.iter().map(|x| x.to_bits() as u64).collect::<Vec<_>>();
        let iota = |n: usize, sub: f32| f(&(0..n).map(|i| i as f32 - sub).collect::<Vec<_>>());
        // every result by the direct kernel and, without batch groups, by im2col + GEMM too
        let run = |x: (&[usize], Vec<u64>), k: (&[usize], Vec<u64>), o: ConvOptions| {
            let xt = upload(ctx, DType::F32, x.0, &x.1);
            let kt = upload(ctx, DType::F32, k.0, &k.1);
            let y = ctx.conv_using(ConvAlgorithm::Direct, &xt, &kt, &o, DType::F32).unwrap();
            let direct = (y.shape().to_vec(), download(ctx, &y));
            if o.batch_group_size == 1 {
                let y = ctx.conv_using(ConvAlgorithm::Im2colGemm { items_per_pass: 1 }, &xt, &kt, &o, DType::F32).unwrap();
                assert_eq!((y.shape().to_vec(), download(ctx, &y)), direct, "im2col + GEMM against the direct kernel, {o:?}");
            }
            direct
        };
        // zero padding times Inf is NaN
        let (_, y) = run((&[1, 1, 2], f(&[1.0, 2.0])), (&[1, 1, 2], f(&[f32::INFINITY, 1.0])), opts(3, |o| o.padding = vec![(1, 0)]));
        assert_eq!(y, vec![0x7FC0_0000, f32::INFINITY.to_bits() as u64]);
        // signed zeros: the sum starts from the first product
        let (_, y) = run((&[1, 1, 2], f(&[-1.0, -1.0])), (&[1, 1, 2], f(&[0.0, 0.0])), ConvOptions::new(3));
        assert_eq!(y, vec![0x8000_0000]);
        let (_, y) = run((&[1, 1, 2], f(&[-1.0, -1.0])), (&[1, 1, 1], f(&[0.0])), opts(3, |o| o.padding = vec![(1, 0)]));
        assert_eq!(y, vec![0, 0x8000_0000, 0x8000_0000]);
        let (_, y) = run((&[1, 1, 2], f(&[-1.0, -1.0])), (&[1, 1, 2], f(&[0.0, 0.0])), opts(3, |o| { o.kernel_dilation = vec![2]; o.padding = vec![(1, 1)]; }));
        assert_eq!(y, vec![0, 0]);
        // batch groups
        let (s, y) = run((&[4, 2, 3], iota(24, 0.0)), (&[4, 2, 2], iota(16, 0.0)), opts(3, |o| { o.batch_group_size = 2; o.padding = vec![(1, 0)]; }));
        assert_eq!(s, vec![2, 4, 3]);
        assert_eq!(y, f(&[9.0, 19.0, 25.0, 21.0, 51.0, 73.0, 273.0, 539.0, 577.0, 381.0, 763.0, 817.0, 33.0, 55.0, 61.0, 93.0, 183.0, 205.0, 393.0, 767.0, 805.0, 549.0, 1087.0, 1141.0]));
        // feature groups, stride, input dilation
        let (s, y) = run((&[1, 4, 3], iota(12, 0.0)), (&[6, 2, 2], iota(24, 5.0)), opts(3, |o| { o.feature_group_size = 2; o.strides = vec![2]; o.padding = vec![(2, 1)]; o.input_dilation = vec![2]; }));
        assert_eq!(s, vec![1, 6, 4]);
        assert_eq!(y, f(&[-0.0, -9.0, -17.0, -25.0, 0.0, 3.0, 3.0, 3.0, 0.0, 15.0, 23.0, 31.0, 0.0, 123.0, 139.0, 155.0, 0.0, 183.0, 207.0, 231.0, 0.0, 243.0, 275.0, 307.0]));
        // permutations (NHWC in and out, HWIO kernel)
        let (s, y) = run((&[1, 3, 3, 2], iota(18, 0.0)), (&[2, 2, 2, 3], iota(24, 0.0)), opts(4, |o| { o.input_permutation = vec![0, 3, 1, 2]; o.kernel_permutation = vec![3, 2, 0, 1]; o.output_permutation = vec![0, 3, 1, 2]; }));
        assert_eq!(s, vec![1, 2, 2, 3]);
        assert_eq!(y, f(&[552.0, 588.0, 624.0, 720.0, 772.0, 824.0, 1056.0, 1140.0, 1224.0, 1224.0, 1324.0, 1424.0]));
        // s8 operands, f32 result
        let xt = upload(ctx, DType::S8, &[1, 1, 3], &[1, 2, 3]);
        let kt = upload(ctx, DType::S8, &[1, 1, 2], &[100, 100]);
        assert_eq!(download(ctx, &ctx.conv(&xt, &kt, &ConvOptions::new(3), DType::F32).unwrap()), f(&[300.0, 500.0]));
    });
}

/// A conv large enough that `conv` takes im2col + GEMM by itself (and splits the batch into
/// passes when told), against the CPU model; and the cases it leaves to the direct kernel.
#[test]
fn conv_chooses_im2col_gemm_for_large_float_convs() {
    on_engine_alone(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(34);
        let t = DType::F32;
        // 3 items of 12 channels, 17×19, 20 filters 3×3 with padding 1, stride (1, 2): 3.8 M
        // multiply-adds; the window's 108 columns are not a multiple of the GEMM's K step
        let c = Case { x: vec![3, 12, 17, 19], k: vec![20, 12, 3, 3], o: opts(4, |o| { o.padding = vec![(1, 1), (1, 1)]; o.strides = vec![1, 2]; }) };
        let xd = values(t, numel(&c.x), 11, &mut rng);
        let kd = values(t, numel(&c.k), 13, &mut rng);
        let x = upload(ctx, t, &c.x, &xd);
        let k = upload(ctx, t, &c.k, &kd);
        let chosen = ctx.conv_algorithm(&x, &k, &c.o, t).unwrap();
        assert_eq!(chosen, ConvAlgorithm::Im2colGemm { items_per_pass: 3 }, "all three items fit one pass");
        let want = ref_conv(t, &c.x, &xd, t, &c.k, &kd, &c.o, t);
        for alg in [None, Some(ConvAlgorithm::Im2colGemm { items_per_pass: 2 })] {
            let before = ctx.stats().dispatches;
            let y = match alg {
                None => ctx.conv(&x, &k, &c.o, t).unwrap(),
                Some(a) => ctx.conv_using(a, &x, &k, &c.o, t).unwrap(),
            };
            let ran = ctx.stats().dispatches - before;
            f.check(|| format!("{alg:?}: dispatches"), ran, dispatches_of(alg.unwrap_or(chosen), &c));
            let got = download(ctx, &y);
            for i in 0..want.len() {
                f.check(|| format!("{alg:?} at {:?}: got {} want {}", coords(y.shape(), i), show(t, got[i]), show(t, want[i])), got[i], want[i]);
            }
        }
        // a 1×1 conv widening one channel to 256 filters over 256×256: an item's f64 products
        // (128 MiB) outweigh its columns (0.5 MiB), and the 256 MiB budget holds one item a pass
        let wide_x = upload(ctx, t, &[4, 1, 256, 256], &vec![0; 4 * 65536]);
        let wide_k = upload(ctx, t, &[256, 1, 1, 1], &vec![0; 256]);
        assert_eq!(ctx.conv_algorithm(&wide_x, &wide_k, &ConvOptions::new(4), t).unwrap(), ConvAlgorithm::Im2colGemm { items_per_pass: 1 });
        // the same sizes with integer operands (summed exactly in 64 bits) or batch groups: direct
        let ki = upload(ctx, DType::S32, &c.k, &values(DType::S32, numel(&c.k), 0, &mut rng));
        let xi = upload(ctx, DType::S32, &c.x, &values(DType::S32, numel(&c.x), 0, &mut rng));
        assert_eq!(ctx.conv_algorithm(&xi, &ki, &c.o, t).unwrap(), ConvAlgorithm::Direct);
        assert!(ctx.conv_using(ConvAlgorithm::Im2colGemm { items_per_pass: 1 }, &xi, &ki, &c.o, t).is_err(), "integer sums are not f64 GEMMs");
        let bg = opts(4, |o| o.batch_group_size = 3);
        let kb = upload(ctx, t, &[21, 12, 3, 3], &values(t, 21 * 12 * 9, 0, &mut rng));
        assert_eq!(ctx.conv_algorithm(&x, &kb, &bg, t).unwrap(), ConvAlgorithm::Direct);
        assert!(ctx.conv_using(ConvAlgorithm::Im2colGemm { items_per_pass: 1 }, &x, &kb, &bg, t).is_err(), "batch groups");
        // a small conv stays on the direct kernel
        let small = &cases()[1];
        let xs = upload(ctx, t, &small.x, &values(t, numel(&small.x), 0, &mut rng));
        let ks = upload(ctx, t, &small.k, &values(t, numel(&small.k), 0, &mut rng));
        assert_eq!(ctx.conv_algorithm(&xs, &ks, &small.o, t).unwrap(), ConvAlgorithm::Direct);
        f.finish("conv_chooses_im2col_gemm_for_large_float_convs");
    });
}

#[test]
fn conv_argument_errors() {
    on_engine_alone(|ctx| {
        let x = upload(ctx, DType::F32, &[1, 4, 3], &[0; 12]);
        let k = upload(ctx, DType::F32, &[2, 2, 2], &[0; 8]);
        assert!(ctx.conv(&x, &k, &ConvOptions::new(3), DType::F32).is_err(), "channels differ without groups");
        assert!(ctx.conv(&x, &k, &opts(3, |o| o.feature_group_size = 2), DType::F32).is_ok());
        assert!(ctx.conv(&x, &k, &opts(3, |o| { o.feature_group_size = 2; o.padding = vec![(0, -3)]; }), DType::F32).is_err());
        assert!(ctx.conv(&x, &k, &opts(3, |o| { o.feature_group_size = 2; o.batch_group_size = 2; }), DType::F32).is_err());
        assert!(ctx.conv(&x, &k, &opts(3, |o| { o.feature_group_size = 2; o.input_permutation = vec![0, 0, 1]; }), DType::F32).is_err());
        assert!(ctx.conv(&x, &k, &opts(3, |o| o.feature_group_size = 2), DType::S32).is_err(), "float operands, integer output");
    });
}
