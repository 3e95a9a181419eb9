//! Reductions (sum, product, max, min, all, any) and arg-reductions (argmax, argmin) over any
//! set of axes of any tensor view.
//!
//! The input view is regrouped as `[kept axes..., reduced axes...]` (adjacent axes merged where
//! their strides allow), so output element `o` (row-major over the kept axes) reduces the
//! elements `r = 0..R` (row-major over the reduced axes, in their original order). Kernels read
//! the view through its strides: no copy is made.
//!
//! **Fixed order.** The strategy is chosen from the shape alone (never from the device or its
//! timing), and each strategy combines in a fixed order, so reruns are bit-identical and the
//! same shader gives the same bits on every device:
//! - [`Strategy::PerOutput`]: one invocation per output, a sequential loop over `r` (exactly
//!   Nx.BinaryBackend's order) — small reductions or many outputs;
//! - [`Strategy::PerGroup`]: one workgroup (256 invocations) per output; invocation `t` folds
//!   `r = t, t+256, ...`, then a fixed shared-memory tree combines the 256 partials;
//! - [`Strategy::Split`]: few outputs over very long reductions: pass 1 gives each (output,
//!   segment) pair a workgroup that writes a partial (value, index) to scratch memory, pass 2
//!   folds each output's partials sequentially.
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
pub(crate) use crate::elementwise::{buf_type, decode, encode, to_domain, wrap};
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

/// The strategy for `outputs` results each reducing `len` elements.
pub fn choose_strategy(outputs: usize, len: usize) -> Strategy {
    if len < 256 || outputs >= 32768 {
        Strategy::PerOutput
    } else if outputs >= 256 || len < 65536 {
        Strategy::PerGroup
    } else {
        // Aim for ~512 workgroups in all, each folding at least 16 Ki elements.
        let by_len = len.div_ceil(16384);
        let by_groups = 512usize.div_ceil(outputs);
        Strategy::Split { segments: by_len.min(by_groups).clamp(2, 256) as u32 }
    }
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
                let seg_len = len.div_ceil(s);
                let partials = outputs * s;
                let scratch = self.pool.alloc((partials * 12) as u64)?;
                batch.keep(&scratch);
                let p1 = Spec { comb, in_t: x.dtype, out, src_partial: false, sink_partial: true, strategy, kept: kept.len(), red: red.len() };
                let k1 = self.kernels.get(&p1.key(), LOCAL, 1, || p1.source())?;
                let params1 = params(in_addr, scratch.address(), len, x.offset, s, seg_len, partials, &kept, &red)?;
                let groups = (partials as u32).min(self.caps.max_workgroup_count[0].min(65535));
                batch.dispatch_grid(&k1, &params1, partials as u32, [groups, 1, 1])?;
                let p2 = Spec {
                    comb,
                    in_t: x.dtype,
                    out,
                    src_partial: true,
                    sink_partial: false,
                    strategy: Strategy::PerOutput,
                    kept: 0,
                    red: 0,
                };
                let k2 = self.kernels.get(&p2.key(), LOCAL, 1, || p2.source())?;
                let params2 = params(scratch.address(), out_addr, s, 0, 1, s, partials, &[], &[])?;
                batch.dispatch(&k2, &params2, outputs as u64)?;
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
                    // candidates are all NaN or all non-NaN (see `nan_seed`): NaNs tie
                    writeln!(s, "    else if (nx_isnan(av) || nx_isnan(bv)) take = {tie};").unwrap();
                } else if in_t.is_float() {
                    s.push_str("    else if (nx_isnan(av) || nx_isnan(bv)) take = nx_isnan(bv) && (!nx_isnan(av) || bi < ai);\n");
                }
                writeln!(s, "    else if (bv == av) take = {tie};\n    else take = bv {gt} av;").unwrap();
                s.push_str("    if (take) { av = bv; ai = bi; }\n");
            }
        }
        s.push_str("}\n");
        // element -> candidate value
        if !self.src_partial {
            let t = in_t;
            let raw = format!("{}(ParamsU64(pc.params).v[0]).v[e]", buf_type(t));
            let v = decode(t, &raw);
            let cand = match self.comb {
                Comb::All | Comb::Any => nonzero(t, &v),
                Comb::Extreme { .. } => v,
                Comb::Sum | Comb::Product => to_domain(t, self.out, &v),
            };
            writeln!(s, "ACC load(int e) {{ return {cand}; }}").unwrap();
        }
        s.push_str("shared ACC s_v[256];\nshared uint s_i[256];\n");
        s.push_str("layout(local_size_x = 256) in;\nvoid main() {\n");
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
        // Output loop header, per strategy.
        let per_output = self.strategy == Strategy::PerOutput;
        if per_output {
            s.push_str("    for (uint o = gl_GlobalInvocationID.x; o < pc.count; o += gl_NumWorkGroups.x * 256u) {\n");
        } else {
            s.push_str("    for (uint g = gl_WorkGroupID.x; g < pc.count; g += gl_NumWorkGroups.x) {\n");
            if self.sink_partial {
                s.push_str("        uint o = g / S; int seg = int(g % S);\n");
                s.push_str("        int r0 = seg * L; int r1 = min(R, r0 + L);\n");
            } else {
                s.push_str("        uint o = g; int r0 = 0; int r1 = R;\n");
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
            s.push_str("        bool nan_seed = R > 0 && nx_isnan(load(base));\n");
        }
        let elem = |s: &mut String, indent: &str| {
            match self.src_partial {
                false => {
                    writeln!(s, "{indent}int e = base; uint rr = uint(r);").unwrap();
                    for d in (0..self.red).rev() {
                        if d == 0 {
                            writeln!(s, "{indent}e += int(rr) * rs0;").unwrap();
                        } else {
                            writeln!(s, "{indent}e += int(rr % rd{d}) * rs{d}; rr /= rd{d};").unwrap();
                        }
                    }
                    if self.nan_seeded() {
                        writeln!(s, "{indent}ACC v = load(e); comb(av, ai, v, (nx_isnan(v) == nan_seed) ? uint(r) : NONE);").unwrap();
                    } else {
                        writeln!(s, "{indent}comb(av, ai, load(e), uint(r));").unwrap();
                    }
                }
                true => {
                    // partials of output o sit at o*R .. o*R+R-1; their indices after all P values
                    writeln!(s, "{indent}uint j = o * uint(R) + uint(r);").unwrap();
                    writeln!(
                        s,
                        "{indent}comb(av, ai, acc_from(BufU64(ParamsU64(pc.params).v[0]).v[j]), BufU32(ParamsU64(pc.params).v[0] + uint64_t(P) * 8ul).v[j]);"
                    )
                    .unwrap();
                }
            }
        };
        if per_output {
            s.push_str("        for (int r = 0; r < R; r++) {\n");
            elem(&mut s, "            ");
            s.push_str("        }\n");
        } else {
            s.push_str("        for (int r = r0 + int(t); r < r1; r += 256) {\n");
            elem(&mut s, "            ");
            s.push_str("        }\n");
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
