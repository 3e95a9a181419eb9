//! Window reductions (Nx.window_sum/product/max/min) and window scatters
//! (Nx.window_scatter_max/min), one invocation per output element, reading any tensor view
//! through its strides. `record_window_reduce` / `record_window_scatter` record into a caller's
//! batch and write a caller's output (a new contiguous tensor of the result's type and shape).
//!
//! **Semantics** (Nx 0.7.2 `Nx.BinaryBackend`, `window_reduce/6` and `select_and_scatter/8`):
//! - The input is padded per axis by `(lo, hi)` (negative values crop) with the op's identity;
//!   window `o` covers padded positions `o*stride + k*dilation`, `k` row-major over the window.
//!   Output size per axis: `(padded - ((w-1)*dilation + 1)) / stride + 1`, which must be ≥ 1.
//! - Sum and product fold `acc = x op acc` from `0`/`1` in f64 for floats (rounded once to the
//!   tensor's type) and in 64 bits for integers (wrapped once). The result keeps the input type.
//! - Max and min start from the type's lowest/highest value: `-Inf`/`+Inf` for floats and, for
//!   integers, `Nx.Type.min_binary`/`max_binary` — s16's are Nx 0.7.2's -32678 and 32677
//!   (reproduced, so an s16 window_max never goes below -32678). A NaN anywhere gives NaN; an
//!   element equal to the running value replaces it (Erlang's `max(x, acc)` returns `x` on a
//!   tie), so among -0.0 and +0.0 the later one wins.
//! - Padding positions hold the identity, which never changes the result, so they are skipped.
//! - Window scatter: in each window, the element selected is found by BinaryBackend's scan: it
//!   starts at the first element and moves to every later element `x` with `x >= acc` (max) or
//!   `x <= acc` (min) — so ties go to the **last** equal element, and a NaN is never selected
//!   unless it is the first element (then nothing moves away from it). Elements are compared
//!   exactly in the tensor's own type. Padding positions hold `init_value` converted to the
//!   tensor's type and can be selected; a source value whose selected position lies in the
//!   padding is dropped (BinaryBackend writes a wrongly typed pad value or crashes there; this
//!   is XLA's rule).
//! - Each output element starts at `init_value` (rounded to the output type) and adds the
//!   source values of the windows that selected it in row-major window order, rounding or
//!   wrapping to the output type after every addition (BinaryBackend folds them with `Nx.add`
//!   on scalars, which rounds each step; it only gets f32 and s64 outputs right — with other
//!   output types it writes the wrong number of bytes — and this rule is the one that matches
//!   it where it works).
//! - Deliberate difference: BinaryBackend compares f64 elements after rounding them to f32
//!   (`Nx.greater_equal` on two Elixir floats builds f32 tensors); we compare f64 exactly.

use crate::dtype::{DType, Kind};
use crate::elementwise::{buf_type, decode, encode, wrap};
use crate::error::{invalid, Result};
use crate::ops::check_dense_output;
use crate::params::ParamBlock;
use crate::reduce::to_domain;
use crate::submit::Batch;
use crate::tensor::{Tensor, MAX_ELEMENTS};
use crate::Context;
use std::fmt::Write;

/// The reductions `Context::window_reduce` computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WindowOp {
    Sum,
    Product,
    Max,
    Min,
}

impl WindowOp {
    pub fn parse(s: &str) -> Result<WindowOp> {
        Ok(match s {
            "window_sum" | "sum" => WindowOp::Sum,
            "window_product" | "product" => WindowOp::Product,
            "window_max" | "max" => WindowOp::Max,
            "window_min" | "min" => WindowOp::Min,
            other => return Err(invalid!("unknown window reduction {other:?}")),
        })
    }
}

/// Which element a window scatter selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScatterOp {
    Max,
    Min,
}

impl ScatterOp {
    pub fn parse(s: &str) -> Result<ScatterOp> {
        Ok(match s {
            "window_scatter_max" | "max" => ScatterOp::Max,
            "window_scatter_min" | "min" => ScatterOp::Min,
            other => return Err(invalid!("unknown window scatter {other:?}")),
        })
    }
}

const LOCAL: u32 = 64;

/// The output shape of a window over `shape` (Nx.Shape.pool): one entry per axis.
pub fn window_output_shape(
    shape: &[usize],
    window: &[usize],
    strides: &[usize],
    padding: &[(i64, i64)],
    dilations: &[usize],
) -> Result<Vec<usize>> {
    let rank = shape.len();
    if window.len() != rank || strides.len() != rank || padding.len() != rank || dilations.len() != rank {
        return Err(invalid!(
            "window of rank {rank} needs {rank} window dimensions, strides, (lo, hi) paddings and dilations; got {window:?}, {strides:?}, {padding:?}, {dilations:?}"
        ));
    }
    let mut out = Vec::with_capacity(rank);
    for d in 0..rank {
        if window[d] == 0 || strides[d] == 0 || dilations[d] == 0 {
            return Err(invalid!("window dimensions {window:?}, strides {strides:?} and dilations {dilations:?} must be positive"));
        }
        let padded = shape[d] as i64 + padding[d].0 + padding[d].1;
        let span = (window[d] as i64 - 1) * dilations[d] as i64 + 1;
        if padded < span {
            return Err(invalid!(
                "window {window:?} (dilations {dilations:?}) does not fit shape {shape:?} padded by {padding:?} on axis {d}"
            ));
        }
        out.push(((padded - span) / strides[d] as i64 + 1) as usize);
    }
    Ok(out)
}

fn start_source(s: &mut String, rank: usize) {
    s.push_str(&crate::kernels::numeric_prelude());
    s.push_str(crate::kernels::OPS);
    writeln!(s, "const int R = {rank};").unwrap();
}

/// The compute-domain literal of `t`'s lowest (`max`) or highest value, as Nx.Type.min_binary /
/// max_binary give them (s16: -32678 / 32677).
fn extreme(t: DType, max: bool) -> String {
    match t.kind() {
        Kind::Signed => {
            let v: i64 = match (t, max) {
                (DType::S16, true) => -32678,
                (DType::S16, false) => 32677,
                _ => {
                    let bits = t.bits() as u32;
                    if max { i64::MIN >> (64 - bits) } else { i64::MAX >> (64 - bits) }
                }
            };
            format!("int64_t({:#x}ul)", v as u64)
        }
        Kind::Unsigned => {
            let v: u64 = if max { 0 } else { u64::MAX >> (64 - t.bits()) };
            format!("uint64_t({v:#x}ul)")
        }
        _ => if max { "(-nx_inf())" } else { "nx_inf()" }.into(),
    }
}

fn zero_one(t: DType, one: bool) -> &'static str {
    match (t.kind(), one) {
        (Kind::Signed, false) => "0l",
        (Kind::Signed, true) => "1l",
        (Kind::Unsigned, false) => "0ul",
        (Kind::Unsigned, true) => "1ul",
        (_, false) => "0.0LF",
        (_, true) => "1.0LF",
    }
}

/// Real types only: complex tensors are not supported by these kernels.
pub(crate) fn check_real(op: &str, types: &[DType]) -> Result<()> {
    for &t in types {
        if !matches!(t.kind(), Kind::Float | Kind::Signed | Kind::Unsigned) {
            return Err(invalid!("{op} does not support {t} tensors"));
        }
    }
    Ok(())
}

/// Pads a rank-0 problem to rank 1 (GLSL has no zero-length arrays).
fn rank1<T: Clone>(v: &[T], fill: T) -> Vec<T> {
    if v.is_empty() {
        vec![fill]
    } else {
        v.to_vec()
    }
}

/// Checks window_scatter's operands (`out` is the result type).
fn check_scatter(x: &Tensor, source: &Tensor, init: &Tensor, window: &[usize], strides: &[usize], padding: &[(i64, i64)], out: DType) -> Result<()> {
    check_real("window_scatter", &[x.dtype, source.dtype, init.dtype, out])?;
    let win_shape = window_output_shape(&x.shape, window, strides, padding, &vec![1; x.shape.len()])?;
    if source.shape != win_shape {
        return Err(invalid!(
            "window scatter source has shape {:?}; the windows of {:?} give {win_shape:?}",
            source.shape,
            x.shape
        ));
    }
    if init.numel() != 1 {
        return Err(invalid!("window scatter init value must have one element, has shape {:?}", init.shape));
    }
    Ok(())
}

impl Context {
    /// Nx.window_sum / window_product / window_max / window_min. `padding[d] = (lo, hi)`
    /// (negative crops); the result has the input's type (see the module notes).
    pub fn window_reduce(
        &self,
        op: WindowOp,
        x: &Tensor,
        window: &[usize],
        strides: &[usize],
        padding: &[(i64, i64)],
        dilations: &[usize],
    ) -> Result<Tensor> {
        check_real("window_reduce", &[x.dtype])?;
        let out_shape = window_output_shape(&x.shape, window, strides, padding, dilations)?;
        let result = self.empty(x.dtype, &out_shape)?;
        self.recorded(result, |batch, out| self.record_window_reduce(batch, op, x, window, strides, padding, dilations, out))
    }

    /// Records `window_reduce` into `out`: a new (contiguous, offset 0) tensor of `x`'s type
    /// and [`window_output_shape`].
    #[allow(clippy::too_many_arguments)]
    pub fn record_window_reduce(
        &self,
        batch: &mut Batch<'_>,
        op: WindowOp,
        x: &Tensor,
        window: &[usize],
        strides: &[usize],
        padding: &[(i64, i64)],
        dilations: &[usize],
        out: &Tensor,
    ) -> Result<()> {
        check_real("window_reduce", &[x.dtype])?;
        let out_shape = window_output_shape(&x.shape, window, strides, padding, dilations)?;
        check_dense_output(out, x.dtype, &out_shape, "window_reduce")?;
        let count = out.numel();
        if count == 0 {
            return Ok(());
        }
        if x.numel() > MAX_ELEMENTS {
            return Err(invalid!("window input of {} elements exceeds {MAX_ELEMENTS}", x.numel()));
        }
        let rank = x.shape.len().max(1);
        let shape = rank1(&x.shape, 1);
        let in_strides = rank1(&x.strides, 0);
        let o = rank1(&out_shape, 1);
        let (st, win, dil, pad) = (rank1(strides, 1), rank1(window, 1), rank1(dilations, 1), rank1(padding, (0, 0)));
        let wcount: usize = win.iter().product();
        if wcount > i32::MAX as usize {
            return Err(invalid!("window {window:?} has too many elements"));
        }
        let mut p = ParamBlock::new("window");
        p.addrs([x.buffer.address(), out.buffer.address()]);
        p.i32(x.offset)?;
        for d in 0..rank {
            p.i32(shape[d])?.i32(in_strides[d])?.i32s([o[d], st[d], win[d], dil[d]])?.i32(pad[d].0)?;
        }
        let t = x.dtype;
        let key = format!("window_reduce {op:?} {t} r{rank}");
        let kernel = self.kernels.get(&key, LOCAL, 1, || window_reduce_source(op, t, rank))?;
        batch.keep(&x.buffer);
        batch.keep(&out.buffer);
        batch.dispatch(&kernel, p.bytes(), count as u64)
    }

    /// Nx.window_scatter_max / window_scatter_min: a tensor of `x`'s shape and type `out`,
    /// `init` everywhere, plus the `source` values scattered to the element each window selects.
    /// `source` must have the window output shape; `init` is a one-element tensor.
    #[allow(clippy::too_many_arguments)]
    pub fn window_scatter(
        &self,
        op: ScatterOp,
        x: &Tensor,
        source: &Tensor,
        init: &Tensor,
        window: &[usize],
        strides: &[usize],
        padding: &[(i64, i64)],
        out: DType,
    ) -> Result<Tensor> {
        check_scatter(x, source, init, window, strides, padding, out)?;
        let result = self.empty(out, &x.shape)?;
        self.recorded(result, |batch, out| self.record_window_scatter(batch, op, x, source, init, window, strides, padding, out))
    }

    /// Records `window_scatter` into `out`: a new (contiguous, offset 0) tensor of `x`'s shape
    /// whose type is the result type. The selection pass writes a scratch buffer of the batch.
    #[allow(clippy::too_many_arguments)]
    pub fn record_window_scatter(
        &self,
        batch: &mut Batch<'_>,
        op: ScatterOp,
        x: &Tensor,
        source: &Tensor,
        init: &Tensor,
        window: &[usize],
        strides: &[usize],
        padding: &[(i64, i64)],
        out: &Tensor,
    ) -> Result<()> {
        check_scatter(x, source, init, window, strides, padding, out.dtype)?;
        check_dense_output(out, out.dtype, &x.shape, "window_scatter")?;
        let rank0 = x.shape.len();
        let win_shape = window_output_shape(&x.shape, window, strides, padding, &vec![1; rank0])?;
        let n_out = out.numel();
        if n_out == 0 {
            return Ok(());
        }
        if x.numel() > MAX_ELEMENTS || source.numel() > MAX_ELEMENTS {
            return Err(invalid!("window scatter operands exceed {MAX_ELEMENTS} elements"));
        }
        let n_src = source.numel();
        let rank = rank0.max(1);
        let shape = rank1(&x.shape, 1);
        let t_strides = rank1(&x.strides, 0);
        let o = rank1(&win_shape, 1);
        let s_strides = rank1(&source.strides, 0);
        let (st, win, pad) = (rank1(strides, 1), rank1(window, 1), rank1(padding, (0, 0)));
        let wcount: usize = win.iter().product();
        if wcount > i32::MAX as usize {
            return Err(invalid!("window {window:?} has too many elements"));
        }
        let sel = self.pool.alloc((n_src.max(1) * 4) as u64)?;
        let mut p = ParamBlock::new("window");
        p.addrs([x.buffer.address(), source.buffer.address(), init.buffer.address(), sel.address(), out.buffer.address()]);
        p.i32s([x.offset, source.offset, init.offset])?;
        for d in 0..rank {
            p.i32(shape[d])?.i32(t_strides[d])?.i32(o[d])?.i32(s_strides[d])?.i32s([st[d], win[d]])?.i32(pad[d].0)?;
        }
        let spec = ScatterSpec { op, t: x.dtype, src: source.dtype, init: init.dtype, out: out.dtype, rank };
        let k1 = self.kernels.get(&spec.key("select"), LOCAL, 1, || spec.select_source())?;
        let k2 = self.kernels.get(&spec.key("scatter"), LOCAL, 1, || spec.scatter_source())?;
        for b in [&x.buffer, &source.buffer, &init.buffer, &sel, &out.buffer] {
            batch.keep(b);
        }
        batch.dispatch(&k1, p.bytes(), n_src as u64)?;
        batch.dispatch(&k2, p.bytes(), n_out as u64)
    }
}

/// Per-dimension parameters (7 ints each after `skip` leading ints), loaded into arrays named
/// by `names`.
fn load_meta(s: &mut String, skip: usize, names: &[&str]) {
    s.push_str("    ParamsI32 m = ParamsI32(pc.params + OFF_META);\n");
    for n in names {
        writeln!(s, "    int {n}[R];").unwrap();
    }
    s.push_str("    for (int d = 0; d < R; d++) {\n");
    for (i, n) in names.iter().enumerate() {
        writeln!(s, "        {n}[d] = m.v[{skip} + d * {} + {i}];", names.len()).unwrap();
    }
    s.push_str("    }\n");
}

fn window_reduce_source(op: WindowOp, t: DType, rank: usize) -> String {
    let mut s = String::new();
    start_source(&mut s, rank);
    let acc = t.glsl_compute();
    let buf = buf_type(t);
    s.push_str("#define OFF_META 16ul\n");
    writeln!(s, "layout(local_size_x = {LOCAL}) in;\nvoid main() {{").unwrap();
    writeln!(s, "    {buf} inb = {buf}(ParamsU64(pc.params).v[0]);\n    {buf} outb = {buf}(ParamsU64(pc.params).v[1]);").unwrap();
    load_meta(&mut s, 1, &["n", "sin", "osz", "st", "win", "dil", "lo"]);
    s.push_str("    int off = m.v[0];\n    int W = 1;\n    for (int d = 0; d < R; d++) W *= win[d];\n");
    writeln!(s, "    for (uint o = gl_GlobalInvocationID.x; o < pc.count; o += gl_NumWorkGroups.x * {LOCAL}u) {{").unwrap();
    s.push_str("        int base[R];\n        uint rest = o;\n");
    s.push_str("        for (int d = R - 1; d >= 0; d--) { int c = int(rest % uint(osz[d])); rest /= uint(osz[d]); base[d] = c * st[d] - lo[d]; }\n");
    let init = match op {
        WindowOp::Sum => zero_one(t, false).to_string(),
        WindowOp::Product => zero_one(t, true).to_string(),
        WindowOp::Max => extreme(t, true),
        WindowOp::Min => extreme(t, false),
    };
    writeln!(s, "        {acc} acc = {init};").unwrap();
    s.push_str("        int wc[R];\n        for (int d = 0; d < R; d++) wc[d] = 0;\n");
    s.push_str("        for (int k = 0; k < W; k++) {\n            bool ok = true; int e = off;\n");
    s.push_str("            for (int d = 0; d < R; d++) { int q = base[d] + wc[d] * dil[d]; ok = ok && q >= 0 && q < n[d]; e += q * sin[d]; }\n");
    s.push_str("            if (ok) {\n");
    writeln!(s, "                {acc} x = {};", decode(t, "inb.v[e]")).unwrap();
    let precise = if t.is_float() { "precise " } else { "" };
    match op {
        WindowOp::Sum => writeln!(s, "                {precise}{acc} r = x + acc; acc = r;").unwrap(),
        WindowOp::Product => writeln!(s, "                {precise}{acc} r = x * acc; acc = r;").unwrap(),
        WindowOp::Max | WindowOp::Min => {
            let cmp = if op == WindowOp::Max { ">=" } else { "<=" };
            if t.is_float() {
                writeln!(s, "                if (nx_isnan(acc) || nx_isnan(x)) acc = nx_nan(); else if (x {cmp} acc) acc = x;").unwrap();
            } else {
                writeln!(s, "                if (x {cmp} acc) acc = x;").unwrap();
            }
        }
    }
    s.push_str("            }\n");
    s.push_str("            for (int d = R - 1; d >= 0; d--) { wc[d]++; if (wc[d] < win[d]) break; wc[d] = 0; }\n");
    s.push_str("        }\n");
    writeln!(s, "        outb.v[o] = {};", encode(t, &wrap(t, "acc"))).unwrap();
    s.push_str("    }\n}\n");
    s
}

struct ScatterSpec {
    op: ScatterOp,
    t: DType,
    src: DType,
    init: DType,
    out: DType,
    rank: usize,
}

impl ScatterSpec {
    fn key(&self, pass: &str) -> String {
        format!("window_scatter {pass} {:?} t{} s{} i{} o{} r{}", self.op, self.t, self.src, self.init, self.out, self.rank)
    }

    /// The compute domain elements are compared in (the tensor's own) and the expressions for
    /// an element of the tensor and for the padding value (`init` as the tensor's type).
    fn selection(&self) -> (&'static str, String, String) {
        let init = decode(self.init, &format!("{}(ParamsU64(pc.params).v[2]).v[m.v[2]]", buf_type(self.init)));
        let t = self.t;
        (t.glsl_compute(), decode(t, "tb.v[e]"), wrap(t, &to_domain(self.init, t, &init)))
    }

    fn select_source(&self) -> String {
        let mut s = String::new();
        start_source(&mut s, self.rank);
        s.push_str("#define OFF_META 40ul\n");
        let (dom, elem, pad) = self.selection();
        let tb = buf_type(self.t);
        writeln!(s, "layout(local_size_x = {LOCAL}) in;\nvoid main() {{").unwrap();
        writeln!(s, "    {tb} tb = {tb}(ParamsU64(pc.params).v[0]);\n    BufU32 sel = BufU32(ParamsU64(pc.params).v[3]);").unwrap();
        load_meta(&mut s, 3, &["n", "tst", "osz", "sst", "st", "win", "lo"]);
        writeln!(s, "    {dom} padv = {pad};").unwrap();
        s.push_str("    int off = m.v[0];\n    int W = 1;\n    for (int d = 0; d < R; d++) W *= win[d];\n");
        writeln!(s, "    for (uint w = gl_GlobalInvocationID.x; w < pc.count; w += gl_NumWorkGroups.x * {LOCAL}u) {{").unwrap();
        s.push_str("        int base[R];\n        uint rest = w;\n");
        s.push_str("        for (int d = R - 1; d >= 0; d--) { int c = int(rest % uint(osz[d])); rest /= uint(osz[d]); base[d] = c * st[d] - lo[d]; }\n");
        writeln!(s, "        {dom} acc = padv; uint chosen = 0xFFFFFFFFu;").unwrap();
        s.push_str("        int wc[R];\n        for (int d = 0; d < R; d++) wc[d] = 0;\n");
        s.push_str("        for (int k = 0; k < W; k++) {\n            bool ok = true; int e = off; int fl = 0;\n");
        s.push_str("            for (int d = 0; d < R; d++) { int q = base[d] + wc[d]; ok = ok && q >= 0 && q < n[d]; e += q * tst[d]; fl = fl * n[d] + q; }\n");
        writeln!(s, "            {dom} v = padv;").unwrap();
        writeln!(s, "            if (ok) v = {elem};").unwrap();
        let cmp = if self.op == ScatterOp::Max { ">=" } else { "<=" };
        // k == 0 seeds the scan (BinaryBackend's first comparison is the element with itself,
        // false only for NaN, which leaves index 0 selected either way).
        writeln!(s, "            if (k == 0 || v {cmp} acc) {{ acc = v; chosen = ok ? uint(fl) : 0xFFFFFFFFu; }}").unwrap();
        s.push_str("            for (int d = R - 1; d >= 0; d--) { wc[d]++; if (wc[d] < win[d]) break; wc[d] = 0; }\n");
        s.push_str("        }\n        sel.v[w] = chosen;\n    }\n}\n");
        s
    }

    fn scatter_source(&self) -> String {
        let mut s = String::new();
        start_source(&mut s, self.rank);
        s.push_str("#define OFF_META 40ul\n");
        let out = self.out;
        let dom = out.glsl_compute();
        let (sb, ob) = (buf_type(self.src), buf_type(out));
        writeln!(s, "layout(local_size_x = {LOCAL}) in;\nvoid main() {{").unwrap();
        writeln!(s, "    {sb} sb = {sb}(ParamsU64(pc.params).v[1]);\n    BufU32 sel = BufU32(ParamsU64(pc.params).v[3]);\n    {ob} ob = {ob}(ParamsU64(pc.params).v[4]);").unwrap();
        load_meta(&mut s, 3, &["n", "tst", "osz", "sst", "st", "win", "lo"]);
        let init = decode(self.init, &format!("{}(ParamsU64(pc.params).v[2]).v[m.v[2]]", buf_type(self.init)));
        writeln!(s, "    {dom} initv = {};", wrap(out, &to_domain(self.init, out, &init))).unwrap();
        s.push_str("    int soff = m.v[1];\n");
        writeln!(s, "    for (uint p = gl_GlobalInvocationID.x; p < pc.count; p += gl_NumWorkGroups.x * {LOCAL}u) {{").unwrap();
        writeln!(s, "        {dom} acc = initv;").unwrap();
        s.push_str("        int olo[R]; int ohi[R]; int oc[R]; bool any = true;\n        uint rest = p;\n");
        s.push_str(
            "        for (int d = R - 1; d >= 0; d--) {
            int c = int(rest % uint(n[d])); rest /= uint(n[d]);
            int pp = c + lo[d];
            int a = pp - (win[d] - 1);
            olo[d] = (a <= 0) ? 0 : (a + st[d] - 1) / st[d];
            ohi[d] = (pp < 0) ? -1 : min(osz[d] - 1, pp / st[d]);
            if (olo[d] > ohi[d]) any = false;
            oc[d] = olo[d];
        }
        while (any) {
            int w = 0; int e = soff;
            for (int d = 0; d < R; d++) { w = w * osz[d] + oc[d]; e += oc[d] * sst[d]; }
            if (sel.v[w] == p) {
",
        );
        let v = to_domain(self.src, out, &decode(self.src, "sb.v[e]"));
        let precise = if out.is_float() { "precise " } else { "" };
        writeln!(s, "                {precise}{dom} r = ({v}) + acc;\n                acc = {};", wrap(out, "r")).unwrap();
        s.push_str(
            "            }
            int d = R - 1;
            for (; d >= 0; d--) { oc[d]++; if (oc[d] <= ohi[d]) break; oc[d] = olo[d]; }
            if (d < 0) any = false;
        }
",
        );
        writeln!(s, "        ob.v[p] = {};", encode(out, "acc")).unwrap();
        s.push_str("    }\n}\n");
        s
    }
}
