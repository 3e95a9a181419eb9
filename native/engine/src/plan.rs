//! Compiled graphs: the back end of the Defn compiler (`NxVulkan.Compiler`).
//!
//! A [`Graph`] is a flat list of Nx-level nodes (parameters, constants, elementwise ops, views,
//! reductions, dots, ...) in topological order, each with its shape and type — what the Elixir
//! side lowers `Nx.Defn.Expr` to. [`Plan::new`] schedules it once; [`Plan::run`] binds new
//! inputs and records the whole schedule into **one** batch (one submission, no waits).
//!
//! **Fusion.** Every elementwise node (unary, binary, select, clip, as_type, bitcast, constant,
//! iota) is either *inlined* into the expressions of the nodes that use it or *materialised*
//! (written to a buffer). A node is materialised when it is a graph output, when something
//! other than an elementwise op or a reduction reads it (a view, a dot, ...), when an
//! elementwise op of another shape reads it (implicit broadcasting) and it is not a small
//! iota-free expression (those are recomputed per element from their leaves read broadcast),
//! or when it is big and shared. Materialised elementwise nodes of the same shape are grouped
//! into one multi-output kernel ([`Context::record_map`]), so a chain of any length is one
//! dispatch and shared subexpressions are computed once per kernel (the generator's memo). A
//! group stays open until some later step needs one of its values; only then is it emitted.
//! Inputs of a group are the materialised tensors it reads, through views: broadcasts
//! (implicit or explicit), transposes, slices and reverses cost no copy.
//!
//! **Reductions** ([`Context::record_reduce_finished`]) take their elementwise argument as a
//! *prologue* (never stored); a stored elementwise node of the reduced shape that only the
//! reduction feeds becomes its *finish* (computed as the result is stored); stored elementwise
//! nodes of the reduction's input shape that read the stored value back over its rows, and
//! nothing written later, become its *epilogue* (written by the same kernel). Softmax,
//! layernorm and logsumexp over the last axis are two dispatches, or one where the first
//! reduction (an f32 max, or layernorm's sum) runs in the second's kernel
//! ([`fuse_row_reductions`]).
//!
//! **Dots.** An exact f32 dot is scheduled as an f64 dot and an elementwise rounding, so the
//! rounding joins the dot's elementwise consumers (bias, activation).
//!
//! **Exactness.** Every node of a generated expression is rounded to its own type, exactly as
//! the eager op for that node would store it, so a fused plan gives the bits that running each
//! node as its own op gives ([`Graph::eval_unfused`], which the tests compare against).
//!
//! **Stage boundaries** (their own kernels, from the op families): reductions, arg-reductions,
//! dot, concatenate, pad, sort, argsort and cumulative ops. Views of materialised tensors are free; a reshape of a
//! non-contiguous view records a copy first.
//!
//! **Liveness.** A value is dropped after its last use; its buffer stays alive until the
//! recording retires (the batch keeps it), then returns to the pool.

use crate::dtype::DType;
use crate::elementwise::{BinaryOp, Expr, FloatMath, Scalar, UnaryOp};
use crate::error::{invalid, Result};
use crate::matmul::DotPrecision;
use crate::ops::clip_expr;
use crate::reduce::{row_reduction_fits, ArgOp, Finish, FusedReduce, ReduceOp, Reduction, RowReduction, TieBreak};
use crate::scan::ScanOp;
use crate::sort::Direction;
use crate::submit::Batch;
use crate::tensor::{numel, Tensor};
use crate::Context;
use std::collections::HashMap;

/// One node's operation; its arguments are earlier nodes (`PlanNode::args`).
#[derive(Clone, Debug, PartialEq)]
pub enum PlanOp {
    /// The `n`-th input of the plan.
    Parameter(usize),
    /// A value (already in the node's type) everywhere.
    Constant(Scalar),
    /// Nx.iota along one axis, or over the flattened shape.
    Iota(Option<usize>),
    Unary(UnaryOp),
    /// Arguments broadcast to the node's shape (Nx's trailing-axis rule).
    Binary(BinaryOp),
    /// `pred, on_true, on_false`, broadcast.
    Select,
    /// `x, lo, hi` (Nx.clip), `lo` and `hi` broadcast.
    Clip,
    /// Nx.as_type.
    Convert,
    Bitcast,
    /// A view with the node's shape (a copy first when the argument is not contiguous).
    Reshape,
    /// Nx.broadcast/3: `axes[i]` is the result axis of argument axis `i`.
    Broadcast(Vec<usize>),
    Transpose(Vec<usize>),
    /// Start and step per axis; the node's shape holds the counts.
    Slice { start: Vec<usize>, steps: Vec<usize> },
    Reverse(Vec<usize>),
    /// A reduction over `axes` of the argument; the node's shape says whether axes are kept.
    Reduce { op: ReduceOp, axes: Vec<usize> },
    ArgReduce { op: ArgOp, axis: Option<usize>, tie_break: TieBreak },
    Dot { contract_a: Vec<usize>, batch_a: Vec<usize>, contract_b: Vec<usize>, batch_b: Vec<usize> },
    /// All arguments joined along `axis` (converted to the node's type).
    Concatenate(usize),
    /// `x, value` with Nx.pad's `(low, high, interior)` per axis.
    Pad(Vec<(i64, i64, u64)>),
    /// Nx.sort / Nx.argsort along `axis` (the stable bitonic sort of sort.rs).
    Sort { axis: usize, direction: Direction },
    Argsort { axis: usize, direction: Direction },
    /// Nx.cumulative_* along `axis` (scan.rs, Nx's operand order).
    Cumulative { op: ScanOp, axis: usize, reverse: bool },
}

#[derive(Clone, Debug, PartialEq)]
pub struct PlanNode {
    pub op: PlanOp,
    pub args: Vec<usize>,
    pub shape: Vec<usize>,
    pub dtype: DType,
}

/// A whole function: nodes in topological order (every argument is an earlier node).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    pub params: Vec<(DType, Vec<usize>)>,
    pub nodes: Vec<PlanNode>,
    pub outputs: Vec<usize>,
}

/// How a compiled plan evaluates dots and float math (`precision: :exact` is the default of
/// both; `:fast` is `DotPrecision::TensorCore` with `FloatMath::Fast`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PlanOptions {
    pub dot: DotPrecision,
    /// Elementwise work: fused kernels and reductions' prologues, finishes and epilogues.
    pub math: FloatMath,
}

fn is_elementwise(op: &PlanOp) -> bool {
    matches!(
        op,
        PlanOp::Constant(_)
            | PlanOp::Iota(_)
            | PlanOp::Unary(_)
            | PlanOp::Binary(_)
            | PlanOp::Select
            | PlanOp::Clip
            | PlanOp::Convert
            | PlanOp::Bitcast
    )
}

/// An input of a fused kernel: a materialised node, seen with the kernel's shape (`broadcast`:
/// Nx's trailing-axis rule) or as it is; `kept`: a reduction's finish input of the reduced
/// shape without the reduced axes, broadcast back along the reduction's kept axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct KernelInput {
    node: usize,
    broadcast: bool,
    kept: bool,
}

impl KernelInput {
    /// How a kernel of `shape` reads `t` (`kept_axes`: the reduction's kept axes, for `kept`).
    fn view(&self, t: &Tensor, shape: &[usize], kept_axes: &[usize]) -> Result<Tensor> {
        if self.kept && t.shape().len() != shape.len() {
            t.broadcast(shape, kept_axes)
        } else if self.broadcast || self.kept {
            t.broadcast_to(shape)
        } else {
            Ok(t.clone())
        }
    }
}

#[derive(Clone, Debug)]
enum Step {
    /// One generated kernel writing the materialised elementwise nodes `outputs`.
    Map { shape: Vec<usize>, exprs: Vec<Expr>, inputs: Vec<KernelInput>, outputs: Vec<usize> },
    /// A reduction (or arg-reduction) `node` of the expression `prologue` over `inputs` (its
    /// argument, inlined when elementwise), with elementwise nodes of the reduction's input
    /// shape that read its result written by the same kernel (`epilogue`; in the expressions
    /// the reduced value is the input after the last of `inputs`).
    /// `finish`: an elementwise node of the reduced shape that only the reduction feeds (a
    /// mean's division, logsumexp's `log(s) + m`), computed as the result is stored; `out`
    /// then holds it instead of the reduction (which is never stored).
    /// `pre`: a row max/min/sum node the kernel computes first and writes itself
    /// ([`RowReduction`]), read as `inputs[pre.into]`; its own step is gone
    /// ([`fuse_row_reductions`]).
    Reduce { node: usize, prologue: Expr, inputs: Vec<KernelInput>, epilogue: Vec<(Expr, usize)>, finish: Option<(Expr, usize)>, pre: Option<(RowReduction, usize)> },
    /// Any other node, recorded by its op family (views record nothing unless they must copy).
    Node(usize),
}

/// A scheduled graph. Cheap to run again: a run walks the steps, binds tensors and records.
#[derive(Debug)]
pub struct Plan {
    graph: Graph,
    options: PlanOptions,
    steps: Vec<Step>,
    /// Nodes whose last reader is step `i` (dropped after it).
    frees: Vec<Vec<usize>>,
}

/// What scheduling decided, for tests and `NxVulkan.Compiler` reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanSummary {
    pub nodes: usize,
    /// Generated elementwise kernels per run.
    pub fused_kernels: usize,
    /// Elementwise nodes computed inside some kernel instead of their own.
    pub inlined_nodes: usize,
    /// Steps recorded by op families (reductions, dots, ...), views included.
    pub family_steps: usize,
    /// Reductions reading an inlined expression instead of a stored tensor.
    pub fused_prologues: usize,
    /// Elementwise nodes written by the kernel of the reduction they read.
    pub fused_epilogues: usize,
    /// Row max/min/sum reductions computed in the kernel of the reduction that reads them
    /// (softmax's and logsumexp's max, layernorm's sum): no step of their own.
    pub fused_row_reductions: usize,
}

/// Inlining stops growing an expression past this many nodes; bigger shared subexpressions
/// are materialised instead (a DAG inlined as a tree can grow exponentially).
const MAX_INLINE_NODES: usize = 256;

/// An elementwise node of a smaller shape is inlined into a larger kernel (recomputed per
/// element) only up to this many nodes; a bigger one is materialised and read broadcast.
const MAX_BROADCAST_INLINE: usize = 8;

/// Whether broadcasting a reduction's result of `out_shape` to `shape` (Nx's trailing-axis
/// rule) hands every element the result of its own row: reduced axes are 1 (or absent in
/// front), kept axes keep their size.
fn row_broadcast(op: &PlanOp, out_shape: &[usize], shape: &[usize]) -> bool {
    let axes: Vec<usize> = match op {
        PlanOp::Reduce { axes, .. } => axes.clone(),
        PlanOp::ArgReduce { axis: Some(a), .. } => vec![*a],
        PlanOp::ArgReduce { axis: None, .. } => (0..shape.len()).collect(),
        _ => return false,
    };
    let Some(lead) = shape.len().checked_sub(out_shape.len()) else { return false };
    (0..shape.len()).all(|d| {
        if shape[d] == 1 {
            return d < lead || out_shape[d - lead] == 1;
        }
        if axes.contains(&d) {
            d < lead || out_shape[d - lead] == 1
        } else {
            d >= lead && out_shape[d - lead] == shape[d]
        }
    })
}

/// `e` with every `Input(i)` renumbered to `Input(f(i))`.
fn remap_inputs(e: &Expr, f: &impl Fn(usize) -> usize) -> Expr {
    let b = |x: &Expr| Box::new(remap_inputs(x, f));
    match e {
        Expr::Input(i) => Expr::Input(f(*i)),
        Expr::Const { .. } | Expr::Iota { .. } => e.clone(),
        Expr::Unary { op, arg, dtype } => Expr::Unary { op: *op, arg: b(arg), dtype: *dtype },
        Expr::Binary { op, lhs, rhs, dtype } => Expr::Binary { op: *op, lhs: b(lhs), rhs: b(rhs), dtype: *dtype },
        Expr::Select { pred, on_true, on_false, dtype } => Expr::Select { pred: b(pred), on_true: b(on_true), on_false: b(on_false), dtype: *dtype },
        Expr::Convert { arg, dtype } => Expr::Convert { arg: b(arg), dtype: *dtype },
        Expr::Bitcast { arg, dtype } => Expr::Bitcast { arg: b(arg), dtype: *dtype },
    }
}

/// Whether `e` reads an iota anywhere.
fn reads_iota(e: &Expr) -> bool {
    match e {
        Expr::Iota { .. } => true,
        Expr::Input(_) | Expr::Const { .. } => false,
        Expr::Unary { arg, .. } | Expr::Convert { arg, .. } | Expr::Bitcast { arg, .. } => reads_iota(arg),
        Expr::Binary { lhs, rhs, .. } => reads_iota(lhs) || reads_iota(rhs),
        Expr::Select { pred, on_true, on_false, .. } => reads_iota(pred) || reads_iota(on_true) || reads_iota(on_false),
    }
}

/// Whether `e` reads `Input(j)`.
fn reads_input(e: &Expr, j: usize) -> bool {
    match e {
        Expr::Input(i) => *i == j,
        Expr::Const { .. } | Expr::Iota { .. } => false,
        Expr::Unary { arg, .. } | Expr::Convert { arg, .. } | Expr::Bitcast { arg, .. } => reads_input(arg, j),
        Expr::Binary { lhs, rhs, .. } => reads_input(lhs, j) || reads_input(rhs, j),
        Expr::Select { pred, on_true, on_false, .. } => reads_input(pred, j) || reads_input(on_true, j) || reads_input(on_false, j),
    }
}

/// Moves a plain f32 row max/min/sum (a reduction step of a stored `x` with no prologue,
/// epilogue or finish) into the kernel of the next reduction that reads it, where that
/// reduction's prologue reads the same `x` over the same rows, read whole
/// ([`row_reduction_fits`]), and no step between the two reads it: softmax's and logsumexp's
/// `max(x)` and layernorm's `sum(x)` then cost no kernel and no pass over `x` of their own
/// ([`RowReduction`]: the same bits). The later kernel writes the row reduction's tensor, so
/// any later reader (or the graph's outputs) finds it. `NX_VULKAN_ROW_REDUCTION=0` keeps
/// every row reduction a step of its own (measurements).
fn fuse_row_reductions(g: &Graph, mut steps: Vec<Step>) -> Result<Vec<Step>> {
    static ON: once_cell::sync::Lazy<bool> = once_cell::sync::Lazy::new(|| std::env::var("NX_VULKAN_ROW_REDUCTION").map_or(true, |v| v != "0"));
    if !*ON {
        return Ok(steps);
    }
    let axes_of = |n: usize| match &g.nodes[n].op {
        PlanOp::Reduce { op, axes } => {
            let mut a = axes.clone();
            a.sort_unstable();
            Some((*op, a))
        }
        _ => None,
    };
    let reads_node = |step: &Step, n: usize| match step {
        Step::Map { inputs, .. } | Step::Reduce { inputs, .. } => inputs.iter().any(|k| k.node == n),
        Step::Node(i) => g.nodes[*i].args.contains(&n),
    };
    let mut gone = vec![false; steps.len()];
    for ka in 0..steps.len() {
        let Step::Reduce { node: a, prologue: Expr::Input(0), inputs: a_inputs, epilogue, finish: None, pre: None } = &steps[ka] else { continue };
        let (a, x_in) = (*a, a_inputs[0]);
        let Some((op @ (ReduceOp::Max | ReduceOp::Min | ReduceOp::Sum), axes)) = axes_of(a) else { continue };
        // x read as it is (varying along the rows), f32 in and out
        let plain_x = !x_in.broadcast && !x_in.kept && g.nodes[x_in.node].dtype == DType::F32;
        if !epilogue.is_empty() || a_inputs.len() != 1 || g.nodes[a].dtype != DType::F32 || !plain_x {
            continue;
        }
        // the first later step reading it must be the reduction taking it
        let Some(kb) = (ka + 1..steps.len()).find(|&k| reads_node(&steps[k], a)) else { continue };
        let Step::Reduce { node: b, prologue, inputs, pre: None, .. } = &steps[kb] else { continue };
        let shape = &g.nodes[x_in.node].shape;
        let b_arg = g.nodes[*b].args[0];
        let (Some(jx), Some(jm)) = (inputs.iter().position(|k| *k == x_in), inputs.iter().position(|k| k.node == a)) else { continue };
        let same_rows = axes_of(*b).is_some_and(|(_, b_axes)| b_axes == axes) && &g.nodes[b_arg].shape == shape;
        if !same_rows || !reads_input(prologue, jx) || !reads_input(prologue, jm) || !row_reduction_fits(shape, &axes, g.nodes[*b].dtype)? {
            continue;
        }
        // Every view of the row reduction in B (the prologue's, a finish's at the kept
        // positions) must be constant along the rows — the kept shape broadcast back — so that
        // all of them are the one value the kernel computes: they become input jm (the kernel
        // writes the tensor, so none may be read from memory there).
        let row_view = |k: &KernelInput| k.kept || (k.broadcast && g.nodes[a].shape.len() == shape.len() && row_broadcast(&g.nodes[a].op, &g.nodes[a].shape, shape));
        if !inputs.iter().filter(|k| k.node == a).all(row_view) {
            continue;
        }
        let Step::Reduce { inputs, prologue, epilogue, finish, pre: slot, .. } = &mut steps[kb] else { unreachable!() };
        let n = inputs.len();
        let keep: Vec<bool> = inputs.iter().enumerate().map(|(j, k)| j == jm || k.node != a).collect();
        let new_index: Vec<usize> = keep.iter().scan(0, |next, &k| {
            let i = *next;
            *next += k as usize;
            Some(i)
        }).collect();
        let kept_n = keep.iter().filter(|&&k| k).count();
        let remap = |i: usize| {
            if i >= n {
                i - n + kept_n // the reduced value (and anything after it) moves down
            } else if keep[i] {
                new_index[i]
            } else {
                new_index[jm]
            }
        };
        *prologue = remap_inputs(prologue, &remap);
        for (e, _) in epilogue.iter_mut() {
            *e = remap_inputs(e, &remap);
        }
        if let Some((e, _)) = finish {
            *e = remap_inputs(e, &remap);
        }
        let mut j = 0;
        inputs.retain(|_| {
            j += 1;
            keep[j - 1]
        });
        *slot = Some((RowReduction { of: new_index[jx], into: new_index[jm], op }, a));
        gone[ka] = true;
    }
    Ok(steps.into_iter().zip(gone).filter(|(_, g)| !g).map(|(s, _)| s).collect())
}

struct Scheduler<'g> {
    g: &'g Graph,
    materialised: Vec<bool>,
    /// Structural: an elementwise node that can be inlined into a kernel of a larger shape it
    /// broadcasts to, by reading its leaves broadcast to that shape (elementwise ops commute
    /// with broadcasting); no iota below it, and cheap, since it is recomputed per element.
    broadcastable: Vec<bool>,
    /// Size of the expression the node inlines as.
    inline_size: Vec<usize>,
    /// Materialised node -> the open group computing it.
    open_of: HashMap<usize, usize>,
    groups: Vec<Option<Group>>,
    steps: Vec<Step>,
    /// Materialised node -> the step that writes it (parameters: none).
    produced_at: HashMap<usize, usize>,
    consumers: Vec<Vec<usize>>,
    is_output: Vec<bool>,
}

struct Group {
    shape: Vec<usize>,
    roots: Vec<usize>,
}

impl Plan {
    pub fn new(graph: Graph, options: PlanOptions) -> Result<Plan> {
        validate(&graph)?;
        let graph = widen_exact_dots(graph, options);
        let g = &graph;
        let n = g.nodes.len();
        let mut consumers: Vec<Vec<usize>> = vec![vec![]; n];
        for (i, node) in g.nodes.iter().enumerate() {
            for &a in &node.args {
                consumers[a].push(i);
            }
        }
        let mut is_output = vec![false; n];
        for &o in &g.outputs {
            is_output[o] = true;
        }
        // the inline size first: broadcast inlining is only for small expressions
        let mut broadcastable = vec![false; n];
        let mut iota_free = vec![false; n];
        for (i, node) in g.nodes.iter().enumerate() {
            iota_free[i] = match node.op {
                PlanOp::Iota(_) => false,
                ref op if is_elementwise(op) => node.args.iter().all(|&a| !is_elementwise(&g.nodes[a].op) || iota_free[a]),
                _ => false,
            };
        }
        let mut materialised = vec![false; n];
        let mut inline_size = vec![1usize; n];
        for (i, node) in g.nodes.iter().enumerate() {
            if !is_elementwise(&node.op) {
                materialised[i] = true;
                continue;
            }
            inline_size[i] = 1 + node.args.iter().map(|&a| if materialised[a] { 1 } else { inline_size[a] }).sum::<usize>();
            broadcastable[i] = iota_free[i] && (inline_size[i] <= MAX_BROADCAST_INLINE || matches!(node.op, PlanOp::Constant(_)));
            // Reductions take an elementwise argument as their prologue; anything else that
            // is not elementwise reads a stored tensor.
            let read_elsewhere = consumers[i].iter().any(|&c| {
                let cn = &g.nodes[c];
                let prologue = matches!(cn.op, PlanOp::Reduce { .. } | PlanOp::ArgReduce { .. });
                (!is_elementwise(&cn.op) && !prologue) || (is_elementwise(&cn.op) && cn.shape != node.shape && !broadcastable[i])
            });
            let too_big = inline_size[i] > MAX_INLINE_NODES && consumers[i].len() > 1;
            materialised[i] = is_output[i] || read_elsewhere || too_big;
            if materialised[i] {
                // as an argument it is one input
                inline_size[i] = inline_size[i].min(MAX_INLINE_NODES);
            }
        }
        let mut s = Scheduler {
            g,
            materialised,
            broadcastable,
            inline_size,
            open_of: HashMap::new(),
            groups: vec![],
            steps: vec![],
            produced_at: HashMap::new(),
            consumers: consumers.clone(),
            is_output: is_output.clone(),
        };
        for (i, node) in g.nodes.iter().enumerate() {
            if is_elementwise(&node.op) {
                if s.materialised[i] && !s.add_finish(i) && !s.add_epilogue(i) {
                    s.add_root(i);
                }
            } else if matches!(node.op, PlanOp::Reduce { .. } | PlanOp::ArgReduce { .. }) {
                s.add_reduce(i);
            } else if !matches!(node.op, PlanOp::Parameter(_)) {
                for &a in &node.args {
                    s.need(a);
                }
                s.produced_at.insert(i, s.steps.len());
                s.steps.push(Step::Node(i));
            }
        }
        for &o in &g.outputs {
            s.need(o);
        }
        let steps = fuse_row_reductions(g, s.finish_reduces())?;
        // Liveness: the last step reading each node (outputs live to the end).
        let mut last = vec![None; n];
        for (k, step) in steps.iter().enumerate() {
            match step {
                Step::Map { inputs, .. } | Step::Reduce { inputs, .. } => inputs.iter().for_each(|inp| last[inp.node] = Some(k)),
                Step::Node(i) => g.nodes[*i].args.iter().for_each(|&a| last[a] = Some(k)),
            }
        }
        let mut frees = vec![vec![]; steps.len()];
        for (node, l) in last.iter().enumerate() {
            if let (Some(k), false) = (l, is_output[node]) {
                frees[*k].push(node);
            }
        }
        Ok(Plan { graph, options, steps, frees })
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    pub fn summary(&self) -> PlanSummary {
        let mut s = PlanSummary { nodes: self.graph.nodes.len(), ..Default::default() };
        let mut computed = 0;
        for step in &self.steps {
            match step {
                Step::Map { outputs, .. } => {
                    s.fused_kernels += 1;
                    computed += outputs.len();
                }
                Step::Reduce { prologue, epilogue, finish, pre, .. } => {
                    s.family_steps += 1;
                    s.fused_row_reductions += pre.is_some() as usize;
                    s.fused_prologues += (!matches!(prologue, Expr::Input(_))) as usize;
                    s.fused_epilogues += epilogue.len() + finish.is_some() as usize;
                    computed += epilogue.len() + finish.is_some() as usize;
                }
                Step::Node(_) => s.family_steps += 1,
            }
        }
        let elementwise = self.graph.nodes.iter().filter(|n| is_elementwise(&n.op)).count();
        s.inlined_nodes = elementwise.saturating_sub(computed);
        s
    }

    /// Binds `params` (types and shapes as compiled) and records the whole plan into one
    /// batch, committed to the stream without waiting. Returns the outputs in order.
    pub fn run(&self, ctx: &Context, params: &[Tensor]) -> Result<Vec<Tensor>> {
        let g = &self.graph;
        if params.len() != g.params.len() {
            return Err(invalid!("plan takes {} inputs, got {}", g.params.len(), params.len()));
        }
        for (i, (p, (t, shape))) in params.iter().zip(&g.params).enumerate() {
            if p.dtype() != *t || p.shape() != shape.as_slice() {
                return Err(invalid!(
                    "plan input {i} was compiled for {t}{shape:?}, got {}{:?}",
                    p.dtype(),
                    p.shape()
                ));
            }
        }
        let mut vals: Vec<Option<Tensor>> = vec![None; g.nodes.len()];
        for (i, node) in g.nodes.iter().enumerate() {
            if let PlanOp::Parameter(p) = node.op {
                vals[i] = Some(params[p].clone());
            }
        }
        let mut batch = ctx.batch()?;
        // Buffers (by device address) written by commands since the last barrier. A step reading none of them
        // records its first command without a barrier, so independent steps (a backward
        // pass's weight and input gradients, say) overlap on the device. Every step writes
        // fresh buffers, and no buffer is reused within the batch (recorders keep what they
        // touch until the batch is committed; freed values are held here until then too), so
        // a read after a write is the only hazard.
        let mut unsettled: Vec<u64> = vec![];
        let mut freed: Vec<Tensor> = vec![];
        for (k, step) in self.steps.iter().enumerate() {
            let first = batch.commands();
            if let Step::Reduce { pre: Some((_, a)), .. } = step {
                // written by the reduction's kernel (`RowReduction`)
                vals[*a] = Some(ctx.empty(g.nodes[*a].dtype, &g.nodes[*a].shape)?);
            }
            let reads: Vec<&Tensor> = match step {
                Step::Map { inputs, .. } | Step::Reduce { inputs, .. } => inputs.iter().map(|inp| value(&vals, inp.node)).collect::<Result<_>>()?,
                Step::Node(i) => g.nodes[*i].args.iter().map(|&a| value(&vals, a)).collect::<Result<_>>()?,
            };
            batch.next_concurrent(overlap_steps() && !reads.iter().any(|t| unsettled.contains(&t.buffer.address())));
            let written: Vec<Tensor> = match step {
                Step::Map { shape, exprs, inputs, outputs } => {
                    let ins = inputs.iter().map(|inp| inp.view(value(&vals, inp.node)?, shape, &[])).collect::<Result<Vec<_>>>()?;
                    let outs = outputs
                        .iter()
                        .map(|&o| ctx.empty(g.nodes[o].dtype, shape))
                        .collect::<Result<Vec<_>>>()?;
                    ctx.record_map_with(&mut batch, self.options.math, exprs, &ins.iter().collect::<Vec<_>>(), &outs.iter().collect::<Vec<_>>())?;
                    for (o, t) in outputs.iter().zip(&outs) {
                        vals[*o] = Some(t.clone());
                    }
                    outs
                }
                Step::Reduce { node, prologue, inputs, epilogue, finish, pre } => {
                    let rn = &g.nodes[*node];
                    let shape = &g.nodes[rn.args[0]].shape;
                    let (op, axes) = match &rn.op {
                        PlanOp::Reduce { op, axes } => (Reduction::Reduce(*op), axes.clone()),
                        PlanOp::ArgReduce { op, axis, tie_break } => {
                            (Reduction::Arg { op: *op, tie_break: *tie_break }, axis.map_or_else(|| (0..shape.len()).collect(), |a| vec![a]))
                        }
                        _ => return Err(invalid!("plan bug: reduce step on {:?}", rn.op)),
                    };
                    let kept_axes: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
                    let ins = inputs.iter().map(|inp| inp.view(value(&vals, inp.node)?, shape, &kept_axes)).collect::<Result<Vec<_>>>()?;
                    // with a finish, `out` holds the finished node (the reduction is not stored)
                    let stored = finish.as_ref().map_or(*node, |(_, f)| *f);
                    let out = ctx.empty(g.nodes[stored].dtype, &g.nodes[stored].shape)?;
                    let outs = epilogue.iter().map(|(_, e)| ctx.empty(g.nodes[*e].dtype, shape)).collect::<Result<Vec<_>>>()?;
                    let r = FusedReduce {
                        op,
                        prologue: prologue.clone(),
                        inputs: ins.iter().collect(),
                        shape: shape.clone(),
                        axes,
                        out: &out,
                        epilogue: epilogue.iter().zip(&outs).map(|((e, _), t)| (e.clone(), t)).collect(),
                    };
                    let fin = finish.as_ref().map(|(e, _)| Finish { reduced: rn.dtype, expr: e.clone() });
                    // A row reduction folds x in this kernel only where x varies along the rows
                    // (a parameter or a broadcast node bound as a stride-0 view does not): else
                    // its own kernel first, as before the fusion.
                    let fold_in = match *pre {
                        Some((p, a)) if !ins[p.of].strides.iter().zip(&ins[p.of].shape).enumerate().any(|(d, (st, n))| r.axes.contains(&d) && *n > 1 && *st != 0) => {
                            let PlanOp::Reduce { op, axes } = &g.nodes[a].op else { return Err(invalid!("plan bug: row reduction of {:?}", g.nodes[a].op)) };
                            ctx.record_reduce(&mut batch, *op, &ins[p.of], axes, value(&vals, a)?)?;
                            None
                        }
                        other => other.map(|(p, _)| p),
                    };
                    ctx.record_reduce_with_row_reduction(&mut batch, self.options.math, &r, fin.as_ref(), fold_in)?;
                    vals[stored] = Some(out.clone());
                    for ((_, e), t) in epilogue.iter().zip(&outs) {
                        vals[*e] = Some(t.clone());
                    }
                    let row_reduction = pre.map(|(_, a)| value(&vals, a).cloned()).transpose()?;
                    std::iter::once(out).chain(outs).chain(row_reduction).collect()
                }
                Step::Node(i) => {
                    let t = record_node(ctx, &mut batch, self.options, &g.nodes[*i], &vals)?;
                    vals[*i] = Some(t.clone());
                    vec![t]
                }
            };
            // A step that recorded nothing (a view) wrote nothing. One with a barrier among its
            // commands (in front of the first, or of an inner pass) settled everything before.
            if batch.commands() > first {
                if (first..batch.commands()).any(|c| !batch.is_concurrent(c)) {
                    unsettled.clear();
                }
                unsettled.extend(written.iter().map(|t| t.buffer.address()));
            }
            for &f in &self.frees[k] {
                freed.extend(vals[f].take());
            }
        }
        batch.finish()?;
        drop(freed);
        g.outputs.iter().map(|&o| value(&vals, o).cloned()).collect()
    }
}

/// Whether a run lets independent steps overlap (`NX_VULKAN_PLAN_OVERLAP=0` keeps a barrier
/// in front of every step, to measure what the overlap gains: the MLP step 170.7 -> 142.8 us
/// on the H200, stop 23). Read once.
fn overlap_steps() -> bool {
    static ON: once_cell::sync::Lazy<bool> = once_cell::sync::Lazy::new(|| std::env::var("NX_VULKAN_PLAN_OVERLAP").map_or(true, |v| v != "0"));
    *ON
}

fn value(vals: &[Option<Tensor>], node: usize) -> Result<&Tensor> {
    vals[node].as_ref().ok_or_else(|| invalid!("plan bug: node {node} used before it was computed or after it was freed"))
}

/// The exact f32 dot is an f64 GEMM rounded once to f32 (`Context::record_dot`). Written as
/// an f64 dot node and an elementwise conversion, the rounding joins the elementwise work that
/// reads the dot (bias, activation, residual: the epilogue) instead of being a kernel of its
/// own — the same bits, one dispatch and one f32 round trip through memory fewer.
fn widen_exact_dots(g: Graph, options: PlanOptions) -> Graph {
    if options.dot != DotPrecision::Exact || !g.nodes.iter().any(|n| matches!(n.op, PlanOp::Dot { .. }) && n.dtype == DType::F32) {
        return g;
    }
    let mut map = Vec::with_capacity(g.nodes.len());
    let mut nodes = Vec::with_capacity(g.nodes.len() + 4);
    for node in g.nodes {
        let args: Vec<usize> = node.args.iter().map(|&a| map[a]).collect();
        if matches!(node.op, PlanOp::Dot { .. }) && node.dtype == DType::F32 {
            nodes.push(PlanNode { op: node.op, args, shape: node.shape.clone(), dtype: DType::F64 });
            nodes.push(PlanNode { op: PlanOp::Convert, args: vec![nodes.len() - 1], shape: node.shape, dtype: DType::F32 });
        } else {
            nodes.push(PlanNode { args, ..node });
        }
        map.push(nodes.len() - 1);
    }
    Graph { params: g.params, outputs: g.outputs.iter().map(|&o| map[o]).collect(), nodes }
}

/// Records one non-elementwise node (or, from `eval_unfused`, any node as its own op).
fn record_node<'c>(ctx: &'c Context, batch: &mut Batch<'c>, options: PlanOptions, node: &PlanNode, vals: &[Option<Tensor>]) -> Result<Tensor> {
    let t = record_node_unchecked(ctx, batch, options, node, vals)?;
    if t.shape() != node.shape.as_slice() || t.dtype() != node.dtype {
        return Err(invalid!(
            "graph node {:?} says {}{:?}, computes {}{:?}",
            node.op,
            node.dtype,
            node.shape,
            t.dtype(),
            t.shape()
        ));
    }
    Ok(t)
}

fn record_node_unchecked<'c>(ctx: &'c Context, batch: &mut Batch<'c>, options: PlanOptions, node: &PlanNode, vals: &[Option<Tensor>]) -> Result<Tensor> {
    let arg = |k: usize| value(vals, node.args[k]);
    Ok(match &node.op {
        PlanOp::Parameter(_) => return Err(invalid!("plan bug: parameter recorded")),
        PlanOp::Reshape => {
            let x = arg(0)?;
            if x.is_contiguous() {
                x.reshape(&node.shape)?
            } else {
                ctx.contiguous_in(batch, x)?.reshape(&node.shape)?
            }
        }
        PlanOp::Broadcast(axes) => arg(0)?.broadcast(&node.shape, axes)?,
        PlanOp::Transpose(perm) => arg(0)?.transpose(perm)?,
        PlanOp::Slice { start, steps } => arg(0)?.slice(start, &node.shape, steps)?,
        PlanOp::Reverse(axes) => arg(0)?.reverse(axes)?,
        PlanOp::Reduce { op, axes } => {
            let out = ctx.empty(node.dtype, &node.shape)?;
            ctx.record_reduce(batch, *op, arg(0)?, axes, &out)?;
            out
        }
        PlanOp::ArgReduce { op, axis, tie_break } => {
            let out = ctx.empty(node.dtype, &node.shape)?;
            ctx.record_arg_reduce(batch, *op, arg(0)?, *axis, *tie_break, &out)?;
            out
        }
        PlanOp::Dot { contract_a, batch_a, contract_b, batch_b } => {
            let out = ctx.empty(node.dtype, &node.shape)?;
            ctx.record_dot(batch, options.dot, arg(0)?, contract_a, batch_a, arg(1)?, contract_b, batch_b, &out)?;
            out
        }
        PlanOp::Concatenate(axis) => {
            let parts = (0..node.args.len()).map(arg).collect::<Result<Vec<_>>>()?;
            let out = ctx.empty(node.dtype, &node.shape)?;
            ctx.record_concatenate(batch, &parts, *axis, &out)?;
            out
        }
        PlanOp::Sort { axis, direction } => {
            let out = ctx.empty(node.dtype, &node.shape)?;
            ctx.record_sort(batch, arg(0)?, *axis, *direction, &out)?;
            out
        }
        PlanOp::Argsort { axis, direction } => {
            let out = ctx.empty(node.dtype, &node.shape)?;
            ctx.record_argsort(batch, arg(0)?, *axis, *direction, &out)?;
            out
        }
        PlanOp::Cumulative { op, axis, reverse } => {
            let out = ctx.empty(node.dtype, &node.shape)?;
            ctx.record_cumulative(batch, *op, arg(0)?, *axis, *reverse, &out)?;
            out
        }
        PlanOp::Pad(config) => {
            let x = ctx.as_type_in(batch, arg(0)?, node.dtype)?;
            let v = ctx.as_type_in(batch, arg(1)?, node.dtype)?;
            let out = ctx.empty(node.dtype, &node.shape)?;
            ctx.record_pad(batch, &x, &v, config, &out)?;
            out
        }
        op if is_elementwise(op) => {
            // one node, its own kernel: the unfused reference
            let ins = node.args.iter().map(|&a| value(vals, a)?.broadcast_to(&node.shape)).collect::<Result<Vec<_>>>()?;
            let inputs: Vec<Expr> = (0..ins.len()).map(Expr::Input).collect();
            let e = elementwise_expr(node, &inputs, &ins.iter().map(|t| t.dtype()).collect::<Vec<_>>());
            let out = ctx.empty(node.dtype, &node.shape)?;
            ctx.record_map_with(batch, options.math, &[e], &ins.iter().collect::<Vec<_>>(), &[&out])?;
            out
        }
        op => return Err(invalid!("plan bug: {op:?} has no recording")),
    })
}

/// The expression of one elementwise node over its arguments' expressions (`args`, whose
/// types are `arg_types`), exactly as the eager op computes it.
fn elementwise_expr(node: &PlanNode, args: &[Expr], arg_types: &[DType]) -> Expr {
    let t = node.dtype;
    let a = |k: usize| args[k].clone();
    match &node.op {
        PlanOp::Constant(v) => Expr::Const { value: *v, dtype: t },
        PlanOp::Iota(axis) => Expr::Iota { axis: *axis, dtype: t },
        PlanOp::Unary(op) => Expr::unary(*op, a(0), t),
        PlanOp::Binary(op) => Expr::binary(*op, a(0), a(1), t),
        PlanOp::Select => Expr::select(a(0), a(1), a(2), t),
        PlanOp::Clip => clip_expr(a(0), a(1), a(2), t),
        // as_type to the same type is the tensor itself (bits kept, NaN payloads included)
        PlanOp::Convert if arg_types[0] == t => a(0),
        PlanOp::Convert => Expr::convert(a(0), t),
        PlanOp::Bitcast => Expr::Bitcast { arg: Box::new(a(0)), dtype: t },
        op => unreachable!("{op:?} is not elementwise"),
    }
}

impl Scheduler<'_> {
    /// Makes sure node `a`'s value exists before the step about to be pushed.
    fn need(&mut self, a: usize) {
        if let Some(&gi) = self.open_of.get(&a) {
            self.emit(gi);
        }
    }

    fn emit(&mut self, gi: usize) {
        let Some(group) = self.groups[gi].take() else { return };
        for r in &group.roots {
            self.open_of.remove(r);
        }
        let mut inputs: Vec<KernelInput> = vec![];
        let mut exprs = vec![];
        for &r in &group.roots {
            let e = self.expr(r, &group, &mut inputs, true);
            exprs.push(e);
        }
        for &r in &group.roots {
            self.produced_at.insert(r, self.steps.len());
        }
        self.steps.push(Step::Map { shape: group.shape, exprs, inputs, outputs: group.roots });
    }

    /// A reduction, its elementwise argument inlined as the prologue.
    fn add_reduce(&mut self, r: usize) {
        let a = self.g.nodes[r].args[0];
        let an = &self.g.nodes[a];
        let group = Group { shape: an.shape.clone(), roots: vec![] };
        let inline = is_elementwise(&an.op) && !self.materialised[a];
        let mut reads = vec![];
        if inline {
            self.leaf_reads(a, &group.shape, true, &mut reads);
        } else {
            reads.push(a);
        }
        for l in reads {
            self.need(l);
        }
        let mut inputs = vec![];
        let prologue = if inline {
            self.expr(a, &group, &mut inputs, true)
        } else {
            inputs.push(KernelInput { node: a, broadcast: false, kept: false });
            Expr::Input(0)
        };
        self.produced_at.insert(r, self.steps.len());
        self.steps.push(Step::Reduce { node: r, prologue, inputs, epilogue: vec![], finish: None, pre: None });
    }

    /// Writes materialised elementwise node `e` from the kernel of a reduction it reads, when
    /// it has the reduction's input shape, reads the reduced value broadcast back over the
    /// reduced axes, and reads nothing written after that kernel. Returns whether it did.
    fn add_epilogue(&mut self, e: usize) -> bool {
        let shape = self.g.nodes[e].shape.clone();
        let mut reads = vec![];
        self.leaf_reads(e, &shape, true, &mut reads);
        // the latest reduction step among the reads (its stored value: the reduction, or
        // the finish computed from it)
        let Some((k, r)) = reads.iter().filter_map(|&l| self.produced_at.get(&l).map(|&k| (k, l))).filter(|&(k, l)| self.step_value(k) == Some(l)).max()
        else {
            return false;
        };
        let Step::Reduce { node, .. } = &self.steps[k] else { return false };
        let rn = &self.g.nodes[*node];
        let value_shape = &self.g.nodes[r].shape;
        if self.g.nodes[rn.args[0]].shape != shape || !row_broadcast(&rn.op, value_shape, &shape) {
            return false;
        }
        let ready = reads.iter().all(|&l| l == r || self.stored_before(l, k));
        if !ready {
            return false;
        }
        let group = Group { shape, roots: vec![] };
        let Step::Reduce { inputs, .. } = &self.steps[k] else { return false };
        let mut inputs = inputs.clone();
        let expr = self.expr(e, &group, &mut inputs, true);
        let Step::Reduce { inputs: step_inputs, epilogue, .. } = &mut self.steps[k] else { return false };
        *step_inputs = inputs;
        epilogue.push((expr, e));
        self.produced_at.insert(e, k);
        true
    }

    /// Whether every use of `n` is `f` itself or inlined elementwise nodes whose uses are, in
    /// turn, only `f` (so `n` is needed nowhere but in `f`'s expression).
    fn only_feeds(&self, n: usize, f: usize) -> bool {
        self.consumers[n].iter().all(|&c| c == f || (is_elementwise(&self.g.nodes[c].op) && !self.materialised[c] && self.only_feeds(c, f)))
    }

    /// Whether `l`'s value exists before step `k` runs: an input, or written by an earlier
    /// step (not by a group still open, which is emitted later).
    fn stored_before(&self, l: usize, k: usize) -> bool {
        !self.open_of.contains_key(&l) && self.produced_at.get(&l).is_none_or(|&p| p < k)
    }

    /// The node a reduction step stores: its finish, or the reduction itself.
    fn step_value(&self, k: usize) -> Option<usize> {
        match &self.steps[k] {
            Step::Reduce { node, finish, .. } => Some(finish.as_ref().map_or(*node, |(_, f)| *f)),
            _ => None,
        }
    }

    /// Computes materialised elementwise node `f` of a reduction's shape as that reduction's
    /// finish, when the reduction feeds nothing else and `f` reads, besides it, only values
    /// already stored that are constant along the reduced axes (the reduced shape, or one
    /// element). Returns whether it did.
    fn add_finish(&mut self, f: usize) -> bool {
        let fshape = self.g.nodes[f].shape.clone();
        let mut reads = vec![];
        self.leaf_reads(f, &fshape, true, &mut reads);
        // the latest reduction read (earlier ones are stored inputs like any other)
        let Some((k, r)) = reads
            .iter()
            .filter(|&&l| matches!(self.g.nodes[l].op, PlanOp::Reduce { .. } | PlanOp::ArgReduce { .. }))
            .filter_map(|&l| self.produced_at.get(&l).map(|&k| (k, l)))
            .max()
        else {
            return false;
        };
        let Step::Reduce { node, epilogue, finish: None, .. } = &self.steps[k] else { return false };
        if *node != r || !epilogue.is_empty() || self.is_output[r] || !self.only_feeds(r, f) || self.g.nodes[r].shape != fshape {
            return false;
        }
        let ok = reads.iter().all(|&l| {
            l == r
                || (self.stored_before(l, k)
                    && (self.g.nodes[l].shape == fshape || numel(&self.g.nodes[l].shape) == 1))
        });
        if !ok {
            return false;
        }
        let group = Group { shape: fshape.clone(), roots: vec![] };
        let mut local = vec![];
        let expr = self.expr(f, &group, &mut local, true);
        if reads_iota(&expr) {
            // a finish runs once per output, where the kernel has no element index to give an
            // iota (record_reduce_finished refuses it): `f` stays a kernel of its own
            return false;
        }
        // the finish's inputs join the reduction's, seen along its kept axes
        let Step::Reduce { inputs, finish, .. } = &mut self.steps[k] else { return false };
        let index: Vec<usize> = local
            .iter()
            .map(|inp| {
                let key = if inp.node == r {
                    KernelInput { node: r, broadcast: false, kept: false }
                } else {
                    // the reduced shape along the kept axes; one element broadcast as usual
                    let kept = self.g.nodes[inp.node].shape == fshape;
                    KernelInput { node: inp.node, broadcast: !kept, kept }
                };
                inputs.iter().position(|x| *x == key).unwrap_or_else(|| {
                    inputs.push(key);
                    inputs.len() - 1
                })
            })
            .collect();
        *finish = Some((remap_inputs(&expr, &|i| index[i]), f));
        self.produced_at.insert(f, k);
        true
    }

    /// The steps, with each reduction's own result moved out of its inputs: in the epilogue
    /// expressions it becomes the input after the last one (`FusedReduce`'s convention).
    fn finish_reduces(self) -> Vec<Step> {
        self.steps
            .into_iter()
            .map(|step| match step {
                Step::Reduce { node, prologue, inputs, epilogue, finish, pre } => {
                    // The reduced value leaves the inputs and becomes input n: the reduction
                    // (read by the finish, or by the epilogue without a finish) or what is
                    // stored (the finish, read by the epilogue).
                    let stored = finish.as_ref().map_or(node, |(_, f)| *f);
                    let special = |k: &KernelInput| k.node == node || k.node == stored;
                    let kept: Vec<KernelInput> = inputs.iter().copied().filter(|k| !special(k)).collect();
                    let n = kept.len();
                    let mut next = 0;
                    let map: Vec<usize> = inputs
                        .iter()
                        .map(|k| {
                            if special(k) {
                                n
                            } else {
                                next += 1;
                                next - 1
                            }
                        })
                        .collect();
                    let remap = |i: usize| map[i];
                    let epilogue = epilogue.into_iter().map(|(e, o)| (remap_inputs(&e, &remap), o)).collect();
                    let finish = finish.map(|(e, f)| (remap_inputs(&e, &remap), f));
                    Step::Reduce { node, prologue: remap_inputs(&prologue, &remap), inputs: kept, epilogue, finish, pre }
                }
                other => other,
            })
            .collect()
    }

    /// The expression computing `n` inside a kernel of `group`'s shape.
    fn expr(&self, n: usize, group: &Group, inputs: &mut Vec<KernelInput>, root: bool) -> Expr {
        let node = &self.g.nodes[n];
        let inline = root
            || (is_elementwise(&node.op)
                && (node.shape == group.shape || self.broadcastable[n])
                && (!self.materialised[n] || (group.roots.contains(&n) && self.inline_size[n] < MAX_INLINE_NODES)));
        if !inline {
            let key = KernelInput { node: n, broadcast: node.shape != group.shape, kept: false };
            let j = inputs.iter().position(|k| *k == key).unwrap_or_else(|| {
                inputs.push(key);
                inputs.len() - 1
            });
            return Expr::Input(j);
        }
        let args: Vec<Expr> = node.args.iter().map(|&a| self.expr(a, group, inputs, false)).collect();
        let types: Vec<DType> = node.args.iter().map(|&a| self.g.nodes[a].dtype).collect();
        elementwise_expr(node, &args, &types)
    }

    /// Adds materialised elementwise node `n` to an open group of its shape, or opens one.
    fn add_root(&mut self, n: usize) {
        // Materialised values `n` reads as kernel inputs must exist before its kernel runs:
        // emit their groups now, unless they are in the group `n` joins and inline there.
        let shape = self.g.nodes[n].shape.clone();
        let target = (0..self.groups.len()).rev().find(|&gi| self.groups[gi].as_ref().is_some_and(|g| g.shape == shape));
        let mut reads = vec![];
        self.leaf_reads(n, &shape, true, &mut reads);
        let mut join = target;
        for r in reads {
            if let Some(&gi) = self.open_of.get(&r) {
                let inlines_there = Some(gi) == join && self.inline_size[r] < MAX_INLINE_NODES && self.g.nodes[r].shape == shape;
                if !inlines_there {
                    if Some(gi) == join {
                        join = None; // it must be written before n's kernel reads it
                    }
                    self.emit(gi);
                }
            }
        }
        match join {
            Some(gi) => self.groups[gi].as_mut().unwrap().roots.push(n),
            None => self.groups.push(Some(Group { shape, roots: vec![n] })),
        }
        let gi = match join {
            Some(gi) => gi,
            None => self.groups.len() - 1,
        };
        self.open_of.insert(n, gi);
    }

    /// The materialised nodes `n`'s inlined expression reaches (where inlining stops).
    fn leaf_reads(&self, n: usize, shape: &[usize], root: bool, out: &mut Vec<usize>) {
        let node = &self.g.nodes[n];
        let inline = root || (is_elementwise(&node.op) && !self.materialised[n] && (node.shape == shape || self.broadcastable[n]));
        if !inline {
            if !out.contains(&n) {
                out.push(n);
            }
            return;
        }
        for &a in &node.args {
            self.leaf_reads(a, shape, false, out);
        }
    }
}

/// One element's stored bytes (little-endian, the node's type) as the engine's scalar.
/// (For `PlanOp::Constant`: what the Elixir side encodes with the node's own type.)
pub fn scalar_from_bytes(t: DType, bytes: &[u8]) -> Result<Scalar> {
    if bytes.len() != t.size() {
        return Err(invalid!("constant of type {t} needs {} bytes, got {}", t.size(), bytes.len()));
    }
    let mut raw = [0u8; 8];
    raw[..bytes.len()].copy_from_slice(bytes);
    let u = u64::from_le_bytes(raw);
    Ok(match t {
        DType::F16 => Scalar::F(half::f16::from_bits(u as u16).to_f64()),
        DType::BF16 => Scalar::F(half::bf16::from_bits(u as u16).to_f64()),
        DType::F32 => Scalar::F(f32::from_bits(u as u32) as f64),
        DType::F64 => Scalar::F(f64::from_bits(u)),
        DType::S8 => Scalar::I(u as u8 as i8 as i64),
        DType::S16 => Scalar::I(u as u16 as i16 as i64),
        DType::S32 => Scalar::I(u as u32 as i32 as i64),
        DType::S64 => Scalar::I(u as i64),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Scalar::U(u),
        other => return Err(invalid!("constants of type {other} are not supported in plans")),
    })
}

fn validate(g: &Graph) -> Result<()> {
    for (i, node) in g.nodes.iter().enumerate() {
        if let Some(&a) = node.args.iter().find(|&&a| a >= i) {
            return Err(invalid!("graph node {i} reads node {a}: nodes must come after their arguments"));
        }
        crate::tensor::checked_numel(&node.shape)?;
        let arity = match &node.op {
            PlanOp::Parameter(p) => {
                let Some((t, shape)) = g.params.get(*p) else {
                    return Err(invalid!("graph node {i} is parameter {p} of {}", g.params.len()));
                };
                if *t != node.dtype || *shape != node.shape {
                    return Err(invalid!("graph node {i}: parameter {p} is {t}{shape:?}, node says {}{:?}", node.dtype, node.shape));
                }
                Some(0)
            }
            PlanOp::Constant(_) | PlanOp::Iota(_) => Some(0),
            PlanOp::Unary(_) | PlanOp::Convert | PlanOp::Bitcast | PlanOp::Reshape | PlanOp::Broadcast(_) => Some(1),
            PlanOp::Transpose(_) | PlanOp::Slice { .. } | PlanOp::Reverse(_) | PlanOp::Reduce { .. } | PlanOp::ArgReduce { .. } => Some(1),
            PlanOp::Sort { .. } | PlanOp::Argsort { .. } | PlanOp::Cumulative { .. } => Some(1),
            PlanOp::Binary(_) | PlanOp::Dot { .. } | PlanOp::Pad(_) => Some(2),
            PlanOp::Select | PlanOp::Clip => Some(3),
            PlanOp::Concatenate(_) => None,
        };
        if let Some(k) = arity {
            if node.args.len() != k {
                return Err(invalid!("graph node {i} ({:?}) takes {k} arguments, has {}", node.op, node.args.len()));
            }
        } else if node.args.is_empty() {
            return Err(invalid!("graph node {i}: concatenate of nothing"));
        }
        if let PlanOp::Reduce { axes, .. } = &node.op {
            let x = &g.nodes[node.args[0]].shape;
            if let Some(&a) = axes.iter().find(|&&a| a >= x.len()) {
                return Err(invalid!("graph node {i}: reduction axis {a} out of range for shape {x:?}"));
            }
            let kept: Vec<usize> = (0..x.len()).filter(|d| !axes.contains(d)).map(|d| x[d]).collect();
            if numel(&kept) != numel(&node.shape) {
                return Err(invalid!("graph node {i}: reducing {x:?} over {axes:?} gives {kept:?}, node says {:?}", node.shape));
            }
        }
        if is_elementwise(&node.op) {
            // arguments broadcast to the node's shape (Nx's trailing-axis rule)
            for &a in &node.args {
                let s = &g.nodes[a].shape;
                let lead = node.shape.len().checked_sub(s.len());
                let fits = lead.is_some_and(|lead| s.iter().enumerate().all(|(d, &x)| x == 1 || x == node.shape[lead + d]));
                if !fits {
                    return Err(invalid!("graph node {i} ({:?}, shape {:?}) cannot broadcast argument of shape {s:?}", node.op, node.shape));
                }
            }
        }
    }
    if let Some(&o) = g.outputs.iter().find(|&&o| o >= g.nodes.len()) {
        return Err(invalid!("graph output {o} is not a node"));
    }
    Ok(())
}

impl Graph {
    /// Runs every node as its own op (one kernel per elementwise node, views as views), in
    /// one batch: what the eager backend computes, for comparing a plan against.
    pub fn eval_unfused(&self, ctx: &Context, params: &[Tensor]) -> Result<Vec<Tensor>> {
        self.eval_unfused_with(ctx, params, PlanOptions::default())
    }

    /// [`Graph::eval_unfused`] with `options` (the eager backend under that precision).
    pub fn eval_unfused_with(&self, ctx: &Context, params: &[Tensor], options: PlanOptions) -> Result<Vec<Tensor>> {
        validate(self)?;
        let mut vals: Vec<Option<Tensor>> = vec![None; self.nodes.len()];
        let mut batch = ctx.batch()?;
        for (i, node) in self.nodes.iter().enumerate() {
            vals[i] = Some(match node.op {
                PlanOp::Parameter(p) => params.get(p).ok_or_else(|| invalid!("missing input {p}"))?.clone(),
                _ => record_node(ctx, &mut batch, options, node, &vals)?,
            });
        }
        batch.finish()?;
        self.outputs.iter().map(|&o| value(&vals, o).cloned()).collect()
    }
}
