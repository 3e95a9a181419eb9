// Self-attention per (query block, head, sequence) without materialising the scores (see
// encoder/kernels.rs). Defines: D (head_dim), QB (queries per workgroup = invocations), KB
// (keys per shared tile).
//
// One invocation per query row keeps q and its output accumulator in registers; the
// workgroup stages KB keys and values of its head in shared memory at a time. Softmax is
// online per tile: scores of the tile, the running max raised once per tile, the
// accumulator and the denominator rescaled by e^(old max - new max). Keys are visited in
// ascending order in tiles fixed by D alone, so a query's result depends only on its own
// sequence (not on QB). exp is enc_expf (about an ulp).
//
// SCORES_IN_REGISTERS (GPUs; encoder/kernels.rs `AttentionScores`): the tile's scores stay in
// registers, its loops unrolled over KB with each key guarded, and shared memory holds only
// the K and V tiles, because shared memory bounds how many workgroups a GPU runs at once: on
// an H100 the scores in a shared [QB][KB + 1] array (16.4 KiB per workgroup with the tiles)
// let about two run per multiprocessor, 8 KiB more of unused shared memory made it one and
// the kernel 1.8x slower, and the scores in registers took it from 346 to 196 us at 64 x 128
// tokens (MiniLM; bench/README.md, stop 43), 185 with QB = 128. Otherwise (CPU devices, where
// lavapipe's compiler took minutes over the unrolled tiles) the scores go through shared
// memory. The same operations in the same order either way: the same bits.

shared float Ks[KB][D];
shared float Vs[KB][D];
#ifdef SCORES_IN_REGISTERS
#define SCORE(j) s[j]
#else
// Each invocation's scores of the current tile (its own row: no barrier needed).
shared float S[QB][KB + 1];
#define SCORE(j) S[tid][j]
#endif

layout(local_size_x = QB) in;
void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrQKV = a.v[0]; uint64_t addrOff = a.v[1]; uint64_t addrO = a.v[2];
    ParamsI32 meta = ParamsI32(pc.params + 24ul);
    int T = meta.v[0]; int H = meta.v[1]; int offQKV = meta.v[2]; int offOff = meta.v[3];
    float scale = intBitsToFloat(meta.v[4]);
    int B = meta.v[5];
    int stride = 3 * H * D;
    int tid = int(gl_LocalInvocationID.x);
    int h = int(gl_WorkGroupID.y);
    for (int b = int(gl_WorkGroupID.z); b < B; b += int(gl_NumWorkGroups.z)) {
        // Offsets clamped into [0, T]: a bad table cannot make a workgroup read out of range.
        int start = min(int(BufU32(addrOff).v[offOff + b]), T);
        int end = clamp(int(BufU32(addrOff).v[offOff + b + 1]), start, T);
        int len = end - start;
        for (int q0 = int(gl_WorkGroupID.x) * QB; q0 < len; q0 += int(gl_NumWorkGroups.x) * QB) {
            int t = q0 + tid;
            bool live = t < len;
            float q[D];
            float o[D];
            int qrow = offQKV + (start + (live ? t : 0)) * stride + h * D;
            [[unroll]] for (int d = 0; d < D; d++) {
                q[d] = uintBitsToFloat(BufU32(addrQKV).v[qrow + d]);
                o[d] = 0.0;
            }
            float m = uintBitsToFloat(0xFF800000u); // -Inf
            float l = 0.0;
            for (int j0 = 0; j0 < len; j0 += KB) {
                barrier();
                for (int e = tid; e < KB * D; e += QB) {
                    int j = e / D; int d = e % D;
                    if (j0 + j < len) {
                        int row = offQKV + (start + j0 + j) * stride + h * D + d;
                        Ks[j][d] = uintBitsToFloat(BufU32(addrQKV).v[row + H * D]);
                        Vs[j][d] = uintBitsToFloat(BufU32(addrQKV).v[row + 2 * H * D]);
                    }
                }
                barrier();
                if (live) {
                    int nk = min(KB, len - j0);
                    float mt = m;
#ifdef SCORES_IN_REGISTERS
                    float s[KB];
                    [[unroll]] for (int j = 0; j < KB; j++) if (j < nk) {
#else
                    for (int j = 0; j < nk; j++) {
#endif
                        float dot = 0.0;
                        [[unroll]] for (int d = 0; d < D; d++) dot = fma(q[d], Ks[j][d], dot);
                        SCORE(j) = dot * scale;
                        mt = max(mt, SCORE(j));
                    }
                    // exp(-Inf - finite) = 0 on the first tile; a tile of -Inf scores only
                    // (infinite inputs) keeps the running values.
                    float corr = (m == mt) ? 1.0 : enc_expf(m - mt);
                    l *= corr;
                    [[unroll]] for (int d = 0; d < D; d++) o[d] *= corr;
#ifdef SCORES_IN_REGISTERS
                    [[unroll]] for (int j = 0; j < KB; j++) if (j < nk) {
#else
                    for (int j = 0; j < nk; j++) {
#endif
                        float p = enc_expf(SCORE(j) - mt);
                        l += p;
                        [[unroll]] for (int d = 0; d < D; d++) o[d] = fma(p, Vs[j][d], o[d]);
                    }
                    m = mt;
                }
            }
            if (live) {
                int orow = (start + t) * H * D + h * D;
                float inv = 1.0 / l;
                [[unroll]] for (int d = 0; d < D; d++) BufU32(addrO).v[orow + d] = floatBitsToUint(o[d] * inv);
            }
        }
    }
}
