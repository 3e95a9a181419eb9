//! Recording: dispatches and copies gathered into a `Batch`, then committed to the device's
//! stream (see `stream.rs`), which submits them in call order without the caller waiting.
//!
//! Kernels address memory through device addresses, which vulkano's automatic synchronisation
//! cannot see, so command buffers are recorded straight through the Vulkan function table with
//! explicit barriers. Each `Submitter` owns a command pool, one command buffer, one fence
//! (reused, never re-created) and a host-visible arena for kernel parameters; the stream keeps a
//! pool of them, one per submission in flight.

use crate::error::{EngineError, Result};
use crate::kernel::Kernel;
use crate::memory::DeviceBuffer;
use ash::vk;
use std::sync::Arc;
use vulkano::buffer::{Buffer, BufferCreateInfo, BufferUsage, Subbuffer};
use vulkano::command_buffer::CommandBufferLevel;
use vulkano::command_buffer::pool::{
    CommandBufferAllocateInfo, CommandPool, CommandPoolAlloc, CommandPoolCreateFlags,
    CommandPoolCreateInfo,
};
use vulkano::device::{Device, Queue};
use vulkano::memory::allocator::{AllocationCreateInfo, MemoryTypeFilter, StandardMemoryAllocator};
use vulkano::query::{QueryPool, QueryPoolCreateInfo, QueryResultFlags, QueryType};
use vulkano::sync::fence::{Fence, FenceCreateInfo};
use vulkano::VulkanObject;

/// The most workgroups one 1-D dispatch launches; kernels loop over the rest (grid stride).
/// `NX_VULKAN_MAX_GROUPS` overrides it for tuning.
fn max_groups() -> u32 {
    static MAX: once_cell::sync::Lazy<u32> = once_cell::sync::Lazy::new(|| {
        std::env::var("NX_VULKAN_MAX_GROUPS").ok().and_then(|v| v.parse().ok()).unwrap_or(65535)
    });
    *MAX
}

/// Measurement only (never for results): `NX_VULKAN_SKIP_KERNELS` drops the dispatches of the
/// kernels it names from every recording, so a benchmark can time a whole step without them —
/// an ablation that, unlike per-command timestamps, leaves the other commands' overlap and
/// barriers as they are. `;` separates patterns; a pattern matches a kernel whose name holds
/// each of its `&`-separated parts, a part ending in `$` at the name's end ("llm matvec&SWIGLU;
/// llm rope;X_VEC4$").
fn skipped_kernel(name: &str) -> bool {
    static SKIP: once_cell::sync::Lazy<Vec<Vec<String>>> = once_cell::sync::Lazy::new(|| {
        std::env::var("NX_VULKAN_SKIP_KERNELS")
            .map(|v| v.split(';').filter(|p| !p.is_empty()).map(|p| p.split('&').map(str::to_string).collect()).collect())
            .unwrap_or_default()
    });
    SKIP.iter().any(|parts| {
        parts.iter().all(|part| match part.strip_suffix('$') {
            Some(end) => name.ends_with(end),
            None => name.contains(part.as_str()),
        })
    })
}

/// Bytes of kernel parameters a submission may hold before its arena grows.
const PARAM_ARENA_BYTES: u64 = 1 << 16;

/// The push-constant block every kernel declares: where its parameters are and how many items.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct PushConstants {
    pub params: u64,
    pub count: u32,
    pub _pad: u32,
}

/// What a submission needs from the device to record and submit, without the `Context`
/// (the stream's thread holds this, not the context).
pub(crate) struct DeviceHandles {
    pub device: Arc<Device>,
    pub queue: Arc<Queue>,
    pub memory_allocator: Arc<StandardMemoryAllocator>,
    pub layout: vk::PipelineLayout,
    /// Nanoseconds per timestamp tick; `None` when the queue cannot write timestamps.
    pub timestamp_period_ns: Option<f64>,
}

/// Timestamp queries around each command of a profiled submission.
struct Timing {
    pool: Arc<QueryPool>,
    capacity: u32,
    /// (label, bytes copied) of each command of the submission in flight.
    labels: Vec<(String, u64)>,
}

/// What a submission's timestamps measure.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum Profiling {
    Off = 0,
    /// Each command, bracketed by its own pair (labelled with its kernel).
    Commands = 1,
    /// The whole submission, one pair (labelled `submission`).
    Submissions = 2,
}

impl Profiling {
    pub(crate) fn from_u8(v: u8) -> Profiling {
        match v {
            1 => Profiling::Commands,
            2 => Profiling::Submissions,
            _ => Profiling::Off,
        }
    }
}

/// One command's device time, from a profiled submission.
pub(crate) struct CommandTime {
    pub label: String,
    pub bytes: u64,
    pub ns: f64,
}

pub(crate) struct Submitter {
    _pool: CommandPool,
    timing: Option<Timing>,
    command_buffer: CommandPoolAlloc,
    pub(crate) fence: Fence,
    arena: Subbuffer<[u8]>,
    arena_address: u64,
}

impl Submitter {
    pub(crate) fn new(dev: &DeviceHandles) -> Result<Submitter> {
        let pool = CommandPool::new(
            dev.device.clone(),
            CommandPoolCreateInfo {
                flags: CommandPoolCreateFlags::RESET_COMMAND_BUFFER | CommandPoolCreateFlags::TRANSIENT,
                queue_family_index: dev.queue.queue_family_index(),
                ..Default::default()
            },
        )
        .map_err(|e| EngineError::vk("command pool", e))?;
        let command_buffer = pool
            .allocate_command_buffers(CommandBufferAllocateInfo { command_buffer_count: 1, ..Default::default() })
            .map_err(|e| EngineError::vk("command buffer", e))?
            .next()
            .ok_or_else(|| EngineError::Vulkan("no command buffer allocated".into()))?;
        let fence = Fence::new(dev.device.clone(), FenceCreateInfo::default()).map_err(|e| EngineError::vk("fence", e))?;
        let (arena, arena_address) = new_arena(dev, PARAM_ARENA_BYTES)?;
        Ok(Submitter { _pool: pool, timing: None, command_buffer, fence, arena, arena_address })
    }

    /// Records `rec` into this submitter's command buffer and submits it, signalling the fence
    /// when the device is done. Does not wait. Profiling brackets every command (or the whole
    /// submission) by timestamps (`take_times` reads them once the fence has signalled).
    pub(crate) fn submit(&mut self, dev: &DeviceHandles, rec: &Recording, mode: Profiling) -> Result<()> {
        let profile = mode != Profiling::Off && !rec.commands.is_empty();
        let per_command = mode == Profiling::Commands;
        let queries = if per_command { 2 * rec.commands.len() as u32 } else { 2 };
        if profile && self.timing.as_ref().is_none_or(|t| t.capacity < queries) {
            let capacity = queries.next_power_of_two().max(64);
            let pool = QueryPool::new(dev.device.clone(), QueryPoolCreateInfo { query_count: capacity, ..QueryPoolCreateInfo::query_type(QueryType::Timestamp) })
                .map_err(|e| EngineError::vk("timestamp query pool", e))?;
            self.timing = Some(Timing { pool, capacity, labels: vec![] });
        }
        let timing = if profile { self.timing.as_mut() } else { None };
        let query_pool = timing.as_ref().map(|t| t.pool.handle());
        if let Some(t) = timing {
            t.labels = if per_command {
                rec.commands
                    .iter()
                    .map(|c| match c {
                        Command::Dispatch { kernel, .. } => (kernel.name().to_string(), 0),
                        Command::Copy { bytes, .. } => ("copy".to_string(), *bytes),
                        Command::Kept(_) => ("kept commands".to_string(), 0),
                    })
                    .collect()
            } else {
                vec![("submission".to_string(), 0)]
            };
        }
        if rec.params.len() as u64 > self.arena.len() {
            let (arena, address) = new_arena(dev, (rec.params.len() as u64).next_power_of_two())?;
            self.arena = arena;
            self.arena_address = address;
        }
        if !rec.params.is_empty() {
            let mut w = self.arena.write().map_err(|e| EngineError::vk("writing parameters", e))?;
            w[..rec.params.len()].copy_from_slice(&rec.params);
        }
        let fns = dev.device.fns();
        let cb = self.command_buffer.handle();
        // SAFETY: the command buffer belongs to this submitter, which the stream hands to one
        // submission at a time (it returns to the pool only after its fence has signalled);
        // every handle recorded (pipelines, buffers, the arena) is kept alive by the
        // submission's `keep` list or by the submitter until that fence signals.
        unsafe {
            let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            (fns.v1_0.begin_command_buffer)(cb, &begin).result().map_err(|e| EngineError::vk("begin", e))?;
            if let Some(qp) = query_pool {
                (fns.v1_0.cmd_reset_query_pool)(cb, qp, 0, queries);
            }
            record_commands(dev, cb, &rec.commands, self.arena_address, query_pool.map(|qp| (qp, mode)))?;
            // Device writes made visible to host reads (downloads map memory after the fence).
            let to_host = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::HOST_READ);
            (fns.v1_0.cmd_pipeline_barrier)(cb, COMMAND_STAGES, vk::PipelineStageFlags::HOST, vk::DependencyFlags::empty(), 1, &to_host, 0, std::ptr::null(), 0, std::ptr::null());
            (fns.v1_0.end_command_buffer)(cb).result().map_err(|e| EngineError::vk("end", e))?;
            let cbs = [cb];
            let submit = vk::SubmitInfo::default().command_buffers(&cbs);
            let fence = self.fence.handle();
            dev.queue
                .with(|_guard| (fns.v1_0.queue_submit)(dev.queue.handle(), 1, &submit, fence))
                .result()
                .map_err(|e| EngineError::vk("queue submit", e))?;
        }
        Ok(())
    }

    /// The device time of each command of a profiled submission, once its fence has signalled
    /// (`None` if it was not profiled).
    pub(crate) fn take_times(&mut self, period_ns: f64) -> Option<Vec<CommandTime>> {
        let t = self.timing.as_mut()?;
        if t.labels.is_empty() {
            return None;
        }
        let labels = std::mem::take(&mut t.labels);
        let mut ticks = vec![0u64; 2 * labels.len()];
        t.pool.get_results(0..ticks.len() as u32, &mut ticks, QueryResultFlags::WAIT).ok()?;
        // NX_VULKAN_PROFILE_SPANS=end (a measurement): each command's time from the previous
        // command's end to its own (the first's from its start) — what it adds to the
        // submission's critical path, its barrier's wait and its launch included; the spans
        // of a submission add up to its length. (Start-to-end times leave out what lies
        // between commands: over an 8B decode step on an H100 they added up to 4 % less,
        // stop 46 run 2.)
        static FROM_PREVIOUS_END: once_cell::sync::Lazy<bool> = once_cell::sync::Lazy::new(|| std::env::var("NX_VULKAN_PROFILE_SPANS").as_deref() == Ok("end"));
        Some(
            labels
                .into_iter()
                .enumerate()
                .map(|(i, (label, bytes))| {
                    let start = if *FROM_PREVIOUS_END && i > 0 { ticks[2 * i - 1] } else { ticks[2 * i] };
                    CommandTime { label, bytes, ns: ticks[2 * i + 1].saturating_sub(start) as f64 * period_ns }
                })
                .collect(),
        )
    }

    /// Makes the fence reusable once it has signalled.
    pub(crate) fn reset(&mut self) -> Result<()> {
        // SAFETY: called only after the fence has signalled: no queue operation uses it.
        unsafe { self.fence.reset() }.map_err(|e| EngineError::vk("fence reset", format!("{e:?}")))
    }
}

fn new_arena(dev: &DeviceHandles, bytes: u64) -> Result<(Subbuffer<[u8]>, u64)> {
    let arena = Buffer::new_slice::<u8>(
        dev.memory_allocator.clone(),
        BufferCreateInfo {
            usage: BufferUsage::STORAGE_BUFFER | BufferUsage::SHADER_DEVICE_ADDRESS,
            ..Default::default()
        },
        AllocationCreateInfo {
            memory_type_filter: MemoryTypeFilter::PREFER_DEVICE | MemoryTypeFilter::HOST_SEQUENTIAL_WRITE,
            ..Default::default()
        },
        bytes,
    )
    .map_err(|e| EngineError::vk("parameter arena", format!("{e:?}")))?;
    let address = arena.device_address().map_err(|e| EngineError::vk("arena address", e))?.get();
    Ok((arena, address))
}

/// What a recording keeps alive: device buffers until the op is committed to the stream (the
/// pool then orders their reuse, see `stream::StreamClock`); kernels and staging buffers until
/// the submission has run.
#[allow(dead_code)] // held only to keep the resources alive
pub(crate) enum Keep {
    Buffer(Arc<DeviceBuffer>),
    Staging(crate::memory::StagingBuffer),
    Kernel(Arc<Kernel>),
    Kept(Arc<KeptCommands>),
}

#[derive(Clone)]
pub(crate) enum Command {
    /// `concurrent`: no barrier in front (see [`Batch::dispatch_grid_concurrent`]).
    Dispatch { kernel: Arc<Kernel>, params_offset: u64, count: u32, groups: [u32; 3], concurrent: bool },
    Copy { src: vk::Buffer, src_offset: u64, dst: vk::Buffer, dst_offset: u64, bytes: u64 },
    /// A kept recording's commands, run from its own command buffer (see [`KeptCommands`]).
    Kept(Arc<KeptCommands>),
}

impl Command {
    /// (dispatches, of them concurrent, copies, kept command buffers) in `commands`; a kept
    /// buffer's dispatches and copies count too.
    pub(crate) fn counts(commands: &[Command]) -> (u64, u64, u64, u64) {
        let (mut dispatches, mut concurrent, mut copies, mut kept) = (0, 0, 0, 0);
        for c in commands {
            match c {
                Command::Dispatch { concurrent: c, .. } => {
                    dispatches += 1;
                    concurrent += *c as u64;
                }
                Command::Copy { .. } => copies += 1,
                Command::Kept(k) => {
                    let (d, c, p, _) = Command::counts(&k.rec.commands);
                    dispatches += d;
                    concurrent += c;
                    copies += p;
                    kept += 1;
                }
            }
        }
        (dispatches, concurrent, copies, kept)
    }
}

/// A recording replayed many times (a kept LLM decode step) whose commands are recorded into a
/// secondary command buffer once, on first use, with its parameters in a buffer of its own:
/// a submission then runs them with one `vkCmdExecuteCommands` instead of recording each
/// command again. On an H200 recording a decode step's ~350 commands left the device idle for
/// 0.45–1 ms per token (bench/README.md, stop 26). The recording keeps its buffers and kernels
/// alive; each submission that runs it keeps it alive until it has run.
pub(crate) struct KeptCommands {
    rec: Recording,
    built: parking_lot::Mutex<Option<BuiltCommands>>,
}

#[allow(dead_code)] // the pool and parameters are held only to keep them alive
struct BuiltCommands {
    pool: CommandPool,
    command_buffer: CommandPoolAlloc,
    params: Subbuffer<[u8]>,
}

impl KeptCommands {
    /// `None` if the recording holds staging buffers (they belong to one submission).
    pub(crate) fn new(rec: Recording) -> Option<Arc<KeptCommands>> {
        if rec.keep.iter().any(|k| matches!(k, Keep::Staging(_))) || rec.commands.iter().any(|c| matches!(c, Command::Kept(_))) {
            return None;
        }
        Some(Arc::new(KeptCommands { rec, built: parking_lot::Mutex::new(None) }))
    }

    /// Its secondary command buffer, recorded on first use.
    fn command_buffer(&self, dev: &DeviceHandles) -> Result<vk::CommandBuffer> {
        let mut built = self.built.lock();
        if let Some(b) = built.as_ref() {
            return Ok(b.command_buffer.handle());
        }
        let pool = CommandPool::new(
            dev.device.clone(),
            CommandPoolCreateInfo { queue_family_index: dev.queue.queue_family_index(), ..Default::default() },
        )
        .map_err(|e| EngineError::vk("command pool", e))?;
        let command_buffer = pool
            .allocate_command_buffers(CommandBufferAllocateInfo { level: CommandBufferLevel::Secondary, command_buffer_count: 1, ..Default::default() })
            .map_err(|e| EngineError::vk("command buffer", e))?
            .next()
            .ok_or_else(|| EngineError::Vulkan("no command buffer allocated".into()))?;
        let (params, address) = new_arena(dev, (self.rec.params.len() as u64).max(16))?;
        if !self.rec.params.is_empty() {
            let mut w = params.write().map_err(|e| EngineError::vk("writing parameters", e))?;
            w[..self.rec.params.len()].copy_from_slice(&self.rec.params);
        }
        let fns = dev.device.fns();
        let cb = command_buffer.handle();
        // SAFETY: the command buffer is new and recorded here once, under the lock; what it
        // names (pipelines, buffers, the parameter buffer) lives as long as this KeptCommands,
        // which every submission running it keeps alive until its fence has signalled.
        unsafe {
            let inheritance = vk::CommandBufferInheritanceInfo::default();
            let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE).inheritance_info(&inheritance);
            (fns.v1_0.begin_command_buffer)(cb, &begin).result().map_err(|e| EngineError::vk("begin", e))?;
            record_commands(dev, cb, &self.rec.commands, address, None)?;
            (fns.v1_0.end_command_buffer)(cb).result().map_err(|e| EngineError::vk("end", e))?;
        }
        *built = Some(BuiltCommands { pool, command_buffer, params });
        Ok(cb)
    }
}

/// The stages a submission's commands run in (dispatches and copies).
const COMMAND_STAGES: vk::PipelineStageFlags = vk::PipelineStageFlags::from_raw(vk::PipelineStageFlags::COMPUTE_SHADER.as_raw() | vk::PipelineStageFlags::TRANSFER.as_raw());

/// Records `commands` into `cb`: a barrier before each (except dispatches recorded as
/// concurrent with the one before), then the command, with parameters at `params_address`;
/// with `timestamps`, each command bracketed by a pair of queries (`Profiling::Commands`) or
/// the whole list by one pair (`Profiling::Submissions`).
///
/// # Safety
/// `cb` is recording and owned by the caller; every handle the commands name outlives its use.
unsafe fn record_commands(dev: &DeviceHandles, cb: vk::CommandBuffer, commands: &[Command], params_address: u64, timestamps: Option<(vk::QueryPool, Profiling)>) -> Result<()> {
    let fns = dev.device.fns();
    let all = vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE;
    let barrier = vk::MemoryBarrier::default().src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE).dst_access_mask(all);
    let mut bound = vk::Pipeline::null();
    let last = commands.len().saturating_sub(1);
    let per_command = matches!(timestamps, Some((_, Profiling::Commands)));
    // A barrier before every command, the first included: earlier submissions may still be
    // running on the queue, and a barrier orders against everything submitted before. (A
    // dispatch recorded as concurrent with the one before it — it neither reads what that one
    // writes nor writes what it touches — skips it, so the two may overlap.)
    // NX_VULKAN_BARRIER=compute (a measurement): between two dispatches of this list, a
    // compute-to-compute barrier (shader writes before shader reads and writes) instead of the
    // one that also names transfers.
    static COMPUTE_ONLY: once_cell::sync::Lazy<bool> = once_cell::sync::Lazy::new(|| std::env::var("NX_VULKAN_BARRIER").as_deref() == Ok("compute"));
    let compute_barrier = vk::MemoryBarrier::default().src_access_mask(vk::AccessFlags::SHADER_WRITE).dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE);
    for (i, command) in commands.iter().enumerate() {
        if !matches!(command, Command::Dispatch { concurrent: true, .. } | Command::Kept(_)) {
            let after_dispatch = i > 0 && matches!(commands[i - 1], Command::Dispatch { .. });
            if *COMPUTE_ONLY && after_dispatch && matches!(command, Command::Dispatch { .. }) {
                let stage = vk::PipelineStageFlags::COMPUTE_SHADER;
                (fns.v1_0.cmd_pipeline_barrier)(cb, stage, stage, vk::DependencyFlags::empty(), 1, &compute_barrier, 0, std::ptr::null(), 0, std::ptr::null());
            } else {
                (fns.v1_0.cmd_pipeline_barrier)(cb, COMMAND_STAGES, COMMAND_STAGES, vk::DependencyFlags::empty(), 1, &barrier, 0, std::ptr::null(), 0, std::ptr::null());
            }
        }
        if let Some((qp, _)) = timestamps.filter(|_| per_command || i == 0) {
            (fns.v1_0.cmd_write_timestamp)(cb, vk::PipelineStageFlags::TOP_OF_PIPE, qp, if per_command { 2 * i as u32 } else { 0 });
        }
        match command {
            Command::Dispatch { kernel, params_offset, count, groups, .. } => {
                let pipeline = kernel.pipeline_handle();
                if pipeline != bound {
                    (fns.v1_0.cmd_bind_pipeline)(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
                    bound = pipeline;
                }
                let push = PushConstants { params: params_address + params_offset, count: *count, _pad: 0 };
                (fns.v1_0.cmd_push_constants)(
                    cb,
                    dev.layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    std::mem::size_of::<PushConstants>() as u32,
                    &push as *const PushConstants as *const std::ffi::c_void,
                );
                (fns.v1_0.cmd_dispatch)(cb, groups[0], groups[1], groups[2]);
            }
            Command::Copy { src, src_offset, dst, dst_offset, bytes } => {
                let region = vk::BufferCopy { src_offset: *src_offset, dst_offset: *dst_offset, size: *bytes };
                (fns.v1_0.cmd_copy_buffer)(cb, *src, *dst, 1, &region);
            }
            Command::Kept(kept) => {
                let secondary = kept.command_buffer(dev)?;
                (fns.v1_0.cmd_execute_commands)(cb, 1, &secondary);
                // The primary's bound pipeline is undefined after a secondary has run.
                bound = vk::Pipeline::null();
            }
        }
        if let Some((qp, _)) = timestamps.filter(|_| per_command || i == last) {
            (fns.v1_0.cmd_write_timestamp)(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, qp, if per_command { 2 * i as u32 + 1 } else { 1 });
        }
    }
    Ok(())
}

/// Commands with their parameter bytes and what they keep alive: what one op records, and
/// what the stream gathers from many ops into one submission.
#[derive(Default)]
pub(crate) struct Recording {
    pub params: Vec<u8>,
    pub commands: Vec<Command>,
    pub keep: Vec<Keep>,
}

impl Recording {
    pub(crate) fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Appends `other`'s commands after ours (parameter offsets rebased).
    pub(crate) fn append(&mut self, other: Recording) {
        let base = self.params.len().next_multiple_of(16) as u64;
        self.params.resize(base as usize, 0);
        self.params.extend_from_slice(&other.params);
        self.commands.extend(other.commands.into_iter().map(|c| match c {
            // An appended op's first command keeps its barrier (it was recorded first).
            Command::Dispatch { kernel, params_offset, count, groups, concurrent } => {
                Command::Dispatch { kernel, params_offset: params_offset + base, count, groups, concurrent }
            }
            copy => copy,
        }));
        self.keep.extend(other.keep);
    }

    /// A copy to record again (a kept program replayed): `None` if it holds staging buffers,
    /// which belong to one submission.
    pub(crate) fn duplicate(&self) -> Option<Recording> {
        let keep = self
            .keep
            .iter()
            .map(|k| match k {
                Keep::Buffer(b) => Some(Keep::Buffer(b.clone())),
                Keep::Kernel(k) => Some(Keep::Kernel(k.clone())),
                Keep::Kept(k) => Some(Keep::Kept(k.clone())),
                Keep::Staging(_) => None,
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Recording { params: self.params.clone(), commands: self.commands.clone(), keep })
    }

    /// Takes out the device buffers this recording keeps (released when the op is committed;
    /// kernels and staging stay with the submission until it has run).
    pub(crate) fn take_buffers(&mut self) -> Vec<Keep> {
        let (buffers, rest) = std::mem::take(&mut self.keep).into_iter().partition(|k| matches!(k, Keep::Buffer(_)));
        self.keep = rest;
        buffers
    }
}

/// Names of the kernels a submission kept (for the error message when it failed; computed only
/// then, never on the hot path).
pub(crate) fn kernel_names(keep: &[Keep]) -> Vec<String> {
    let mut names: Vec<String> = vec![];
    for k in keep {
        if let Keep::Kernel(kernel) = k {
            if !names.iter().any(|n| n == kernel.name()) {
                names.push(kernel.name().to_string());
            }
        }
    }
    names
}

/// One op's recording in progress. `finish` hands it to the stream (queued, not waited for);
/// `finish_and_wait` also waits until the device has run it.
pub struct Batch<'a> {
    ctx: &'a crate::Context,
    rec: Recording,
    /// The next command is recorded as concurrent (see [`Batch::next_concurrent`]).
    next_concurrent: bool,
}

impl<'a> Batch<'a> {
    pub(crate) fn new(ctx: &'a crate::Context) -> Batch<'a> {
        Batch { ctx, rec: Recording::default(), next_concurrent: false }
    }

    /// With `yes`, the next command is recorded without the barrier in front, as
    /// [`Batch::dispatch_grid_concurrent`] does, whichever recorder adds it: for a caller that
    /// knows the op it records next reads nothing written since the last barrier and writes
    /// only buffers nothing recorded since then touches (the compiled plan's independent
    /// steps). Only a dispatch after a dispatch honours it; a copy keeps its barrier. With
    /// `no`, a request not yet used (the op recorded nothing) is withdrawn.
    pub(crate) fn next_concurrent(&mut self, yes: bool) {
        self.next_concurrent = yes;
    }

    /// Commands recorded so far.
    pub(crate) fn commands(&self) -> usize {
        self.rec.commands.len()
    }

    /// Whether the command at `index` was recorded without a barrier in front.
    pub(crate) fn is_concurrent(&self, index: usize) -> bool {
        matches!(self.rec.commands.get(index), Some(Command::Dispatch { concurrent: true, .. }))
    }

    /// Adds a dispatch of `kernel` over `count` work items with the given parameter block
    /// (addresses and sizes the kernel reads). `groups` is derived from the kernel's
    /// workgroup size and capped to the device limit: kernels loop over what remains.
    pub fn dispatch(&mut self, kernel: &Arc<Kernel>, params: &[u8], count: u64) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let count32 = u32::try_from(count)
            .map_err(|_| EngineError::InvalidArgument(format!("{count} work items exceed 2^32 in one dispatch")))?;
        let groups = count.div_ceil(kernel.items_per_group() as u64);
        let max = self.ctx.caps.max_workgroup_count[0].min(max_groups()) as u64;
        let x = groups.min(max) as u32;
        self.push_dispatch(kernel, params, count32, [x, 1, 1], false)
    }

    /// Adds a dispatch with an explicit grid (for kernels that map groups to tiles).
    pub fn dispatch_grid(&mut self, kernel: &Arc<Kernel>, params: &[u8], count: u32, groups: [u32; 3]) -> Result<()> {
        if groups.contains(&0) {
            return Ok(());
        }
        self.check_grid(groups)?;
        self.push_dispatch(kernel, params, count, groups, false)
    }

    /// [`Batch::dispatch_grid`] without the barrier in front: the device may run it alongside
    /// the dispatches recorded since the last barrier in this batch. Only for a dispatch that
    /// reads nothing those write and writes nothing they read or write (the Q, K and V
    /// products of one input, say). The first command of a batch always keeps its barrier.
    pub fn dispatch_grid_concurrent(&mut self, kernel: &Arc<Kernel>, params: &[u8], count: u32, groups: [u32; 3]) -> Result<()> {
        if groups.contains(&0) {
            return Ok(());
        }
        self.check_grid(groups)?;
        let concurrent = matches!(self.rec.commands.last(), Some(Command::Dispatch { .. }));
        self.push_dispatch(kernel, params, count, groups, concurrent)
    }

    fn check_grid(&self, groups: [u32; 3]) -> Result<()> {
        for (g, max) in groups.iter().zip(self.ctx.caps.max_workgroup_count) {
            if *g > max {
                return Err(EngineError::InvalidArgument(format!("grid {groups:?} exceeds the device limit")));
            }
        }
        Ok(())
    }

    fn push_dispatch(&mut self, kernel: &Arc<Kernel>, params: &[u8], count: u32, groups: [u32; 3], concurrent: bool) -> Result<()> {
        if skipped_kernel(kernel.name()) {
            return Ok(());
        }
        let asked = std::mem::take(&mut self.next_concurrent);
        let concurrent = concurrent || (asked && matches!(self.rec.commands.last(), Some(Command::Dispatch { .. })));
        // 16-byte alignment keeps 64-bit fields in the block aligned.
        let rec = &mut self.rec;
        let params_offset = rec.params.len().next_multiple_of(16) as u64;
        rec.params.resize(params_offset as usize, 0);
        rec.params.extend_from_slice(params);
        rec.keep.push(Keep::Kernel(kernel.clone()));
        rec.commands.push(Command::Dispatch { kernel: kernel.clone(), params_offset, count, groups, concurrent });
        Ok(())
    }

    /// Keeps `buffer` alive until this op is committed to the stream (scratch buffers an op
    /// allocates and drops while recording must not return to the pool before that).
    pub fn keep(&mut self, buffer: &Arc<DeviceBuffer>) {
        self.rec.keep.push(Keep::Buffer(buffer.clone()));
    }

    pub(crate) fn keep_staging(&mut self, buffer: crate::memory::StagingBuffer) {
        self.rec.keep.push(Keep::Staging(buffer));
    }

    pub(crate) fn copy_raw(&mut self, src: vk::Buffer, src_offset: u64, dst: vk::Buffer, dst_offset: u64, bytes: u64) {
        if bytes > 0 {
            self.next_concurrent = false;
            self.rec.commands.push(Command::Copy { src, src_offset, dst, dst_offset, bytes });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rec.is_empty()
    }

    /// The commands recorded so far, to keep and replay ([`Batch::append`]) instead of
    /// finishing this batch.
    pub(crate) fn into_recording(self) -> Recording {
        self.rec
    }

    /// Appends a kept recording (its first command keeps its barrier).
    pub(crate) fn append(&mut self, rec: Recording) {
        self.next_concurrent = false;
        self.rec.append(rec);
    }

    /// Appends commands kept in a command buffer of their own (see [`KeptCommands`]).
    pub(crate) fn append_kept(&mut self, kept: &Arc<KeptCommands>) {
        self.next_concurrent = false;
        self.rec.commands.push(Command::Kept(kept.clone()));
        self.rec.keep.push(Keep::Kept(kept.clone()));
    }

    /// Queues the recorded work on the device's stream and returns without waiting (or waits,
    /// in synchronous mode). Errors in the queued work surface at the next synchronisation point.
    pub fn finish(self) -> Result<()> {
        self.ctx.stream.commit(self.rec).map(|_| ())
    }

    /// Queues the recorded work and has it submitted now rather than gathered with later ops
    /// (chunked transfers overlap host and device copies this way). Returns the stream id to
    /// `wait_for`.
    pub(crate) fn finish_submitted(self) -> Result<u64> {
        let stream = &self.ctx.stream;
        let id = stream.commit(self.rec)?;
        stream.submit_now(id);
        Ok(id)
    }

    /// Queues the recorded work and waits until the device has run it (and everything queued
    /// before it).
    pub fn finish_and_wait(self) -> Result<()> {
        let stream = &self.ctx.stream;
        let id = stream.commit(self.rec)?;
        stream.wait_for(id)
    }
}
