// Causal attention split over the keys (flash-decoding): without COMBINE, one workgroup of 64
// per (row t, query head h, chunk c of 64 keys) scores keys 64c .. 64c+63 that are ≤ the row's
// position (q·k · scale, one fma chain over the head's dimensions), takes the chunk's max m and
// sum l of e^(s − m) over a fixed tree, and writes m, l and Σ e^(s − m) v (keys ascending) to
// the scratch. With COMBINE, one workgroup per (t, h) rescales the chunks' parts to their common
// max and adds them in chunk order. Chunks start at multiples of 64 from position 0 whatever the
// step holds, so a row's result depends on its own position and cache alone: batching never
// changes a bit, and a decode step equals the same row in a prefill step.
// GQA: query head h reads kv head h / (NH / NKV). Scratch: [T][NH][S][HD + 2] f32.

layout(local_size_x = 64) in;

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

#ifndef COMBINE
shared float qs[HD];
shared float ps[64];
shared float red[64];

float tree(float v, uint tid, bool isMax) {
    red[tid] = v;
    barrier();
    [[unroll]] for (uint s = 32u; s > 0u; s >>= 1) {
        if (tid < s) red[tid] = isMax ? max(red[tid], red[tid + s]) : red[tid] + red[tid + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrQ = a.v[0], addrRows = a.v[1], addrCK = a.v[2], addrCV = a.v[3], addrP = a.v[4];
    ParamsI32 meta = ParamsI32(pc.params + 48ul);
    uint T = uint(meta.v[0]), ctx = uint(meta.v[1]), slots = uint(meta.v[2]);
    float scale = intBitsToFloat(meta.v[3]);
    uint S = uint(meta.v[4]);
    uint tid = gl_LocalInvocationID.x, h = gl_WorkGroupID.y, c = gl_WorkGroupID.z, kvh = h / uint(NH / NKV);
    const uint QD = uint(NH * HD), KVD = uint(NKV * HD);
    for (uint t = gl_WorkGroupID.x; t < T; t += gl_NumWorkGroups.x) {
        uint slot = min(BufU32(addrRows).v[2u * t], slots - 1u);
        uint pos = min(BufU32(addrRows).v[2u * t + 1u], ctx - 1u);
        uint j0 = c * 64u;
        if (j0 > pos) continue;   // uniform over the workgroup: this chunk is past the row
        for (uint d = tid; d < uint(HD); d += 64u) qs[d] = uintBitsToFloat(BufU32(addrQ).v[t * QD + h * uint(HD) + d]);
        barrier();
        uint cache0 = slot * ctx * KVD + kvh * uint(HD);
        uint j = j0 + tid;
        float s = uintBitsToFloat(0xff800000u);
        if (j <= pos) {
            float dot = 0.0;
            uint kb = cache0 + j * KVD;
#ifdef KV_VEC
            // The key's row in 16-byte loads, all issued before the chain (a loop of scalar loads
            // each feeding the chain waited out one memory latency per dimension); the chain is
            // the same: dimensions ascending.
            [[unroll]] for (uint i = 0u; i < uint(HD) / KV_PER_V4; i++) {
                uvec4 w = BufUV4(addrCK).v[kb / KV_PER_V4 + i];
                [[unroll]] for (uint e = 0u; e < KV_PER_V4; e++) dot = fma(qs[i * KV_PER_V4 + e], kv_unpack(w, e), dot);
            }
#else
            for (uint d = 0u; d < uint(HD); d++) dot = fma(qs[d], load_kv(addrCK, kb + d), dot);
#endif
            s = dot * scale;
        }
        float m = tree(s, tid, true);
        float p = j <= pos ? exp(s - m) : 0.0;
        float l = tree(p, tid, false);
        ps[tid] = p;
        barrier();
        uint nk = min(64u, pos + 1u - j0);
        uint base = ((t * uint(NH) + h) * S + c) * PART;
        [[unroll]] for (uint i = 0u; i < DPT; i++) {
            uint d = tid + 64u * i;
            if (d < uint(HD)) {
                // Keys ascending, one chain per dimension; eight keys' values loaded ahead of
                // their fmas so that their latencies overlap.
                float o = 0.0;
                uint vb = cache0 + j0 * KVD + d;
                uint jj = 0u;
                for (; jj + 8u <= nk; jj += 8u) {
                    float v8[8];
                    [[unroll]] for (uint e = 0u; e < 8u; e++) v8[e] = load_kv(addrCV, vb + (jj + e) * KVD);
                    [[unroll]] for (uint e = 0u; e < 8u; e++) o = fma(ps[jj + e], v8[e], o);
                }
                for (; jj < nk; jj++) o = fma(ps[jj], load_kv(addrCV, vb + jj * KVD), o);
                BufU32(addrP).v[base + 2u + d] = floatBitsToUint(o);
            }
        }
        if (tid == 0u) {
            BufU32(addrP).v[base] = floatBitsToUint(m);
            BufU32(addrP).v[base + 1u] = floatBitsToUint(l);
        }
        barrier();
    }
}
#else
void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrRows = a.v[1], addrP = a.v[4], addrO = a.v[5];
    ParamsI32 meta = ParamsI32(pc.params + 48ul);
    uint T = uint(meta.v[0]), ctx = uint(meta.v[1]);
    uint S = uint(meta.v[4]);
    uint tid = gl_LocalInvocationID.x, h = gl_WorkGroupID.y;
    const uint QD = uint(NH * HD);
    for (uint t = gl_WorkGroupID.x; t < T; t += gl_NumWorkGroups.x) {
        uint pos = min(BufU32(addrRows).v[2u * t + 1u], ctx - 1u);
        uint nc = min(pos / 64u + 1u, S);
        uint base = (t * uint(NH) + h) * S * PART;
        // Chunks in blocks of 8 whose loads precede their use (clamped indices: no branch), so
        // their latencies overlap; every sum keeps its order (chunks ascending).
        float M = uintBitsToFloat(0xff800000u);
        for (uint c0 = 0u; c0 < nc; c0 += 8u) {
            float m8[8];
            [[unroll]] for (uint e = 0u; e < 8u; e++) m8[e] = uintBitsToFloat(BufU32(addrP).v[base + min(c0 + e, nc - 1u) * PART]);
            [[unroll]] for (uint e = 0u; e < 8u; e++) M = max(M, m8[e]);   // (a repeated chunk changes no max)
        }
        float L = 0.0;
        for (uint c0 = 0u; c0 < nc; c0 += 8u) {
            float m8[8], l8[8];
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
                uint c = min(c0 + e, nc - 1u);
                m8[e] = uintBitsToFloat(BufU32(addrP).v[base + c * PART]);
                l8[e] = uintBitsToFloat(BufU32(addrP).v[base + c * PART + 1u]);
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
                        m8[e] = uintBitsToFloat(BufU32(addrP).v[base + c * PART]);
                        p8[e] = uintBitsToFloat(BufU32(addrP).v[base + c * PART + 2u + d]);
                    }
                    [[unroll]] for (uint e = 0u; e < 8u; e++) {
                        if (c0 + e < nc) o = fma(p8[e], exp(m8[e] - M), o);
                    }
                }
                BufU32(addrO).v[t * QD + h * uint(HD) + d] = floatBitsToUint(o / L);
            }
        }
    }
}
#endif
