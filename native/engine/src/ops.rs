//! Tensor operations on a `Context`: transfers, elementwise work and layout ops (views
//! materialised, pad, put_slice, concatenate, full, iota).
//!
//! Every op that dispatches has a `record_*` twin that records into a caller's
//! [`Batch`](crate::submit::Batch) and writes a caller's output tensor (of the result's shape
//! and type; these kernels write any layout, views of larger buffers included), so a whole
//! graph can be one recording; the plain op allocates its output, records into a batch of its
//! own and commits it. An output must not overlap the op's inputs. On an error the caller's
//! batch may hold part of the op: drop it rather than finishing it.

use crate::dtype::DType;
use crate::elementwise::{generate, kernel_key, wide_eligible, Access, BinaryOp, Expr, FloatMath, Scalar, UnaryOp};
use crate::error::{invalid, EngineError, Result};
use crate::params::ParamBlock;
use crate::submit::Batch;
use crate::tensor::Tensor;
use crate::Context;
use std::sync::atomic::Ordering::Relaxed;
use vulkano::VulkanObject;

/// Bytes per chunk of a staged transfer: large transfers go in four chunks (1–16 MiB each) so
/// that host and device copies overlap.
fn transfer_chunk(bytes: usize) -> usize {
    if bytes <= 1 << 20 {
        bytes.max(1)
    } else {
        (bytes / 4).next_multiple_of(4096).clamp(1 << 20, 16 << 20)
    }
}

fn check_size(shape: &[usize]) -> Result<usize> {
    crate::tensor::checked_numel(shape)
}

/// Numpy/Nx broadcast of two shapes (trailing axes aligned).
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() { 1 } else { a[i - (rank - a.len())] };
        let db = if i < rank - b.len() { 1 } else { b[i - (rank - b.len())] };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(invalid!("shapes {a:?} and {b:?} cannot be broadcast together")),
        };
    }
    Ok(out)
}

/// Checks that `out` can receive an op's result: `dtype` and `shape` (any layout).
pub(crate) fn check_output(out: &Tensor, dtype: DType, shape: &[usize], op: &str) -> Result<()> {
    if out.dtype != dtype || out.shape != shape {
        return Err(invalid!("{op}: output must be a {dtype} tensor of shape {shape:?}, got {} {:?}", out.dtype, out.shape));
    }
    Ok(())
}

/// As [`check_output`], for kernels that write their result row-major from the start of the
/// output's buffer: `out` must also be contiguous with offset 0 (a `Context::empty` tensor or
/// a reshape of one).
pub(crate) fn check_dense_output(out: &Tensor, dtype: DType, shape: &[usize], op: &str) -> Result<()> {
    check_output(out, dtype, shape, op)?;
    if !out.is_contiguous() || out.offset != 0 {
        return Err(invalid!("{op}: output must be contiguous from the start of its buffer (a new tensor), got strides {:?} offset {}", out.strides, out.offset));
    }
    Ok(())
}

/// Nx.pad's result shape: `config[d] = (low, high, interior)`; negative low/high crop.
pub fn pad_output_shape(shape: &[usize], config: &[(i64, i64, u64)]) -> Result<Vec<usize>> {
    let rank = shape.len();
    if config.len() != rank {
        return Err(invalid!("pad needs {rank} (low, high, interior) triples, got {}", config.len()));
    }
    let mut out = vec![0usize; rank];
    for d in 0..rank {
        let (lo, hi, interior) = config[d];
        let n = shape[d] as i64;
        let span = if n == 0 { 0 } else { n + (n - 1) * interior as i64 };
        let len = lo + span + hi;
        if len < 0 {
            return Err(invalid!("pad config {config:?} gives a negative size for shape {shape:?}"));
        }
        out[d] = len as usize;
    }
    Ok(out)
}

/// Nx.concatenate's result shape: the parts joined along `axis` (all other axes equal).
pub fn concatenate_output_shape(parts: &[&[usize]], axis: usize) -> Result<Vec<usize>> {
    let first = parts.first().ok_or_else(|| invalid!("concatenate needs at least one tensor"))?;
    let rank = first.len();
    if axis >= rank {
        return Err(invalid!("concatenate axis {axis} out of range for rank {rank}"));
    }
    let mut shape = first.to_vec();
    shape[axis] = 0;
    for p in parts {
        if p.len() != rank || (0..rank).any(|d| d != axis && p[d] != first[d]) {
            return Err(invalid!("concatenate: shapes {first:?} and {p:?} differ off axis {axis}"));
        }
        shape[axis] += p[axis];
    }
    Ok(shape)
}

/// A read-back under way ([`Context::start_download`]). Dropped before it is collected, its
/// staging buffer stays with the stream until the copy has run.
pub struct PendingDownload {
    keeper: crate::stream::StreamKeeper,
    id: u64,
    bytes: usize,
    source: Option<DownloadSource>,
}

enum DownloadSource {
    Nothing,
    /// Host-visible device memory, read in place.
    Mapped { tensor: Tensor, start: usize },
    Staging(crate::memory::StagingBuffer),
}

impl PendingDownload {
    /// The bytes it reads.
    pub fn byte_size(&self) -> usize {
        self.bytes
    }
}

impl Drop for PendingDownload {
    fn drop(&mut self) {
        if let Some(DownloadSource::Staging(staging)) = self.source.take() {
            self.keeper.keep_until(self.id, crate::submit::Keep::Staging(staging));
        }
    }
}

impl Context {
    /// A new contiguous tensor with undefined contents.
    pub fn empty(&self, dtype: DType, shape: &[usize]) -> Result<Tensor> {
        let n = check_size(shape)?;
        let buffer = self.pool.alloc((n * dtype.size()) as u64)?;
        Ok(Tensor::new(buffer, dtype, shape.to_vec()))
    }

    /// Copies host bytes (row-major, little-endian) into a new device tensor. Returns without
    /// waiting: the copy is queued on the stream (or, on host-visible memory, done in place).
    pub fn upload(&self, dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor> {
        let (t, in_place) = self.upload_target(dtype, shape, bytes)?;
        if !in_place {
            // In chunks, each submitted at once: the device copies one while the host fills
            // the next.
            for (k, part) in bytes.chunks(transfer_chunk(bytes.len())).enumerate() {
                let mut batch = self.batch()?;
                self.record_staged_copy(&mut batch, part, &t, (k * transfer_chunk(bytes.len())) as u64)?;
                batch.finish_submitted()?;
            }
        }
        Ok(t)
    }

    /// `upload` recorded into a caller's batch: where the device needs a staged copy, the copy
    /// is a command of `batch` (one submission with the work that reads it) rather than a
    /// submission of its own. For small inputs that lead a recorded pass (the encoder's token
    /// ids): a staged upload's own submission costs a round trip before the pass can start.
    pub fn record_upload(&self, batch: &mut Batch<'_>, dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor> {
        let (t, in_place) = self.upload_target(dtype, shape, bytes)?;
        if !in_place {
            self.record_staged_copy(batch, bytes, &t, 0)?;
        }
        Ok(t)
    }

    /// An upload's new tensor, checked against `bytes` and counted. Where its memory is
    /// mapped (and staging is not forced) the bytes are written in place and the flag is
    /// true; otherwise the caller copies them in (false; also for an empty tensor's nothing).
    fn upload_target(&self, dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<(Tensor, bool)> {
        let n = check_size(shape)?;
        if bytes.len() != n * dtype.size() {
            return Err(invalid!(
                "{} bytes given for a {dtype} tensor of shape {shape:?}, which needs {}",
                bytes.len(),
                n * dtype.size()
            ));
        }
        let buffer = self.pool.alloc_for_host_write((n * dtype.size()) as u64)?;
        let t = Tensor::new(buffer, dtype, shape.to_vec());
        self.stats.uploads.fetch_add(1, Relaxed);
        if n == 0 {
            return Ok((t, true));
        }
        if t.buffer.host_visible() && !self.staged_transfers.load(Relaxed) {
            // A buffer no queued work can touch (`alloc_for_host_write`): write it in place;
            // the submission that first reads it makes host writes visible to the device.
            {
                let mut w = t.buffer.subbuffer().write().map_err(|e| EngineError::vk("mapped write", e))?;
                crate::memory::copy_parallel(&mut w[..bytes.len()], bytes);
            }
            return Ok((t, true));
        }
        Ok((t, false))
    }

    /// Records a copy of `part` through a staging buffer into `t`'s buffer at byte `offset`.
    fn record_staged_copy(&self, batch: &mut Batch<'_>, part: &[u8], t: &Tensor, offset: u64) -> Result<()> {
        let staging = self.staging.take(part.len() as u64, false)?;
        {
            let mut w = staging.subbuffer().write().map_err(|e| EngineError::vk("staging write", e))?;
            crate::memory::copy_parallel(&mut w[..part.len()], part);
        }
        let (src, dst) = (staging.subbuffer(), t.buffer.subbuffer());
        batch.copy_raw(src.buffer().handle(), src.offset(), dst.buffer().handle(), dst.offset() + offset, part.len() as u64);
        batch.keep(&t.buffer);
        batch.keep_staging(staging);
        Ok(())
    }

    /// Reads a tensor back as row-major little-endian bytes (views are materialised first).
    /// A synchronisation point: waits for the work that produces it.
    pub fn download(&self, t: &Tensor) -> Result<Vec<u8>> {
        let t = self.contiguous(t)?;
        let mut out = vec![0u8; t.byte_size()];
        self.download_into(&t, &mut out)?;
        Ok(out)
    }

    /// Starts reading a contiguous tensor of at most 1 MiB (one transfer) back: its copy to a
    /// staging buffer is queued and submitted, nothing is waited for. [`Context::finish_download`]
    /// collects the bytes. With `try_without_waiting` this is how a BEAM scheduler reads a
    /// small result without the hop to a dirty scheduler.
    pub fn start_download(&self, t: &Tensor) -> Result<PendingDownload> {
        if !t.is_contiguous() {
            return Err(invalid!("start_download needs a contiguous tensor (call contiguous first)"));
        }
        let bytes = t.byte_size();
        if bytes > 1 << 20 {
            return Err(invalid!("start_download reads at most 1 MiB; {bytes} bytes go through download_into"));
        }
        let start = t.offset * t.dtype.size();
        let (id, source) = if bytes == 0 {
            (self.stream.last_id(), DownloadSource::Nothing)
        } else if t.buffer.host_visible() && !self.staged_transfers.load(Relaxed) {
            // Mapped memory is read once the device has run everything queued so far.
            let id = self.stream.last_id();
            self.stream.submit_now(id);
            (id, DownloadSource::Mapped { tensor: t.clone(), start })
        } else {
            let (id, staging) = self.submit_staged_read(t, start, bytes)?;
            (id, DownloadSource::Staging(staging))
        };
        self.stats.downloads.fetch_add(1, Relaxed);
        Ok(PendingDownload { keeper: self.stream.keeper(), id, bytes, source: Some(source) })
    }

    /// Queues and submits a copy of `len` bytes of `t`'s buffer, from byte `from` of the
    /// tensor's storage, into a new download staging buffer: (its submission, the buffer).
    fn submit_staged_read(&self, t: &Tensor, from: usize, len: usize) -> Result<(u64, crate::memory::StagingBuffer)> {
        let staging = self.staging.take(len as u64, true)?;
        let mut batch = self.batch()?;
        let (src, dst) = (t.buffer.subbuffer(), staging.subbuffer());
        batch.copy_raw(src.buffer().handle(), src.offset() + from as u64, dst.buffer().handle(), dst.offset(), len as u64);
        batch.keep(&t.buffer);
        Ok((batch.finish_submitted()?, staging))
    }

    /// Copies a started read-back into `out` (exactly its byte size) once the device has run it:
    /// waiting as long as it takes (`within: None`), or spinning at most `within` and returning
    /// `false` (nothing copied; call again) if it has not run by then. A synchronisation point:
    /// errors of queued work up to it surface here.
    pub fn finish_download(&self, p: &mut PendingDownload, out: &mut [u8], within: Option<std::time::Duration>) -> Result<bool> {
        if out.len() != p.bytes {
            return Err(invalid!("{} bytes of room for a read-back of {} bytes", out.len(), p.bytes));
        }
        let done = match within {
            None => {
                self.stream.wait_for(p.id)?;
                true
            }
            Some(budget) => self.stream.wait_within(p.id, budget)?,
        };
        if !done {
            return Ok(false);
        }
        match p.source.take() {
            None => return Err(invalid!("this read-back was already collected")),
            Some(DownloadSource::Nothing) => {}
            Some(DownloadSource::Mapped { tensor, start }) => {
                let r = tensor.buffer.subbuffer().read().map_err(|e| EngineError::vk("mapped read", e))?;
                crate::memory::copy_parallel(out, &r[start..start + p.bytes]);
            }
            Some(DownloadSource::Staging(staging)) => {
                let r = staging.subbuffer().read().map_err(|e| EngineError::vk("staging read", e))?;
                crate::memory::copy_parallel(out, &r[..p.bytes]);
            }
        }
        Ok(true)
    }

    /// Reads a contiguous tensor into `out` (exactly its byte size) — straight into the
    /// caller's memory, e.g. an Erlang binary, with no intermediate buffer.
    pub fn download_into(&self, t: &Tensor, out: &mut [u8]) -> Result<()> {
        if !t.is_contiguous() {
            return Err(invalid!("download_into needs a contiguous tensor (call contiguous first)"));
        }
        let bytes = t.byte_size();
        if out.len() != bytes {
            return Err(invalid!("{} bytes of room for a tensor of {bytes} bytes", out.len()));
        }
        self.stats.downloads.fetch_add(1, Relaxed);
        if bytes == 0 {
            return Ok(());
        }
        let start = t.offset * t.dtype.size();
        if t.buffer.host_visible() && !self.staged_transfers.load(Relaxed) {
            // Mapped memory: read it once the device has run everything queued so far.
            self.synchronize()?;
            let r = t.buffer.subbuffer().read().map_err(|e| EngineError::vk("mapped read", e))?;
            crate::memory::copy_parallel(out, &r[start..start + bytes]);
            return Ok(());
        }
        // In chunks, each its own submission: the host copies one out while the device copies
        // the next.
        let chunk = transfer_chunk(bytes);
        let mut parts = vec![];
        for (k, part) in out.chunks_mut(chunk).enumerate() {
            let (id, staging) = self.submit_staged_read(t, start + k * chunk, part.len())?;
            parts.push((id, staging, part));
        }
        for (id, staging, part) in parts {
            self.stream.wait_for(id)?;
            let r = staging.subbuffer().read().map_err(|e| EngineError::vk("staging read", e))?;
            crate::memory::copy_parallel(part, &r[..part.len()]);
        }
        Ok(())
    }

    /// A contiguous copy of a view (the tensor itself when already contiguous).
    pub fn contiguous(&self, t: &Tensor) -> Result<Tensor> {
        if t.is_contiguous() {
            return Ok(t.clone());
        }
        let out = self.empty(t.dtype, &t.shape)?;
        self.recorded(out, |batch, out| self.record_contiguous(batch, t, out))
    }

    /// Records a copy of the view `x` into `out` (same type and shape), whatever either layout.
    pub fn record_contiguous(&self, batch: &mut Batch<'_>, x: &Tensor, out: &Tensor) -> Result<()> {
        check_output(out, x.dtype, &x.shape, "contiguous")?;
        self.record_map(batch, &[Expr::Input(0)], &[x], &[out])
    }

    /// `t` materialised for a kernel that needs it contiguous: `t` itself when it is, else a new
    /// tensor whose copy is recorded into `batch`.
    pub(crate) fn contiguous_in(&self, batch: &mut Batch<'_>, t: &Tensor) -> Result<Tensor> {
        if t.is_contiguous() {
            return Ok(t.clone());
        }
        let out = self.empty(t.dtype, &t.shape)?;
        self.record_contiguous(batch, t, &out)?;
        Ok(out)
    }

    /// `t` as `dtype`: `t` itself when it already is, else a new tensor whose conversion
    /// (Nx.as_type) is recorded into `batch`.
    pub(crate) fn as_type_in(&self, batch: &mut Batch<'_>, t: &Tensor, dtype: DType) -> Result<Tensor> {
        if t.dtype == dtype {
            return Ok(t.clone());
        }
        let out = self.empty(dtype, &t.shape)?;
        self.record_map(batch, &[Expr::convert(Expr::Input(0), dtype)], &[t], &[&out])?;
        Ok(out)
    }

    /// Evaluates one expression over inputs of the output's shape (broadcast views included).
    pub fn map(&self, expr: &Expr, inputs: &[&Tensor]) -> Result<Tensor> {
        let shape = inputs.first().map(|t| t.shape.clone()).unwrap_or_default();
        Ok(self.map_multi(std::slice::from_ref(expr), inputs, &shape)?.remove(0))
    }

    /// Evaluates several expressions over the same inputs in one kernel (one output each).
    /// Every input must already have `shape` (use `Tensor::broadcast_to` for broadcasting).
    pub fn map_multi(&self, exprs: &[Expr], inputs: &[&Tensor], shape: &[usize]) -> Result<Vec<Tensor>> {
        self.map_multi_with(FloatMath::Exact, exprs, inputs, shape)
    }

    /// [`Context::map_multi`] with float math evaluated as `math` says.
    pub fn map_multi_with(&self, math: FloatMath, exprs: &[Expr], inputs: &[&Tensor], shape: &[usize]) -> Result<Vec<Tensor>> {
        let in_types: Vec<DType> = inputs.iter().map(|t| t.dtype).collect();
        let outs = exprs
            .iter()
            .map(|e| self.empty(e.dtype(&in_types)?, shape))
            .collect::<Result<Vec<_>>>()?;
        self.recorded(outs, |batch, outs| self.record_map_with(batch, math, exprs, inputs, &outs.iter().collect::<Vec<_>>()))
    }

    /// Records an elementwise kernel writing `outputs` (same shape; contiguous, or strided
    /// views of larger buffers for put_slice/pad/concatenate).
    pub fn record_map(&self, batch: &mut Batch<'_>, exprs: &[Expr], inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
        self.record_map_with(batch, FloatMath::Exact, exprs, inputs, outputs)
    }

    /// [`Context::record_map`] with float math evaluated as `math` says.
    pub fn record_map_with(&self, batch: &mut Batch<'_>, math: FloatMath, exprs: &[Expr], inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
        let shape = outputs.first().map(|t| t.shape.clone()).ok_or_else(|| invalid!("no outputs"))?;
        let n = check_size(&shape)?;
        let rank = shape.len();
        for t in inputs {
            if t.shape != shape {
                return Err(invalid!("input of shape {:?} given for output shape {shape:?}", t.shape));
            }
        }
        let in_types: Vec<DType> = inputs.iter().map(|t| t.dtype).collect();
        let out_strides = outputs[0].strides.clone();
        let out_offset = outputs[0].offset;
        for (e, o) in exprs.iter().zip(outputs) {
            if e.dtype(&in_types)? != o.dtype || o.shape != shape || o.strides != out_strides || o.offset != out_offset {
                return Err(invalid!("outputs must share one layout and match their expressions' types"));
            }
        }
        if exprs.len() != outputs.len() {
            return Err(invalid!("{} expressions for {} outputs", exprs.len(), outputs.len()));
        }
        let out_access = if outputs[0].is_contiguous() { Access::Contiguous } else { Access::Strided };
        let accesses: Vec<(DType, Access)> = inputs
            .iter()
            .map(|t| {
                let a = if t.strides.iter().zip(&t.shape).all(|(s, &d)| *s == 0 || d == 1) {
                    Access::Scalar
                } else if t.is_contiguous() {
                    Access::Contiguous
                } else {
                    Access::Strided
                };
                (t.dtype, a)
            })
            .collect();
        // (correctly rounded add/subtract/multiply: the same bits under either math)
        if let Some(sym) = vec4_f32_op(exprs, inputs, outputs[0]) {
            return self.record_vec4_f32(batch, sym, inputs, outputs[0], n);
        }
        // Source is generated (and the expression type-checked) only the first time a key is
        // seen: a warm op costs a key and a hash lookup, not a page of GLSL.
        // Four elements per invocation for big contiguous work of 8- to 32-bit elements (the
        // same bits: `elementwise::wide_eligible`).
        // (Buffers start 16-byte aligned; checked rather than assumed, since a misaligned
        // 16-byte access would be undefined.)
        let wide = n >= self.wide_elementwise_min.load(Relaxed) && {
            let out_types: Vec<DType> = outputs.iter().map(|t| t.dtype).collect();
            let ins: Vec<(DType, Access, usize)> = accesses.iter().zip(inputs).map(|((t, a), x)| (*t, *a, x.offset)).collect();
            let aligned = outputs.iter().chain(inputs.iter()).all(|t| t.buffer.address() % 16 == 0);
            aligned && wide_eligible(&out_types, out_access, out_offset, &ins)
        };
        let speculate = self.speculate_elementwise.load(Relaxed);
        let key = kernel_key(exprs, &accesses, rank, out_access, math, wide, speculate);
        let kernel = match self.kernels.cached(&key) {
            Some(k) => k,
            None => {
                let generated = generate(exprs, &accesses, rank, out_access, math, wide, speculate)?;
                let mut built_key = generated.key.clone();
                let mut built = self.kernels.get(&generated.key, 256, 1, || generated.source);
                // A kernel with its speculative copy is about twice the code: where the driver
                // refuses it, the checked kernel alone (the same bits; counted like every
                // refusal).
                if built.is_err() && speculate && self.kernels.refused(&built_key) {
                    let plain = generate(exprs, &accesses, rank, out_access, math, wide, false)?;
                    built_key = plain.key.clone();
                    built = self.kernels.get(&plain.key, 256, 1, || plain.source);
                }
                match built {
                    Ok(k) => k,
                    // A driver's compiler may refuse a multi-output kernel whose parts it builds
                    // (NVIDIA's on the H200 did, "NVVM compilation failed: 3", for a fused graph
                    // of s32 ops, before s32 division went to 32 bits). Each output is its own
                    // expression over the same inputs, so one kernel per output gives the same
                    // bits; the refusal is counted (`EngineStats::refused_kernels`) and not
                    // retried.
                    Err(_) if exprs.len() > 1 && self.kernels.refused(&built_key) => {
                        for (e, o) in exprs.iter().zip(outputs) {
                            self.record_map_with(batch, math, std::slice::from_ref(e), inputs, std::slice::from_ref(o))?;
                        }
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let mut p = ParamBlock::new("elementwise");
        p.addrs(outputs.iter().chain(inputs.iter()).map(|t| t.buffer.address()));
        p.i32s(shape.iter().copied())?.i32(out_offset)?.i32s(out_strides.iter().copied())?;
        for t in inputs {
            p.i32(t.offset)?.i32s(t.strides.iter().copied())?;
        }
        if wide {
            p.i32(n)?;
        }
        for t in inputs.iter().chain(outputs.iter()) {
            batch.keep(&t.buffer);
        }
        batch.dispatch(&kernel, p.bytes(), if wide { n.div_ceil(4) } else { n } as u64)
    }

    /// The four-wide kernel for one f32 add/subtract/multiply of contiguous f32 tensors.
    fn record_vec4_f32(&self, batch: &mut Batch<'_>, sym: &str, inputs: &[&Tensor], out: &Tensor, n: usize) -> Result<()> {
        let key = format!("vec4 f32 {sym}");
        let kernel = match self.kernels.cached(&key) {
            Some(k) => k,
            None => self.kernels.get(&key, 256, 1, || {
                let mut src = crate::kernels::numeric_prelude();
                src.push_str(&format!("#define OP {sym}\n"));
                src.push_str(include_str!("kernels/vec4_f32.glsl"));
                src
            })?,
        };
        let mut p = ParamBlock::new("elementwise");
        p.addrs([out, inputs[0], inputs[1]].map(|t| t.buffer.address()));
        p.i32s([n, out.offset / 4, inputs[0].offset / 4, inputs[1].offset / 4])?;
        for t in [inputs[0], inputs[1], out] {
            batch.keep(&t.buffer);
        }
        batch.dispatch(&kernel, p.bytes(), n.div_ceil(4) as u64)
    }

    /// `op(x)` with result type `out` (Nx decides it: e.g. f32 for exp of s32).
    pub fn unary(&self, op: UnaryOp, x: &Tensor, out: DType) -> Result<Tensor> {
        self.unary_with(FloatMath::Exact, op, x, out)
    }

    /// [`Context::unary`] with float math evaluated as `math` says.
    pub fn unary_with(&self, math: FloatMath, op: UnaryOp, x: &Tensor, out: DType) -> Result<Tensor> {
        let e = Expr::unary(op, Expr::Input(0), out);
        Ok(self.map_multi_with(math, &[e], &[x], &x.shape)?.remove(0))
    }

    /// `op(a, b)` with broadcasting and result type `out`.
    pub fn binary(&self, op: BinaryOp, a: &Tensor, b: &Tensor, out: DType) -> Result<Tensor> {
        self.binary_with(FloatMath::Exact, op, a, b, out)
    }

    /// [`Context::binary`] with float math evaluated as `math` says.
    pub fn binary_with(&self, math: FloatMath, op: BinaryOp, a: &Tensor, b: &Tensor, out: DType) -> Result<Tensor> {
        let shape = broadcast_shapes(&a.shape, &b.shape)?;
        let (a, b) = (a.broadcast_to(&shape)?, b.broadcast_to(&shape)?);
        let e = Expr::binary(op, Expr::Input(0), Expr::Input(1), out);
        Ok(self.map_multi_with(math, &[e], &[&a, &b], &shape)?.remove(0))
    }

    /// Nx.as_type.
    pub fn convert(&self, x: &Tensor, out: DType) -> Result<Tensor> {
        self.map(&Expr::convert(Expr::Input(0), out), &[x])
    }

    /// `pred != 0 ? on_true : on_false`, broadcasting all three.
    pub fn select(&self, pred: &Tensor, on_true: &Tensor, on_false: &Tensor, out: DType) -> Result<Tensor> {
        let shape = broadcast_shapes(&broadcast_shapes(&pred.shape, &on_true.shape)?, &on_false.shape)?;
        let ins = [pred.broadcast_to(&shape)?, on_true.broadcast_to(&shape)?, on_false.broadcast_to(&shape)?];
        let e = Expr::select(Expr::Input(0), Expr::Input(1), Expr::Input(2), out);
        Ok(self.map_multi(&[e], &[&ins[0], &ins[1], &ins[2]], &shape)?.remove(0))
    }

    /// Nx.clip: `min(max(x, lo), hi)`, `lo` and `hi` broadcast to `x`.
    pub fn clip(&self, x: &Tensor, lo: &Tensor, hi: &Tensor, out: DType) -> Result<Tensor> {
        let shape = x.shape.clone();
        let ins = [x.clone(), lo.broadcast_to(&shape)?, hi.broadcast_to(&shape)?];
        let e = clip_expr(Expr::Input(0), Expr::Input(1), Expr::Input(2), out);
        Ok(self.map_multi(&[e], &[&ins[0], &ins[1], &ins[2]], &shape)?.remove(0))
    }

    /// A tensor filled with one value.
    pub fn full(&self, value: Scalar, dtype: DType, shape: &[usize]) -> Result<Tensor> {
        let out = self.empty(dtype, shape)?;
        self.recorded(out, |batch, out| self.record_full(batch, value, out))
    }

    /// Records filling `out` with `value` (converted to `out`'s type).
    pub fn record_full(&self, batch: &mut Batch<'_>, value: Scalar, out: &Tensor) -> Result<()> {
        self.record_map(batch, &[Expr::Const { value, dtype: out.dtype }], &[], &[out])
    }

    /// Nx.iota: counts along `axis`, or over the flattened tensor when `axis` is `None`.
    pub fn iota(&self, dtype: DType, shape: &[usize], axis: Option<usize>) -> Result<Tensor> {
        let out = self.empty(dtype, shape)?;
        self.recorded(out, |batch, out| self.record_iota(batch, axis, out))
    }

    /// Records Nx.iota into `out` (its type and shape; `axis` as in [`Context::iota`]).
    pub fn record_iota(&self, batch: &mut Batch<'_>, axis: Option<usize>, out: &Tensor) -> Result<()> {
        if let Some(a) = axis {
            if a >= out.shape.len() {
                return Err(invalid!("iota axis {a} out of range for shape {:?}", out.shape));
            }
        }
        self.record_map(batch, &[Expr::Iota { axis, dtype: out.dtype }], &[], &[out])
    }

    /// Writes `update` into a copy of `base` at `start` (Nx.put_slice; starts are clamped as
    /// Nx clamps them so the update fits).
    pub fn put_slice(&self, base: &Tensor, start: &[usize], update: &Tensor) -> Result<Tensor> {
        let out = self.empty(base.dtype, &base.shape)?;
        self.recorded(out, |batch, out| self.record_put_slice(batch, base, start, update, out))
    }

    /// Records Nx.put_slice into `out` (`base`'s type and shape): a copy of `base`, then
    /// `update` converted to that type over the region at `start`.
    pub fn record_put_slice(&self, batch: &mut Batch<'_>, base: &Tensor, start: &[usize], update: &Tensor, out: &Tensor) -> Result<()> {
        let rank = base.shape.len();
        if start.len() != rank || update.shape.len() != rank || update.shape.iter().zip(&base.shape).any(|(u, b)| u > b) {
            return Err(invalid!("put_slice of {:?} into {:?} at {start:?} does not fit", update.shape, base.shape));
        }
        check_output(out, base.dtype, &base.shape, "put_slice")?;
        let start: Vec<usize> = (0..rank).map(|d| start[d].min(base.shape[d] - update.shape[d])).collect();
        let region = out.slice(&start, &update.shape, &vec![1; rank])?;
        self.record_map(batch, &[Expr::Input(0)], &[base], &[out])?;
        let cast = Expr::convert(Expr::Input(0), base.dtype);
        self.record_map(batch, &[cast], &[update], &[&region])
    }

    /// Joins tensors along `axis` (all other axes equal), converting to `out`.
    pub fn concatenate(&self, parts: &[&Tensor], axis: usize, out: DType) -> Result<Tensor> {
        let shapes: Vec<&[usize]> = parts.iter().map(|p| p.shape.as_slice()).collect();
        let result = self.empty(out, &concatenate_output_shape(&shapes, axis)?)?;
        self.recorded(result, |batch, out| self.record_concatenate(batch, parts, axis, out))
    }

    /// Records Nx.concatenate into `out` (of [`concatenate_output_shape`]; the parts are
    /// converted to its type).
    pub fn record_concatenate(&self, batch: &mut Batch<'_>, parts: &[&Tensor], axis: usize, out: &Tensor) -> Result<()> {
        let shapes: Vec<&[usize]> = parts.iter().map(|p| p.shape.as_slice()).collect();
        let shape = concatenate_output_shape(&shapes, axis)?;
        check_output(out, out.dtype, &shape, "concatenate")?;
        let rank = shape.len();
        let mut at = 0;
        for p in parts {
            let mut start = vec![0; rank];
            start[axis] = at;
            at += p.shape[axis];
            if p.numel() == 0 {
                continue;
            }
            let region = out.slice(&start, &p.shape, &vec![1; rank])?;
            self.record_map(batch, &[Expr::convert(Expr::Input(0), out.dtype)], &[p], &[&region])?;
        }
        Ok(())
    }

    /// Nx.pad: `config[d] = (low, high, interior)`; negative low/high crop.
    pub fn pad(&self, x: &Tensor, value: &Tensor, config: &[(i64, i64, u64)]) -> Result<Tensor> {
        let out = self.empty(x.dtype, &pad_output_shape(&x.shape, config)?)?;
        self.recorded(out, |batch, out| self.record_pad(batch, x, value, config, out))
    }

    /// Records Nx.pad into `out` (`x`'s type, [`pad_output_shape`]): the fill, then the
    /// elements of `x` that land inside.
    pub fn record_pad(&self, batch: &mut Batch<'_>, x: &Tensor, value: &Tensor, config: &[(i64, i64, u64)], out: &Tensor) -> Result<()> {
        let rank = x.shape.len();
        let shape = pad_output_shape(&x.shape, config)?;
        check_output(out, x.dtype, &shape, "pad")?;
        self.record_full_from(batch, value, out)?;
        // Elements of x land at lo + k*(interior+1); those outside [0, len) are cropped.
        let mut start = vec![0usize; rank];
        let mut count = vec![0usize; rank];
        let mut src_start = vec![0usize; rank];
        for d in 0..rank {
            let (lo, _, interior) = config[d];
            let step = interior as i64 + 1;
            let n = x.shape[d] as i64;
            // first k with lo + k*step >= 0, last k with lo + k*step < len
            let k0 = if lo >= 0 { 0 } else { (-lo + step - 1) / step };
            let k1 = if shape[d] == 0 { -1 } else { ((shape[d] as i64 - 1 - lo).div_euclid(step)).min(n - 1) };
            let c = (k1 - k0 + 1).max(0);
            count[d] = c as usize;
            src_start[d] = if c > 0 { k0 as usize } else { 0 };
            start[d] = if c > 0 { (lo + k0 * step) as usize } else { 0 };
        }
        if count.iter().all(|&c| c > 0) {
            let src = x.slice(&src_start, &count, &vec![1; rank])?;
            let steps: Vec<usize> = config.iter().map(|c| c.2 as usize + 1).collect();
            let region = out.slice(&start, &count, &steps)?;
            self.record_map(batch, &[Expr::Input(0)], &[&src], &[&region])?;
        }
        Ok(())
    }

    /// A tensor of `shape` filled with the single element of `value` (converted to `dtype`).
    pub fn full_from(&self, value: &Tensor, dtype: DType, shape: &[usize]) -> Result<Tensor> {
        let out = self.empty(dtype, shape)?;
        self.recorded(out, |batch, out| self.record_full_from(batch, value, out))
    }

    /// Records filling `out` with the single element of `value` (converted to `out`'s type).
    pub fn record_full_from(&self, batch: &mut Batch<'_>, value: &Tensor, out: &Tensor) -> Result<()> {
        if value.numel() != 1 {
            return Err(invalid!("fill value must have one element, has shape {:?}", value.shape));
        }
        let v = value.reshape_view_scalar().broadcast_to(&out.shape)?;
        self.record_map(batch, &[Expr::convert(Expr::Input(0), out.dtype)], &[&v], &[out])
    }
}

/// Nx.clip as one expression over `x`, `lo` and `hi`. BinaryBackend computes
/// `t = x > lo ? x : lo; t < hi ? t : hi`, comparing the original values (so a NaN x gives lo,
/// a NaN lo gives hi, and lo > hi gives hi).
pub fn clip_expr(x: Expr, l: Expr, h: Expr, out: DType) -> Expr {
    let gt = Expr::binary(BinaryOp::Greater, x.clone(), l.clone(), DType::U8);
    let t_below_hi = Expr::select(
        gt.clone(),
        Expr::binary(BinaryOp::Less, x.clone(), h.clone(), DType::U8),
        Expr::binary(BinaryOp::Less, l.clone(), h.clone(), DType::U8),
        DType::U8,
    );
    Expr::select(t_below_hi, Expr::select(gt, x, l, out), h, out)
}

impl Tensor {
    /// A rank-0 view of a one-element tensor.
    pub(crate) fn reshape_view_scalar(&self) -> Tensor {
        Tensor { shape: vec![], strides: vec![], ..self.clone() }
    }
}

// The engine is shared across threads (the NIF's engine threads, concurrent tests).
const _: () = {
    const fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<Context>();
    is_send_sync::<Tensor>();
};

/// The operator when `exprs` is one f32 add/subtract/multiply of two contiguous f32 inputs
/// whose offsets (and the output's) allow 16-byte access: the commonest kernel, served four
/// elements at a time.
fn vec4_f32_op(exprs: &[Expr], inputs: &[&Tensor], out: &Tensor) -> Option<&'static str> {
    let [Expr::Binary { op, lhs, rhs, dtype: DType::F32 }] = exprs else { return None };
    let (Expr::Input(0), Expr::Input(1)) = (lhs.as_ref(), rhs.as_ref()) else { return None };
    let sym = match op {
        BinaryOp::Add => "+",
        BinaryOp::Subtract => "-",
        BinaryOp::Multiply => "*",
        _ => return None,
    };
    let ok = |t: &Tensor| t.dtype == DType::F32 && t.is_contiguous() && t.offset % 4 == 0 && t.numel() > 1;
    (inputs.len() == 2 && inputs.iter().all(|t| ok(t)) && ok(out)).then_some(sym)
}
