// Causal attention of token row t (slot s, position p) against its session's cache rows
// 0..=p, one workgroup of 64 per (row, query head); GQA: query head h reads kv head
// h / (NH / NKV). Keys are taken 64 at a time: thread j scores key j0 + j (q·k · scale, one
// fma chain over the head's dimensions), the chunk's max and sum go over a fixed tree, and the
// output is rescaled online (flash-attention style) and divided once at the end. The result
// depends on the row's own position and cache alone: batching never changes a bit.

layout(local_size_x = 64) in;
shared float qs[HD];
shared float ps[64];
shared float red[64];

float load_kv(uint64_t addr, uint idx) {
#ifdef KV_F16
    return enc_f16_to_f32(uint(BufU16(addr).v[idx]));
#else
    return uintBitsToFloat(BufU32(addr).v[idx]);
#endif
}

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

const uint DPT = (uint(HD) + 63u) / 64u;

void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrQ = a.v[0], addrRows = a.v[1], addrCK = a.v[2], addrCV = a.v[3], addrO = a.v[4];
    ParamsI32 meta = ParamsI32(pc.params + 40ul);
    uint T = uint(meta.v[0]), ctx = uint(meta.v[1]), slots = uint(meta.v[2]);
    float scale = intBitsToFloat(meta.v[3]);
    uint tid = gl_LocalInvocationID.x, h = gl_WorkGroupID.y, kvh = h / uint(NH / NKV);
    const uint QD = uint(NH * HD), KVD = uint(NKV * HD);
    for (uint t = gl_WorkGroupID.x; t < T; t += gl_NumWorkGroups.x) {
        uint slot = min(BufU32(addrRows).v[2u * t], slots - 1u);
        uint pos = min(BufU32(addrRows).v[2u * t + 1u], ctx - 1u);
        for (uint d = tid; d < uint(HD); d += 64u) qs[d] = uintBitsToFloat(BufU32(addrQ).v[t * QD + h * uint(HD) + d]);
        barrier();
        uint cache0 = slot * ctx * KVD + kvh * uint(HD);
        float m = uintBitsToFloat(0xff800000u), l = 0.0;
        float acc[DPT];
        [[unroll]] for (uint i = 0u; i < DPT; i++) acc[i] = 0.0;
        for (uint j0 = 0u; j0 <= pos; j0 += 64u) {
            uint j = j0 + tid;
            float s = uintBitsToFloat(0xff800000u);
            if (j <= pos) {
                float dot = 0.0;
                uint kb = cache0 + j * KVD;
                for (uint d = 0u; d < uint(HD); d++) dot = fma(qs[d], load_kv(addrCK, kb + d), dot);
                s = dot * scale;
            }
            float mNew = max(m, tree(s, tid, true));
            float alpha = exp(m - mNew);
            float p = j <= pos ? exp(s - mNew) : 0.0;
            l = l * alpha + tree(p, tid, false);
            ps[tid] = p;
            barrier();
            uint nk = min(64u, pos + 1u - j0);
            [[unroll]] for (uint i = 0u; i < DPT; i++) {
                uint d = tid + 64u * i;
                if (d < uint(HD)) {
                    float o = acc[i] * alpha;
                    for (uint jj = 0u; jj < nk; jj++) o = fma(ps[jj], load_kv(addrCV, cache0 + (j0 + jj) * KVD + d), o);
                    acc[i] = o;
                }
            }
            m = mNew;
            barrier();
        }
        [[unroll]] for (uint i = 0u; i < DPT; i++) {
            uint d = tid + 64u * i;
            if (d < uint(HD)) BufU32(addrO).v[t * QD + h * uint(HD) + d] = floatBitsToUint(acc[i] / l);
        }
        barrier();
    }
}
