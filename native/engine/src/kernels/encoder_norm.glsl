// Row-wise layernorm (biased variance, eps inside the square root, as torch.nn.LayerNorm), one
// workgroup of 256 per row; with EMBED the row is first gathered as
// (word[id] + token_type[type]) + position[pos] (HF BERT's order). VPT: values per invocation
// (ceil(H / 256)), kept in registers. Sums are f32 over a fixed tree in shared memory: a row's
// bits depend on the row alone.

shared float red[256];

// s / n rounded correctly (n > 0): GPU drivers may divide through a reciprocal (Vulkan allows
// 2.5 ulp), which turned the mean of a constant row into a value an ulp off and its zero
// variance into 2^-44 — with eps = 1e-12 that moved the row's outputs by 5 % on an H200. One
// fma step on the remainder restores the correctly rounded quotient.
float div_rn(float s, float n) {
    precise float q = s / n;
    precise float r = fma(-q, n, s);
    return fma(r, 1.0 / n, q);
}

float block_sum(float v, int tid) {
    red[tid] = v;
    barrier();
    [[unroll]] for (int s = 128; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

layout(local_size_x = 256) in;
void main() {
    ParamsU64 a = ParamsU64(pc.params);
#ifdef EMBED
    // ids, positions, types, word, position, token_type, gamma, beta, out
    uint64_t addrIds = a.v[0]; uint64_t addrPos = a.v[1]; uint64_t addrTyp = a.v[2];
    uint64_t addrWord = a.v[3]; uint64_t addrPosT = a.v[4]; uint64_t addrTypT = a.v[5];
    uint64_t addrG = a.v[6]; uint64_t addrB = a.v[7]; uint64_t addrO = a.v[8];
    ParamsI32 meta = ParamsI32(pc.params + 72ul);
    int V = meta.v[6]; int P = meta.v[7]; int S = meta.v[8];
    int offIds = meta.v[9]; int offPos = meta.v[10]; int offTyp = meta.v[11];
#else
    uint64_t addrX = a.v[0]; uint64_t addrG = a.v[1]; uint64_t addrB = a.v[2]; uint64_t addrO = a.v[3];
    ParamsI32 meta = ParamsI32(pc.params + 32ul);
#endif
    int T = meta.v[0]; int H = meta.v[1]; float eps = intBitsToFloat(meta.v[2]);
    int offX = meta.v[3]; int offG = meta.v[4]; int offB = meta.v[5];
    int tid = int(gl_LocalInvocationID.x);
    for (int row = int(gl_WorkGroupID.x); row < T; row += int(gl_NumWorkGroups.x)) {
        float v[VPT];
#ifdef EMBED
        // Indices clamped into their tables: the caller checks them on the host; this only
        // keeps a bad one from reading out of range.
        int id = int(min(BufU32(addrIds).v[offIds + row], uint(V - 1)));
        int ps = int(min(BufU32(addrPos).v[offPos + row], uint(P - 1)));
        int ty = int(min(BufU32(addrTyp).v[offTyp + row], uint(S - 1)));
#endif
        float sum = 0.0;
        [[unroll]] for (int i = 0; i < VPT; i++) {
            int c = tid + i * 256;
            v[i] = 0.0;
            if (c < H) {
#ifdef EMBED
                float w = uintBitsToFloat(BufU32(addrWord).v[id * H + c]);
                float tt = uintBitsToFloat(BufU32(addrTypT).v[ty * H + c]);
                float pp = uintBitsToFloat(BufU32(addrPosT).v[ps * H + c]);
                v[i] = (w + tt) + pp;
#else
                v[i] = uintBitsToFloat(BufU32(addrX).v[offX + row * H + c]);
#endif
            }
            sum += v[i];
        }
        float mean = div_rn(block_sum(sum, tid), float(H));
        float sq = 0.0;
        [[unroll]] for (int i = 0; i < VPT; i++) {
            int c = tid + i * 256;
            if (c < H) { float d = v[i] - mean; sq = fma(d, d, sq); }
        }
        float var = div_rn(block_sum(sq, tid), float(H));
        float rstd = 1.0 / sqrt(var + eps);
        [[unroll]] for (int i = 0; i < VPT; i++) {
            int c = tid + i * 256;
            if (c < H) {
                float g = uintBitsToFloat(BufU32(addrG).v[offG + c]);
                float bb = uintBitsToFloat(BufU32(addrB).v[offB + c]);
                BufU32(addrO).v[row * H + c] = floatBitsToUint(fma((v[i] - mean) * rstd, g, bb));
            }
        }
    }
}
