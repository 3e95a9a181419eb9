//! Sorting along an axis: `sort`, `argsort` and `top_k`, natively on the device.
//!
//! **Algorithm.** Each element becomes a 64-bit key whose unsigned order is
//! Nx.BinaryBackend's comparator order, paired with its position in the row; the pairs are
//! sorted lexicographically by a bitonic sort (rows padded to a power of two `P`):
//! - `init`: keys and positions into scratch memory (`rows * P` pairs, read through the
//!   input view's strides, so any axis of any view works without a copy);
//! - `local` presort: each 1024-pair block is sorted in shared memory (all stages `k <= 1024`);
//! - for longer rows, each further stage `k` runs its steps `j >= 1024` as global
//!   compare-exchange passes, up to three steps per pass (each invocation holds the eight
//!   pairs three consecutive steps exchange among themselves, in registers), and its steps
//!   `j < 1024` as one shared-memory pass;
//! - `out`: the first `k` pairs of each row give the values (stored bits moved as they are)
//!   and/or the indices (written in the requested integer type, wrapping like BinaryBackend's
//!   number_to_binary).
//!
//! `record_sort`, `record_argsort` and `record_top_k` record all of this into a caller's
//! batch (scratch keys and positions kept alive by it) and write caller-provided outputs: new
//! contiguous tensors of the result's shape.
//!
//! **Semantics** (Nx 0.7.2's BinaryBackend, checked against it): ascending order is
//! `-Inf < finite < +Inf < NaN`, descending is its reverse (NaN first); `-0.0` and `+0.0` are
//! equal; equal keys keep their original order in both directions (Enum.sort with a `<=`/`>=`
//! comparator is stable). Since (key, position) pairs are all distinct, every sort is stable
//! whatever `stable` asks for. `sort` moves stored bits, so NaN payloads and the sign of zero
//! survive. `top_k` is Nx's fallback: the first `k` of a descending stable argsort along the
//! last axis, with the values taken from those positions.

use crate::dtype::{DType, Kind};
use crate::elementwise::{buf_type, decode, encode, storage_type};
use crate::error::{invalid, Result};
use crate::ops::check_dense_output;
use crate::params::ParamBlock;
use crate::submit::Batch;
use crate::tensor::{contiguous_strides, Tensor, MAX_ELEMENTS};
use crate::Context;
use std::fmt::Write;

/// Sort direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    Asc,
    Desc,
}

impl Direction {
    pub fn parse(s: &str) -> Result<Direction> {
        match s {
            "asc" => Ok(Direction::Asc),
            "desc" => Ok(Direction::Desc),
            other => Err(invalid!("unknown sort direction {other:?} (expected asc or desc)")),
        }
    }
}

/// Invocations per workgroup.
const LOCAL: u32 = 256;
/// Pairs one workgroup sorts in shared memory (12 KiB: within Vulkan's guaranteed 16 KiB).
pub const BLOCK: usize = 1024;
/// Global compare-exchange steps one pass takes (each invocation holds 2^this pairs): every
/// pass reads and writes all the keys, so a 1 M-element sort's 55 global passes become 22.
pub const GLOBAL_STEPS: u32 = 3;

/// Checks a sort of `x` along `axis` keeping `k` of each row (`None`: all) and returns the
/// result's shape (a scalar sorts to itself, whatever `axis`).
fn sorted_shape(x: &Tensor, axis: usize, k: Option<usize>) -> Result<Vec<usize>> {
    if !(x.dtype.is_float() || x.dtype.is_integer()) {
        return Err(invalid!("sorting is not defined for {} (complex) tensors", x.dtype));
    }
    if x.shape.is_empty() {
        return Ok(vec![]);
    }
    if axis >= x.shape.len() {
        return Err(invalid!("sort axis {axis} out of range for shape {:?}", x.shape));
    }
    let mut shape = x.shape.clone();
    shape[axis] = k.unwrap_or(shape[axis]);
    Ok(shape)
}

/// Checks top_k's arguments; returns the last axis.
fn top_k_axis(x: &Tensor, k: usize, index_type: DType) -> Result<usize> {
    if !index_type.is_integer() {
        return Err(invalid!("top_k indices must have an integer type, got {index_type}"));
    }
    let rank = x.shape.len();
    if rank == 0 {
        return Err(invalid!("top_k input must have at least rank 1"));
    }
    let len = x.shape[rank - 1];
    if k == 0 || k > len {
        return Err(invalid!("top_k needs 1 <= k <= {len} (the last axis' size), got k={k}"));
    }
    Ok(rank - 1)
}

impl Context {
    /// Sorts `x` along `axis` (stable; NaN last for `Asc`, first for `Desc`).
    pub fn sort(&self, x: &Tensor, axis: usize, direction: Direction) -> Result<Tensor> {
        let out = self.empty(x.dtype, &sorted_shape(x, axis, None)?)?;
        self.recorded(out, |batch, out| self.record_sort(batch, x, axis, direction, out))
    }

    /// Records `sort` into `out`: a new (contiguous, offset 0) tensor of `x`'s type and shape.
    pub fn record_sort(&self, batch: &mut Batch<'_>, x: &Tensor, axis: usize, direction: Direction, out: &Tensor) -> Result<()> {
        self.record_sort_impl(batch, x, axis, direction, None, Some(out), None)
    }

    /// The positions that sort `x` along `axis`, as integers of type `out`. Always stable:
    /// `stable` is accepted for Nx's signature and changes nothing.
    pub fn argsort(&self, x: &Tensor, axis: usize, direction: Direction, stable: bool, out: DType) -> Result<Tensor> {
        let _ = stable;
        if !out.is_integer() {
            return Err(invalid!("argsort returns indices: output type must be an integer type, got {out}"));
        }
        let result = self.empty(out, &sorted_shape(x, axis, None)?)?;
        self.recorded(result, |batch, out| self.record_argsort(batch, x, axis, direction, out))
    }

    /// Records `argsort` into `out`: a new (contiguous, offset 0) tensor of `x`'s shape whose
    /// integer type is the indices' type (always stable).
    pub fn record_argsort(&self, batch: &mut Batch<'_>, x: &Tensor, axis: usize, direction: Direction, out: &Tensor) -> Result<()> {
        if !out.dtype.is_integer() {
            return Err(invalid!("argsort returns indices: output type must be an integer type, got {}", out.dtype));
        }
        self.record_sort_impl(batch, x, axis, direction, None, None, Some(out))
    }

    /// Nx.top_k: the `k` largest values along the last axis (NaN above everything, ties in
    /// their original order) and their positions as integers of type `index_type`.
    pub fn top_k(&self, x: &Tensor, k: usize, index_type: DType) -> Result<(Tensor, Tensor)> {
        let axis = top_k_axis(x, k, index_type)?;
        let shape = sorted_shape(x, axis, Some(k))?;
        let outs = (self.empty(x.dtype, &shape)?, self.empty(index_type, &shape)?);
        self.recorded(outs, |batch, (values, indices)| self.record_top_k(batch, x, k, values, indices))
    }

    /// Records `top_k` into `values` (`x`'s type) and `indices` (an integer type): new
    /// (contiguous, offset 0) tensors of `x`'s shape with the last axis `k` long.
    pub fn record_top_k(&self, batch: &mut Batch<'_>, x: &Tensor, k: usize, values: &Tensor, indices: &Tensor) -> Result<()> {
        let axis = top_k_axis(x, k, indices.dtype)?;
        self.record_sort_impl(batch, x, axis, Direction::Desc, Some(k), Some(values), Some(indices))
    }

    #[allow(clippy::too_many_arguments)]
    fn record_sort_impl(
        &self,
        batch: &mut Batch<'_>,
        x: &Tensor,
        axis: usize,
        direction: Direction,
        k: Option<usize>,
        values: Option<&Tensor>,
        indices: Option<&Tensor>,
    ) -> Result<()> {
        let final_shape = sorted_shape(x, axis, k)?;
        if let Some(v) = values {
            check_dense_output(v, x.dtype, &final_shape, "sort")?;
        }
        if let Some(i) = indices {
            check_dense_output(i, i.dtype, &final_shape, "sort")?;
        }
        // A scalar sorts to itself (argsort gives 0).
        let (x, axis) = if x.shape.is_empty() { (Tensor { shape: vec![1], strides: vec![0], ..x.clone() }, 0) } else { (x.clone(), axis) };
        let len = x.shape[axis];
        let kout = k.unwrap_or(len);
        let mut out_shape = x.shape.clone();
        out_shape[axis] = kout;
        let rows: usize = x.shape.iter().enumerate().filter(|&(d, _)| d != axis).map(|(_, &n)| n).product();
        if rows == 0 || kout == 0 {
            return Ok(());
        }
        if x.numel() > MAX_ELEMENTS {
            return Err(invalid!("sort input of {} elements exceeds {MAX_ELEMENTS}", x.numel()));
        }
        let p2 = len.next_power_of_two();
        let total = if p2 >= BLOCK { rows * p2 } else { (rows * p2).next_multiple_of(BLOCK) };
        if total > (1usize << 31) {
            return Err(invalid!("sort of {rows} rows of {len} needs {total} padded slots; at most 2^31 are supported"));
        }
        if len > u32::MAX as usize - 1 {
            return Err(invalid!("sort axis of {len} elements is too long"));
        }
        // Non-sorted axes, outer to inner: (size, input stride, output stride).
        let out_strides = contiguous_strides(&out_shape);
        let dims: Vec<(usize, isize, isize)> = (0..x.shape.len())
            .filter(|&d| d != axis && x.shape[d] != 1)
            .map(|d| (x.shape[d], x.strides[d], out_strides[d]))
            .collect();
        let keys = self.pool.alloc((total * 8) as u64)?;
        let idx = self.pool.alloc((total * 4) as u64)?;
        batch.keep(&x.buffer);
        batch.keep(&keys);
        batch.keep(&idx);
        // Addresses (input, keys, positions, values, indices), then the sizes; the stage
        // fields (k, j, presort) change between dispatches.
        let mut p = ParamBlock::new("sort");
        p.addrs([x.buffer.address(), keys.address(), idx.address()]);
        p.addrs([values, indices].map(|t| t.map_or(0, |t| t.buffer.address())));
        p.i32s([len, p2, rows, kout, x.offset])?.i32s([x.strides[axis], out_strides[axis]])?.i32(total)?;
        let stage = p.len();
        p.i32s([0, 0, 0])?;
        for &(n, si, so) in &dims {
            p.i32(n)?.i32s([si, so])?;
        }
        let set_stage = |p: &mut ParamBlock, k: usize, j: usize, presort: bool| -> Result<()> {
            p.set_i32(stage, k)?;
            p.set_i32(stage + 4, j)?;
            p.set_i32(stage + 8, presort as i32)
        };
        for t in values.iter().chain(indices.iter()) {
            batch.keep(&t.buffer);
        }
        let max_groups = self.caps.max_workgroup_count[0].min(65535);
        // init
        let spec = Spec::Init { t: x.dtype, dir: direction, rank: dims.len() };
        let kernel = self.kernels.get(&spec.key(), LOCAL, 1, || spec.source())?;
        batch.dispatch(&kernel, p.bytes(), total as u64)?;
        // presort blocks
        let local = self.kernels.get(&Spec::Local.key(), LOCAL, 1, || Spec::Local.source())?;
        let nblocks = (total / BLOCK) as u32;
        set_stage(&mut p, 0, 0, true)?;
        batch.dispatch_grid(&local, p.bytes(), nblocks, [nblocks.min(max_groups), 1, 1])?;
        // merge stages beyond one block
        let mut kk = 2 * BLOCK;
        while kk <= p2 {
            let mut j = kk / 2;
            while j >= BLOCK {
                // steps j, j/2, ... down to BLOCK at most GLOBAL_STEPS at a time
                let steps = ((j / BLOCK).trailing_zeros() + 1).min(GLOBAL_STEPS);
                let spec = Spec::Global { steps };
                let global = self.kernels.get(&spec.key(), LOCAL, 1, || spec.source())?;
                set_stage(&mut p, kk, j, false)?;
                batch.dispatch(&global, p.bytes(), (total >> steps) as u64)?;
                j >>= steps;
            }
            set_stage(&mut p, kk, 0, false)?;
            batch.dispatch_grid(&local, p.bytes(), nblocks, [nblocks.min(max_groups), 1, 1])?;
            kk *= 2;
        }
        // outputs
        let spec = Spec::Out { t: x.dtype, rank: dims.len(), values: values.is_some(), indices: indices.map(|t| t.dtype) };
        let kernel = self.kernels.get(&spec.key(), LOCAL, 1, || spec.source())?;
        batch.dispatch(&kernel, p.bytes(), (rows * kout) as u64)
    }
}

/// A sort kernel and everything its source depends on.
enum Spec {
    Init { t: DType, dir: Direction, rank: usize },
    Local,
    /// `steps` consecutive global steps (1 to [`GLOBAL_STEPS`]) in one pass.
    Global { steps: u32 },
    Out { t: DType, rank: usize, values: bool, indices: Option<DType> },
}

impl Spec {
    fn key(&self) -> String {
        match self {
            Spec::Init { t, dir, rank } => format!("sort init {t} {dir:?} r{rank}"),
            Spec::Local => "sort local".into(),
            Spec::Global { steps } => format!("sort global x{steps}"),
            Spec::Out { t, rank, values, indices } => format!("sort out {t} r{rank} values:{values} indices:{indices:?}"),
        }
    }

    fn source(&self) -> String {
        let mut s = String::new();
        s.push_str(&crate::kernels::numeric_prelude());
        writeln!(s, "#define LOCAL {LOCAL}\n#define BLK {BLOCK}").unwrap();
        let elem = |s: &mut String, t: DType, rank: usize| {
            writeln!(s, "#define STORE_T {}", storage_type(t)).unwrap();
            writeln!(s, "#define BUF {}", buf_type(t)).unwrap();
            writeln!(s, "#define DECODE(r) {}", decode(t, "(r)")).unwrap();
            let kind = match t.kind() {
                Kind::Float => 0,
                Kind::Signed => 1,
                _ => 2,
            };
            writeln!(s, "#define KIND {kind}\n#define RANK {rank}").unwrap();
        };
        match self {
            Spec::Init { t, dir, rank } => {
                s.push_str("#define K_INIT\n");
                elem(&mut s, *t, *rank);
                if *dir == Direction::Desc {
                    s.push_str("#define DESC\n");
                }
            }
            Spec::Local => s.push_str("#define K_LOCAL\n"),
            Spec::Global { steps } => write!(s, "#define K_GLOBAL\n#define STEPS {steps}u\n").unwrap(),
            Spec::Out { t, rank, values, indices } => {
                s.push_str("#define K_OUT\n");
                elem(&mut s, *t, *rank);
                if *values {
                    s.push_str("#define VALUES\n");
                }
                if let Some(it) = indices {
                    s.push_str("#define INDICES\n");
                    writeln!(s, "#define IDX_BUF {}", buf_type(*it)).unwrap();
                    writeln!(s, "#define IDX_ENCODE(v) {}", encode(*it, "(v)")).unwrap();
                }
            }
        }
        s.push_str(include_str!("kernels/sort.glsl"));
        s
    }
}
