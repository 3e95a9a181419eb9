//! The BEAM side of nx_vulkan: decodes terms, calls the engine on its big-stack threads,
//! encodes results. No GPU logic lives here.
//!
//! Every call that touches the device runs on a dirty scheduler and hands the work to
//! `nx_vulkan_engine::exec::run`; results come back as `{:ok, value}` or
//! `{:error, {kind, message}}` (kind: `:argument`, `:out_of_memory`, `:device`, `:internal`).
//! Panics are caught in the engine thread and by rustler; none reaches the VM.

use nx_vulkan_engine::{self as engine, BinaryOp, Context, DType, EngineError, FloatMath, GcHint, Tensor, UnaryOp};
use parking_lot::RwLock;
use rustler::{Atom, Binary, Encoder, Env, NifResult, OwnedBinary, ResourceArc, Term};
use std::panic::RefUnwindSafe;
use list::List;

mod complex;
mod list;
mod encoder;
mod indexing;
mod llm;
mod plan;
mod sort;
mod window;

pub(crate) mod atoms {
    rustler::atoms! { ok, error, argument, out_of_memory, device, internal, already_deallocated, gc, busy, pending }
}

/// An Elixir handle to a device tensor. `deallocate` empties it early; the garbage collector
/// drops it otherwise, and the buffer goes back to the pool either way.
pub struct TensorRef {
    tensor: RwLock<Option<Tensor>>,
}

// The tensor is only reached through the RwLock; a panic cannot leave it half-updated.
impl RefUnwindSafe for TensorRef {}

#[rustler::resource_impl]
impl rustler::Resource for TensorRef {}

pub(crate) type Handle = ResourceArc<TensorRef>;

pub(crate) fn handle(t: Tensor) -> Handle {
    ResourceArc::new(TensorRef { tensor: RwLock::new(Some(t)) })
}

pub(crate) fn get(h: &Handle) -> engine::Result<Tensor> {
    h.tensor.read().clone().ok_or_else(|| {
        EngineError::InvalidArgument("the tensor was deallocated (dead handle)".into())
    })
}

fn kind(e: &EngineError) -> Atom {
    match e {
        EngineError::InvalidArgument(_) => atoms::argument(),
        EngineError::Busy(_) => atoms::busy(),
        EngineError::OutOfMemory { .. } => atoms::out_of_memory(),
        EngineError::NoDevice(_) | EngineError::DeviceNotFound { .. } | EngineError::Unsupported { .. } | EngineError::QueuedWork { .. } => atoms::device(),
        EngineError::ShaderCompile { .. } | EngineError::Vulkan(_) | EngineError::NeedsEngineThread => atoms::internal(),
    }
}

pub(crate) fn encode_result<'a, T>(env: Env<'a>, r: engine::Result<T>, ok: impl FnOnce(Env<'a>, T) -> Term<'a>) -> Term<'a> {
    match r {
        Ok(v) => (atoms::ok(), ok(env, v)).encode(env),
        Err(e) => (atoms::error(), (kind(&e), e.to_string())).encode(env),
    }
}

/// Runs `f` against the process-wide context: on the calling (dirty scheduler) thread when it
/// only records work with kernels already built — queuing a warm op costs no thread handoff —
/// else on an engine thread with a deep stack (shader compiles, pipeline builds, device open).
pub(crate) fn on_engine<T: Send + 'static>(f: impl FnOnce(&Context) -> engine::Result<T> + Clone + Send + 'static) -> engine::Result<T> {
    engine::exec::run_shallow_first(move || {
        let ctx = Context::global()?;
        f(&ctx)
    })
}

/// `{:ok, value}`, or `{:ok, value, :gc}` when the pool asks the caller to collect its garbage
/// (dead handles keep device memory until the BEAM collects them; see `take_gc_hint`): for
/// results that hold new device tensors.
pub(crate) fn device_result<'a, T>(env: Env<'a>, r: engine::Result<T>, ok: impl FnOnce(Env<'a>, T) -> Term<'a>) -> Term<'a> {
    let hint = if r.is_ok() { Context::try_global().and_then(|ctx| ctx.pool.take_gc_hint()) } else { None };
    match (r, hint) {
        (Ok(v), Some(GcHint::NewMemory | GcHint::SizeClassDry)) => (atoms::ok(), ok(env, v), atoms::gc()).encode(env),
        (r, _) => encode_result(env, r, ok),
    }
}

/// `device_result` of one tensor: `{:ok, handle}`, or with a collection hint as a third element.
pub(crate) fn tensor_result<'a>(env: Env<'a>, r: engine::Result<Tensor>) -> Term<'a> {
    device_result(env, r, |env, t| handle(t).encode(env))
}

pub(crate) fn dtype(s: &str) -> engine::Result<DType> {
    DType::parse(s)
}

fn caps_map<'a>(env: Env<'a>, c: &engine::DeviceCaps) -> NifResult<Term<'a>> {
    let mut m = Term::map_new(env);
    let put = |m: Term<'a>, k: &str, v: Term<'a>| m.map_put(rustler::types::atom::Atom::from_str(env, k).unwrap(), v);
    m = put(m, "index", c.index.encode(env))?;
    m = put(m, "name", c.name.encode(env))?;
    m = put(m, "type", c.device_type.encode(env))?;
    m = put(m, "pci_id", c.pci_id().encode(env))?;
    m = put(m, "uuid", c.uuid_hex().encode(env))?;
    m = put(m, "driver_name", c.driver_name.encode(env))?;
    m = put(m, "driver_info", c.driver_info.encode(env))?;
    m = put(m, "driver_version", c.driver_version.encode(env))?;
    m = put(m, "api_version", c.api_version.encode(env))?;
    m = put(m, "float64", c.float64.encode(env))?;
    m = put(m, "float16", c.float16.encode(env))?;
    m = put(m, "int8", c.int8.encode(env))?;
    m = put(m, "int16", c.int16.encode(env))?;
    m = put(m, "int64", c.int64.encode(env))?;
    m = put(m, "buffer_device_address", c.buffer_device_address.encode(env))?;
    m = put(m, "cooperative_matrix", c.cooperative_matrix.encode(env))?;
    m = put(m, "subgroup_size", c.subgroup_size.encode(env))?;
    m = put(m, "max_workgroup_invocations", c.max_workgroup_invocations.encode(env))?;
    m = put(m, "max_shared_memory", c.max_shared_memory.encode(env))?;
    m = put(m, "max_push_constants", c.max_push_constants.encode(env))?;
    m = put(m, "max_storage_buffer_range", c.max_storage_buffer_range.encode(env))?;
    m = put(m, "max_allocation_size", c.max_allocation_size.encode(env))?;
    m = put(m, "device_local_bytes", c.device_local_bytes.encode(env))?;
    let missing: Vec<&str> = c.missing_requirements();
    m = put(m, "usable", missing.is_empty().encode(env))?;
    m = put(m, "missing", missing.encode(env))?;
    Ok(m)
}

#[rustler::nif(schedule = "DirtyIo")]
fn devices(env: Env<'_>) -> NifResult<Term<'_>> {
    match engine::exec::run(engine::list_devices) {
        Ok(list) => {
            let maps = list.iter().map(|c| caps_map(env, c)).collect::<NifResult<Vec<_>>>()?;
            Ok((atoms::ok(), maps).encode(env))
        }
        Err(e) => Ok((atoms::error(), (kind(&e), e.to_string())).encode(env)),
    }
}

/// Opens the device named by `selector` ("" for the default, an index, or part of a name).
#[rustler::nif(schedule = "DirtyIo")]
fn open(env: Env<'_>, selector: String) -> NifResult<Term<'_>> {
    let r = engine::exec::run(move || {
        let sel = if selector.is_empty() { engine::DeviceSelector::from_env() } else { engine::DeviceSelector::parse(&selector) };
        Context::init_global(&sel).map(|c| c.caps.clone())
    });
    match r {
        Ok(c) => Ok((atoms::ok(), caps_map(env, &c)?).encode(env)),
        Err(e) => Ok((atoms::error(), (kind(&e), e.to_string())).encode(env)),
    }
}

/// The report `nx-vulkan info` prints.
#[rustler::nif(schedule = "DirtyIo")]
fn info_report(env: Env<'_>) -> Term<'_> {
    encode_result(env, engine::exec::run(engine::device::info_report), |env, s| s.encode(env))
}

#[rustler::nif(schedule = "DirtyIo")]
fn device_info(env: Env<'_>) -> NifResult<Term<'_>> {
    match on_engine(|ctx| Ok(ctx.caps.clone())) {
        Ok(c) => Ok((atoms::ok(), caps_map(env, &c)?).encode(env)),
        Err(e) => Ok((atoms::error(), (kind(&e), e.to_string())).encode(env)),
    }
}

#[rustler::nif(schedule = "DirtyIo")]
fn stats(env: Env<'_>) -> NifResult<Term<'_>> {
    let r = on_engine(|ctx| Ok(ctx.stats()));
    match r {
        Ok(s) => {
            let pairs: Vec<(Atom, u64)> = vec![
                (Atom::from_str(env, "dispatches")?, s.dispatches),
                (Atom::from_str(env, "concurrent_dispatches")?, s.concurrent_dispatches),
                (Atom::from_str(env, "recordings")?, s.recordings),
                (Atom::from_str(env, "submits")?, s.submits),
                (Atom::from_str(env, "in_flight")?, s.in_flight),
                (Atom::from_str(env, "copies")?, s.copies),
                (Atom::from_str(env, "uploads")?, s.uploads),
                (Atom::from_str(env, "downloads")?, s.downloads),
                (Atom::from_str(env, "pipelines")?, s.pipelines),
                (Atom::from_str(env, "kernel_lookups")?, s.kernel_lookups),
                (Atom::from_str(env, "spirv_disk_hits")?, s.spirv_disk_hits),
                (Atom::from_str(env, "spirv_disk_misses")?, s.spirv_disk_misses),
                (Atom::from_str(env, "spirv_disk_rejected")?, s.spirv_disk_rejected),
                (Atom::from_str(env, "refused_kernels")?, s.refused_kernels),
                (Atom::from_str(env, "submitters")?, s.submitters),
                (Atom::from_str(env, "live_buffers")?, s.pool.live_buffers),
                (Atom::from_str(env, "live_bytes")?, s.pool.live_bytes),
                (Atom::from_str(env, "cached_buffers")?, s.pool.cached_buffers),
                (Atom::from_str(env, "cached_bytes")?, s.pool.cached_bytes),
                (Atom::from_str(env, "device_allocations")?, s.pool.device_allocations),
                (Atom::from_str(env, "reuses")?, s.pool.reuses),
                (Atom::from_str(env, "evictions")?, s.pool.evictions),
            ];
            let mut m = Term::map_new(env);
            for (k, v) in pairs {
                m = m.map_put(k, v)?;
            }
            Ok((atoms::ok(), m).encode(env))
        }
        Err(e) => Ok((atoms::error(), (kind(&e), e.to_string())).encode(env)),
    }
}

#[rustler::nif(schedule = "DirtyIo")]
fn trim_pool(env: Env<'_>) -> Term<'_> {
    encode_result(env, on_engine(|ctx| Ok(ctx.pool.trim())), |env, _| atoms::ok().encode(env))
}

/// Copies the binary into a new device tensor: straight from the Erlang binary into device
/// (or staging) memory when the device is open; the copy is queued, not waited for.
#[rustler::nif(schedule = "DirtyCpu")]
fn upload<'a>(env: Env<'a>, data: Binary<'a>, dtype_name: String, shape: List<usize>) -> Term<'a> {
    let r = dtype(&dtype_name).and_then(|t| match Context::try_global() {
        Some(ctx) => ctx.upload(t, &shape, data.as_slice()),
        None => {
            let bytes = data.as_slice().to_vec();
            on_engine(move |ctx| ctx.upload(t, &shape, &bytes))
        }
    });
    tensor_result(env, r)
}

/// `upload` on the calling normal scheduler for a small binary (≤ 64 KiB, as read-backs):
/// `:busy`, having done nothing, when it would wait (a full queue, synchronous mode) or the
/// device is not open yet; the caller then calls `upload`.
#[rustler::nif]
fn upload_nowait<'a>(env: Env<'a>, data: Binary<'a>, dtype_name: String, shape: List<usize>) -> Term<'a> {
    let r = (|| {
        let t = dtype(&dtype_name)?;
        if data.len() > NOWAIT_TRANSFER_BYTES {
            return Ok(None);
        }
        without_waiting(|ctx| ctx.upload(t, &shape, data.as_slice()))
    })();
    nowait_result(env, r)
}

/// Reads a tensor into a new Erlang binary (no intermediate copy). A synchronisation point:
/// errors of queued work surface here.
#[rustler::nif(schedule = "DirtyCpu")]
fn download(env: Env<'_>, t: Handle) -> NifResult<Term<'_>> {
    let r = get(&t).and_then(|t| on_engine(move |ctx| ctx.contiguous(&t))).and_then(|t| {
        let ctx = Context::global()?;
        let mut bin = OwnedBinary::new(t.byte_size());
        ctx.download_into(&t, bin.as_mut_slice())?;
        Ok(bin)
    });
    match r {
        Ok(bin) => Ok((atoms::ok(), bin.release(env)).encode(env)),
        Err(e) => Ok((atoms::error(), (kind(&e), e.to_string())).encode(env)),
    }
}

/// The most an upload or read-back on a normal scheduler copies (`upload_nowait`,
/// `download_nowait`): a few µs of memcpy.
const NOWAIT_TRANSFER_BYTES: usize = 64 << 10;

/// A read-back `download_nowait` started and did not see finish within its spin.
pub struct PendingDownloadRef(parking_lot::Mutex<Option<engine::ops::PendingDownload>>);

impl RefUnwindSafe for PendingDownloadRef {}

#[rustler::resource_impl]
impl rustler::Resource for PendingDownloadRef {}

/// `download` on the calling normal scheduler for a small tensor (≤ 64 KiB): queues its copy
/// and spins on the device for the stream's spin time (100 µs on a GPU, none on lavapipe) —
/// a small result read right after its op is back without the hop to a dirty scheduler.
/// Returns `{:ok, binary}`; `{:pending, ref}` when the device has not finished by then (the
/// caller then calls `download_finish`, which waits, on a dirty scheduler); `:busy` when
/// nothing could start without blocking (a kernel to build, a full queue, a large tensor): the
/// caller calls `download`.
#[rustler::nif]
fn download_nowait(env: Env<'_>, t: Handle) -> NifResult<Term<'_>> {
    let r = (|| {
        let t = get(&t)?;
        let Some(ctx) = Context::try_global() else { return Ok(None) };
        if t.byte_size() > NOWAIT_TRANSFER_BYTES {
            return Ok(None);
        }
        let Some(started) = engine::exec::try_without_waiting(|| {
            let t = ctx.contiguous(&t)?;
            ctx.start_download(&t)
        }) else {
            return Ok(None);
        };
        let mut pending = started?;
        let mut bin = OwnedBinary::new(pending.byte_size());
        let spin = ctx.stream.config().spin;
        Ok(Some(if ctx.finish_download(&mut pending, bin.as_mut_slice(), Some(spin))? {
            Ok(bin)
        } else {
            Err(pending)
        }))
    })();
    Ok(match r {
        Ok(None) => atoms::busy().encode(env),
        Ok(Some(Ok(bin))) => (atoms::ok(), bin.release(env)).encode(env),
        Ok(Some(Err(pending))) => {
            (atoms::pending(), ResourceArc::new(PendingDownloadRef(parking_lot::Mutex::new(Some(pending))))).encode(env)
        }
        Err(e) => (atoms::error(), (kind(&e), e.to_string())).encode(env),
    })
}

/// Waits for a read-back `download_nowait` left pending and returns `{:ok, binary}`.
#[rustler::nif(schedule = "DirtyCpu")]
fn download_finish(env: Env<'_>, p: ResourceArc<PendingDownloadRef>) -> NifResult<Term<'_>> {
    let r = (|| {
        let mut pending = p.0.lock().take().ok_or_else(|| EngineError::InvalidArgument("this read-back was already collected".into()))?;
        let ctx = Context::global()?;
        let mut bin = OwnedBinary::new(pending.byte_size());
        ctx.finish_download(&mut pending, bin.as_mut_slice(), None)?;
        Ok(bin)
    })();
    Ok(encode_result(env, r, |env, bin| bin.release(env).encode(env)))
}

/// Waits until every queued op has run; returns the first failure of queued work, if any.
#[rustler::nif(schedule = "DirtyIo")]
fn synchronize(env: Env<'_>) -> Term<'_> {
    let r = match Context::try_global() {
        Some(ctx) => ctx.synchronize(),
        None => Ok(()),
    };
    encode_result(env, r, |env, _| atoms::ok().encode(env))
}

/// `synchronize` on the calling normal scheduler: spins on the device for the stream's spin
/// time (100 µs on a GPU, none on lavapipe); `:busy` if work is still running then (the caller
/// calls `synchronize`, which waits on a dirty scheduler).
#[rustler::nif]
fn synchronize_nowait(env: Env<'_>) -> Term<'_> {
    let Some(ctx) = Context::try_global() else { return atoms::busy().encode(env) };
    match ctx.synchronize_within(ctx.stream.config().spin) {
        Ok(false) => atoms::busy().encode(env),
        r => encode_result(env, r, |env, _| atoms::ok().encode(env)),
    }
}

/// `true`: every op waits for its own completion (as `NX_VULKAN_SYNC=1`); `false`: ops queue.
/// Returns the previous setting.
#[rustler::nif(schedule = "DirtyIo")]
fn set_synchronous(env: Env<'_>, on: bool) -> Term<'_> {
    let r = on_engine(move |ctx| {
        if on {
            ctx.synchronize()?;
        }
        let previous = ctx.stream.is_synchronous();
        ctx.stream.set_synchronous(on);
        Ok(previous)
    });
    encode_result(env, r, |env, previous| previous.encode(env))
}

/// Starts timing every kernel on the device (timestamp queries).
#[rustler::nif(schedule = "DirtyIo")]
fn profile_start(env: Env<'_>) -> Term<'_> {
    encode_result(env, on_engine(|ctx| ctx.stream.profile_start()), |env, _| atoms::ok().encode(env))
}

/// Waits for queued work, stops timing and returns `[{name, runs, device_ns, bytes}]`, longest
/// device time first.
#[rustler::nif(schedule = "DirtyIo")]
fn profile_stop(env: Env<'_>) -> Term<'_> {
    let r = on_engine(|ctx| ctx.stream.profile_stop());
    encode_result(env, r, |env, kernels| {
        kernels.into_iter().map(|k| (k.name, k.runs, k.device_ns, k.bytes)).collect::<Vec<_>>().encode(env)
    })
}

/// For tests: the next submission fails as a failed `vkQueueSubmit` would.
#[rustler::nif(schedule = "DirtyIo")]
fn inject_failure(env: Env<'_>, message: String) -> Term<'_> {
    let r = on_engine(move |ctx| {
        ctx.stream.inject_failure(&message);
        Ok(())
    });
    encode_result(env, r, |env, _| atoms::ok().encode(env))
}

/// `{dtype, shape}` of a live handle (cheap: no device work).
#[rustler::nif]
fn describe(env: Env<'_>, t: Handle) -> Term<'_> {
    encode_result(env, get(&t), |env, t| (t.dtype().name(), t.shape().to_vec()).encode(env))
}

#[rustler::nif]
fn deallocate(env: Env<'_>, t: Handle) -> Term<'_> {
    match t.tensor.write().take() {
        Some(_) => atoms::ok().encode(env),
        None => atoms::already_deallocated().encode(env),
    }
}

#[rustler::nif(schedule = "DirtyCpu")]
fn unary(env: Env<'_>, op: String, x: Handle, out: String, fast: bool) -> Term<'_> {
    let r = get(&x).and_then(|x| {
        let op = UnaryOp::parse(&op)?;
        let out = dtype(&out)?;
        on_engine(move |ctx| ctx.unary_with(float_math(fast), op, &x, out))
    });
    tensor_result(env, r)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn binary(env: Env<'_>, op: String, a: Handle, b: Handle, out: String, fast: bool) -> Term<'_> {
    let r = (|| {
        let (a, b) = (get(&a)?, get(&b)?);
        let op = BinaryOp::parse(&op)?;
        let out = dtype(&out)?;
        on_engine(move |ctx| ctx.binary_with(float_math(fast), op, &a, &b, out))
    })();
    tensor_result(env, r)
}

/// `precision: :fast` (true) or `:exact` for the elementwise ops.
fn float_math(fast: bool) -> FloatMath {
    if fast {
        FloatMath::Fast
    } else {
        FloatMath::Exact
    }
}

/// `unary` on the calling normal scheduler, for a warm op (kernel built, room in the queue):
/// no dirty-scheduler hop. Returns `:busy`, having done nothing, when the op would compile a
/// kernel or wait; the caller then calls `unary`.
#[rustler::nif]
fn unary_nowait(env: Env<'_>, op: String, x: Handle, out: String, fast: bool) -> Term<'_> {
    let r = (|| {
        let x = get(&x)?;
        let op = UnaryOp::parse(&op)?;
        let out = dtype(&out)?;
        without_waiting(|ctx| ctx.unary_with(float_math(fast), op, &x, out))
    })();
    nowait_result(env, r)
}

/// `binary` on the calling normal scheduler; see `unary_nowait`.
#[rustler::nif]
fn binary_nowait(env: Env<'_>, op: String, a: Handle, b: Handle, out: String, fast: bool) -> Term<'_> {
    let r = (|| {
        let (a, b) = (get(&a)?, get(&b)?);
        let op = BinaryOp::parse(&op)?;
        let out = dtype(&out)?;
        without_waiting(|ctx| ctx.binary_with(float_math(fast), op, &a, &b, out))
    })();
    nowait_result(env, r)
}

/// Runs an op on the calling (normal) scheduler's thread if it neither compiles nor waits:
/// `Ok(None)` when it would (or the device is not open yet), having done nothing.
pub(crate) fn without_waiting(f: impl FnOnce(&Context) -> engine::Result<Tensor>) -> engine::Result<Option<Tensor>> {
    let Some(ctx) = Context::try_global() else { return Ok(None) };
    engine::exec::try_without_waiting(|| f(&ctx)).transpose()
}

pub(crate) fn nowait_result(env: Env<'_>, r: engine::Result<Option<Tensor>>) -> Term<'_> {
    match r {
        Ok(None) => atoms::busy().encode(env),
        Ok(Some(t)) => tensor_result(env, Ok(t)),
        Err(e) => tensor_result(env, Err(e)),
    }
}

#[rustler::nif(schedule = "DirtyCpu")]
fn convert(env: Env<'_>, x: Handle, out: String) -> Term<'_> {
    let r = get(&x).and_then(|x| {
        let out = dtype(&out)?;
        on_engine(move |ctx| ctx.convert(&x, out))
    });
    tensor_result(env, r)
}

#[rustler::nif]
fn bitcast(env: Env<'_>, x: Handle, out: String) -> Term<'_> {
    tensor_result(env, get(&x).and_then(|x| x.bitcast(dtype(&out)?)))
}

#[rustler::nif(schedule = "DirtyCpu")]
fn select(env: Env<'_>, p: Handle, a: Handle, b: Handle, out: String) -> Term<'_> {
    let r = (|| {
        let (p, a, b) = (get(&p)?, get(&a)?, get(&b)?);
        let out = dtype(&out)?;
        on_engine(move |ctx| ctx.select(&p, &a, &b, out))
    })();
    tensor_result(env, r)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn clip(env: Env<'_>, x: Handle, lo: Handle, hi: Handle, out: String) -> Term<'_> {
    let r = (|| {
        let (x, lo, hi) = (get(&x)?, get(&lo)?, get(&hi)?);
        let out = dtype(&out)?;
        on_engine(move |ctx| ctx.clip(&x, &lo, &hi, out))
    })();
    tensor_result(env, r)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn iota(env: Env<'_>, dtype_name: String, shape: List<usize>, axis: Option<usize>) -> Term<'_> {
    let r = dtype(&dtype_name).and_then(|t| on_engine(move |ctx| ctx.iota(t, &shape, axis)));
    tensor_result(env, r)
}

/// Reshape is a view when the tensor is contiguous, a copy otherwise.
#[rustler::nif(schedule = "DirtyCpu")]
fn reshape(env: Env<'_>, x: Handle, shape: List<usize>) -> Term<'_> {
    let r = get(&x).and_then(|x| {
        if x.is_contiguous() {
            x.reshape(&shape)
        } else {
            on_engine(move |ctx| ctx.contiguous(&x)?.reshape(&shape))
        }
    });
    tensor_result(env, r)
}

#[rustler::nif]
fn transpose(env: Env<'_>, x: Handle, perm: List<usize>) -> Term<'_> {
    tensor_result(env, get(&x).and_then(|x| x.transpose(&perm)))
}

#[rustler::nif]
fn broadcast(env: Env<'_>, x: Handle, shape: List<usize>, axes: List<usize>) -> Term<'_> {
    tensor_result(env, get(&x).and_then(|x| x.broadcast(&shape, &axes)))
}

#[rustler::nif]
fn slice(env: Env<'_>, x: Handle, start: List<usize>, lengths: List<usize>, steps: List<usize>) -> Term<'_> {
    tensor_result(env, get(&x).and_then(|x| x.slice(&start, &lengths, &steps)))
}

#[rustler::nif]
fn reverse(env: Env<'_>, x: Handle, axes: List<usize>) -> Term<'_> {
    tensor_result(env, get(&x).and_then(|x| x.reverse(&axes)))
}

/// Materialises a view into its own contiguous buffer.
#[rustler::nif(schedule = "DirtyCpu")]
fn contiguous(env: Env<'_>, x: Handle) -> Term<'_> {
    tensor_result(env, get(&x).and_then(|x| on_engine(move |ctx| ctx.contiguous(&x))))
}

#[rustler::nif(schedule = "DirtyCpu")]
fn pad(env: Env<'_>, x: Handle, value: Handle, config: List<(i64, i64, u64)>) -> Term<'_> {
    let r = (|| {
        let (x, v) = (get(&x)?, get(&value)?);
        on_engine(move |ctx| ctx.pad(&x, &v, &config))
    })();
    tensor_result(env, r)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn put_slice(env: Env<'_>, x: Handle, start: List<usize>, update: Handle) -> Term<'_> {
    let r = (|| {
        let (x, u) = (get(&x)?, get(&update)?);
        on_engine(move |ctx| ctx.put_slice(&x, &start, &u))
    })();
    tensor_result(env, r)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn concatenate(env: Env<'_>, parts: List<Handle>, axis: usize, out: String) -> Term<'_> {
    let r = (|| {
        let parts = parts.iter().map(get).collect::<engine::Result<Vec<_>>>()?;
        let out = dtype(&out)?;
        on_engine(move |ctx| ctx.concatenate(&parts.iter().collect::<Vec<_>>(), axis, out))
    })();
    tensor_result(env, r)
}

fn reduce_op(op: &str) -> engine::Result<engine::reduce::ReduceOp> {
    use engine::reduce::ReduceOp;
    Ok(match op {
        "sum" => ReduceOp::Sum,
        "product" => ReduceOp::Product,
        "reduce_max" => ReduceOp::Max,
        "reduce_min" => ReduceOp::Min,
        "all" => ReduceOp::All,
        "any" => ReduceOp::Any,
        other => return Err(EngineError::InvalidArgument(format!("unknown reduction {other:?}"))),
    })
}

#[rustler::nif(schedule = "DirtyCpu")]
fn reduce(env: Env<'_>, op: String, x: Handle, axes: List<usize>, keep_axes: bool, out: String) -> Term<'_> {
    let r = (|| {
        let (x, op, out) = (get(&x)?, reduce_op(&op)?, dtype(&out)?);
        on_engine(move |ctx| ctx.reduce(op, &x, &axes, keep_axes, out))
    })();
    tensor_result(env, r)
}

/// `reduce` on the calling normal scheduler; see `unary_nowait`.
#[rustler::nif]
fn reduce_nowait(env: Env<'_>, op: String, x: Handle, axes: List<usize>, keep_axes: bool, out: String) -> Term<'_> {
    let r = (|| {
        let (x, op, out) = (get(&x)?, reduce_op(&op)?, dtype(&out)?);
        without_waiting(|ctx| ctx.reduce(op, &x, &axes, keep_axes, out))
    })();
    nowait_result(env, r)
}

fn arg_op(op: &str, high: bool) -> engine::Result<(engine::reduce::ArgOp, engine::reduce::TieBreak)> {
    use engine::reduce::{ArgOp, TieBreak};
    let op = match op {
        "argmax" => ArgOp::ArgMax,
        "argmin" => ArgOp::ArgMin,
        other => return Err(EngineError::InvalidArgument(format!("unknown arg-reduction {other:?}"))),
    };
    Ok((op, if high { TieBreak::High } else { TieBreak::Low }))
}

#[rustler::nif(schedule = "DirtyCpu")]
fn arg_reduce(env: Env<'_>, op: String, x: Handle, axis: Option<usize>, keep_axis: bool, high: bool, out: String) -> Term<'_> {
    let r = (|| {
        let (x, (op, tie), out) = (get(&x)?, arg_op(&op, high)?, dtype(&out)?);
        on_engine(move |ctx| ctx.arg_reduce(op, &x, axis, keep_axis, tie, out))
    })();
    tensor_result(env, r)
}

/// `arg_reduce` on the calling normal scheduler; see `unary_nowait`.
#[rustler::nif]
fn arg_reduce_nowait(env: Env<'_>, op: String, x: Handle, axis: Option<usize>, keep_axis: bool, high: bool, out: String) -> Term<'_> {
    let r = (|| {
        let (x, (op, tie), out) = (get(&x)?, arg_op(&op, high)?, dtype(&out)?);
        without_waiting(|ctx| ctx.arg_reduce(op, &x, axis, keep_axis, tie, out))
    })();
    nowait_result(env, r)
}

/// Nx.dot/6.
#[rustler::nif(schedule = "DirtyCpu")]
fn dot(env: Env<'_>, a: Handle, contract_a: List<usize>, batch_a: List<usize>, b: Handle, contract_b: List<usize>, batch_b: List<usize>, out: String) -> Term<'_> {
    let r = (|| {
        let (a, b) = (get(&a)?, get(&b)?);
        let out = dtype(&out)?;
        on_engine(move |ctx| ctx.dot(&a, &contract_a, &batch_a, &b, &contract_b, &batch_b, out))
    })();
    tensor_result(env, r)
}

/// Panics in this library are caught (by rustler, or by the engine's threads) and raised as
/// Elixir errors; print one line for each instead of a backtrace, so that one bad call does
/// not flood the log. The hook is this library's own: every Rust NIF library links its own
/// copy of std.
fn load(_env: Env, _info: Term) -> bool {
    std::panic::set_hook(Box::new(|info| eprintln!("nx_vulkan: caught a panic, raised as an Elixir error: {info}")));
    true
}

rustler::init!("Elixir.NxVulkan.Native", load = load);
