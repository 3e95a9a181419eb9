//! `nx-vulkan probe-shared`: how many workgroups of a given size and shared-memory footprint a
//! device keeps resident at once. Stop 43 saw an H100 run the encoder attention at half speed
//! when 8 KiB of *unused* shared memory was added to each workgroup; this measures that bound
//! directly instead of inferring it from one kernel.
//!
//! Each workgroup declares `shared` bytes (all of it written once, so no driver can shrink the
//! allocation) and then walks a dependent chain of loads through a 1 KiB table: its time is
//! load latency, not issue slots or bandwidth, so workgroups that are resident together run in
//! parallel without slowing each other. A dispatch of `groups` workgroups then takes about
//! `ceil(groups / (resident per SM × SMs))` times one workgroup's time: the ratio `waves`
//! (device time of the full grid over that of a single workgroup) gives the residency.
//! That holds while few workgroups share a multiprocessor: with many (small footprints) the
//! chains' own L1 traffic sets the time, so high residencies read low (on the H100, below
//! about 6 KiB per workgroup). JSON lines; device time per dispatch from the stream's
//! per-command timestamps.

use nx_vulkan_engine::kernel::{Kernel, SHADER_PRELUDE};
use nx_vulkan_engine::params::ParamBlock;
use nx_vulkan_engine::{Context, DType, Result, Tensor};
use std::sync::Arc;

const PROBE: &str = r#"
layout(local_size_x = WG) in;
#if SHARED_WORDS > 0
shared uint pad[SHARED_WORDS];
#endif
void main() {
    ParamsU64 a = ParamsU64(pc.params);
    ParamsI32 m = ParamsI32(pc.params + 16ul);
    uint iters = uint(m.v[0]);
    uint tid = gl_LocalInvocationID.x;
    uint j = tid & 255u;
#if SHARED_WORDS > 0
    for (uint i = tid; i < uint(SHARED_WORDS); i += uint(WG)) pad[i] = i ^ j;
    barrier();
    j = pad[(tid * 7u) % uint(SHARED_WORDS)] & 255u;
#endif
    for (uint i = 0u; i < iters; i++) j = BufU32(a.v[0]).v[j];
    // never true (the table holds indices < 256): keeps the chain from being removed
    if (j > 255u) BufU32(a.v[1]).v[gl_WorkGroupID.x] = j;
}
"#;

/// Mean device µs of one dispatch of `groups` workgroups: `reps` dispatches in one submission,
/// once as a warm-up (pipeline creation, clocks), then timed with per-command timestamps.
fn device_us(ctx: &Context, kernel: &Arc<Kernel>, params: &[u8], groups: u32, reps: usize, keep: [&Tensor; 2]) -> Result<f64> {
    let mut us = f64::NAN;
    for timed in [false, true] {
        if timed {
            ctx.stream.profile_start()?;
        }
        let mut b = ctx.batch()?;
        for _ in 0..reps {
            b.dispatch_grid(kernel, params, groups, [groups, 1, 1])?;
        }
        for t in keep {
            b.keep(t.buffer());
        }
        b.finish_and_wait()?;
        if timed {
            // the session ran one kernel
            let prof = ctx.stream.profile_stop()?;
            us = prof.iter().find(|k| k.runs > 0).map_or(f64::NAN, |k| k.device_ns / 1e3 / k.runs as f64);
        }
    }
    Ok(us)
}

/// One row per (workgroup size, shared bytes): device µs of one workgroup alone and of
/// `groups_per_sm × sms` workgroups, and their ratio.
pub fn probe_shared(ctx: &Context, workgroups: &[u32], shared_kib: &[u32], sms: u32, iters: u32, reps: usize) -> Result<()> {
    // a cycle through all 256 entries: 17 is odd, so i -> 17 i + 1 mod 256 is a bijection
    // without fixed points (a full-period LCG: 17 ≡ 1 mod 4, increment odd)
    let table: Vec<u8> = (0u32..256).flat_map(|i| ((i * 17 + 1) & 255).to_le_bytes()).collect();
    let tab = ctx.upload(DType::U32, &[256], &table)?;
    let sink = ctx.upload(DType::U32, &[65536], &vec![0u8; 65536 * 4])?;
    let max_shared = ctx.caps.max_shared_memory;
    for &wg in workgroups {
        for &kib in shared_kib {
            let bytes = kib * 1024;
            if bytes > max_shared {
                continue;
            }
            let words = bytes / 4;
            let key = format!("probe shared {wg} {words}");
            let kernel = ctx.kernels.get(&key, wg, 1, || format!("{SHADER_PRELUDE}#define WG {wg}\n#define SHARED_WORDS {words}\n{PROBE}"))?;
            let mut p = ParamBlock::new("probe shared");
            p.addrs([tab.buffer().address(), sink.buffer().address()]);
            p.i32(iters)?;
            // as many workgroups as the device could hold at 2,048 invocations per SM
            let full = sms * (2048 / wg).min(32);
            let times = [device_us(ctx, &kernel, p.bytes(), 1, reps, [&tab, &sink])?, device_us(ctx, &kernel, p.bytes(), full, reps, [&tab, &sink])?];
            let waves = times[1] / times[0];
            println!(
                "{{\"probe\":\"shared\",\"wg\":{wg},\"shared_kib\":{kib},\"groups\":{full},\"one_us\":{:.2},\"full_us\":{:.2},\"waves\":{:.2},\"resident_per_sm\":{:.2}}}",
                times[0],
                times[1],
                waves,
                full as f64 / sms as f64 / waves.round().max(1.0)
            );
        }
    }
    Ok(())
}

const STREAM: &str = r#"
layout(local_size_x = WG) in;
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer RoV4 { uvec4 v[]; };
void main() {
    ParamsU64 a = ParamsU64(pc.params);
    ParamsI32 m = ParamsI32(pc.params + 16ul);
    uint words = uint(m.v[0]);
    uint stride = gl_NumWorkGroups.x * uint(WG);
    uvec4 acc = uvec4(0u);
    // UNROLL independent 16-byte loads in flight per invocation per round
    for (uint i = gl_GlobalInvocationID.x; i < words; i += stride * uint(UNROLL)) {
        uvec4 v[UNROLL];
        [[unroll]] for (int u = 0; u < UNROLL; u++) {
            uint w = i + uint(u) * stride;
            v[u] = w < words ? RoV4(a.v[0]).v[w] : uvec4(0u);
        }
        [[unroll]] for (int u = 0; u < UNROLL; u++) acc ^= v[u];
    }
    // never true for the zero-filled input: keeps the loads
    if (acc.x == 0xDEADBEEFu) BufU32(a.v[1]).v[gl_WorkGroupID.x] = acc.y;
}
"#;

/// Read bandwidth of one dispatch streaming `mib` MiB (16-byte loads, a grid-stride loop with
/// `unroll` loads in flight per invocation) on `groups_per_sm × sms` workgroups: what a
/// single bandwidth-bound kernel of that size can reach between barriers (the decode matvecs
/// read 8–66 MB each). JSON lines.
pub fn probe_stream(ctx: &Context, mibs: &[u32], workgroups: &[u32], groups_per_sm: &[u32], unrolls: &[u32], sms: u32, reps: usize) -> Result<()> {
    let most = mibs.iter().copied().max().unwrap_or(0) as usize;
    let src = ctx.upload(DType::U8, &[most << 20], &vec![0u8; most << 20])?;
    let sink = ctx.upload(DType::U32, &[65536], &vec![0u8; 65536 * 4])?;
    for &wg in workgroups {
        for &unroll in unrolls {
            let key = format!("probe stream {wg} {unroll}");
            let kernel = ctx.kernels.get(&key, wg, 1, || format!("{SHADER_PRELUDE}#define WG {wg}\n#define UNROLL {unroll}\n{STREAM}"))?;
            for &mib in mibs {
                for &per_sm in groups_per_sm {
                    let groups = (sms * per_sm).min(65535);
                    let words = (mib as usize) << 16;
                    let mut p = ParamBlock::new("probe stream");
                    p.addrs([src.buffer().address(), sink.buffer().address()]);
                    p.i32(words)?;
                    let us = device_us(ctx, &kernel, p.bytes(), groups, reps, [&src, &sink])?;
                    let bytes = (mib as f64) * 1048576.0;
                    println!(
                        "{{\"probe\":\"stream\",\"mib\":{mib},\"wg\":{wg},\"unroll\":{unroll},\"groups_per_sm\":{per_sm},\"us\":{us:.2},\"tb_s\":{:.3}}}",
                        bytes / us / 1e6
                    );
                }
            }
        }
    }
    Ok(())
}
