//! Reductions (sum, product, max, min, all, any) and arg-reductions (argmax, argmin) over any
//! set of axes of any tensor view, alone or fused with the elementwise work around them.
//!
//! **Recording.** `record_reduce`/`record_arg_reduce` record into a caller's `Batch` and write a
//! caller-allocated output (contiguous from the start of its buffer, one element per kept
//! position); `reduce`/`arg_reduce` allocate it and record into a batch of their own.
//! `record_reduce_fused` ([`FusedReduce`]) reduces an elementwise *prologue* over several input
//! views (what `record_map` would write into a temporary) and may write elementwise *epilogue*
//! outputs of the input shape that read the reduced value broadcast back: softmax is a max, then
//! one fused sum whose prologue is `exp(x - max)` and whose epilogue is `exp(x - max) / sum`
//! (2 dispatches). A *finish* ([`Finish`]) maps the reduced value (with inputs constant along
//! the reduced axes) before it is written: logsumexp is a max, then a sum of `exp(x - max)`
//! finished as `log(sum) + max`; mean and variance are a sum finished as `/ n`, then a sum of
//! `(x - mean)^2` finished as `/ n` (2 dispatches each). A plain reduction is the fused one with
//! the prologue `Input(0)`: one kernel generator serves both, so the folding order below is
//! literally shared. The fused result is
//! bit-identical to the unfused sequence (map, plain reduction, map): each prologue value is
//! encoded to the prologue's type and decoded again before it is folded, and the epilogue reads
//! the reduced value from its stored bits (a finish likewise reads the reduced value's bits, and
//! the epilogue the finished value's). Under `PerOutput` and `PerGroup` the finish and the
//! epilogue run in the reduction kernel (the invocation or workgroup that finished output `o`
//! then walks `o`'s elements); under `Split` each is one more elementwise dispatch after pass 2
//! ([`epilogue_in_kernel`], [`fused_reduce_dispatches`]).
//!
//! Subexpressions of a prologue or epilogue that are constant along the reduced axes (they read
//! only row-constant views, the reduced value and constants: layernorm's `sum / n` and
//! `rsqrt(var + eps)`) are evaluated once per output instead of once per element, and handed
//! to the per-element code as their stored bits, exactly as an unfused kernel writing them
//! would ([`hoist_row_constant`]).
//!
//! The input views (and the iotas a prologue or epilogue reads, and the row-major index where
//! epilogue outputs are written — all linear in the coordinates) are regrouped as
//! `[kept axes..., reduced axes...]` (adjacent axes merged where every view's strides allow), so
//! output element `o` (row-major over the kept axes) reduces the elements `r = 0..R` (row-major
//! over the reduced axes, in their original order). Kernels read the views through their
//! strides: no copy is made; a view constant along every reduced axis (a row maximum broadcast
//! back) is read once per output. Kernels are keyed by the expressions, types, strategy kind,
//! merged ranks and which views are row-constant — never by sizes.
//!
//! **Fixed order.** The strategy is chosen from the shape alone (never from the device, its
//! subgroup size or its timing), and each strategy combines in a fixed order, so reruns are
//! bit-identical and the same shader gives the same bits on every device:
//! - [`Strategy::PerOutput`]: one invocation per output, a sequential loop over `r` (exactly
//!   Nx.BinaryBackend's order) — short reductions or very many outputs;
//! - [`Strategy::PerGroup`]: one workgroup (256 invocations) per output; invocation `t` folds
//!   `r = t, t+256, ...` in that order, then a fixed shared-memory tree combines the 256 partials
//!   (for `h = 128, 64, ..., 1`: partial `t < h` absorbs partial `t + h`); where the device
//!   has subgroup shuffles, the levels `h <` subgroup size run in the first subgroup's
//!   registers (`subgroupShuffleDown`) instead of shared memory — the same pairs in the same
//!   order, so the same bits on every device whatever its subgroup size (so do the trees of a
//!   row extreme or row sum computed in the next kernel, `pre:`);
//! - [`Strategy::Split`]: few outputs over long reductions. Each output's `R` elements are cut
//!   into `segments` contiguous segments of [`split_len`] `L` elements (`ceil(R / segments)`
//!   rounded up to a multiple of [`ROUND`] = 2048; the last segment shorter, none empty).
//!   Pass 1 gives each (output, segment) pair a workgroup that folds its segment exactly like
//!   `PerGroup` (invocation `t` takes `r0+t, r0+t+256, ...`, then the tree) and writes a
//!   partial (value, index) to scratch memory; pass 2 gives each output a workgroup that folds
//!   its partials, in segment order, exactly like `PerGroup` again (partial `t, t+256, ...`,
//!   then the tree).
//!
//! Choice ([`choose_strategy`], `outputs` results of `R` elements each): `PerOutput` when
//! `R < 256` or `outputs >= 32768`; `Split` when `R >= 8192` and `outputs < 256`, or
//! `R >= 65536` and `outputs < 1024`; `PerGroup` otherwise. A split aims at about
//! [`SPLIT_GROUPS`] = 1024 workgroups in pass 1, each segment at least one round:
//! `L = ceil(R / min(ceil(R / 2048), ceil(1024 / outputs)))` rounded up to a multiple of 2048,
//! `segments = ceil(R / L)`. 16 Mi elements into one output are 1024 segments of 16 Ki, 1 Mi
//! elements 512 segments of 2048.
//!
//! **Bits versus stop 30's split** (4096 workgroups aimed at): a split shape whose segment
//! count changes (`ceil(R / 2048) > ceil(1024 / outputs)`, e.g. one output of more than 2 Mi
//! elements) folds float sums and products in another tree, so their last bits may differ as
//! described below; every other result is unchanged.
//!
//! **Arg-reductions of f32 in order.** In the general loop of an f32 argmax/argmin over its
//! input (`PerOutput`, long `PerGroup` rows and `Split`'s pass 1; not short rows, not pass 2,
//! not the tree) an invocation's candidates arrive in increasing index, so one beats the
//! accumulator exactly when its order key is greater for argmax (less for argmin; with `High`
//! ties, not less / not greater), and the loop folds the keys alone, the value rebuilt from the
//! key afterwards. A candidate `comb` would skip (NaN against a non-NaN first element, or the
//! reverse) gets a key nothing takes; under a NaN first element the NaN candidates all share
//! one key, so they tie. The choices `comb` makes, with about half its instructions (the 16 Mi
//! argmax's pass 1 39.8 -> 31.2 us on the H200).
//!
//! **Narrow rows.** A `PerGroup` row of 257–2,048 elements ([`row_k`] up to 8) may run on a workgroup
//! of 64 or 128 invocations ([`narrow_lanes`]) instead of 256: invocation `t` then holds the
//! partials `t, t + lanes, ...` of the 256 above, folds each exactly as stated, and takes the
//! tree's levels `h >= lanes` in its own registers (partial `j` absorbs `j + h / lanes`)
//! before the workgroup tree continues from `h = lanes / 2` — the same pairs in the same order,
//! so the same bits. Only where the per-element code is cheap ([`narrow_lanes`]): library
//! math inlined for 16 candidates gave slower kernels on the H200, and slow builds.
//!
//! **Loads in flight.** Every strategy's loop works in rounds of [`UNROLL`] = 8 candidates of
//! its sequence (`r, r+step, ..., r+7*step`; step 1 for `PerOutput`, 256 otherwise): the round
//! first reads all 8 raw elements (straight-line code: 8 independent loads in flight per
//! invocation), then decodes and combines them into the invocation's single accumulator in
//! increasing `r`; fewer than 8 left are taken one at a time. The order of combination is
//! exactly the sequential order stated above, so the unrolling itself changes no bit.
//!
//! **Bits versus the previous layout** (`Split` only for `R >= 65536` and `outputs < 256`, at most
//! 256 segments of at least 16 Ki elements, and pass 2 a sequential loop of one invocation per
//! output): `PerOutput` and `PerGroup` fold in the same order as before, so every shape that
//! keeps its strategy gives the same bits. Shapes that now `Split` (all former `Split` shapes,
//! plus `8192 <= R < 65536` with `outputs < 256` and `R >= 65536` with `256 <= outputs < 1024`,
//! formerly `PerGroup`) combine in a different tree: float sums and products may differ in the
//! last bits of the f64 accumulator, which shows in f64 outputs and (rarely, after the single
//! rounding) in f32/f16/bf16 outputs. Integer sums and products (wrapping in 64 bits, hence
//! associative), all/any, max/min and argmax/argmin (index-carrying partials: exactly the
//! sequential answer) give the same bits as before for every shape.
//!
//! **Numerics** (Nx.BinaryBackend's contract): float sums and products accumulate in f64 and are
//! rounded once to the output type; integer sums and products accumulate in 64 bits and wrap to
//! the output width. Max/min compare in the input's own domain; a NaN anywhere gives NaN; among
//! equal values (including -0.0 and +0.0) the first in row-major order wins. Every
//! max/min/argmax/argmin partial carries the index of its element, so the tree combination
//! reproduces the sequential answer exactly. Argmax/argmin follow Nx.BinaryBackend's sequential
//! scan, where every comparison with NaN is false (/work/nxdeps/SEMANTICS.md): NaNs are ignored,
//! unless the first element is NaN — then nothing beats it and the result is 0 (`Low`) or the
//! index of the last NaN (`High`, since NaN ties with NaN there); otherwise the lowest (`Low`) or
//! highest (`High`) index of the extreme value. Empty reductions give the identity: sum 0, product 1, max -Inf
//! (the type's minimum for integers), min +Inf (the type's maximum), all 1, any 0, and index 0
//! for argmax/argmin.

use crate::dtype::{DType, Kind};
use crate::elementwise::{compute_type, decode_with, embed_exprs, encode_with, libraries, BinaryOp, EmbeddedExprs, Expr, FloatMath, UnaryOp};
pub(crate) use crate::elementwise::{buf_type, decode, encode, storage_type, to_domain, wrap};
use crate::error::{invalid, Result};
use crate::params::ParamBlock;
use crate::submit::Batch;
use crate::tensor::{checked_numel, contiguous_strides, Tensor};
use crate::Context;
use std::fmt::Write;

/// A reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Product,
    Max,
    Min,
    /// 1 when every element is non-zero (NaN counts as non-zero).
    All,
    /// 1 when some element is non-zero.
    Any,
}

/// An arg-reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgOp {
    ArgMax,
    ArgMin,
}

/// Which index an arg-reduction returns when the extreme value occurs more than once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TieBreak {
    Low,
    High,
}

/// What a fused reduction computes: a reduction, or an arg-reduction (the row-major index over
/// the reduced axes, in their original order, of the extreme element).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduction {
    Reduce(ReduceOp),
    Arg { op: ArgOp, tie_break: TieBreak },
}

impl From<ReduceOp> for Reduction {
    fn from(op: ReduceOp) -> Reduction {
        Reduction::Reduce(op)
    }
}

impl Reduction {
    fn comb(self) -> Comb {
        match self {
            Reduction::Reduce(ReduceOp::Sum) => Comb::Sum,
            Reduction::Reduce(ReduceOp::Product) => Comb::Product,
            Reduction::Reduce(ReduceOp::Max) => Comb::Extreme { max: true, arg: false, high: false },
            Reduction::Reduce(ReduceOp::Min) => Comb::Extreme { max: false, arg: false, high: false },
            Reduction::Reduce(ReduceOp::All) => Comb::All,
            Reduction::Reduce(ReduceOp::Any) => Comb::Any,
            Reduction::Arg { op, tie_break } => Comb::Extreme { max: op == ArgOp::ArgMax, arg: true, high: tie_break == TieBreak::High },
        }
    }
}

/// A reduction with the elementwise work feeding it (prologue) and consuming it (epilogue) in
/// its own kernels: [`Context::record_reduce_fused`].
///
/// **Exactness contract.** The results are bit-identical to the unfused sequence: `record_map`
/// of `prologue` into a temporary of the prologue's type and `shape`, the plain reduction
/// ([`Context::record_reduce`] / [`Context::record_arg_reduce`]) of that temporary over `axes`
/// into `out`, then `record_map` of each epilogue expression with `out` broadcast back to
/// `shape` as input `inputs.len()` (with a [`Finish`], the plain reduction writes a temporary
/// of `Finish::reduced` and `record_map` of the finish over the kept positions writes `out`).
/// The fused kernel picks the same [`Strategy`] from the same
/// (outputs, reduced length) and folds in the same order; every prologue value is encoded to the
/// prologue's type and decoded again, and the epilogue reads the reduced value from its encoded
/// bits, exactly as the temporaries would be written and read.
pub struct FusedReduce<'a> {
    pub op: Reduction,
    /// The value reduced: an elementwise expression over `inputs` (and `Expr::Iota` over
    /// `shape`), evaluated at each element of `shape` exactly as `Context::record_map` would
    /// (every node rounded to its own type).
    pub prologue: Expr,
    /// Views of shape `shape` (broadcast axes have stride 0, transposes/slices any strides).
    pub inputs: Vec<&'a Tensor>,
    pub shape: Vec<usize>,
    /// Reduced axes of `shape` (any set, any order; empty means none).
    pub axes: Vec<usize>,
    /// Contiguous from the start of its buffer (a new tensor), numel = product of the kept axes
    /// (any shape: with or without the reduced axes as 1s), dtype = the reduction's output type.
    /// Must not overlap `inputs`.
    pub out: &'a Tensor,
    /// Elementwise expressions over `inputs` plus `Expr::Input(inputs.len())` = this element's
    /// reduced value (as read back from `out`), each written to its tensor: contiguous from the
    /// start of its buffer, shape `shape`, the expression's type. Must not overlap `inputs`
    /// or `out`. Runs in the reduction's kernel unless the strategy is `Split`
    /// ([`epilogue_in_kernel`]); then it is one more elementwise dispatch.
    pub epilogue: Vec<(Expr, &'a Tensor)>,
}

impl<'a> FusedReduce<'a> {
    /// The plain reduction of `x` over `axes` into `out`: no prologue, epilogue or finish.
    pub fn plain(op: Reduction, x: &'a Tensor, axes: &[usize], out: &'a Tensor) -> FusedReduce<'a> {
        FusedReduce {
            op,
            prologue: Expr::Input(0),
            inputs: vec![x],
            shape: x.shape.clone(),
            axes: axes.to_vec(),
            out,
            epilogue: vec![],
        }
    }
}

/// The elementwise step between a reduction and its output
/// ([`Context::record_reduce_finished`]), evaluated once per output element:
/// `expr` over `FusedReduce::inputs` (only inputs constant along every reduced axis — stride 0
/// there, like a kept-shape tensor broadcast back — read at the output's position) plus
/// `Expr::Input(inputs.len())` = the reduced value rounded to `reduced` (as the unfused
/// reduction would write it). `expr`'s type is `out`'s. Unfused, it is `record_map` over the
/// kept positions. No iota.
#[derive(Clone, Debug, PartialEq)]
pub struct Finish {
    /// The type the reduction itself writes (Nx's reduction result type).
    pub reduced: DType,
    pub expr: Expr,
}

/// A row max, min or sum computed at the start of another reduction's kernel
/// ([`Context::record_reduce_with_row_reduction`]), instead of by a kernel of its own:
/// softmax's and logsumexp's `max(x)` inside the kernel that sums `exp(x - max)`, layernorm's
/// `sum(x)` inside the one that sums `(x - sum / n)^2`. Input `into` of the reduction (f32,
/// constant along the reduced axes: the row reduction's tensor broadcast back) is not read
/// but computed: `op` over input `of` (f32, read by the prologue) along each row, which the
/// kernel also writes into `into`'s tensor at the row's position, as the plain reduction of
/// `of` would have. The same bits as that plain reduction: an f32 extreme does not depend on
/// the order it is folded in (ties and NaNs are decided by index: [`Comb::Extreme`]'s rule is
/// a total order); a sum is folded exactly as the plain kernel folds it (f64 partials over the
/// same elements, combined in the same pairs). Only for short rows
/// ([`row_reduction_fits`]), whose elements every invocation already holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowReduction {
    pub of: usize,
    pub into: usize,
    /// Max, Min or Sum.
    pub op: ReduceOp,
}

/// Whether a reduction of `shape` over `axes` to `out` reads its rows whole (the short-row
/// `PerGroup` form), so that a [`RowReduction`] can be computed in its kernel.
pub fn row_reduction_fits(shape: &[usize], axes: &[usize], out: DType) -> Result<bool> {
    let (outputs, len) = sizes(shape, &reduced_axes(shape, axes)?);
    let strategy = strategy_for(outputs, len, out);
    Ok(outputs > 0 && row_k(strategy, len) > 0)
}

/// How a reduction is mapped onto the device (a function of the shape only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    PerOutput,
    PerGroup,
    Split { segments: u32 },
}

/// Invocations per workgroup in every reduction kernel.
const LOCAL: u32 = 256;

/// Elements each invocation reads before it combines any of them (loads in flight).
pub const UNROLL: usize = 8;

/// Elements a workgroup reads in one unrolled round (`LOCAL * UNROLL`): a `Split` segment is at
/// least this long.
pub const ROUND: usize = LOCAL as usize * UNROLL;

/// The most candidates per invocation a short `PerGroup` row is read with all loads issued at
/// once (rows of up to `LOCAL * ROW_K_MAX` elements; [`row_k`]).
pub const ROW_K_MAX: usize = 16;

/// Candidates per invocation of a `PerGroup` reduction over rows of `len` elements that reads
/// them all before combining any (`ceil(len / LOCAL)`), or 0 for the general loop (longer
/// rows, and the other strategies). The fold order is the general loop's either way.
pub fn row_k(strategy: Strategy, len: usize) -> u32 {
    if strategy == Strategy::PerGroup && len > 0 && len <= LOCAL as usize * ROW_K_MAX {
        len.div_ceil(LOCAL as usize) as u32
    } else {
        0
    }
}

/// The most candidates an invocation of a narrow short-row workgroup loads before combining
/// any ([`narrow_lanes`]).
pub const NARROW_LOADS: usize = 16;

/// Invocations per workgroup for a short row read `row_k` candidates per partial: `LOCAL / m`
/// for the largest m in {4, 2} with `m * row_k <= NARROW_LOADS` (and lanes no fewer than the
/// subgroup size), else `LOCAL`. Each invocation then holds m of the 256 partials and loads
/// all their candidates at once: a 1024-element row is 64 invocations × 16 loads instead of
/// 256 × 4, so more rows are resident at once, with 4× the bytes in flight per invocation.
/// The fold order is unchanged (`Spec::source`), so the bits are too. `narrow` is false for
/// `NX_VULKAN_NARROW_ROWS=0`, and the caller passes false where the prologue has per-element
/// library math ([`cheap_per_element`]) or the epilogue is unrolled over the kept prologue
/// values: each of the 16 candidates inlines that code, and softmax's sum (exp, and a quotient
/// unrolled) ran slower on the H200 (:fast 33.8 -> 37.5 us), while the fused-reduction test
/// binary, whose random prologues hold f64 library math, took 362 s on lavapipe (partly
/// beside a build) instead of 43-54 s. Layernorm's variance (`(x - mean)^2`, the mean
/// row-constant) gained (:fast 46.4 -> 42.9 us).
pub fn narrow_lanes(row_k: u32, narrow: bool, subgroup_size: u32) -> u32 {
    if !narrow || row_k == 0 {
        return LOCAL;
    }
    [4u32, 2]
        .into_iter()
        .find(|&m| (m * row_k) as usize <= NARROW_LOADS && LOCAL / m >= subgroup_size)
        .map_or(LOCAL, |m| LOCAL / m)
}

/// Workgroups (outputs × segments) a `Split` reduction aims for in pass 1. 1024 rather than
/// 4096 (stop 31): on the H200 the 16 Mi-element f32 sum's pass 1 ran 26.9 -> 24.5 us, the
/// argmax's 31.2 -> 27.7 (2048: 25.2 / 28.5; 512: 27.6 / 29.4; bench/results/
/// 2026-12-04-h200-stop31, run 1). Longer segments keep each workgroup loading for longer
/// between its tree and its store, and pass 2 folds a quarter of the partials.
pub const SPLIT_GROUPS: usize = 1024;

/// The strategy for `outputs` results each reducing `len` elements.
pub fn choose_strategy(outputs: usize, len: usize) -> Strategy {
    if len < 256 || outputs >= 32768 {
        Strategy::PerOutput
    } else if (len >= 4 * ROUND && outputs < 256) || (len >= 32 * ROUND && outputs < 1024) {
        // About SPLIT_GROUPS workgroups in all, each segment a whole number of rounds (so only
        // the last segment has a tail); at least 2 segments here (3 below 256 outputs: rounding
        // a segment up to whole rounds can cut 4 or 5 to 3), never an empty one.
        let by_len = len.div_ceil(ROUND);
        let by_groups = SPLIT_GROUPS.div_ceil(outputs);
        let seg_len = len.div_ceil(by_len.min(by_groups)).next_multiple_of(ROUND);
        Strategy::Split { segments: len.div_ceil(seg_len) as u32 }
    } else {
        Strategy::PerGroup
    }
}

/// The segment length of `Split { segments }` over `len` elements: `ceil(len / segments)`
/// rounded up to a whole number of rounds ([`ROUND`]).
pub fn split_len(len: usize, segments: u32) -> usize {
    len.div_ceil(segments as usize).next_multiple_of(ROUND)
}

/// The strategy a reduction (fused or not) of a tensor of `shape` over `axes` into type `out`
/// takes: [`choose_strategy`] of (kept elements, reduced elements), except that complex outputs
/// never split (a complex partial does not fit the split strategy's 64-bit scratch slots).
pub fn reduction_strategy(shape: &[usize], axes: &[usize], out: DType) -> Result<Strategy> {
    let reduced = reduced_axes(shape, axes)?;
    let (outputs, len) = sizes(shape, &reduced);
    Ok(strategy_for(outputs, len, out))
}

/// Whether a fused reduction's epilogue (and finish) runs inside the reduction kernel
/// (`PerOutput` and `PerGroup`: the invocation or workgroup that finishes an output writes its
/// elements). Under `Split` the epilogue needs the finished value of every segment, so it is a
/// separate elementwise dispatch after the two passes, and so is the finish (both still
/// recorded by `record_reduce_fused`). `out` as for [`fused_reduce_dispatches`].
pub fn epilogue_in_kernel(shape: &[usize], axes: &[usize], out: DType) -> Result<bool> {
    Ok(!matches!(reduction_strategy(shape, axes, out)?, Strategy::Split { .. }))
}

/// The dispatches `record_reduce_fused` records: 1 (`PerOutput`, `PerGroup`) or 2 (`Split`),
/// plus, under `Split`, 1 for a finish and 1 for an epilogue; 0 when there is nothing to write.
/// `out` is the type the reduction itself writes (`Finish::reduced` when finishing).
pub fn fused_reduce_dispatches(shape: &[usize], axes: &[usize], out: DType, epilogue: bool, finish: bool) -> Result<usize> {
    let reduced = reduced_axes(shape, axes)?;
    let (outputs, len) = sizes(shape, &reduced);
    if outputs == 0 {
        return Ok(0);
    }
    Ok(match strategy_for(outputs, len, out) {
        Strategy::Split { .. } => 2 + epilogue as usize + finish as usize,
        _ => 1,
    })
}

fn strategy_for(outputs: usize, len: usize, out: DType) -> Strategy {
    match choose_strategy(outputs, len) {
        Strategy::Split { .. } if out.is_complex() => Strategy::PerGroup,
        s => s,
    }
}

/// Which axes of `shape` are reduced; repeated or out-of-range axes are errors.
fn reduced_axes(shape: &[usize], axes: &[usize]) -> Result<Vec<bool>> {
    let mut reduced = vec![false; shape.len()];
    for &a in axes {
        if a >= shape.len() {
            return Err(invalid!("reduction axis {a} out of range for shape {shape:?}"));
        }
        if std::mem::replace(&mut reduced[a], true) {
            return Err(invalid!("reduction axes {axes:?} repeat axis {a}"));
        }
    }
    Ok(reduced)
}

/// (outputs, reduced length).
fn sizes(shape: &[usize], reduced: &[bool]) -> (usize, usize) {
    let kept: usize = shape.iter().zip(reduced).filter(|(_, &r)| !r).map(|(n, _)| n).product();
    let len: usize = shape.iter().zip(reduced).filter(|(_, &r)| r).map(|(n, _)| n).product();
    (kept, len)
}

/// The result shape of reducing `shape` over `axes` (reduced axes dropped, or kept as 1s).
pub fn reduced_shape(shape: &[usize], axes: &[usize], keep_axes: bool) -> Result<Vec<usize>> {
    let reduced = reduced_axes(shape, axes)?;
    Ok((0..shape.len()).filter_map(|d| if reduced[d] { keep_axes.then_some(1) } else { Some(shape[d]) }).collect())
}

/// The combine rule a kernel is generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Comb {
    Sum,
    Product,
    All,
    Any,
    /// `max`: larger wins; `arg`: the result is the index; `high`: ties go to the higher index.
    Extreme { max: bool, arg: bool, high: bool },
}

/// An index sequence a fused kernel walks alongside the reduction: an input view's element
/// index, or an iota's value (the flat row-major index over `shape`, which is also where an
/// epilogue output is written, or one coordinate). All are linear in the coordinates of
/// `shape`, so one (offset, strides) description — merged like the input's strides — serves all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum StreamKind {
    Input(usize),
    Flat,
    Coord(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Stream {
    kind: StreamKind,
    /// The same index for every reduced element of an output (all reduced strides 0, e.g. a
    /// row maximum broadcast back): read once per output, not per element.
    row_const: bool,
}

/// Marks the inputs `e` reads (indices beyond `inputs` are ignored: an epilogue's reduced
/// value), whether it reads the flat iota, and the iota coordinates it reads.
fn expr_uses(e: &Expr, inputs: &mut [bool], flat: &mut bool, coords: &mut Vec<usize>) {
    match e {
        Expr::Input(j) => {
            if let Some(u) = inputs.get_mut(*j) {
                *u = true;
            }
        }
        Expr::Const { .. } => {}
        Expr::Iota { axis: None, .. } => *flat = true,
        Expr::Iota { axis: Some(a), .. } => {
            if !coords.contains(a) {
                coords.push(*a);
            }
        }
        Expr::Unary { arg, .. } | Expr::Convert { arg, .. } | Expr::Bitcast { arg, .. } => expr_uses(arg, inputs, flat, coords),
        Expr::Binary { lhs, rhs, .. } => {
            expr_uses(lhs, inputs, flat, coords);
            expr_uses(rhs, inputs, flat, coords);
        }
        Expr::Select { pred, on_true, on_false, .. } => {
            expr_uses(pred, inputs, flat, coords);
            expr_uses(on_true, inputs, flat, coords);
            expr_uses(on_false, inputs, flat, coords);
        }
    }
}

/// Drops size-1 axes and merges neighbours `i, i+1` whose layout is row-major-compatible
/// (`stride[i] == stride[i+1] * size[i+1]`): the row-major linear index over the group is kept.
pub(crate) fn merge_dims(dims: &[(usize, isize)]) -> Vec<(usize, isize)> {
    let mut out: Vec<(usize, isize)> = vec![];
    for &(n, s) in dims.iter().filter(|d| d.0 != 1) {
        match out.last_mut() {
            Some(last) if last.1 == s * n as isize => *last = (last.0 * n, s),
            _ => out.push((n, s)),
        }
    }
    out
}

/// [`merge_dims`] for several index streams at once: neighbours merge only where every
/// stream's strides allow it (one stream: exactly `merge_dims`).
fn merge_joint(dims: Vec<(usize, Vec<isize>)>) -> Vec<(usize, Vec<isize>)> {
    let mut out: Vec<(usize, Vec<isize>)> = vec![];
    for (n, s) in dims.into_iter().filter(|d| d.0 != 1) {
        match out.last_mut() {
            Some(last) if last.1.iter().zip(&s).all(|(a, b)| *a == b * n as isize) => {
                last.0 *= n;
                last.1 = s;
            }
            _ => out.push((n, s)),
        }
    }
    out
}

impl Context {
    /// Reduces `x` over `axes` (any set, any order; empty means none) with `op`, writing `out`.
    /// With `keep_axes` the reduced axes stay as size 1.
    pub fn reduce(&self, op: ReduceOp, x: &Tensor, axes: &[usize], keep_axes: bool, out: DType) -> Result<Tensor> {
        let result = self.empty(out, &reduced_shape(&x.shape, axes, keep_axes)?)?;
        self.recorded(result, |batch, result| self.record_reduce(batch, op, x, axes, result))
    }

    /// Records the reduction of `x` over `axes` into `out`: contiguous from the start of its
    /// buffer (a new tensor), of the output type, with one element per kept position (the kept
    /// axes' shape, with or without the reduced axes as 1s: only the element count is checked).
    pub fn record_reduce(&self, batch: &mut Batch<'_>, op: ReduceOp, x: &Tensor, axes: &[usize], out: &Tensor) -> Result<()> {
        self.record_reduce_fused(batch, &FusedReduce::plain(op.into(), x, axes, out))
    }

    /// Argmax/argmin along `axis`, or over the flattened tensor (row-major index) when `None`.
    pub fn arg_reduce(
        &self,
        op: ArgOp,
        x: &Tensor,
        axis: Option<usize>,
        keep_axis: bool,
        tie_break: TieBreak,
        out: DType,
    ) -> Result<Tensor> {
        let axes = arg_axes(&x.shape, axis);
        let result = self.empty(out, &reduced_shape(&x.shape, &axes, keep_axis)?)?;
        self.recorded(result, |batch, result| self.record_arg_reduce(batch, op, x, axis, tie_break, result))
    }

    /// Records argmax/argmin of `x` along `axis` (or over all axes) into `out` (an integer
    /// tensor laid out as for [`Context::record_reduce`]).
    pub fn record_arg_reduce(&self, batch: &mut Batch<'_>, op: ArgOp, x: &Tensor, axis: Option<usize>, tie_break: TieBreak, out: &Tensor) -> Result<()> {
        let axes = arg_axes(&x.shape, axis);
        self.record_reduce_fused(batch, &FusedReduce::plain(Reduction::Arg { op, tie_break }, x, &axes, out))
    }

    /// Records a reduction with its prologue and epilogue fused (see [`FusedReduce`] for the
    /// contract). Dispatches: [`fused_reduce_dispatches`]. Kernels are keyed by the
    /// expressions, types, strategy, access patterns and merged ranks, never by sizes.
    pub fn record_reduce_fused(&self, batch: &mut Batch<'_>, r: &FusedReduce<'_>) -> Result<()> {
        self.record_reduce_finished(batch, r, None)
    }

    /// As [`Context::record_reduce_fused`], with `finish` (when given) mapping the reduced
    /// value before it is written to `r.out` (whose type is then the finish's): logsumexp's
    /// `log(sum) + max`, a mean's `sum / n`. The epilogue reads the finished value.
    pub fn record_reduce_finished(&self, batch: &mut Batch<'_>, r: &FusedReduce<'_>, finish: Option<&Finish>) -> Result<()> {
        self.record_reduce_finished_with(batch, FloatMath::Exact, r, finish)
    }

    /// [`Context::record_reduce_finished`] with the prologue, finish and epilogue's float math
    /// evaluated as `math` says (the accumulation is the same under both).
    pub fn record_reduce_finished_with(&self, batch: &mut Batch<'_>, math: FloatMath, r: &FusedReduce<'_>, finish: Option<&Finish>) -> Result<()> {
        self.record_reduce_with_row_reduction(batch, math, r, finish, None)
    }

    /// [`Context::record_reduce_finished_with`] with, where given, the row reduction `pre`
    /// computed in the same kernel ([`RowReduction`]; the kernel writes it into input
    /// `pre.into`'s tensor). An error where the reduction does not read whole rows
    /// ([`row_reduction_fits`]), is an arg-reduction, or `pre` is not a max, min or sum or
    /// names inputs that are not f32, not both read by the prologue, or `into` varies along
    /// the reduced axes.
    pub fn record_reduce_with_row_reduction(&self, batch: &mut Batch<'_>, math: FloatMath, r: &FusedReduce<'_>, finish: Option<&Finish>, pre: Option<RowReduction>) -> Result<()> {
        let FusedReduce { op, prologue, inputs, shape, axes, out, epilogue } = r;
        let (out, op, shape, axes) = (*out, *op, shape.as_slice(), axes.as_slice());
        let comb = op.comb();
        checked_numel(shape)?;
        for t in inputs {
            if t.shape != shape {
                return Err(invalid!("fused reduction: input of shape {:?} given for shape {shape:?}", t.shape));
            }
        }
        let in_types: Vec<DType> = inputs.iter().map(|t| t.dtype).collect();
        let val_t = prologue.dtype(&in_types)?;
        let out_t = out.dtype;
        // the type the reduction itself writes
        let red_t = finish.map_or(out_t, |f| f.reduced);
        if let Reduction::Arg { op, .. } = op {
            if !red_t.is_integer() {
                return Err(invalid!("{op:?} returns indices: output type must be an integer type, got {red_t}"));
            }
        }
        if matches!(comb, Comb::Extreme { .. }) && (val_t.is_complex() || red_t.is_complex()) {
            return Err(invalid!("complex numbers are not ordered: max/min/argmax/argmin of {val_t} are not defined"));
        }
        if matches!(comb, Comb::Sum | Comb::Product) && val_t.is_complex() && !red_t.is_complex() {
            return Err(invalid!("sum/product of {val_t} needs a complex output type, got {red_t}"));
        }
        let reduced = reduced_axes(shape, axes)?;
        let mut finish_used = vec![false; inputs.len()];
        if let Some(f) = finish {
            let mut fin_types = in_types.clone();
            fin_types.push(red_t);
            let ft = f.expr.dtype(&fin_types)?;
            if ft != out_t {
                return Err(invalid!("fused reduction finish gives {ft}, but the output is {out_t}"));
            }
            let (mut flat, mut coords) = (false, vec![]);
            expr_uses(&f.expr, &mut finish_used, &mut flat, &mut coords);
            if flat || !coords.is_empty() {
                return Err(invalid!("fused reduction finish reads an iota: not supported"));
            }
            for (j, _) in finish_used.iter().enumerate().filter(|u| *u.1) {
                if (0..shape.len()).any(|d| reduced[d] && shape[d] != 1 && inputs[j].strides[d] != 0) {
                    return Err(invalid!("fused reduction finish reads input {j}, which varies along the reduced axes {axes:?}"));
                }
            }
        }
        let (outputs, len) = sizes(shape, &reduced);
        if out.numel() != outputs || !out.is_contiguous() || out.offset != 0 {
            return Err(invalid!(
                "reduction output must be a new (contiguous) tensor of {outputs} elements, got shape {:?} strides {:?} offset {}",
                out.shape, out.strides, out.offset
            ));
        }
        let mut epi_types = in_types.clone();
        epi_types.push(out_t);
        for (e, t) in epilogue {
            let et = e.dtype(&epi_types)?;
            if t.dtype != et || t.shape != shape || !t.is_contiguous() || t.offset != 0 {
                return Err(invalid!(
                    "fused reduction epilogue output must be a new {et} tensor of shape {shape:?}, got {} {:?} strides {:?} offset {}",
                    t.dtype, t.shape, t.strides, t.offset
                ));
            }
        }
        if outputs == 0 {
            return Ok(()); // no output element, and `shape` is empty: nothing to write
        }
        let strategy = strategy_for(outputs, len, red_t);
        let epi_in_kernel = !epilogue.is_empty() && !matches!(strategy, Strategy::Split { .. });

        // The index streams: the inputs the expressions read, then the iotas (and the flat
        // index, where epilogue outputs are written).
        let n_in = inputs.len();
        let (mut used, mut flat, mut coords) = (vec![false; n_in], false, vec![]);
        expr_uses(prologue, &mut used, &mut flat, &mut coords);
        let split = matches!(strategy, Strategy::Split { .. });
        if !split {
            for (u, f) in used.iter_mut().zip(&finish_used) {
                *u |= *f;
            }
        }
        if epi_in_kernel {
            flat = true;
            for (e, _) in epilogue {
                expr_uses(e, &mut used, &mut flat, &mut coords);
            }
        }
        if let Some(a) = coords.iter().find(|&&a| a >= shape.len()) {
            return Err(invalid!("iota axis {a} out of range for shape {shape:?}"));
        }
        coords.sort_unstable();
        let mut kinds: Vec<StreamKind> = (0..n_in).filter(|&j| used[j]).map(StreamKind::Input).collect();
        if flat {
            kinds.push(StreamKind::Flat);
        }
        kinds.extend(coords.iter().map(|&a| StreamKind::Coord(a)));
        let rank = shape.len();
        let layout: Vec<(Vec<isize>, usize)> = kinds
            .iter()
            .map(|k| match *k {
                StreamKind::Input(j) => (inputs[j].strides.clone(), inputs[j].offset),
                StreamKind::Flat => (contiguous_strides(shape), 0),
                StreamKind::Coord(a) => ((0..rank).map(|d| (d == a) as isize).collect(), 0),
            })
            .collect();
        let dims = |want: bool| -> Vec<(usize, Vec<isize>)> {
            let d = (0..rank).filter(|&d| reduced[d] == want).map(|d| (shape[d], layout.iter().map(|l| l.0[d]).collect())).collect();
            merge_joint(d)
        };
        let (kept, red) = (dims(false), dims(true));
        let streams: Vec<Stream> =
            kinds.iter().enumerate().map(|(s, &kind)| Stream { kind, row_const: red.iter().all(|d| d.1[s] == 0) }).collect();
        let pre_streams = match pre {
            None => None,
            Some(RowReduction { of, into, op: pre_op }) => {
                let what = "fused reduction with a row reduction";
                if !matches!(pre_op, ReduceOp::Max | ReduceOp::Min | ReduceOp::Sum) {
                    return Err(invalid!("{what}: {pre_op:?} is not a max, min or sum"));
                }
                if of >= n_in || into >= n_in || of == into || in_types[of] != DType::F32 || in_types[into] != DType::F32 {
                    return Err(invalid!("{what}: inputs {of} and {into} must be two f32 inputs"));
                }
                if matches!(op, Reduction::Arg { .. }) || strategy != Strategy::PerGroup || row_k(strategy, len) == 0 {
                    return Err(invalid!("{what}: only for a reduction that reads its rows whole ({outputs} rows of {len})"));
                }
                let (mut pro_used, mut f, mut c) = (vec![false; n_in], false, vec![]);
                expr_uses(prologue, &mut pro_used, &mut f, &mut c);
                let stream = |j: usize| kinds.iter().position(|k| *k == StreamKind::Input(j));
                match (stream(of), stream(into)) {
                    (Some(ux), Some(um)) if pro_used[of] && pro_used[into] && streams[um].row_const && !streams[ux].row_const => Some((ux, um, pre_op)),
                    _ => return Err(invalid!("{what}: the prologue must read input {of} along the rows and input {into} constant along them")),
                }
            }
        };

        for t in inputs.iter().map(|t| &t.buffer).chain([&out.buffer]).chain(epilogue.iter().map(|(_, t)| &t.buffer)) {
            batch.keep(t);
        }
        let shuffles = self.subgroup_reduction.load(std::sync::atomic::Ordering::Relaxed);
        let narrow = self.narrow_rows.load(std::sync::atomic::Ordering::Relaxed);
        let spec = |src_partial: bool, sink_partial: bool, strategy: Strategy, epi: bool| Spec {
            comb,
            val_t,
            red_t,
            out: if split { red_t } else { out_t },
            finish: if split { None } else { finish.map(|f| f.expr.clone()) },
            src_partial,
            sink_partial,
            strategy,
            row_k: if sink_partial { 0 } else { row_k(strategy, len) },
            // cheap prologues only, and no epilogue unrolled over kept prologue values (see
            // `narrow_lanes`)
            lanes: if sink_partial {
                LOCAL
            } else {
                let row_const = |j: usize| input_row_constant(&streams, j);
                let keeps = epi && !matches!(prologue, Expr::Input(_)) && epilogue.iter().any(|(e, _)| contains(e, prologue));
                narrow_lanes(row_k(strategy, len), narrow && !keeps && cheap_per_element(prologue, &row_const), self.caps.subgroup_size)
            },
            kept: kept.len(),
            red: red.len(),
            streams: streams.clone(),
            in_types: in_types.clone(),
            prologue: prologue.clone(),
            epilogue: if epi { epilogue.iter().map(|(e, t)| (e.clone(), t.dtype)).collect() } else { vec![] },
            math,
            shuffles,
            pre: pre_streams,
        };
        // The parameter block of a pass over the input: destination, input addresses and
        // epilogue outputs, then R, segments, segment length, partials, stream offsets and the
        // merged (size, strides per stream) of the kept then the reduced axes.
        let block = |dst: u64, segments: usize, seg_len: usize, partials: usize, epi: bool| -> Result<ParamBlock> {
            let mut p = ParamBlock::new("reduction");
            p.addr(dst);
            p.addrs(kinds.iter().filter_map(|k| if let StreamKind::Input(j) = k { Some(inputs[*j].buffer.address()) } else { None }));
            if epi {
                p.addrs(epilogue.iter().map(|(_, t)| t.buffer.address()));
            }
            p.i32s([len, segments, seg_len, partials])?;
            p.i32s(layout.iter().map(|l| l.1))?;
            for (n, strides) in kept.iter().chain(&red) {
                p.i32(*n)?.i32s(strides.iter().copied())?;
            }
            Ok(p)
        };
        let groups_for = |n: usize| (n as u32).min(self.caps.max_workgroup_count[0].min(65535));
        match strategy {
            Strategy::PerOutput | Strategy::PerGroup => {
                let spec = spec(false, false, strategy, epi_in_kernel);
                let kernel = self.reduction_kernel(&spec)?;
                let p = block(out.buffer.address(), 1, len, 0, epi_in_kernel)?;
                if strategy == Strategy::PerOutput {
                    batch.dispatch(&kernel, p.bytes(), outputs as u64)?;
                } else {
                    batch.dispatch_grid(&kernel, p.bytes(), outputs as u32, [groups_for(outputs), 1, 1])?;
                }
            }
            Strategy::Split { segments } => {
                let s = segments as usize;
                let seg_len = split_len(len, segments);
                let partials = outputs * s;
                // (value, index) partials: 8 bytes of value each, then 4 of index each
                let scratch = self.pool.alloc((partials * 12) as u64)?;
                batch.keep(&scratch);
                let k1 = self.reduction_kernel(&spec(false, true, strategy, false))?;
                let p1 = block(scratch.address(), s, seg_len, partials, false)?;
                batch.dispatch_grid(&k1, p1.bytes(), partials as u32, [groups_for(partials), 1, 1])?;
                // pass 2: a workgroup per output folds its `s` partials like PerGroup
                let p2_spec = Spec {
                    comb,
                    val_t,
                    red_t,
                    out: red_t,
                    finish: None,
                    src_partial: true,
                    sink_partial: false,
                    strategy: Strategy::PerGroup,
                    // The general loop. Issuing every partial's loads at once (the short-row form,
                    // `row_k`) measured slower on the H200 (stop 31, run 1: the 1 Mi argmax 33-37
                    // -> 38-42 us; the argmax's pass 2 of 4096 partials 7.8 -> 9.2 us).
                    row_k: 0,
                    kept: 0,
                    red: 0,
                    streams: vec![],
                    in_types: vec![],
                    prologue: Expr::Input(0),
                    epilogue: vec![],
                    math,
                    shuffles,
                    lanes: LOCAL,
                    pre: None,
                };
                let k2 = self.reduction_kernel(&p2_spec)?;
                // With a finish, the reduction goes to a temporary and the finish writes `out`.
                let reduced_to = match finish {
                    Some(_) => Some(self.empty(red_t, &[outputs])?),
                    None => None,
                };
                let mut p2 = ParamBlock::new("reduction");
                p2.addr(reduced_to.as_ref().unwrap_or(out).buffer.address()).addr(scratch.address());
                p2.i32s([s, 1, s, partials])?;
                batch.dispatch_grid(&k2, p2.bytes(), outputs as u32, [groups_for(outputs), 1, 1])?;
                // Kept-position views (reduced axes as 1s): of an input, and of a contiguous
                // kept-shape buffer.
                let keep1: Vec<usize> = (0..rank).map(|d| if reduced[d] { 1 } else { shape[d] }).collect();
                let dense = |t: &Tensor| Tensor { shape: keep1.clone(), strides: contiguous_strides(&keep1), offset: 0, ..t.clone() };
                if let (Some(f), Some(tmp)) = (finish, &reduced_to) {
                    batch.keep(&tmp.buffer);
                    let mut at_kept: Vec<Tensor> = inputs.iter().map(|t| Tensor { shape: keep1.clone(), ..(*t).clone() }).collect();
                    at_kept.push(dense(tmp));
                    let dst = dense(out);
                    self.record_map_with(batch, math, std::slice::from_ref(&f.expr), &at_kept.iter().collect::<Vec<_>>(), &[&dst])?;
                }
                if !epilogue.is_empty() {
                    // The finished value broadcast back over `shape`: `out` read with the kept
                    // axes' row-major strides and stride 0 along the reduced axes.
                    let back = dense(out);
                    let strides = (0..rank).map(|d| if reduced[d] { 0 } else { back.strides[d] }).collect();
                    let back = Tensor { shape: shape.to_vec(), strides, ..back };
                    let mut all: Vec<&Tensor> = inputs.to_vec();
                    all.push(&back);
                    let exprs: Vec<Expr> = epilogue.iter().map(|(e, _)| e.clone()).collect();
                    let outs: Vec<&Tensor> = epilogue.iter().map(|(_, t)| *t).collect();
                    self.record_map_with(batch, math, &exprs, &all, &outs)?;
                }
            }
        }
        Ok(())
    }

    fn reduction_kernel(&self, spec: &Spec) -> Result<std::sync::Arc<crate::kernel::Kernel>> {
        let key = spec.key();
        if let Some(k) = self.kernels.cached(&key) {
            return Ok(k);
        }
        let source = spec.source()?;
        self.kernels.get(&key, spec.lanes, 1, || source)
    }
}

/// The axes an arg-reduction over `axis` (or all axes) reduces.
fn arg_axes(shape: &[usize], axis: Option<usize>) -> Vec<usize> {
    match axis {
        Some(a) => vec![a],
        None => (0..shape.len()).collect(),
    }
}

/// Everything a reduction kernel's source depends on (its cache key).
struct Spec {
    comb: Comb,
    /// The type of the values reduced (the prologue's type; the input's in a plain reduction).
    val_t: DType,
    /// The type the reduction rounds its result to.
    red_t: DType,
    /// The type written to the output: `red_t`, or the finish's type.
    out: DType,
    /// In-kernel finish (over inputs and `Input(in_types.len())` = the reduced value).
    finish: Option<Expr>,
    /// Reads (value, index) partials of pass 1 instead of tensor elements.
    src_partial: bool,
    /// Writes (value, index) partials instead of output elements.
    sink_partial: bool,
    strategy: Strategy,
    /// [`row_k`]: candidates per invocation read before any is combined (0: the general loop).
    /// With an epilogue that reads the prologue, the prologue's values (and the loaded bits)
    /// are kept in registers for it (`cached` in `source`).
    row_k: u32,
    kept: usize,
    red: usize,
    streams: Vec<Stream>,
    in_types: Vec<DType>,
    prologue: Expr,
    /// In-kernel epilogue: (expression, output type).
    epilogue: Vec<(Expr, DType)>,
    /// How the prologue, finish and epilogue evaluate float math.
    math: FloatMath,
    /// The device has subgroup shuffles (and the context allows them): the tree's levels
    /// within a subgroup run in registers ([`Spec::subgroup_tree`]).
    shuffles: bool,
    /// Invocations per workgroup: [`LOCAL`], or fewer for a short row ([`narrow_lanes`]),
    /// where each invocation holds `LOCAL / lanes` of the tree's 256 partials.
    lanes: u32,
    /// A row reduction computed first in this kernel ([`RowReduction`]): the streams of its
    /// input and of the input it replaces, and its op.
    pre: Option<(usize, usize, ReduceOp)>,
}

impl Spec {
    /// Whether the workgroup tree ends in subgroup shuffles: every strategy but `PerOutput`
    /// (which has no tree), except complex accumulators (128-bit; they keep the
    /// shared-memory tree).
    fn subgroup_tree(&self) -> bool {
        self.shuffles && self.strategy != Strategy::PerOutput && self.acc_type() != "dvec2"
    }

    /// A fixed tree over the workgroup's partials in shared memory (barrier-separated levels
    /// `h = lanes/2, ..., 1`: partial `t < h` absorbs partial `t + h`, by the GLSL `level`),
    /// the levels below the subgroup size in the first subgroup's registers where
    /// [`Self::subgroup_tree`] (lane `l` takes partial `l` by `load`, absorbs lane `l + h`'s
    /// shuffled value by `absorb`, and lane 0 writes partial 0 back by `store_root`) — the same
    /// pairs in the same order. The main tree and the `pre:` trees are written by it.
    fn write_tree(&self, s: &mut String, level: &str, load: &str, absorb: &str, store_root: &str) {
        let lowest = if self.subgroup_tree() { "gl_SubgroupSize" } else { "1u" };
        writeln!(s, "        for (uint h = {}u; h >= {lowest}; h >>= 1) {{", self.lanes / 2).unwrap();
        writeln!(s, "            if (t < h) {{ {level} }}\n            barrier();\n        }}").unwrap();
        if self.subgroup_tree() {
            writeln!(s, "        if (gl_SubgroupID == 0u) {{\n            uint l = gl_SubgroupInvocationID;\n            {load}").unwrap();
            s.push_str("            for (uint h = gl_SubgroupSize >> 1; h > 0u; h >>= 1) {\n");
            writeln!(s, "                {absorb}\n            }}").unwrap();
            writeln!(s, "            if (l == 0u) {{ {store_root} }}\n        }}\n        barrier();").unwrap();
        }
    }

    fn key(&self) -> String {
        let strategy = match self.strategy {
            Strategy::Split { .. } => "split".to_string(),
            s => format!("{s:?}"),
        };
        let mut key = format!(
            "reduce {:?} {}->{} src_partial:{} sink_partial:{} {strategy} k{} r{}",
            self.comb, self.val_t, self.red_t, self.src_partial, self.sink_partial, self.kept, self.red
        );
        if self.row_k > 0 {
            write!(key, " rowk{}", self.row_k).unwrap();
        }
        if self.lanes != LOCAL {
            write!(key, " lanes{}", self.lanes).unwrap();
        }
        if let Some(f) = &self.finish {
            write!(key, " fin:{}:{f:?}", self.out).unwrap();
        }
        if self.math == FloatMath::Fast {
            key.push_str(" fast");
        }
        if self.subgroup_tree() {
            key.push_str(" sgtree");
        }
        if self.seq_fold() {
            key.push_str(" seq");
        }
        if let Some((ux, um, op)) = self.pre {
            write!(key, " pre:{op:?}:{ux}:{um}").unwrap();
        }
        if !self.src_partial {
            write!(key, " in{:?} streams{:?} pro:{:?}", self.in_types, self.streams, self.prologue).unwrap();
            for (e, t) in &self.epilogue {
                write!(key, " epi:{t}:{e:?}").unwrap();
            }
        }
        key
    }

    /// f32 max/min/argmax/argmin compare the stored bits as integers (an order-preserving key,
    /// -0 equal to +0, NaN by its bits) instead of decoding every element to f64 and comparing
    /// doubles: the same choices (f32 -> f64 is exact and keeps the order), so the same bits,
    /// with no float operation (a device that flushes subnormals compares them right too).
    fn bits_extreme(&self) -> bool {
        matches!(self.comb, Comb::Extreme { .. }) && self.val_t == DType::F32
    }

    /// f32 argmax/argmin over the input (not partials) in the general loop: the invocation's
    /// own candidates arrive in increasing index, so it folds their order keys alone
    /// ([`Spec::source`]).
    fn seq_fold(&self) -> bool {
        self.nan_seeded() && self.bits_extreme() && self.row_k == 0 && !self.src_partial
    }

    /// Float argmax/argmin: candidates are filtered by whether the group's first element is NaN.
    fn nan_seeded(&self) -> bool {
        matches!(self.comb, Comb::Extreme { arg: true, .. }) && self.val_t.is_float()
    }

    /// The type partial results are held in: sums and products accumulate in the output's
    /// domain, max/min compare in the input's — f32 max/min as the stored bits themselves
    /// ([`Spec::bits_extreme`]).
    fn acc_type(&self) -> &'static str {
        match self.comb {
            Comb::All | Comb::Any => "uint64_t",
            Comb::Extreme { .. } if self.bits_extreme() => "uint",
            Comb::Extreme { .. } => self.val_t.glsl_compute(),
            Comb::Sum | Comb::Product => self.red_t.glsl_compute(),
        }
    }

    /// Stream `s`'s index (or loaded bits) for the candidate with suffix `k`.
    fn stream_var(&self, s: usize, k: &str) -> String {
        if self.streams[s].row_const {
            format!("rc{s}")
        } else if matches!(self.streams[s].kind, StreamKind::Input(_)) {
            format!("w{k}_{s}")
        } else {
            format!("uint(e{k}_{s})")
        }
    }

    /// The streams expression `e` reads (its inputs below `in_types.len()`, its iotas).
    fn streams_of(&self, e: &Expr) -> Vec<usize> {
        let (mut used, mut flat, mut coords) = (vec![false; self.in_types.len()], false, vec![]);
        expr_uses(e, &mut used, &mut flat, &mut coords);
        (0..self.streams.len())
            .filter(|&s| match self.streams[s].kind {
                StreamKind::Input(j) => used[j],
                StreamKind::Flat => flat,
                StreamKind::Coord(a) => coords.contains(&a),
            })
            .collect()
    }

    /// Parameters of a function evaluating embedded expressions over streams `used`:
    /// `nx_raw{j}_` (input j's stored bits), `i` (flat index), `c{a}` (coordinate a).
    fn stream_params(&self, used: &[usize]) -> Vec<String> {
        used.iter()
            .map(|&s| match self.streams[s].kind {
                StreamKind::Input(j) => raw_param(self.in_types[j], j),
                StreamKind::Flat => "uint i".to_string(),
                StreamKind::Coord(a) => format!("uint c{a}"),
            })
            .collect()
    }

    /// Decodes the stored bits of the inputs among `used` into `x{j}_`.
    fn stream_decodes(&self, used: &[usize], s: &mut String) {
        for &u in used {
            if let StreamKind::Input(j) = self.streams[u].kind {
                self.decode_raw(self.in_types[j], j, s);
            }
        }
    }

    /// The statement decoding parameter `nx_raw{j}_` (stored bits of type `t`) into `x{j}_`.
    fn decode_raw(&self, t: DType, j: usize, s: &mut String) {
        writeln!(s, "        {} x{j}_ = {};", compute_type(t, self.math), decode_with(t, &format!("nx_raw{j}_"), self.math)).unwrap();
    }

    /// The function `name` evaluating a row-constant part (`part`, embedded as `code`, of type
    /// `t`) once per output: over its (row-constant) streams and, with `reduced`, the reduced
    /// value as input `in_types.len()`; it returns the part's stored bits.
    fn hoisted_fn(&self, name: &str, part: &Expr, code: &EmbeddedExprs, t: DType, reduced: Option<DType>, s: &mut String) {
        let n = self.in_types.len();
        let used = self.streams_of(part);
        let mut params = self.stream_params(&used);
        params.extend(reduced.map(|rt| raw_param(rt, n)));
        writeln!(s, "{} {name}({}) {{", storage_type(t), params.join(", ")).unwrap();
        self.stream_decodes(&used, s);
        if let Some(rt) = reduced {
            self.decode_raw(rt, n, s);
        }
        s.push_str(&code.body);
        writeln!(s, "        return {};\n}}", encode_with(t, &code.values[0], self.math)).unwrap();
    }

    /// The stored bits of the value reduced at candidate `k` (of type `RAW`).
    /// (`hoisted`: the prologue's row-constant parts, `hp0, hp1, ...`, passed after the streams.)
    fn value(&self, pro_streams: &[usize], k: &str, hoisted: usize) -> String {
        match self.prologue {
            Expr::Input(j) => {
                let s = self.streams.iter().position(|st| st.kind == StreamKind::Input(j)).unwrap_or(0);
                self.stream_var(s, k)
            }
            _ => {
                let mut args: Vec<String> = pro_streams.iter().map(|&s| self.stream_var(s, k)).collect();
                args.extend((0..hoisted).map(|q| format!("hp{q}")));
                format!("pro({})", args.join(", "))
            }
        }
    }

    /// Statements computing, for the candidate in `uint c{k}`, the element index of every
    /// stream among `need` that is not row-constant (`e{k}_{s}`) and loading the inputs'
    /// bits (`w{k}_{s}`).
    fn fetch(&self, need: &[usize], k: &str, indent: &str, s: &mut String) {
        self.fetch_from("in", need, k, indent, s)
    }

    /// [`Spec::fetch`] through the buffer references named `{buffers}{u}`.
    fn fetch_from(&self, buffers: &str, need: &[usize], k: &str, indent: &str, s: &mut String) {
        let walk: Vec<usize> = need.iter().copied().filter(|&u| !self.streams[u].row_const).collect();
        if walk.is_empty() {
            return;
        }
        for &u in &walk {
            writeln!(s, "{indent}int e{k}_{u} = b{u};").unwrap();
        }
        writeln!(s, "{indent}{{ uint rr = c{k};").unwrap();
        for d in (0..self.red).rev() {
            if d == 0 {
                writeln!(s, "{indent}    uint q0 = rr;").unwrap();
            } else {
                writeln!(s, "{indent}    uint q{d} = rr % rd{d}; rr /= rd{d};").unwrap();
            }
            for &u in &walk {
                writeln!(s, "{indent}    e{k}_{u} += int(q{d}) * rs{u}_{d};").unwrap();
            }
        }
        writeln!(s, "{indent}}}").unwrap();
        for &u in &walk {
            if let StreamKind::Input(j) = self.streams[u].kind {
                writeln!(s, "{indent}{} w{k}_{u} = {buffers}{u}.v[e{k}_{u}];", storage_type(self.in_types[j])).unwrap();
            }
        }
    }

    fn source(&self) -> Result<String> {
        let mut s = crate::kernels::numeric_prelude();
        if self.subgroup_tree() {
            // extensions go right after #version (before any declaration)
            s = s.replacen(
                "#version 460\n",
                "#version 460\n#extension GL_KHR_shader_subgroup_basic : require\n#extension GL_KHR_shader_subgroup_shuffle_relative : require\n",
                1,
            );
        }
        s.push_str(crate::kernels::OPS);
        let fused = !self.src_partial;
        // Row-constant subexpressions of the prologue and the epilogue (layernorm's
        // `sum / n` and `rsqrt(var + eps)`) are computed once per output, not once per
        // element: each becomes one more input (after the prologue's inputs, or after the
        // epilogue's reduced value), handed over as its stored bits, as an unfused kernel that
        // wrote it would hand it over (so no bit can change).
        let n_in = self.in_types.len();
        let row_const_stream = |j: usize| input_row_constant(&self.streams, j);
        let mut pro_hoisted: Vec<Expr> = vec![];
        let pro_expr = match (&self.prologue, fused) {
            (Expr::Input(_), _) | (_, false) => self.prologue.clone(),
            (p, true) => hoist_row_constant(p, &row_const_stream, &mut pro_hoisted, n_in),
        };
        let pro_hoisted_types = pro_hoisted.iter().map(|h| h.dtype(&self.in_types)).collect::<Result<Vec<_>>>()?;
        let pro_hoisted_code = pro_hoisted.iter().map(|h| embed_exprs(std::slice::from_ref(h), &self.in_types, self.math)).collect::<Result<Vec<_>>>()?;
        let pro_types: Vec<DType> = self.in_types.iter().chain(&pro_hoisted_types).copied().collect();
        let pro = match (&self.prologue, fused) {
            (Expr::Input(_), _) | (_, false) => None,
            (_, true) => Some(embed_exprs(std::slice::from_ref(&pro_expr), &pro_types, self.math)?),
        };
        let mut epi_types = self.in_types.clone();
        epi_types.push(self.out);
        // A short row's invocation keeps the prologue's values (`pv{k}`) for the epilogue,
        // which reads them where it would evaluate the prologue again (softmax's exp(x - max))
        // as input n_in + 1, the prologue's stored bits: what the unfused prologue would have
        // written and the unfused epilogue read back.
        let cached = self.row_k > 0 && fused && !matches!(self.prologue, Expr::Input(_)) && self.epilogue.iter().any(|(e, _)| contains(e, &self.prologue));
        if cached {
            epi_types.push(self.val_t);
        }
        let epi_base = epi_types.len();
        let row_const_input = |j: usize| j == n_in || row_const_stream(j);
        let mut hoisted: Vec<Expr> = vec![];
        let epi_exprs: Vec<Expr> = self
            .epilogue
            .iter()
            .map(|(e, _)| {
                let e = if cached { replace(e, &self.prologue, &Expr::Input(n_in + 1)) } else { e.clone() };
                hoist_row_constant(&e, &row_const_input, &mut hoisted, epi_base)
            })
            .collect();
        let hoisted_types = hoisted.iter().map(|h| h.dtype(&epi_types)).collect::<Result<Vec<_>>>()?;
        let hoisted_code = hoisted.iter().map(|h| embed_exprs(std::slice::from_ref(h), &epi_types, self.math)).collect::<Result<Vec<_>>>()?;
        epi_types.extend(&hoisted_types);
        let epi = if self.epilogue.is_empty() { None } else { Some(embed_exprs(&epi_exprs, &epi_types, self.math)?) };
        let mut fin_types = self.in_types.clone();
        fin_types.push(self.red_t);
        let fin = match &self.finish {
            Some(f) => Some(embed_exprs(std::slice::from_ref(f), &fin_types, self.math)?),
            None => None,
        };
        let mut bodies: String = [&pro, &epi, &fin].iter().filter_map(|e| e.as_ref().map(|e| e.body.as_str())).collect();
        bodies.extend(hoisted_code.iter().chain(&pro_hoisted_code).map(|h| h.body.as_str()));
        s.push_str(&libraries(&bodies));
        if self.math == FloatMath::Fast && !bodies.contains("nxf_") && (pro.is_some() || epi.is_some() || fin.is_some()) {
            // the embedded functions' decodes and encodes (f16 under :fast) call it too
            s.push_str(crate::kernels::MATH_F32);
        }
        let acc = self.acc_type();
        let in_t = self.val_t;
        writeln!(s, "#define ACC {acc}").unwrap();
        s.push_str("#define NONE 0xFFFFFFFFu\n");
        // from/to the 64-bit scratch representation
        let (to_bits, from_bits) = match acc {
            "double" => ("nx_f64_to_bits(v)", "nx_bits_to_f64(b)"),
            "int64_t" => ("uint64_t(v)", "int64_t(b)"),
            "dvec2" => ("0ul", "dvec2(0.0LF)"), // complex never uses the split strategy's scratch
            "uint" => ("uint64_t(v)", "uint(b)"),
            _ => ("v", "b"),
        };
        writeln!(s, "uint64_t acc_bits(ACC v) {{ return {to_bits}; }}").unwrap();
        writeln!(s, "ACC acc_from(uint64_t b) {{ return {from_bits}; }}").unwrap();
        if self.subgroup_tree() {
            // the accumulator's bits as two 32-bit words, for subgroup shuffles
            let (to_words, from_words) = match acc {
                "double" => ("unpackDouble2x32(v)", "packDouble2x32(w)"),
                "int64_t" => ("unpackUint2x32(uint64_t(v))", "int64_t(packUint2x32(w))"),
                "uint" => ("uvec2(v, 0u)", "w.x"),
                _ => ("unpackUint2x32(v)", "packUint2x32(w)"),
            };
            writeln!(s, "uvec2 acc_words(ACC v) {{ return {to_words}; }}").unwrap();
            writeln!(s, "ACC acc_from_words(uvec2 w) {{ return {from_words}; }}").unwrap();
        }
        // identity
        let ident = match self.comb {
            Comb::Sum => zero(acc),
            Comb::Product => one(acc),
            Comb::All => "1ul".into(),
            Comb::Any => "0ul".into(),
            Comb::Extreme { max, .. } if self.bits_extreme() => if max { "0xFF800000u" } else { "0x7F800000u" }.into(),
            Comb::Extreme { max, .. } => extreme_identity(in_t, max),
        };
        if self.bits_extreme() {
            s.push_str(&f32_order_fns("acc", "ACC"));
        } else if matches!(self.comb, Comb::Extreme { .. }) && in_t.is_float() {
            s.push_str("bool acc_isnan(ACC v) { return nx_isnan(v); }\n");
        }
        writeln!(s, "ACC ident() {{ return {ident}; }}").unwrap();
        // combine
        s.push_str("void comb(inout ACC av, inout uint ai, ACC bv, uint bi) {\n");
        match self.comb {
            Comb::Product if acc == "dvec2" => {
                // Complex.multiply is not exact with (1, 0): BinaryBackend's integer seed 1
                // gives the first element itself, so the first candidate is taken as it is.
                s.push_str("    if (bi == NONE) return;\n    if (ai == NONE) { av = bv; ai = bi; return; }\n    av = nx_cmul(av, bv);\n");
            }
            Comb::Sum | Comb::Product => {
                let op = if self.comb == Comb::Sum { "+" } else { "*" };
                let precise = if acc == "double" { "precise " } else { "" };
                writeln!(s, "    {precise}ACC r = av {op} bv; av = r;").unwrap();
            }
            Comb::All => s.push_str("    av = (av != 0ul && bv != 0ul) ? 1ul : 0ul;\n"),
            Comb::Any => s.push_str("    av = (av != 0ul || bv != 0ul) ? 1ul : 0ul;\n"),
            Comb::Extreme { max, high, arg } => s.push_str(&extreme_comb_body("acc", max, high, arg, in_t.is_float(), self.bits_extreme())),
        }
        s.push_str("}\n");
        if self.seq_fold() {
            // The invocation's own candidates in increasing index: one beats the accumulator
            // exactly when `comb` would take it, compared by order keys alone. A candidate
            // `comb` would skip (NaN against a non-NaN first element, or the reverse) gets the
            // key nothing takes; under a NaN first element every NaN candidate gets key 1, so
            // they tie (`comb`'s rule for two NaNs). The value is rebuilt from the key after
            // the loop (`seq_value`): -0.0 and +0.0 share a key, and only the index is output.
            let Comb::Extreme { max, high, .. } = self.comb else { unreachable!() };
            let never = if max { "0u" } else { "0xFFFFFFFFu" };
            let gt = if max { ">" } else { "<" };
            writeln!(s, "#define SEQ_NEVER {never}").unwrap();
            s.push_str("uint seq_key(ACC v, bool nan_seed) { return acc_isnan(v) != nan_seed ? SEQ_NEVER : (nan_seed ? 1u : acc_key(v)); }\n");
            if high {
                writeln!(s, "#define SEQ_TAKES(k, a) ((k) != SEQ_NEVER && (k) {gt}= (a))").unwrap();
            } else {
                writeln!(s, "#define SEQ_TAKES(k, a) ((k) {gt} (a))").unwrap();
            }
            s.push_str("ACC seq_value(uint k, bool nan_seed) { return nan_seed ? 0x7FC00000u : (k == 0x80000000u ? 0u : (k > 0x80000000u ? (k & 0x7FFFFFFFu) : ~k)); }\n");
        }
        // The value reduced arrives as the stored bits of `val_t` (what the unfused prologue
        // would have written); `cand` decodes them as the plain reduction would read them.
        let pro_streams = if fused { self.streams_of(&pro_expr) } else { vec![] };
        if fused {
            writeln!(s, "#define RAW {}", storage_type(in_t)).unwrap();
            let v = decode(in_t, "w");
            let cand = match self.comb {
                Comb::All | Comb::Any => nonzero(in_t, &v),
                Comb::Extreme { .. } if self.bits_extreme() => "w".to_string(),
                Comb::Extreme { .. } => v,
                Comb::Sum | Comb::Product => to_domain(in_t, self.red_t, &v),
            };
            writeln!(s, "ACC cand(RAW w) {{ return {cand}; }}").unwrap();
            for (q, h) in pro_hoisted_code.iter().enumerate() {
                // row-constant part q of the prologue, once per output
                self.hoisted_fn(&format!("phoist{q}"), &pro_hoisted[q], h, pro_hoisted_types[q], None, &mut s);
            }
            if let Some(pro) = &pro {
                let mut params = self.stream_params(&pro_streams);
                params.extend(pro_hoisted_types.iter().enumerate().map(|(q, t)| raw_param(*t, n_in + q)));
                writeln!(s, "RAW pro({}) {{", params.join(", ")).unwrap();
                self.stream_decodes(&pro_streams, &mut s);
                for (q, t) in pro_hoisted_types.iter().enumerate() {
                    self.decode_raw(*t, n_in + q, &mut s);
                }
                s.push_str(&pro.body);
                writeln!(s, "        return {};\n}}", encode_with(in_t, &pro.values[0], self.math)).unwrap();
            }
        }
        let epi_streams: Vec<usize> = epi_exprs.iter().flat_map(|e| self.streams_of(e)).collect();
        let mut epi_streams: Vec<usize> = (0..self.streams.len()).filter(|u| epi_streams.contains(u)).collect();
        let flat = self.streams.iter().position(|st| st.kind == StreamKind::Flat);
        let fin_streams = self.finish.as_ref().map(|f| self.streams_of(f)).unwrap_or_default();
        if let Some(fe) = &fin {
            // The finish at one output: the reduced value arrives as the stored bits of `red_t`.
            let n = self.in_types.len();
            let mut params = self.stream_params(&fin_streams);
            params.push(raw_param(self.red_t, n));
            writeln!(s, "{} fin({}) {{", storage_type(self.out), params.join(", ")).unwrap();
            self.stream_decodes(&fin_streams, &mut s);
            self.decode_raw(self.red_t, n, &mut s);
            s.push_str(&fe.body);
            writeln!(s, "        return {};\n}}", encode_with(self.out, &fe.values[0], self.math)).unwrap();
        }
        for (q, h) in hoisted_code.iter().enumerate() {
            // Row-constant part q of the epilogue, once per output (the reduced value arrives
            // as the stored bits of `out`).
            self.hoisted_fn(&format!("hoist{q}"), &hoisted[q], h, hoisted_types[q], Some(self.out), &mut s);
        }
        if let Some(epi) = &epi {
            // Evaluates the epilogue at one element: the reduced value arrives as the stored
            // bits of `out`, as the unfused epilogue would read them back, and the hoisted
            // row-constant parts as their stored bits.
            let n = self.in_types.len();
            let mut params = self.stream_params(&epi_streams);
            params.push(raw_param(self.out, n));
            if cached {
                params.push(raw_param(self.val_t, n + 1));
            }
            params.extend(hoisted_types.iter().enumerate().map(|(q, t)| raw_param(*t, epi_base + q)));
            for (q, (_, t)) in self.epilogue.iter().enumerate() {
                params.push(format!("out {} y{q}", storage_type(*t)));
            }
            writeln!(s, "void epi({}) {{", params.join(", ")).unwrap();
            self.stream_decodes(&epi_streams, &mut s);
            self.decode_raw(self.out, n, &mut s);
            if cached {
                self.decode_raw(self.val_t, n + 1, &mut s);
            }
            for (q, t) in hoisted_types.iter().enumerate() {
                self.decode_raw(*t, epi_base + q, &mut s);
            }
            s.push_str(&epi.body);
            for (q, (_, t)) in self.epilogue.iter().enumerate() {
                writeln!(s, "        y{q} = {};", encode_with(*t, &epi.values[q], self.math)).unwrap();
            }
            s.push_str("}\n");
        }
        let lanes = self.lanes as usize;
        writeln!(s, "shared ACC s_v[{lanes}];\nshared uint s_i[{lanes}];").unwrap();
        if let Some((_, _, ReduceOp::Sum)) = self.pre {
            writeln!(s, "shared double s_ps[{lanes}];").unwrap();
        } else if let Some((_, _, op)) = self.pre {
            let max = op == ReduceOp::Max;
            // The row extreme's fold: the plain f32 max/min's `comb` (bits_extreme, ties and
            // NaNs by index), on the stored bits.
            writeln!(s, "shared uint s_pm[{lanes}];\nshared uint s_pmi[{lanes}];").unwrap();
            s.push_str(&f32_order_fns("pre", "uint"));
            s.push_str("void pre_comb(inout uint av, inout uint ai, uint bv, uint bi) {\n");
            s.push_str(&extreme_comb_body("pre", max, false, false, true, true));
            s.push_str("}\n");
        }
        writeln!(s, "layout(local_size_x = {lanes}) in;\nvoid main() {{").unwrap();
        let ns = self.streams.len();
        let n_mem = self.streams.iter().filter(|st| matches!(st.kind, StreamKind::Input(_))).count();
        let n_addr = if fused { 1 + n_mem + self.epilogue.len() } else { 2 };
        writeln!(s, "    ParamsI32 meta = ParamsI32(pc.params + {}ul);", 8 * n_addr).unwrap();
        s.push_str("    int R = meta.v[0]; uint S = uint(meta.v[1]); int L = meta.v[2]; uint P = uint(meta.v[3]);\n");
        if !fused {
            s.push_str("    uint64_t g_src = ParamsU64(pc.params).v[1];\n");
        }
        for (u, st) in self.streams.iter().enumerate() {
            writeln!(s, "    int off{u} = meta.v[{}];", 4 + u).unwrap();
            if let StreamKind::Input(j) = st.kind {
                let b = buf_type(self.in_types[j]);
                writeln!(s, "    {b} in{u} = {b}(ParamsU64(pc.params).v[{}]);", 1 + u).unwrap();
            }
        }
        for (q, (_, t)) in self.epilogue.iter().enumerate() {
            let b = buf_type(*t);
            writeln!(s, "    {b} eo{q} = {b}(ParamsU64(pc.params).v[{}]);", 1 + n_mem + q).unwrap();
        }
        for d in 0..self.kept + self.red {
            let at = 4 + ns + d * (1 + ns);
            let (dn, sn, dd) = if d < self.kept { ("kd", "ks", d) } else { ("rd", "rs", d - self.kept) };
            write!(s, "    uint {dn}{dd} = uint(meta.v[{at}]);").unwrap();
            for u in 0..ns {
                write!(s, " int {sn}{u}_{dd} = meta.v[{}];", at + 1 + u).unwrap();
            }
            s.push('\n');
        }
        s.push_str("    uint t = gl_LocalInvocationID.x;\n");
        // Output loop header, per strategy; [r0, r1) is the range this invocation's group folds
        // (unsigned: R may be close to 2^31).
        let per_output = self.strategy == Strategy::PerOutput;
        if per_output {
            s.push_str("    for (uint o = gl_GlobalInvocationID.x; o < pc.count; o += gl_NumWorkGroups.x * 256u) {\n");
            s.push_str("        uint r0 = 0u; uint r1 = uint(R);\n");
        } else {
            s.push_str("    for (uint g = gl_WorkGroupID.x; g < pc.count; g += gl_NumWorkGroups.x) {\n");
            if self.sink_partial {
                s.push_str("        uint o = g / S; uint seg = g % S;\n");
                s.push_str("        uint r0 = min(seg * uint(L), uint(R)); uint r1 = min(uint(R), r0 + uint(L));\n");
            } else {
                s.push_str("        uint o = g; uint r0 = 0u; uint r1 = uint(R);\n");
            }
        }
        // Each stream's index at output o's first element, and the row-constant ones' values.
        for u in 0..ns {
            writeln!(s, "        int b{u} = off{u};").unwrap();
        }
        if self.kept > 0 && ns > 0 {
            s.push_str("        { uint rest = o;\n");
            for d in (0..self.kept).rev() {
                if d == 0 {
                    s.push_str("            uint q0 = rest;\n");
                } else {
                    writeln!(s, "            uint q{d} = rest % kd{d}; rest /= kd{d};").unwrap();
                }
                for u in 0..ns {
                    writeln!(s, "            b{u} += int(q{d}) * ks{u}_{d};").unwrap();
                }
            }
            s.push_str("        }\n");
        }
        for (u, st) in self.streams.iter().enumerate() {
            if !st.row_const || self.pre.is_some_and(|(_, um, _)| um == u) {
                continue;
            }
            match st.kind {
                // R == 0: an empty input may have no element to read
                StreamKind::Input(j) => {
                    let raw = storage_type(self.in_types[j]);
                    if fin_streams.contains(&u) {
                        // read at the output's position whatever R (checked: constant along
                        // the reduced axes, so it is a kept-shape tensor broadcast back)
                        writeln!(s, "        {raw} rc{u} = in{u}.v[b{u}];").unwrap();
                    } else {
                        writeln!(s, "        {raw} rc{u} = R > 0 ? in{u}.v[b{u}] : {raw}(0);").unwrap();
                    }
                }
                _ => writeln!(s, "        uint rc{u} = uint(b{u});").unwrap(),
            }
        }
        // A row reduction (`RowReduction`): every candidate is loaded first, input `of`'s row
        // folded (an extreme in any order, a sum in the plain kernel's pairs: see
        // `RowReduction`) and written as the plain reduction writes it; it is then the replaced
        // input's row-constant value. Every invocation reads s_ps[0] / s_pm[0] before the main
        // tree's first barrier, which the next row's writes to them come after.
        let per = LOCAL as usize / lanes;
        let rk = self.row_k as usize;
        let load_candidates = |s: &mut String| {
            for j in 0..per {
                for k in 0..rk {
                    writeln!(s, "        uint c{} = min(r0 + t + {}u, r1 - 1u);", j * rk + k, row_offset(lanes, j, k)).unwrap();
                    self.fetch(&pro_streams, &(j * rk + k).to_string(), "        ", s);
                }
            }
        };
        if let Some((ux, um, ReduceOp::Sum)) = self.pre {
            // The plain f32 sum's fold: f64 partials (partial p = t + lanes * j holds the
            // candidates p + 256 k, added in increasing k to 0.0), then the fixed tree —
            // partial p absorbs p + h for h = 128 ... 1 — in registers for h >= lanes, in
            // shared memory below (the same pairs as the plain kernel's shared and subgroup
            // levels; an f64 sum of two values does not depend on their order).
            load_candidates(&mut s);
            let cand = |w: &str| to_domain(DType::F32, DType::F32, &decode(DType::F32, w));
            for j in 0..per {
                writeln!(s, "        double ps{j} = 0.0LF;").unwrap();
                for k in 0..rk {
                    let c = j * rk + k;
                    writeln!(s, "        if (r0 + t + {}u < r1) {{ precise double r = ps{j} + {}; ps{j} = r; }}", row_offset(lanes, j, k), cand(&format!("w{c}_{ux}"))).unwrap();
                }
            }
            let mut jh = per / 2;
            while jh >= 1 {
                for j in 0..jh {
                    writeln!(s, "        {{ precise double r = ps{j} + ps{}; ps{j} = r; }}", j + jh).unwrap();
                }
                jh /= 2;
            }
            s.push_str("        s_ps[t] = ps0;\n        barrier();\n");
            self.write_tree(
                &mut s,
                "precise double r = s_ps[t] + s_ps[t + h]; s_ps[t] = r;",
                "double v = s_ps[l];",
                "uvec2 bw = subgroupShuffleDown(unpackDouble2x32(v), h);\n                precise double r = v + packDouble2x32(bw); v = r;",
                "s_ps[0] = v;",
            );
            writeln!(s, "        uint rc{um} = {};", encode(DType::F32, &wrap(DType::F32, "s_ps[0]"))).unwrap();
            writeln!(s, "        if (t == 0u) in{um}.v[b{um}] = rc{um};").unwrap();
        } else if let Some((ux, um, op)) = self.pre {
            let max = op == ReduceOp::Max;
            load_candidates(&mut s);
            writeln!(s, "        uint pm = {}; uint pmi = NONE;", if max { "0xFF800000u" } else { "0x7F800000u" }).unwrap();
            for j in 0..per {
                for k in 0..rk {
                    let c = j * rk + k;
                    writeln!(s, "        if (r0 + t + {}u < r1) pre_comb(pm, pmi, w{c}_{ux}, c{c});", row_offset(lanes, j, k)).unwrap();
                }
            }
            s.push_str("        s_pm[t] = pm; s_pmi[t] = pmi;\n        barrier();\n");
            self.write_tree(
                &mut s,
                "uint v = s_pm[t]; uint i = s_pmi[t]; pre_comb(v, i, s_pm[t + h], s_pmi[t + h]); s_pm[t] = v; s_pmi[t] = i;",
                "uint v = s_pm[l]; uint i = s_pmi[l];",
                "uint bv = subgroupShuffleDown(v, h); uint bi = subgroupShuffleDown(i, h);\n                pre_comb(v, i, bv, bi);",
                "s_pm[0] = v; s_pmi[0] = i;",
            );
            let value = wrap(DType::F32, &to_domain(DType::F32, DType::F32, "nx_f32_to_f64(s_pm[0])"));
            writeln!(s, "        uint rc{um} = {};", encode(DType::F32, &value)).unwrap();
            writeln!(s, "        if (t == 0u) in{um}.v[b{um}] = rc{um};").unwrap();
        }
        for (q, t) in pro_hoisted_types.iter().enumerate() {
            let args: Vec<String> = self.streams_of(&pro_hoisted[q]).iter().map(|&u| self.stream_var(u, "f")).collect();
            writeln!(s, "        {} hp{q} = phoist{q}({});", storage_type(*t), args.join(", ")).unwrap();
        }
        s.push_str("        ACC av = ident(); uint ai = NONE;\n");
        if self.nan_seeded() && fused {
            // Nx.BinaryBackend: comparisons with NaN are false, so a NaN first element is never
            // beaten (only later NaNs tie with it) and any other NaN is never taken.
            s.push_str("        bool nan_seed = false;\n        if (R > 0) {\n            uint cz = 0u;\n");
            self.fetch(&pro_streams, "z", "            ", &mut s);
            writeln!(s, "            nan_seed = acc_isnan(cand({}));\n        }}", self.value(&pro_streams, "z", pro_hoisted.len())).unwrap();
        }
        // Reads candidate `c{k}`'s raw bits (and, for partials, its index into `x{k}`).
        let fetch = |s: &mut String, k: usize, indent: &str| {
            if fused {
                self.fetch(&pro_streams, &k.to_string(), indent, s);
            } else {
                // partials of output o sit at o*R .. o*R+R-1; their indices after all P values
                writeln!(s, "{indent}uint j{k} = o * uint(R) + c{k};").unwrap();
                writeln!(s, "{indent}uint64_t w{k} = BufU64(g_src).v[j{k}]; uint x{k} = BufU32(g_src + uint64_t(P) * 8ul).v[j{k}];").unwrap();
            }
        };
        // Decodes candidate k (its value's stored bits `v`, or the one `Spec::value` gives)
        // and combines it into (av, ai).
        let combine_value = |s: &mut String, k: usize, indent: &str, v: Option<&str>| {
            if !fused {
                writeln!(s, "{indent}comb(av, ai, acc_from(w{k}), x{k});").unwrap();
                return;
            }
            let v = v.map_or_else(|| self.value(&pro_streams, &k.to_string(), pro_hoisted.len()), str::to_string);
            if self.seq_fold() {
                writeln!(s, "{indent}{{ uint kk = seq_key(cand({v}), nan_seed); if (SEQ_TAKES(kk, ak)) {{ ak = kk; ai = c{k}; }} }}").unwrap();
            } else if self.nan_seeded() {
                writeln!(s, "{indent}{{ ACC v = cand({v}); comb(av, ai, v, (acc_isnan(v) == nan_seed) ? c{k} : NONE); }}").unwrap();
            } else {
                writeln!(s, "{indent}comb(av, ai, cand({v}), c{k});").unwrap();
            }
        };
        let combine = |s: &mut String, k: usize, indent: &str| combine_value(s, k, indent, None);
        // The invocation folds r = first, first + step, ... < r1 in that order: a round reads
        // UNROLL candidates (independent loads in flight) before it decodes and combines them
        // into the one accumulator in increasing r, so the order is the sequential one.
        let (first, step) = if per_output { ("r0", 1) } else { ("r0 + t", LOCAL as usize) };
        if self.row_k > 0 {
            // A short row (PerGroup): this invocation's candidates r0 + t + 256 k, k < row_k,
            // are all loaded before any is combined — the last ones clamped to the row's end,
            // so every load is in bounds, and not combined — then combined in increasing k,
            // the general loop's order. (The general loop below would take a 1024-element row
            // one load at a time: its unrolled rounds need 8 candidates per invocation.) The
            // row is never empty here: row_k > 0 only for R > 256 (row_k - 1), and the key
            // holds row_k. For an epilogue that reads the prologue (`cached`), the loaded bits
            // and the prologue's values stay in registers for it.
            //
            // With fewer lanes than partials ([`narrow_lanes`]), invocation t holds the
            // partials p = t + lanes * j (j < LOCAL / lanes), each folded exactly as above, and
            // takes the tree's levels h >= lanes itself: partial p < h absorbs p + h, which is
            // the same invocation's partial j + h / lanes. The shared tree then starts at
            // h = lanes / 2. Same pairs, same order: the same bits as 256 lanes.
            if self.pre.is_none() {
                load_candidates(&mut s);
            }
            if cached {
                for c in 0..per * rk {
                    writeln!(s, "        RAW pv{c} = {};", self.value(&pro_streams, &c.to_string(), pro_hoisted.len())).unwrap();
                }
            }
            for j in 0..per {
                let indent = if per > 1 {
                    writeln!(s, "        ACC av{j} = ident(); uint ai{j} = NONE;\n        {{ ACC av = ident(); uint ai = NONE;").unwrap();
                    "            "
                } else {
                    "        "
                };
                for k in 0..rk {
                    let c = j * rk + k;
                    writeln!(s, "{indent}if (r0 + t + {}u < r1) {{", row_offset(lanes, j, k)).unwrap();
                    combine_value(&mut s, c, &format!("{indent}    "), cached.then(|| format!("pv{c}")).as_deref());
                    writeln!(s, "{indent}}}").unwrap();
                }
                if per > 1 {
                    writeln!(s, "            av{j} = av; ai{j} = ai;\n        }}").unwrap();
                }
            }
            if per > 1 {
                let mut jh = per / 2;
                while jh >= 1 {
                    for j in 0..jh {
                        writeln!(s, "        comb(av{j}, ai{j}, av{}, ai{});", j + jh, j + jh).unwrap();
                    }
                    jh /= 2;
                }
                s.push_str("        av = av0; ai = ai0;\n");
            }
        } else {
            if self.seq_fold() {
                s.push_str("        uint ak = SEQ_NEVER;\n");
            }
            writeln!(s, "        uint r = {first};").unwrap();
            writeln!(s, "        for (; r + {}u < r1; r += {}u) {{", (UNROLL - 1) * step, UNROLL * step).unwrap();
            for k in 0..UNROLL {
                writeln!(s, "            uint c{k} = r + {}u;", k * step).unwrap();
                fetch(&mut s, k, "            ");
            }
            for k in 0..UNROLL {
                combine(&mut s, k, "            ");
            }
            s.push_str("        }\n");
            // Tail: fewer than UNROLL candidates left, one at a time.
            writeln!(s, "        for (; r < r1; r += {step}u) {{").unwrap();
            s.push_str("            uint c0 = r;\n");
            fetch(&mut s, 0, "            ");
            combine(&mut s, 0, "            ");
            s.push_str("        }\n");
            if self.seq_fold() {
                s.push_str("        if (ai != NONE) av = seq_value(ak, nan_seed);\n");
            }
        }
        if !per_output {
            // Fixed tree: partial t absorbs partial t+h, halving h.
            s.push_str("        s_v[t] = av; s_i[t] = ai;\n        barrier();\n");
            // With subgroup shuffles, the shared-memory levels stop at the subgroup size and
            // the first subgroup takes the levels below it in registers: lane l takes partial
            // l (whatever invocation wrote it) and absorbs lane l + h's value by a shuffle —
            // the same pairs in the same order as the shared-memory levels, so the same bits,
            // with 3 barriers instead of 8 on a 32-wide subgroup. The 64-bit accumulator
            // travels as two 32-bit words. Every lane combines, not only l < h: no branch
            // separates one shuffle from the next (Vulkan does not promise that lanes
            // reconverge after one), and what lanes l >= h compute never reaches lane 0 (lane
            // l < h reads lane l + h < 2h, which was below the previous level's 2h).
            self.write_tree(
                &mut s,
                "ACC v = s_v[t]; uint i = s_i[t]; comb(v, i, s_v[t + h], s_i[t + h]); s_v[t] = v; s_i[t] = i;",
                "ACC v = s_v[l]; uint i = s_i[l];",
                "uvec2 bw = subgroupShuffleDown(acc_words(v), h); uint bi = subgroupShuffleDown(i, h);\n                comb(v, i, acc_from_words(bw), bi);",
                "s_v[0] = v; s_i[0] = i;",
            );
            s.push_str("        av = s_v[0]; ai = s_i[0];\n        barrier();\n");
        }
        // Store.
        let store_guard = if per_output { "" } else { "if (t == 0u) " };
        if self.sink_partial {
            writeln!(s, "        {store_guard}{{ BufU64(ParamsU64(pc.params).v[0]).v[g] = acc_bits(av); BufU32(ParamsU64(pc.params).v[0] + uint64_t(P) * 8ul).v[g] = ai; }}").unwrap();
        } else {
            let out = self.red_t;
            // Values are rounded/wrapped to `out` by the shared rule, which also writes every
            // NaN as the canonical positive quiet NaN (BinaryBackend holds NaN as an atom).
            let value = match self.comb {
                Comb::Extreme { arg: true, .. } => to_domain(DType::U64, out, "uint64_t(ai == NONE ? 0u : ai)"),
                Comb::Extreme { .. } if self.bits_extreme() => wrap(out, &to_domain(in_t, out, "nx_f32_to_f64(av)")),
                Comb::Extreme { .. } => wrap(out, &to_domain(in_t, out, "av")),
                Comb::All | Comb::Any => to_domain(DType::U64, out, "av"),
                Comb::Sum | Comb::Product => wrap(out, "av"),
            };
            match &self.finish {
                None => writeln!(s, "        {} res = {};", storage_type(out), encode(out, &value)).unwrap(),
                Some(f) => {
                    let args: Vec<String> = self.streams_of(f).iter().map(|&u| self.stream_var(u, "f")).collect();
                    writeln!(s, "        {} res = fin({}{});", storage_type(self.out), args.iter().map(|a| format!("{a}, ")).collect::<String>(), encode(out, &value)).unwrap();
                }
            }
            writeln!(s, "        {store_guard}{}(ParamsU64(pc.params).v[0]).v[o] = res;", buf_type(self.out)).unwrap();
        }
        if epi.is_some() {
            // The epilogue over output o's elements: every invocation of the group (or the
            // one invocation of PerOutput) takes r = first, first + step, ...
            let flat = flat.ok_or_else(|| invalid!("fused reduction epilogue without an output index"))?;
            if !epi_streams.contains(&flat) {
                epi_streams.push(flat);
            }
            for (q, t) in hoisted_types.iter().enumerate() {
                let args: Vec<String> = self.streams_of(&hoisted[q]).iter().map(|&u| self.stream_var(u, "f")).collect();
                writeln!(s, "        {} h{q} = hoist{q}({}res);", storage_type(*t), args.iter().map(|a| format!("{a}, ")).collect::<String>()).unwrap();
            }
            // The epilogue reads its inputs through references of its own, loaded again from
            // the parameter block. NVIDIA's shader compiler (driver 580.159) crashed (SIGSEGV,
            // so the whole process) on a PerOutput f64 max whose epilogue loop re-read the
            // reduction loop's inputs through the same references; with references of its own
            // the same kernel builds (stop 21, run 2: bench/results/2026-12-02-h200-stop21).
            for &u in &epi_streams {
                if let StreamKind::Input(j) = self.streams[u].kind {
                    if !self.streams[u].row_const {
                        let b = buf_type(self.in_types[j]);
                        writeln!(s, "        {b} ein{u} = {b}(ParamsU64(pc.params).v[{}]);", 1 + u).unwrap();
                    }
                }
            }
            // The epilogue at element `cy`; with cached prologue values, candidate k's: its
            // kept prologue value and the input bits the reduction loaded for it.
            let loaded: Vec<usize> = pro_streams.iter().copied().filter(|&u| !self.streams[u].row_const && matches!(self.streams[u].kind, StreamKind::Input(_))).collect();
            let epilogue_at = |s: &mut String, k: Option<usize>| {
                let mut need = epi_streams.clone();
                if let Some(k) = k {
                    for &u in need.iter().filter(|u| loaded.contains(u)) {
                        if let StreamKind::Input(j) = self.streams[u].kind {
                            writeln!(s, "            {} wy_{u} = w{k}_{u};", storage_type(self.in_types[j])).unwrap();
                        }
                    }
                    need.retain(|u| !loaded.contains(u));
                }
                self.fetch_from("ein", &need, "y", "            ", s);
                let pv = k.map(|k| format!("pv{k}"));
                let mut args: Vec<String> = self.streams_of_exprs(&epi_exprs).iter().map(|&u| self.stream_var(u, "y")).collect();
                args.push("res".to_string());
                args.extend(pv);
                args.extend((0..hoisted.len()).map(|q| format!("h{q}")));
                for (q, (_, t)) in self.epilogue.iter().enumerate() {
                    writeln!(s, "            {} y{q};", storage_type(*t)).unwrap();
                    args.push(format!("y{q}"));
                }
                writeln!(s, "            epi({});", args.join(", ")).unwrap();
                let at = self.stream_var(flat, "y");
                for q in 0..self.epilogue.len() {
                    writeln!(s, "            eo{q}.v[{at}] = y{q};").unwrap();
                }
            };
            if cached {
                // The reduction's candidates again (candidate k is element t + 256 k), with
                // their kept values. Without a prologue value to hand over, the epilogue stays
                // a loop that loads its inputs again: unrolled (to read the loaded bits from
                // registers) layernorm's epilogue ran slower on the H200 (:exact 103 -> 121 us,
                // :fast 51.6 -> 55.0 us for its second kernel; stop 22, run 1), where softmax's
                // cached one went 100 -> 76 us and 49 -> 36 us.
                let rk = self.row_k as usize;
                for c in 0..rk * (LOCAL as usize / lanes) {
                    writeln!(s, "        {{ uint cy = t + {}u; if (cy < uint(R)) {{", row_offset(lanes, c / rk, c % rk)).unwrap();
                    epilogue_at(&mut s, Some(c));
                    s.push_str("        } }\n");
                }
            } else {
                let (first, step) = if per_output { ("0u", 1) } else { ("t", lanes) };
                writeln!(s, "        for (uint cy = {first}; cy < uint(R); cy += {step}u) {{").unwrap();
                epilogue_at(&mut s, None);
                s.push_str("        }\n");
            }
        }
        s.push_str("    }\n}\n");
        if std::env::var_os("NX_VULKAN_DUMP_KERNELS").is_some() {
            eprintln!("// ---- {}\n{s}", self.key());
        }
        Ok(s)
    }

    /// The streams any of `exprs` reads, in stream order.
    fn streams_of_exprs(&self, exprs: &[Expr]) -> Vec<usize> {
        let all: Vec<usize> = exprs.iter().flat_map(|e| self.streams_of(e)).collect();
        (0..self.streams.len()).filter(|u| all.contains(u)).collect()
    }
}

/// `{p}_isnan` and `{p}_key` over f32 stored bits held as `ty`: NaN by its bits, and the order
/// key — negative values' bits reversed below the positives', both zeros one key.
fn f32_order_fns(p: &str, ty: &str) -> String {
    format!(
        "bool {p}_isnan({ty} v) {{ return (v & 0x7FFFFFFFu) > 0x7F800000u; }}\n\
         uint {p}_key({ty} v) {{ return (v & 0x7FFFFFFFu) == 0u ? 0x80000000u : ((v & 0x80000000u) != 0u ? ~v : (v | 0x80000000u)); }}\n"
    )
}

/// The body of a max/min `comb(av, ai, bv, bi)`: take `bv` when it beats `av` (NaN first, ties
/// to the lower index, or the higher with `high`), through `{p}_isnan` for floats and
/// `{p}_key` where values are compared by their f32 bits (`bits`).
fn extreme_comb_body(p: &str, max: bool, high: bool, arg: bool, float: bool, bits: bool) -> String {
    let gt = if max { ">" } else { "<" };
    let tie = if high { "bi > ai" } else { "bi < ai" };
    let mut s = String::from("    if (bi == NONE) return;\n    bool take;\n    if (ai == NONE) take = true;\n");
    if float && arg {
        // Candidates are all NaN or all non-NaN (see `nan_seed`), and `av` is a candidate here
        // (`ai != NONE`): NaN candidates tie, and testing `bv` alone decides whether both are NaN.
        writeln!(s, "    else if ({p}_isnan(bv)) take = {tie};").unwrap();
    } else if float {
        writeln!(s, "    else if ({p}_isnan(av) || {p}_isnan(bv)) take = {p}_isnan(bv) && (!{p}_isnan(av) || bi < ai);").unwrap();
    }
    if bits {
        writeln!(s, "    else if ({p}_key(bv) == {p}_key(av)) take = {tie};\n    else take = {p}_key(bv) {gt} {p}_key(av);").unwrap();
    } else {
        writeln!(s, "    else if (bv == av) take = {tie};\n    else take = bv {gt} av;").unwrap();
    }
    s.push_str("    if (take) { av = bv; ai = bi; }\n");
    s
}

/// Whether input `j` is read through a stream constant along the reduced axes.
fn input_row_constant(streams: &[Stream], j: usize) -> bool {
    streams.iter().any(|st| st.kind == StreamKind::Input(j) && st.row_const)
}

/// Whether `e` reads only inputs for which `row_const` holds, and constants (no iota): constant
/// along the reduced axes.
fn row_constant(e: &Expr, row_const: &impl Fn(usize) -> bool) -> bool {
    match e {
        Expr::Input(j) => row_const(*j),
        Expr::Const { .. } => true,
        Expr::Iota { .. } => false,
        Expr::Unary { arg, .. } | Expr::Convert { arg, .. } | Expr::Bitcast { arg, .. } => row_constant(arg, row_const),
        Expr::Binary { lhs, rhs, .. } => row_constant(lhs, row_const) && row_constant(rhs, row_const),
        Expr::Select { pred, on_true, on_false, .. } => row_constant(pred, row_const) && row_constant(on_true, row_const) && row_constant(on_false, row_const),
    }
}

/// Whether `e` costs no library call per element: every node that varies along the reduced
/// axes is an input, a constant, an iota, a conversion, a select, or native arithmetic
/// (add, subtract, multiply, negate, abs, max, min, comparisons) on non-complex values;
/// subexpressions that read only row-constant inputs (`row_const`) and constants are hoisted
/// to once per output (`hoist_row_constant`) and cost nothing here whatever they hold.
fn cheap_per_element(e: &Expr, row_const: &impl Fn(usize) -> bool) -> bool {
    cheap_and_row_constant(e, row_const).0
}

/// ([`cheap_per_element`], [`row_constant`]) of `e` in one walk: each node's answers come from
/// its children's, so the cost is linear in the expression's size (asking `row_constant` of
/// every node's subtree again was quadratic in its depth).
fn cheap_and_row_constant(e: &Expr, row_const: &impl Fn(usize) -> bool) -> (bool, bool) {
    let walk = |e: &Expr| cheap_and_row_constant(e, row_const);
    let (cheap, constant) = match e {
        Expr::Input(j) => (true, row_const(*j)),
        Expr::Const { .. } => (true, true),
        Expr::Iota { .. } => (true, false),
        Expr::Convert { arg, dtype } | Expr::Bitcast { arg, dtype } => {
            let (c, r) = walk(arg);
            (!dtype.is_complex() && c, r)
        }
        Expr::Unary { op, arg, dtype } => {
            let (c, r) = walk(arg);
            (matches!(op, UnaryOp::Negate | UnaryOp::Abs) && !dtype.is_complex() && c, r)
        }
        Expr::Binary { op, lhs, rhs, dtype } => {
            let ((cl, rl), (cr, rr)) = (walk(lhs), walk(rhs));
            let native = matches!(op, BinaryOp::Add | BinaryOp::Subtract | BinaryOp::Multiply | BinaryOp::Max | BinaryOp::Min) || op.is_comparison();
            (native && !dtype.is_complex() && cl && cr, rl && rr)
        }
        Expr::Select { pred, on_true, on_false, .. } => {
            let ((cp, rp), (ct, rt), (cf, rf)) = (walk(pred), walk(on_true), walk(on_false));
            (cp && ct && cf, rp && rt && rf)
        }
    };
    // a row-constant part is hoisted: cheap whatever it holds
    (cheap || constant, constant)
}

/// Where candidate `k` of partial `t + lanes * j` sits in its row, less `t`: partial p folds
/// elements p, p + 256, p + 512, ... ([`Strategy::PerGroup`]).
fn row_offset(lanes: usize, j: usize, k: usize) -> usize {
    j * lanes + k * LOCAL as usize
}

/// The parameter holding input `j`'s stored bits (of type `t`): `nx_raw{j}_`.
fn raw_param(t: DType, j: usize) -> String {
    format!("{} nx_raw{j}_", storage_type(t))
}

/// Whether `part` occurs in `e` (as a subexpression, or `e` itself).
fn contains(e: &Expr, part: &Expr) -> bool {
    e == part
        || match e {
            Expr::Input(_) | Expr::Const { .. } | Expr::Iota { .. } => false,
            Expr::Unary { arg, .. } | Expr::Convert { arg, .. } | Expr::Bitcast { arg, .. } => contains(arg, part),
            Expr::Binary { lhs, rhs, .. } => contains(lhs, part) || contains(rhs, part),
            Expr::Select { pred, on_true, on_false, .. } => contains(pred, part) || contains(on_true, part) || contains(on_false, part),
        }
}

/// `e` with every occurrence of `part` replaced by `by`.
fn replace(e: &Expr, part: &Expr, by: &Expr) -> Expr {
    if e == part {
        return by.clone();
    }
    let go = |x: &Expr| Box::new(replace(x, part, by));
    match e {
        Expr::Input(_) | Expr::Const { .. } | Expr::Iota { .. } => e.clone(),
        Expr::Unary { op, arg, dtype } => Expr::Unary { op: *op, arg: go(arg), dtype: *dtype },
        Expr::Convert { arg, dtype } => Expr::Convert { arg: go(arg), dtype: *dtype },
        Expr::Bitcast { arg, dtype } => Expr::Bitcast { arg: go(arg), dtype: *dtype },
        Expr::Binary { op, lhs, rhs, dtype } => Expr::Binary { op: *op, lhs: go(lhs), rhs: go(rhs), dtype: *dtype },
        Expr::Select { pred, on_true, on_false, dtype } => Expr::Select { pred: go(pred), on_true: go(on_true), on_false: go(on_false), dtype: *dtype },
    }
}

/// `e` with each maximal row-constant subexpression that is not a leaf (it reads only inputs
/// for which `row_const` holds, and constants: no iota) replaced by `Input(base + q)`, where
/// `hoisted[q]` is that subexpression (equal subexpressions share one q).
fn hoist_row_constant(e: &Expr, row_const: &impl Fn(usize) -> bool, hoisted: &mut Vec<Expr>, base: usize) -> Expr {
    let leaf = matches!(e, Expr::Input(_) | Expr::Const { .. } | Expr::Iota { .. });
    if !leaf && row_constant(e, row_const) {
        let q = hoisted.iter().position(|h| h == e).unwrap_or_else(|| {
            hoisted.push(e.clone());
            hoisted.len() - 1
        });
        return Expr::Input(base + q);
    }
    let mut go = |x: &Expr| Box::new(hoist_row_constant(x, row_const, hoisted, base));
    match e {
        Expr::Input(_) | Expr::Const { .. } | Expr::Iota { .. } => e.clone(),
        Expr::Unary { op, arg, dtype } => Expr::Unary { op: *op, arg: go(arg), dtype: *dtype },
        Expr::Convert { arg, dtype } => Expr::Convert { arg: go(arg), dtype: *dtype },
        Expr::Bitcast { arg, dtype } => Expr::Bitcast { arg: go(arg), dtype: *dtype },
        Expr::Binary { op, lhs, rhs, dtype } => {
            let (lhs, rhs) = (go(lhs), go(rhs));
            Expr::Binary { op: *op, lhs, rhs, dtype: *dtype }
        }
        Expr::Select { pred, on_true, on_false, dtype } => {
            let (pred, on_true, on_false) = (go(pred), go(on_true), go(on_false));
            Expr::Select { pred, on_true, on_false, dtype: *dtype }
        }
    }
}

fn zero(acc: &str) -> String {
    match acc {
        "dvec2" => "dvec2(0.0LF, 0.0LF)".into(),
        "double" => "0.0LF".into(),
        "int64_t" => "0l".into(),
        _ => "0ul".into(),
    }
}

fn one(acc: &str) -> String {
    match acc {
        "dvec2" => "dvec2(1.0LF, 0.0LF)".into(),
        "double" => "1.0LF".into(),
        "int64_t" => "1l".into(),
        _ => "1ul".into(),
    }
}

/// The identity of max (`max`) or min over values of type `t`, in `t`'s compute domain.
fn extreme_identity(t: DType, max: bool) -> String {
    match t.kind() {
        Kind::Float | Kind::Complex => if max { "(-nx_inf())" } else { "nx_inf()" }.into(),
        Kind::Signed => {
            let bits = t.bits() as u32;
            let v: i64 = if max { i64::MIN >> (64 - bits) } else { i64::MAX >> (64 - bits) };
            format!("int64_t({:#x}ul)", v as u64)
        }
        Kind::Unsigned => {
            let bits = t.bits() as u32;
            let v: u64 = if max { 0 } else { u64::MAX >> (64 - bits) };
            format!("uint64_t({v:#x}ul)")
        }
    }
}

/// `v != 0` as 1/0 for a value in `t`'s domain (NaN is non-zero; -0.0 is zero).
fn nonzero(t: DType, v: &str) -> String {
    match t.kind() {
        Kind::Complex => format!("((({v}).x == 0.0LF && ({v}).y == 0.0LF) ? 0ul : 1ul)"),
        Kind::Float => format!("(({v}) != 0.0LF ? 1ul : 0ul)"),
        Kind::Signed => format!("(({v}) != 0l ? 1ul : 0ul)"),
        Kind::Unsigned => format!("(({v}) != 0ul ? 1ul : 0ul)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elementwise::{BinaryOp, Scalar, UnaryOp};

    /// Layernorm's epilogue `(x - s / n) * rsqrt(v / n + eps)`, with x = input 0 (varying),
    /// s = input 1 (row-constant) and v = input 2 (the reduced value): the two row-constant
    /// parts are taken out, the varying one stays, and a repeated part is taken out once.
    #[test]
    fn row_constant_parts_are_hoisted_once() {
        let f = DType::F32;
        let c = |v: f64| Expr::Const { value: Scalar::F(v), dtype: f };
        let mean = Expr::binary(BinaryOp::Divide, Expr::Input(1), c(1024.0), f);
        let rstd = Expr::unary(UnaryOp::Rsqrt, Expr::binary(BinaryOp::Add, Expr::binary(BinaryOp::Divide, Expr::Input(2), c(1024.0), f), c(1e-5), f), f);
        let centred = Expr::binary(BinaryOp::Subtract, Expr::Input(0), mean.clone(), f);
        let e = Expr::binary(BinaryOp::Multiply, Expr::binary(BinaryOp::Multiply, centred.clone(), rstd.clone(), f), centred, f);
        let mut hoisted = vec![];
        let out = hoist_row_constant(&e, &|j| j >= 1, &mut hoisted, 3);
        assert_eq!(hoisted, vec![mean, rstd]);
        let centred = Expr::binary(BinaryOp::Subtract, Expr::Input(0), Expr::Input(3), f);
        assert_eq!(out, Expr::binary(BinaryOp::Multiply, Expr::binary(BinaryOp::Multiply, centred.clone(), Expr::Input(4), f), centred, f));
        // leaves and iotas stay where they are
        let iota = Expr::binary(BinaryOp::Add, Expr::Iota { axis: Some(0), dtype: f }, Expr::Input(1), f);
        let mut none = vec![];
        assert_eq!(hoist_row_constant(&iota, &|j| j >= 1, &mut none, 3), iota);
        assert!(none.is_empty());
    }

    /// What counts as cheap per element (narrow workgroups): native arithmetic on varying
    /// inputs, and library calls only where their argument is row-constant (hoisted); a library
    /// call on a varying value, or complex arithmetic, is not. A chain 20,000 deep is
    /// classified in one linear walk (agreeing with `row_constant` at every depth tested).
    #[test]
    fn cheap_per_element_classes() {
        let f = DType::F32;
        let rc = |j: usize| j >= 1;
        let x = || Expr::Input(0);
        let s = || Expr::Input(1);
        let exp = |e: Expr| Expr::unary(UnaryOp::Exp, e, f);
        assert!(cheap_per_element(&Expr::binary(BinaryOp::Add, x(), s(), f), &rc));
        assert!(cheap_per_element(&Expr::binary(BinaryOp::Multiply, x(), exp(s()), f), &rc), "exp of a row constant is hoisted");
        assert!(!cheap_per_element(&exp(Expr::binary(BinaryOp::Subtract, x(), s(), f)), &rc), "exp of a varying value");
        assert!(cheap_per_element(&exp(exp(s())), &rc));
        assert!(!cheap_per_element(&Expr::binary(BinaryOp::Divide, x(), s(), f), &rc), "division is a library call");
        assert!(!cheap_per_element(&Expr::binary(BinaryOp::Add, x(), x(), DType::C64), &rc), "complex");
        assert!(cheap_per_element(&Expr::Select { pred: Box::new(Expr::binary(BinaryOp::Greater, x(), s(), DType::U8)), on_true: Box::new(x()), on_false: Box::new(Expr::Iota { axis: None, dtype: f }), dtype: f }, &rc));
        // deep chains: x + s + s + ... (cheap, varying) and s * s * ... (row-constant)
        let (mut varying, mut constant) = (x(), s());
        for depth in 1..=20_000 {
            varying = Expr::binary(BinaryOp::Add, varying, s(), f);
            constant = Expr::binary(BinaryOp::Multiply, constant, s(), f);
            if depth % 5_000 == 0 {
                assert_eq!(cheap_and_row_constant(&varying, &rc), (true, false));
                assert_eq!(cheap_and_row_constant(&constant, &rc), (true, true));
                assert!(!row_constant(&varying, &rc) && row_constant(&constant, &rc));
            }
        }
        assert!(!cheap_per_element(&exp(varying), &rc));
    }
}
