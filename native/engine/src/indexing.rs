//! The indexing family: gather, take, take_along_axis, indexed_add and indexed_put, native on
//! the device, with Nx.BinaryBackend's (Nx 0.7.2) semantics.
//!
//! Every input is read through its strides (transposed, sliced, broadcast views need no copy);
//! indices may be of any integer type. Kernels use the engine's one pipeline layout: a parameter
//! block holds buffer addresses (first, 8 bytes each) and then 32-bit shapes and strides.
//!
//! **Reads** (gather, take, take_along_axis) are one kernel, `ix_read`: output element `c`
//! finds its source element axis by axis, either copying an output coordinate or reading an
//! index value at a position derived from `c`. gather and take copy the stored bits (NaN
//! payloads kept, as BinaryBackend's binary slicing keeps them); take_along_axis writes every
//! NaN as the canonical quiet NaN (BinaryBackend reads and re-writes numbers there).
//!
//! **Out-of-range indices.** BinaryBackend raises `index i is out of bounds for axis a in shape
//! s` for the first bad index it meets. A kernel cannot raise: every index is checked on the
//! device (a check pass, or the keys pass of the indexed ops) and the flat position of the first
//! bad one is kept with an `atomicMin` in a small host-visible buffer (an [`IndexCheck`]).
//! After the batch the host reads it; when set, it downloads the indices, reads the value at
//! that position and returns `EngineError::InvalidArgument` with BinaryBackend's message (real
//! axis and shape of the tensor given). The kernels never read out of bounds: a bad index reads
//! nothing.
//!
//! **Recording into a caller's batch.** `record_gather`, `record_take`,
//! `record_take_along_axis` and `record_indexed` write caller-provided outputs (new contiguous
//! tensors) and report into an `IndexCheck` from [`Context::index_check`] (one slot per op;
//! one check can serve a whole graph). The check stays a synchronisation point, only a later
//! one: finish the batch, then `IndexCheck::check` waits and raises the first op's error. The
//! record calls borrow the check for the batch's lifetime, so it cannot be read or dropped
//! while the batch is still open. The plain ops (`gather`, ...) are that sequence with the
//! wait at once.
//!
//! **Indexed ops** (`indices` is `{n, k}`, `axes` the k indexed axes in increasing order,
//! `updates` is `{n, ...j}`). As in BinaryBackend, the target is seen permuted to
//! `axes ++ other axes`; index row `i` names the slice `s_i` (row-major over the indexed axes)
//! and update row `i`, flattened, is written over the first `U = prod(j)` elements of that slice
//! in its flattened (permuted row-major) order — exactly BinaryBackend's behaviour also when `j`
//! is smaller than the slice (it does not place a sub-block). Elements no row touches are copied
//! (stored bits kept when the output type is the target type, otherwise converted as
//! BinaryBackend does, NaN canonical).
//! - indexed_put: the last row (in update order) naming a slice wins;
//! - indexed_add: the rows naming a slice are summed in update order starting from the integer
//!   0 in the updates' domain (floats in f64, so `-0.0` becomes `+0.0`; integers in 64 bits),
//!   then added to the target value in the output's domain (f64 for floats) and rounded or
//!   wrapped once to the output type; a NaN result is the canonical NaN. Where BinaryBackend
//!   raises (an f64 sum overflowing, integer sums beyond 64 bits) we give IEEE / wrapped results.
//!
//! Both are deterministic: no float atomics. Strategies (chosen from the shape only, see
//! [`choose_scatter`]):
//! - [`ScatterStrategy::Scan`]: a keys pass computes each row's slice (or -1), then one
//!   invocation per output element scans the rows in order — O(outputs × n), best for few rows;
//! - [`ScatterStrategy::Segmented`]: rows are bucketed by slice with integer atomics (count,
//!   exclusive scan, fill) and each bucket is sorted by row index (an insertion sort per slice),
//!   so each output element visits exactly its own rows in update order — O(outputs × rows per
//!   slice + n). For indexed_put only the last row matters, so the buckets are replaced by one
//!   `atomicMax` of the row number per slice (order-independent, hence deterministic).

use crate::dtype::{DType, Kind};
use crate::elementwise::{buf_type, decode, encode, storage_type, wrap};
use crate::error::{invalid, EngineError, Result};
use crate::ops::check_dense_output;
use crate::params::ParamBlock;
use crate::reduce::to_domain;
use crate::submit::Batch;
use crate::tensor::{Tensor, MAX_ELEMENTS};
use crate::Context;
use parking_lot::Mutex;
use std::fmt::Write;
use vulkano::buffer::{Buffer, BufferCreateInfo, BufferUsage, Subbuffer};
use vulkano::memory::allocator::{AllocationCreateInfo, MemoryTypeFilter};

const LOCAL: u32 = 256;
/// The largest rank an indexing kernel handles (its coordinate array).
pub const MAX_RANK: usize = 16;
/// The flag value meaning "every index was in range".
const NO_ERROR: u32 = u32::MAX;

/// Which indexed op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexedOp {
    Add,
    Put,
}

/// How indexed_add / indexed_put are mapped onto the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScatterStrategy {
    /// One invocation per output element scans every update row in order.
    Scan,
    /// Rows bucketed by slice (add) or the last row per slice found by atomicMax (put).
    Segmented,
}

/// The strategy for `rows` update rows (the shape alone decides, never the device).
pub fn choose_scatter(rows: usize) -> ScatterStrategy {
    if rows <= 32 {
        ScatterStrategy::Scan
    } else {
        ScatterStrategy::Segmented
    }
}

/// The shared head of every indexing kernel: `meta` is the integer part of the block, `A(i)`
/// the i-th address.
fn head(n_addr: usize) -> String {
    let mut s = String::new();
    s.push_str(&crate::kernels::numeric_prelude());
    s.push_str(crate::kernels::OPS);
    s.push_str("layout(local_size_x = 256) in;\n");
    writeln!(s, "#define META ParamsI32(pc.params + {}ul)", n_addr * 8).unwrap();
    s.push_str("#define A(i) (ParamsU64(pc.params).v[i])\n");
    s
}

/// `int64_t ld_idx(BufX b, int pos)`: an index value; u64 values of 2^63 and above become -1
/// (out of range either way).
fn ld_idx(it: DType) -> String {
    let b = buf_type(it);
    let body = match it {
        DType::U64 => "uint64_t r = b.v[pos]; return (int64_t(r) < 0l) ? -1l : int64_t(r);".to_string(),
        t if t.kind() == Kind::Unsigned => format!("return int64_t({});", decode(t, "b.v[pos]")),
        t => format!("return {};", decode(t, "b.v[pos]")),
    };
    format!("int64_t ld_idx({b} b, int pos) {{ {body} }}\n")
}

/// Raw bits with any NaN replaced by the canonical quiet NaN (integers unchanged).
fn canon_raw(t: DType, r: &str) -> String {
    match t {
        DType::F32 => format!("((({r}) & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FC00000u : ({r}))"),
        DType::F64 => format!(
            "((({r}) & 0x7FFFFFFFFFFFFFFFul) > 0x7FF0000000000000ul ? 0x7FF8000000000000ul : ({r}))"
        ),
        DType::F16 => format!("((uint({r}) & 0x7FFFu) > 0x7C00u ? uint16_t(0x7E00u) : ({r}))"),
        DType::BF16 => format!("((uint({r}) & 0x7FFFu) > 0x7F80u ? uint16_t(0x7FC0u) : ({r}))"),
        // complex (named, so this file builds with or without the complex types): c64 is one
        // 64-bit word holding two f32 parts, c128 two 64-bit words each holding an f64 part
        _ if t.name() == "c64" => {
            let lo = canon_raw(DType::F32, &format!("uint(({r}) & 0xFFFFFFFFul)"));
            let hi = canon_raw(DType::F32, &format!("uint(({r}) >> 32)"));
            format!("((uint64_t({hi}) << 32) | uint64_t({lo}))")
        }
        _ if t.name() == "c128" => canon_raw(DType::F64, r),
        _ => r.to_string(),
    }
}

fn shape_str(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("{{{}}}", parts.join(", "))
}

fn check_indices(indices: &Tensor) -> Result<()> {
    if !indices.dtype.is_integer() {
        return Err(invalid!("indices must be an integer tensor, got {}", indices.dtype));
    }
    if indices.numel() > MAX_ELEMENTS {
        return Err(invalid!("indices of {} elements exceed {MAX_ELEMENTS}", indices.numel()));
    }
    Ok(())
}

/// Storage words of one element: (buffer type, word type, words per element).
fn words(t: DType) -> (&'static str, &'static str, usize) {
    if t.bits() > 64 {
        ("BufU64", "uint64_t", t.bits() / 64)
    } else {
        (buf_type(t), storage_type(t), 1)
    }
}

/// What one index check slot refers to: the indices checked, the shape of the tensor they
/// index and the axis each index component addresses (component `pos % axes.len()`).
struct Checked {
    indices: Tensor,
    shape: Vec<usize>,
    axes: Vec<usize>,
}

/// The out-of-range check of indexing ops recorded into a caller's batch (`record_gather`,
/// `record_take`, `record_take_along_axis`, `record_indexed`): a small host-visible buffer in
/// which each op's kernels keep the position of its first bad index, one slot per op.
///
/// A kernel cannot raise, so the check is a synchronisation point of its own: finish the
/// batch, then call [`IndexCheck::check`], which waits for the device and returns
/// BinaryBackend's error for the first op (in recording order) that met a bad index. The
/// outputs of such an op hold unspecified values (kernels never read out of bounds). A
/// record call borrows the check for as long as the batch lives, so the check cannot be
/// read — or freed — before the batch is finished or dropped. Dropping a check unread waits
/// for the device (the kernels may still write its buffer) and discards what it found,
/// including a failure of queued work that this wait meets: always call `check`.
///
/// ```no_run
/// # use nx_vulkan_engine::{Context, Result, Tensor};
/// # fn f(ctx: &Context, x: &Tensor, indices: &Tensor, out: &Tensor) -> Result<()> {
/// let check = ctx.index_check(1)?;
/// let mut batch = ctx.batch()?;
/// ctx.record_gather(&mut batch, &check, x, indices, &[0], out)?;
/// batch.finish()?;
/// check.check()?; // waits, then raises BinaryBackend's error for a bad index
/// # Ok(())
/// # }
/// ```
///
/// Reading the check while its batch is open does not compile:
///
/// ```compile_fail
/// # use nx_vulkan_engine::{Context, Result, Tensor};
/// # fn f(ctx: &Context, x: &Tensor, indices: &Tensor, out: &Tensor) -> Result<()> {
/// let check = ctx.index_check(1)?;
/// let mut batch = ctx.batch()?;
/// ctx.record_gather(&mut batch, &check, x, indices, &[0], out)?;
/// check.check()?; // error[E0505]: `check` is still borrowed by the batch
/// batch.finish()
/// # }
/// ```
#[must_use = "an IndexCheck reports out-of-range indices only through `check`"]
pub struct IndexCheck<'c> {
    ctx: &'c Context,
    flag: Subbuffer<[u32]>,
    address: u64,
    capacity: usize,
    /// The op of each claimed slot, in recording order.
    ops: Mutex<Vec<Checked>>,
    /// No queued work can write the flag any more (it was waited for, or never committed).
    settled: bool,
}

impl<'c> IndexCheck<'c> {
    fn new(ctx: &'c Context, capacity: usize) -> Result<IndexCheck<'c>> {
        let capacity = capacity.max(1);
        // NO_ERROR in every slot, padded to 16 bytes.
        let init = (0..capacity.next_multiple_of(4)).map(|i| if i < capacity { NO_ERROR } else { 0 });
        let flag = Buffer::from_iter(
            ctx.memory_allocator.clone(),
            BufferCreateInfo { usage: BufferUsage::STORAGE_BUFFER | BufferUsage::SHADER_DEVICE_ADDRESS, ..Default::default() },
            AllocationCreateInfo {
                memory_type_filter: MemoryTypeFilter::PREFER_HOST | MemoryTypeFilter::HOST_RANDOM_ACCESS,
                ..Default::default()
            },
            init,
        )
        .map_err(|e| EngineError::OutOfMemory { bytes: 4 * capacity as u64, why: format!("index check flag: {e:?}") })?;
        let address = flag.device_address().map_err(|e| EngineError::vk("flag address", e))?.get();
        Ok(IndexCheck { ctx, flag, address, capacity, ops: Mutex::new(vec![]), settled: false })
    }

    /// Takes the next slot for an op checking `indices` against `shape`; returns the address
    /// its kernels report into.
    fn claim(&self, indices: &Tensor, shape: &[usize], axes: Vec<usize>) -> Result<u64> {
        let mut ops = self.ops.lock();
        if ops.len() == self.capacity {
            return Err(invalid!("this IndexCheck has room for {} indexing ops, all taken", self.capacity));
        }
        ops.push(Checked { indices: indices.clone(), shape: shape.to_vec(), axes });
        Ok(self.address + 4 * (ops.len() - 1) as u64)
    }

    /// Waits until every op queued so far has run (finish the batch first), then reports the
    /// first out-of-range index as Nx.BinaryBackend does: `index i is out of bounds for axis
    /// a in shape s`. A failure of queued work found by the wait comes first.
    pub fn check(self) -> Result<()> {
        let waited = self.ctx.synchronize();
        self.read_after(waited)
    }

    /// Reads the slots once the work writing them has been waited for (`waited` is that wait's
    /// result, reported first).
    fn read_after(mut self, waited: Result<()>) -> Result<()> {
        self.settled = true;
        waited?;
        let flags: Vec<u32> = self.flag.read().map_err(|e| EngineError::vk("reading the index check", e))?.to_vec();
        let ops = std::mem::take(&mut *self.ops.lock());
        for (op, &pos) in ops.iter().zip(&flags) {
            if pos != NO_ERROR {
                return report(self.ctx, pos, op);
            }
        }
        Ok(())
    }

    /// The batch these slots were recorded into was dropped, never committed: nothing will
    /// write the flag.
    fn discard_uncommitted(mut self) {
        self.settled = true;
    }
}

impl Drop for IndexCheck<'_> {
    fn drop(&mut self) {
        if !self.settled && !self.ops.get_mut().is_empty() {
            // Kernels may still write the flag: it must outlive them.
            let _ = self.ctx.synchronize();
        }
    }
}

/// BinaryBackend's error for the bad index at flat position `pos` of `op.indices`.
fn report(ctx: &Context, pos: u32, op: &Checked) -> Result<()> {
    let bytes = ctx.download(&op.indices)?;
    let t = op.indices.dtype;
    let p = pos as usize * t.size();
    let mut w = [0u8; 8];
    w[..t.size()].copy_from_slice(&bytes[p..p + t.size()]);
    let raw = u64::from_le_bytes(w);
    let value: i128 = match t.kind() {
        Kind::Signed => {
            let sh = 64 - t.bits() as u32;
            (((raw << sh) as i64) >> sh) as i128
        }
        _ => raw as i128,
    };
    let axis = op.axes.get(pos as usize % op.axes.len().max(1)).copied().unwrap_or(0);
    Err(invalid!("index {value} is out of bounds for axis {axis} in shape {}", shape_str(&op.shape)))
}

/// Records the check pass over `indices` (row-major position `e` indexes `bounds[e % depth]`).
fn record_check(ctx: &Context, batch: &mut Batch<'_>, indices: &Tensor, bounds: &[usize], flag_addr: u64) -> Result<()> {
    let n = indices.numel();
    if n == 0 {
        return Ok(());
    }
    let it = indices.dtype;
    let key = format!("ix_check {it}");
    let kernel = ctx.kernels.get(&key, LOCAL, 1, || {
        let mut s = head(2);
        s.push_str(&ld_idx(it));
        let b = buf_type(it);
        write!(
            s,
            r#"void main() {{
    ParamsI32 meta = META;
    {b} ib = {b}(A(0));
    BufU32 flag = BufU32(A(1));
    int rank = meta.v[0];
    int off = meta.v[1];
    uint depth = uint(meta.v[2]);
    uint step = gl_NumWorkGroups.x * 256u;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += step) {{
        uint rest = i;
        int pos = off;
        for (int d = rank - 1; d >= 0; d--) {{
            uint n = uint(meta.v[3 + d]);
            pos += int(rest % n) * meta.v[3 + rank + d];
            rest /= n;
        }}
        int64_t v = ld_idx(ib, pos);
        int64_t bound = int64_t(meta.v[3 + 2 * rank + int(i % depth)]);
        if (v < 0l || v >= bound) atomicMin(flag.v[0], i);
    }}
}}
"#
        )
        .unwrap();
        s
    })?;
    let mut p = ParamBlock::new("indexing");
    p.addrs([indices.buffer.address(), flag_addr]);
    p.i32(indices.shape.len())?.i32(indices.offset)?.i32(bounds.len().max(1))?;
    p.i32s(indices.shape.iter().copied())?.i32s(indices.strides.iter().copied())?.i32s(bounds.iter().copied())?;
    batch.keep(&indices.buffer);
    batch.dispatch(&kernel, p.bytes(), n as u64)
}

/// How an `ix_read` kernel finds source axis `d`: an output coordinate or an index component.
#[derive(Clone, Copy)]
enum Src {
    Out(usize),
    Index(usize),
}

/// How a read (gather, take, take_along_axis) maps its output onto `x` and `indices`.
struct ReadPlan {
    out_shape: Vec<usize>,
    /// Index strides per output axis (0 where an axis does not move through the indices).
    istr_out: Vec<isize>,
    /// The stride of the index-component axis (gather), else 0.
    istr_last: isize,
    src: Vec<Src>,
    bounds: Vec<usize>,
    /// Write NaNs canonical (take_along_axis).
    canon: bool,
    /// The axis of `x` each index component addresses (for the error message).
    axes: Vec<usize>,
}

impl ReadPlan {
    fn check_rank(self, x: &Tensor) -> Result<ReadPlan> {
        if self.out_shape.len() > MAX_RANK || x.shape.len() > MAX_RANK {
            return Err(invalid!("indexing supports ranks up to {MAX_RANK}"));
        }
        Ok(self)
    }
}

fn gather_plan(x: &Tensor, indices: &Tensor, axes: &[usize]) -> Result<ReadPlan> {
    check_indices(indices)?;
    let rank = x.shape.len();
    let Some((&depth, outer)) = indices.shape.split_last() else {
        return Err(invalid!("gather: expected indices rank to be at least 1, got: 0"));
    };
    if axes.len() != depth {
        return Err(invalid!("gather: {} axes given for indices whose last dimension is {depth}", axes.len()));
    }
    if axes.windows(2).any(|w| w[0] >= w[1]) || axes.iter().any(|&a| a >= rank) {
        return Err(invalid!("gather: axes {axes:?} must be increasing axes of a rank {rank} tensor"));
    }
    let rest: Vec<usize> = (0..rank).filter(|d| !axes.contains(d)).collect();
    let mut out_shape = outer.to_vec();
    out_shape.extend(rest.iter().map(|&d| x.shape[d]));
    let mut istr_out: Vec<isize> = indices.strides[..outer.len()].to_vec();
    istr_out.extend(std::iter::repeat(0).take(rest.len()));
    let mut src = vec![Src::Out(0); rank];
    for (q, &a) in axes.iter().enumerate() {
        src[a] = Src::Index(q);
    }
    for (j, &d) in rest.iter().enumerate() {
        src[d] = Src::Out(outer.len() + j);
    }
    let bounds: Vec<usize> = axes.iter().map(|&a| x.shape[a]).collect();
    let istr_last = indices.strides[outer.len()];
    ReadPlan { out_shape, istr_out, istr_last, src, bounds, canon: false, axes: axes.to_vec() }.check_rank(x)
}

fn take_plan(x: &Tensor, indices: &Tensor, axis: usize) -> Result<ReadPlan> {
    check_indices(indices)?;
    let rank = x.shape.len();
    if axis >= rank {
        return Err(invalid!("take: axis {axis} out of range for shape {:?}", x.shape));
    }
    let ir = indices.shape.len();
    let mut out_shape = x.shape[..axis].to_vec();
    out_shape.extend_from_slice(&indices.shape);
    out_shape.extend_from_slice(&x.shape[axis + 1..]);
    let mut istr_out = vec![0isize; axis];
    istr_out.extend_from_slice(&indices.strides);
    istr_out.extend(std::iter::repeat(0).take(rank - axis - 1));
    let src: Vec<Src> = (0..rank)
        .map(|d| match d.cmp(&axis) {
            std::cmp::Ordering::Less => Src::Out(d),
            std::cmp::Ordering::Equal => Src::Index(0),
            std::cmp::Ordering::Greater => Src::Out(d - 1 + ir),
        })
        .collect();
    ReadPlan { out_shape, istr_out, istr_last: 0, src, bounds: vec![x.shape[axis]], canon: false, axes: vec![axis] }.check_rank(x)
}

fn take_along_axis_plan(x: &Tensor, indices: &Tensor, axis: usize) -> Result<ReadPlan> {
    check_indices(indices)?;
    let rank = x.shape.len();
    if axis >= rank {
        return Err(invalid!("take_along_axis: axis {axis} out of range for shape {:?}", x.shape));
    }
    if indices.shape.len() != rank || (0..rank).any(|d| d != axis && indices.shape[d] != x.shape[d]) {
        return Err(invalid!(
            "take_along_axis: indices of shape {:?} do not match {:?} off axis {axis}",
            indices.shape,
            x.shape
        ));
    }
    let src: Vec<Src> = (0..rank).map(|d| if d == axis { Src::Index(0) } else { Src::Out(d) }).collect();
    let (out_shape, istr_out) = (indices.shape.clone(), indices.strides.clone());
    ReadPlan { out_shape, istr_out, istr_last: 0, src, bounds: vec![x.shape[axis]], canon: true, axes: vec![axis] }.check_rank(x)
}

/// The result shape of Nx.gather of `x` at `indices` over `axes`.
pub fn gather_output_shape(x: &Tensor, indices: &Tensor, axes: &[usize]) -> Result<Vec<usize>> {
    Ok(gather_plan(x, indices, axes)?.out_shape)
}

/// The result shape of Nx.take of `x` at `indices` along `axis`.
pub fn take_output_shape(x: &Tensor, indices: &Tensor, axis: usize) -> Result<Vec<usize>> {
    Ok(take_plan(x, indices, axis)?.out_shape)
}

/// An indexed op's sizes after validation: the target seen permuted to `axes ++ rest`.
struct ScatterPlan {
    n: usize,
    k: usize,
    /// slice size S, update row size U, slice count
    s_size: usize,
    u_size: usize,
    slices: usize,
    kstride: Vec<usize>,
    /// strides of the permuted target, per target axis
    pst: Vec<usize>,
}

fn indexed_plan(target: &Tensor, indices: &Tensor, updates: &Tensor, axes: &[usize], out: DType) -> Result<ScatterPlan> {
    check_indices(indices)?;
    let rank = target.shape.len();
    if rank > MAX_RANK {
        return Err(invalid!("indexing supports ranks up to {MAX_RANK}"));
    }
    let &[n, k] = indices.shape.as_slice() else {
        return Err(invalid!("indices must be a rank 2 tensor {{n, k}}, got shape {:?}", indices.shape));
    };
    if axes.len() != k || axes.windows(2).any(|w| w[0] >= w[1]) || axes.iter().any(|&a| a >= rank) {
        return Err(invalid!("axes {axes:?} must be {k} increasing axes of the rank {rank} target"));
    }
    if updates.shape.first() != Some(&n) {
        return Err(invalid!(
            "expected the leading axis of indices ({}) and leading axis of updates ({}) to match",
            shape_str(&indices.shape),
            shape_str(&updates.shape)
        ));
    }
    let rest: Vec<usize> = (0..rank).filter(|d| !axes.contains(d)).collect();
    if updates.shape.len() != 1 + rest.len() {
        return Err(invalid!(
            "expected the rank of the input ({rank}) to be equal to the rank of the updates ({}) plus the trailing axis of indices ({}) minus one",
            updates.shape.len(),
            shape_str(&indices.shape)
        ));
    }
    if updates.shape.len() > 1 {
        for (j, &d) in rest.iter().enumerate() {
            if updates.shape[1 + j] > target.shape[d] {
                return Err(invalid!(
                    "axis ({}) of updates ({}) must be less than or equal to the axis ({d}) of {})",
                    1 + j,
                    shape_str(&updates.shape),
                    shape_str(&target.shape)
                ));
            }
        }
    }
    if [target.dtype, updates.dtype, out].iter().any(|t| !t.is_float() && !t.is_integer()) {
        return Err(invalid!("indexed_add/indexed_put of complex tensors are not supported on the device yet"));
    }
    if out.is_integer() && (target.dtype.is_float() || updates.dtype.is_float()) {
        return Err(invalid!("indexed op of {} and {} cannot give integer type {out}", target.dtype, updates.dtype));
    }
    if updates.numel() > MAX_ELEMENTS {
        return Err(invalid!("updates of {} elements exceed {MAX_ELEMENTS}", updates.numel()));
    }
    // the permuted target: axes ++ rest; slice size S, update row size U
    let s_size: usize = rest.iter().map(|&d| target.shape[d]).product();
    let u_size: usize = updates.shape[1..].iter().product();
    let slices: usize = axes.iter().map(|&a| target.shape[a]).product();
    let mut kstride = vec![0usize; k];
    let mut acc = 1usize;
    for q in (0..k).rev() {
        kstride[q] = acc;
        acc *= target.shape[axes[q]];
    }
    let mut pst = vec![0usize; rank];
    for (q, &a) in axes.iter().enumerate() {
        pst[a] = kstride[q] * s_size;
    }
    let mut acc = 1usize;
    for &d in rest.iter().rev() {
        pst[d] = acc;
        acc *= target.shape[d];
    }
    Ok(ScatterPlan { n, k, s_size, u_size, slices, kstride, pst })
}

impl Context {
    /// An index check with room for `ops` indexing ops, for the `record_*` indexing calls
    /// (see [`IndexCheck`]).
    pub fn index_check(&self, ops: usize) -> Result<IndexCheck<'_>> {
        IndexCheck::new(self, ops)
    }

    /// Nx.gather: `indices[..., k]` indexes the tensor axes `axes` (k of them, increasing);
    /// the result has shape `indices.shape[:-1] ++ the other axes of x` and x's type.
    pub fn gather(&self, x: &Tensor, indices: &Tensor, axes: &[usize]) -> Result<Tensor> {
        self.index_read(x, indices, gather_plan(x, indices, axes)?)
    }

    /// Nx.take: `x` with axis `axis` replaced by the indices' dimensions.
    pub fn take(&self, x: &Tensor, indices: &Tensor, axis: usize) -> Result<Tensor> {
        self.index_read(x, indices, take_plan(x, indices, axis)?)
    }

    /// Nx.take_along_axis: `indices` has x's rank and shape except along `axis`; the result
    /// has the indices' shape. NaNs come out canonical (BinaryBackend re-writes the values).
    pub fn take_along_axis(&self, x: &Tensor, indices: &Tensor, axis: usize) -> Result<Tensor> {
        self.index_read(x, indices, take_along_axis_plan(x, indices, axis)?)
    }

    /// Records `gather` into `out` (a new tensor of [`gather_output_shape`] and `x`'s type),
    /// its index check into `check` (read it once the batch is finished).
    pub fn record_gather<'b>(&self, batch: &mut Batch<'b>, check: &'b IndexCheck<'_>, x: &Tensor, indices: &Tensor, axes: &[usize], out: &Tensor) -> Result<()> {
        self.record_index_read(batch, check, x, indices, &gather_plan(x, indices, axes)?, out)
    }

    /// Records `take` into `out` (a new tensor of [`take_output_shape`] and `x`'s type), its
    /// index check into `check`.
    pub fn record_take<'b>(&self, batch: &mut Batch<'b>, check: &'b IndexCheck<'_>, x: &Tensor, indices: &Tensor, axis: usize, out: &Tensor) -> Result<()> {
        self.record_index_read(batch, check, x, indices, &take_plan(x, indices, axis)?, out)
    }

    /// Records `take_along_axis` into `out` (a new tensor of the indices' shape and `x`'s
    /// type), its index check into `check`.
    pub fn record_take_along_axis<'b>(&self, batch: &mut Batch<'b>, check: &'b IndexCheck<'_>, x: &Tensor, indices: &Tensor, axis: usize, out: &Tensor) -> Result<()> {
        self.record_index_read(batch, check, x, indices, &take_along_axis_plan(x, indices, axis)?, out)
    }

    fn index_read(&self, x: &Tensor, indices: &Tensor, plan: ReadPlan) -> Result<Tensor> {
        let out = self.empty(x.dtype, &plan.out_shape)?;
        if indices.numel() == 0 && out.numel() == 0 {
            return Ok(out);
        }
        let check = IndexCheck::new(self, 1)?;
        let mut batch = self.batch()?;
        if let Err(e) = self.record_index_read(&mut batch, &check, x, indices, &plan, &out) {
            drop(batch);
            check.discard_uncommitted();
            return Err(e);
        }
        // A synchronisation point: Nx raises on an out-of-range index, so the check is read now.
        let waited = batch.finish_and_wait();
        check.read_after(waited)?;
        Ok(out)
    }

    fn record_index_read(&self, batch: &mut Batch<'_>, check: &IndexCheck<'_>, x: &Tensor, indices: &Tensor, plan: &ReadPlan, out: &Tensor) -> Result<()> {
        check_dense_output(out, x.dtype, &plan.out_shape, "indexing")?;
        let n_out = out.numel();
        if indices.numel() == 0 && n_out == 0 {
            return Ok(());
        }
        let flag_addr = check.claim(indices, &x.shape, plan.axes.clone())?;
        record_check(self, batch, indices, &plan.bounds, flag_addr)?;
        if n_out > 0 {
            let (t, it) = (x.dtype, indices.dtype);
            let (_, st, nw) = words(t);
            let canon = plan.canon && !t.is_integer();
            let key = format!("ix_read {st}x{nw} {it} canon:{}", if canon { t.name() } else { "-" });
            let kernel = self.kernels.get(&key, LOCAL, 1, || read_source(t, it, canon))?;
            let mut p = ParamBlock::new("indexing");
            p.addrs([x.buffer.address(), indices.buffer.address(), out.buffer.address()]);
            p.i32s([plan.out_shape.len(), x.shape.len(), x.offset, indices.offset])?.i32(plan.istr_last)?;
            p.i32s(plan.out_shape.iter().copied())?.i32s(plan.istr_out.iter().copied())?;
            p.i32s(x.shape.iter().copied())?.i32s(x.strides.iter().copied())?;
            p.i32s(plan.src.iter().map(|s| match *s {
                Src::Out(k) => k as i64,
                Src::Index(q) => -1 - q as i64,
            }))?;
            batch.keep(&x.buffer);
            batch.keep(&indices.buffer);
            batch.keep(&out.buffer);
            batch.dispatch(&kernel, p.bytes(), n_out as u64)?;
        }
        Ok(())
    }

    /// Nx.indexed_add: `updates` rows added at `indices` (`{n, k}` over the increasing `axes`);
    /// the result has `target`'s shape and type `out`.
    pub fn indexed_add(&self, target: &Tensor, indices: &Tensor, updates: &Tensor, axes: &[usize], out: DType) -> Result<Tensor> {
        self.indexed(IndexedOp::Add, target, indices, updates, axes, out, None)
    }

    /// Nx.indexed_put: as indexed_add, the last row naming a position wins.
    pub fn indexed_put(&self, target: &Tensor, indices: &Tensor, updates: &Tensor, axes: &[usize], out: DType) -> Result<Tensor> {
        self.indexed(IndexedOp::Put, target, indices, updates, axes, out, None)
    }

    /// indexed_add / indexed_put with an explicit strategy (`None`: [`choose_scatter`]).
    #[allow(clippy::too_many_arguments)]
    pub fn indexed(
        &self,
        op: IndexedOp,
        target: &Tensor,
        indices: &Tensor,
        updates: &Tensor,
        axes: &[usize],
        out: DType,
        strategy: Option<ScatterStrategy>,
    ) -> Result<Tensor> {
        indexed_plan(target, indices, updates, axes, out)?;
        let result = self.empty(out, &target.shape)?;
        let check = IndexCheck::new(self, 1)?;
        let mut batch = self.batch()?;
        if let Err(e) = self.record_indexed(&mut batch, &check, op, target, indices, updates, axes, strategy, &result) {
            drop(batch);
            check.discard_uncommitted();
            return Err(e);
        }
        let waited = batch.finish_and_wait(); // the index check is read now (as in `gather`)
        check.read_after(waited)?;
        Ok(result)
    }

    /// Records indexed_add / indexed_put into `out` (a new tensor of `target`'s shape whose
    /// type is the result type), its index check into `check` (read it once the batch is
    /// finished). `strategy` as in [`Context::indexed`].
    #[allow(clippy::too_many_arguments)]
    pub fn record_indexed<'b>(
        &self,
        batch: &mut Batch<'b>,
        check: &'b IndexCheck<'_>,
        op: IndexedOp,
        target: &Tensor,
        indices: &Tensor,
        updates: &Tensor,
        axes: &[usize],
        strategy: Option<ScatterStrategy>,
        out: &Tensor,
    ) -> Result<()> {
        let ScatterPlan { n, k, s_size, u_size, slices, kstride, pst } = indexed_plan(target, indices, updates, axes, out.dtype)?;
        check_dense_output(out, out.dtype, &target.shape, "indexed")?;
        let rank = target.shape.len();
        let strategy = strategy.unwrap_or_else(|| choose_scatter(n));
        let n_out = out.numel();
        let flag_addr = check.claim(indices, &target.shape, axes.to_vec())?;
        for t in [target, indices, updates, out] {
            batch.keep(&t.buffer);
        }
        // keys pass: slice number of each row, or -1 (and the flag) for a bad row
        let keys = self.pool.alloc((n.max(1) * 4) as u64)?;
        batch.keep(&keys);
        if n > 0 {
            let it = indices.dtype;
            let kernel = self.kernels.get(&format!("ix_keys {it}"), LOCAL, 1, || keys_source(it))?;
            let mut p = ParamBlock::new("indexing");
            p.addrs([indices.buffer.address(), keys.address(), flag_addr]);
            p.i32s([k, indices.offset])?.i32s([indices.strides[0], indices.strides[1]])?;
            p.i32s(axes.iter().map(|&a| target.shape[a]))?.i32s(kstride.iter().copied())?;
            batch.dispatch(&kernel, p.bytes(), n as u64)?;
        }
        if n_out > 0 {
            let mode = if n == 0 || s_size == 0 || u_size == 0 {
                Mode::Copy
            } else {
                match (strategy, op) {
                    (ScatterStrategy::Scan, _) => Mode::Scan,
                    (ScatterStrategy::Segmented, IndexedOp::Put) => Mode::Winner,
                    (ScatterStrategy::Segmented, IndexedOp::Add) => Mode::Buckets,
                }
            };
            // the segment tables: per-slice counts/winners, starts, and the sorted rows
            let counts = self.pool.alloc((slices.max(1) * 4) as u64)?;
            let starts = self.pool.alloc(((slices + 1) * 4) as u64)?;
            let rows = self.pool.alloc((n.max(1) * 4) as u64)?;
            for b in [&counts, &starts, &rows] {
                batch.keep(b);
            }
            let aux = |name: &str, body: &str| {
                self.kernels.get(&format!("ix_aux {name}"), LOCAL, 1, || aux_source(body))
            };
            let words = |a: u64, b: u64, c: u64, d: u64, ints: &[i64]| -> Result<Vec<u8>> {
                let mut p = ParamBlock::new("indexing");
                p.addrs([a, b, c, d]).i32s(ints.iter().copied())?;
                Ok(p.bytes().to_vec())
            };
            let (ka, ca, sa, ra) = (keys.address(), counts.address(), starts.address(), rows.address());
            match mode {
                Mode::Winner => {
                    let zero = aux("zero", ZERO)?;
                    batch.dispatch(&zero, &words(ka, ca, sa, ra, &[])?, slices as u64)?;
                    let win = aux("winner", WINNER)?;
                    batch.dispatch(&win, &words(ka, ca, sa, ra, &[])?, n as u64)?;
                }
                Mode::Buckets => {
                    let zero = aux("zero", ZERO)?;
                    batch.dispatch(&zero, &words(ka, ca, sa, ra, &[])?, slices as u64)?;
                    let count = aux("count", COUNT)?;
                    batch.dispatch(&count, &words(ka, ca, sa, ra, &[])?, n as u64)?;
                    let scan = self.kernels.get("ix_aux scan", LOCAL, 1, scan_source)?;
                    batch.dispatch_grid(&scan, &words(ka, ca, sa, ra, &[slices as i64])?, 1, [1, 1, 1])?;
                    let fill = aux("fill", FILL)?;
                    batch.dispatch(&fill, &words(ka, ca, sa, ra, &[])?, n as u64)?;
                    let sort = aux("sort", SORT)?;
                    batch.dispatch(&sort, &words(ka, ca, sa, ra, &[])?, slices as u64)?;
                }
                _ => {}
            }
            let spec = ScatterSpec { op, mode, target: target.dtype, updates: updates.dtype, out: out.dtype };
            let kernel = self.kernels.get(&spec.key(), LOCAL, 1, || spec.source())?;
            let mut p = ParamBlock::new("indexing");
            p.addrs([target.buffer.address(), updates.buffer.address(), ka, out.buffer.address(), ca, sa, ra]);
            let ur = updates.shape.len() - 1;
            p.i32s([rank, n, s_size, u_size, ur, target.offset, updates.offset])?.i32(updates.strides[0])?;
            p.i32s(target.shape.iter().copied())?.i32s(target.strides.iter().copied())?.i32s(pst.iter().copied())?;
            p.i32s(updates.shape[1..].iter().copied())?.i32s(updates.strides[1..].iter().copied())?;
            batch.dispatch(&kernel, p.bytes(), n_out as u64)?;
        }
        Ok(())
    }
}

fn read_source(t: DType, it: DType, canon: bool) -> String {
    let mut s = head(3);
    s.push_str(&ld_idx(it));
    let (b, st, nw) = words(t);
    let ib = buf_type(it);
    let value = if canon { canon_raw(t, "r") } else { "r".to_string() };
    write!(
        s,
        r#"void main() {{
    ParamsI32 meta = META;
    {b} xb = {b}(A(0));
    {ib} ib = {ib}(A(1));
    {b} ob = {b}(A(2));
    int R = meta.v[0];
    int D = meta.v[1];
    int xoff = meta.v[2];
    int ioff = meta.v[3];
    int ilast = meta.v[4];
    int xb0 = 5 + 2 * R;
    int c[{MAX_RANK}];
    uint step = gl_NumWorkGroups.x * 256u;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += step) {{
        uint rest = i;
        int ipos = ioff;
        for (int d = R - 1; d >= 0; d--) {{
            uint n = uint(meta.v[5 + d]);
            int cd = int(rest % n);
            rest /= n;
            c[d] = cd;
            ipos += cd * meta.v[5 + R + d];
        }}
        int xpos = xoff;
        bool ok = true;
        for (int d = 0; d < D; d++) {{
            int k = meta.v[xb0 + 2 * D + d];
            int sd;
            if (k >= 0) {{
                sd = c[k];
            }} else {{
                int64_t v = ld_idx(ib, ipos + (-1 - k) * ilast);
                if (v < 0l || v >= int64_t(meta.v[xb0 + d])) {{ ok = false; sd = 0; }} else {{ sd = int(v); }}
            }}
            xpos += sd * meta.v[xb0 + D + d];
        }}
        for (int w = 0; w < {nw}; w++) {{
            {st} r = ok ? xb.v[xpos * {nw} + w] : {st}(0);
            ob.v[int(i) * {nw} + w] = {value};
        }}
    }}
}}
"#
    )
    .unwrap();
    s
}

fn keys_source(it: DType) -> String {
    let mut s = head(3);
    s.push_str(&ld_idx(it));
    let ib = buf_type(it);
    write!(
        s,
        r#"void main() {{
    ParamsI32 meta = META;
    {ib} ib = {ib}(A(0));
    BufU32 keys = BufU32(A(1));
    BufU32 flag = BufU32(A(2));
    int k = meta.v[0];
    int ioff = meta.v[1];
    int is0 = meta.v[2];
    int is1 = meta.v[3];
    uint step = gl_NumWorkGroups.x * 256u;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += step) {{
        int key = 0;
        bool ok = true;
        for (int q = 0; q < k; q++) {{
            int64_t v = ld_idx(ib, ioff + int(i) * is0 + q * is1);
            if (v < 0l || v >= int64_t(meta.v[4 + q])) {{
                ok = false;
                atomicMin(flag.v[0], i * uint(k) + uint(q));
            }} else {{
                key += int(v) * meta.v[4 + k + q];
            }}
        }}
        keys.v[i] = ok ? uint(key) : 0xFFFFFFFFu;
    }}
}}
"#
    )
    .unwrap();
    s
}

// Auxiliary passes of the segmented strategy. Addresses: keys, counts, starts, rows.
const ZERO: &str = "counts.v[i] = 0u;";
/// counts[s] = 1 + the last row naming slice s (0: none); atomicMax is order-independent.
const WINNER: &str = "uint key = keys.v[i]; if (key != 0xFFFFFFFFu) atomicMax(counts.v[key], i + 1u);";
const COUNT: &str = "uint key = keys.v[i]; if (key != 0xFFFFFFFFu) atomicAdd(counts.v[key], 1u);";
/// the set of rows in each bucket is fixed; their order is restored by SORT
const FILL: &str = "uint key = keys.v[i]; if (key != 0xFFFFFFFFu) { uint slot = starts.v[key] + atomicAdd(counts.v[key], 1u); rows.v[slot] = i; }";
const SORT: &str = r#"uint lo = starts.v[i];
        uint hi = starts.v[i + 1u];
        for (uint a = lo + 1u; a < hi; a++) {
            uint v = rows.v[a];
            uint b = a;
            while (b > lo && rows.v[b - 1u] > v) { rows.v[b] = rows.v[b - 1u]; b--; }
            rows.v[b] = v;
        }"#;

fn aux_source(body: &str) -> String {
    let mut s = head(4);
    write!(
        s,
        r#"void main() {{
    BufU32 keys = BufU32(A(0));
    BufU32 counts = BufU32(A(1));
    BufU32 starts = BufU32(A(2));
    BufU32 rows = BufU32(A(3));
    uint step = gl_NumWorkGroups.x * 256u;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += step) {{
        {body}
    }}
}}
"#
    )
    .unwrap();
    s
}

/// One workgroup: exclusive prefix sum of counts[0..m] into starts[0..m], and counts zeroed
/// (they become the fill cursors).
fn scan_source() -> String {
    let mut s = head(4);
    s.push_str(
        r#"shared uint part[256];
void main() {
    ParamsI32 meta = META;
    BufU32 counts = BufU32(A(1));
    BufU32 starts = BufU32(A(2));
    uint m = uint(meta.v[0]);
    uint t = gl_LocalInvocationID.x;
    uint chunk = (m + 255u) / 256u;
    uint lo = min(m, t * chunk);
    uint hi = min(m, lo + chunk);
    uint sum = 0u;
    for (uint j = lo; j < hi; j++) sum += counts.v[j];
    part[t] = sum;
    barrier();
    if (t == 0u) {
        uint run = 0u;
        for (uint j = 0u; j < 256u; j++) { uint v = part[j]; part[j] = run; run += v; }
        starts.v[m] = run;
    }
    barrier();
    uint run = part[t];
    for (uint j = lo; j < hi; j++) { uint v = counts.v[j]; starts.v[j] = run; run += v; counts.v[j] = 0u; }
}
"#,
    );
    s
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Mode {
    /// no row touches anything: copy/convert the target
    Copy,
    Scan,
    Winner,
    Buckets,
}

struct ScatterSpec {
    op: IndexedOp,
    mode: Mode,
    target: DType,
    updates: DType,
    out: DType,
}

impl ScatterSpec {
    fn key(&self) -> String {
        format!("ix_scatter {:?} {:?} {}+{}->{}", self.op, self.mode, self.target, self.updates, self.out)
    }

    fn source(&self) -> String {
        let (tt, ut, ot) = (self.target, self.updates, self.out);
        let mut s = head(7);
        let (tb, ub, ob) = (buf_type(tt), buf_type(ut), buf_type(ot));
        let ost = storage_type(ot);
        // stored target bits -> stored output bits for untouched elements
        let copy = if tt == ot {
            "traw".to_string()
        } else {
            encode(ot, &wrap(ot, &to_domain(tt, ot, &decode(tt, "traw"))))
        };
        let upd = |r: &str| decode(ut, &format!("ub.v[upos + int({r}) * us0]"));
        let oc = ot.glsl_compute();
        let body = match (self.op, self.mode) {
            (_, Mode::Copy) => String::new(),
            (IndexedOp::Put, m) => {
                let find = match m {
                    Mode::Scan => "int w = -1;\n            for (int r = n - 1; r >= 0; r--) { if (keys.v[r] == uint(s)) { w = r; break; } }".to_string(),
                    _ => "int w = int(counts.v[s]) - 1;".to_string(),
                };
                let val = encode(ot, &wrap(ot, &to_domain(ut, ot, &upd("w"))));
                format!("{find}\n            if (w >= 0) res = {val};")
            }
            (IndexedOp::Add, m) => {
                let uc = ut.glsl_compute();
                let zero = match ut.kind() {
                    Kind::Float => "0.0LF",
                    Kind::Signed => "0l",
                    _ => "0ul",
                };
                let prec = if ut.is_float() { "precise " } else { "" };
                let lp = match m {
                    Mode::Scan => format!(
                        "for (int r = 0; r < n; r++) {{ if (keys.v[r] == uint(s)) {{ {prec}{uc} t_ = acc + {}; acc = t_; hit = true; }} }}",
                        upd("r")
                    ),
                    _ => format!(
                        "uint lo_ = starts.v[s]; uint hi_ = starts.v[s + 1];\n            for (uint j = lo_; j < hi_; j++) {{ uint r = rows.v[j]; {prec}{uc} t_ = acc + {}; acc = t_; hit = true; }}",
                        upd("r")
                    ),
                };
                let l = to_domain(tt, ot, &decode(tt, "traw"));
                let a = to_domain(ut, ot, "acc");
                let oprec = if ot.is_float() { "precise " } else { "" };
                format!(
                    "{uc} acc = {zero};\n            bool hit = false;\n            {lp}\n            if (hit) {{ {oprec}{oc} v_ = ({l}) + ({a}); res = {}; }}",
                    encode(ot, &wrap(ot, "v_"))
                )
            }
        };
        write!(
            s,
            r#"void main() {{
    ParamsI32 meta = META;
    {tb} tb = {tb}(A(0));
    {ub} ub = {ub}(A(1));
    BufU32 keys = BufU32(A(2));
    {ob} ob = {ob}(A(3));
    BufU32 counts = BufU32(A(4));
    BufU32 starts = BufU32(A(5));
    BufU32 rows = BufU32(A(6));
    int D = meta.v[0];
    int n = meta.v[1];
    int S = meta.v[2];
    int U = meta.v[3];
    int ur = meta.v[4];
    int toff = meta.v[5];
    int uoff = meta.v[6];
    int us0 = meta.v[7];
    int ub0 = 8 + 3 * D;
    uint step = gl_NumWorkGroups.x * 256u;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += step) {{
        uint rest = i;
        int tpos = toff;
        int p = 0;
        for (int d = D - 1; d >= 0; d--) {{
            uint nd = uint(meta.v[8 + d]);
            int cd = int(rest % nd);
            rest /= nd;
            tpos += cd * meta.v[8 + D + d];
            p += cd * meta.v[8 + 2 * D + d];
        }}
        {tst} traw = tb.v[tpos];
        {ost} res = {copy};
        int s = p / max(S, 1);
        int e = p - s * S;
        if (S > 0 && e < U) {{
            int r2 = e;
            int upos = uoff;
            for (int d = ur - 1; d >= 0; d--) {{
                int nd = meta.v[ub0 + d];
                upos += (r2 % nd) * meta.v[ub0 + ur + d];
                r2 /= nd;
            }}
            {body}
        }}
        ob.v[i] = res;
    }}
}}
"#,
            tst = storage_type(tt),
        )
        .unwrap();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_depend_on_the_row_count_only() {
        assert_eq!(choose_scatter(0), ScatterStrategy::Scan);
        assert_eq!(choose_scatter(32), ScatterStrategy::Scan);
        assert_eq!(choose_scatter(33), ScatterStrategy::Segmented);
    }

    #[test]
    fn shapes_print_as_elixir_tuples() {
        assert_eq!(shape_str(&[2, 3]), "{2, 3}");
        assert_eq!(shape_str(&[]), "{}");
    }
}
