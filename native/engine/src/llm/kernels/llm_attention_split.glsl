// Causal attention split over the keys (flash-decoding), in 64-key chunks: for each row t and
// query head h, a chunk's keys ≤ the row's position are scored (q·k · scale, one fma chain over
// the head's dimensions), the chunk's max m and sum l of e^(s − m) taken over a fixed tree, and m,
// l and Σ e^(s − m) v (keys ascending, one fma chain per dimension) written to the scratch; then
// (COMBINE, one workgroup of 64 per (t, h)) the chunks' parts are rescaled to their common max and
// added in chunk order. Two ways of running the chunks, by the step's rows (the host picks):
// - default ("blocked", steps of many rows): one workgroup of 64 per (block of R rows, kv head,
//   chunk) computes all G = NH / NKV query heads sharing the kv head (GQA): invocation i scores
//   key 64c + i against every head's query and sums the values of its dimensions into every
//   head's chains, so a key's row and a value are read once for the G heads;
// - WIDE (decode steps, few rows: many more invocations per row): 64 invocations per query head
//   of the kv head (a workgroup of 64·G) per (row, kv head, chunk), the chunk's values staged in
//   shared memory (f32, exact from f16) once for the G heads (SK keys at a time, by the device's
//   shared memory).
// Chunks start at multiples of 64 from position 0 whatever the step holds, and a row's arithmetic
// is the same in both ways, whatever R and its block-mates are (only where values are read from
// changes), so a row's result depends on its own position and cache alone: batching never changes
// a bit, and a decode step equals the same row in a prefill step (tests/llm_attention.rs checks
// both ways and several R against each other). R is a parameter (meta[5]), not a define.
// Scratch: [T][NH][S][HD + 2] f32.
//
// FUSED_COMBINE (the wide way): no combine dispatch — each workgroup, its chunk's parts
// written, counts itself in counters[t][kv head] (u32, zero between dispatches), and the one
// that counts the row's last chunk combines the kv head's G heads itself (then resets the
// count), with the combine's own code: the same bits, a dispatch and a barrier fewer.

float load_kv(uint64_t addr, uint idx) {
#ifdef KV_F16
    return unpackHalf2x16(uint(BufU16(addr).v[idx])).x;
#else
    return uintBitsToFloat(BufU32(addr).v[idx]);
#endif
}

// Keys in 16-byte loads when a head's row is a whole number of them (every row then starts on
// one: its offset is a multiple of the head dimension). f16 → f32 is exact (unpackHalf2x16).
#ifdef KV_F16
#define KV_PER_V4 8u
float kv_unpack(uvec4 w, uint e) { vec2 h = unpackHalf2x16(w[e >> 1]); return (e & 1u) == 0u ? h.x : h.y; }
#else
#define KV_PER_V4 4u
float kv_unpack(uvec4 w, uint e) { return uintBitsToFloat(w[e]); }
#endif
#if (HD % 8) == 0
#define KV_VEC
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer BufUV4 { uvec4 v[]; };
#endif

const uint PART = uint(HD) + 2u;
const uint DPT = (uint(HD) + 63u) / 64u;

#define G (NH / NKV)

// Reads of the parts other workgroups of the same dispatch wrote (FUSED_COMBINE): coherent,
// so none comes from a cache that missed their writes.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent readonly buffer BufU32C { uint v[]; };

// out[t, h] from the chunks' parts (invocation tid of 64 takes dimensions tid, tid + 64, ...):
// each rescaled to the common max and added in chunk order.
void combine_row(uint64_t addrP, uint64_t addrO, uint t, uint h, uint tid, uint pos, uint S) {
    const uint QD = uint(NH * HD);
    uint nc = min(pos / 64u + 1u, S);
    uint base = (t * uint(NH) + h) * S * PART;
    // Chunks in blocks of 8 whose loads precede their use (clamped indices: no branch), so
    // their latencies overlap; every sum keeps its order (chunks ascending).
    float M = uintBitsToFloat(0xff800000u);
    for (uint c0 = 0u; c0 < nc; c0 += 8u) {
        float m8[8];
        [[unroll]] for (uint e = 0u; e < 8u; e++) m8[e] = uintBitsToFloat(BufU32C(addrP).v[base + min(c0 + e, nc - 1u) * PART]);
        [[unroll]] for (uint e = 0u; e < 8u; e++) M = max(M, m8[e]);   // (a repeated chunk changes no max)
    }
    float L = 0.0;
    for (uint c0 = 0u; c0 < nc; c0 += 8u) {
        float m8[8], l8[8];
        [[unroll]] for (uint e = 0u; e < 8u; e++) {
            uint c = min(c0 + e, nc - 1u);
            m8[e] = uintBitsToFloat(BufU32C(addrP).v[base + c * PART]);
            l8[e] = uintBitsToFloat(BufU32C(addrP).v[base + c * PART + 1u]);
        }
        [[unroll]] for (uint e = 0u; e < 8u; e++) {
            if (c0 + e < nc) L = fma(l8[e], exp(m8[e] - M), L);
        }
    }
    [[unroll]] for (uint i = 0u; i < DPT; i++) {
        uint d = tid + 64u * i;
        if (d < uint(HD)) {
            float o = 0.0;
            for (uint c0 = 0u; c0 < nc; c0 += 8u) {
                float m8[8], p8[8];
                [[unroll]] for (uint e = 0u; e < 8u; e++) {
                    uint c = min(c0 + e, nc - 1u);
                    m8[e] = uintBitsToFloat(BufU32C(addrP).v[base + c * PART]);
                    p8[e] = uintBitsToFloat(BufU32C(addrP).v[base + c * PART + 2u + d]);
                }
                [[unroll]] for (uint e = 0u; e < 8u; e++) {
                    if (c0 + e < nc) o = fma(p8[e], exp(m8[e] - M), o);
                }
            }
            BufU32(addrO).v[t * QD + h * uint(HD) + d] = floatBitsToUint(o / L);
        }
    }
}

#if !defined(COMBINE) && !defined(WIDE)
layout(local_size_x = 64) in;
shared vec4 qs[G * HD / 4];   // the G heads' queries (HD % 4 == 0) or, as floats, below
shared float qf[(HD % 4) == 0 ? 1 : G * HD];
shared float ps[G * 64];
shared float red[G * 64];

float q_at(uint g, uint d) {
#if (HD % 4) == 0
    return qs[(g * uint(HD) + d) >> 2][d & 3u];
#else
    return qf[g * uint(HD) + d];
#endif
}

// Each head's own tree over the 64 invocations' values, all heads level by level (one barrier
// per level for all of them); the same pairs as a tree per head.
void trees(inout float v[G], uint lane, bool isMax) {
    [[unroll]] for (uint g = 0u; g < uint(G); g++) red[g * 64u + lane] = v[g];
    barrier();
    [[unroll]] for (uint s = 32u; s > 0u; s >>= 1) {
        if (lane < s) {
            [[unroll]] for (uint g = 0u; g < uint(G); g++) {
                uint b = g * 64u + lane;
                red[b] = isMax ? max(red[b], red[b + s]) : red[b] + red[b + s];
            }
        }
        barrier();
    }
    [[unroll]] for (uint g = 0u; g < uint(G); g++) v[g] = red[g * 64u];
    barrier();
}

void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrQ = a.v[0], addrRows = a.v[1], addrCK = a.v[2], addrCV = a.v[3], addrP = a.v[4];
    ParamsI32 meta = ParamsI32(pc.params + 56ul);
    uint T = uint(meta.v[0]), ctx = uint(meta.v[1]), slots = uint(meta.v[2]);
    float scale = intBitsToFloat(meta.v[3]);
    uint S = uint(meta.v[4]), R = uint(meta.v[5]);
    uint lane = gl_LocalInvocationID.x, kvh = gl_WorkGroupID.y, c = gl_WorkGroupID.z;
    const uint QD = uint(NH * HD), KVD = uint(NKV * HD);
    uint blocks = (T + R - 1u) / R;
    for (uint tb = gl_WorkGroupID.x; tb < blocks; tb += gl_NumWorkGroups.x) {
    for (uint t = tb * R; t < min(T, tb * R + R); t++) {
        uint slot = min(BufU32(addrRows).v[2u * t], slots - 1u);
        uint pos = min(BufU32(addrRows).v[2u * t + 1u], ctx - 1u);
        uint j0 = c * 64u;
        if (j0 > pos) continue;   // uniform over the workgroup: this chunk is past the row
        // The G heads' queries: consecutive in q's row (heads kvh·G ..).
        uint qrow = t * QD + kvh * uint(G) * uint(HD);
#if (HD % 4) == 0
        for (uint i = lane; i < uint(G) * uint(HD) / 4u; i += 64u) {
            uint e = qrow + 4u * i;
            qs[i] = vec4(uintBitsToFloat(BufU32(addrQ).v[e]), uintBitsToFloat(BufU32(addrQ).v[e + 1u]), uintBitsToFloat(BufU32(addrQ).v[e + 2u]), uintBitsToFloat(BufU32(addrQ).v[e + 3u]));
        }
#else
        for (uint i = lane; i < uint(G) * uint(HD); i += 64u) qf[i] = uintBitsToFloat(BufU32(addrQ).v[qrow + i]);
#endif
        barrier();
        uint cache0 = slot * ctx * KVD + kvh * uint(HD);
        uint j = j0 + lane;
        float s[G];
        [[unroll]] for (uint g = 0u; g < uint(G); g++) s[g] = uintBitsToFloat(0xff800000u);
        if (j <= pos) {
            float dot[G];
            [[unroll]] for (uint g = 0u; g < uint(G); g++) dot[g] = 0.0;
            uint kb = cache0 + j * KVD;
#ifdef KV_VEC
            // The key's row in 16-byte loads, all issued before the chains; each value feeds
            // every head's chain (dimensions ascending in each).
            [[unroll]] for (uint i = 0u; i < uint(HD) / KV_PER_V4; i++) {
                uvec4 w = BufUV4(addrCK).v[kb / KV_PER_V4 + i];
                [[unroll]] for (uint e = 0u; e < KV_PER_V4; e++) {
                    float kv = kv_unpack(w, e);
                    [[unroll]] for (uint g = 0u; g < uint(G); g++) dot[g] = fma(q_at(g, i * KV_PER_V4 + e), kv, dot[g]);
                }
            }
#else
            for (uint d = 0u; d < uint(HD); d++) {
                float kv = load_kv(addrCK, kb + d);
                [[unroll]] for (uint g = 0u; g < uint(G); g++) dot[g] = fma(q_at(g, d), kv, dot[g]);
            }
#endif
            [[unroll]] for (uint g = 0u; g < uint(G); g++) s[g] = dot[g] * scale;
        }
        float m[G];
        [[unroll]] for (uint g = 0u; g < uint(G); g++) m[g] = s[g];
        trees(m, lane, true);
        float l[G];
        [[unroll]] for (uint g = 0u; g < uint(G); g++) {
            float p = j <= pos ? exp(s[g] - m[g]) : 0.0;
            ps[g * 64u + lane] = p;
            l[g] = p;
        }
        trees(l, lane, false);   // (its first barrier also publishes ps)
        uint nk = min(64u, pos + 1u - j0);
        // Σ p v: keys ascending, one fma chain per (head, dimension); eight keys' values loaded
        // ahead of their fmas, each value feeding the G heads' chains.
        [[unroll]] for (uint i = 0u; i < DPT; i++) {
            uint d = lane + 64u * i;
            if (d < uint(HD)) {
                float o[G];
                [[unroll]] for (uint g = 0u; g < uint(G); g++) o[g] = 0.0;
                uint vb = cache0 + j0 * KVD + d;
                uint jj = 0u;
                for (; jj + 8u <= nk; jj += 8u) {
                    float v8[8];
                    [[unroll]] for (uint e = 0u; e < 8u; e++) v8[e] = load_kv(addrCV, vb + (jj + e) * KVD);
                    [[unroll]] for (uint e = 0u; e < 8u; e++) {
                        [[unroll]] for (uint g = 0u; g < uint(G); g++) o[g] = fma(ps[g * 64u + jj + e], v8[e], o[g]);
                    }
                }
                for (; jj < nk; jj++) {
                    float v = load_kv(addrCV, vb + jj * KVD);
                    [[unroll]] for (uint g = 0u; g < uint(G); g++) o[g] = fma(ps[g * 64u + jj], v, o[g]);
                }
                [[unroll]] for (uint g = 0u; g < uint(G); g++) {
                    uint base = ((t * uint(NH) + kvh * uint(G) + g) * S + c) * PART;
                    BufU32(addrP).v[base + 2u + d] = floatBitsToUint(o[g]);
                }
            }
        }
        if (lane == 0u) {
            [[unroll]] for (uint g = 0u; g < uint(G); g++) {
                uint base = ((t * uint(NH) + kvh * uint(G) + g) * S + c) * PART;
                BufU32(addrP).v[base] = floatBitsToUint(m[g]);
                BufU32(addrP).v[base + 1u] = floatBitsToUint(l[g]);
            }
        }
        barrier();
    }
    }
}
#elif defined(WIDE)
layout(local_size_x = 64 * G) in;
shared float qs[G * HD];
shared float ps[G * 64];
shared float red[G * 64];
shared float vs[uint(SK) * uint(HD)];
shared uint lastChunk;

// Each head's own tree over its 64 invocations' values (barriers are the workgroup's: every
// head runs the same steps; the same pairs as the blocked way's trees).
float tree(float v, uint g, uint lane, bool isMax) {
    uint b = g * 64u;
    red[b + lane] = v;
    barrier();
    [[unroll]] for (uint s = 32u; s > 0u; s >>= 1) {
        if (lane < s) red[b + lane] = isMax ? max(red[b + lane], red[b + lane + s]) : red[b + lane] + red[b + lane + s];
        barrier();
    }
    float r = red[b];
    barrier();
    return r;
}

// vs[key][d] = V of keys j1 .. j1 + SK − 1 (clamped to the slot's last position: keys past a
// row's position are staged but never used), from the slot's cache row cache0; every
// invocation of the workgroup takes a share.
void stage_v(uint64_t addrCV, uint cache0, uint j1, uint ctx) {
    const uint KVD = uint(NKV * HD), WG = 64u * uint(G);
#ifdef KV_VEC
    const uint PER = uint(HD) / KV_PER_V4;
    for (uint i = gl_LocalInvocationID.x; i < uint(SK) * PER; i += WG) {
        uint key = i / PER, part = i % PER;
        uint j = min(j1 + key, ctx - 1u);
        uvec4 w = BufUV4(addrCV).v[(cache0 + j * KVD) / KV_PER_V4 + part];
        [[unroll]] for (uint e = 0u; e < KV_PER_V4; e++) vs[key * uint(HD) + part * KV_PER_V4 + e] = kv_unpack(w, e);
    }
#else
    for (uint i = gl_LocalInvocationID.x; i < uint(SK) * uint(HD); i += WG) {
        uint key = i / uint(HD), d = i % uint(HD);
        vs[i] = load_kv(addrCV, cache0 + min(j1 + key, ctx - 1u) * KVD + d);
    }
#endif
}

void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrQ = a.v[0], addrRows = a.v[1], addrCK = a.v[2], addrCV = a.v[3], addrP = a.v[4];
    ParamsI32 meta = ParamsI32(pc.params + 56ul);
    uint T = uint(meta.v[0]), ctx = uint(meta.v[1]), slots = uint(meta.v[2]);
    float scale = intBitsToFloat(meta.v[3]);
    uint S = uint(meta.v[4]), R = uint(meta.v[5]);
    uint64_t addrO = a.v[5], addrCnt = a.v[6];
    uint lane = gl_LocalInvocationID.x % 64u, g = gl_LocalInvocationID.x / 64u;
    uint kvh = gl_WorkGroupID.y, h = kvh * uint(G) + g, c = gl_WorkGroupID.z;
    const uint QD = uint(NH * HD), KVD = uint(NKV * HD);
    uint blocks = (T + R - 1u) / R;
    uint staged = 0xFFFFFFFFu;   // the slot whose chunk vs holds (SK = 64), none yet
    for (uint tb = gl_WorkGroupID.x; tb < blocks; tb += gl_NumWorkGroups.x) {
    for (uint t = tb * R; t < min(T, tb * R + R); t++) {
        uint slot = min(BufU32(addrRows).v[2u * t], slots - 1u);
        uint pos = min(BufU32(addrRows).v[2u * t + 1u], ctx - 1u);
        uint j0 = c * 64u;
        if (j0 > pos) continue;   // uniform over the workgroup: this chunk is past the row
        for (uint d = lane; d < uint(HD); d += 64u) qs[g * uint(HD) + d] = uintBitsToFloat(BufU32(addrQ).v[t * QD + h * uint(HD) + d]);
        barrier();
        uint cache0 = slot * ctx * KVD + kvh * uint(HD);
        uint j = j0 + lane;
        float s = uintBitsToFloat(0xff800000u);
        if (j <= pos) {
            float dot = 0.0;
            uint kb = cache0 + j * KVD;
            uint q0 = g * uint(HD);
#ifdef KV_VEC
            [[unroll]] for (uint i = 0u; i < uint(HD) / KV_PER_V4; i++) {
                uvec4 w = BufUV4(addrCK).v[kb / KV_PER_V4 + i];
                [[unroll]] for (uint e = 0u; e < KV_PER_V4; e++) dot = fma(qs[q0 + i * KV_PER_V4 + e], kv_unpack(w, e), dot);
            }
#else
            for (uint d = 0u; d < uint(HD); d++) dot = fma(qs[q0 + d], load_kv(addrCK, kb + d), dot);
#endif
            s = dot * scale;
        }
        float m = tree(s, g, lane, true);
        float p = j <= pos ? exp(s - m) : 0.0;
        float l = tree(p, g, lane, false);
        ps[g * 64u + lane] = p;
        uint nk = min(64u, pos + 1u - j0);
        uint base = ((t * uint(NH) + h) * S + c) * PART;
        // Σ p v from the staged values: keys ascending, the DPT chains side by side.
        vec4 o = vec4(0.0);
        for (uint s0 = 0u; s0 < nk; s0 += uint(SK)) {
            if (uint(SK) < 64u || slot != staged) {
                barrier();   // the previous row's reads of vs are done
                stage_v(addrCV, cache0, j0 + s0, ctx);
                staged = uint(SK) < 64u ? 0xFFFFFFFFu : slot;
            }
            barrier();   // vs staged, ps written
            uint ne = min(uint(SK), nk - s0);
            for (uint jj = 0u; jj < ne; jj++) {
                float pj = ps[g * 64u + s0 + jj];
                [[unroll]] for (uint i = 0u; i < DPT; i++) {
                    uint d = min(lane + 64u * i, uint(HD) - 1u);   // (a clamped lane's chain is not stored)
                    o[i] = fma(pj, vs[jj * uint(HD) + d], o[i]);
                }
            }
        }
        [[unroll]] for (uint i = 0u; i < DPT; i++) {
            uint d = lane + 64u * i;
            if (d < uint(HD)) BufU32(addrP).v[base + 2u + d] = floatBitsToUint(o[i]);
        }
        if (lane == 0u) {
            BufU32(addrP).v[base] = floatBitsToUint(m);
            BufU32(addrP).v[base + 1u] = floatBitsToUint(l);
        }
#ifdef FUSED_COMBINE
        // This chunk's parts made visible to the device, then counted; the workgroups of the
        // row's chunks (c ≤ pos / 64 among the grid's) count to `chunks`, and the last combines.
        memoryBarrierBuffer();
        barrier();
        if (gl_LocalInvocationID.x == 0u) {
            uint chunks = min(pos / 64u + 1u, gl_NumWorkGroups.z);
            uint counter = t * uint(NKV) + kvh;
            uint done = atomicAdd(BufU32(addrCnt).v[counter], 1u) + 1u;
            lastChunk = done == chunks ? 1u : 0u;
            if (done == chunks) atomicExchange(BufU32(addrCnt).v[counter], 0u);   // for the next dispatch
        }
        barrier();
        if (lastChunk != 0u) {
            memoryBarrierBuffer();
            combine_row(addrP, addrO, t, h, lane, pos, S);
        }
#endif
        barrier();
    }
    }
}
#else
layout(local_size_x = 64) in;
void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrRows = a.v[1], addrP = a.v[4], addrO = a.v[5];
    ParamsI32 meta = ParamsI32(pc.params + 56ul);
    uint T = uint(meta.v[0]), ctx = uint(meta.v[1]);
    uint S = uint(meta.v[4]);
    uint tid = gl_LocalInvocationID.x, h = gl_WorkGroupID.y;
    for (uint t = gl_WorkGroupID.x; t < T; t += gl_NumWorkGroups.x) {
        uint pos = min(BufU32(addrRows).v[2u * t + 1u], ctx - 1u);
        combine_row(addrP, addrO, t, h, tid, pos, S);
    }
}
#endif
