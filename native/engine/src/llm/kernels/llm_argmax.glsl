// ids[r] = argmax over logits row r ([R, V] f32), the lowest index among equal maxima; NaN
// logits never win (a row of NaN gives 0). One workgroup of 256 per row, fixed tree.

layout(local_size_x = 256) in;
shared float bv[256];
shared uint bi[256];

void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrL = a.v[0], addrO = a.v[1];
    ParamsI32 meta = ParamsI32(pc.params + 16ul);
    uint R = uint(meta.v[0]), V = uint(meta.v[1]), offL = uint(meta.v[2]);
    uint tid = gl_LocalInvocationID.x;
    for (uint r = gl_WorkGroupID.x; r < R; r += gl_NumWorkGroups.x) {
        float best = uintBitsToFloat(0xff800000u);
        uint bestI = 0xffffffffu;
        for (uint i = tid; i < V; i += 256u) {
            float v = uintBitsToFloat(BufU32(addrL).v[offL + r * V + i]);
            if (v > best || (bestI == 0xffffffffu && !isnan(v))) { best = v; bestI = i; }
        }
        bv[tid] = best; bi[tid] = bestI;
        barrier();
        [[unroll]] for (uint s = 128u; s > 0u; s >>= 1) {
            if (tid < s) {
                float o = bv[tid + s]; uint oi = bi[tid + s];
                if (oi != 0xffffffffu && (bi[tid] == 0xffffffffu || o > bv[tid] || (o == bv[tid] && oi < bi[tid]))) { bv[tid] = o; bi[tid] = oi; }
            }
            barrier();
        }
        if (tid == 0u) BufU32(addrO).v[r] = bi[0] == 0xffffffffu ? 0u : bi[0];
        barrier();
    }
}
