// Per token row t (session slot s, position p from rows[t] = (s, p)) and head: optional
// per-head RMSNorm (QK_NORM, qwen3), rotary embedding of the first ROPE_DIMS dimensions with
// the host's cos/sin table (computed in f64, rounded once), then q written back in place and
// k, v stored into the KV cache at (s, p). Heads 0..NH are q, NH..NH+NKV are k, the rest v.
// NEOX rotates pairs (i, i + ROPE_DIMS/2), otherwise adjacent pairs (2i, 2i + 1).
// The cache holds [slots][ctx][NKV · HD] in f16 (KV_F16, rounded to nearest even) or f32.

layout(local_size_x = 128) in;
shared float hv[256];
shared float red[128];

void store_kv(uint64_t addr, uint idx, float v) {
#ifdef KV_F16
    BufU16(addr).v[idx] = uint16_t(enc_f32_to_f16(floatBitsToUint(v)));
#else
    BufU32(addr).v[idx] = floatBitsToUint(v);
#endif
}

void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrQ = a.v[0], addrK = a.v[1], addrV = a.v[2], addrRows = a.v[3], addrCS = a.v[4];
    uint64_t addrCK = a.v[5], addrCV = a.v[6], addrQN = a.v[7], addrKN = a.v[8];
    ParamsI32 meta = ParamsI32(pc.params + 72ul);
    uint T = uint(meta.v[0]), ctx = uint(meta.v[1]), slots = uint(meta.v[2]);
    float eps = intBitsToFloat(meta.v[3]);
    uint tid = gl_LocalInvocationID.x;
    uint head = gl_WorkGroupID.y;
    const uint QD = uint(NH * HD), KVD = uint(NKV * HD);
    for (uint t = gl_WorkGroupID.x; t < T; t += gl_NumWorkGroups.x) {
        uint slot = min(BufU32(addrRows).v[2u * t], slots - 1u);
        uint pos = min(BufU32(addrRows).v[2u * t + 1u], ctx - 1u);
        bool isQ = head < uint(NH), isK = !isQ && head < uint(NH + NKV);
        uint64_t src = isQ ? addrQ : (isK ? addrK : addrV);
        uint h = isQ ? head : (isK ? head - uint(NH) : head - uint(NH + NKV));
        uint base = t * (isQ ? QD : KVD) + h * uint(HD);
        for (uint d = tid; d < uint(HD); d += 128u) hv[d] = uintBitsToFloat(BufU32(src).v[base + d]);
        barrier();
#ifdef QK_NORM
        if (isQ || isK) {
            float ss = 0.0;
            for (uint d = tid; d < uint(HD); d += 128u) ss = fma(hv[d], hv[d], ss);
            red[tid] = ss;
            barrier();
            [[unroll]] for (uint s = 64u; s > 0u; s >>= 1) {
                if (tid < s) red[tid] += red[tid + s];
                barrier();
            }
            float scale = 1.0 / sqrt(red[0] / float(HD) + eps);
            uint64_t g = isQ ? addrQN : addrKN;
            barrier();
            for (uint d = tid; d < uint(HD); d += 128u) hv[d] = (hv[d] * scale) * uintBitsToFloat(BufU32(g).v[d]);
            barrier();
        }
#endif
        if (isQ || isK) {
            for (uint i = tid; i < uint(ROPE_DIMS) / 2u; i += 128u) {
#ifdef NEOX
                uint i0 = i, i1 = i + uint(ROPE_DIMS) / 2u;
#else
                uint i0 = 2u * i, i1 = 2u * i + 1u;
#endif
                uint cs = (pos * uint(ROPE_DIMS / 2) + i) * 2u;
                float c = uintBitsToFloat(BufU32(addrCS).v[cs]), s = uintBitsToFloat(BufU32(addrCS).v[cs + 1u]);
                // rope_rotate: the Q and K matvecs' ROPE store (llm_matvec.glsl) calls it too
                vec2 r = rope_rotate(hv[i0], hv[i1], c, s);
                hv[i0] = r.x;
                hv[i1] = r.y;
            }
            barrier();
        }
        uint cacheBase = (slot * ctx + pos) * KVD + h * uint(HD);
        for (uint d = tid; d < uint(HD); d += 128u) {
            if (isQ) BufU32(addrQ).v[base + d] = floatBitsToUint(hv[d]);
            else store_kv(isK ? addrCK : addrCV, cacheBase + d, hv[d]);
        }
        barrier();
    }
}
