//! Cumulative ops along an axis: `cumulative_sum`, `cumulative_product`, `cumulative_max`,
//! `cumulative_min`, with `reverse`, over any view.
//!
//! **Numerics: Nx 0.7.2's exact tree.** Nx.BinaryBackend has no cumulative callbacks, so Nx
//! computes them with its `associative_scan` fallback: a recursive work-efficient scan made of
//! whole-tensor `add`/`multiply`/`max`/`min`, each rounding (floats) or wrapping (integers) to
//! the tensor's own type. The result therefore depends on the combination tree (f32 sums
//! differ from a sequential loop; max/min return the left operand on ties, which shows on
//! -0.0/+0.0). We unroll that recursion into the in-place up-sweep/down-sweep it is
//! (kernels/scan.glsl). Its levels below a segment of [`Context::scan_tile`] positions (4,096;
//! 2,048 for 64-bit types; less on a device with under 17 KB of shared memory) stay inside
//! that segment, and the levels above it are the same tree over every tile-th position, so a
//! pass per stride (1, tile, tile², ...) runs up and back down: one dispatch for rows up to a
//! tile long, three up to its square, five up to its cube (a level per dispatch took about
//! `2*log2(n)`: 19 at 1 K, 47 at 16 M). Inside a pass each invocation holds `tile / 256`
//! consecutive positions (16; 8 for 64-bit types) in registers and runs the levels below that
//! there; only each block's last position takes the shared-memory levels. The tile changes
//! the passes, not the tree: the bits are the same whatever it is. The
//! first pass also copies the input view. The order is a function of the shape only, so
//! reruns are bit-identical and every device gives the same bits. f32 sums and products use
//! the f32 library's add and multiply (math_f32.glsl: correctly rounded, so BinaryBackend's
//! f64-then-round bits, with no f64 work where operands and result are normal). The output
//! type is the input type (Nx keeps it: u8 stays u8).
//!
//! `record_cumulative` records every pass into a caller's batch and writes a caller's output
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

/// Positions one invocation holds in registers by default: 16, or 8 for 64-bit types — a
/// workgroup's staging array (`tile` elements, padded one per 32) of 16,900 bytes, just over
/// Vulkan's 16 KiB minimum ([`per_invocation_on`] halves it where a device has less).
fn per_invocation(t: DType) -> usize {
    if t.bits() == 64 { 8 } else { 16 }
}

/// Level elements one workgroup holds by default (4,096; 2,048 for 64-bit types): the
/// longest segment on a device with at least 17 KB of shared memory ([`Context::scan_tile`]
/// is the device's).
pub fn tile(t: DType) -> usize {
    per_invocation(t) * LOCAL as usize
}

/// Shared memory a workgroup of `r` positions per invocation needs: the padded staging array
/// and the previous segment's last.
fn shared_bytes(t: DType, r: usize) -> usize {
    let tile = r * LOCAL as usize;
    let slot = if t.bits() == 64 { 8 } else { 4 };
    (tile + tile / 32 + 1) * slot
}

/// [`per_invocation`], halved until the workgroup's shared memory fits the device (a device at
/// Vulkan's 16 KiB minimum takes 8 positions, 4 for 64-bit types). The tree, and so every bit,
/// is the same whatever the tile: only the passes it is cut into change.
fn per_invocation_on(t: DType, max_shared: usize) -> usize {
    let mut r = per_invocation(t);
    while r > 1 && shared_bytes(t, r) > max_shared {
        r /= 2;
    }
    r
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pass {
    /// The in-segment up-sweep levels of a stride below the last.
    Up,
    /// The last stride: one segment per row, its up-sweep and then its down-sweep levels.
    Both,
    /// The in-segment down-sweep levels of a stride below the last.
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

    /// The longest segment one workgroup scans on this device for type `t`: rows up to this
    /// length take one dispatch, up to its square three, up to its cube five.
    /// `NX_VULKAN_SCAN_POSITIONS=N` (a power of two up to the default) caps the positions per
    /// invocation — smaller tiles, more passes, less shared memory per workgroup: a measurement
    /// knob (stop 43 found shared memory per workgroup bounding how many workgroups an H100
    /// runs at once); the tree, and so every bit, is the same whatever the tile.
    pub fn scan_tile(&self, t: DType) -> usize {
        let cap = std::env::var("NX_VULKAN_SCAN_POSITIONS").ok().and_then(|v| v.parse::<usize>().ok()).filter(|r| r.is_power_of_two());
        let r = per_invocation_on(t, self.caps.max_shared_memory as usize);
        cap.map_or(r, |c| r.min(c)) * LOCAL as usize
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
        // (n, inner, outer, s, tiles, reverse, offset, axis, seg, log2(seg), then (size,
        // stride) per axis): `s`, `tiles` and `seg` change from one pass to the next.
        let mut p = ParamBlock::new("cumulative");
        p.addrs([x.buffer.address(), out.buffer.address()]);
        p.i32s([n, inner, outer])?;
        let stride_slot = p.len();
        p.i32s([1, 1])?.i32(reverse as i32)?.i32s([x.offset, axis])?;
        let seg_slot = p.len();
        p.i32s([1, 0])?;
        for d in 0..rank {
            p.i32(x.shape[d])?.i32(x.strides[d])?;
        }
        batch.keep(&x.buffer);
        batch.keep(&out.buffer);
        // Strides 1, tile, tile^2, ... until a row's level sequence fits one segment.
        let tile = self.scan_tile(x.dtype);
        let r = tile / LOCAL as usize;
        let mut strides = vec![1usize];
        while n / strides.last().unwrap() > tile {
            strides.push(strides.last().unwrap() * tile);
        }
        let rows = outer * inner;
        let top = strides.len() - 1;
        let passes = (0..top).map(|i| (i, Pass::Up)).chain([(top, Pass::Both)]).chain((0..top).rev().map(|i| (i, Pass::Down)));
        for (i, pass) in passes {
            let s = strides[i];
            let ns = n / s;
            let (seg, tiles) = if ns > tile { (tile, ns.div_ceil(tile)) } else { (ns.next_power_of_two(), 1) };
            let first = i == 0 && pass != Pass::Down;
            // a contiguous input is read at offset + output index (no per-axis division)
            let dense = first && x.is_contiguous();
            let spec = Spec { op, t: x.dtype, r, pass, first, dense, rank: if first && !dense { rank } else { 0 } };
            let k = self.kernels.get(&spec.key(), LOCAL, 1, || spec.source())?;
            p.set_i32(stride_slot, s)?;
            p.set_i32(stride_slot + 4, tiles)?;
            p.set_i32(seg_slot, seg)?;
            p.set_i32(seg_slot + 4, seg.trailing_zeros() as usize)?;
            let groups = (rows * tiles).div_ceil(tile / seg);
            batch.dispatch(&k, p.bytes(), groups as u64 * LOCAL as u64)?;
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
    /// Positions per invocation (the tile is `r * LOCAL`).
    r: usize,
    pass: Pass,
    /// This pass loads the input view (the first pass at stride 1); the others read the output.
    first: bool,
    /// `first`, and the input is contiguous: read at its offset plus the output index.
    dense: bool,
    /// The input view's rank where `first` and not `dense` (its indexing is generated for it),
    /// else 0.
    rank: usize,
}

impl Spec {
    fn key(&self) -> String {
        format!("scan {:?} {} x{} {:?} first:{} dense:{} r{}", self.op, self.t, self.r, self.pass, self.first, self.dense, self.rank)
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
        let r = self.r;
        writeln!(s, "#define LOCAL {LOCAL}\n#define SCAN_R {r}u\n#define SCAN_LOG_R {}\n#define TILE {}u\n#define RANK {}", r.trailing_zeros(), r * LOCAL as usize, self.rank).unwrap();
        let shared = if t.bits() == 64 { "uint64_t" } else { "uint" };
        writeln!(s, "#define STORE_T {}\n#define SH_T {shared}\n#define BUF {}", storage_type(t), buf_type(t)).unwrap();
        if t == DType::F32 && matches!(self.op, ScanOp::Sum | ScanOp::Product) {
            // The f32 library's add and multiply: correctly rounded (native where operands and
            // result are normal, exact integer code otherwise), canonical NaN — what rounding
            // the f64 sum or product to f32 gives, without the f64 round trip.
            s.push_str(crate::kernels::MATH_F32);
            let f = if self.op == ScanOp::Sum { "nxf_add" } else { "nxf_mul" };
            writeln!(s, "uint scan_combine(uint a, uint b) {{ return floatBitsToUint({f}(uintBitsToFloat(a), uintBitsToFloat(b))); }}").unwrap();
        } else {
            let precise = if t.is_float() { "precise " } else { "" };
            let (a, b) = (decode(t, "STORE_T(ra)"), decode(t, "STORE_T(rb)"));
            let stored = encode(t, &wrap(t, "r"));
            writeln!(s, "{shared} scan_combine({shared} ra, {shared} rb) {{ {ct} a = {a}; {ct} b = {b}; {precise}{ct} r = {expr}; return {shared}({stored}); }}").unwrap();
        }
        s.push_str("#define COMBINE(a, b) scan_combine(a, b)\n");
        if self.first {
            s.push_str("#define K_FIRST\n");
        }
        if self.dense {
            s.push_str("#define K_DENSE\n");
        }
        s.push_str(match self.pass {
            Pass::Up => "#define K_UP\n",
            Pass::Both => "#define K_UP\n#define K_DOWN\n",
            Pass::Down => "#define K_DOWN\n",
        });
        s.push_str(include_str!("kernels/scan.glsl"));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tile_fits_the_device_shared_memory() {
        // 4,096 f32 slots padded one per 32 (+ the previous segment's last): 16,900 bytes
        assert_eq!(shared_bytes(DType::F32, 16), 16_900);
        assert_eq!((per_invocation_on(DType::F32, 32_768), per_invocation_on(DType::F64, 32_768)), (16, 8));
        assert_eq!((per_invocation_on(DType::F32, 16_384), per_invocation_on(DType::F64, 16_384)), (8, 4));
        assert_eq!(per_invocation_on(DType::U8, 16_900), 16);
        assert_eq!(per_invocation_on(DType::F64, 0), 1);
    }
}
