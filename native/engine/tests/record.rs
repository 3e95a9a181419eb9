//! The `record_*` API: several kernel families recorded into one caller-owned batch are one
//! recording on the stream, dispatch exactly what the same ops dispatch on their own, and give
//! the same bits — later ops reading what earlier ones in the batch wrote. Indexing ops report
//! out-of-range indices through one `IndexCheck` read after the batch.
//!
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test --release -p nx_vulkan_engine --test record

mod common;
use common::*;
use nx_vulkan_engine::conv::{conv_output_shape, ConvOptions};
use nx_vulkan_engine::fft::fft_output;
use nx_vulkan_engine::indexing::{IndexedOp, ScatterStrategy};
use nx_vulkan_engine::matmul::{dot_output_shape, DotPrecision};
use nx_vulkan_engine::ops::{concatenate_output_shape, pad_output_shape};
use nx_vulkan_engine::scan::ScanOp;
use nx_vulkan_engine::sort::Direction;
use nx_vulkan_engine::window::{window_output_shape, ScatterOp, WindowOp};
use nx_vulkan_engine::*;

/// Small f32 values with ties, signed zeros and a NaN (sorts and scans see them).
fn data(n: usize, rng: &mut Rng) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).map(|_| (((rng.below(41) as f32) - 20.0) / 8.0).to_bits() as u64).collect();
    v[1] = (-0.0f32).to_bits() as u64;
    v[n / 2] = f32::NAN.to_bits() as u64;
    v
}

/// Runs `f` on its own and returns its result with the dispatches and recordings it took.
fn alone(ctx: &Context, f: impl FnOnce() -> Result<Tensor>) -> (Tensor, u64) {
    let before = ctx.stats();
    let t = f().expect("op");
    let after = ctx.stats();
    assert_eq!(after.recordings - before.recordings, 1, "one recording per op on its own");
    (t, after.dispatches - before.dispatches)
}

#[test]
fn families_recorded_into_one_batch_match_their_ops() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(41);
        let x = upload(ctx, F32, &[4, 8], &data(32, &mut rng));
        let y = upload(ctx, F32, &[8, 3], &data(24, &mut rng));
        // [2, 4, 3] read as [2, 3, 4]: converted to f64 for the exact dot; as f32 for the
        // f32-accumulating one its contracted axes cannot merge, so that dot copies it.
        let z3 = upload(ctx, S32, &[2, 4, 3], &(0..24u64).map(|i| i * 7 % 11).collect::<Vec<_>>()).transpose(&[0, 2, 1]).unwrap();
        let z3f = upload(ctx, F32, &[2, 4, 3], &data(24, &mut rng)).transpose(&[0, 2, 1]).unwrap();
        let w3 = upload(ctx, F32, &[3, 4, 5], &data(60, &mut rng));
        let img = upload(ctx, F32, &[1, 2, 5, 5], &data(50, &mut rng));
        let ker = upload(ctx, F32, &[3, 2, 3, 3], &data(54, &mut rng));
        let fill = upload(ctx, F32, &[], &[(1.5f32).to_bits() as u64]);
        let add = Expr::binary(BinaryOp::Add, Expr::Input(0), Expr::Input(1), F32);
        let pad_cfg = [(1, -1, 0), (2, 1, 1)];
        let conv_opts = ConvOptions { padding: vec![(1, 0), (0, 1)], ..ConvOptions::new(4) };
        let (win, wst, wpad) = ([2, 3], [1, 2], [(0, 1), (1, 1)]);
        let y_part = y.slice(&[0, 0], &[2, 3], &[1, 1]).unwrap();

        // Each op on its own: the reference bits and dispatch counts.
        let mut refs: Vec<(Tensor, u64)> = vec![];
        refs.push(alone(ctx, || ctx.map(&add, &[&x, &x])));
        refs.push(alone(ctx, || ctx.dot(&x, &[1], &[], &y, &[0], &[], F32)));
        refs.push(alone(ctx, || ctx.dot(&z3, &[1, 2], &[], &w3, &[0, 1], &[], F32)));
        refs.push(alone(ctx, || ctx.dot_with(DotPrecision::F32Accumulate, &z3f, &[1, 2], &[], &w3, &[0, 1], &[], F32)));
        refs.push(alone(ctx, || ctx.sort(&x, 1, Direction::Asc)));
        refs.push(alone(ctx, || ctx.argsort(&x, 0, Direction::Desc, true, S32)));
        refs.push(alone(ctx, || ctx.top_k(&x, 3, S64).map(|(v, _)| v)));
        refs.push(alone(ctx, || ctx.cumulative(ScanOp::Sum, &x, 1, false)));
        refs.push(alone(ctx, || ctx.cumulative(ScanOp::Max, &x, 0, true)));
        refs.push(alone(ctx, || ctx.conv(&img, &ker, &conv_opts, F32)));
        refs.push(alone(ctx, || ctx.fft(&x, 1, 8, 1e-10)));
        refs.push(alone(ctx, || ctx.ifft(&x, 0, 6, 1e-10)));
        refs.push(alone(ctx, || ctx.pad(&x, &fill, &pad_cfg)));
        refs.push(alone(ctx, || ctx.window_reduce(WindowOp::Sum, &x, &win, &wst, &wpad, &[1, 1])));
        refs.push(alone(ctx, || ctx.iota(S32, &[3, 4], Some(1))));
        refs.push(alone(ctx, || ctx.full(Scalar::F(-2.5), F64, &[5])));
        // ops reading the result of the first one
        let sum = refs[0].0.clone();
        let src = ctx.full(Scalar::F(1.0), F32, &window_output_shape(&[4, 8], &win, &wst, &wpad, &[1, 1]).unwrap()).unwrap();
        refs.push(alone(ctx, || ctx.concatenate(&[&sum, &x], 0, F64)));
        refs.push(alone(ctx, || ctx.put_slice(&sum, &[1, 2], &y_part)));
        refs.push(alone(ctx, || ctx.window_scatter(ScatterOp::Max, &sum, &src, &fill, &win, &wst, &wpad, F32)));
        refs.push(alone(ctx, || ctx.contiguous(&sum.transpose(&[1, 0]).unwrap())));
        let expected: u64 = refs.iter().map(|r| r.1).sum();
        let top_k_indices = ctx.top_k(&x, 3, S64).unwrap().1;

        // The same ops recorded into one batch, into outputs allocated up front.
        let e = |t: DType, s: &[usize]| ctx.empty(t, s).unwrap();
        let outs = [
            e(F32, &[4, 8]),
            e(F32, &dot_output_shape(&[4, 8], &[1], &[], &[8, 3], &[0], &[]).unwrap()),
            e(F32, &[2, 5]),
            e(F32, &[2, 5]),
            e(F32, &[4, 8]),
            e(S32, &[4, 8]),
            e(F32, &[4, 3]),
            e(F32, &[4, 8]),
            e(F32, &[4, 8]),
            e(F32, &conv_output_shape(&[1, 2, 5, 5], &[3, 2, 3, 3], &conv_opts).unwrap()),
            e(C64, &fft_output(&x, 1, 8).unwrap().1),
            e(C64, &fft_output(&x, 0, 6).unwrap().1),
            e(F32, &pad_output_shape(&[4, 8], &pad_cfg).unwrap()),
            e(F32, &window_output_shape(&[4, 8], &win, &wst, &wpad, &[1, 1]).unwrap()),
            e(S32, &[3, 4]),
            e(F64, &[5]),
            e(F64, &concatenate_output_shape(&[&[4, 8], &[4, 8]], 0).unwrap()),
            e(F32, &[4, 8]),
            e(F32, &[4, 8]),
            e(F32, &[8, 4]),
        ];
        let top_k_idx_out = e(S64, &[4, 3]);
        let before = ctx.stats();
        let mut batch = ctx.batch().unwrap();
        let b = &mut batch;
        let o = &outs;
        ctx.record_map(b, &[add.clone()], &[&x, &x], &[&o[0]]).unwrap();
        ctx.record_dot(b, DotPrecision::Exact, &x, &[1], &[], &y, &[0], &[], &o[1]).unwrap();
        ctx.record_dot(b, DotPrecision::Exact, &z3, &[1, 2], &[], &w3, &[0, 1], &[], &o[2]).unwrap();
        ctx.record_dot(b, DotPrecision::F32Accumulate, &z3f, &[1, 2], &[], &w3, &[0, 1], &[], &o[3]).unwrap();
        ctx.record_sort(b, &x, 1, Direction::Asc, &o[4]).unwrap();
        ctx.record_argsort(b, &x, 0, Direction::Desc, &o[5]).unwrap();
        ctx.record_top_k(b, &x, 3, &o[6], &top_k_idx_out).unwrap();
        ctx.record_cumulative(b, ScanOp::Sum, &x, 1, false, &o[7]).unwrap();
        ctx.record_cumulative(b, ScanOp::Max, &x, 0, true, &o[8]).unwrap();
        ctx.record_conv(b, &img, &ker, &conv_opts, &o[9]).unwrap();
        ctx.record_fft(b, &x, 1, 8, 1e-10, &o[10]).unwrap();
        ctx.record_ifft(b, &x, 0, 6, 1e-10, &o[11]).unwrap();
        ctx.record_pad(b, &x, &fill, &pad_cfg, &o[12]).unwrap();
        ctx.record_window_reduce(b, WindowOp::Sum, &x, &win, &wst, &wpad, &[1, 1], &o[13]).unwrap();
        ctx.record_iota(b, Some(1), &o[14]).unwrap();
        ctx.record_full(b, Scalar::F(-2.5), &o[15]).unwrap();
        // from here on, inputs written earlier in this same batch
        ctx.record_concatenate(b, &[&o[0], &x], 0, &o[16]).unwrap();
        ctx.record_put_slice(b, &o[0], &[1, 2], &y_part, &o[17]).unwrap();
        ctx.record_window_scatter(b, ScatterOp::Max, &o[0], &src, &fill, &win, &wst, &wpad, &o[18]).unwrap();
        ctx.record_contiguous(b, &o[0].transpose(&[1, 0]).unwrap(), &o[19]).unwrap();
        batch.finish().unwrap();
        let after = ctx.stats();
        assert_eq!(after.recordings - before.recordings, 1, "the whole batch is one recording");
        assert_eq!(after.dispatches - before.dispatches, expected, "the batch dispatches what the ops do on their own");
        assert_eq!(after.copies, before.copies, "no transfers inside the batch");

        for (i, (got, (want, _))) in outs.iter().zip(&refs).enumerate() {
            assert_eq!((got.dtype(), got.shape()), (want.dtype(), want.shape()), "output {i}");
            assert_eq!(ctx.download(got).unwrap(), ctx.download(want).unwrap(), "output {i} differs from the op run on its own");
        }
        assert_eq!(ctx.download(&top_k_idx_out).unwrap(), ctx.download(&top_k_indices).unwrap(), "top_k indices");
    });
}

/// What the dispatch counts above add up to, pinned for a few families so a change that moves
/// work between them cannot hide behind the sum.
#[test]
fn dispatch_counts_of_recorded_families() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(42);
        let x = upload(ctx, F32, &[4, 8], &data(32, &mut rng));
        let y = upload(ctx, F32, &[8, 3], &data(24, &mut rng));
        let count = |f: &dyn Fn(&mut submit::Batch<'_>)| {
            let before = ctx.stats();
            let mut batch = ctx.batch().unwrap();
            f(&mut batch);
            batch.finish().unwrap();
            let after = ctx.stats();
            assert_eq!(after.recordings - before.recordings, 1);
            after.dispatches - before.dispatches
        };
        // exact f32 dot: two operand conversions to f64, the f64 GEMM, the rounding to f32
        let out = ctx.empty(F32, &[4, 3]).unwrap();
        assert_eq!(count(&|b| ctx.record_dot(b, DotPrecision::Exact, &x, &[1], &[], &y, &[0], &[], &out).unwrap()), 4);
        // sort of rows of 8 (one block): init, presort, output
        let out = ctx.empty(F32, &[4, 8]).unwrap();
        assert_eq!(count(&|b| ctx.record_sort(b, &x, 1, Direction::Asc, &out).unwrap()), 3);
        // scan of 8 (one shared-memory segment): one pass, its up- and down-sweep levels
        assert_eq!(count(&|b| ctx.record_cumulative(b, ScanOp::Sum, &x, 1, false, &out).unwrap()), 1);
        // fft of 8 = 2^3 along the last axis: leaf, the stages' twiddle table, the 3 radix-2
        // stages in one pass, straight into the output
        let out = ctx.empty(C64, &[4, 8]).unwrap();
        assert_eq!(count(&|b| ctx.record_fft(b, &x, 1, 8, 1e-10, &out).unwrap()), 3);
        // along axis 0 (4 = 2^2: leaf, table, one pass) into scratch, then one copy back to
        // Nx's axis order
        let out = ctx.empty(C64, &[4, 8]).unwrap();
        assert_eq!(count(&|b| ctx.record_fft(b, &x, 0, 4, 1e-10, &out).unwrap()), 4);
        // pad: the fill and the interior copy
        let fill = upload(ctx, F32, &[], &[0]);
        let out = ctx.empty(F32, &[6, 10]).unwrap();
        assert_eq!(count(&|b| ctx.record_pad(b, &x, &fill, &[(1, 1, 0), (1, 1, 0)], &out).unwrap()), 2);
    });
}

#[test]
fn outputs_that_do_not_fit_are_refused() {
    on_engine(|ctx| {
        let x = upload(ctx, F32, &[4, 8], &(0..32u64).map(|i| (i as f32).to_bits() as u64).collect::<Vec<_>>());
        let y = upload(ctx, F32, &[8, 3], &[0; 24]);
        let mut batch = ctx.batch().unwrap();
        let b = &mut batch;
        let wrong_shape = ctx.empty(F32, &[4, 4]).unwrap();
        let wrong_type = ctx.empty(F64, &[4, 8]).unwrap();
        assert!(ctx.record_sort(b, &x, 1, Direction::Asc, &wrong_shape).is_err());
        assert!(ctx.record_sort(b, &x, 1, Direction::Asc, &wrong_type).is_err());
        assert!(ctx.record_argsort(b, &x, 1, Direction::Asc, &ctx.empty(F32, &[4, 8]).unwrap()).is_err());
        assert!(ctx.record_dot(b, DotPrecision::Exact, &x, &[1], &[], &y, &[0], &[], &wrong_shape).is_err());
        assert!(ctx.record_cumulative(b, ScanOp::Sum, &x, 0, false, &wrong_type).is_err());
        // kernels that write row-major from the buffer's start refuse views
        let big = ctx.empty(F32, &[8, 8]).unwrap();
        let lower = big.slice(&[4, 0], &[4, 8], &[1, 1]).unwrap();
        assert!(ctx.record_sort(b, &x, 1, Direction::Asc, &lower).is_err());
        let transposed = ctx.empty(C64, &[8, 4]).unwrap().transpose(&[1, 0]).unwrap();
        assert!(ctx.record_fft(b, &x, 1, 8, 1e-10, &transposed).is_err());
        assert!(b.is_empty(), "refused calls record nothing");
        // layout ops write any view: a copy into the lower half of a larger tensor
        ctx.record_contiguous(b, &x, &lower).unwrap();
        batch.finish().unwrap();
        assert_eq!(download(ctx, &lower), download(ctx, &x));
    });
}

/// Indexing ops recorded with the rest: one recording, one index check for all of them, read
/// after the batch; the same bits and dispatches as the ops on their own.
#[test]
fn indexing_records_with_one_check_for_the_batch() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(43);
        let x = upload(ctx, F32, &[4, 6], &data(24, &mut rng));
        let ix = upload(ctx, S64, &[5, 1], &[3, 0, 1, 3, 2]);
        let ix2 = upload(ctx, S32, &[2, 3], &[5, 0, 2, 2, 1, 4]);
        let upd = upload(ctx, F32, &[5, 6], &data(30, &mut rng));
        let square = Expr::binary(BinaryOp::Multiply, Expr::Input(0), Expr::Input(1), F32);
        let mut refs: Vec<(Tensor, u64)> = vec![];
        refs.push(alone(ctx, || ctx.map(&square, &[&x, &x])));
        let sq = refs[0].0.clone();
        refs.push(alone(ctx, || ctx.gather(&sq, &ix, &[0])));
        refs.push(alone(ctx, || ctx.take(&x, &ix2, 1)));
        refs.push(alone(ctx, || ctx.indexed_add(&sq, &ix, &upd, &[0], F32)));
        refs.push(alone(ctx, || ctx.indexed(IndexedOp::Put, &x, &ix, &upd, &[0], F64, Some(ScatterStrategy::Segmented))));
        let expected: u64 = refs.iter().map(|r| r.1).sum();

        let outs = [
            ctx.empty(F32, &[4, 6]).unwrap(),
            ctx.empty(F32, &indexing::gather_output_shape(&x, &ix, &[0]).unwrap()).unwrap(),
            ctx.empty(F32, &indexing::take_output_shape(&x, &ix2, 1).unwrap()).unwrap(),
            ctx.empty(F32, &[4, 6]).unwrap(),
            ctx.empty(F64, &[4, 6]).unwrap(),
        ];
        let check = ctx.index_check(4).unwrap();
        let before = ctx.stats();
        let mut batch = ctx.batch().unwrap();
        ctx.record_map(&mut batch, &[square.clone()], &[&x, &x], &[&outs[0]]).unwrap();
        ctx.record_gather(&mut batch, &check, &outs[0], &ix, &[0], &outs[1]).unwrap();
        ctx.record_take(&mut batch, &check, &x, &ix2, 1, &outs[2]).unwrap();
        ctx.record_indexed(&mut batch, &check, IndexedOp::Add, &outs[0], &ix, &upd, &[0], None, &outs[3]).unwrap();
        ctx.record_indexed(&mut batch, &check, IndexedOp::Put, &x, &ix, &upd, &[0], Some(ScatterStrategy::Segmented), &outs[4]).unwrap();
        let full = ctx.record_gather(&mut batch, &check, &x, &ix, &[0], &outs[1]);
        assert!(full.unwrap_err().to_string().contains("room for 4"), "a fifth op does not fit a check of 4");
        batch.finish().unwrap();
        let after = ctx.stats();
        check.check().unwrap();
        assert_eq!(after.recordings - before.recordings, 1, "the whole batch is one recording");
        assert_eq!(after.dispatches - before.dispatches, expected);
        for (i, (got, (want, _))) in outs.iter().zip(&refs).enumerate() {
            assert_eq!(ctx.download(got).unwrap(), ctx.download(want).unwrap(), "output {i} differs from the op run on its own");
        }
    });
}

/// An out-of-range index found by a recorded op is raised by the check, after the batch, with
/// the op's own message — the first op's, when several meet one.
#[test]
fn a_recorded_index_check_raises_what_the_op_raises() {
    on_engine(|ctx| {
        let x = upload(ctx, F32, &[4, 6], &[0; 24]);
        let good = upload(ctx, S64, &[2, 1], &[1, 2]);
        let bad = upload(ctx, S64, &[3, 1], &[1, 4, 7]);
        let bad2 = upload(ctx, S32, &[2], &[0, (-1i64) as u64]);
        let want = ctx.gather(&x, &bad, &[0]).unwrap_err().to_string();
        assert!(want.contains("index 4 is out of bounds for axis 0 in shape {4, 6}"), "{want}");
        let check = ctx.index_check(3).unwrap();
        let outs = [ctx.empty(F32, &[2, 6]).unwrap(), ctx.empty(F32, &[3, 6]).unwrap(), ctx.empty(F32, &[4, 2]).unwrap()];
        let mut batch = ctx.batch().unwrap();
        ctx.record_gather(&mut batch, &check, &x, &good, &[0], &outs[0]).unwrap();
        ctx.record_gather(&mut batch, &check, &x, &bad, &[0], &outs[1]).unwrap();
        ctx.record_take(&mut batch, &check, &x, &bad2, 1, &outs[2]).unwrap();
        batch.finish().unwrap();
        assert_eq!(check.check().unwrap_err().to_string(), want);
        // a check whose ops were all in range, and one never used
        let check = ctx.index_check(1).unwrap();
        let mut batch = ctx.batch().unwrap();
        ctx.record_gather(&mut batch, &check, &x, &good, &[0], &outs[0]).unwrap();
        batch.finish().unwrap();
        check.check().unwrap();
        ctx.index_check(1).unwrap().check().unwrap();
    });
}
