// Pooling per sequence (one workgroup of 256 per sequence): CLS takes the first row, MEAN sums
// each column over the sequence's rows in ascending order and divides by the length (an empty
// sequence gives zeros); NORMALIZE then divides the row by max(||row||, 1e-12) (the squares
// summed over a fixed tree in shared memory).

shared float red[256];

layout(local_size_x = 256) in;
void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrX = a.v[0]; uint64_t addrOff = a.v[1]; uint64_t addrO = a.v[2];
    ParamsI32 meta = ParamsI32(pc.params + 24ul);
    int T = meta.v[0]; int H = meta.v[1]; int B = meta.v[2]; int offX = meta.v[3]; int offOff = meta.v[4];
    int tid = int(gl_LocalInvocationID.x);
    for (int b = int(gl_WorkGroupID.x); b < B; b += int(gl_NumWorkGroups.x)) {
        int start = min(int(BufU32(addrOff).v[offOff + b]), T);
        int end = clamp(int(BufU32(addrOff).v[offOff + b + 1]), start, T);
        int len = end - start;
        float sq = 0.0;
        for (int c = tid; c < H; c += 256) {
            float v = 0.0;
#ifdef CLS
            if (len > 0) v = uintBitsToFloat(BufU32(addrX).v[offX + start * H + c]);
#else
            for (int r = start; r < end; r++) v += uintBitsToFloat(BufU32(addrX).v[offX + r * H + c]);
            v = len > 0 ? v / float(len) : 0.0;
#endif
            sq = fma(v, v, sq);
            BufU32(addrO).v[b * H + c] = floatBitsToUint(v);
        }
#ifdef NORMALIZE
        red[tid] = sq;
        barrier();
        [[unroll]] for (int s = 128; s > 0; s >>= 1) {
            if (tid < s) red[tid] += red[tid + s];
            barrier();
        }
        float den = max(sqrt(red[0]), 1e-12);
        barrier();
        // each invocation rescales the values it wrote itself
        for (int c = tid; c < H; c += 256) {
            float v = uintBitsToFloat(BufU32(addrO).v[b * H + c]);
            BufU32(addrO).v[b * H + c] = floatBitsToUint(v / den);
        }
#endif
    }
}
