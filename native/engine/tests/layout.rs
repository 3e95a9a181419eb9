//! Layout ops (views materialised by kernels, and pad/put_slice/concatenate that write strided
//! regions) against plain CPU index arithmetic, bit for bit. Data are random bit patterns of
//! every element width, so float NaN payloads must survive (BinaryBackend moves bytes here).
//!
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test -p nx_vulkan_engine --test layout

mod common;
use common::*;
use nx_vulkan_engine::*;

fn random_bits(t: DType, n: usize, rng: &mut Rng) -> Vec<u64> {
    (0..n).map(|_| rng.next() & mask(t)).collect()
}

fn random_shape(rank: usize, rng: &mut Rng, max: u64) -> Vec<usize> {
    (0..rank).map(|_| 1 + rng.below(max) as usize).collect()
}

fn permutation(rank: usize, rng: &mut Rng) -> Vec<usize> {
    let mut p: Vec<usize> = (0..rank).collect();
    for i in (1..rank).rev() {
        p.swap(i, rng.below(i as u64 + 1) as usize);
    }
    p
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

#[test]
fn transpose_ranks_1_to_5() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(1);
        let mut cases = 0;
        for rank in 1..=5 {
            for rep in 0..6 {
                let t = DType::ALL[(rank * 7 + rep) % 12];
                let shape = random_shape(rank, &mut rng, if rank > 3 { 6 } else { 17 });
                let data = random_bits(t, numel(&shape), &mut rng);
                let x = upload(ctx, t, &shape, &data);
                let perm = permutation(rank, &mut rng);
                let y = x.transpose(&perm).unwrap();
                let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
                assert_eq!(y.shape(), &out_shape[..]);
                let g = download(ctx, &y);
                for i in 0..numel(&out_shape) {
                    let oc = coords(&out_shape, i);
                    let mut ic = vec![0; rank];
                    for d in 0..rank {
                        ic[perm[d]] = oc[d];
                    }
                    let want = data[flat_of(&shape, &ic)];
                    f.check(|| format!("transpose {t} {shape:?} {perm:?} at {oc:?}: got {:#x} want {want:#x}", g[i]), g[i], want);
                }
                // and back: transposing by the inverse permutation gives the original
                let mut inv = vec![0; rank];
                for (d, &p) in perm.iter().enumerate() {
                    inv[p] = d;
                }
                let back = download(ctx, &ctx.contiguous(&y).unwrap().transpose(&inv).unwrap());
                for i in 0..data.len() {
                    f.check(|| format!("transpose back {t} {shape:?} {perm:?} [{i}]"), back[i], data[i]);
                }
                cases += 1;
            }
        }
        assert!(upload(ctx, U8, &[2, 3], &[0; 6]).transpose(&[0, 0]).is_err());
        assert!(upload(ctx, U8, &[2, 3], &[0; 6]).transpose(&[1]).is_err());
        eprintln!("transpose: {cases} cases");
        f.finish("transpose");
    });
}

#[test]
fn slice_with_steps_and_reverse() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(2);
        for case in 0..24 {
            let rank = 1 + case % 4;
            let t = DType::ALL[case % 12];
            let shape = random_shape(rank, &mut rng, if rank > 2 { 9 } else { 40 });
            let data = random_bits(t, numel(&shape), &mut rng);
            let x = upload(ctx, t, &shape, &data);
            let mut start = vec![0; rank];
            let mut len = vec![0; rank];
            let mut step = vec![0; rank];
            for d in 0..rank {
                start[d] = rng.below(shape[d] as u64) as usize;
                step[d] = 1 + rng.below(3) as usize;
                let room = (shape[d] - start[d] - 1) / step[d] + 1;
                len[d] = if case == 5 { 0 } else { 1 + rng.below(room as u64) as usize };
            }
            let s = x.slice(&start, &len, &step).unwrap();
            let g = download(ctx, &s);
            assert_eq!(g.len(), numel(&len));
            for i in 0..g.len() {
                let c = coords(&len, i);
                let ic: Vec<usize> = (0..rank).map(|d| start[d] + c[d] * step[d]).collect();
                let want = data[flat_of(&shape, &ic)];
                f.check(|| format!("slice {t} {shape:?} start {start:?} len {len:?} step {step:?} at {c:?}"), g[i], want);
            }
            // reverse some axes of the slice (a view of a view), then transpose it
            let axes: Vec<usize> = (0..rank).filter(|_| rng.below(2) == 0).collect();
            let r = s.reverse(&axes).unwrap();
            let perm = permutation(rank, &mut rng);
            let rt = r.transpose(&perm).unwrap();
            let out_shape: Vec<usize> = perm.iter().map(|&p| len[p]).collect();
            let g = download(ctx, &rt);
            for i in 0..g.len() {
                let oc = coords(&out_shape, i);
                let mut c = vec![0; rank];
                for d in 0..rank {
                    c[perm[d]] = oc[d];
                }
                for &a in &axes {
                    c[a] = len[a] - 1 - c[a];
                }
                let ic: Vec<usize> = (0..rank).map(|d| start[d] + c[d] * step[d]).collect();
                let want = data[flat_of(&shape, &ic)];
                f.check(|| format!("transpose(reverse(slice)) {t} {shape:?} axes {axes:?} perm {perm:?} at {oc:?}"), g[i], want);
            }
        }
        let x = upload(ctx, U8, &[5], &[0; 5]);
        assert!(x.slice(&[4], &[2], &[1]).is_err());
        assert!(x.slice(&[0], &[3], &[0]).is_err());
        assert!(x.slice(&[0], &[3], &[3]).is_err()); // 0, 3, 6: out of bounds
        assert!(x.reverse(&[1]).is_err());
        f.finish("slice/reverse");
    });
}

#[test]
fn broadcast_and_reshape() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(3);
        // Tensor::broadcast with explicit axes (Nx.broadcast/3), size-1 axes stretched
        for (k, (src, target, axes)) in [
            (vec![3usize], vec![4usize, 3], vec![1usize]),
            (vec![4], vec![4, 3], vec![0]),
            (vec![1, 5], vec![2, 7, 5], vec![1, 2]),
            (vec![2, 1], vec![2, 3, 4], vec![0, 2]),
            (vec![], vec![3, 2], vec![]),
            (vec![1], vec![6], vec![0]),
        ]
        .into_iter()
        .enumerate()
        {
            let t = DType::ALL[(k * 5) % 12];
            let data = random_bits(t, numel(&src), &mut rng);
            let b = upload(ctx, t, &src, &data).broadcast(&target, &axes).unwrap();
            let g = download(ctx, &b);
            for i in 0..numel(&target) {
                let c = coords(&target, i);
                let ic: Vec<usize> = axes.iter().enumerate().map(|(j, &a)| if src[j] == 1 { 0 } else { c[a] }).collect();
                let want = data[flat_of(&src, &ic)];
                f.check(|| format!("broadcast {src:?} -> {target:?} axes {axes:?} at {c:?}"), g[i], want);
            }
        }
        assert!(upload(ctx, U8, &[3], &[0; 3]).broadcast(&[4, 2], &[1]).is_err());
        assert!(upload(ctx, U8, &[3], &[0; 3]).broadcast_to(&[3, 4]).is_err());
        // reshape: contiguous is a view; a non-contiguous view must be materialised first
        let data = random_bits(F16, 60, &mut rng);
        let x = upload(ctx, F16, &[3, 4, 5], &data);
        let r = x.reshape(&[5, 12]).unwrap();
        assert_eq!(download(ctx, &r), data);
        assert!(x.reshape(&[7, 9]).is_err());
        let tr = x.transpose(&[2, 0, 1]).unwrap();
        assert!(tr.reshape(&[60]).is_err());
        let flat = download(ctx, &ctx.contiguous(&tr).unwrap().reshape(&[60]).unwrap());
        for i in 0..60 {
            let c = coords(&[5, 3, 4], i);
            f.check(|| format!("reshape(transpose) [{i}]"), flat[i], data[flat_of(&[3, 4, 5], &[c[1], c[2], c[0]])]);
        }
        f.finish("broadcast/reshape");
    });
}

/// Nx.pad: element k of an axis lands at lo + k*(interior+1); negative lo/hi crop.
#[test]
fn pad_negative_and_interior() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(4);
        let configs: Vec<(Vec<usize>, Vec<(i64, i64, u64)>)> = vec![
            (vec![5], vec![(-2, 3, 2)]),
            (vec![3], vec![(-4, -1, 1)]), // empty result
            (vec![3], vec![(-3, 0, 0)]),
            (vec![4], vec![(2, 1, 0)]),
            (vec![0], vec![(2, 3, 4)]),
            (vec![3, 4], vec![(1, -2, 1), (-1, 2, 0)]),
            (vec![2, 3, 4], vec![(0, 0, 2), (-5, 1, 3), (2, -3, 1)]),
            (vec![6, 1, 5], vec![(-1, -1, 0), (3, 3, 7), (-7, 0, 2)]),
            (vec![7, 9], vec![(-3, -4, 0), (0, 0, 0)]), // empty along axis 0
        ];
        for (k, (shape, cfg)) in configs.iter().enumerate() {
            let t = DType::ALL[(k * 7 + 3) % 12];
            let data = random_bits(t, numel(shape), &mut rng);
            let x = upload(ctx, t, shape, &data);
            let pv = random_bits(t, 1, &mut rng)[0];
            let value = upload(ctx, t, &[], &[pv]);
            let out_shape: Vec<usize> = shape
                .iter()
                .zip(cfg)
                .map(|(&n, &(lo, hi, int))| {
                    let span = if n == 0 { 0 } else { n as i64 + (n as i64 - 1) * int as i64 };
                    (lo + span + hi).max(0) as usize
                })
                .collect();
            let p = ctx.pad(&x, &value, cfg).unwrap();
            assert_eq!(p.shape(), &out_shape[..], "pad {shape:?} {cfg:?}");
            let g = download(ctx, &p);
            for i in 0..numel(&out_shape) {
                let c = coords(&out_shape, i);
                let mut src = Some(vec![0; shape.len()]);
                for d in 0..shape.len() {
                    let (lo, _, int) = cfg[d];
                    let off = c[d] as i64 - lo;
                    let step = int as i64 + 1;
                    if off < 0 || off % step != 0 || off / step >= shape[d] as i64 {
                        src = None;
                        break;
                    }
                    src.as_mut().unwrap()[d] = (off / step) as usize;
                }
                let want = match src {
                    Some(ic) => data[flat_of(shape, &ic)],
                    None => pv, // same type: the pad value's bits
                };
                f.check(|| format!("pad {t} {shape:?} {cfg:?} at {c:?}: got {:#x} want {want:#x}", g[i]), g[i], want);
            }
        }
        // the pad value converts to the tensor's type
        let x = upload(ctx, S8, &[2], &[1, 2]);
        let p = ctx.pad(&x, &upload(ctx, F32, &[], &[(-3.7f32).to_bits() as u64]), &[(1, 1, 1)]).unwrap();
        assert_eq!(download(ctx, &p), vec![0xFD, 1, 0xFD, 2, 0xFD]);
        assert!(ctx.pad(&x, &value_of(ctx), &[(0, 0, 0), (0, 0, 0)]).is_err());
        assert!(ctx.pad(&x, &value_of(ctx), &[(-2, -1, 0)]).is_err());
        f.finish("pad");
    });
}

fn value_of(ctx: &Context) -> Tensor {
    upload(ctx, S8, &[], &[0])
}

#[test]
fn put_slice_with_clamped_starts() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(5);
        for case in 0..16 {
            let rank = 1 + case % 3;
            let t = DType::ALL[(case * 5) % 12];
            let shape = random_shape(rank, &mut rng, 12);
            let ushape: Vec<usize> = shape.iter().map(|&n| if case == 3 { 0 } else { 1 + rng.below(n as u64) as usize }).collect();
            // starts past the end are clamped so the update fits (Nx.put_slice)
            let start: Vec<usize> = shape.iter().map(|&n| rng.below(n as u64 + 4) as usize).collect();
            let base_bits = random_bits(t, numel(&shape), &mut rng);
            // the update may have another type; it is converted to the base's
            let ut = if case % 2 == 0 { t } else { DType::ALL[(case * 3 + 1) % 12] };
            let upd_bits = random_bits(ut, numel(&ushape), &mut rng);
            let base = upload(ctx, t, &shape, &base_bits);
            let upd = upload(ctx, ut, &ushape, &upd_bits);
            let out = download(ctx, &ctx.put_slice(&base, &start, &upd).unwrap());
            let clamped: Vec<usize> = (0..rank).map(|d| start[d].min(shape[d] - ushape[d])).collect();
            for i in 0..numel(&shape) {
                let c = coords(&shape, i);
                let inside = (0..rank).all(|d| c[d] >= clamped[d] && c[d] < clamped[d] + ushape[d]);
                let want = if inside {
                    let uc: Vec<usize> = (0..rank).map(|d| c[d] - clamped[d]).collect();
                    let u = upd_bits[flat_of(&ushape, &uc)];
                    if ut == t { u } else { write(t, read(ut, u)) }
                } else {
                    base_bits[i]
                };
                f.check(|| format!("put_slice {ut}->{t} {shape:?} at {start:?} (clamped {clamped:?}) upd {ushape:?}: [{c:?}] got {:#x} want {want:#x}", out[i]), out[i], want);
            }
            // the base is unchanged
            assert_eq!(download(ctx, &base), base_bits);
        }
        let base = upload(ctx, U8, &[3], &[0; 3]);
        assert!(ctx.put_slice(&base, &[0], &upload(ctx, U8, &[4], &[0; 4])).is_err());
        assert!(ctx.put_slice(&base, &[0, 0], &upload(ctx, U8, &[1], &[0])).is_err());
        // a transposed base and a reversed update
        let b = random_bits(S16, 12, &mut rng);
        let u = random_bits(S16, 4, &mut rng);
        let bt = upload(ctx, S16, &[3, 4], &b).transpose(&[1, 0]).unwrap(); // [4, 3]
        let ur = upload(ctx, S16, &[2, 2], &u).reverse(&[0]).unwrap();
        let out = download(ctx, &ctx.put_slice(&bt, &[1, 1], &ur).unwrap());
        for i in 0..4 {
            for j in 0..3 {
                let want = if (1..3).contains(&i) && (1..3).contains(&j) { u[(1 - (i - 1)) * 2 + (j - 1)] } else { b[j * 4 + i] };
                f.check(|| format!("put_slice views [{i},{j}]"), out[i * 3 + j], want);
            }
        }
        f.finish("put_slice");
    });
}

#[test]
fn concatenate_mixed_types() {
    on_engine(|ctx| {
        let mut f = Failures::default();
        let mut rng = Rng(6);
        for case in 0..12 {
            let rank = 1 + case % 3;
            let axis = case % rank;
            let base = random_shape(rank, &mut rng, 7);
            let out = DType::ALL[(case * 7) % 12];
            let nparts = 1 + case % 4;
            let mut parts = vec![];
            for p in 0..nparts {
                let mut s = base.clone();
                s[axis] = if p == 1 { 0 } else { 1 + rng.below(5) as usize };
                let t = if p % 2 == 0 { out } else { DType::ALL[(case + p * 5) % 12] };
                let bits = random_values(t, numel(&s), &mut rng);
                parts.push((t, s, bits));
            }
            let tensors: Vec<Tensor> = parts.iter().map(|(t, s, b)| upload(ctx, *t, s, b)).collect();
            let refs: Vec<&Tensor> = tensors.iter().collect();
            let c = ctx.concatenate(&refs, axis, out).unwrap();
            let mut shape = base.clone();
            shape[axis] = parts.iter().map(|p| p.1[axis]).sum();
            assert_eq!(c.shape(), &shape[..]);
            let g = download(ctx, &c);
            for i in 0..numel(&shape) {
                let mut cc = coords(&shape, i);
                let mut k = 0;
                while cc[axis] >= parts[k].1[axis] {
                    cc[axis] -= parts[k].1[axis];
                    k += 1;
                }
                let (t, s, b) = &parts[k];
                let v = b[flat_of(s, &cc)];
                let want = if *t == out { v } else { write(out, read(*t, v)) };
                f.check(|| format!("concatenate -> {out} axis {axis} part {k} ({t}) at {cc:?}: got {} want {}", show(out, g[i]), show(out, want)), g[i], want);
            }
        }
        let a = upload(ctx, U8, &[2, 3], &[0; 6]);
        let b = upload(ctx, U8, &[3, 3], &[0; 9]);
        assert!(ctx.concatenate(&[&a, &b], 1, U8).is_err());
        assert!(ctx.concatenate(&[&a, &b], 2, U8).is_err());
        assert!(ctx.concatenate(&[], 0, U8).is_err());
        assert_eq!(ctx.concatenate(&[&a, &b], 0, U8).unwrap().shape(), &[5, 3]);
        f.finish("concatenate");
    });
}
