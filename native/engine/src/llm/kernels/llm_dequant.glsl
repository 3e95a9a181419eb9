// Dequantization of one unit of 32 consecutive values of a weight row, for the ggml type
// selected by WT_* (one is defined). Every formula is ggml's dequantize_row_* operation for
// operation in f32; `precise` keeps the compiler from fusing d·q − m into an fma, so the values
// are bit-identical to the host dequantizer (quant.rs) and to gguf-py.
// `row` is the address of the row's first byte; `unit` is k / 32.

uint rb(uint64_t a, uint off) { return uint(BufU8(a).v[off]); }
float rh(uint64_t a, uint off) { return enc_f16_to_f32(rb(a, off) | (rb(a, off + 1u) << 8)); }
// Wider loads where the format's blocks keep the alignment (fewer load instructions, the same
// bytes): `off` must be a multiple of 2 (r16) or 4 (r32) from a row start so aligned.
uint r16(uint64_t a, uint off) { return uint(BufU16(a).v[off >> 1]); }
uint r32(uint64_t a, uint off) { return BufU32(a).v[off >> 2]; }
uint byte_of(uint word, uint i) { return (word >> (8u * i)) & 255u; }
int s8(uint b) { return int(b << 24) >> 24; }

#ifdef X_INT8
// The integer forms (int8 activations on the matvec's unit path, llm_qdot.glsl): qi_unit gives
// the unit's 32 values as d[h]·v + m[h] (h = value / 16) with small integers v — dq_unit's
// fields, not yet multiplied out — four to an int (value 4i + b in byte b of q[i]). QI_OFFSET
// marks the formats whose m is not zero.
void pack_units(int v[32], out int q[8]) {
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        q[i] = int(bitfieldInsert(bitfieldInsert(bitfieldInsert(uint(v[4u * i]) & 255u, uint(v[4u * i + 1u]), 8, 8),
                                                 uint(v[4u * i + 2u]), 16, 8), uint(v[4u * i + 3u]), 24, 8));
    }
}
#endif

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
// 20-byte blocks: rows and blocks stay 4-aligned.
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    uint b = unit * 20u;
    uint dm = r32(row, b);
    float d = enc_f16_to_f32(dm & 0xFFFFu), m = enc_f16_to_f32(dm >> 16);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = r32(row, b + 4u + 4u * i);
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            uint q = byte_of(q4, k);
            precise float lo = float(q & 15u) * d + m;
            precise float hi = float(q >> 4) * d + m;
            w[4u * i + k] = lo; w[4u * i + k + 16u] = hi;
        }
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
#ifdef X_INT8
void qi_unit(uint64_t row, uint unit, out int q[8], out vec2 d, out vec2 m) {
    uint b = unit * 22u;
    uint qh = rb(row, b + 2u) | (rb(row, b + 3u) << 8) | (rb(row, b + 4u) << 16) | (rb(row, b + 5u) << 24);
    int v[32];
    [[unroll]] for (uint j = 0u; j < 16u; j++) {
        uint qb = rb(row, b + 6u + j);
        uint h0 = ((qh >> j) << 4) & 16u, h1 = (qh >> (j + 12u)) & 16u;
        v[j] = int((qb & 15u) | h0) - 16;
        v[j + 16u] = int((qb >> 4) | h1) - 16;
    }
    pack_units(v, q);
    d = vec2(rh(row, b));
    m = vec2(0.0);
}
#endif
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
#ifdef X_INT8
#define QI_OFFSET
void qi_unit(uint64_t row, uint unit, out int q[8], out vec2 d, out vec2 m) {
    uint b = unit * 24u;
    uint qh = rb(row, b + 4u) | (rb(row, b + 5u) << 8) | (rb(row, b + 6u) << 16) | (rb(row, b + 7u) << 24);
    int v[32];
    [[unroll]] for (uint j = 0u; j < 16u; j++) {
        uint qb = rb(row, b + 8u + j);
        uint h0 = ((qh >> j) << 4) & 16u, h1 = (qh >> (j + 12u)) & 16u;
        v[j] = int((qb & 15u) | h0);
        v[j + 16u] = int((qb >> 4) | h1);
    }
    pack_units(v, q);
    d = vec2(rh(row, b));
    m = vec2(rh(row, b + 2u));
}
#endif
#elif defined(WT_Q8_0)
// 34-byte blocks: 2-aligned, so 16-bit loads.
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    uint b = unit * 34u;
    float d = enc_f16_to_f32(r16(row, b));
    [[unroll]] for (uint j = 0u; j < 16u; j++) {
        uint pair = r16(row, b + 2u + 2u * j);
        precise float lo = float(s8(pair & 255u)) * d;
        precise float hi = float(s8(pair >> 8)) * d;
        w[2u * j] = lo; w[2u * j + 1u] = hi;
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
#ifdef X_INT8
#define QI_OFFSET
void qi_unit(uint64_t row, uint unit, out int q[8], out vec2 d, out vec2 m) {
    uint b = (unit >> 3) * 84u, j = unit & 7u, n = j >> 2, s = j & 3u;
    float dd = rh(row, b + 80u), dmin = rh(row, b + 82u);
    int v[32];
    [[unroll]] for (uint half_ = 0u; half_ < 2u; half_++) {
        uint sc = rb(row, b + n * 8u + s * 2u + half_);
        precise float dl = dd * float(sc & 15u);
        precise float ml = dmin * float(sc >> 4);
        d[half_] = dl;
        m[half_] = -ml;
        [[unroll]] for (uint l = 0u; l < 16u; l++) {
            uint qb = rb(row, b + 16u + n * 32u + half_ * 16u + l);
            v[half_ * 16u + l] = int((qb >> (2u * s)) & 3u);
        }
    }
    pack_units(v, q);
}
#endif
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
#ifdef X_INT8
void qi_unit(uint64_t row, uint unit, out int q[8], out vec2 d, out vec2 m) {
    uint b = (unit >> 3) * 110u, j = unit & 7u, n = j >> 2, s = j & 3u;
    float dd = rh(row, b + 108u);
    uint mask = 1u << (4u * n + s);
    int v[32];
    [[unroll]] for (uint half_ = 0u; half_ < 2u; half_++) {
        precise float dl = dd * float(int(q3k_scale(row, b, n * 8u + s * 2u + half_)) - 32);
        d[half_] = dl;
        [[unroll]] for (uint l = 0u; l < 16u; l++) {
            uint i = half_ * 16u + l;
            uint qb = rb(row, b + 32u + n * 32u + i);
            v[i] = int((qb >> (2u * s)) & 3u) - ((rb(row, b + i) & mask) != 0u ? 0 : 4);
        }
    }
    pack_units(v, q);
    m = vec2(0.0);
}
#endif
#elif defined(WT_Q4_K) || defined(WT_Q5_K)
// d dmin scales[12] (qh[32]) qs[128]; unit j: sub-block j, bytes qs[(j/2)·32 ..], nibble j%2.
// 144- and 176-byte blocks keep rows 4-aligned: 32-bit loads.
uint kbyte(uvec3 s, uint i) { return byte_of(i < 4u ? s.x : (i < 8u ? s.y : s.z), i & 3u); }
// Sub-block j's 6-bit scale and min from the 12 packed scale bytes (ggml's get_scale_min_k4).
void k4_scale_min(uvec3 sc, uint j, out uint sv, out uint mv) {
    if (j < 4u) {
        sv = kbyte(sc, j) & 63u; mv = kbyte(sc, j + 4u) & 63u;
    } else {
        sv = (kbyte(sc, j + 4u) & 15u) | ((kbyte(sc, j - 4u) >> 6) << 4);
        mv = (kbyte(sc, j + 4u) >> 4) | ((kbyte(sc, j) >> 6) << 4);
    }
}
// Sub-block j of the super-block at byte b: its scale d·sv (d1) and offset dmin·mv (m1).
void k_unit_scales(uint64_t row, uint b, uint j, out float d1, out float m1) {
    uint dd = r32(row, b);
    float d = enc_f16_to_f32(dd & 0xFFFFu), dmin = enc_f16_to_f32(dd >> 16);
    uint sv, mv;
    k4_scale_min(uvec3(r32(row, b + 4u), r32(row, b + 8u), r32(row, b + 12u)), j, sv, mv);
    precise float a = d * float(sv);
    precise float c = dmin * float(mv);
    d1 = a;
    m1 = c;
}
void dq_unit(uint64_t row, uint unit, out float w[32]) {
#if defined(WT_Q4_K)
    uint b = (unit >> 3) * 144u, qs = b + 16u;
#else
    uint b = (unit >> 3) * 176u, qs = b + 48u;
#endif
    uint j = unit & 7u;
    float d1, m1;
    k_unit_scales(row, b, j, d1, m1);
    uint qb = qs + (j >> 1) * 32u;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q4 = r32(row, qb + 4u * i);
#if defined(WT_Q5_K)
        uint h4 = r32(row, b + 16u + 4u * i);
#endif
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            uint q = byte_of(q4, k);
            q = (j & 1u) == 0u ? (q & 15u) : (q >> 4);
#if defined(WT_Q5_K)
            q += ((byte_of(h4, k) >> j) & 1u) << 4;
#endif
            precise float v = d1 * float(q) - m1;
            w[4u * i + k] = v;
        }
    }
}
#elif defined(WT_Q6_K)
// ql[128] qh[64] scales[16] d; unit j: n = j/4 (128-half), r = j%4 (which quarter).
// 210-byte blocks are 2-aligned: 16-bit loads, two values per load.
void dq_unit(uint64_t row, uint unit, out float w[32]) {
    uint b = (unit >> 3) * 210u, j = unit & 7u, n = j >> 2, r = j & 3u;
    float d = enc_f16_to_f32(r16(row, b + 208u));
    uint scs = r16(row, b + 192u + n * 8u + 2u * r);   // the two scales of this unit's halves
    [[unroll]] for (uint l2 = 0u; l2 < 16u; l2++) {
        uint l = 2u * l2;
        uint qlp = r16(row, b + n * 64u + (r & 1u) * 32u + l);
        uint qhp = r16(row, b + 128u + n * 32u + l);
        int sc = s8(byte_of(scs, l / 16u));
        precise float s = d * float(sc);
        [[unroll]] for (uint k = 0u; k < 2u; k++) {
            uint ql = byte_of(qlp, k);
            ql = r < 2u ? (ql & 15u) : (ql >> 4);
            uint qh = (byte_of(qhp, k) >> (2u * r)) & 3u;
            int q = int(ql | (qh << 4)) - 32;
            precise float v = s * float(q);
            w[l + k] = v;
        }
    }
}
#else
#error "no weight type"
#endif
