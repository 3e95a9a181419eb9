//! The stream: ops are queued, not waited for. These tests check what that must never change
//! (results, order across threads, buffers kept alive while work on them is queued) and what it
//! adds (errors reported at the next synchronisation point, synchronous mode, bounded queues).

mod common;
use common::*;
use nx_vulkan_engine::*;
use std::sync::Arc;

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Work heavy enough on lavapipe that what is queued behind it is still pending for a while.
fn queue_heavy_work(ctx: &Context) {
    let big = ctx.iota(DType::F32, &[1 << 20], None).unwrap();
    let mut y = big.clone();
    for _ in 0..12 {
        y = ctx.unary(UnaryOp::Exp, &ctx.unary(UnaryOp::Sin, &y, DType::F32).unwrap(), DType::F32).unwrap();
    }
}

#[test]
fn ops_return_before_the_device_has_run_them() {
    on_engine_alone(|ctx| {
        ctx.synchronize().unwrap();
        let before = ctx.stats();
        queue_heavy_work(ctx);
        let queued = ctx.stats();
        assert_eq!(queued.recordings - before.recordings, 25, "iota + 24 ops recorded");
        assert!(queued.in_flight > 0 || queued.submits < before.submits + 25, "work still queued: {queued:?}");
        ctx.synchronize().unwrap();
        let after = ctx.stats();
        assert_eq!(after.in_flight, 0);
        assert!(after.submits - before.submits <= 25, "the stream never submits more often than ops commit");
    });
}

#[test]
fn a_buffer_dropped_while_work_on_it_is_queued_is_not_reused_early() {
    on_engine_alone(|ctx| {
        let n = 1 << 16;
        for round in 0..4 {
            queue_heavy_work(ctx); // keeps the device busy so that what follows stays queued
            let xs: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 + round as f32).collect();
            let x = ctx.upload(DType::F32, &[n], &f32s(&xs)).unwrap();
            let y = ctx.binary(BinaryOp::Add, &x, &x, DType::F32).unwrap();
            let x_address = x.buffer().address();
            drop(x); // the user lets go while the add is still queued
            // The next request of the same size must not get x's memory while the add may
            // still read it; if it did, this upload would overwrite the add's input.
            let junk = ctx.upload(DType::F32, &[n], &f32s(&vec![-1.0; n])).unwrap();
            let pending = ctx.stats().in_flight > 0;
            if pending {
                assert_ne!(junk.buffer().address(), x_address, "round {round}: reused while queued work reads it");
            }
            let got = from_f32s(&ctx.download(&y).unwrap());
            let want: Vec<f32> = xs.iter().map(|v| v + v).collect();
            assert_eq!(got, want, "round {round}");
        }
    });
}

#[test]
fn intermediates_are_reused_in_stream_order_while_work_is_queued() {
    on_engine_alone(|ctx| {
        let n = 1 << 18;
        let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 1000.0).collect();
        let x = ctx.upload(DType::F32, &[n], &f32s(&xs)).unwrap();
        drop(ctx.unary(UnaryOp::Negate, &x, DType::F32).unwrap());
        ctx.synchronize().unwrap();
        queue_heavy_work(ctx);
        let before = ctx.stats();
        let mut y = x.clone();
        for _ in 0..200 {
            // each intermediate is dropped as soon as the next op is queued
            y = ctx.unary(UnaryOp::Negate, &y, DType::F32).unwrap();
        }
        let queued = ctx.stats();
        assert!(
            queued.pool.device_allocations - before.pool.device_allocations <= 4,
            "200 queued ops reuse their predecessors' buffers without waiting: {before:?} -> {queued:?}"
        );
        assert_eq!(from_f32s(&ctx.download(&y).unwrap()), xs, "an even number of negations");
    });
}

#[test]
fn queued_failures_surface_at_the_next_sync_point_and_the_engine_recovers() {
    on_engine_alone(|ctx| {
        ctx.synchronize().unwrap();
        let x = ctx.upload(DType::F32, &[3], &f32s(&[1.0, 2.0, 3.0])).unwrap();
        ctx.stream.inject_failure("simulated device fault");
        let y = ctx.unary(UnaryOp::Exp, &x, DType::F32).expect("queuing does not fail");
        let err = ctx.download(&y).expect_err("the failure must surface at the download");
        let msg = err.to_string();
        assert!(matches!(err, EngineError::QueuedWork { .. }), "{err:?}");
        assert!(msg.contains("simulated device fault"), "{msg}");
        assert!(msg.to_lowercase().contains("exp"), "the message names the op's kernel: {msg}");
        // Reported once; the engine keeps working.
        ctx.synchronize().unwrap();
        let z = ctx.unary(UnaryOp::Negate, &x, DType::F32).unwrap();
        assert_eq!(from_f32s(&ctx.download(&z).unwrap()), vec![-1.0, -2.0, -3.0]);
    });
}

#[test]
fn synchronous_mode_gives_the_same_bits() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(77);
        let data = random_values(F32, 4099, &mut rng);
        let run = |ctx: &Context| {
            let x = upload(ctx, F32, &[4099], &data);
            let e = ctx.unary(UnaryOp::Exp, &x, F32).unwrap();
            let s = ctx.reduce(reduce::ReduceOp::Sum, &e, &[0], false, F32).unwrap();
            let m = ctx.reshape_copy(&x, &[17, 241]);
            let d = ctx.dot(&m, &[1], &[], &m, &[1], &[], F32).unwrap();
            let c = ctx.cumulative(scan::ScanOp::Sum, &x, 0, false).unwrap();
            [download(ctx, &e), download(ctx, &s), download(ctx, &d), download(ctx, &c)]
        };
        let queued = run(ctx);
        ctx.stream.set_synchronous(true);
        let before = ctx.stats();
        let waited = run(ctx);
        let after = ctx.stats();
        ctx.stream.set_synchronous(false);
        assert_eq!(queued, waited);
        assert!(after.submits - before.submits >= after.recordings - before.recordings, "synchronous mode submits every op");
    });
}

trait ReshapeCopy {
    fn reshape_copy(&self, x: &Tensor, shape: &[usize]) -> Tensor;
}

impl ReshapeCopy for Context {
    fn reshape_copy(&self, x: &Tensor, shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        self.contiguous(&x.slice(&[0], &[n], &[1]).unwrap()).unwrap().reshape(shape).unwrap()
    }
}

#[test]
fn handles_passed_between_threads_need_no_synchronisation() {
    on_engine_alone(|ctx| {
        ctx.synchronize().unwrap();
        let ctx: Arc<Context> = Context::global().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<(i32, Tensor)>();
        let producer = {
            let ctx = ctx.clone();
            std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn(move || {
                    for i in 0..300i32 {
                        let a = ctx.upload(DType::S32, &[4], &[i, 1, -i, 7].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()).unwrap();
                        let b = ctx.binary(BinaryOp::Multiply, &a, &a, DType::S32).unwrap(); // queued
                        tx.send((i, b)).unwrap();
                    }
                })
                .unwrap()
        };
        let mut checked = 0;
        for (i, b) in rx {
            let c = ctx.binary(BinaryOp::Add, &b, &b, DType::S32).unwrap();
            let got: Vec<i32> = ctx.download(&c).unwrap().chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
            assert_eq!(got, vec![2 * i * i, 2, 2 * i * i, 98]);
            checked += 1;
        }
        producer.join().unwrap();
        assert_eq!(checked, 300);
    });
}

#[test]
fn a_hundred_thousand_queued_ops_keep_counters_flat() {
    on_engine_alone(|ctx| {
        let x = ctx.upload(DType::F32, &[7], &f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])).unwrap();
        let one = ctx.upload(DType::F32, &[7], &f32s(&[1.0; 7])).unwrap();
        let mut y = ctx.binary(BinaryOp::Add, &x, &one, DType::F32).unwrap();
        drop(ctx.binary(BinaryOp::Subtract, &y, &one, DType::F32).unwrap()); // both kernels built
        ctx.synchronize().unwrap();
        let max_queued = ctx.stream.config().max_queued as u64;
        // Two halves: the first may grow the pool up to what a full queue keeps alive; the
        // second must then find everything it needs in the pool.
        let mut halves = vec![];
        for _ in 0..2 {
            let before = ctx.stats();
            let ops = 50_000u64;
            for i in 0..ops {
                // y = x + 1 after every pair of ops, queued with no waits.
                y = if i % 2 == 0 {
                    ctx.binary(BinaryOp::Add, &y, &one, DType::F32).unwrap()
                } else {
                    ctx.binary(BinaryOp::Subtract, &y, &one, DType::F32).unwrap()
                };
                if i % 1000 == 0 {
                    let s = ctx.stats();
                    assert!(s.in_flight <= max_queued, "back-pressure bounds the queue: {s:?}");
                }
            }
            let got = from_f32s(&ctx.download(&y).unwrap());
            assert_eq!(got, vec![2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
            let after = ctx.stats();
            assert_eq!(after.dispatches - before.dispatches, ops);
            assert_eq!(after.pipelines, before.pipelines, "no pipeline built per op");
            assert!(after.submitters <= max_queued + 1, "submitters bounded: {after:?}");
            assert!(after.submits - before.submits < ops, "queued ops share submissions");
            assert_eq!(after.pool.live_buffers, before.pool.live_buffers, "every intermediate returned");
            halves.push(after.pool.device_allocations - before.pool.device_allocations);
        }
        assert!(halves[1] <= 16, "device allocations flat once the pool is warm: {halves:?}");
    });
}

#[test]
fn the_profiler_reports_device_time_per_kernel() {
    on_engine_alone(|ctx| {
        let x = ctx.iota(DType::F32, &[1 << 16], None).unwrap();
        drop(ctx.unary(UnaryOp::Exp, &x, DType::F32).unwrap()); // built before timing
        ctx.stream.profile_start().unwrap();
        for _ in 0..3 {
            drop(ctx.unary(UnaryOp::Exp, &x, DType::F32).unwrap());
        }
        let y = ctx.binary(BinaryOp::Add, &x, &x, DType::F32).unwrap();
        let report = ctx.stream.profile_stop().unwrap();
        let exp = report.iter().find(|k| k.name.contains("Exp")).unwrap_or_else(|| panic!("no exp kernel in {report:?}"));
        assert_eq!(exp.runs, 3, "{report:?}");
        assert!(exp.device_ns > 0.0, "{report:?}");
        let add_runs: u64 = report.iter().filter(|k| k.name.contains("+") || k.name.contains("Add")).map(|k| k.runs).sum();
        assert_eq!(add_runs, 1, "{report:?}");
        assert_eq!(report.iter().map(|k| k.runs).sum::<u64>(), 4, "only what ran while profiling: {report:?}");
        // Off again: nothing more is timed, and results are unaffected.
        drop(ctx.unary(UnaryOp::Exp, &x, DType::F32).unwrap());
        assert!(ctx.stream.profile_stop().unwrap().is_empty());
        assert_eq!(from_f32s(&ctx.download(&y).unwrap())[3], 6.0);
    });
}

#[test]
fn the_profiler_can_time_whole_submissions() {
    on_engine_alone(|ctx| {
        let x = ctx.iota(DType::F32, &[1 << 16], None).unwrap();
        drop(ctx.unary(UnaryOp::Exp, &x, DType::F32).unwrap()); // built before timing
        ctx.synchronize().unwrap();
        ctx.stream.profile_start_submissions().unwrap();
        let t0 = std::time::Instant::now();
        for _ in 0..3 {
            // Each op waited for: a submission of its own.
            drop(ctx.unary(UnaryOp::Exp, &x, DType::F32).unwrap());
            ctx.synchronize().unwrap();
        }
        let wall_ns = t0.elapsed().as_nanos() as f64;
        let report = ctx.stream.profile_stop().unwrap();
        assert_eq!(report.len(), 1, "one entry for all submissions: {report:?}");
        assert_eq!((report[0].name.as_str(), report[0].runs), ("submission", 3), "{report:?}");
        assert!(report[0].device_ns > 0.0 && report[0].device_ns < wall_ns, "device {} ns within {wall_ns} ns of waiting: {report:?}", report[0].device_ns);
        // Per-command timing again afterwards.
        ctx.stream.profile_start().unwrap();
        drop(ctx.unary(UnaryOp::Exp, &x, DType::F32).unwrap());
        let report = ctx.stream.profile_stop().unwrap();
        assert!(report.len() == 1 && report[0].name.contains("Exp"), "{report:?}");
    });
}

#[test]
fn staged_transfers_in_chunks_round_trip_every_byte() {
    on_engine_alone(|ctx| {
        // The discrete-GPU path (staging buffers, transfers split into chunks that overlap host
        // and device copies) even where device memory is mapped, as on lavapipe.
        ctx.staged_transfers.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut rng = Rng(99);
        for n in [0usize, 1, 7, 4099, (1 << 20) + 3, (5 << 20) + 13] {
            let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            let before = ctx.stats();
            let t = ctx.upload(DType::U8, &[n], &bytes).unwrap();
            let copies = ctx.stats().copies - before.copies;
            if n > 1 << 20 {
                assert!(copies >= 2, "{n} bytes go in chunks: {copies} copies");
            } else {
                assert_eq!(copies, u64::from(n > 0), "{n} bytes in one copy");
            }
            // read back through an op too, so the download waits for queued device work
            let u = ctx.unary(UnaryOp::BitwiseNot, &t, DType::U8).unwrap();
            assert_eq!(ctx.download(&t).unwrap(), bytes, "{n} bytes");
            let inverted: Vec<u8> = bytes.iter().map(|b| !b).collect();
            assert_eq!(ctx.download(&u).unwrap(), inverted, "{n} bytes through an op");
        }
        ctx.staged_transfers.store(false, std::sync::atomic::Ordering::Relaxed);
    });
}

/// Lighter than `queue_heavy_work`: enough that what is queued behind it has not run at the
/// next instant, on lavapipe or a GPU.
fn queue_some_work(ctx: &Context) {
    let mut y = ctx.iota(DType::F32, &[1 << 17], None).unwrap();
    for _ in 0..3 {
        y = ctx.unary(UnaryOp::Exp, &ctx.unary(UnaryOp::Sin, &y, DType::F32).unwrap(), DType::F32).unwrap();
    }
}

#[test]
fn a_read_back_started_now_is_collected_later_or_dropped_safely() {
    on_engine_alone(|ctx| {
        use std::sync::atomic::Ordering::Relaxed;
        use std::time::Duration;
        let mut pending_seen = 0;
        // Mapped memory read in place (lavapipe's path), then the discrete GPU's staging copy.
        for staged in [false, true] {
            ctx.staged_transfers.store(staged, Relaxed);
            for n in [0usize, 1, 4099, 1 << 18] {
                let xs: Vec<f32> = (0..n).map(|i| (i % 977) as f32 - 0.5).collect();
                let want: Vec<f32> = xs.iter().map(|v| v + v).collect();
                let x = ctx.upload(DType::F32, &[n], &f32s(&xs)).unwrap();
                queue_some_work(ctx); // the add below stays queued behind this for a while
                let y = ctx.binary(BinaryOp::Add, &x, &x, DType::F32).unwrap();
                let mut p = ctx.start_download(&y).unwrap();
                assert_eq!(p.byte_size(), 4 * n);
                let mut out = vec![0u8; 4 * n];
                // One look, no spin: behind the heavy work it has not run yet (nothing copied).
                if !ctx.finish_download(&mut p, &mut out, Some(Duration::ZERO)).unwrap() {
                    pending_seen += 1;
                    assert!(out.iter().all(|&b| b == 0), "nothing is copied before the device ran it");
                    assert!(ctx.finish_download(&mut p, &mut out, None).unwrap());
                }
                assert_eq!(from_f32s(&out), want, "n = {n}, staged = {staged}");
                let again = ctx.finish_download(&mut p, &mut out, None).expect_err("collected twice");
                assert!(again.to_string().contains("already collected"), "{again}");
                let wrong = ctx.finish_download(&mut ctx.start_download(&y).unwrap(), &mut vec![0u8; 4 * n + 1], None);
                assert!(wrong.is_err(), "a buffer of the wrong size is refused");
                // Dropped before it ran: its staging buffer stays with the stream until then;
                // the work behind it runs and reads back as usual.
                queue_some_work(ctx);
                drop(ctx.start_download(&y).unwrap());
                let z = ctx.unary(UnaryOp::Negate, &y, DType::F32).unwrap();
                let negated: Vec<f32> = want.iter().map(|v| -v).collect();
                assert_eq!(from_f32s(&ctx.download(&z).unwrap()), negated, "n = {n}, staged = {staged}");
            }
        }
        ctx.staged_transfers.store(false, Relaxed);
        // synchronize_within: one look says "not yet" behind queued work, and it never copies
        // or blocks; once everything ran, "done".
        queue_some_work(ctx);
        let soon = ctx.synchronize_within(Duration::ZERO).unwrap();
        ctx.synchronize().unwrap();
        assert!(ctx.synchronize_within(Duration::ZERO).unwrap());
        pending_seen += usize::from(!soon);
        assert!(pending_seen >= 4, "read-backs behind heavy work were seen unfinished {pending_seen} times");
        // Only small contiguous tensors: the large go through download_into's chunks.
        let big = ctx.iota(DType::F32, &[(1 << 18) + 1], None).unwrap();
        assert!(ctx.start_download(&big).is_err());
        let m = ctx.iota(DType::F32, &[2, 3], None).unwrap();
        let view = m.transpose(&[1, 0]).unwrap();
        assert!(!view.is_contiguous());
        assert!(ctx.start_download(&view).is_err());
    });
}

#[test]
fn uploads_while_the_stream_is_idle_reuse_their_buffers() {
    on_engine_alone(|ctx| {
        // Nothing queued: a buffer freed now is touched by no pending work, so the next upload
        // may write it from the host at once. (Stamped with the open recording's id, it waited
        // for a submission that never came: every upload made a new device allocation.)
        ctx.synchronize().unwrap();
        let before = ctx.pool.stats();
        for i in 0..500 {
            let t = ctx.upload(DType::F32, &[3], &f32s(&[i as f32, -0.0, f32::NAN])).unwrap();
            let back = from_f32s(&ctx.download(&t).unwrap());
            assert_eq!((back[0], back[1].to_bits(), back[2].is_nan()), (i as f32, (-0.0f32).to_bits(), true));
        }
        let after = ctx.pool.stats();
        assert!(
            after.device_allocations - before.device_allocations <= 1,
            "500 small uploads on an idle stream made {} device allocations",
            after.device_allocations - before.device_allocations
        );
        assert!(after.reuses - before.reuses >= 499, "{} reuses", after.reuses - before.reuses);
    });
}
