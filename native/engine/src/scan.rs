//! Cumulative ops along an axis: `cumulative_sum`, `cumulative_product`, `cumulative_max`,
//! `cumulative_min`, with `reverse`, over any view.
//!
//! **Numerics: Nx 0.7.2's exact tree.** Nx.BinaryBackend has no cumulative callbacks, so Nx
//! computes them with its `associative_scan` fallback: a recursive work-efficient scan made of
//! whole-tensor `add`/`multiply`/`max`/`min`, each rounding (floats) or wrapping (integers) to
//! the tensor's own type. The result therefore depends on the combination tree (f32 sums
//! differ from a sequential loop; max/min return the left operand on ties, which shows on
//! -0.0/+0.0). We unroll that recursion into the in-place up-sweep/down-sweep it is
//! (kernels/scan.glsl) and run every level over all rows as one dispatch: about `2*log2(n)`
//! dispatches for rows of length `n`, the first of which also copies the input view. The
//! order is a function of the shape only, so reruns are bit-identical and every device gives
//! the same bits. The output type is the input type (Nx keeps it: u8 stays u8).
//!
//! `record_cumulative` records every level into a caller's batch and writes a caller's output
//! (a new contiguous tensor of the input's type and shape); `cumulative` wraps it.

use crate::dtype::{DType, Kind};
use crate::elementwise::{buf_type, decode, encode, storage_type, wrap};
use crate::error::{invalid, Result};
use crate::ops::check_dense_output;
use crate::params::ParamBlock;
use crate::submit::Batch;
use crate::tensor::{Tensor, MAX_ELEMENTS};
use crate::Context;
use std::fmt::Write;

/// A cumulative op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanOp {
    Sum,
    Product,
    Max,
    Min,
}

impl ScanOp {
    /// Parses Nx's names (`cumulative_sum`, ...) or the short ones (`sum`, ...).
    pub fn parse(s: &str) -> Result<ScanOp> {
        match s.strip_prefix("cumulative_").unwrap_or(s) {
            "sum" => Ok(ScanOp::Sum),
            "product" => Ok(ScanOp::Product),
            "max" => Ok(ScanOp::Max),
            "min" => Ok(ScanOp::Min),
            other => Err(invalid!("unknown cumulative op {other:?} (expected sum, product, max or min)")),
        }
    }
}

const LOCAL: u32 = 256;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pass {
    First,
    Up,
    Down,
}

impl Context {
    /// Nx.cumulative_{sum,product,max,min}(x, axis: axis, reverse: reverse). The result is a
    /// new contiguous tensor of `x`'s type and shape.
    pub fn cumulative(&self, op: ScanOp, x: &Tensor, axis: usize, reverse: bool) -> Result<Tensor> {
        check_scan(x, axis)?;
        let out = self.empty(x.dtype, &x.shape)?;
        self.recorded(out, |batch, out| self.record_cumulative(batch, op, x, axis, reverse, out))
    }

    /// Records `cumulative` into `out`: a new (contiguous, offset 0) tensor of `x`'s type and
    /// shape.
    pub fn record_cumulative(&self, batch: &mut Batch<'_>, op: ScanOp, x: &Tensor, axis: usize, reverse: bool, out: &Tensor) -> Result<()> {
        check_scan(x, axis)?;
        check_dense_output(out, x.dtype, &x.shape, "cumulative")?;
        let rank = x.shape.len();
        let total = x.numel();
        if total == 0 {
            return Ok(());
        }
        if total > MAX_ELEMENTS {
            return Err(invalid!("cumulative input of {total} elements exceeds {MAX_ELEMENTS}"));
        }
        let n = x.shape[axis];
        let inner: usize = x.shape[axis + 1..].iter().product();
        let outer: usize = x.shape[..axis].iter().product();
        // (n, inner, outer, d, positions, reverse, offset, axis, then (size, stride) per axis):
        // `d` and `positions` change from one level to the next.
        let mut p = ParamBlock::new("cumulative");
        p.addrs([x.buffer.address(), out.buffer.address()]);
        p.i32s([n, inner, outer])?;
        let level = p.len();
        p.i32s([1, 0])?.i32(reverse as i32)?.i32s([x.offset, axis])?;
        for d in 0..rank {
            p.i32(x.shape[d])?.i32(x.strides[d])?;
        }
        batch.keep(&x.buffer);
        batch.keep(&out.buffer);
        let first = Spec { op, t: x.dtype, pass: Pass::First, rank };
        let k = self.kernels.get(&first.key(), LOCAL, 1, || first.source())?;
        batch.dispatch(&k, p.bytes(), total as u64)?;
        let up = Spec { op, t: x.dtype, pass: Pass::Up, rank: 0 };
        let down = Spec { op, t: x.dtype, pass: Pass::Down, rank: 0 };
        let ku = self.kernels.get(&up.key(), LOCAL, 1, || up.source())?;
        let kd = self.kernels.get(&down.key(), LOCAL, 1, || down.source())?;
        let rows = (outer * inner) as u64;
        let mut d = 2usize;
        while 2 * d <= n {
            let npos = n / (2 * d);
            p.set_i32(level, d)?;
            p.set_i32(level + 4, npos)?;
            batch.dispatch(&ku, p.bytes(), rows * npos as u64)?;
            d *= 2;
        }
        // down-sweep from the largest d with 3d <= n
        let mut d = if n >= 3 { 1usize << (usize::BITS - 1 - (n / 3).leading_zeros()) } else { 0 };
        while d >= 1 {
            let npos = (n / d - 1) / 2;
            p.set_i32(level, d)?;
            p.set_i32(level + 4, npos)?;
            batch.dispatch(&kd, p.bytes(), rows * npos as u64)?;
            d /= 2;
        }
        Ok(())
    }
}

fn check_scan(x: &Tensor, axis: usize) -> Result<()> {
    if !(x.dtype.is_float() || x.dtype.is_integer()) {
        return Err(invalid!("cumulative ops on {} (complex) tensors are not supported yet", x.dtype));
    }
    if axis >= x.shape.len() {
        return Err(invalid!("cumulative axis {axis} out of range for shape {:?}", x.shape));
    }
    Ok(())
}

struct Spec {
    op: ScanOp,
    t: DType,
    pass: Pass,
    rank: usize,
}

impl Spec {
    fn key(&self) -> String {
        format!("scan {:?} {} {:?} r{}", self.op, self.t, self.pass, self.rank)
    }

    fn source(&self) -> String {
        let t = self.t;
        let mut s = String::new();
        s.push_str(&crate::kernels::numeric_prelude());
        s.push_str(crate::kernels::OPS);
        let ct = t.glsl_compute();
        let suffix = match t.kind() {
            Kind::Float => "f64",
            Kind::Signed => "s64",
            _ => "u64",
        };
        let expr = match self.op {
            ScanOp::Sum => "a + b".to_string(),
            ScanOp::Product => "a * b".to_string(),
            ScanOp::Max => format!("nx_max_{suffix}(a, b)"),
            ScanOp::Min => format!("nx_min_{suffix}(a, b)"),
        };
        let precise = if t.is_float() { "precise " } else { "" };
        writeln!(s, "#define LOCAL {LOCAL}\n#define RANK {}", self.rank).unwrap();
        writeln!(s, "#define T {ct}\n#define STORE_T {}\n#define BUF {}", storage_type(t), buf_type(t)).unwrap();
        writeln!(s, "#define DECODE(r) {}", decode(t, "(r)")).unwrap();
        writeln!(s, "#define ENCODE(v) {}", encode(t, "(v)")).unwrap();
        writeln!(s, "{ct} scan_fun({ct} a, {ct} b) {{ {precise}{ct} r = {expr}; return {}; }}", wrap(t, "r")).unwrap();
        s.push_str("#define FUN(a, b) scan_fun(a, b)\n");
        s.push_str(match self.pass {
            Pass::First => "#define K_FIRST\n",
            Pass::Up => "#define K_UP\n",
            Pass::Down => "#define K_DOWN\n",
        });
        s.push_str(include_str!("kernels/scan.glsl"));
        s
    }
}
