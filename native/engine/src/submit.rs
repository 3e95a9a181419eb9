//! Submission: many dispatches recorded into one command buffer, one fence wait per batch.
//!
//! Kernels address memory through device addresses, which vulkano's automatic synchronisation
//! cannot see, so recording goes straight to the Vulkan function table with explicit barriers.
//! Each `Submitter` owns a command pool, one command buffer, one fence (reused, never
//! re-created) and a host-visible arena for kernel parameters; submitters are pooled so many
//! threads can record at once, and the queue itself is taken under vulkano's queue lock.

use crate::error::{EngineError, Result};
use crate::kernel::Kernel;
use crate::memory::DeviceBuffer;
use ash::vk;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use vulkano::buffer::{Buffer, BufferCreateInfo, BufferUsage, Subbuffer};
use vulkano::command_buffer::pool::{
    CommandBufferAllocateInfo, CommandPool, CommandPoolAlloc, CommandPoolCreateFlags,
    CommandPoolCreateInfo,
};
use vulkano::memory::allocator::{AllocationCreateInfo, MemoryTypeFilter};
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

/// Bytes of kernel parameters a batch may hold before the arena grows.
const PARAM_ARENA_BYTES: u64 = 1 << 16;

pub(crate) struct Submitter {
    _pool: CommandPool,
    command_buffer: CommandPoolAlloc,
    fence: Fence,
    arena: Subbuffer<[u8]>,
    arena_address: u64,
}

impl Submitter {
    pub(crate) fn new(ctx: &crate::Context) -> Result<Submitter> {
        let device = ctx.device.clone();
        let pool = CommandPool::new(
            device.clone(),
            CommandPoolCreateInfo {
                flags: CommandPoolCreateFlags::RESET_COMMAND_BUFFER | CommandPoolCreateFlags::TRANSIENT,
                queue_family_index: ctx.queue.queue_family_index(),
                ..Default::default()
            },
        )
        .map_err(|e| EngineError::vk("command pool", e))?;
        let command_buffer = pool
            .allocate_command_buffers(CommandBufferAllocateInfo {
                command_buffer_count: 1,
                ..Default::default()
            })
            .map_err(|e| EngineError::vk("command buffer", e))?
            .next()
            .ok_or_else(|| EngineError::Vulkan("no command buffer allocated".into()))?;
        let fence = Fence::new(device, FenceCreateInfo::default()).map_err(|e| EngineError::vk("fence", e))?;
        let (arena, arena_address) = new_arena(ctx, PARAM_ARENA_BYTES)?;
        Ok(Submitter { _pool: pool, command_buffer, fence, arena, arena_address })
    }
}

fn new_arena(ctx: &crate::Context, bytes: u64) -> Result<(Subbuffer<[u8]>, u64)> {
    let arena = Buffer::new_slice::<u8>(
        ctx.memory_allocator.clone(),
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

/// What a batch keeps alive until its fence signals.
#[allow(dead_code)] // held only to keep the resources alive
enum Keep {
    Buffer(Arc<DeviceBuffer>),
    Host(Subbuffer<[u8]>),
    Kernel(Arc<Kernel>),
}

/// A recording in progress: dispatches and copies, submitted together by `finish`.
pub struct Batch<'a> {
    ctx: &'a crate::Context,
    submitter: Option<Submitter>,
    params: Vec<u8>,
    commands: Vec<Command>,
    keep: Vec<Keep>,
}

enum Command {
    Dispatch { kernel: Arc<Kernel>, params_offset: u64, count: u32, groups: [u32; 3] },
    Copy { src: vk::Buffer, src_offset: u64, dst: vk::Buffer, dst_offset: u64, bytes: u64 },
}

impl<'a> Batch<'a> {
    pub(crate) fn new(ctx: &'a crate::Context) -> Result<Batch<'a>> {
        let submitter = match ctx.submitters.lock().pop() {
            Some(s) => s,
            None => {
                ctx.submitters_made.fetch_add(1, Relaxed);
                Submitter::new(ctx)?
            }
        };
        Ok(Batch { ctx, submitter: Some(submitter), params: vec![], commands: vec![], keep: vec![] })
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
        let params_offset = self.params.len().next_multiple_of(16) as u64;
        self.params.resize(params_offset as usize, 0);
        self.params.extend_from_slice(params);
        self.keep.push(Keep::Kernel(kernel.clone()));
        self.commands.push(Command::Dispatch { kernel: kernel.clone(), params_offset, count, groups });
        Ok(())
    }

    /// Keeps `buffer` alive until the batch completes.
    pub fn keep(&mut self, buffer: &Arc<DeviceBuffer>) {
        self.keep.push(Keep::Buffer(buffer.clone()));
    }

    pub(crate) fn keep_host(&mut self, buffer: Subbuffer<[u8]>) {
        self.keep.push(Keep::Host(buffer));
    }

    pub(crate) fn copy_raw(&mut self, src: vk::Buffer, src_offset: u64, dst: vk::Buffer, dst_offset: u64, bytes: u64) {
        if bytes > 0 {
            self.commands.push(Command::Copy { src, src_offset, dst, dst_offset, bytes });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Records everything, submits once and waits (spinning briefly before blocking).
    pub fn finish(mut self) -> Result<()> {
        let result = self.run();
        let ok = result.is_ok();
        if let Some(sub) = self.submitter.take() {
            if ok {
                self.ctx.submitters.lock().push(sub);
            } // after a failure the submitter's state is unknown: drop it
        }
        result
    }

    fn run(&mut self) -> Result<()> {
        if self.commands.is_empty() {
            return Ok(());
        }
        let ctx = self.ctx;
        let sub = self.submitter.as_mut().expect("submitter present until finish");
        if self.params.len() as u64 > sub.arena.len() {
            let (arena, address) = new_arena(ctx, (self.params.len() as u64).next_power_of_two())?;
            sub.arena = arena;
            sub.arena_address = address;
        }
        if !self.params.is_empty() {
            let mut w = sub.arena.write().map_err(|e| EngineError::vk("writing parameters", e))?;
            w[..self.params.len()].copy_from_slice(&self.params);
        }
        let fns = ctx.device.fns();
        let cb = sub.command_buffer.handle();
        let layout = ctx.kernels.layout_handle();
        // SAFETY: the command buffer belongs to this submitter, which only this batch uses;
        // every handle recorded (pipelines, buffers, the arena) is kept alive in `self.keep` or
        // by the submitter until the fence wait below returns.
        unsafe {
            let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            (fns.v1_0.begin_command_buffer)(cb, &begin).result().map_err(|e| EngineError::vk("begin", e))?;
            let barrier = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(
                    vk::AccessFlags::SHADER_READ
                        | vk::AccessFlags::SHADER_WRITE
                        | vk::AccessFlags::TRANSFER_READ
                        | vk::AccessFlags::TRANSFER_WRITE,
                );
            let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
            let mut bound = vk::Pipeline::null();
            for (i, command) in self.commands.iter().enumerate() {
                if i > 0 {
                    (fns.v1_0.cmd_pipeline_barrier)(cb, stages, stages, vk::DependencyFlags::empty(), 1, &barrier, 0, std::ptr::null(), 0, std::ptr::null());
                }
                match command {
                    Command::Dispatch { kernel, params_offset, count, groups } => {
                        let pipeline = kernel.pipeline_handle();
                        if pipeline != bound {
                            (fns.v1_0.cmd_bind_pipeline)(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
                            bound = pipeline;
                        }
                        let push = PushConstants { params: sub.arena_address + params_offset, count: *count, _pad: 0 };
                        (fns.v1_0.cmd_push_constants)(
                            cb,
                            layout,
                            vk::ShaderStageFlags::COMPUTE,
                            0,
                            std::mem::size_of::<PushConstants>() as u32,
                            &push as *const PushConstants as *const std::ffi::c_void,
                        );
                        (fns.v1_0.cmd_dispatch)(cb, groups[0], groups[1], groups[2]);
                        ctx.stats.dispatches.fetch_add(1, Relaxed);
                    }
                    Command::Copy { src, src_offset, dst, dst_offset, bytes } => {
                        let region = vk::BufferCopy { src_offset: *src_offset, dst_offset: *dst_offset, size: *bytes };
                        (fns.v1_0.cmd_copy_buffer)(cb, *src, *dst, 1, &region);
                        ctx.stats.copies.fetch_add(1, Relaxed);
                    }
                }
            }
            (fns.v1_0.end_command_buffer)(cb).result().map_err(|e| EngineError::vk("end", e))?;
            let cbs = [cb];
            let submit = vk::SubmitInfo::default().command_buffers(&cbs);
            let fence = sub.fence.handle();
            ctx.queue
                .with(|_guard| (fns.v1_0.queue_submit)(ctx.queue.handle(), 1, &submit, fence))
                .result()
                .map_err(|e| EngineError::vk("queue submit", e))?;
            ctx.stats.submits.fetch_add(1, Relaxed);
        }
        // A short spin catches fast kernels without a sleep/wake round trip.
        let spin_until = Instant::now() + Duration::from_micros(200);
        loop {
            match sub.fence.is_signaled() {
                Ok(true) => break,
                Ok(false) if Instant::now() < spin_until => std::hint::spin_loop(),
                Ok(false) => {
                    sub.fence.wait(None).map_err(|e| EngineError::vk("fence wait", e))?;
                    break;
                }
                Err(e) => return Err(EngineError::vk("fence status", e)),
            }
        }
        // SAFETY: the fence has signalled, so no queue operation uses it any more.
        unsafe { sub.fence.reset() }.map_err(|e| EngineError::vk("fence reset", format!("{e:?}")))?;
        self.keep.clear();
        Ok(())
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        // A batch dropped without `finish` was never submitted: its submitter is clean.
        if let Some(sub) = self.submitter.take() {
            self.ctx.submitters.lock().push(sub);
        }
    }
}

/// The push-constant block every kernel declares: where its parameters are and how many items.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct PushConstants {
    pub params: u64,
    pub count: u32,
    pub _pad: u32,
}
