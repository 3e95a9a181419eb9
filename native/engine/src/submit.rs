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
use vulkano::command_buffer::pool::{
    CommandBufferAllocateInfo, CommandPool, CommandPoolAlloc, CommandPoolCreateFlags,
    CommandPoolCreateInfo,
};
use vulkano::device::{Device, Queue};
use vulkano::memory::allocator::{AllocationCreateInfo, MemoryTypeFilter, StandardMemoryAllocator};
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
}

pub(crate) struct Submitter {
    _pool: CommandPool,
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
        Ok(Submitter { _pool: pool, command_buffer, fence, arena, arena_address })
    }

    /// Records `rec` into this submitter's command buffer and submits it, signalling the fence
    /// when the device is done. Does not wait.
    pub(crate) fn submit(&mut self, dev: &DeviceHandles, rec: &Recording) -> Result<()> {
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
            let all = vk::AccessFlags::SHADER_READ
                | vk::AccessFlags::SHADER_WRITE
                | vk::AccessFlags::TRANSFER_READ
                | vk::AccessFlags::TRANSFER_WRITE;
            let barrier = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(all);
            let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
            let mut bound = vk::Pipeline::null();
            // A barrier before every command, the first included: earlier submissions may still
            // be running on the queue, and a barrier orders against everything submitted before.
            for command in &rec.commands {
                (fns.v1_0.cmd_pipeline_barrier)(cb, stages, stages, vk::DependencyFlags::empty(), 1, &barrier, 0, std::ptr::null(), 0, std::ptr::null());
                match command {
                    Command::Dispatch { kernel, params_offset, count, groups } => {
                        let pipeline = kernel.pipeline_handle();
                        if pipeline != bound {
                            (fns.v1_0.cmd_bind_pipeline)(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
                            bound = pipeline;
                        }
                        let push = PushConstants { params: self.arena_address + params_offset, count: *count, _pad: 0 };
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
                }
            }
            // Device writes made visible to host reads (downloads map memory after the fence).
            let to_host = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::HOST_READ);
            (fns.v1_0.cmd_pipeline_barrier)(cb, stages, vk::PipelineStageFlags::HOST, vk::DependencyFlags::empty(), 1, &to_host, 0, std::ptr::null(), 0, std::ptr::null());
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

/// What a submission keeps alive until its fence signals. Dropping a `DeviceBuffer` returns it
/// to the pool, so a buffer the user dropped while work on it is queued is reused only after
/// that work has completed.
#[allow(dead_code)] // held only to keep the resources alive
pub(crate) enum Keep {
    Buffer(Arc<DeviceBuffer>),
    Staging(crate::memory::StagingBuffer),
    Kernel(Arc<Kernel>),
}

pub(crate) enum Command {
    Dispatch { kernel: Arc<Kernel>, params_offset: u64, count: u32, groups: [u32; 3] },
    Copy { src: vk::Buffer, src_offset: u64, dst: vk::Buffer, dst_offset: u64, bytes: u64 },
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
            Command::Dispatch { kernel, params_offset, count, groups } => {
                Command::Dispatch { kernel, params_offset: params_offset + base, count, groups }
            }
            copy => copy,
        }));
        self.keep.extend(other.keep);
    }

    /// Names of the kernels recorded (for error messages about queued work).
    pub(crate) fn labels(&self) -> Vec<String> {
        let mut names: Vec<String> = vec![];
        for c in &self.commands {
            let name = match c {
                Command::Dispatch { kernel, .. } => kernel.name().to_string(),
                Command::Copy { .. } => "copy".to_string(),
            };
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }
}

/// One op's recording in progress. `finish` hands it to the stream (queued, not waited for);
/// `finish_and_wait` also waits until the device has run it.
pub struct Batch<'a> {
    ctx: &'a crate::Context,
    rec: Recording,
}

impl<'a> Batch<'a> {
    pub(crate) fn new(ctx: &'a crate::Context) -> Batch<'a> {
        Batch { ctx, rec: Recording::default() }
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
        self.push_dispatch(kernel, params, count32, [x, 1, 1])
    }

    /// Adds a dispatch with an explicit grid (for kernels that map groups to tiles).
    pub fn dispatch_grid(&mut self, kernel: &Arc<Kernel>, params: &[u8], count: u32, groups: [u32; 3]) -> Result<()> {
        if groups.contains(&0) {
            return Ok(());
        }
        for (g, max) in groups.iter().zip(self.ctx.caps.max_workgroup_count) {
            if *g > max {
                return Err(EngineError::InvalidArgument(format!("grid {groups:?} exceeds the device limit")));
            }
        }
        self.push_dispatch(kernel, params, count, groups)
    }

    fn push_dispatch(&mut self, kernel: &Arc<Kernel>, params: &[u8], count: u32, groups: [u32; 3]) -> Result<()> {
        // 16-byte alignment keeps 64-bit fields in the block aligned.
        let rec = &mut self.rec;
        let params_offset = rec.params.len().next_multiple_of(16) as u64;
        rec.params.resize(params_offset as usize, 0);
        rec.params.extend_from_slice(params);
        rec.keep.push(Keep::Kernel(kernel.clone()));
        rec.commands.push(Command::Dispatch { kernel: kernel.clone(), params_offset, count, groups });
        Ok(())
    }

    /// Keeps `buffer` alive until the work recorded here has completed.
    pub fn keep(&mut self, buffer: &Arc<DeviceBuffer>) {
        self.rec.keep.push(Keep::Buffer(buffer.clone()));
    }

    pub(crate) fn keep_staging(&mut self, buffer: crate::memory::StagingBuffer) {
        self.rec.keep.push(Keep::Staging(buffer));
    }

    pub(crate) fn copy_raw(&mut self, src: vk::Buffer, src_offset: u64, dst: vk::Buffer, dst_offset: u64, bytes: u64) {
        if bytes > 0 {
            self.rec.commands.push(Command::Copy { src, src_offset, dst, dst_offset, bytes });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rec.is_empty()
    }

    /// Queues the recorded work on the device's stream and returns without waiting (or waits,
    /// in synchronous mode). Errors in the queued work surface at the next synchronisation point.
    pub fn finish(self) -> Result<()> {
        self.ctx.stream.commit(self.rec).map(|_| ())
    }

    /// Queues the recorded work and waits until the device has run it (and everything queued
    /// before it).
    pub fn finish_and_wait(self) -> Result<()> {
        let stream = &self.ctx.stream;
        let id = stream.commit(self.rec)?;
        stream.wait_for(id)
    }
}
