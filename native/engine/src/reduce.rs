//! Reductions (sum, product, max, min, all, any) and arg-reductions (argmax, argmin) over any
//! set of axes of any tensor view.
//!
//! The input view is regrouped as `[kept axes..., reduced axes...]` (adjacent axes merged where
//! their strides allow), so output element `o` (row-major over the kept axes) reduces the
//! elements `r = 0..R` (row-major over the reduced axes, in their original order). Kernels read
//! the view through its strides: no copy is made.
//!
//! **Fixed order.** The strategy is chosen from the shape alone (never from the device, its
//! subgroup size or its timing), and each strategy combines in a fixed order, so reruns are
//! bit-identical and the same shader gives the same bits on every device:
//! - [`Strategy::PerOutput`]: one invocation per output, a sequential loop over `r` (exactly
//!   Nx.BinaryBackend's order) — short reductions or very many outputs;
//! - [`Strategy::PerGroup`]: one workgroup (256 invocations) per output; invocation `t` folds
//!   `r = t, t+256, ...` in that order, then a fixed shared-memory tree combines the 256 partials
//!   (for `h = 128, 64, ..., 1`: partial `t < h` absorbs partial `t + h`);
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
//! [`SPLIT_GROUPS`] = 4096 workgroups in pass 1, each segment at least one round:
//! `L = ceil(R / min(ceil(R / 2048), ceil(4096 / outputs)))` rounded up to a multiple of 2048,
//! `segments = ceil(R / L)`. 16 Mi elements into one output are 4096 segments of 4096, 1 Mi
//! elements 512 segments of 2048.
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
pub(crate) use crate::elementwise::{buf_type, decode, encode, storage_type, to_domain, wrap};
use crate::error::{invalid, Result};
use crate::tensor::{numel, Tensor, MAX_ELEMENTS};
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

/// Workgroups (outputs × segments) a `Split` reduction aims for in pass 1.
pub const SPLIT_GROUPS: usize = 4096;

/// The strategy for `outputs` results each reducing `len` elements.
pub fn choose_strategy(outputs: usize, len: usize) -> Strategy {
    if len < 256 || outputs >= 32768 {
        Strategy::PerOutput
    } else if (len >= 4 * ROUND && outputs < 256) || (len >= 32 * ROUND && outputs < 1024) {
        // About SPLIT_GROUPS workgroups in all, each segment a whole number of rounds (so only
        // the last segment has a tail); at least 4 segments here, never an empty one.
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

impl Context {
    /// Reduces `x` over `axes` (any set, any order; empty means none) with `op`, writing `out`.
    /// With `keep_axes` the reduced axes stay as size 1.
    pub fn reduce(&self, op: ReduceOp, x: &Tensor, axes: &[usize], keep_axes: bool, out: DType) -> Result<Tensor> {
        let comb = match op {
            ReduceOp::Sum => Comb::Sum,
            ReduceOp::Product => Comb::Product,
            ReduceOp::Max => Comb::Extreme { max: true, arg: false, high: false },
            ReduceOp::Min => Comb::Extreme { max: false, arg: false, high: false },
            ReduceOp::All => Comb::All,
            ReduceOp::Any => Comb::Any,
        };
        self.reduce_impl(comb, x, axes, keep_axes, out)
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
        if !out.is_integer() {
            return Err(invalid!("{op:?} returns indices: output type must be an integer type, got {out}"));
        }
        let comb = Comb::Extreme { max: op == ArgOp::ArgMax, arg: true, high: tie_break == TieBreak::High };
        let axes: Vec<usize> = match axis {
            Some(a) => vec![a],
            None => (0..x.shape.len()).collect(),
        };
        self.reduce_impl(comb, x, &axes, keep_axis, out)
    }

    fn reduce_impl(&self, comb: Comb, x: &Tensor, axes: &[usize], keep_axes: bool, out: DType) -> Result<Tensor> {
        if matches!(comb, Comb::Extreme { .. }) && (x.dtype.is_complex() || out.is_complex()) {
            return Err(invalid!("complex numbers are not ordered: max/min/argmax/argmin of {} are not defined", x.dtype));
        }
        if matches!(comb, Comb::Sum | Comb::Product) && x.dtype.is_complex() && !out.is_complex() {
            return Err(invalid!("sum/product of {} needs a complex output type, got {out}", x.dtype));
        }
        let rank = x.shape.len();
        let mut reduced = vec![false; rank];
        for &a in axes {
            if a >= rank {
                return Err(invalid!("reduction axis {a} out of range for shape {:?}", x.shape));
            }
            if std::mem::replace(&mut reduced[a], true) {
                return Err(invalid!("reduction axes {axes:?} repeat axis {a}"));
            }
        }
        let out_shape: Vec<usize> = (0..rank)
            .filter_map(|d| if reduced[d] { keep_axes.then_some(1) } else { Some(x.shape[d]) })
            .collect();
        let kept: Vec<(usize, isize)> = (0..rank).filter(|&d| !reduced[d]).map(|d| (x.shape[d], x.strides[d])).collect();
        let red: Vec<(usize, isize)> = (0..rank).filter(|&d| reduced[d]).map(|d| (x.shape[d], x.strides[d])).collect();
        let outputs = numel(&kept.iter().map(|k| k.0).collect::<Vec<_>>());
        let len = numel(&red.iter().map(|k| k.0).collect::<Vec<_>>());
        let result = self.empty(out, &out_shape)?;
        if outputs == 0 {
            return Ok(result);
        }
        if x.numel() > MAX_ELEMENTS {
            return Err(invalid!("reduction input of {} elements exceeds {MAX_ELEMENTS}", x.numel()));
        }
        let kept = merge_dims(&kept);
        let red = merge_dims(&red);
        let mut strategy = choose_strategy(outputs, len);
        if out.is_complex() && matches!(strategy, Strategy::Split { .. }) {
            // a complex partial does not fit the split strategy's 64-bit scratch slots
            strategy = Strategy::PerGroup;
        }
        let mut batch = self.batch()?;
        batch.keep(&x.buffer);
        batch.keep(&result.buffer);
        let in_addr = x.buffer.address();
        let out_addr = result.buffer.address();
        match strategy {
            Strategy::PerOutput | Strategy::PerGroup => {
                let spec = Spec { comb, in_t: x.dtype, out, src_partial: false, sink_partial: false, strategy, kept: kept.len(), red: red.len() };
                let kernel = self.kernels.get(&spec.key(), LOCAL, 1, || spec.source())?;
                let params = params(in_addr, out_addr, len, x.offset, 1, len, 0, &kept, &red)?;
                if strategy == Strategy::PerOutput {
                    batch.dispatch(&kernel, &params, outputs as u64)?;
                } else {
                    let groups = (outputs as u32).min(self.caps.max_workgroup_count[0].min(65535));
                    batch.dispatch_grid(&kernel, &params, outputs as u32, [groups, 1, 1])?;
                }
            }
            Strategy::Split { segments } => {
                let s = segments as usize;
                let seg_len = split_len(len, segments);
                let partials = outputs * s;
                let scratch = self.pool.alloc((partials * 12) as u64)?;
                batch.keep(&scratch);
                let p1 = Spec { comb, in_t: x.dtype, out, src_partial: false, sink_partial: true, strategy, kept: kept.len(), red: red.len() };
                let k1 = self.kernels.get(&p1.key(), LOCAL, 1, || p1.source())?;
                let params1 = params(in_addr, scratch.address(), len, x.offset, s, seg_len, partials, &kept, &red)?;
                let groups = (partials as u32).min(self.caps.max_workgroup_count[0].min(65535));
                batch.dispatch_grid(&k1, &params1, partials as u32, [groups, 1, 1])?;
                // pass 2: a workgroup per output folds its `s` partials like PerGroup
                let p2 = Spec {
                    comb,
                    in_t: x.dtype,
                    out,
                    src_partial: true,
                    sink_partial: false,
                    strategy: Strategy::PerGroup,
                    kept: 0,
                    red: 0,
                };
                let k2 = self.kernels.get(&p2.key(), LOCAL, 1, || p2.source())?;
                let params2 = params(scratch.address(), out_addr, s, 0, 1, s, partials, &[], &[])?;
                let groups = (outputs as u32).min(self.caps.max_workgroup_count[0].min(65535));
                batch.dispatch_grid(&k2, &params2, outputs as u32, [groups, 1, 1])?;
            }
        }
        batch.finish()?;
        Ok(result)
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

#[allow(clippy::too_many_arguments)]
fn params(
    in_addr: u64,
    out_addr: u64,
    len: usize,
    offset: usize,
    segments: usize,
    seg_len: usize,
    partials: usize,
    kept: &[(usize, isize)],
    red: &[(usize, isize)],
) -> Result<Vec<u8>> {
    let mut p = Vec::with_capacity(16 + 4 * (5 + 2 * (kept.len() + red.len())));
    p.extend_from_slice(&in_addr.to_le_bytes());
    p.extend_from_slice(&out_addr.to_le_bytes());
    let mut push = |v: isize| -> Result<()> {
        let v = i32::try_from(v).map_err(|_| invalid!("reduction index {v} exceeds 32 bits"))?;
        p.extend_from_slice(&v.to_le_bytes());
        Ok(())
    };
    for v in [len, offset, segments, seg_len, partials] {
        push(v as isize)?;
    }
    for &(n, s) in kept.iter().chain(red) {
        push(n as isize)?;
        push(s)?;
    }
    Ok(p)
}

/// Everything a reduction kernel's source depends on (its cache key).
struct Spec {
    comb: Comb,
    in_t: DType,
    out: DType,
    /// Reads (value, index) partials of pass 1 instead of tensor elements.
    src_partial: bool,
    /// Writes (value, index) partials instead of output elements.
    sink_partial: bool,
    strategy: Strategy,
    kept: usize,
    red: usize,
}

impl Spec {
    fn key(&self) -> String {
        let strategy = match self.strategy {
            Strategy::Split { .. } => "split".to_string(),
            s => format!("{s:?}"),
        };
        format!(
            "reduce {:?} {}->{} src_partial:{} sink_partial:{} {strategy} k{} r{}",
            self.comb, self.in_t, self.out, self.src_partial, self.sink_partial, self.kept, self.red
        )
    }

    /// Float argmax/argmin: candidates are filtered by whether the group's first element is NaN.
    fn nan_seeded(&self) -> bool {
        matches!(self.comb, Comb::Extreme { arg: true, .. }) && self.in_t.is_float()
    }

    /// The type partial results are held in: sums and products accumulate in the output's
    /// domain, max/min compare in the input's.
    fn acc_type(&self) -> &'static str {
        match self.comb {
            Comb::All | Comb::Any => "uint64_t",
            Comb::Extreme { .. } => self.in_t.glsl_compute(),
            Comb::Sum | Comb::Product => self.out.glsl_compute(),
        }
    }

    fn source(&self) -> String {
        let mut s = String::new();
        s.push_str(&crate::kernels::numeric_prelude());
        s.push_str(crate::kernels::OPS);
        let acc = self.acc_type();
        let in_t = self.in_t;
        writeln!(s, "#define ACC {acc}").unwrap();
        s.push_str("#define NONE 0xFFFFFFFFu\n");
        // from/to the 64-bit scratch representation
        let (to_bits, from_bits) = match acc {
            "double" => ("nx_f64_to_bits(v)", "nx_bits_to_f64(b)"),
            "int64_t" => ("uint64_t(v)", "int64_t(b)"),
            "dvec2" => ("0ul", "dvec2(0.0LF)"), // complex never uses the split strategy's scratch
            _ => ("v", "b"),
        };
        writeln!(s, "uint64_t acc_bits(ACC v) {{ return {to_bits}; }}").unwrap();
        writeln!(s, "ACC acc_from(uint64_t b) {{ return {from_bits}; }}").unwrap();
        // identity
        let ident = match self.comb {
            Comb::Sum => zero(acc),
            Comb::Product => one(acc),
            Comb::All => "1ul".into(),
            Comb::Any => "0ul".into(),
            Comb::Extreme { max, .. } => extreme_identity(in_t, max),
        };
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
            Comb::Extreme { max, high, arg } => {
                let gt = if max { ">" } else { "<" };
                let tie = if high { "bi > ai" } else { "bi < ai" };
                s.push_str("    if (bi == NONE) return;\n    bool take;\n    if (ai == NONE) take = true;\n");
                if in_t.is_float() && arg {
                    // Candidates are all NaN or all non-NaN (see `nan_seed`), and `av` is a
                    // candidate here (`ai != NONE`): NaN candidates tie, and testing `bv` alone
                    // decides whether both are NaN.
                    writeln!(s, "    else if (nx_isnan(bv)) take = {tie};").unwrap();
                } else if in_t.is_float() {
                    s.push_str("    else if (nx_isnan(av) || nx_isnan(bv)) take = nx_isnan(bv) && (!nx_isnan(av) || bi < ai);\n");
                }
                writeln!(s, "    else if (bv == av) take = {tie};\n    else take = bv {gt} av;").unwrap();
                s.push_str("    if (take) { av = bv; ai = bi; }\n");
            }
        }
        s.push_str("}\n");
        // element -> candidate value (the input's address is read once, into `g_src`)
        // `fetch` is the bare memory read (straight-line code, so reads can be issued back to
        // back), `cand` the decoding (which branches).
        s.push_str("uint64_t g_src;\n");
        if !self.src_partial {
            let t = in_t;
            let raw_t = storage_type(t);
            writeln!(s, "#define RAW {raw_t}").unwrap();
            writeln!(s, "RAW fetch(int e) {{ return {}(g_src).v[e]; }}", buf_type(t)).unwrap();
            let v = decode(t, "w");
            let cand = match self.comb {
                Comb::All | Comb::Any => nonzero(t, &v),
                Comb::Extreme { .. } => v,
                Comb::Sum | Comb::Product => to_domain(t, self.out, &v),
            };
            writeln!(s, "ACC cand(RAW w) {{ return {cand}; }}").unwrap();
        }
        s.push_str("shared ACC s_v[256];\nshared uint s_i[256];\n");
        s.push_str("layout(local_size_x = 256) in;\nvoid main() {\n");
        s.push_str("    g_src = ParamsU64(pc.params).v[0];\n");
        s.push_str("    ParamsI32 meta = ParamsI32(pc.params + 16ul);\n");
        s.push_str("    int R = meta.v[0]; int off = meta.v[1]; uint S = uint(meta.v[2]); int L = meta.v[3]; uint P = uint(meta.v[4]);\n");
        for d in 0..self.kept {
            writeln!(s, "    uint kd{d} = uint(meta.v[{}]); int ks{d} = meta.v[{}];", 5 + 2 * d, 6 + 2 * d).unwrap();
        }
        for d in 0..self.red {
            let b = 5 + 2 * (self.kept + d);
            writeln!(s, "    uint rd{d} = uint(meta.v[{b}]); int rs{d} = meta.v[{}];", b + 1).unwrap();
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
        // Base element offset of output o.
        s.push_str("        int base = off; uint rest = o;\n");
        for d in (0..self.kept).rev() {
            if d == 0 {
                s.push_str("        base += int(rest) * ks0;\n");
            } else {
                writeln!(s, "        base += int(rest % kd{d}) * ks{d}; rest /= kd{d};").unwrap();
            }
        }
        s.push_str("        ACC av = ident(); uint ai = NONE;\n");
        if self.nan_seeded() && !self.src_partial {
            // Nx.BinaryBackend: comparisons with NaN are false, so a NaN first element is never
            // beaten (only later NaNs tie with it) and any other NaN is never taken.
            s.push_str("        bool nan_seed = R > 0 && nx_isnan(cand(fetch(base)));\n");
        }
        // Reads candidate `c{k}`'s raw bits into `w{k}` (and, for partials, its index into `x{k}`).
        let fetch = |s: &mut String, k: usize, indent: &str| {
            match self.src_partial {
                false => {
                    writeln!(s, "{indent}RAW w{k}; {{ int e = base; uint rr = c{k};").unwrap();
                    for d in (0..self.red).rev() {
                        if d == 0 {
                            writeln!(s, "{indent}    e += int(rr) * rs0;").unwrap();
                        } else {
                            writeln!(s, "{indent}    e += int(rr % rd{d}) * rs{d}; rr /= rd{d};").unwrap();
                        }
                    }
                    writeln!(s, "{indent}    w{k} = fetch(e); }}").unwrap();
                }
                true => {
                    // partials of output o sit at o*R .. o*R+R-1; their indices after all P values
                    writeln!(s, "{indent}uint j{k} = o * uint(R) + c{k};").unwrap();
                    writeln!(s, "{indent}uint64_t w{k} = BufU64(g_src).v[j{k}]; uint x{k} = BufU32(g_src + uint64_t(P) * 8ul).v[j{k}];").unwrap();
                }
            }
        };
        // Decodes candidate k and combines it into (av, ai).
        let combine = |s: &mut String, k: usize, indent: &str| match self.src_partial {
            false if self.nan_seeded() => {
                writeln!(s, "{indent}{{ ACC v = cand(w{k}); comb(av, ai, v, (nx_isnan(v) == nan_seed) ? c{k} : NONE); }}").unwrap();
            }
            false => writeln!(s, "{indent}comb(av, ai, cand(w{k}), c{k});").unwrap(),
            true => writeln!(s, "{indent}comb(av, ai, acc_from(w{k}), x{k});").unwrap(),
        };
        // The invocation folds r = first, first + step, ... < r1 in that order: a round reads
        // UNROLL candidates (independent loads in flight) before it decodes and combines them
        // into the one accumulator in increasing r, so the order is the sequential one.
        let (first, step) = if per_output { ("r0", 1) } else { ("r0 + t", LOCAL as usize) };
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
        if !per_output {
            // Fixed tree: partial t absorbs partial t+h, halving h.
            s.push_str("        s_v[t] = av; s_i[t] = ai;\n        barrier();\n");
            s.push_str("        for (uint h = 128u; h > 0u; h >>= 1) {\n");
            s.push_str("            if (t < h) { ACC v = s_v[t]; uint i = s_i[t]; comb(v, i, s_v[t + h], s_i[t + h]); s_v[t] = v; s_i[t] = i; }\n");
            s.push_str("            barrier();\n        }\n");
            s.push_str("        av = s_v[0]; ai = s_i[0];\n        barrier();\n");
        }
        // Store.
        let store_guard = if per_output { "" } else { "if (t == 0u) " };
        match self.sink_partial {
            true => {
                writeln!(s, "        {store_guard}{{ BufU64(ParamsU64(pc.params).v[1]).v[g] = acc_bits(av); BufU32(ParamsU64(pc.params).v[1] + uint64_t(P) * 8ul).v[g] = ai; }}").unwrap();
            }
            false => {
                let out = self.out;
                // Values are rounded/wrapped to `out` by the shared rule, which also writes every
                // NaN as the canonical positive quiet NaN (BinaryBackend holds NaN as an atom).
                let value = match self.comb {
                    Comb::Extreme { arg: true, .. } => to_domain(DType::U64, out, "uint64_t(ai == NONE ? 0u : ai)"),
                    Comb::Extreme { .. } => wrap(out, &to_domain(in_t, out, "av")),
                    Comb::All | Comb::Any => to_domain(DType::U64, out, "av"),
                    Comb::Sum | Comb::Product => wrap(out, "av"),
                };
                let enc = encode(out, &value);
                writeln!(s, "        {store_guard}{}(ParamsU64(pc.params).v[1]).v[o] = {enc};", buf_type(out)).unwrap();
            }
        }
        s.push_str("    }\n}\n");
        s
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
