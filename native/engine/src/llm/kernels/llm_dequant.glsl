// Dequantization of one unit of 32 consecutive values of a weight row, for the ggml type
// selected by WT_* (one is defined). Every formula is ggml's dequantize_row_* operation for
// operation in f32; `precise` keeps the compiler from fusing d·q − m into an fma, so the values
// are bit-identical to the host dequantizer (quant.rs) and to gguf-py.
// `row` is the address of the row's first byte; `unit` is k / 32.

uint rb(uint64_t a, uint off) { return uint(BufU8(a).v[off]); }
float rh(uint64_t a, uint off) { return enc_f16_to_f32(rb(a, off) | (rb(a, off + 1u) << 8)); }

#if defined(WT_F32)
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    [[unroll]] for (uint i = 0u; i < 32u; i++) w[i] = uintBitsToFloat(BufU32(row).v[unit * 32u + i]);
}
#elif defined(WT_F16)
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    [[unroll]] for (uint i = 0u; i < 32u; i++) w[i] = enc_f16_to_f32(uint(BufU16(row).v[unit * 32u + i]));
}
#elif defined(WT_BF16)
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    [[unroll]] for (uint i = 0u; i < 32u; i++) w[i] = uintBitsToFloat(uint(BufU16(row).v[unit * 32u + i]) << 16);
}
#elif defined(WT_Q4_0)
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    uint b = unit * 18u;
    float d = rh(row, b);
    [[unroll]] for (uint j = 0u; j < 16u; j++) {
        uint q = rb(row, b + 2u + j);
        precise float lo = float(int(q & 15u) - 8) * d;
        precise float hi = float(int(q >> 4) - 8) * d;
        w[j] = lo; w[j + 16u] = hi;
    }
}
#elif defined(WT_Q4_1)
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    uint b = unit * 20u;
    float d = rh(row, b), m = rh(row, b + 2u);
    [[unroll]] for (uint j = 0u; j < 16u; j++) {
        uint q = rb(row, b + 4u + j);
        precise float lo = float(q & 15u) * d + m;
        precise float hi = float(q >> 4) * d + m;
        w[j] = lo; w[j + 16u] = hi;
    }
}
#elif defined(WT_Q5_0)
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    uint b = unit * 22u;
    float d = rh(row, b);
    uint qh = rb(row, b + 2u) | (rb(row, b + 3u) << 8) | (rb(row, b + 4u) << 16) | (rb(row, b + 5u) << 24);
    [[unroll]] for (uint j = 0u; j < 16u; j++) {
        uint q = rb(row, b + 6u + j);
        uint h0 = ((qh >> j) << 4) & 16u, h1 = (qh >> (j + 12u)) & 16u;
        precise float lo = float(int((q & 15u) | h0) - 16) * d;
        precise float hi = float(int((q >> 4) | h1) - 16) * d;
        w[j] = lo; w[j + 16u] = hi;
    }
}
#elif defined(WT_Q5_1)
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    uint b = unit * 24u;
    float d = rh(row, b), m = rh(row, b + 2u);
    uint qh = rb(row, b + 4u) | (rb(row, b + 5u) << 8) | (rb(row, b + 6u) << 16) | (rb(row, b + 7u) << 24);
    [[unroll]] for (uint j = 0u; j < 16u; j++) {
        uint q = rb(row, b + 8u + j);
        uint h0 = ((qh >> j) << 4) & 16u, h1 = (qh >> (j + 12u)) & 16u;
        precise float lo = float((q & 15u) | h0) * d + m;
        precise float hi = float((q >> 4) | h1) * d + m;
        w[j] = lo; w[j + 16u] = hi;
    }
}
#elif defined(WT_Q8_0)
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    uint b = unit * 34u;
    float d = rh(row, b);
    [[unroll]] for (uint j = 0u; j < 32u; j++) {
        precise float v = float(int(int8_t(BufU8(row).v[b + 2u + j]))) * d;
        w[j] = v;
    }
}
#elif defined(WT_Q2_K)
// scales[16] qs[64] d dmin; unit j of the super-block: n = j/4 (128-half), s = j%4 (shift 2s)
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    uint b = (unit >> 3) * 84u, j = unit & 7u, n = j >> 2, s = j & 3u;
    float d = rh(row, b + 80u), dmin = rh(row, b + 82u);
    [[unroll]] for (uint half_ = 0u; half_ < 2u; half_++) {
        uint sc = rb(row, b + n * 8u + s * 2u + half_);
        precise float dl = d * float(sc & 15u);
        precise float ml = dmin * float(sc >> 4);
        [[unroll]] for (uint l = 0u; l < 16u; l++) {
            uint q = rb(row, b + 16u + n * 32u + half_ * 16u + l);
            precise float v = dl * float((q >> (2u * s)) & 3u) - ml;
            w[half_ * 16u + l] = v;
        }
    }
}
#elif defined(WT_Q3_K)
// hmask[32] qs[64] scales[12] d; unit j: n = j/4, s = j%4, high-bit mask 1 << (4n + s)
uint q3k_scale(uint64_t row, uint b, uint is) {
    uint w = is >> 2, k = is & 3u;
    uint lowsrc = rb(row, b + 96u + (w & 1u) * 4u + k);
    uint low = w < 2u ? (lowsrc & 15u) : (lowsrc >> 4);
    uint high = (rb(row, b + 104u + k) >> (2u * w)) & 3u;
    return low | (high << 4);
}
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    uint b = (unit >> 3) * 110u, j = unit & 7u, n = j >> 2, s = j & 3u;
    float d = rh(row, b + 108u);
    uint m = 1u << (4u * n + s);
    [[unroll]] for (uint half_ = 0u; half_ < 2u; half_++) {
        precise float dl = d * float(int(q3k_scale(row, b, n * 8u + s * 2u + half_)) - 32);
        [[unroll]] for (uint l = 0u; l < 16u; l++) {
            uint i = half_ * 16u + l;
            uint q = rb(row, b + 32u + n * 32u + i);
            int v = int((q >> (2u * s)) & 3u) - ((rb(row, b + i) & m) != 0u ? 0 : 4);
            precise float y = dl * float(v);
            w[i] = y;
        }
    }
}
#elif defined(WT_Q4_K) || defined(WT_Q5_K)
// d dmin scales[12] (qh[32]) qs[128]; unit j: sub-block j, bytes qs[(j/2)·32 ..], nibble j%2
uvec2 scale_min_k4(uint64_t row, uint b, uint j) {
    uint q = b + 4u;
    if (j < 4u) return uvec2(rb(row, q + j) & 63u, rb(row, q + j + 4u) & 63u);
    return uvec2((rb(row, q + j + 4u) & 15u) | ((rb(row, q + j - 4u) >> 6) << 4),
                 (rb(row, q + j + 4u) >> 4) | ((rb(row, q + j) >> 6) << 4));
}
void dq_unit(uint64_t row, uint unit, out float w[32]) {
#if defined(WT_Q4_K)
    uint b = (unit >> 3) * 144u, qs = b + 16u;
#else
    uint b = (unit >> 3) * 176u, qs = b + 48u;
#endif
    uint j = unit & 7u;
    float d = rh(row, b), dmin = rh(row, b + 2u);
    uvec2 sm = scale_min_k4(row, b, j);
    precise float d1 = d * float(sm.x);
    precise float m1 = dmin * float(sm.y);
    [[unroll]] for (uint l = 0u; l < 32u; l++) {
        uint q = rb(row, qs + (j >> 1) * 32u + l);
        q = (j & 1u) == 0u ? (q & 15u) : (q >> 4);
#if defined(WT_Q5_K)
        q += ((rb(row, b + 16u + l) >> j) & 1u) << 4;
#endif
        precise float v = d1 * float(q) - m1;
        w[l] = v;
    }
}
#elif defined(WT_Q6_K)
// ql[128] qh[64] scales[16] d; unit j: n = j/4 (128-half), r = j%4 (which quarter)
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    uint b = (unit >> 3) * 210u, j = unit & 7u, n = j >> 2, r = j & 3u;
    float d = rh(row, b + 208u);
    [[unroll]] for (uint l = 0u; l < 32u; l++) {
        uint ql = rb(row, b + n * 64u + (r & 1u) * 32u + l);
        ql = r < 2u ? (ql & 15u) : (ql >> 4);
        uint qh = (rb(row, b + 128u + n * 32u + l) >> (2u * r)) & 3u;
        int q = int(ql | (qh << 4)) - 32;
        int sc = int(int8_t(BufU8(row).v[b + 192u + n * 8u + l / 16u + 2u * r]));
        precise float s = d * float(sc);
        precise float v = s * float(q);
        w[l] = v;
    }
}
#else
#error "no weight type"
#endif
