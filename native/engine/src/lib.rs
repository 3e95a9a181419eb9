//! nx_vulkan's compute engine: Vulkan devices, pooled device buffers, generated kernels.
//!
//! This crate knows nothing of the BEAM. `Context` is one opened device; everything runs
//! through it:
//!
//! ```no_run
//! use nx_vulkan_engine::{Context, DType, UnaryOp};
//! let ctx = Context::open(&nx_vulkan_engine::DeviceSelector::from_env())?;
//! let x = ctx.upload(DType::F32, &[3], &[0u8; 12])?;
//! let y = ctx.unary(UnaryOp::Exp, &x, DType::F32)?;
//! let bytes = ctx.download(&y)?;
//! # Ok::<(), nx_vulkan_engine::EngineError>(())
//! ```
//!
//! Vulkan pipeline creation (lavapipe) and glslang need deep stacks: call the engine from
//! threads with large stacks, e.g. through [`exec::run`].

pub mod device;
pub mod dtype;
pub mod elementwise;
pub mod error;
pub mod exec;
pub mod fft;
pub mod indexing;
pub mod kernel;
pub mod kernels;
pub mod matmul;
pub mod memory;
pub mod ops;
pub mod reduce;
pub mod scan;
pub mod sort;
pub mod submit;
pub mod tensor;
pub mod window;
pub mod conv;

pub use device::{list_devices, DeviceCaps, DeviceSelector};
pub use dtype::DType;
pub use elementwise::{Access, BinaryOp, Expr, Scalar, UnaryOp};
pub use error::{EngineError, Result};
pub use memory::PoolStats;
pub use tensor::Tensor;
pub use vulkano;

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use vulkano::device::{Device, DeviceCreateInfo, DeviceExtensions, DeviceFeatures, Queue, QueueCreateInfo, QueueFlags};
use vulkano::memory::allocator::StandardMemoryAllocator;

/// Counters that show where work ran: tests assert on them.
#[derive(Default)]
pub(crate) struct Counters {
    pub dispatches: AtomicU64,
    pub submits: AtomicU64,
    pub copies: AtomicU64,
    pub uploads: AtomicU64,
    pub downloads: AtomicU64,
}

/// A snapshot of the engine's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Compute dispatches recorded and submitted.
    pub dispatches: u64,
    /// Queue submissions (one per batch).
    pub submits: u64,
    /// Buffer-to-buffer copies (transfers).
    pub copies: u64,
    pub uploads: u64,
    pub downloads: u64,
    /// Distinct pipelines built.
    pub pipelines: u64,
    /// Kernel lookups (hits and builds).
    pub kernel_lookups: u64,
    /// Submitters (command pool + command buffer + fence) created so far.
    pub submitters: u64,
    pub pool: PoolStats,
}

static GLOBAL: once_cell::sync::OnceCell<Arc<Context>> = once_cell::sync::OnceCell::new();

/// One opened Vulkan device with its queue, memory pool, kernels and submitters.
pub struct Context {
    pub(crate) device: Arc<Device>,
    pub(crate) queue: Arc<Queue>,
    pub(crate) memory_allocator: Arc<StandardMemoryAllocator>,
    pub caps: DeviceCaps,
    pub pool: memory::BufferPool,
    pub kernels: kernel::KernelCache,
    pub(crate) submitters: Mutex<Vec<submit::Submitter>>,
    pub(crate) submitters_made: AtomicU64,
    pub(crate) stats: Counters,
}

impl Context {
    /// Opens the selected device. A device that is absent or lacks what the engine needs is an
    /// error naming what is missing — never a switch to another device.
    pub fn open(selector: &DeviceSelector) -> Result<Arc<Context>> {
        let (index, physical) = device::select(selector)?;
        let caps = DeviceCaps::read(index, &physical);
        let missing = caps.missing_requirements();
        if !missing.is_empty() {
            return Err(EngineError::Unsupported { device: caps.name.clone(), what: format!("missing {}", missing.join(", ")) });
        }
        let family = physical
            .queue_family_properties()
            .iter()
            .position(|q| q.queue_flags.contains(QueueFlags::COMPUTE))
            .ok_or_else(|| EngineError::Unsupported { device: caps.name.clone(), what: "no compute queue".into() })?
            as u32;
        let features = DeviceFeatures {
            buffer_device_address: true,
            shader_int64: true,
            shader_float64: true,
            shader_int8: true,
            shader_int16: true,
            storage_buffer8_bit_access: true,
            storage_buffer16_bit_access: true,
            shader_float16: caps.float16,
            ..DeviceFeatures::empty()
        };
        let (device, mut queues) = Device::new(
            physical,
            DeviceCreateInfo {
                queue_create_infos: vec![QueueCreateInfo { queue_family_index: family, ..Default::default() }],
                enabled_extensions: DeviceExtensions::empty(),
                enabled_features: features,
                ..Default::default()
            },
        )
        .map_err(|e| EngineError::vk("creating the device", e))?;
        let queue = queues.next().ok_or_else(|| EngineError::Vulkan("no queue".into()))?;
        let memory_allocator = Arc::new(StandardMemoryAllocator::new_default(device.clone()));
        let pool = memory::BufferPool::new(memory_allocator.clone(), caps.device_local_bytes, caps.max_allocation_size);
        let kernels = kernel::KernelCache::new(device.clone(), &caps)?;
        Ok(Arc::new(Context {
            device,
            queue,
            memory_allocator,
            caps,
            pool,
            kernels,
            submitters: Mutex::new(vec![]),
            submitters_made: AtomicU64::new(0),
            stats: Counters::default(),
        }))
    }

    /// The process-wide context: the device chosen by `init_global`, else by
    /// `NX_VULKAN_DEVICE` (opened once, on first use).
    pub fn global() -> Result<Arc<Context>> {
        GLOBAL.get_or_try_init(|| Context::open(&DeviceSelector::from_env())).cloned()
    }

    /// Opens `selector` as the process-wide context. Asking again for the device already open
    /// is fine; asking for another one is an error (tensors live on the first).
    pub fn init_global(selector: &DeviceSelector) -> Result<Arc<Context>> {
        let ctx = GLOBAL.get_or_try_init(|| Context::open(selector))?.clone();
        let (wanted, _) = device::select(selector)?;
        if wanted != ctx.caps.index {
            return Err(EngineError::InvalidArgument(format!(
                "device {} ({}) is already in use by this process; cannot switch to {selector:?}",
                ctx.caps.index, ctx.caps.name
            )));
        }
        Ok(ctx)
    }

    pub fn stats(&self) -> EngineStats {
        EngineStats {
            dispatches: self.stats.dispatches.load(Relaxed),
            submits: self.stats.submits.load(Relaxed),
            copies: self.stats.copies.load(Relaxed),
            uploads: self.stats.uploads.load(Relaxed),
            downloads: self.stats.downloads.load(Relaxed),
            pipelines: self.kernels.stats.compiled.load(Relaxed),
            kernel_lookups: self.kernels.stats.lookups.load(Relaxed),
            submitters: self.submitters_made.load(Relaxed),
            pool: self.pool.stats(),
        }
    }

    /// Starts a batch of dispatches submitted together.
    pub fn batch(&self) -> Result<submit::Batch<'_>> {
        submit::Batch::new(self)
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context({})", self.caps.name)
    }
}
