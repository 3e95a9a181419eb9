// out[t, n] = Σ_k W[n, k] · x[t, k] (+ bias[n]) (+ residual[t, n]) for a quantized W (row n's
// bytes at W + n · ROW_BYTES, dequantized 32 values at a time by dq_unit), x and out f32.
// SWIGLU: two matrices (gate, up) of the same type; out = silu(gate·x) · (up·x).
//
// One workgroup per (row n, chunk of TC columns). Thread i takes units i, i + WG, ... of the
// row (32 values each) in ascending order, one f32 fma chain per column; the WG partial sums
// are then added over a fixed tree. The order of every sum depends on K alone — not on T, the
// chunk or the other columns — so a token's result is the same bits however many tokens (or
// sessions) share the dispatch.

layout(local_size_x = WG) in;
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer BufV4 { vec4 v[]; };

// x[xb .. xb+32) as floats; with X_VEC4 (x 16-byte aligned, the host checks) in 8 vector loads.
void load_x(uint64_t addrX, uint xb, out float xv[32]) {
#ifdef X_VEC4
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        vec4 q = BufV4(addrX).v[(xb >> 2) + i];
        xv[4u * i] = q.x; xv[4u * i + 1u] = q.y; xv[4u * i + 2u] = q.z; xv[4u * i + 3u] = q.w;
    }
#else
    [[unroll]] for (uint j = 0u; j < 32u; j++) xv[j] = uintBitsToFloat(BufU32(addrX).v[xb + j]);
#endif
}

// Adds unit u (32 values) of row n's products with columns t0 .. t0+TC-1 (those < T) to acc:
// acc[c] is column c's fma chain over the row (acc[TC + c]: the up matrix's, with SWIGLU).
void add_unit(uint64_t row, uint64_t row2, uint u, uint64_t addrX, uint offX, uint K, uint T, uint t0, inout float acc[TC * NSUM]) {
    float w[32];
    dq_unit(row, u, w);
#ifdef SWIGLU
    float w2[32];
    dq_unit(row2, u, w2);
#endif
    [[unroll]] for (int c = 0; c < TC; c++) {
        uint t = t0 + uint(c);
        if (t < T) {
            float xv[32];
            load_x(addrX, offX + t * K + u * 32u, xv);
            [[unroll]] for (uint j = 0u; j < 32u; j++) {
                acc[c] = fma(w[j], xv[j], acc[c]);
#ifdef SWIGLU
                acc[TC + c] = fma(w2[j], xv[j], acc[TC + c]);
#endif
            }
        }
    }
}

// out[t, n] from column t's sums (gate and, with SWIGLU, up): the epilogue, then the store.
void store_out(float v, float up, uint n, uint t, uint N, uint64_t addrB, uint offB, uint64_t addrR, uint offR, uint64_t addrO, uint offO) {
#ifdef SWIGLU
    v = (v / (1.0 + exp(-v))) * up;
#endif
#ifdef BIAS
    v += uintBitsToFloat(BufU32(addrB).v[offB + n]);
#endif
#ifdef RESIDUAL
    v = uintBitsToFloat(BufU32(addrR).v[offR + t * N + n]) + v;
#endif
    BufU32(addrO).v[offO + t * N + n] = floatBitsToUint(v);
}

#ifdef ROW_PER_THREAD
// CPU devices (lavapipe): one invocation per (row n, chunk of TC columns), the whole row in one
// fma chain over k ascending — no barriers, which a CPU driver pays for per workgroup.
void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrW = a.v[0], addrW2 = a.v[1], addrX = a.v[2], addrB = a.v[3], addrR = a.v[4], addrO = a.v[5];
    ParamsI32 meta = ParamsI32(pc.params + 48ul);
    uint N = uint(meta.v[0]), K = uint(meta.v[1]), T = uint(meta.v[2]), rowBytes = uint(meta.v[3]);
    uint offX = uint(meta.v[4]), offB = uint(meta.v[5]), offR = uint(meta.v[6]), offO = uint(meta.v[7]);
    uint units = K / 32u;
    uint t0 = gl_WorkGroupID.y * uint(TC);
    for (uint n = gl_GlobalInvocationID.x; n < N; n += gl_NumWorkGroups.x * uint(WG)) {
        float acc[TC * NSUM];
        [[unroll]] for (int c = 0; c < TC * NSUM; c++) acc[c] = 0.0;
        uint64_t row = addrW + uint64_t(n) * uint64_t(rowBytes), row2 = addrW2 + uint64_t(n) * uint64_t(rowBytes);
        for (uint u = 0u; u < units; u++) add_unit(row, row2, u, addrX, offX, K, T, t0, acc);
        for (int c = 0; c < TC; c++) {
            uint t = t0 + uint(c);
            if (t < T) store_out(acc[c], acc[(NSUM - 1) * TC + c], n, t, N, addrB, offB, addrR, offR, addrO, offO);
        }
    }
}
#else
// GPUs: NT lanes per row, WG / NT rows per workgroup. Lane i takes units i, i + NT, ... of its
// row in ascending order (one fma chain per column), then the NT partial sums of each column
// are added over a fixed tree. The order depends on K and NT alone — not on T, the chunk or
// the other rows — so a token's result is the same bits however many tokens share a step.
const uint ROWS = uint(WG) / uint(NT);
shared float red[TC * NSUM][WG];

void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrW = a.v[0], addrW2 = a.v[1], addrX = a.v[2], addrB = a.v[3], addrR = a.v[4], addrO = a.v[5];
    ParamsI32 meta = ParamsI32(pc.params + 48ul);
    uint N = uint(meta.v[0]), K = uint(meta.v[1]), T = uint(meta.v[2]), rowBytes = uint(meta.v[3]);
    uint offX = uint(meta.v[4]), offB = uint(meta.v[5]), offR = uint(meta.v[6]), offO = uint(meta.v[7]);
    uint tid = gl_LocalInvocationID.x, lane = tid % uint(NT), r = tid / uint(NT);
    uint units = K / 32u;
    uint t0 = gl_WorkGroupID.y * uint(TC);
    // The loop bound is uniform over the workgroup (barriers inside); rows past N idle.
    for (uint g = gl_WorkGroupID.x; g * ROWS < N; g += gl_NumWorkGroups.x) {
        uint n = g * ROWS + r;
        bool live = n < N;
        float acc[TC * NSUM];
        [[unroll]] for (int c = 0; c < TC * NSUM; c++) acc[c] = 0.0;
        uint nr = min(n, N - 1u);
        uint64_t row = addrW + uint64_t(nr) * uint64_t(rowBytes), row2 = addrW2 + uint64_t(nr) * uint64_t(rowBytes);
        for (uint u = lane; live && u < units; u += uint(NT)) add_unit(row, row2, u, addrX, offX, K, T, t0, acc);
        [[unroll]] for (int c = 0; c < TC * NSUM; c++) red[c][tid] = acc[c];
        barrier();
        [[unroll]] for (uint s = uint(NT) / 2u; s > 0u; s >>= 1) {
            if (lane < s) {
                [[unroll]] for (int c = 0; c < TC * NSUM; c++) red[c][tid] += red[c][tid + s];
            }
            barrier();
        }
        if (live && lane < uint(TC) && t0 + lane < T) {
            uint base = r * uint(NT);
            store_out(red[lane][base], red[(NSUM - 1) * TC + lane][base], n, t0 + lane, N, addrB, offB, addrR, offR, addrO, offO);
        }
        barrier();
    }
}
#endif
