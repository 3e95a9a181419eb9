// out[t, n] = act(Σ_k x[t, k]·w[n, k] + bias[n]) + residual[t, n] (see encoder/kernels.rs).
// Defines from the generator: BM, BN, BK (the tile), W_F32 | W_F16 | W_BF16 (weight storage),
// X_F16 | X_BF16 (activations rounded on load), XV4 / WV4 (16-/8-byte loads: K % 4 == 0 and
// aligned), OV4 (16-byte stores), CHECK_N, CHECK_K (N or K not a tile multiple), GELU, RES.
// Rows past T are always checked: the tile never depends on T.
//
// A workgroup of (BM/4)·(BN/4) invocations owns a BM × BN output tile, each invocation a 4 × 4
// block (rows ty·4.., columns tx·4..). x and w tiles are staged transposed in shared memory as
// [k][row/4] 4-vectors, double-buffered, the next tile's loads in flight while the current one
// is multiplied. Each output is one f32 fma chain in ascending k: its bits do not depend on the
// tile, its position in it, or T.

layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufV4 { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer BufV2 { uvec2 v[]; };

#define NT ((BM / 4) * (BN / 4))
#define QA (BM * BK / 4)
#define QB (BN * BK / 4)
#define LA ((QA + NT - 1) / NT)
#define LB ((QB + NT - 1) / NT)

shared vec4 As[2][BK][BM / 4 + 1];
shared vec4 Bs[2][BK][BN / 4 + 1];

uint64_t addrX, addrW;
int T, N, K, offX, offW;

float x_round(float v) {
#if defined(X_F16)
    return enc_round_f16(v);
#elif defined(X_BF16)
    return enc_round_bf16(v);
#else
    return v;
#endif
}

// x[r, c..c+3] (zeros outside), rounded to the activation type.
vec4 load_x(int r, int c) {
    vec4 q = vec4(0.0);
    if (r < T) {
#ifdef XV4
        if (c < K) q = uintBitsToFloat(BufV4(addrX).v[(offX + r * K + c) >> 2]);
#else
        int at = offX + r * K + c;
        [[unroll]] for (int j = 0; j < 4; j++) {
            if (c + j < K) q[j] = uintBitsToFloat(BufU32(addrX).v[at + j]);
        }
#endif
    }
#if defined(X_F16) || defined(X_BF16)
    q = vec4(x_round(q.x), x_round(q.y), x_round(q.z), x_round(q.w));
#endif
    return q;
}

float w_decode(uint bits) {
#if defined(W_F16)
    return enc_f16_to_f32(bits);
#else
    return uintBitsToFloat(bits << 16);
#endif
}

// w[n, c..c+3] (zeros outside) as f32.
vec4 load_w(int n, int c) {
    vec4 q = vec4(0.0);
#ifdef CHECK_N
    if (n >= N) return q;
#endif
#ifdef WV4
  #ifdef CHECK_K
    if (c >= K) return q;
  #endif
  #ifdef W_F32
    q = uintBitsToFloat(BufV4(addrW).v[(offW + n * K + c) >> 2]);
  #else
    uvec2 u = BufV2(addrW).v[(offW + n * K + c) >> 2];
    q = vec4(w_decode(u.x & 0xFFFFu), w_decode(u.x >> 16), w_decode(u.y & 0xFFFFu), w_decode(u.y >> 16));
  #endif
#else
    int at = offW + n * K + c;
    [[unroll]] for (int j = 0; j < 4; j++) {
        if (c + j < K) {
  #ifdef W_F32
            q[j] = uintBitsToFloat(BufU32(addrW).v[at + j]);
  #else
            q[j] = w_decode(uint(BufU16(addrW).v[at + j]));
  #endif
        }
    }
#endif
    return q;
}

layout(local_size_x = NT) in;
void main() {
    ParamsU64 a = ParamsU64(pc.params);
    addrX = a.v[0]; addrW = a.v[1];
    uint64_t addrBias = a.v[2]; uint64_t addrR = a.v[3]; uint64_t addrO = a.v[4];
    ParamsI32 meta = ParamsI32(pc.params + 40ul);
    T = meta.v[0]; N = meta.v[1]; K = meta.v[2];
    offX = meta.v[3]; offW = meta.v[4]; int offBias = meta.v[5]; int offR = meta.v[6];
    int tid = int(gl_LocalInvocationID.x);
    int tx = tid % (BN / 4); int ty = tid / (BN / 4);
    int n0 = int(gl_WorkGroupID.x) * BN;
    int nt = (K + BK - 1) / BK;
    for (int m0 = int(gl_WorkGroupID.y) * BM; m0 < T; m0 += int(gl_NumWorkGroups.y) * BM) {
        precise float acc[4][4];
        [[unroll]] for (int i = 0; i < 4; i++) [[unroll]] for (int j = 0; j < 4; j++) acc[i][j] = 0.0;
        vec4 ra[LA]; vec4 rb[LB];
        int k0 = 0;
        [[unroll]] for (int i = 0; i < LA; i++) {
            int q = tid + i * NT;
            if (q < QA) ra[i] = load_x(m0 + q / (BK / 4), k0 + (q % (BK / 4)) * 4);
        }
        [[unroll]] for (int i = 0; i < LB; i++) {
            int q = tid + i * NT;
            if (q < QB) rb[i] = load_w(n0 + q / (BK / 4), k0 + (q % (BK / 4)) * 4);
        }
        int buf = 0;
        barrier();
        [[unroll]] for (int i = 0; i < LA; i++) {
            int q = tid + i * NT;
            if (q < QA) { int r = q / (BK / 4); int c = (q % (BK / 4)) * 4;
                [[unroll]] for (int j = 0; j < 4; j++) As[buf][c + j][r >> 2][r & 3] = ra[i][j]; }
        }
        [[unroll]] for (int i = 0; i < LB; i++) {
            int q = tid + i * NT;
            if (q < QB) { int r = q / (BK / 4); int c = (q % (BK / 4)) * 4;
                [[unroll]] for (int j = 0; j < 4; j++) Bs[buf][c + j][r >> 2][r & 3] = rb[i][j]; }
        }
        barrier();
        for (int kt = 0; kt < nt; kt++) {
            int cur = kt & 1;
            k0 = (kt + 1) * BK;
            bool more = kt + 1 < nt;
            if (more) {
                [[unroll]] for (int i = 0; i < LA; i++) {
                    int q = tid + i * NT;
                    if (q < QA) ra[i] = load_x(m0 + q / (BK / 4), k0 + (q % (BK / 4)) * 4);
                }
                [[unroll]] for (int i = 0; i < LB; i++) {
                    int q = tid + i * NT;
                    if (q < QB) rb[i] = load_w(n0 + q / (BK / 4), k0 + (q % (BK / 4)) * 4);
                }
            }
            [[unroll]] for (int kk = 0; kk < BK; kk++) {
                vec4 av = As[cur][kk][ty];
                vec4 bv = Bs[cur][kk][tx];
                [[unroll]] for (int i = 0; i < 4; i++) [[unroll]] for (int j = 0; j < 4; j++) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
            }
            if (more) {
                buf = cur ^ 1;
                [[unroll]] for (int i = 0; i < LA; i++) {
                    int q = tid + i * NT;
                    if (q < QA) { int r = q / (BK / 4); int c = (q % (BK / 4)) * 4;
                        [[unroll]] for (int j = 0; j < 4; j++) As[buf][c + j][r >> 2][r & 3] = ra[i][j]; }
                }
                [[unroll]] for (int i = 0; i < LB; i++) {
                    int q = tid + i * NT;
                    if (q < QB) { int r = q / (BK / 4); int c = (q % (BK / 4)) * 4;
                        [[unroll]] for (int j = 0; j < 4; j++) Bs[buf][c + j][r >> 2][r & 3] = rb[i][j]; }
                }
            }
            barrier();
        }
        // Epilogue: + bias, activation, + residual, one row of 4 at a time.
        [[unroll]] for (int i = 0; i < 4; i++) {
            int m = m0 + ty * 4 + i;
            int n = n0 + tx * 4;
            if (m >= T) continue;
            vec4 o;
            [[unroll]] for (int j = 0; j < 4; j++) {
                int nj = n + j;
#ifdef CHECK_N
                if (nj >= N) nj = N - 1;
#endif
                float v = acc[i][j] + uintBitsToFloat(BufU32(addrBias).v[offBias + nj]);
#ifdef GELU
                v = enc_gelu(v);
#endif
#ifdef RES
                v = v + uintBitsToFloat(BufU32(addrR).v[offR + m * N + nj]);
#endif
                o[j] = v;
            }
#ifdef OV4
  #ifdef CHECK_N
            if (n < N)
  #endif
            BufV4(addrO).v[(m * N + n) >> 2] = floatBitsToUint(o);
#else
            [[unroll]] for (int j = 0; j < 4; j++) {
  #ifdef CHECK_N
                if (n + j < N)
  #endif
                BufU32(addrO).v[m * N + n + j] = floatBitsToUint(o[j]);
            }
#endif
        }
        barrier();
    }
}
