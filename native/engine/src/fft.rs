//! FFT and inverse FFT along one axis (Nx.fft/2 and Nx.ifft/2 with `:length`, `:axis`, `:eps`).
//!
//! **Semantics (Nx 0.7.2, Nx.BinaryBackend).** The result type is `Nx.Type.to_complex` of the
//! input (f64 and c128 give c128, everything else c64). Each row along `axis` is zero-padded or
//! truncated to `length`; real inputs (integers included) are used as real numbers, not
//! converted first. Everything is computed in f64; each part of the result is set to +0.0 when
//! `|part| <= eps` (BinaryBackend's clean-up, default 1e-10 in Nx) and then rounded once to the
//! part type. `ifft(x) = conj(fft(conj(x))) / n`, as BinaryBackend computes it.
//!
//! **Algorithm: BinaryBackend's own, reproduced operation for operation.** For
//! `n = 2^p · q` (q odd) BinaryBackend recurses on even/odd halves p times (radix-2 decimation
//! in time) and transforms the `2^p` interleaved subsequences of length q with a direct DFT whose
//! twiddles are `(cos φ, sin φ)`, `φ = ((-2π/q)·k)·i`, summed in ascending i. Here:
//! - one dispatch ("leaf") computes those `2^p` length-q DFTs for every row (O(n·q) work);
//! - p radix-2 stages combine them Stockham-style (sub-transform `s` of length L stored at
//!   `s·L`, so no bit reversal), up to three stages per dispatch (an invocation holds the
//!   2^r values r consecutive stages combine among themselves), each butterfly `e ± w·o`
//!   with `w = (cos θ, sin θ)`,
//!   `θ = (-2π·k)/L`, and the `complex` library's multiply/add/subtract clauses
//!   (`ops.glsl`) — the same operations in the same order as BinaryBackend, all `precise`.
//!
//! So results match BinaryBackend bit for bit wherever our `m_sin`/`m_cos` (≤ 1 ulp, almost
//! always correctly rounded) agree with the host libm, and for finite inputs up to signs of
//! zeros (which the eps clean-up removes). Where a twiddle differs by an ulp, the result moves
//! by at most about `ulp(1) · Σ|x|` per element (f64) — well under one f32 ulp for c64 outputs
//! of ordinary data. The radix-2 stages' twiddles are computed once per call, by one more
//! dispatch, into a table of `n - q` entries (stage `s`'s `L/2` twiddles from `q·(2^(s-1) - 1)`),
//! with the same operations as inline — the stages only read them: a twiddle is an f64 `m_cos`
//! and `m_sin`, far more work than its butterfly, and it depends only on (k, L), not on the row.
//! The leaf's twiddles (`(k, m)` for `k, m < q`) come from a `(q-1)²` table the same way
//! where `1 < q <= 1,024`. Dispatches: `1 + ceil(p/3)`, plus a table for the stages where
//! `p > 0` and one for the leaf where `1 < q <= 1,024` (plus one copy when `axis` is not the
//! last one or the input's batch axes cannot be read in place).
//!
//! `record_fft` / `record_ifft` record all of it into a caller's batch and write a caller's
//! output (a new contiguous tensor of the type and shape [`fft_output`] gives): straight into
//! it when the transformed axis is the last (or only size-1 axes follow it), else through a
//! scratch tensor and one copy back to Nx's axis order.
//!
//! **Deliberate differences.** BinaryBackend switches to Bluestein's algorithm for lengths of
//! 1024 or more that are not powers of two; this engine keeps the mixed radix-2/direct-DFT
//! scheme there (exact-order sums, O(n·q) work, no Bluestein rounding), so such lengths agree
//! with BinaryBackend to rounding only (relative error ~1e-13 in f64). Non-finite inputs follow
//! IEEE arithmetic through the transform (BinaryBackend's atoms and its eps test on them are
//! not reproduced; it raises for some of them). BinaryBackend drops real-valued results of
//! length 1 (its output comprehension only matches complex values); here a length-1 transform
//! returns its element as a complex number.

use crate::dtype::DType;
use crate::elementwise::{buf_type, decode, encode, wrap};
use crate::error::{invalid, Result};
use crate::ops::check_dense_output;
use crate::params::ParamBlock;
use crate::reduce::merge_dims;
use crate::submit::Batch;
use crate::tensor::{Tensor, MAX_ELEMENTS};
use crate::Context;
use std::fmt::Write;

/// The shape and type Nx.fft / Nx.ifft give for `x` along `axis` with `length`.
pub fn fft_output(x: &Tensor, axis: usize, length: usize) -> Result<(DType, Vec<usize>)> {
    if axis >= x.shape.len() {
        return Err(invalid!("fft axis {axis} out of range for shape {:?}", x.shape));
    }
    if length == 0 {
        return Err(invalid!("fft length must be positive"));
    }
    let mut shape = x.shape.clone();
    shape[axis] = length;
    Ok((x.dtype.to_complex(), shape))
}

impl Context {
    /// Nx.fft along `axis`, padded/truncated to `length`, results with `|part| <= eps` zeroed.
    pub fn fft(&self, x: &Tensor, axis: usize, length: usize, eps: f64) -> Result<Tensor> {
        self.fft_impl(x, axis, length, eps, false)
    }

    /// Nx.ifft along `axis` (see [`Context::fft`]).
    pub fn ifft(&self, x: &Tensor, axis: usize, length: usize, eps: f64) -> Result<Tensor> {
        self.fft_impl(x, axis, length, eps, true)
    }

    /// Records `fft` into `out`: a new (contiguous, offset 0) tensor of the type and shape
    /// [`fft_output`] gives.
    pub fn record_fft(&self, batch: &mut Batch<'_>, x: &Tensor, axis: usize, length: usize, eps: f64, out: &Tensor) -> Result<()> {
        self.record_fft_impl(batch, x, axis, length, eps, false, out)
    }

    /// Records `ifft` into `out` (as [`Context::record_fft`]).
    pub fn record_ifft(&self, batch: &mut Batch<'_>, x: &Tensor, axis: usize, length: usize, eps: f64, out: &Tensor) -> Result<()> {
        self.record_fft_impl(batch, x, axis, length, eps, true, out)
    }

    fn fft_impl(&self, x: &Tensor, axis: usize, n: usize, eps: f64, inverse: bool) -> Result<Tensor> {
        let (out_t, shape) = fft_output(x, axis, n)?;
        let result = self.empty(out_t, &shape)?;
        self.recorded(result, |batch, out| self.record_fft_impl(batch, x, axis, n, eps, inverse, out))
    }

    #[allow(clippy::too_many_arguments)]
    fn record_fft_impl(&self, batch: &mut Batch<'_>, x: &Tensor, axis: usize, n: usize, eps: f64, inverse: bool, out: &Tensor) -> Result<()> {
        let (out_t, shape) = fft_output(x, axis, n)?;
        if eps.is_nan() {
            return Err(invalid!("fft eps must be a number"));
        }
        check_dense_output(out, out_t, &shape, "fft")?;
        let rank = x.shape.len();
        let last = rank - 1;
        let mut perm: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
        perm.push(axis);
        let mut xt = x.transpose(&perm)?;
        let batch_shape: Vec<usize> = xt.shape[..last].to_vec();
        let rows: usize = batch_shape.iter().product();
        let mut out_shape = batch_shape.clone();
        out_shape.push(n);
        let total = rows.checked_mul(n).filter(|&t| t <= MAX_ELEMENTS).ok_or_else(|| invalid!("fft result {out_shape:?} is too large"))?;
        if total == 0 {
            return Ok(());
        }
        // The kernels write rows along the transformed axis, row-major: straight into `out`
        // when its layout seen in that order is row-major (the axis is the last one, or only
        // size-1 axes follow it), else into a scratch tensor copied back to Nx's axis order.
        let direct = out.transpose(&perm)?;
        let via_scratch = !direct.is_contiguous();
        let target = if via_scratch { self.empty(out_t, &out_shape)? } else { direct };
        let batch_dims: Vec<(usize, isize)> = (0..last).map(|d| (xt.shape[d], xt.strides[d])).collect();
        let mut merged = merge_dims(&batch_dims);
        if merged.len() > 1 {
            xt = self.contiguous_in(batch, &xt)?;
            let batch_dims: Vec<(usize, isize)> = (0..last).map(|d| (xt.shape[d], xt.strides[d])).collect();
            merged = merge_dims(&batch_dims);
        }
        let row_stride = merged.first().map(|d| d.1).unwrap_or(0);
        let in_len = xt.shape[last];
        let elem_stride = if in_len > 1 { xt.strides[last] } else { 0 };
        self.record_transform(batch, &xt, &target, FftDims { rows, n, in_len, offset: xt.offset, row_stride, elem_stride }, eps, inverse)?;
        if via_scratch {
            // back to Nx's axis order: the transformed axis returns to `axis`
            let mut inv = vec![0; rank];
            for (i, &p) in perm.iter().enumerate() {
                inv[p] = i;
            }
            self.record_contiguous(batch, &target.transpose(&inv)?, out)?;
        }
        Ok(())
    }

    fn record_transform(&self, batch: &mut Batch<'_>, x: &Tensor, out: &Tensor, d: FftDims, eps: f64, inverse: bool) -> Result<()> {
        let p = d.n.trailing_zeros() as usize;
        let q = d.n >> p;
        let total = d.rows * d.n;
        batch.keep(&x.buffer);
        batch.keep(&out.buffer);
        let scratch = if p > 0 {
            let a = self.pool.alloc((total * 16) as u64)?;
            let b = self.pool.alloc((total * 16) as u64)?;
            batch.keep(&a);
            batch.keep(&b);
            Some((a, b))
        } else {
            None
        };
        // leaf: 2^p direct DFTs of length q per row, their twiddles from a table for q <= 1,024
        let leaf_table = if q > 1 && q <= LEAF_TABLE_MAX_Q {
            Some(self.record_twiddle_table(batch, "fft leaf twiddles", leaf_twiddle_source, q, (q - 1) * (q - 1))?)
        } else {
            None
        };
        let leaf = Spec { input: Some(x.dtype), out: out.dtype, inverse, last: p == 0, leaf_table: leaf_table.is_some(), stages: 0 };
        let kernel = self.kernels.get(&leaf.key(), 256, 1, || leaf.source())?;
        let dst = match &scratch {
            Some((a, _)) => a.address(),
            None => out.buffer.address(),
        };
        let mut params = ParamBlock::new("fft");
        params.addrs([x.buffer.address(), dst]).i64(eps.to_bits() as i64);
        params.addr(leaf_table.as_ref().map_or(0, |t| t.address()));
        params.i32s([d.n, q, 1usize << p, d.in_len, d.offset])?.i32s([d.row_stride, d.elem_stride])?;
        batch.dispatch(&kernel, params.bytes(), total as u64)?;
        // radix-2 stages, ping-ponging between the scratch buffers, the last into `out`
        if let Some((a, b)) = &scratch {
            // the stages' twiddles: stage s's (L = q 2^s) k-th at q (2^(s-1) - 1) + k
            let table = self.record_twiddle_table(batch, "fft twiddles", twiddle_source, q, d.n - q)?;
            let (mut src, mut dst) = (a.address(), b.address());
            // up to three stages per pass (each invocation holds the 2^r values r consecutive
            // stages combine among themselves)
            let mut stage = 1;
            while stage <= p {
                let stages = (p + 1 - stage).min(STAGES_PER_PASS);
                let last = stage + stages - 1 == p;
                let spec = Spec { input: None, out: out.dtype, inverse, last, leaf_table: false, stages };
                let kernel = self.kernels.get(&spec.key(), 256, 1, || spec.source())?;
                let target = if last { out.buffer.address() } else { dst };
                let mut params = ParamBlock::new("fft");
                params.addrs([src, target]).i64(eps.to_bits() as i64).addrs([table.address()]);
                params.i32s([d.n, q << stage])?;
                batch.dispatch(&kernel, params.bytes(), (total >> stages) as u64)?;
                std::mem::swap(&mut src, &mut dst);
                stage += stages;
            }
        }
        Ok(())
    }
}

/// What every FFT kernel starts with: the numeric prelude, the scalar and complex helpers, our
/// f64 sin/cos, and -2π.
fn f64_prelude() -> String {
    let mut s = crate::kernels::numeric_prelude();
    s.push_str(crate::kernels::OPS);
    s.push_str(crate::kernels::MATH_F64);
    s.push_str("const double NX_MINUS_TWO_PI = -6.283185307179586LF;\n");
    s
}

/// A twiddle table's kernel: entry `i` of `pc.count` is `(cos a, sin a)` as f64 bits, where
/// `angle` (GLSL statements reading `i` and `Q`, q from the parameters) sets `double a`.
fn twiddle_table_source(angle: &str) -> String {
    let mut s = f64_prelude();
    write!(
        s,
        r#"layout(local_size_x = 256) in;
void main() {{
    uint64_t table = ParamsU64(pc.params).v[0];
    int Q = ParamsI32(pc.params + 8ul).v[0];
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * 256u) {{
{angle}
        BufU64x2(table).v[i] = nx_c_to_c128(dvec2(m_cos(a), m_sin(a)));
    }}
}}
"#
    )
    .unwrap();
    s
}

/// The radix-2 stages' twiddles for a length `n = 2^p q` (q odd): entry `i` is stage s's
/// `(cos θ, sin θ)`, `θ = (-2π·k)/L`, `L = q 2^s`, where `i + q = q 2^(s-1) + k`, `k < L/2` —
/// the operations BinaryBackend's butterfly does for its twiddle, stored as f64 bits.
fn twiddle_source() -> String {
    twiddle_table_source(
        "        int j = int(i) + Q;
        int H = Q << findMSB(uint(j / Q)); // q 2^(s-1) <= j < q 2^s
        int k = j - H;
        int L = 2 * H;
        precise double th0 = NX_MINUS_TWO_PI * double(k);
        precise double a = th0 / double(L);",
    )
}

/// Radix-2 stages one pass does at most: each invocation holds the 2^3 values three
/// consecutive stages combine among themselves (256 × 4096: twelve stages in four passes,
/// each pass reading and writing every value once).
const STAGES_PER_PASS: usize = 3;

/// The largest odd part q whose leaf twiddles come from a table ((q-1)² entries, 16 MiB at
/// 1,024): never more twiddles than the leaf computes inline (`rows · n · (q-1)`).
const LEAF_TABLE_MAX_Q: usize = 1024;

/// The leaf DFTs' twiddles for odd q: entry `(k-1)(q-1) + (m-1)` is `(cos φ, sin φ)`,
/// `φ = ((-2π/q)·k)·m`, for 1 <= k, m < q — the operations the leaf does inline.
fn leaf_twiddle_source() -> String {
    twiddle_table_source(
        "        int k = int(i) / (Q - 1) + 1;
        int m = int(i) % (Q - 1) + 1;
        precise double ph = (NX_MINUS_TWO_PI / double(Q)) * double(k);
        precise double a = ph * double(m);",
    )
}

impl Context {
    /// Records the kernel `key` (from `source`) that fills a new table of `entries` complex
    /// f64 twiddles for odd part `q`; the batch keeps the table alive.
    fn record_twiddle_table(&self, batch: &mut Batch<'_>, key: &str, source: fn() -> String, q: usize, entries: usize) -> Result<std::sync::Arc<crate::memory::DeviceBuffer>> {
        let table = self.pool.alloc((entries * 16) as u64)?;
        batch.keep(&table);
        let kernel = self.kernels.get(key, 256, 1, source)?;
        let mut params = ParamBlock::new("fft");
        params.addrs([table.address()]);
        params.i32s([q])?;
        batch.dispatch(&kernel, params.bytes(), entries as u64)?;
        Ok(table)
    }
}

#[derive(Clone, Copy, Debug)]
struct FftDims {
    rows: usize,
    n: usize,
    in_len: usize,
    offset: usize,
    row_stride: isize,
    elem_stride: isize,
}

/// A leaf kernel (`input: Some(dtype)`) or a radix-2 stage (`None`); `last` writes the result.
struct Spec {
    input: Option<DType>,
    out: DType,
    inverse: bool,
    last: bool,
    /// A leaf reading its twiddles from a (q-1)² table (see [`leaf_twiddle_source`]).
    leaf_table: bool,
    /// Radix-2 stages this pass does (1 to [`STAGES_PER_PASS`]: L, 2L, 4L); 0 for a leaf.
    stages: usize,
}

impl Spec {
    fn key(&self) -> String {
        format!("fft {:?} -> {} inverse:{} last:{} table:{} stages:{}", self.input, self.out, self.inverse, self.last, self.leaf_table, self.stages)
    }

    /// GLSL storing complex `z` at index `idx` of `dst`: f64 scratch, or the result (ifft's
    /// conj/n, the eps clean-up, rounding per part).
    fn store(&self, z: &str, idx: &str) -> String {
        if !self.last {
            return format!("BufU64x2(dst).v[{idx}] = nx_c_to_c128({z});");
        }
        let out = self.out;
        let mut s = format!("{{ dvec2 r = {z};");
        if self.inverse {
            s.push_str(" r = nx_cdiv_cr(dvec2(r.x, -r.y), double(N));");
        }
        s.push_str(" r = dvec2((nx_abs(r.x) <= eps) ? 0.0LF : r.x, (nx_abs(r.y) <= eps) ? 0.0LF : r.y);");
        write!(s, " {}(dst).v[{idx}] = {}; }}", buf_type(out), encode(out, &wrap(out, "r"))).unwrap();
        s
    }

    fn source(&self) -> String {
        let mut s = f64_prelude();
        if let Some(t) = self.input {
            // element j of a row: zero past the input (padding), conjugated for ifft
            let cx = t.is_complex();
            let raw = format!("{}(src).v[base + j * ES]", buf_type(t));
            let v = if cx {
                let z = decode(t, &raw);
                if self.inverse {
                    format!("dvec2(({z}).x, -({z}).y)")
                } else {
                    z
                }
            } else {
                crate::reduce::to_domain(t, DType::F64, &decode(t, &raw))
            };
            let (ty, zero) = if cx { ("dvec2", "dvec2(0.0LF)") } else { ("double", "0.0LF") };
            writeln!(s, "{ty} elem(uint64_t src, int base, int j, int LEN, int ES) {{ if (j >= LEN) return {zero}; {ty} v = {v}; return v; }}").unwrap();
            s.push_str("layout(local_size_x = 256) in;\nvoid main() {\n");
            s.push_str("    uint64_t src = ParamsU64(pc.params).v[0];\n    uint64_t dst = ParamsU64(pc.params).v[1];\n");
            s.push_str("    double eps = nx_bits_to_f64(ParamsU64(pc.params).v[2]);\n");
            s.push_str("    uint64_t tw = ParamsU64(pc.params).v[3];\n");
            s.push_str("    ParamsI32 meta = ParamsI32(pc.params + 32ul);\n");
            s.push_str("    int N = meta.v[0]; int Q = meta.v[1]; int P = meta.v[2]; int LEN = meta.v[3]; int OFF = meta.v[4]; int RS = meta.v[5]; int ES = meta.v[6];\n");
            s.push_str("    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * 256u) {\n");
            s.push_str("        int row = int(i / uint(N)); int idx = int(i % uint(N));\n");
            s.push_str("        int sub = idx / Q; int k = idx % Q;\n");
            s.push_str("        int base = OFF + row * RS;\n");
            s.push_str("        dvec2 acc;\n");
            // k == 0 (and q == 1): the plain sum of the subsequence, in BinaryBackend's order
            if cx {
                s.push_str("        if (k == 0) {\n            acc = elem(src, base, sub, LEN, ES);\n");
                s.push_str("            for (int m = 1; m < Q; m++) acc = nx_cadd(elem(src, base, sub + P * m, LEN, ES), acc);\n");
            } else {
                s.push_str("        if (k == 0) {\n            precise double r = elem(src, base, sub, LEN, ES);\n");
                s.push_str("            for (int m = 1; m < Q; m++) { precise double t = elem(src, base, sub + P * m, LEN, ES) + r; r = t; }\n");
                s.push_str("            acc = dvec2(r, 0.0LF);\n");
            }
            s.push_str("        } else {\n");
            s.push_str("            precise double ph = (NX_MINUS_TWO_PI / double(Q)) * double(k);\n");
            // i = 0: from_polar(1, -0.0) is (1.0, 0.0)
            if cx {
                s.push_str("            acc = nx_cmul(elem(src, base, sub, LEN, ES), dvec2(1.0LF, 0.0LF));\n");
            } else {
                s.push_str("            { double x = elem(src, base, sub, LEN, ES); precise double a = 1.0LF * x; precise double b = 0.0LF * x; acc = dvec2(a, b); }\n");
            }
            s.push_str("            for (int m = 1; m < Q; m++) {\n");
            if self.leaf_table {
                s.push_str("                dvec2 w = nx_c128_to_c(BufU64x2(tw).v[(k - 1) * (Q - 1) + m - 1]);\n");
            } else {
                s.push_str("                precise double phi = ph * double(m);\n");
                s.push_str("                dvec2 w = dvec2(m_cos(phi), m_sin(phi));\n");
            }
            s.push_str("                int j = sub + P * m;\n");
            if cx {
                // padding is the integer 0 there: number times complex
                s.push_str("                dvec2 t;\n                if (j >= LEN) { precise double a = w.x * 0.0LF; precise double b = w.y * 0.0LF; t = dvec2(a, b); }\n");
                s.push_str("                else t = nx_cmul(elem(src, base, j, LEN, ES), w);\n");
            } else {
                s.push_str("                double x = elem(src, base, j, LEN, ES);\n");
                s.push_str("                precise double a = w.x * x; precise double b = w.y * x; dvec2 t = dvec2(a, b);\n");
            }
            s.push_str("                acc = nx_cadd(t, acc);\n            }\n        }\n");
            writeln!(s, "        {}", self.store("acc", "row * N + idx")).unwrap();
            s.push_str("    }\n}\n");
        } else {
            s.push_str("layout(local_size_x = 256) in;\nvoid main() {\n");
            s.push_str("    uint64_t src = ParamsU64(pc.params).v[0];\n    uint64_t dst = ParamsU64(pc.params).v[1];\n");
            s.push_str("    double eps = nx_bits_to_f64(ParamsU64(pc.params).v[2]);\n");
            s.push_str("    uint64_t tw = ParamsU64(pc.params).v[3];\n");
            s.push_str("    ParamsI32 meta = ParamsI32(pc.params + 32ul);\n");
            s.push_str("    int N = meta.v[0]; int L = meta.v[1]; int H = L / 2; int S = N / L;\n");
            s.push_str("    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * 256u) {\n");
            // Stages L, 2L, ... (r of them) on the 2^r values x[j] = src[(sub + j·(S >> (r-1)))·H
            // + k] (sub < S >> (r-1), k < H): stage t pairs the values whose index differs in
            // bit r-1-t, e ± w·o with the twiddle of k plus the value's offset so far (H·2^t' for
            // every earlier stage t' whose "minus" output it is; stage t's twiddles start at
            // H·2^t - q in the table, q = N's odd part); after the last stage each value lands at
            // sub·(L·2^(r-1)) + k + its offset. With r = 1 this is the plain stage.
            let r = self.stages;
            let g = 1usize << r;
            writeln!(s, "        int row = int(i / uint(N >> {r})); int m = int(i % uint(N >> {r}));").unwrap();
            s.push_str("        int sub = m / H; int k = m % H;\n");
            s.push_str("        int rb = row * N;\n");
            s.push_str("        int Q0 = N >> findLSB(uint(N));\n");
            for j in 0..g {
                writeln!(s, "        dvec2 v0_{j} = nx_c128_to_c(BufU64x2(src).v[rb + (sub + {j} * (S >> {})) * H + k]);", r - 1).unwrap();
            }
            let mut offset = vec![0usize; g]; // in units of H
            for t in 0..r {
                let bit = 1usize << (r - 1 - t);
                for j in (0..g).filter(|j| j & bit == 0) {
                    let (o, c) = (j | bit, offset[j]);
                    debug_assert_eq!(offset[o], c);
                    writeln!(s, "        dvec2 t{t}_{j} = nx_cmul(nx_c128_to_c(BufU64x2(tw).v[(H << {t}) - Q0 + k + {c} * H]), v{t}_{o});").unwrap();
                    writeln!(s, "        dvec2 v{}_{j} = nx_cadd(v{t}_{j}, t{t}_{j});", t + 1).unwrap();
                    writeln!(s, "        dvec2 v{}_{o} = nx_csub(v{t}_{j}, t{t}_{j});", t + 1).unwrap();
                    offset[o] = c + (1 << t);
                }
            }
            for (j, c) in offset.iter().enumerate() {
                writeln!(s, "        {}", self.store(&format!("v{r}_{j}"), &format!("rb + sub * (L << {}) + k + {c} * H", r - 1))).unwrap();
            }
            s.push_str("    }\n}\n");
        }
        if std::env::var_os("NX_VULKAN_DUMP_KERNELS").is_some() {
            eprintln!("// ---- {}\n{}", self.key(), &s[s.find("const double NX_MINUS").unwrap_or(0)..]);
        }
        s
    }
}
