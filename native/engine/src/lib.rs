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
pub mod params;
pub mod plan;
pub mod reduce;
pub mod scan;
pub mod sort;
mod split_f32;
pub mod stream;
pub mod submit;
pub mod tensor;
pub mod window;
pub mod conv;
mod coopmat2;
pub mod encoder;
pub mod llm;

pub use device::{list_devices, DeviceCaps, DeviceSelector};
pub use dtype::DType;
pub use elementwise::{Access, BinaryOp, Expr, FloatMath, Scalar, UnaryOp};
pub use error::{EngineError, Result};
pub use memory::{GcHint, PoolStats};
pub use tensor::Tensor;
pub use vulkano;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use vulkano::device::QueueFlags;
use vulkano::memory::allocator::StandardMemoryAllocator;

/// Counters that show where work ran: tests assert on them.
#[derive(Default)]
pub(crate) struct Counters {
    pub dispatches: AtomicU64,
    pub concurrent_dispatches: AtomicU64,
    pub submits: AtomicU64,
    pub copies: AtomicU64,
    pub uploads: AtomicU64,
    pub downloads: AtomicU64,
    pub recordings: AtomicU64,
    pub submitters: AtomicU64,
    pub kept_runs: AtomicU64,
}

/// A snapshot of the engine's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Compute dispatches recorded (queued on the stream).
    pub dispatches: u64,
    /// Of those, dispatches recorded without a barrier in front (they may overlap the ones
    /// before them: independent steps of a compiled plan, an LLM layer's Q/K/V products).
    pub concurrent_dispatches: u64,
    /// Recordings committed to the stream: one per op (an op records all its dispatches
    /// into one), however the stream then gathers them into submissions.
    pub recordings: u64,
    /// Queue submissions (each holds one or more recordings).
    pub submits: u64,
    /// Buffer-to-buffer copies (transfers).
    pub copies: u64,
    pub uploads: u64,
    pub downloads: u64,
    /// Distinct pipelines built.
    pub pipelines: u64,
    /// Kernel lookups (hits and builds).
    pub kernel_lookups: u64,
    /// Pipelines whose SPIR-V came from the on-disk cache / was compiled / whose cache file was
    /// damaged or foreign (ignored and rebuilt).
    pub spirv_disk_hits: u64,
    pub spirv_disk_misses: u64,
    pub spirv_disk_rejected: u64,
    /// Pipelines the driver refused to build from SPIR-V glslang accepted (a multi-output
    /// elementwise kernel is then recorded as one kernel per output, with the same bits).
    pub refused_kernels: u64,
    /// Submitters (command pool + command buffer + fence) created so far.
    pub submitters: u64,
    /// Kept command buffers run (a kept LLM decode step replayed without recording its
    /// commands again; its dispatches and copies are counted above as well).
    pub kept_runs: u64,
    /// Submissions queued or running on the device now.
    pub in_flight: u64,
    pub pool: PoolStats,
}

static GLOBAL: once_cell::sync::OnceCell<Arc<Context>> = once_cell::sync::OnceCell::new();

/// One opened Vulkan device with its queue, memory pool, kernels and submitters.
pub struct Context {
    /// First field: dropped first, it waits for queued work before the rest goes.
    pub stream: stream::Stream,
    pub(crate) memory_allocator: Arc<StandardMemoryAllocator>,
    pub caps: DeviceCaps,
    pub pool: memory::BufferPool,
    pub kernels: kernel::KernelCache,
    pub(crate) staging: memory::StagingPool,
    /// Transfers go through staging buffers even where device memory is mapped (tests use
    /// this to exercise a discrete GPU's path on lavapipe).
    #[doc(hidden)]
    pub staged_transfers: std::sync::atomic::AtomicBool,
    /// Reductions finish their fixed tree with subgroup shuffles where the device has them
    /// (same combination order, same bits). Tests turn it off to compare the two.
    #[doc(hidden)]
    pub subgroup_reduction: std::sync::atomic::AtomicBool,
    /// Short-row reductions run on narrow workgroups ([`reduce::narrow_lanes`]: same fold
    /// order, same bits). Tests turn it off to compare the two.
    #[doc(hidden)]
    pub narrow_rows: std::sync::atomic::AtomicBool,
    /// Workgroups the encoder's projection grid should have before it takes a bigger tile
    /// ([`encoder::kernels::linear_tile`]: 128 on a GPU, 1 on a CPU device; same bits at every
    /// tile). Tests set the GPU's value on lavapipe to reach every tile.
    #[doc(hidden)]
    pub linear_min_groups: std::sync::atomic::AtomicUsize,
    /// Elements from which an elementwise kernel whose streams are all contiguous 8-, 16- or
    /// 32-bit elements (or one element broadcast) takes four elements per invocation, each
    /// stream's four as one load or store ([`elementwise::WIDE_MIN_ELEMENTS`];
    /// `NX_VULKAN_WIDE_MIN` overrides it, 0 turns the wide kernels off). Same code per
    /// element, same bits; tests lower it to reach every size and tail.
    #[doc(hidden)]
    pub wide_elementwise_min: std::sync::atomic::AtomicUsize,
    /// Whether elementwise f32 chains try a speculative native copy of their statements first
    /// (`elementwise::speculative_block`; the same bits). `NX_VULKAN_SPECULATE=0` turns it off
    /// (measurements); tests compare both.
    #[doc(hidden)]
    pub speculate_elementwise: std::sync::atomic::AtomicBool,
    /// Whether the device's f16 → f32 conversion gives every one of the 65,536 f16 values
    /// exactly (subnormals kept, NaNs NaN): measured once, the first time a kernel
    /// that reads f16 scales is built ([`Context::f16_conversion_is_exact`]).
    pub(crate) f16_conversion_exact: once_cell::sync::OnceCell<bool>,
    pub(crate) stats: Arc<Counters>,
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
        let timestamps = physical.queue_family_properties()[family as usize].timestamp_valid_bits.is_some();
        let (device, queue) = device::create_device(physical, family, &caps)?;
        let memory_allocator = Arc::new(StandardMemoryAllocator::new_default(device.clone()));
        let clock = Arc::new(stream::StreamClock::new());
        let pool = memory::BufferPool::new(memory_allocator.clone(), caps.device_local_bytes, caps.max_allocation_size, clock.clone());
        let kernels = kernel::KernelCache::new(device.clone(), &caps)?;
        let stats = Arc::new(Counters::default());
        let handles = submit::DeviceHandles {
            device: device.clone(),
            queue: queue.clone(),
            memory_allocator: memory_allocator.clone(),
            layout: kernels.layout(),
            timestamp_period_ns: timestamps.then_some(caps.timestamp_period_ns as f64),
        };
        let stream = stream::Stream::new(handles, stats.clone(), clock, stream::StreamConfig::from_env(&caps))?;
        // NX_VULKAN_SUBGROUP_REDUCTION=0 keeps the shared-memory tree (to measure the
        // difference; the same bits either way)
        let shuffles = caps.subgroup_shuffle_relative && std::env::var("NX_VULKAN_SUBGROUP_REDUCTION").map_or(true, |v| v != "0");
        let linear_min_groups = encoder::kernels::linear_min_groups(&caps);
        Ok(Arc::new(Context {
            stream,
            memory_allocator: memory_allocator.clone(),
            caps,
            pool,
            kernels,
            staging: memory::StagingPool::new(memory_allocator.clone()),
            staged_transfers: std::sync::atomic::AtomicBool::new(false),
            subgroup_reduction: std::sync::atomic::AtomicBool::new(shuffles),
            narrow_rows: std::sync::atomic::AtomicBool::new(std::env::var("NX_VULKAN_NARROW_ROWS").map_or(true, |v| v != "0")),
            linear_min_groups: std::sync::atomic::AtomicUsize::new(linear_min_groups),
            wide_elementwise_min: std::sync::atomic::AtomicUsize::new(elementwise::wide_min_from_env()),
            speculate_elementwise: std::sync::atomic::AtomicBool::new(std::env::var("NX_VULKAN_SPECULATE").map_or(true, |v| v != "0")),
            f16_conversion_exact: once_cell::sync::OnceCell::new(),
            stats,
        }))
    }

    /// The process-wide context: the device chosen by `init_global`, else by
    /// `NX_VULKAN_DEVICE` (opened once, on first use).
    pub fn global() -> Result<Arc<Context>> {
        if let Some(ctx) = GLOBAL.get() {
            return Ok(ctx.clone());
        }
        exec::require_deep_stack()?;
        GLOBAL.get_or_try_init(|| Context::open(&DeviceSelector::from_env())).cloned()
    }

    /// The process-wide context if it is open (never opens one: safe on any thread).
    pub fn try_global() -> Option<Arc<Context>> {
        GLOBAL.get().cloned()
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
            concurrent_dispatches: self.stats.concurrent_dispatches.load(Relaxed),
            recordings: self.stats.recordings.load(Relaxed),
            submits: self.stats.submits.load(Relaxed),
            copies: self.stats.copies.load(Relaxed),
            uploads: self.stats.uploads.load(Relaxed),
            downloads: self.stats.downloads.load(Relaxed),
            pipelines: self.kernels.stats.compiled.load(Relaxed),
            kernel_lookups: self.kernels.stats.lookups.load(Relaxed),
            spirv_disk_hits: self.kernels.stats.spirv_hits.load(Relaxed),
            spirv_disk_misses: self.kernels.stats.spirv_misses.load(Relaxed),
            spirv_disk_rejected: self.kernels.stats.spirv_rejected.load(Relaxed),
            refused_kernels: self.kernels.stats.refused.load(Relaxed),
            submitters: self.stats.submitters.load(Relaxed),
            kept_runs: self.stats.kept_runs.load(Relaxed),
            in_flight: self.stream.in_flight() as u64,
            pool: self.pool.stats(),
        }
    }

    /// Starts a recording of dispatches that the stream submits together, in call order.
    pub fn batch(&self) -> Result<submit::Batch<'_>> {
        Ok(submit::Batch::new(self))
    }

    /// The plain op over a `record_*` function: records into a batch of its own, commits it
    /// and returns the output(s) it was given.
    pub(crate) fn recorded<T>(&self, out: T, record: impl FnOnce(&mut submit::Batch<'_>, &T) -> Result<()>) -> Result<T> {
        let mut batch = self.batch()?;
        record(&mut batch, &out)?;
        batch.finish()?;
        Ok(out)
    }

    /// Waits until every op queued so far has run; reports the first failure of queued work.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize()
    }

    /// `synchronize` that never blocks: spins at most `budget` and says whether everything
    /// queued so far has run (failures reported as `synchronize` reports them, once it has).
    pub fn synchronize_within(&self, budget: std::time::Duration) -> Result<bool> {
        self.stream.wait_within(self.stream.last_id(), budget)
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context({})", self.caps.name)
    }
}
