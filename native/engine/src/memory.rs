//! Device memory: device-local buffers from a size-bucketed pool, with statistics.
//!
//! Kernels reach buffers through their device addresses, so a tensor may be larger than the
//! device's per-binding limit (128 MiB on lavapipe). A `DeviceBuffer` goes back to the pool when
//! its last owner drops it; the pool keeps a bounded amount of memory for reuse.

use crate::error::{EngineError, Result};
use crate::stream::StreamClock;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::{Acquire, Relaxed}};
use std::sync::Arc;
use vulkano::buffer::{Buffer, BufferCreateInfo, BufferUsage, Subbuffer};
use vulkano::memory::allocator::{AllocationCreateInfo, MemoryTypeFilter, StandardMemoryAllocator};
use vulkano::memory::MemoryPropertyFlags;

/// Counters a test or a user can read to see what memory is in use and whether it is reused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers handed out and not yet dropped.
    pub live_buffers: u64,
    pub live_bytes: u64,
    /// Buffers kept by the pool for reuse.
    pub cached_buffers: u64,
    pub cached_bytes: u64,
    /// Buffers created through the driver since the pool was made.
    pub device_allocations: u64,
    /// Requests served from the cache.
    pub reuses: u64,
    /// Cached buffers given back to the driver to make room for a more recently freed one.
    pub evictions: u64,
}

/// A free buffer, the stream position it was released at (see `stream::StreamClock`), and its
/// place in the order of releases (the least recent is evicted first).
struct Freed {
    buffer: Subbuffer<[u8]>,
    stamp: u64,
    seq: u64,
}

pub(crate) struct PoolShared {
    allocator: Arc<StandardMemoryAllocator>,
    clock: Arc<StreamClock>,
    free: Mutex<HashMap<u64, Vec<Freed>>>,
    /// Buffers to give back to the driver once the work that may use them has retired.
    deferred: Mutex<Vec<Freed>>,
    max_cached_bytes: u64,
    max_allocation: u64,
    device_local_bytes: u64,
    live_buffers: AtomicU64,
    live_bytes: AtomicU64,
    cached_buffers: AtomicU64,
    cached_bytes: AtomicU64,
    device_allocations: AtomicU64,
    reuses: AtomicU64,
    evictions: AtomicU64,
    /// Releases so far (`Freed::seq`).
    releases: AtomicU64,
    /// Bytes of new device buffers since the last garbage-collection hint (see `take_gc_hint`).
    fresh_bytes: AtomicU64,
    gc_hint_bytes: u64,
    /// A large request left its size class empty (see `take_gc_hint`).
    class_dry: AtomicBool,
}

/// Buffers at least this large ask for a collection when their size class runs dry
/// ([`BufferPool::take_gc_hint`]): allocating one costs far more than that.
pub const LARGE_BYTES: u64 = 16 << 20;

/// Why [`BufferPool::take_gc_hint`] asks a garbage-collected caller for a (full) collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcHint {
    /// `NX_VULKAN_GC_HINT_BYTES` of new device buffers since the last request.
    NewMemory,
    /// A large request left its size class without a cached buffer.
    SizeClassDry,
}

/// A device-local buffer. Dropping it returns the memory to the pool.
pub struct DeviceBuffer {
    buffer: Option<Subbuffer<[u8]>>,
    capacity: u64,
    address: u64,
    pool: Arc<PoolShared>,
}

impl DeviceBuffer {
    /// The buffer's device address (what kernels read and write through).
    pub fn address(&self) -> u64 {
        self.address
    }

    /// Usable size in bytes (at least what was asked for).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// True when the memory is mapped into the host (UMA devices such as lavapipe and
    /// integrated GPUs, or resizable-BAR memory): transfers then skip the staging copy.
    pub fn host_visible(&self) -> bool {
        self.subbuffer().mapped_slice().is_ok()
    }

    pub(crate) fn subbuffer(&self) -> &Subbuffer<[u8]> {
        self.buffer.as_ref().expect("buffer present until drop")
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.pool.release(buffer, self.capacity);
        }
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({} bytes @ {:#x})", self.capacity, self.address)
    }
}

/// Rounds a request up to a bucket: powers of two split in quarters, so reuse is likely and
/// the waste is at most 25 %.
fn bucket(bytes: u64) -> u64 {
    let bytes = bytes.max(256);
    let pow = 64 - (bytes - 1).leading_zeros(); // 2^pow >= bytes
    let quarter = (1u64 << pow) / 8;
    bytes.div_ceil(quarter) * quarter
}

pub struct BufferPool {
    shared: Arc<PoolShared>,
}

impl BufferPool {
    pub(crate) fn new(
        allocator: Arc<StandardMemoryAllocator>,
        device_local_bytes: u64,
        max_allocation: u64,
        clock: Arc<StreamClock>,
    ) -> BufferPool {
        let max_cached_bytes = std::env::var("NX_VULKAN_POOL_CACHE_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or((device_local_bytes / 4).min(2 << 30));
        BufferPool {
            shared: Arc::new(PoolShared {
                allocator,
                clock,
                free: Mutex::new(HashMap::new()),
                deferred: Mutex::new(vec![]),
                max_cached_bytes,
                max_allocation,
                device_local_bytes,
                live_buffers: AtomicU64::new(0),
                live_bytes: AtomicU64::new(0),
                cached_buffers: AtomicU64::new(0),
                cached_bytes: AtomicU64::new(0),
                device_allocations: AtomicU64::new(0),
                reuses: AtomicU64::new(0),
                evictions: AtomicU64::new(0),
                releases: AtomicU64::new(0),
                fresh_bytes: AtomicU64::new(0),
                gc_hint_bytes: std::env::var("NX_VULKAN_GC_HINT_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(256 << 20),
                class_dry: AtomicBool::new(false),
            }),
        }
    }

    /// A device-local buffer of at least `bytes` bytes (contents undefined) for device work:
    /// it may still be in use by queued work recorded before this call, which the queue runs
    /// first.
    pub fn alloc(&self, bytes: u64) -> Result<Arc<DeviceBuffer>> {
        self.alloc_for(bytes, false)
    }

    /// As `alloc`, for a buffer the host writes through its mapping before any new device work:
    /// only a buffer no queued work can still touch.
    pub fn alloc_for_host_write(&self, bytes: u64) -> Result<Arc<DeviceBuffer>> {
        self.alloc_for(bytes, true)
    }

    fn alloc_for(&self, bytes: u64, host_write: bool) -> Result<Arc<DeviceBuffer>> {
        let s = &self.shared;
        let capacity = bucket(bytes);
        if capacity > s.max_allocation || capacity > s.device_local_bytes {
            return Err(EngineError::OutOfMemory {
                bytes,
                why: format!(
                    "larger than the device's largest allocation ({} bytes) or its memory ({} bytes)",
                    s.max_allocation, s.device_local_bytes
                ),
            });
        }
        s.free_deferred();
        let retired = s.clock.retired.load(Acquire);
        let mut size_class_empty = true;
        let cached = s.free.lock().get_mut(&capacity).and_then(|v| {
            // The most recently freed buffer (warm in caches) unless the host will write it.
            let i = if host_write { v.iter().rposition(|f| f.stamp <= retired) } else { v.len().checked_sub(1) };
            let taken = i.map(|i| v.swap_remove(i).buffer);
            size_class_empty = v.is_empty();
            taken
        });
        if capacity >= LARGE_BYTES && size_class_empty {
            s.class_dry.store(true, Relaxed);
        }
        let buffer = match cached {
            Some(b) => {
                s.cached_buffers.fetch_sub(1, Relaxed);
                s.cached_bytes.fetch_sub(capacity, Relaxed);
                s.reuses.fetch_add(1, Relaxed);
                b
            }
            None => match self.create(capacity).inspect(|_| {
                s.fresh_bytes.fetch_add(capacity, Relaxed);
            }) {
                Ok(b) => b,
                Err(_) => {
                    // The driver said no: give back what the pool holds and try once more.
                    self.trim();
                    self.create(capacity).map_err(|e| EngineError::OutOfMemory {
                        bytes,
                        why: e.to_string(),
                    })?
                }
            },
        };
        let address = buffer
            .device_address()
            .map_err(|e| EngineError::vk("device address", e))?
            .get();
        s.live_buffers.fetch_add(1, Relaxed);
        s.live_bytes.fetch_add(capacity, Relaxed);
        Ok(Arc::new(DeviceBuffer {
            buffer: Some(buffer),
            capacity,
            address,
            pool: s.clone(),
        }))
    }

    fn create(&self, capacity: u64) -> Result<Subbuffer<[u8]>> {
        let buffer = Buffer::new_slice::<u8>(
            self.shared.allocator.clone(),
            BufferCreateInfo {
                usage: BufferUsage::STORAGE_BUFFER
                    | BufferUsage::SHADER_DEVICE_ADDRESS
                    | BufferUsage::TRANSFER_SRC
                    | BufferUsage::TRANSFER_DST,
                ..Default::default()
            },
            AllocationCreateInfo {
                // Device-local and, where the device offers a choice, not host-visible: a
                // discrete GPU's BAR-mapped memory is slow to read from the host, and only UMA
                // devices (lavapipe, integrated GPUs) should have transfers skip staging.
                memory_type_filter: MemoryTypeFilter {
                    required_flags: MemoryPropertyFlags::empty(),
                    preferred_flags: MemoryPropertyFlags::DEVICE_LOCAL,
                    not_preferred_flags: MemoryPropertyFlags::HOST_VISIBLE,
                },
                ..Default::default()
            },
            capacity,
        )
        .map_err(|e| EngineError::vk("allocating a device buffer", format!("{e:?}")))?;
        self.shared.device_allocations.fetch_add(1, Relaxed);
        Ok(buffer)
    }

    /// Whether the caller should let its garbage collector run (once per request), and why.
    /// A garbage-collected runtime (the BEAM) frees a tensor only when its handle is
    /// collected, and a handle is a few bytes of heap, so device memory can fill with dead
    /// tensors long before the collector sees any pressure; the NIF turns this into a full
    /// collection of the calling process.
    /// - [`GcHint::NewMemory`] after `NX_VULKAN_GC_HINT_BYTES` (default 256 MiB) of new device
    ///   buffers.
    /// - [`GcHint::SizeClassDry`] when a request for a buffer of `LARGE_BYTES` or more left no
    ///   cached buffer of its size: the next such request would allocate anew although the
    ///   tensors of the last few ops are likely dead. A loop of 16 M-element adds from Elixir
    ///   made 10 new 64 MiB buffers in 20 ops without it, and on the H200 the op took 3.5× its
    ///   time from Rust (stop 34). Stops 34–36 answered it with a young-generation collection;
    ///   that made things worse: collecting while the new result is live ages the result's
    ///   handle, which later minor collections then never free: a loop whose every op ran its
    ///   class dry held up to 45 dead 16 MiB results on lavapipe and allocated 43 of 60 anew
    ///   (stop 37, `reuse_probe3.exs`); a full collection frees every dead handle, the class
    ///   refills, and the next requests reuse. On the BEAM a collected handle's memory comes
    ///   back only once the process next leaves its scheduler, so the Elixir wrapper also
    ///   yields after collecting (on an H100 a loop of warm 16 M adds otherwise allocated 38
    ///   of 40 results anew: `yield_probe8.exs`).
    pub fn take_gc_hint(&self) -> Option<GcHint> {
        let s = &self.shared;
        if s.fresh_bytes.load(Relaxed) >= s.gc_hint_bytes && s.fresh_bytes.swap(0, Relaxed) >= s.gc_hint_bytes {
            s.class_dry.store(false, Relaxed);
            return Some(GcHint::NewMemory);
        }
        s.class_dry.swap(false, Relaxed).then_some(GcHint::SizeClassDry)
    }

    /// Frees every cached buffer back to the driver (those queued work may still use, once it
    /// has run).
    pub fn trim(&self) {
        let s = &self.shared;
        let drained: Vec<_> = s.free.lock().drain().collect();
        for (capacity, buffers) in drained {
            s.cached_buffers.fetch_sub(buffers.len() as u64, Relaxed);
            s.cached_bytes.fetch_sub(capacity * buffers.len() as u64, Relaxed);
            s.deferred.lock().extend(buffers);
        }
        s.free_deferred();
    }

    pub fn stats(&self) -> PoolStats {
        let s = &self.shared;
        PoolStats {
            live_buffers: s.live_buffers.load(Relaxed),
            live_bytes: s.live_bytes.load(Relaxed),
            cached_buffers: s.cached_buffers.load(Relaxed),
            cached_bytes: s.cached_bytes.load(Relaxed),
            device_allocations: s.device_allocations.load(Relaxed),
            reuses: s.reuses.load(Relaxed),
            evictions: s.evictions.load(Relaxed),
        }
    }
}

impl PoolShared {
    /// Caches a dropped buffer, evicting the least recently freed cached buffers (of any size)
    /// while the cache would exceed its bound: the sizes a program uses now stay cached, not
    /// the ones it used first. (Keeping the oldest and freeing the newcomer instead, a cache
    /// filled by 4 MiB results made every later 16 MiB op allocate anew: 50 of 50 with a
    /// 100 MiB bound on lavapipe, stop 37; `tests/pool_cache.rs`.) Evicted buffers are freed
    /// through vulkano once no queued work can touch them.
    fn release(&self, buffer: Subbuffer<[u8]>, capacity: u64) {
        self.live_buffers.fetch_sub(1, Relaxed);
        self.live_bytes.fetch_sub(capacity, Relaxed);
        let freed = Freed { buffer, stamp: self.clock.used.load(Acquire), seq: self.releases.fetch_add(1, Relaxed) };
        if capacity > self.max_cached_bytes {
            self.deferred.lock().push(freed);
            self.free_deferred();
            return;
        }
        let mut evicted = vec![];
        {
            let mut free = self.free.lock();
            while self.cached_bytes.load(Relaxed) + capacity > self.max_cached_bytes {
                // Each class's list is in release order but for a host-write reuse's swap:
                // its first entry is (about) its least recent.
                let Some(class) = free.iter().filter(|(_, v)| !v.is_empty()).min_by_key(|(_, v)| v[0].seq).map(|(&c, _)| c) else {
                    break;
                };
                evicted.push(free.get_mut(&class).expect("class listed").remove(0));
                self.cached_buffers.fetch_sub(1, Relaxed);
                self.cached_bytes.fetch_sub(class, Relaxed);
                self.evictions.fetch_add(1, Relaxed);
            }
            self.cached_buffers.fetch_add(1, Relaxed);
            self.cached_bytes.fetch_add(capacity, Relaxed);
            free.entry(capacity).or_default().push(freed);
        }
        if !evicted.is_empty() {
            self.deferred.lock().extend(evicted);
            self.free_deferred();
        }
    }

    fn free_deferred(&self) {
        let mut deferred = self.deferred.lock();
        if deferred.is_empty() {
            return;
        }
        let retired = self.clock.retired.load(Acquire);
        deferred.retain(|f| f.stamp > retired);
    }
}

/// Host-visible staging buffers for transfers, kept for reuse: creating a 64 MB buffer per
/// download costs more than copying it. Downloads use cached (host-random-access) memory,
/// uploads write-combined memory. A `StagingBuffer` returns to the pool when dropped — for an
/// upload, when the stream retires the copy that reads it.
pub(crate) struct StagingPool {
    shared: Arc<StagingShared>,
}

struct StagingShared {
    allocator: Arc<StandardMemoryAllocator>,
    /// Free buffers for uploads (index 0) and downloads (index 1).
    free: Mutex<[Vec<Subbuffer<[u8]>>; 2]>,
    cached_bytes: AtomicU64,
    max_cached_bytes: u64,
}

pub(crate) struct StagingBuffer {
    buffer: Option<Subbuffer<[u8]>>,
    download: bool,
    pool: Arc<StagingShared>,
}

impl StagingBuffer {
    pub(crate) fn subbuffer(&self) -> &Subbuffer<[u8]> {
        self.buffer.as_ref().expect("buffer present until drop")
    }
}

impl Drop for StagingBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            let s = &self.pool;
            let size = b.len();
            if s.cached_bytes.load(Relaxed) + size <= s.max_cached_bytes {
                s.cached_bytes.fetch_add(size, Relaxed);
                s.free.lock()[self.download as usize].push(b);
            }
        }
    }
}

impl StagingPool {
    pub(crate) fn new(allocator: Arc<StandardMemoryAllocator>) -> StagingPool {
        let max_cached_bytes = std::env::var("NX_VULKAN_STAGING_CACHE_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(512 << 20);
        StagingPool {
            shared: Arc::new(StagingShared { allocator, free: Mutex::new([vec![], vec![]]), cached_bytes: AtomicU64::new(0), max_cached_bytes }),
        }
    }

    /// A staging buffer of at least `bytes` bytes: the smallest cached one that fits and is at
    /// most twice as large, else a new one (sizes rounded up to a power of two).
    pub(crate) fn take(&self, bytes: u64, download: bool) -> Result<StagingBuffer> {
        let s = &self.shared;
        let want = bytes.max(4096).next_power_of_two();
        let cached = {
            let mut free = s.free.lock();
            let list = &mut free[download as usize];
            let best = list.iter().enumerate().filter(|(_, b)| b.len() >= bytes && b.len() <= 2 * want).min_by_key(|(_, b)| b.len()).map(|(i, _)| i);
            best.map(|i| list.swap_remove(i))
        };
        let buffer = match cached {
            Some(b) => {
                s.cached_bytes.fetch_sub(b.len(), Relaxed);
                b
            }
            None => Buffer::new_slice::<u8>(
                s.allocator.clone(),
                BufferCreateInfo {
                    usage: if download { BufferUsage::TRANSFER_DST } else { BufferUsage::TRANSFER_SRC },
                    ..Default::default()
                },
                AllocationCreateInfo {
                    memory_type_filter: if download {
                        MemoryTypeFilter::PREFER_HOST | MemoryTypeFilter::HOST_RANDOM_ACCESS
                    } else {
                        MemoryTypeFilter::PREFER_HOST | MemoryTypeFilter::HOST_SEQUENTIAL_WRITE
                    },
                    ..Default::default()
                },
                want,
            )
            .map_err(|e| EngineError::OutOfMemory { bytes, why: format!("staging buffer: {e:?}") })?,
        };
        Ok(StagingBuffer { buffer: Some(buffer), download, pool: s.clone() })
    }
}

/// Copies `src` into `dst` (same length), split across threads when large: one core does not
/// reach the memory bandwidth of a 64 MB transfer.
pub(crate) fn copy_parallel(dst: &mut [u8], src: &[u8]) {
    const PER_THREAD: usize = 2 << 20;
    let threads = (src.len() / PER_THREAD).clamp(1, 8);
    if threads == 1 {
        dst.copy_from_slice(src);
        return;
    }
    let chunk = src.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for (d, s) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
            scope.spawn(move || d.copy_from_slice(s));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::bucket;

    #[test]
    fn buckets_cover_the_request_with_bounded_waste() {
        for bytes in [0u64, 1, 255, 256, 257, 1000, 4096, 4097, 1 << 20, (1 << 20) + 1, 3 << 30] {
            let b = bucket(bytes);
            assert!(b >= bytes.max(256), "{bytes} -> {b}");
            assert!(b as f64 <= (bytes.max(256) as f64) * 1.25 + 1.0, "{bytes} -> {b}");
        }
    }
}
