//! The buffer pool's cache bound: when a freed buffer would overflow it, the least recently
//! freed cached buffers (of any size) go back to the driver, not the newcomer — so a program
//! that moves from one size to another keeps reusing instead of allocating each time.
//!
//! Its own test binary: the bound (`NX_VULKAN_POOL_CACHE_BYTES`) is read once, when the device
//! opens, and is set here, before anything opens it, to 64 MiB.
//!
//! Run: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test --release -p nx_vulkan_engine --test pool_cache

mod common;
use common::*;
use nx_vulkan_engine::*;

const BOUND: u64 = 64 << 20;

#[test]
fn a_full_cache_evicts_its_least_recent_buffers() {
    // Before the device opens (the first `on_engine`): the one test of this binary.
    std::env::set_var("NX_VULKAN_POOL_CACHE_BYTES", BOUND.to_string());
    on_engine(|ctx| {
        ctx.synchronize().unwrap();
        ctx.pool.trim();
        // fifteen 4 MiB buffers freed together: 60 MiB cached
        let small: Vec<Tensor> = (0..15).map(|_| ctx.empty(F32, &[1 << 20]).unwrap()).collect();
        drop(small);
        let s0 = ctx.stats().pool;
        assert_eq!((s0.cached_buffers, s0.cached_bytes), (15, 15 << 22), "{s0:?}");
        // then ten 16 MiB buffers, one at a time: the first is new; freeing it evicts the
        // three least recent 4 MiB ones (60 + 16 > 64); the other nine reuse it
        for _ in 0..10 {
            let t = ctx.empty(F32, &[4 << 20]).unwrap();
            drop(t);
        }
        let s1 = ctx.stats().pool;
        assert_eq!(s1.device_allocations - s0.device_allocations, 1, "{s0:?} -> {s1:?}");
        assert_eq!(s1.reuses - s0.reuses, 9, "{s0:?} -> {s1:?}");
        assert_eq!(s1.evictions - s0.evictions, 3, "{s0:?} -> {s1:?}");
        assert_eq!((s1.cached_buffers, s1.cached_bytes), (13, (12 << 22) + (16 << 20)), "{s1:?}");
        assert!(s1.cached_bytes <= BOUND);
        // the evicted ones were the first freed: the 4 MiB class still serves twelve requests
        let again: Vec<Tensor> = (0..12).map(|_| ctx.empty(F32, &[1 << 20]).unwrap()).collect();
        let s2 = ctx.stats().pool;
        assert_eq!((s2.device_allocations - s1.device_allocations, s2.reuses - s1.reuses), (0, 12), "{s1:?} -> {s2:?}");
        drop(again);
        // a buffer larger than the whole bound is never cached and evicts nothing
        let huge = ctx.empty(F32, &[(BOUND as usize / 4) + 1]).unwrap();
        drop(huge);
        let s3 = ctx.stats().pool;
        assert_eq!(s3.evictions, s2.evictions, "{s2:?} -> {s3:?}");
        assert!(s3.cached_bytes <= BOUND, "{s3:?}");
    });
}
