//! Compiled plans (plan.rs, the Defn compiler's back end): fused results equal the node-by-node
//! (eager) results bit for bit on many random graphs, a CPU reference checks a chain, and the
//! dispatch counts that fusion promises are asserted.
//!
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test --release -p nx_vulkan_engine --test plan

mod common;
use common::*;
use nx_vulkan_engine::elementwise::Scalar;
use nx_vulkan_engine::matmul::DotPrecision;
use nx_vulkan_engine::plan::*;
use nx_vulkan_engine::reduce::{ArgOp, ReduceOp, TieBreak};
use nx_vulkan_engine::*;

/// Builds graphs node by node.
#[derive(Default)]
struct G {
    g: Graph,
}

impl G {
    fn param(&mut self, t: DType, shape: &[usize]) -> usize {
        let p = self.g.params.len();
        self.g.params.push((t, shape.to_vec()));
        self.node(PlanOp::Parameter(p), &[], shape, t)
    }
    fn node(&mut self, op: PlanOp, args: &[usize], shape: &[usize], t: DType) -> usize {
        self.g.nodes.push(PlanNode { op, args: args.to_vec(), shape: shape.to_vec(), dtype: t });
        self.g.nodes.len() - 1
    }
    fn shape(&self, n: usize) -> Vec<usize> {
        self.g.nodes[n].shape.clone()
    }
    fn t(&self, n: usize) -> DType {
        self.g.nodes[n].dtype
    }
    fn un(&mut self, op: UnaryOp, a: usize) -> usize {
        let (s, t) = (self.shape(a), self.t(a));
        self.node(PlanOp::Unary(op), &[a], &s, t)
    }
    /// Binary with Nx's broadcast of the result shape; type `t`.
    fn bin_t(&mut self, op: BinaryOp, a: usize, b: usize, t: DType) -> usize {
        let s = ops::broadcast_shapes(&self.shape(a), &self.shape(b)).unwrap();
        self.node(PlanOp::Binary(op), &[a, b], &s, t)
    }
    fn bin(&mut self, op: BinaryOp, a: usize, b: usize) -> usize {
        let t = self.t(a);
        self.bin_t(op, a, b, t)
    }
    fn constant(&mut self, v: f64, t: DType) -> usize {
        let value = if t.is_float() { Scalar::F(v) } else { Scalar::I(v as i64) };
        self.node(PlanOp::Constant(value), &[], &[], t)
    }
    fn out(&mut self, n: usize) {
        self.g.outputs.push(n);
    }
}

/// Runs `g` as a plan and node by node; the dispatch count is only meaningful for tests that
/// run alone.
fn run_both(ctx: &Context, g: &Graph, inputs: &[Tensor]) -> (Vec<Vec<u64>>, Vec<Vec<u64>>, PlanSummary, u64) {
    run_both_with(ctx, g, inputs, PlanOptions::default())
}

/// `precision: :fast`: f32 dots and f32 elementwise math (FloatMath::Fast).
const FAST: PlanOptions = PlanOptions { dot: DotPrecision::TensorCore, math: FloatMath::Fast };

/// [`run_both`] under `options` (the unfused run under the same ones).
fn run_both_with(ctx: &Context, g: &Graph, inputs: &[Tensor], options: PlanOptions) -> (Vec<Vec<u64>>, Vec<Vec<u64>>, PlanSummary, u64) {
    let plan = Plan::new(g.clone(), options).expect("plan");
    let before = ctx.stats();
    let fused = plan.run(ctx, inputs).expect("run");
    let after = ctx.stats();
    let unfused = g.eval_unfused_with(ctx, inputs, options).expect("unfused");
    let bits = |ts: &[Tensor]| ts.iter().map(|t| download(ctx, t)).collect::<Vec<_>>();
    (bits(&fused), bits(&unfused), plan.summary(), after.dispatches - before.dispatches)
}

fn values(t: DType, n: usize, rng: &mut Rng) -> Vec<u64> {
    let mut v = random_values(t, n, rng);
    let sp = specials(t);
    for (i, s) in sp.iter().enumerate() {
        if i * 7 < n && rng.below(2) == 0 {
            v[i * 7] = *s;
        }
    }
    v
}

#[test]
fn ten_op_chain_is_one_dispatch_and_matches_a_cpu_reference() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(7);
        for t in [F32, F64, F16, BF16] {
            let n = 1001;
            let mut b = G::default();
            let x = b.param(t, &[n]);
            let y = b.param(t, &[n]);
            let two = b.constant(2.0, t);
            let mut v = b.bin(BinaryOp::Multiply, x, two);
            v = b.bin(BinaryOp::Add, v, y);
            v = b.un(UnaryOp::Sqrt, v);
            v = b.bin(BinaryOp::Subtract, v, x);
            v = b.un(UnaryOp::Abs, v);
            v = b.bin(BinaryOp::Max, v, y);
            v = b.un(UnaryOp::Floor, v);
            v = b.bin(BinaryOp::Divide, v, two);
            v = b.un(UnaryOp::Negate, v);
            v = b.bin(BinaryOp::Min, v, x);
            b.out(v);
            let (xb, yb) = (values(t, n, &mut rng), values(t, n, &mut rng));
            let ins = [upload(ctx, t, &[n], &xb), upload(ctx, t, &[n], &yb)];
            // under :fast too: one dispatch, fused == unfused (the CPU reference below is :exact's)
            let (fast, fast_unfused, fast_summary, fast_dispatches) = run_both_with(ctx, &b.g, &ins, FAST);
            assert_eq!((fast_dispatches, fast_summary.fused_kernels), (1, 1), "{t}: a 10-op chain under :fast is one dispatch");
            assert_eq!(fast, fast_unfused, "{t}: fused == unfused under :fast");
            // (recordings counted around the run itself: read-backs record copies on GPUs)
            let plan = Plan::new(b.g.clone(), PlanOptions::default()).expect("plan");
            let before_recordings = ctx.stats().recordings;
            plan.run(ctx, &ins).expect("run");
            assert_eq!(ctx.stats().recordings - before_recordings, 1, "{t}: the plan is one recording");
            let (fused, unfused, summary, dispatches) = run_both(ctx, &b.g, &ins);
            assert_eq!(dispatches, 1, "{t}: a 10-op chain is one dispatch");
            assert_eq!(summary.fused_kernels, 1);
            assert_eq!(summary.inlined_nodes, 10, "{t}: every op but the output inlined (constant included)");
            assert_eq!(fused, unfused, "{t}: fused == unfused");
            // CPU reference, node by node with rounding to t at each step
            let mut f = Failures::default();
            for i in 0..n {
                let (xv, yv) = (read(t, xb[i]), read(t, yb[i]));
                let r = |v: N| read(t, write(t, v));
                let two = r(N::F(2.0));
                let mut v = r(ref_binary(BinaryOp::Multiply, xv, two));
                v = r(ref_binary(BinaryOp::Add, v, yv));
                v = r(ref_unary(UnaryOp::Sqrt, t, v));
                v = r(ref_binary(BinaryOp::Subtract, v, xv));
                v = r(ref_unary(UnaryOp::Abs, t, v));
                v = r(ref_binary(BinaryOp::Max, v, yv));
                v = r(ref_unary(UnaryOp::Floor, t, v));
                v = r(ref_binary(BinaryOp::Divide, v, two));
                v = r(ref_unary(UnaryOp::Negate, t, v));
                v = r(ref_binary(BinaryOp::Min, v, xv));
                f.check(|| format!("{t} chain at {i}: x={} y={}", show(t, xb[i]), show(t, yb[i])), fused[0][i], write(t, v));
            }
            f.finish("ten-op chain");
        }
    });
}

#[test]
fn broadcasts_transposes_and_multiple_outputs_share_one_kernel() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(11);
        let t = F32;
        let mut b = G::default();
        let x = b.param(t, &[37, 5]);
        let y = b.param(t, &[5, 37]);
        let bias = b.param(t, &[5]);
        let yt = b.node(PlanOp::Transpose(vec![1, 0]), &[y], &[37, 5], t);
        let s = b.bin(BinaryOp::Add, x, yt); // transposed view read in place
        let s = b.bin(BinaryOp::Multiply, s, bias); // implicit broadcast of [5]
        let e = b.un(UnaryOp::Exp, s); // shared by both outputs
        let o1 = b.bin(BinaryOp::Add, e, x);
        let o2 = b.bin(BinaryOp::Subtract, e, o1); // reads output o1 of the same kernel
        let cmp = b.bin_t(BinaryOp::Greater, o2, x, U8);
        let zero = b.constant(0.0, t);
        let o3 = b.node(PlanOp::Select, &[cmp, o2, zero], &[37, 5], t);
        b.out(o1);
        b.out(o2);
        b.out(o3);
        let ins = [
            upload(ctx, t, &[37, 5], &values(t, 185, &mut rng)),
            upload(ctx, t, &[5, 37], &values(t, 185, &mut rng)),
            upload(ctx, t, &[5], &values(t, 5, &mut rng)),
        ];
        let (fused, unfused, summary, dispatches) = run_both(ctx, &b.g, &ins);
        assert_eq!((dispatches, summary.fused_kernels), (1, 1), "three outputs, one kernel");
        assert_eq!(fused, unfused);
    });
}

#[test]
fn reductions_and_dots_are_boundaries_between_fused_regions() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(5);
        let t = F32;
        // softmax over the last axis, then a dot with a weight and a bias + relu epilogue
        let mut b = G::default();
        let x = b.param(t, &[33, 70]);
        let w = b.param(t, &[70, 9]);
        let bias = b.param(t, &[9]);
        let (_, e, s) = max_exp_sum(&mut b, x);
        let sm = b.bin(BinaryOp::Divide, e, s);
        let dot = b.node(
            PlanOp::Dot { contract_a: vec![1], batch_a: vec![], contract_b: vec![0], batch_b: vec![] },
            &[sm, w],
            &[33, 9],
            t,
        );
        let z = b.bin(BinaryOp::Add, dot, bias);
        let zero = b.constant(0.0, t);
        let relu = b.bin(BinaryOp::Max, z, zero);
        let am = b.node(PlanOp::ArgReduce { op: ArgOp::ArgMax, axis: Some(1), tie_break: TieBreak::Low }, &[relu], &[33], S64);
        b.out(relu);
        b.out(am);
        let ins = [
            upload(ctx, t, &[33, 70], &values(t, 33 * 70, &mut rng)),
            upload(ctx, t, &[70, 9], &random_values(t, 630, &mut rng)),
            upload(ctx, t, &[9], &random_values(t, 9, &mut rng)),
        ];
        let (fused, unfused, summary, _) = run_both(ctx, &b.g, &ins);
        assert_eq!(fused, unfused);
        // max; sum with exp(x - m) as prologue and e / s as epilogue; the dot; bias + relu (the
        // one generated elementwise kernel); argmax
        assert_eq!((summary.fused_kernels, summary.fused_prologues, summary.fused_epilogues), (1, 1, 1), "{summary:?}");
    });
}

/// Steps that read nothing the steps since the last barrier wrote skip the barrier (they may
/// overlap on the device), and the results are still the node-by-node ones: two products of
/// one input and a reduction of it run side by side; a chain where every step reads the one
/// before keeps every barrier. (Lavapipe runs commands in order anyway: the bits check has
/// teeth on a GPU that overlaps them, such as the H200.)
#[test]
fn independent_steps_skip_barriers() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(23);
        let t = F32;
        let dot = PlanOp::Dot { contract_a: vec![1], batch_a: vec![], contract_b: vec![0], batch_b: vec![] };
        // branches: d1 = x·w1, d2 = x·w2, r = sum(x, axis 1); out = d1 + d2 + r
        let mut b = G::default();
        let x = b.param(t, &[64, 200]);
        let w1 = b.param(t, &[200, 40]);
        let w2 = b.param(t, &[200, 40]);
        let d1 = b.node(dot.clone(), &[x, w1], &[64, 40], t);
        let d2 = b.node(dot.clone(), &[x, w2], &[64, 40], t);
        let r = b.node(PlanOp::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[x], &[64, 1], t);
        let sum = b.bin(BinaryOp::Add, d1, d2);
        let out = b.bin(BinaryOp::Add, sum, r);
        b.out(out);
        let ins = [
            upload(ctx, t, &[64, 200], &values(t, 64 * 200, &mut rng)),
            upload(ctx, t, &[200, 40], &random_values(t, 8000, &mut rng)),
            upload(ctx, t, &[200, 40], &random_values(t, 8000, &mut rng)),
        ];
        // chain: the product of x and w1, its row sums, their product with w3
        let mut c = G::default();
        let cx = c.param(t, &[64, 200]);
        let cw1 = c.param(t, &[200, 40]);
        let cw3 = c.param(t, &[1, 40]);
        let cd = c.node(dot.clone(), &[cx, cw1], &[64, 40], t);
        let cr = c.node(PlanOp::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[cd], &[64, 1], t);
        let ce = c.node(dot.clone(), &[cr, cw3], &[64, 40], t);
        c.out(ce);
        let cins = [ins[0].clone(), ins[1].clone(), upload(ctx, t, &[1, 40], &random_values(t, 40, &mut rng))];
        for options in [PlanOptions::default(), FAST] {
            let before = ctx.stats().concurrent_dispatches;
            let (fused, unfused, _, _) = run_both_with(ctx, &b.g, &ins, options);
            let branches = ctx.stats().concurrent_dispatches - before;
            assert_eq!(fused, unfused, "{options:?}");
            // the second product and the reduction start without a barrier
            assert!(branches >= 2, "{options:?}: {branches} concurrent dispatches");
            let before = ctx.stats().concurrent_dispatches;
            let plan = Plan::new(c.g.clone(), options).unwrap();
            let chained = plan.run(ctx, &cins).unwrap();
            assert_eq!(ctx.stats().concurrent_dispatches - before, 0, "{options:?}: a chain keeps its barriers");
            let want = c.g.eval_unfused_with(ctx, &cins, options).unwrap();
            assert_eq!(download(ctx, &chained[0]), download(ctx, &want[0]), "{options:?}");
        }
    });
}

/// The row maximum `m` of a `[rows, cols]` node `x`, `e = exp(x - m)` and its row sum `s`
/// (softmax is `e / s`, logsumexp `log(s) + m`).
fn max_exp_sum(b: &mut G, x: usize) -> (usize, usize, usize) {
    let (t, rows) = (b.t(x), b.shape(x)[0]);
    let m = b.node(PlanOp::Reduce { op: ReduceOp::Max, axes: vec![1] }, &[x], &[rows, 1], t);
    let d = b.bin(BinaryOp::Subtract, x, m);
    let e = b.un(UnaryOp::Exp, d);
    let s = b.node(PlanOp::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[e], &[rows, 1], t);
    (m, e, s)
}

/// Softmax over the last axis of a `[rows, cols]` tensor: max, then exp(x - max) / sum.
fn softmax_graph(t: DType, rows: usize, cols: usize) -> G {
    let mut b = G::default();
    let x = b.param(t, &[rows, cols]);
    let (_, e, s) = max_exp_sum(&mut b, x);
    let sm = b.bin(BinaryOp::Divide, e, s);
    b.out(sm);
    b
}

/// Layernorm over the last axis of `[rows, cols]` (parameters x, g, bias):
/// mean = sum / n; var = sum((x - mean)^2) / n; (x - mean) * rsqrt(var + eps) * g + bias.
fn layernorm_graph(t: DType, rows: usize, cols: usize) -> G {
    let mut b = G::default();
    let x = b.param(t, &[rows, cols]);
    let g = b.param(t, &[cols]);
    let bias = b.param(t, &[cols]);
    let n = b.constant(cols as f64, t);
    let sum = b.node(PlanOp::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[x], &[rows, 1], t);
    let mean = b.bin(BinaryOp::Divide, sum, n);
    let dx = b.bin(BinaryOp::Subtract, x, mean);
    let sq = b.bin(BinaryOp::Multiply, dx, dx);
    let ss = b.node(PlanOp::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[sq], &[rows, 1], t);
    let var = b.bin(BinaryOp::Divide, ss, n);
    let eps = b.constant(1e-5, t);
    let ve = b.bin(BinaryOp::Add, var, eps);
    let rs = b.un(UnaryOp::Rsqrt, ve);
    let y = b.bin(BinaryOp::Multiply, dx, rs);
    let y = b.bin(BinaryOp::Multiply, y, g);
    let y = b.bin(BinaryOp::Add, y, bias);
    b.out(y);
    b
}

/// A row reduction moved into the next kernel (`RowReduction`) is computed there, never read
/// from its tensor: before each fused run, buffers of its size filled with a NaN sentinel go
/// back to the pool (so the plan's fresh tensor is likely one of them), and logsumexp — whose
/// finish reads the max at the kept positions beside the prologue's broadcast view — softmax
/// and layernorm still equal node-by-node evaluation bit for bit, the row reduction also
/// returned as an output. A parameter bound as a view constant along the rows makes the row
/// reduction its own kernel again (it cannot be folded from that view), with the same results.
#[test]
fn row_reductions_are_computed_not_read() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(23);
        let (rows, cols) = (48, 700);
        // finite rows (a NaN anywhere in a row makes its results NaN whatever the max was)
        let finite = |n: usize, rng: &mut Rng| (0..n).map(|_| write(F32, N::F(rng.range(-4000, 4000) as f64 / 1000.0))).collect::<Vec<_>>();
        let x_in = [upload(ctx, F32, &[rows, cols], &finite(rows * cols, &mut rng))];
        let mut graphs = vec![("softmax", softmax_graph(F32, rows, cols)), ("layernorm", layernorm_graph(F32, rows, cols))];
        let mut b = G::default();
        let x = b.param(F32, &[rows, cols]);
        let (m, _, s) = max_exp_sum(&mut b, x);
        let l = b.un(UnaryOp::Log, s);
        let lse = b.bin(BinaryOp::Add, l, m);
        b.out(lse);
        b.out(m);
        graphs.push(("logsumexp + max", b));
        for (name, b) in &graphs {
            let ins = if *name == "layernorm" {
                vec![x_in[0].clone(), upload(ctx, F32, &[cols], &finite(cols, &mut rng)), upload(ctx, F32, &[cols], &finite(cols, &mut rng))]
            } else {
                x_in.to_vec()
            };
            for options in [PlanOptions::default(), FAST] {
                let plan = Plan::new(b.g.clone(), options).unwrap();
                assert_eq!(plan.summary().fused_row_reductions, 1, "{name}");
                for _ in 0..3 {
                    let junk: Vec<Tensor> = (0..4).map(|_| ctx.full(Scalar::F(f64::NAN), F32, &[rows, 1]).unwrap()).collect();
                    ctx.synchronize().unwrap();
                    drop(junk);
                    ctx.synchronize().unwrap();
                    let fused = plan.run(ctx, &ins).unwrap();
                    let unfused = b.g.eval_unfused_with(ctx, &ins, options).unwrap();
                    for (f, u) in fused.iter().zip(&unfused) {
                        let (f, u) = (download(ctx, f), download(ctx, u));
                        assert!(u.iter().all(|&v| read(F32, v).f().is_finite()), "{name}: finite results expected");
                        assert_eq!(f, u, "{name} {options:?}");
                    }
                }
            }
        }
        // x bound as a view constant along the rows (a column broadcast): the row reduction
        // cannot be folded from it in the next kernel, so it runs first, as its own kernel
        let col = upload(ctx, F32, &[rows, 1], &finite(rows, &mut rng)).broadcast_to(&[rows, cols]).unwrap();
        let b = &graphs[0].1;
        let plan = Plan::new(b.g.clone(), PlanOptions::default()).unwrap();
        let before = ctx.stats().dispatches;
        let fused = plan.run(ctx, std::slice::from_ref(&col)).unwrap();
        assert_eq!(ctx.stats().dispatches - before, 2, "softmax of a broadcast column");
        let unfused = b.g.eval_unfused_with(ctx, std::slice::from_ref(&col), PlanOptions::default()).unwrap();
        assert_eq!(download(ctx, &fused[0]), download(ctx, &unfused[0]), "softmax of a broadcast column");
    });
}

/// Softmax and layernorm over the last axis: two dispatches each (a reduction, then a
/// reduction with its prologue and the normalised output as its epilogue), same bits as
/// node by node — one where the first (softmax's and logsumexp's f32 max, layernorm's f32
/// sum) runs in the second's kernel (rows read whole: `reduce::row_reduction_fits`).
#[test]
fn softmax_layernorm_logsumexp_mean_are_two_dispatches() {
    on_engine_alone(|ctx| {
        let mut rng = Rng(17);
        for (rows, cols) in [(64, 1000), (3, 7), (300, 129)] {
            for t in [F32, F16] {
                // an f32 max or sum over rows read whole runs in the next reduction's kernel
                // (`RowReduction`)
                let in_kernel = t == F32 && reduce::row_reduction_fits(&[rows, cols], &[1], t).unwrap();
                let (kernels, row_reductions) = if in_kernel { (1, 1) } else { (2, 0) };
                assert!(in_kernel || (rows, cols, t) != (64, 1000, F32), "64 rows of 1000 f32 are read whole");
                let b = softmax_graph(t, rows, cols);
                let ins = [upload(ctx, t, &[rows, cols], &values(t, rows * cols, &mut rng))];
                let (fast, fast_unfused, fast_summary, fast_dispatches) = run_both_with(ctx, &b.g, &ins, FAST);
                assert_eq!(fast, fast_unfused, "softmax {t} {rows}x{cols} under :fast");
                assert_eq!((fast_dispatches, fast_summary.fused_kernels, fast_summary.fused_row_reductions), (kernels, 0, row_reductions), "softmax {t} {rows}x{cols} under :fast");
                let (fused, unfused, summary, dispatches) = run_both(ctx, &b.g, &ins);
                assert_eq!(fused, unfused, "softmax {t} {rows}x{cols}");
                assert_eq!((dispatches, summary.fused_kernels, summary.fused_row_reductions), (kernels, 0, row_reductions), "softmax {t} {rows}x{cols}: {summary:?}");

                let b = layernorm_graph(t, rows, cols);
                let ins = [
                    upload(ctx, t, &[rows, cols], &random_values(t, rows * cols, &mut rng)),
                    upload(ctx, t, &[cols], &random_values(t, cols, &mut rng)),
                    upload(ctx, t, &[cols], &random_values(t, cols, &mut rng)),
                ];
                let (fast, fast_unfused, fast_summary, fast_dispatches) = run_both_with(ctx, &b.g, &ins, FAST);
                assert_eq!(fast, fast_unfused, "layernorm {t} {rows}x{cols} under :fast");
                assert_eq!((fast_dispatches, fast_summary.fused_epilogues, fast_summary.fused_row_reductions), (kernels, 1, row_reductions), "layernorm {t} {rows}x{cols} under :fast");
                let (fused, unfused, summary, dispatches) = run_both(ctx, &b.g, &ins);
                assert_eq!(fused, unfused, "layernorm {t} {rows}x{cols}");
                assert_eq!((dispatches, summary.fused_epilogues, summary.fused_row_reductions), (kernels, 1, row_reductions), "layernorm {t} {rows}x{cols}: {summary:?}");

                // logsumexp (keep form): log(sum(exp(x - m))) + m, the sum finished in its kernel
                let mut b = G::default();
                let x = b.param(t, &[rows, cols]);
                let (m, _, s) = max_exp_sum(&mut b, x);
                let l = b.un(UnaryOp::Log, s);
                let lse = b.bin(BinaryOp::Add, l, m);
                b.out(lse);
                let ins = [upload(ctx, t, &[rows, cols], &values(t, rows * cols, &mut rng))];
                let (fast, fast_unfused, _, fast_dispatches) = run_both_with(ctx, &b.g, &ins, FAST);
                assert_eq!((fast, fast_dispatches), (fast_unfused, kernels), "logsumexp {t} {rows}x{cols} under :fast");
                let (fused, unfused, summary, dispatches) = run_both(ctx, &b.g, &ins);
                assert_eq!(fused, unfused, "logsumexp {t} {rows}x{cols}");
                assert_eq!((dispatches, summary.fused_kernels, summary.fused_row_reductions), (kernels, 0, row_reductions), "logsumexp {t} {rows}x{cols}: {summary:?}");

                // mean without kept axes (finish) and the centred values (an epilogue reading it)
                let mut b = G::default();
                let x = b.param(t, &[rows, cols]);
                let n = b.constant(cols as f64, t);
                let sum = b.node(PlanOp::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[x], &[rows], t);
                let mean = b.bin(BinaryOp::Divide, sum, n);
                let mb = b.node(PlanOp::Broadcast(vec![0]), &[mean], &[rows, cols], t);
                let centred = b.bin(BinaryOp::Subtract, x, mb);
                b.out(mean);
                b.out(centred);
                let ins = [upload(ctx, t, &[rows, cols], &random_values(t, rows * cols, &mut rng))];
                let (fused, unfused, summary, dispatches) = run_both(ctx, &b.g, &ins);
                assert_eq!(fused, unfused, "mean {t} {rows}x{cols}");
                assert_eq!((dispatches, summary.fused_kernels), (2, 1), "mean {t} {rows}x{cols}: {summary:?}");
            }
        }
    });
}

/// Random graphs: elementwise ops of every arity over broadcast and transposed inputs,
/// constants, iota, converts, comparisons and selects, reductions and dots between regions,
/// several outputs and shared subexpressions. Fused == unfused, bit for bit.
#[test]
fn random_graphs_fused_equal_unfused() {
    let cases: u64 = std::env::var("NX_VULKAN_PLAN_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    on_engine(move |ctx| {
        let mut total_kernels = 0;
        let mut total_unfused = 0;
        // NX_VULKAN_PLAN_FIRST_CASE skips to a case (to rerun one that failed);
        // NX_VULKAN_PLAN_SHOW prints each case's graph
        let first: u64 = std::env::var("NX_VULKAN_PLAN_FIRST_CASE").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
        for case in first..cases {
            eprintln!("case {case}");
            let mut rng = Rng(1000 + case);
            let t = [F32, F64, F16, BF16, S32][rng.below(5) as usize];
            let float = t.is_float();
            let (r, c) = (1 + rng.below(40) as usize, 1 + rng.below(40) as usize);
            let mut b = G::default();
            let mut pool = vec![b.param(t, &[r, c]), b.param(t, &[r, c])];
            pool.push(b.param(t, &[c])); // a row broadcast
            pool.push(b.param(t, &[r, 1])); // a column broadcast
            let yt = b.param(t, &[c, r]);
            pool.push(b.node(PlanOp::Transpose(vec![1, 0]), &[yt], &[r, c], t));
            let n_ops = 4 + rng.below(20) as usize;
            let mut last = pool[0];
            for _ in 0..n_ops {
                let pick = |rng: &mut Rng, pool: &[usize]| pool[rng.below(pool.len() as u64) as usize];
                let a = if rng.below(2) == 0 { last } else { pick(&mut rng, &pool) };
                let other = pick(&mut rng, &pool);
                let node = match rng.below(12) {
                    0..=3 => {
                        let ops: &[BinaryOp] = if float {
                            &[BinaryOp::Add, BinaryOp::Subtract, BinaryOp::Multiply, BinaryOp::Divide, BinaryOp::Max, BinaryOp::Min, BinaryOp::Pow, BinaryOp::Atan2]
                        } else {
                            &[BinaryOp::Add, BinaryOp::Subtract, BinaryOp::Multiply, BinaryOp::Max, BinaryOp::BitwiseXor, BinaryOp::Quotient]
                        };
                        let op = ops[rng.below(ops.len() as u64) as usize];
                        b.bin(op, a, other)
                    }
                    4 | 5 => {
                        let ops: &[UnaryOp] = if float {
                            &[UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sin, UnaryOp::Tanh, UnaryOp::Sqrt, UnaryOp::Abs, UnaryOp::Negate, UnaryOp::Sigmoid, UnaryOp::Floor]
                        } else {
                            &[UnaryOp::Abs, UnaryOp::Negate, UnaryOp::BitwiseNot, UnaryOp::Sign]
                        };
                        b.un(ops[rng.below(ops.len() as u64) as usize], a)
                    }
                    6 => {
                        let k = b.constant([0.5, -3.0, 7.0][rng.below(3) as usize], t);
                        b.bin(BinaryOp::Multiply, a, k)
                    }
                    7 => {
                        let cmp = b.bin_t(BinaryOp::Less, a, other, U8);
                        let s = ops::broadcast_shapes(&b.shape(a), &b.shape(other)).unwrap();
                        b.node(PlanOp::Select, &[cmp, other, a], &s, t)
                    }
                    8 => {
                        // a round trip through another type
                        let mid = if t == F64 { F32 } else { F64 };
                        let s = b.shape(a);
                        let cv = b.node(PlanOp::Convert, &[a], &s, mid);
                        b.node(PlanOp::Convert, &[cv], &s, t)
                    }
                    9 => {
                        // a reduction over the last axis, broadcast back by the next op
                        let s = b.shape(a);
                        let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min][rng.below(3) as usize];
                        let keep: Vec<usize> = s.iter().enumerate().map(|(d, &x)| if d + 1 == s.len() { 1 } else { x }).collect();
                        let red = b.node(PlanOp::Reduce { op, axes: vec![s.len() - 1] }, &[a], &keep, t);
                        if rng.below(2) == 0 {
                            // a stored function of the reduction: its finish
                            let f = b.un(if float { UnaryOp::Abs } else { UnaryOp::Negate }, red);
                            b.out(f);
                            b.bin(BinaryOp::Subtract, a, f)
                        } else {
                            b.bin(BinaryOp::Subtract, a, red)
                        }
                    }
                    10 => {
                        let s = b.shape(a);
                        let io = b.node(PlanOp::Iota(Some(s.len() - 1)), &[], &s, t);
                        b.bin(BinaryOp::Add, a, io)
                    }
                    _ => {
                        // [r, c] x [c, c] dot where shapes allow, else a transpose round trip
                        let s = b.shape(a);
                        if float {
                            // [r, k] x [k, c] with k = min(r, c), from full-shape nodes
                            let k = r.min(c);
                            let w = b.node(PlanOp::Slice { start: vec![0, 0], steps: vec![1, 1] }, &[pool[1]], &[k, c], t);
                            let sa = b.node(PlanOp::Slice { start: vec![0, 0], steps: vec![1, 1] }, &[last], &[r, k], t);
                            let d = b.node(
                                PlanOp::Dot { contract_a: vec![1], batch_a: vec![], contract_b: vec![0], batch_b: vec![] },
                                &[sa, w],
                                &[r, c],
                                t,
                            );
                            b.bin(BinaryOp::Add, d, last)
                        } else {
                            // a 2-d node (`a` may be the [c] row broadcast: then the chain's last)
                            let (a, s) = if s.len() == 2 { (a, s) } else { (last, vec![r, c]) };
                            let tr = b.node(PlanOp::Transpose(vec![1, 0]), &[a], &[s[1], s[0]], t);
                            b.node(PlanOp::Transpose(vec![1, 0]), &[tr], &s, t)
                        }
                    }
                };
                if b.shape(node) == vec![r, c] {
                    pool.push(node);
                    last = node;
                }
            }
            // one to three outputs, the last node always among them
            b.out(last);
            for _ in 0..rng.below(3) {
                let o = pool[rng.below(pool.len() as u64) as usize];
                if !b.g.outputs.contains(&o) {
                    b.out(o);
                }
            }
            if std::env::var_os("NX_VULKAN_PLAN_SHOW").is_some() {
                // the case's graph, node by node (to study one that fails on a device)
                for (i, n) in b.g.nodes.iter().enumerate() {
                    eprintln!("  {i}: {:?} {:?} {:?} {}", n.op, n.args, n.shape, n.dtype);
                }
                eprintln!("  outputs {:?}", b.g.outputs);
            }
            let ins: Vec<Tensor> = b.g.params.clone().iter().map(|(t, s)| upload(ctx, *t, s, &values(*t, s.iter().product(), &mut rng))).collect();
            let (fused, unfused, summary, _) = run_both(ctx, &b.g, &ins);
            for (k, (f, u)) in fused.iter().zip(&unfused).enumerate() {
                let mut fails = Failures::default();
                for i in 0..f.len() {
                    fails.check(|| format!("case {case} ({t}, {r}x{c}) output {k} at {i}"), f[i], u[i]);
                }
                fails.finish("fused vs unfused");
            }
            if case % 2 == 0 {
                // and under :fast (every other case: its kernels are new ones to build)
                let (fused, unfused, _, _) = run_both_with(ctx, &b.g, &ins, FAST);
                for (k, (f, u)) in fused.iter().zip(&unfused).enumerate() {
                    let mut fails = Failures::default();
                    for i in 0..f.len() {
                        fails.check(|| format!("case {case} ({t}, {r}x{c}) output {k} at {i} under :fast"), f[i], u[i]);
                    }
                    fails.finish("fused vs unfused under :fast");
                }
            }
            total_kernels += summary.fused_kernels;
            total_unfused += b.g.nodes.iter().filter(|n| !matches!(n.op, PlanOp::Parameter(_) | PlanOp::Transpose(_) | PlanOp::Slice { .. })).count();
        }
        assert!(total_kernels * 2 < total_unfused, "fusion should remove most kernels: {total_kernels} of {total_unfused}");
    });
}

/// An elementwise node of the reduced shape that reads an iota is not taken as the reduction's
/// finish (a finish runs once per output, without an element index: random-graph case 330
/// failed with "fused reduction finish reads an iota"); it runs as a kernel of its own and the
/// values are the CPU's: each row's max plus its column index.
#[test]
fn a_finish_reading_an_iota_stays_a_kernel() {
    on_engine(|ctx| {
        let (r, c) = (5, 3);
        for keep in [1usize, 2] {
            // keep = 1: reduced shape [r, 1] (iota along the kept axis 1 is all zeros); 2: over [r, 2]
            let mut b = G::default();
            let x = b.param(F32, &[r, c * keep]);
            let shape = if keep == 1 { vec![r, 1] } else { vec![r, 2] };
            let xs = if keep == 1 { x } else { b.node(PlanOp::Reshape, &[x], &[r, 2, c], F32) };
            let axes = if keep == 1 { vec![1] } else { vec![2] };
            let red = b.node(PlanOp::Reduce { op: ReduceOp::Max, axes }, &[xs], &shape, F32);
            let io = b.node(PlanOp::Iota(Some(1)), &[], &shape, F32);
            let f = b.bin(BinaryOp::Add, red, io);
            b.out(f);
            let host: Vec<f32> = (0..r * c * keep).map(|i| ((i * 37) % 11) as f32 - 4.5).collect();
            let input = upload(ctx, F32, &[r, c * keep], &host.iter().map(|v| v.to_bits() as u64).collect::<Vec<_>>());
            let (fused, unfused, _, _) = run_both(ctx, &b.g, &[input]);
            assert_eq!(fused, unfused);
            let want: Vec<u64> = (0..r * keep)
                .map(|o| {
                    let row = &host[o * c..(o + 1) * c];
                    (row.iter().copied().fold(f32::NEG_INFINITY, f32::max) + (o % keep) as f32).to_bits() as u64
                })
                .collect();
            assert_eq!(fused[0], want, "keep {keep}");
        }
    });
}

/// Under `:fast`, negating and taking abs of subnormal products keeps them, fused and unfused,
/// as the CPU does. On the H200 (which does not preserve f32 subnormals in float instructions)
/// the fused `negate(multiply(a, b))` flushed them once (random-graph case 168), because the
/// shader compiler turned the library's sign-bit flip into a float negate.
#[test]
fn fast_negate_and_abs_keep_subnormal_products() {
    on_engine(|ctx| {
        let a: [f32; 8] = [1e-45, -1e-45, 140.5, -6503.9, 5.618905e-38, 4.199925e-29, -1.1208392e-5, 3.0];
        let b: [f32; 8] = [49.5, 119.5, 1e-45, -1e-45, 0.1, 3.4429043e-11, 3.8720674e-38, -2.0];
        let n = a.len();
        let mut g = G::default();
        let pa = g.param(F32, &[n]);
        let pb = g.param(F32, &[n]);
        let prod = g.bin(BinaryOp::Multiply, pa, pb);
        let neg = g.un(UnaryOp::Negate, prod);
        let abs = g.un(UnaryOp::Abs, neg);
        g.out(neg);
        g.out(abs);
        let up = |v: &[f32]| upload(ctx, F32, &[n], &v.iter().map(|x| x.to_bits() as u64).collect::<Vec<_>>());
        let (fused, unfused, _, _) = run_both_with(ctx, &g.g, &[up(&a), up(&b)], FAST);
        assert_eq!(fused, unfused);
        let want_neg: Vec<u64> = (0..n).map(|i| (-(a[i] * b[i])).to_bits() as u64).collect();
        let want_abs: Vec<u64> = (0..n).map(|i| (a[i] * b[i]).abs().to_bits() as u64).collect();
        assert!(want_neg.iter().filter(|&&w| (w as u32 & 0x7F80_0000) == 0 && (w as u32 & 0x7F_FFFF) != 0).count() >= 6, "the products are subnormal");
        assert_eq!(fused[0], want_neg);
        assert_eq!(fused[1], want_abs);
    });
}

#[test]
fn bad_graphs_and_inputs_are_errors() {
    on_engine(|ctx| {
        let bad = |nodes: Vec<PlanNode>, params: Vec<(DType, Vec<usize>)>| {
            let g = Graph { params, nodes, outputs: vec![0] };
            Plan::new(g, PlanOptions::default()).map(|_| ()).unwrap_err().to_string()
        };
        let node = |op, args: &[usize], shape: &[usize]| PlanNode { op, args: args.to_vec(), shape: shape.to_vec(), dtype: F32 };
        assert!(bad(vec![node(PlanOp::Unary(UnaryOp::Exp), &[0], &[2])], vec![]).contains("after their arguments"));
        assert!(bad(vec![node(PlanOp::Parameter(0), &[], &[2])], vec![]).contains("parameter 0 of 0"));
        assert!(bad(vec![node(PlanOp::Parameter(0), &[], &[2])], vec![(F32, vec![3])]).contains("parameter 0 is f32[3]"));
        let two = vec![node(PlanOp::Parameter(0), &[], &[2]), node(PlanOp::Binary(BinaryOp::Add), &[0], &[2])];
        assert!(bad(two, vec![(F32, vec![2])]).contains("takes 2 arguments"));
        let bc = vec![node(PlanOp::Parameter(0), &[], &[3]), node(PlanOp::Unary(UnaryOp::Exp), &[0], &[2])];
        assert!(bad(bc, vec![(F32, vec![3])]).contains("cannot broadcast"));
        assert!(bad(vec![node(PlanOp::Iota(None), &[], &[usize::MAX, 4])], vec![]).contains("elements"));

        let mut b = G::default();
        let x = b.param(F32, &[4]);
        let e = b.un(UnaryOp::Exp, x);
        b.out(e);
        let plan = Plan::new(b.g, PlanOptions::default()).unwrap();
        let wrong = ctx.upload(F32, &[5], &[0u8; 20]).unwrap();
        assert!(plan.run(ctx, &[wrong]).unwrap_err().to_string().contains("compiled for f32[4]"));
        assert!(plan.run(ctx, &[]).unwrap_err().to_string().contains("takes 1 inputs"));
        // a node whose stated shape the op does not produce
        let mut b = G::default();
        let x = b.param(F32, &[4, 3]);
        let s = b.node(PlanOp::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[x], &[3], F32);
        b.out(s);
        let e = Plan::new(b.g, PlanOptions::default()).unwrap_err().to_string();
        assert!(e.contains("graph node 1") && e.contains("gives [4]"), "{e}");
    });
}

/// Host time of recording a plan (not a test of correctness): `cargo test --release --test plan
/// host_time -- --ignored --nocapture`.
#[test]
#[ignore]
fn host_time_of_runs() {
    on_engine_alone(|ctx| {
        let t = F32;
        let (rows, cols) = (64, 128);
        let plan = Plan::new(softmax_graph(t, rows, cols).g, PlanOptions::default()).unwrap();
        let xin = ctx.upload(t, &[rows, cols], &vec![0u8; rows * cols * 4]).unwrap();
        for _ in 0..5 {
            plan.run(ctx, std::slice::from_ref(&xin)).unwrap();
        }
        ctx.synchronize().unwrap();
        let n = 200;
        let t0 = std::time::Instant::now();
        for _ in 0..n {
            plan.run(ctx, std::slice::from_ref(&xin)).unwrap();
        }
        let host = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
        ctx.synchronize().unwrap();
        let t1 = std::time::Instant::now();
        for _ in 0..n {
            let m = ctx.reduce(ReduceOp::Max, &xin, &[1], true, t).unwrap();
            let d = ctx.binary(BinaryOp::Subtract, &xin, &m, t).unwrap();
            let e = ctx.unary(UnaryOp::Exp, &d, t).unwrap();
            let s = ctx.reduce(ReduceOp::Sum, &e, &[1], true, t).unwrap();
            ctx.binary(BinaryOp::Divide, &e, &s, t).unwrap();
        }
        let eager = t1.elapsed().as_secs_f64() * 1e6 / n as f64;
        ctx.synchronize().unwrap();
        eprintln!("softmax {rows}x{cols}: plan.run {host:.1} us host, eager 5 ops {eager:.1} us host");
    });
}

/// Device time per kernel of compiled softmax and layernorm over 4096 × 1024 f32 (the Defn
/// compiler bench's shapes) under `:exact` and `:fast`, with narrow short-row workgroups and
/// without (`Context::narrow_rows`), and wall time per run with 20 runs queued (best of three
/// rounds, interleaved): where the row kernels' time goes, from Rust.
/// Run on a GPU with `--ignored --nocapture`.
#[test]
#[ignore]
fn row_kernels_device_time() {
    on_engine_alone(|ctx| {
        let (rows, cols) = (4096, 1024);
        // finite data as a model sees it (random bits would be NaN or Inf in many rows, which
        // the math library answers early)
        let finite = |n: usize, seed: usize| -> Vec<u64> { (0..n).map(|i| ((((i * 7919 + seed) % 1000) as f32 / 250.0 - 2.0).to_bits()) as u64).collect() };
        let x = upload(ctx, F32, &[rows, cols], &finite(rows * cols, 0));
        let g = upload(ctx, F32, &[cols], &finite(cols, 1));
        let bias = upload(ctx, F32, &[cols], &finite(cols, 2));
        let cases = [("softmax", softmax_graph(F32, rows, cols), vec![x.clone()]), ("layernorm", layernorm_graph(F32, rows, cols), vec![x.clone(), g, bias])];
        let mut best: std::collections::BTreeMap<String, (f64, Vec<(f64, String)>)> = Default::default();
        for round in 0..3 {
            for (name, graph, ins) in &cases {
                for ((precision, options), lanes) in [("exact", PlanOptions::default()), ("fast", FAST)].into_iter().flat_map(|p| [(p, "narrow"), (p, "wide")]) {
                    ctx.narrow_rows.store(lanes == "narrow", std::sync::atomic::Ordering::Relaxed);
                    let plan = Plan::new(graph.g.clone(), options).unwrap();
                    // warm-up: 0.3 s of runs first (GPU clocks), then a few
                    let t0 = std::time::Instant::now();
                    while t0.elapsed().as_secs_f64() < if round == 0 { 0.3 } else { 0.05 } {
                        for _ in 0..20 {
                            plan.run(ctx, ins).unwrap();
                        }
                        ctx.synchronize().unwrap();
                    }
                    let t1 = std::time::Instant::now();
                    for _ in 0..20 {
                        plan.run(ctx, ins).unwrap();
                    }
                    ctx.synchronize().unwrap();
                    let wall = t1.elapsed().as_secs_f64() * 1e6 / 20.0;
                    ctx.stream.profile_start().unwrap();
                    for _ in 0..20 {
                        plan.run(ctx, ins).unwrap();
                    }
                    let profile = ctx.stream.profile_stop().unwrap();
                    let kernels = profile.iter().map(|k| (k.device_ns / 1e3 / k.runs as f64, k.name.chars().take(110).collect())).collect();
                    let e = best.entry(format!("{name} {precision} {lanes}")).or_insert((f64::MAX, vec![]));
                    if wall < e.0 {
                        *e = (wall, kernels);
                    }
                }
            }
        }
        for (case, (wall, kernels)) in best {
            eprintln!("ROWBENCH {case}: {wall:.1} us per run (20 queued)");
            for (us, name) in kernels {
                eprintln!("ROWBENCH   {us:.1} us {name}");
            }
        }
    });
}

/// An elementwise kernel of the random-graph test that NVIDIA's shader compiler refused on
/// the H200 ("NVVM compilation failed: 3"; each output alone builds there): it, and every
/// subexpression of it as a kernel of its own, must run on this device — the refused two-output
/// kernel as two kernels (`a_refused_multi_output_kernel_is_split`). What failed is printed
/// before the assertion, and how many kernels the driver refused.
#[test]
fn nvvm_refused_kernel_builds() {
    on_engine(|ctx| {
        let (r, c) = (5, 7);
        let mut rng = Rng(99);
        let xt = upload(ctx, S32, &[c, r], &random_values(S32, r * c, &mut rng));
        let x = xt.transpose(&[1, 0]).unwrap();
        let y = upload(ctx, S32, &[r, c], &random_values(S32, r * c, &mut rng));
        let z = upload(ctx, S32, &[r, c], &random_values(S32, r * c, &mut rng));
        let i = |j: usize| Expr::Input(j);
        let iota = Expr::Iota { axis: Some(1), dtype: S32 };
        let sel = Expr::select(Expr::binary(BinaryOp::Less, i(2), i(2), U8), i(2), i(2), S32);
        let xor = Expr::binary(BinaryOp::BitwiseXor, i(2), sel.clone(), S32);
        let through_f64 = Expr::convert(Expr::convert(Expr::binary(BinaryOp::Add, xor.clone(), iota.clone(), S32), F64), S32);
        let zero = Expr::Const { value: Scalar::I(0), dtype: S32 };
        let lhs = Expr::binary(BinaryOp::Multiply, i(1), Expr::binary(BinaryOp::Add, Expr::binary(BinaryOp::Multiply, through_f64.clone(), zero, S32), iota.clone(), S32), S32);
        let quotient = Expr::binary(BinaryOp::Quotient, sel.clone(), i(1), S32);
        let e1 = Expr::binary(BinaryOp::Max, lhs.clone(), quotient.clone(), S32);
        let e0 = Expr::unary(UnaryOp::Sign, Expr::convert(Expr::convert(i(0), F64), S32), S32);
        let parts: Vec<(&str, Vec<Expr>)> = vec![
            ("both (the refused kernel)", vec![e0.clone(), e1.clone()]),
            ("sign(s32 -> f64 -> s32)", vec![e0.clone()]),
            ("s32 -> f64 -> s32", vec![Expr::convert(Expr::convert(i(0), F64), S32)]),
            ("max(...)", vec![e1]),
            ("lhs", vec![lhs]),
            ("quotient", vec![quotient]),
            ("select", vec![sel]),
            ("xor", vec![xor]),
            ("through f64", vec![through_f64]),
        ];
        let mut failed = vec![];
        let before = ctx.stats().refused_kernels;
        for (name, exprs) in &parts {
            if let Err(e) = ctx.map_multi(exprs, &[&x, &y, &z], &[r, c]).and_then(|outs| {
                outs.iter().for_each(|o| drop(download(ctx, o)));
                Ok(())
            }) {
                eprintln!("REFUSED {name}: {e}");
                failed.push(*name);
            }
        }
        eprintln!("kernels the driver refused: {}", ctx.stats().refused_kernels - before);
        assert!(failed.is_empty(), "refused: {failed:?}");
    });
}

/// A multi-output elementwise kernel the driver refuses is recorded as one kernel per output:
/// the same bits as the fused kernel where it builds, the refusal counted, one dispatch per
/// output, and the refused key not compiled again. (The refusal is injected: lavapipe builds
/// everything.)
#[test]
fn a_refused_multi_output_kernel_is_split() {
    on_engine_alone(|ctx| {
        let (r, c) = (3, 11);
        let mut rng = Rng(5);
        let x = upload(ctx, F32, &[r, c], &random_values(F32, r * c, &mut rng));
        let y = upload(ctx, F32, &[r, c], &random_values(F32, r * c, &mut rng));
        let e0 = Expr::binary(BinaryOp::Atan2, Expr::Input(0), Expr::Input(1), F32);
        let e1 = Expr::unary(UnaryOp::Sigmoid, Expr::binary(BinaryOp::Subtract, Expr::Input(1), Expr::Input(0), F32), F32);
        let exprs = [e0.clone(), e1.clone()];
        let fused: Vec<Vec<u64>> = ctx.map_multi(&exprs, &[&x, &y], &[r, c]).unwrap().iter().map(|t| download(ctx, t)).collect();
        // a new layout (x transposed twice is strided) gives a kernel key not built yet
        let xs = x.transpose(&[1, 0]).unwrap().transpose(&[1, 0]).unwrap();
        let strided = upload(ctx, F32, &[c, r], &random_values(F32, r * c, &mut rng)).transpose(&[1, 0]).unwrap();
        let inputs = [&xs, &strided];
        let want: Vec<Vec<u64>> = exprs.iter().map(|e| download(ctx, &ctx.map(e, &inputs).unwrap())).collect();
        ctx.kernels.inject_refusal(Some(&format!("{e0:?} => {e1:?}")));
        let before = ctx.stats();
        let split = ctx.map_multi(&exprs, &inputs, &[r, c]);
        let after = ctx.stats();
        let again = ctx.map_multi(&exprs, &inputs, &[r, c]);
        let after_again = ctx.stats();
        ctx.kernels.inject_refusal(None);
        let split: Vec<Vec<u64>> = split.unwrap().iter().map(|t| download(ctx, t)).collect();
        assert_eq!(split, want, "split outputs equal single-output kernels");
        // two refusals: the kernel with its speculative copy (sigmoid(y - x)'s subtraction is
        // native), then the checked kernel alone; then one kernel per output
        assert_eq!((after.refused_kernels - before.refused_kernels, after.dispatches - before.dispatches), (2, 2));
        let again: Vec<Vec<u64>> = again.unwrap().iter().map(|t| download(ctx, t)).collect();
        assert_eq!(again, want);
        assert_eq!((after_again.refused_kernels - after.refused_kernels, after_again.pipelines - after.pipelines), (0, 0), "a refused key is not built again");
        // (and where the fused kernel builds, its outputs are those of the same expressions)
        let fused_again: Vec<Vec<u64>> = exprs.iter().map(|e| download(ctx, &ctx.map(e, &[&x, &y]).unwrap())).collect();
        assert_eq!(fused, fused_again);
    });
}

/// What a row reduction over 4096 × 1024 f32 could cost on this device: hand-written kernels
/// (not generated) that vary one thing at a time — invocations per row (256, 128, 64, 32),
/// f32 or double accumulation (double after our exact f32 decode, as the generated kernels
/// do), a fixed or a run-time row length, the shared-memory tree or subgroup shuffles — beside
/// the generated plain sum and max, and a one-kernel softmax (row in registers) beside the
/// compiled softmax. Device time per run, best of interleaved rounds. Ignored: a measurement.
#[test]
#[ignore]
fn row_reduction_layouts() {
    on_engine_alone(|ctx| {
        let (rows, cols) = (4096usize, 1024usize);
        // finite values: the sums are checked against a CPU sum
        let host: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0).collect();
        let x = upload(ctx, F32, &[rows, cols], &host.iter().map(|v| v.to_bits() as u64).collect::<Vec<_>>());
        let sums = ctx.empty(F32, &[rows]).unwrap();
        let y = ctx.empty(F32, &[rows, cols]).unwrap();
        // one hand-written kernel variant
        struct V {
            name: String,
            tpr: u32,
            double: bool,
            fixed: bool,
            shuffle: bool,
            softmax: bool,
            /// which of our f32 library's nxf_sub, nxf_exp, nxf_div replace the driver's
            library: [bool; 3],
        }
        let mut variants = vec![];
        for tpr in [256u32, 128, 64, 32] {
            for double in [false, true] {
                for fixed in [true, false] {
                    variants.push(V { name: format!("sum tpr{tpr} {} {}", if double { "f64" } else { "f32" }, if fixed { "fixed" } else { "loop" }), tpr, double, fixed, shuffle: false, softmax: false, library: [false; 3] });
                }
            }
            variants.push(V { name: format!("sum tpr{tpr} f64 fixed shuffle"), tpr, double: true, fixed: true, shuffle: true, softmax: false, library: [false; 3] });
            for library in [[false; 3], [true; 3], [true, false, false], [false, true, false], [false, false, true]] {
                if library != [false; 3] && library != [true; 3] && tpr != 64 {
                    continue;
                }
                let names = ["sub", "exp", "div"].iter().zip(library).filter(|(_, on)| *on).map(|(n, _)| format!(" nxf_{n}")).collect::<String>();
                let name = format!("softmax tpr{tpr} f32 fixed{names}");
                variants.push(V { name, tpr, double: false, fixed: true, shuffle: false, softmax: true, library });
            }
        }
        let source = |v: &V| -> String {
            let mut s = nx_vulkan_engine::kernels::numeric_prelude();
            s.push_str("#extension GL_KHR_shader_subgroup_shuffle : require\n");
            s.push_str(nx_vulkan_engine::kernels::MATH_F32);
            let sub = if v.library[0] { "nxf_sub" } else { "" };
            let exp = if v.library[1] { "nxf_exp" } else { "exp" };
            let div = if v.library[2] { "nxf_div" } else { "" };
            s.push_str(&format!("float f_sub(float a, float b) {{ return {}; }}\nfloat f_exp(float a) {{ return {exp}(a); }}\nfloat f_div(float a, float b) {{ return {}; }}\n", if sub.is_empty() { "a - b".to_string() } else { format!("{sub}(a, b)") }, if div.is_empty() { "a / b".to_string() } else { format!("{div}(a, b)") }));
            let acc = if v.double { "double" } else { "float" };
            let dec = if v.double { "nx_f32_to_f64(w)" } else { "uintBitsToFloat(w)" };
            s.push_str(&format!("#define TPR {}u\n#define ACCT {acc}\n#define COLS {cols}u\nACCT dec(uint w) {{ return ACCT({dec}); }}\n", v.tpr));
            s.push_str("shared ACCT s_v[256];\nlayout(local_size_x = 256) in;\n");
            s.push_str("ACCT row_total(ACCT a, uint t, uint lane) {\n");
            if v.shuffle {
                s.push_str("    uint sg = gl_SubgroupSize;\n    for (uint h = sg / 2u; h > 0u; h >>= 1) a += subgroupShuffleXor(a, h);\n");
                s.push_str("    if (TPR <= sg) return a;\n    if (t % sg == 0u) s_v[t / sg] = a;\n    barrier();\n");
                s.push_str("    uint per = TPR / sg; ACCT r = s_v[(t / TPR) * per];\n    for (uint k = 1u; k < per; k++) r += s_v[(t / TPR) * per + k];\n    barrier();\n    return r;\n}\n");
            } else {
                s.push_str("    s_v[t] = a; barrier();\n    for (uint h = TPR / 2u; h > 0u; h >>= 1) { if (lane < h) s_v[t] += s_v[t + h]; barrier(); }\n");
                s.push_str("    ACCT r = s_v[t - lane]; barrier();\n    return r;\n}\n");
            }
            if v.softmax {
                s.push_str("ACCT row_max(ACCT a, uint t, uint lane) {\n    s_v[t] = a; barrier();\n    for (uint h = TPR / 2u; h > 0u; h >>= 1) { if (lane < h) s_v[t] = max(s_v[t], s_v[t + h]); barrier(); }\n    ACCT r = s_v[t - lane]; barrier();\n    return r;\n}\n");
            }
            s.push_str("void main() {\n    BufU32 src = BufU32(ParamsU64(pc.params).v[0]); BufU32 dst = BufU32(ParamsU64(pc.params).v[1]);\n");
            s.push_str("    uint cols = uint(ParamsI32(pc.params + 16ul).v[0]);\n");
            s.push_str("    uint t = gl_LocalInvocationID.x; uint lane = t % TPR; uint row = gl_WorkGroupID.x * (256u / TPR) + t / TPR;\n");
            s.push_str("    bool live = row < pc.count; uint base = row * COLS;\n");
            if v.softmax {
                s.push_str("    float e[COLS / TPR];\n    float m = uintBitsToFloat(0xFF800000u);\n");
                s.push_str("    [[unroll]] for (uint k = 0u; k < COLS / TPR; k++) { e[k] = live ? uintBitsToFloat(src.v[base + lane + k * TPR]) : 0.0; m = max(m, e[k]); }\n");
                s.push_str("    m = row_max(m, t, lane);\n    float z = 0.0;\n");
                s.push_str("    [[unroll]] for (uint k = 0u; k < COLS / TPR; k++) { e[k] = f_exp(f_sub(e[k], m)); z += e[k]; }\n");
                s.push_str("    z = row_total(z, t, lane);\n");
                s.push_str("    if (live) { [[unroll]] for (uint k = 0u; k < COLS / TPR; k++) dst.v[base + lane + k * TPR] = floatBitsToUint(f_div(e[k], z)); }\n}\n");
            } else {
                s.push_str("    ACCT a = ACCT(0);\n    if (live) {\n");
                if v.fixed {
                    s.push_str("        uint w[COLS / TPR];\n        [[unroll]] for (uint k = 0u; k < COLS / TPR; k++) w[k] = src.v[base + lane + k * TPR];\n");
                    s.push_str("        [[unroll]] for (uint k = 0u; k < COLS / TPR; k++) a += dec(w[k]);\n");
                } else {
                    s.push_str("        for (uint c = lane; c < cols; c += TPR) a += dec(src.v[base + c]);\n");
                }
                s.push_str("    }\n    a = row_total(a, t, lane);\n    if (live && lane == 0u) dst.v[row] = floatBitsToUint(float(a));\n}\n");
            }
            s
        };
        let kernels: Vec<_> = variants.iter().map(|v| ctx.kernels.get(&format!("row layout bench {}", v.name), 256, 256 / v.tpr, || source(v)).unwrap()).collect();
        let time = |f: &dyn Fn(&mut submit::Batch<'_>)| -> f64 {
            for _ in 0..3 {
                let mut b = ctx.batch().unwrap();
                f(&mut b);
                b.finish().unwrap();
            }
            ctx.synchronize().unwrap();
            ctx.stream.profile_start().unwrap();
            for _ in 0..20 {
                let mut b = ctx.batch().unwrap();
                f(&mut b);
                b.finish().unwrap();
            }
            let p = ctx.stream.profile_stop().unwrap();
            p.iter().map(|k| k.device_ns).sum::<f64>() / 20.0 / 1e3
        };
        let mut best: std::collections::BTreeMap<String, f64> = Default::default();
        let softmax = softmax_graph(F32, rows, cols);
        for round in 0..4 {
            // warm-up: the clocks rise under load
            let t0 = std::time::Instant::now();
            while round == 0 && t0.elapsed().as_secs_f64() < 0.5 {
                ctx.reduce(ReduceOp::Sum, &x, &[1], false, F32).unwrap();
                ctx.synchronize().unwrap();
            }
            for (v, k) in variants.iter().zip(&kernels) {
                let us = time(&|b| {
                    let out = if v.softmax { &y } else { &sums };
                    let mut p = params::ParamBlock::new("bench");
                    p.addr(x.buffer().address()).addr(out.buffer().address());
                    p.i32(cols).unwrap();
                    b.dispatch_grid(k, p.bytes(), rows as u32, [(rows as u32) / (256 / v.tpr), 1, 1]).unwrap();
                });
                let e = best.entry(v.name.clone()).or_insert(f64::MAX);
                *e = e.min(us);
                if round == 0 {
                    let got = download(ctx, if v.softmax { &y } else { &sums });
                    for r in (0..rows).step_by(97) {
                        let row = &host[r * cols..(r + 1) * cols];
                        let (want, have) = if v.softmax {
                            (1.0, (0..cols).map(|c| f32::from_bits(got[r * cols + c] as u32) as f64).sum::<f64>())
                        } else {
                            (row.iter().map(|&v| v as f64).sum::<f64>(), f32::from_bits(got[r] as u32) as f64)
                        };
                        assert!((want - have).abs() <= 1e-3 * (1.0 + want.abs()), "{}: row {r}: {have} against {want}", v.name);
                    }
                }
            }
            for (name, op) in [("generated sum exact", ReduceOp::Sum), ("generated max exact", ReduceOp::Max)] {
                let us = time(&|b| ctx.record_reduce(b, op, &x, &[1], &sums).unwrap());
                let e = best.entry(name.to_string()).or_insert(f64::MAX);
                *e = e.min(us);
            }
            for (name, options) in [("compiled softmax exact", PlanOptions::default()), ("compiled softmax fast", FAST)] {
                let plan = Plan::new(softmax.g.clone(), options).unwrap();
                plan.run(ctx, &[x.clone()]).unwrap();
                ctx.synchronize().unwrap();
                ctx.stream.profile_start().unwrap();
                for _ in 0..20 {
                    plan.run(ctx, &[x.clone()]).unwrap();
                }
                let p = ctx.stream.profile_stop().unwrap();
                let us = p.iter().map(|k| k.device_ns).sum::<f64>() / 20.0 / 1e3;
                let e = best.entry(name.to_string()).or_insert(f64::MAX);
                *e = e.min(us);
                if round == 3 {
                    for k in &p {
                        eprintln!("ROWLAYOUT   {name}: {:.1} us {}", k.device_ns / 1e3 / k.runs as f64, k.name.chars().take(100).collect::<String>());
                    }
                }
            }
        }
        for (name, us) in &best {
            eprintln!("ROWLAYOUT {us:8.1} us  {name}");
        }
    });
}
