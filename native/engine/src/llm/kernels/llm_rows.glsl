// Row kernels over [T, H] f32 activations, one workgroup of 256 per row.
// GET_ROWS: out[t] = dequant(W[ids[t]]) (the token embedding lookup; ids clamped into the
//   table — the host checks them — so a bad id never reads out of range).
// RMSNORM: out[r] = x[src(r)] · (1 / sqrt(mean(x²) + eps)) · g, src(r) = rows[r] when GATHER
//   (the final norm of only the rows whose logits are wanted), else r. The sum of squares is
//   f32 over a fixed tree: a row's bits depend on that row alone.
// SUMS: what a residual product writes for the next norm (llm_matvec.glsl's NORM_OUT), for rows
//   no product wrote: out[r] = x[r] · g, and sums[r, b] the squares of x[r]'s block b of 8
//   values added from zero, ascending (as NORM_OUT adds them).

layout(local_size_x = 256) in;
shared float red[256];

void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrA = a.v[0], addrB = a.v[1], addrG = a.v[2], addrO = a.v[3];
    ParamsI32 meta = ParamsI32(pc.params + 32ul);
    uint R = uint(meta.v[0]), H = uint(meta.v[1]), extra = uint(meta.v[2]), offA = uint(meta.v[3]), offB = uint(meta.v[4]);
    float eps = intBitsToFloat(meta.v[5]);
    uint tid = gl_LocalInvocationID.x;
    for (uint r = gl_WorkGroupID.x; r < R; r += gl_NumWorkGroups.x) {
#ifdef GET_ROWS
        // A = table (rows of `extra` bytes), B = ids
        uint id = min(BufU32(addrB).v[offB + r], uint(meta.v[6]) - 1u);
        uint64_t row = addrA + uint64_t(id) * uint64_t(extra);
        for (uint u = tid; u < H / 32u; u += 256u) {
            float w[32];
            dq_unit(row, u, w);
            [[unroll]] for (uint j = 0u; j < 32u; j++) BufU32(addrO).v[r * H + u * 32u + j] = floatBitsToUint(w[j]);
        }
#elif defined(SUMS)
        // A = x, B = sums, G = gamma
        uint nb = (H + 7u) / 8u;
        for (uint b = tid; b < nb; b += 256u) {
            precise float a = 0.0;
            for (uint e = 0u; e < 8u && 8u * b + e < H; e++) {
                uint c = 8u * b + e;
                float v = uintBitsToFloat(BufU32(addrA).v[offA + r * H + c]);
                a = a + v * v;
                BufU32(addrO).v[r * H + c] = floatBitsToUint(v * uintBitsToFloat(BufU32(addrG).v[c]));
            }
            BufU32(addrB).v[offB + r * nb + b] = floatBitsToUint(a);
        }
#else
        // A = x, B = rows (GATHER), G = gamma
#ifdef GATHER
        uint src = min(BufU32(addrB).v[offB + r], extra - 1u);
#else
        uint src = r;
#endif
        uint base = offA + src * H;
        // Thread tid's sum of squares: x[c]² for c = tid, tid + 256, ... ascending, by fma.
#ifdef RMS_NV
        // (H ≤ 256·RMS_NV: all the thread's values — and their gammas — loaded at once and
        // kept for the output: one memory latency, not four. The same sum in the same order.)
        float v[RMS_NV], g[RMS_NV];
        [[unroll]] for (uint e = 0u; e < uint(RMS_NV); e++) {
            uint c = min(tid + 256u * e, H - 1u);   // (clamped: no branch)
            v[e] = uintBitsToFloat(BufU32(addrA).v[base + c]);
            g[e] = uintBitsToFloat(BufU32(addrG).v[c]);
        }
        float ss = 0.0;
        [[unroll]] for (uint e = 0u; e < uint(RMS_NV); e++) {
            if (tid + 256u * e < H) ss = fma(v[e], v[e], ss);
        }
#else
        // Eight of the thread's values loaded ahead of their fmas (a loop of single loads
        // waits out one memory latency per value); the chain is unchanged: c ascending.
        float ss = 0.0;
        for (uint c0 = tid; c0 < H; c0 += 8u * 256u) {
            float v8[8];
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
                uint c = c0 + 256u * e;
                v8[e] = uintBitsToFloat(BufU32(addrA).v[base + min(c, H - 1u)]);   // (clamped: no branch)
            }
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
                if (c0 + 256u * e < H) ss = fma(v8[e], v8[e], ss);
            }
        }
#endif
        // The fixed tree over the 256 sums (level s: thread l < s absorbs l + s); where
        // SUBGROUP_TREE, its levels below the subgroup size in the first subgroup's registers
        // by subgroupShuffleDown — the same pairs in the same order, so the same bits, and
        // 3 barriers instead of 8 on a 32-wide subgroup.
        red[tid] = ss;
        barrier();
#ifdef SUBGROUP_TREE
        uint lowest = gl_SubgroupSize;
#else
        const uint lowest = 1u;
#endif
        for (uint s = 128u; s >= lowest; s >>= 1) {
            if (tid < s) red[tid] += red[tid + s];
            barrier();
        }
#ifdef SUBGROUP_TREE
        if (tid < gl_SubgroupSize) {
            float t = red[tid];
            for (uint s = min(256u, gl_SubgroupSize) / 2u; s > 0u; s >>= 1) t = t + subgroupShuffleDown(t, s);
            if (tid == 0u) red[0] = t;
        }
        barrier();
#endif
        float scale = 1.0 / sqrt(red[0] / float(H) + eps);
        barrier();
#ifdef RMS_NV
        [[unroll]] for (uint e = 0u; e < uint(RMS_NV); e++) {
            uint c = tid + 256u * e;
            if (c < H) BufU32(addrO).v[r * H + c] = floatBitsToUint((v[e] * scale) * g[e]);
        }
#else
        for (uint c0 = tid; c0 < H; c0 += 8u * 256u) {
            float v8[8], g8[8];
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
                uint c = min(c0 + 256u * e, H - 1u);
                v8[e] = uintBitsToFloat(BufU32(addrA).v[base + c]);
                g8[e] = uintBitsToFloat(BufU32(addrG).v[c]);
            }
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
                uint c = c0 + 256u * e;
                if (c < H) BufU32(addrO).v[r * H + c] = floatBitsToUint((v8[e] * scale) * g8[e]);
            }
        }
#endif
#endif
    }
}
