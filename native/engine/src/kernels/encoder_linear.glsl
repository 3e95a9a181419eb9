// out[t, n] = act(Σ_k x[t, k]·w[n, k] + bias[n]) + residual[t, n] (see encoder/kernels.rs).
// Defines from the generator: BM, BN, BK (the tile), TM, TN (each invocation's block: 1, 2 or
// 4 rows by 1, 2 or 4 columns), W_F32 | W_F16 | W_BF16 (weight storage), X_F16 | X_BF16
// (activations rounded on load), COMP (compensated: both f32 operands split into bf16 hi + lo
// as they are staged), XV4 / WV4 (16-/8-byte loads: K % 4 == 0 and aligned), OV4 (16-byte
// stores, TN == 4 only), CHECK_N, CHECK_K (N or K not a tile multiple), GELU, RES. Rows past T
// are always checked.
//
// A workgroup of (BM/TM)·(BN/TN) invocations owns a BM × BN output tile, each invocation a
// TM × TN block (rows ty·TM.., columns tx·TN..). x and w tiles are staged transposed in shared
// memory as [k][row/TM] TM-vectors (TN for w), double-buffered, the next tile's loads in flight
// while the current one is multiplied. Each output is one f32 fma chain in ascending k (two in
// COMP: hi·hi, and hi·lo + lo·hi, added at the end), whatever BK, so its bits do not depend on
// the tile, its position in it, or T.
//
// COMP stages each operand as one uint: bf16(v) in the high half, bf16(v - bf16(v)) in the low
// half, so the shared tiles are no bigger than f32 ones and unpacking is a mask and a shift.

layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufV4 { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer BufV2 { uvec2 v[]; };

#define NT ((BM / TM) * (BN / TN))
#define QA (BM * BK / 4)
#define QB (BN * BK / 4)
#define LA ((QA + NT - 1) / NT)
#define LB ((QB + NT - 1) / NT)

// A_F / B_F: an invocation's TM (TN) operands as floats, A_U / B_U as uints; A_AT / B_AT pick
// one of them (a scalar when the block is 1 wide).
#if TM == 4
  #define A_F vec4
  #define A_U uvec4
#elif TM == 2
  #define A_F vec2
  #define A_U uvec2
#else
  #define A_F float
  #define A_U uint
#endif
#if TN == 4
  #define B_F vec4
  #define B_U uvec4
#elif TN == 2
  #define B_F vec2
  #define B_U uvec2
#else
  #define B_F float
  #define B_U uint
#endif
#if TM == 1
  #define A_AT(v, i) v
#else
  #define A_AT(v, i) v[i]
#endif
#if TN == 1
  #define B_AT(v, j) v
#else
  #define B_AT(v, j) v[j]
#endif
#ifdef COMP
  #define A_S A_U
  #define B_S B_U
#else
  #define A_S A_F
  #define B_S B_F
#endif

shared A_S As[2][BK][BM / TM + 1];
shared B_S Bs[2][BK][BN / TN + 1];

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

#ifdef COMP
// v as bf16 hi (high half) and bf16 lo (low half): hi = bf16(v), lo = bf16(v - hi) (v - hi is
// exact in f32), so |v - hi - lo| <= 2^-16·|v|. Where rounding hi would overflow (|v| within
// half a bf16 ulp of f32's max) both parts are truncated instead, so hi + lo <= |v| stays
// finite (2^-14·|v| there). Inf and NaN go to hi with lo = 0.
uint stage(float v) {
    float hi = enc_round_bf16(v);
    float lo = 0.0;
    if (isinf(hi) && !isinf(v)) {
        hi = uintBitsToFloat(floatBitsToUint(v) & 0xFFFF0000u);
        precise float r = v - hi;
        lo = uintBitsToFloat(floatBitsToUint(r) & 0xFFFF0000u);
    } else if (!isinf(hi)) {
        precise float r = v - hi;
        lo = enc_round_bf16(r);
    }
    return (floatBitsToUint(hi) & 0xFFFF0000u) | (floatBitsToUint(lo) >> 16);
}
#else
float stage(float v) { return v; }
#endif

layout(local_size_x = NT) in;
// The next K step's x and w tiles from device memory into registers (ra, rb; at k0), and
// from registers into shared buffer `buf` (staged: rounded or split per the mode). Used for the
// first step and, double-buffered, inside the K loop.
#define LOAD_TILES() \
    [[unroll]] for (int i = 0; i < LA; i++) { \
        int q = tid + i * NT; \
        if (q < QA) ra[i] = load_x(m0 + q / (BK / 4), k0 + (q % (BK / 4)) * 4); \
    } \
    [[unroll]] for (int i = 0; i < LB; i++) { \
        int q = tid + i * NT; \
        if (q < QB) rb[i] = load_w(n0 + q / (BK / 4), k0 + (q % (BK / 4)) * 4); \
    }
#define STAGE_TILES() \
    [[unroll]] for (int i = 0; i < LA; i++) { \
        int q = tid + i * NT; \
        if (q < QA) { int r = q / (BK / 4); int c = (q % (BK / 4)) * 4; \
            [[unroll]] for (int j = 0; j < 4; j++) A_AT(As[buf][c + j][r / TM], r % TM) = stage(ra[i][j]); } \
    } \
    [[unroll]] for (int i = 0; i < LB; i++) { \
        int q = tid + i * NT; \
        if (q < QB) { int r = q / (BK / 4); int c = (q % (BK / 4)) * 4; \
            [[unroll]] for (int j = 0; j < 4; j++) B_AT(Bs[buf][c + j][r / TN], r % TN) = stage(rb[i][j]); } \
    }

void main() {
    ParamsU64 a = ParamsU64(pc.params);
    addrX = a.v[0]; addrW = a.v[1];
    uint64_t addrBias = a.v[2]; uint64_t addrR = a.v[3]; uint64_t addrO = a.v[4];
    ParamsI32 meta = ParamsI32(pc.params + 40ul);
    T = meta.v[0]; N = meta.v[1]; K = meta.v[2];
    offX = meta.v[3]; offW = meta.v[4]; int offBias = meta.v[5]; int offR = meta.v[6];
    int tid = int(gl_LocalInvocationID.x);
    int tx = tid % (BN / TN); int ty = tid / (BN / TN);
    int n0 = int(gl_WorkGroupID.x) * BN;
    int nt = (K + BK - 1) / BK;
    for (int m0 = int(gl_WorkGroupID.y) * BM; m0 < T; m0 += int(gl_NumWorkGroups.y) * BM) {
        precise float acc[TM][TN];
        [[unroll]] for (int i = 0; i < TM; i++) [[unroll]] for (int j = 0; j < TN; j++) acc[i][j] = 0.0;
#ifdef COMP
        precise float cor[TM][TN]; // hi·lo + lo·hi
        [[unroll]] for (int i = 0; i < TM; i++) [[unroll]] for (int j = 0; j < TN; j++) cor[i][j] = 0.0;
#endif
        vec4 ra[LA]; vec4 rb[LB];
        int k0 = 0;
        LOAD_TILES();
        int buf = 0;
        barrier();
        STAGE_TILES();
        barrier();
        for (int kt = 0; kt < nt; kt++) {
            int cur = kt & 1;
            k0 = (kt + 1) * BK;
            bool more = kt + 1 < nt;
            if (more) {
                LOAD_TILES();
            }
            [[unroll]] for (int kk = 0; kk < BK; kk++) {
                A_S av = As[cur][kk][ty];
                B_S bv = Bs[cur][kk][tx];
#ifdef COMP
                A_F ah = uintBitsToFloat(av & 0xFFFF0000u); A_F al = uintBitsToFloat(av << 16);
                B_F bh = uintBitsToFloat(bv & 0xFFFF0000u); B_F bl = uintBitsToFloat(bv << 16);
                [[unroll]] for (int i = 0; i < TM; i++) [[unroll]] for (int j = 0; j < TN; j++) {
                    acc[i][j] = fma(A_AT(ah, i), B_AT(bh, j), acc[i][j]);
                    cor[i][j] = fma(A_AT(al, i), B_AT(bh, j), fma(A_AT(ah, i), B_AT(bl, j), cor[i][j]));
                }
#else
                [[unroll]] for (int i = 0; i < TM; i++) [[unroll]] for (int j = 0; j < TN; j++) acc[i][j] = fma(A_AT(av, i), B_AT(bv, j), acc[i][j]);
#endif
            }
            if (more) {
                buf = cur ^ 1;
                STAGE_TILES();
            }
            barrier();
        }
        // Epilogue: (+ the compensation,) + bias, activation, + residual, one row of TN at a time.
        [[unroll]] for (int i = 0; i < TM; i++) {
            int m = m0 + ty * TM + i;
            int n = n0 + tx * TN;
            if (m >= T) continue;
            B_F o;
            [[unroll]] for (int j = 0; j < TN; j++) {
                int nj = n + j;
#ifdef CHECK_N
                if (nj >= N) nj = N - 1;
#endif
#ifdef COMP
                // an infinite hi·hi sum is the f32 result; its hi·lo terms may be Inf·0 = NaN
                precise float v = isinf(acc[i][j]) ? acc[i][j] : acc[i][j] + cor[i][j];
                v = v + uintBitsToFloat(BufU32(addrBias).v[offBias + nj]);
#else
                float v = acc[i][j] + uintBitsToFloat(BufU32(addrBias).v[offBias + nj]);
#endif
#ifdef GELU
                v = enc_gelu(v);
#endif
#ifdef RES
                v = v + uintBitsToFloat(BufU32(addrR).v[offR + m * N + nj]);
#endif
                B_AT(o, j) = v;
            }
#if defined(OV4) && TN == 4
  #ifdef CHECK_N
            if (n < N)
  #endif
            BufV4(addrO).v[(m * N + n) >> 2] = floatBitsToUint(o);
#else
            [[unroll]] for (int j = 0; j < TN; j++) {
  #ifdef CHECK_N
                if (n + j < N)
  #endif
                BufU32(addrO).v[m * N + n + j] = floatBitsToUint(B_AT(o, j));
            }
#endif
        }
        barrier();
    }
}
