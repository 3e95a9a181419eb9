// ---- reduce Extreme { max: true, arg: false, high: false } f64->f64 src_partial:false sink_partial:false PerOutput k1 r1 in[F64, F64] streams[Stream { kind: Input(0), row_const: false }, Stream { kind: Input(1), row_const: false }, Stream { kind: Flat, row_const: false }] pro:Select { pred: Binary { op: Less, lhs: Input(0), rhs: Input(1), dtype: U8 }, on_true: Input(1), on_false: Input(0), dtype: F64 } epi:f64:Binary { op: Subtract, lhs: Select { pred: Binary { op: Less, lhs: Input(0), rhs: Input(1), dtype: U8 }, on_true: Input(1), on_false: Input(0), dtype: F64 }, rhs: Input(2), dtype: F64 }
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_EXT_control_flow_attributes : require
layout(buffer_reference, std430, buffer_reference_align = 1) buffer BufU8 { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer BufU16 { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer BufU32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer BufU64 { uint64_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer ParamsI32 { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer ParamsU64 { uint64_t v[]; };
layout(push_constant) uniform PushConstants { uint64_t params; uint count; uint pad_; } pc;
#define NX_BF16_FROM_F32(b) ((b) >> 16)
// Conversions between stored bits and the types kernels compute in, done with integer
// operations only: drivers may flush denormals or round differently in float conversions
// (the H200 does not promise to preserve f32 denormals), and Nx's contract is exact.
// Every float is computed in double; results are rounded once to their own type.

// ---- double <-> 64-bit integers ----
double nx_bits_to_f64(uint64_t b) { return packDouble2x32(uvec2(uint(b & 0xFFFFFFFFul), uint(b >> 32))); }
uint64_t nx_f64_to_bits(double d) { uvec2 w = unpackDouble2x32(d); return (uint64_t(w.y) << 32) | uint64_t(w.x); }
// 32-bit word tests: 64-bit integer arithmetic is emulated on most GPUs.
bool nx_isnan(double x) {
    uvec2 w = unpackDouble2x32(x);
    uint hi = w.y & 0x7FFFFFFFu;
    return hi > 0x7FF00000u || (hi == 0x7FF00000u && w.x != 0u);
}
bool nx_isinf(double x) {
    uvec2 w = unpackDouble2x32(x);
    return (w.y & 0x7FFFFFFFu) == 0x7FF00000u && w.x == 0u;
}
bool nx_signbit(double x) { return (nx_f64_to_bits(x) >> 63) != 0ul; }
double nx_abs(double x) { return nx_bits_to_f64(nx_f64_to_bits(x) & 0x7FFFFFFFFFFFFFFFul); }
double nx_copysign(double x, double s) {
    return nx_bits_to_f64((nx_f64_to_bits(x) & 0x7FFFFFFFFFFFFFFFul) | (nx_f64_to_bits(s) & 0x8000000000000000ul));
}
double nx_nan() { return nx_bits_to_f64(0x7FF8000000000000ul); }
double nx_inf() { return nx_bits_to_f64(0x7FF0000000000000ul); }

// ---- decode: stored bits -> double (exact) ----
double nx_small_to_f64(uint bits, int M, int E) {
    uint sign = (bits >> uint(M + E)) & 1u;
    uint ex = (bits >> uint(M)) & ((1u << uint(E)) - 1u);
    uint man = bits & ((1u << uint(M)) - 1u);
    int bias = (1 << (E - 1)) - 1;
    uint hi;
    uint lo;
    if (ex == (1u << uint(E)) - 1u) {
        // Inf or NaN: keep the payload in the top mantissa bits.
        uint64_t m64 = uint64_t(man) << uint(52 - M);
        hi = (sign << 31) | 0x7FF00000u | uint(m64 >> 32);
        lo = uint(m64 & 0xFFFFFFFFul);
    } else if (ex == 0u) {
        if (man == 0u) return packDouble2x32(uvec2(0u, sign << 31));
        // subnormal: normalise
        int msb = findMSB(man);
        // value = man * 2^(1-bias-M) = 1.f * 2^e with the leading bit at msb
        int e = msb - M + 1 - bias;
        uint64_t m64 = (uint64_t(man) << uint(52 - msb)) & 0xFFFFFFFFFFFFFul;
        hi = (sign << 31) | (uint(e + 1023) << 20) | uint(m64 >> 32);
        lo = uint(m64 & 0xFFFFFFFFul);
    } else {
        uint64_t m64 = uint64_t(man) << uint(52 - M);
        hi = (sign << 31) | (uint(int(ex) - bias + 1023) << 20) | uint(m64 >> 32);
        lo = uint(m64 & 0xFFFFFFFFul);
    }
    return packDouble2x32(uvec2(lo, hi));
}
double nx_f32_to_f64(uint bits) {
    uint ex = (bits >> 23) & 0xFFu;
    if (ex != 0u && ex != 0xFFu) {
        // normal numbers: rebias the exponent, widen the mantissa (fast path)
        uint hi = (bits & 0x80000000u) | ((ex + 896u) << 20) | ((bits & 0x7FFFFFu) >> 3);
        uint lo = bits << 29;
        return packDouble2x32(uvec2(lo, hi));
    }
    return nx_small_to_f64(bits, 23, 8);
}
double nx_f16_to_f64(uint bits) { return nx_small_to_f64(bits, 10, 5); }
double nx_bf16_to_f64(uint bits) { return nx_f32_to_f64(bits << 16); }

// ---- encode: double -> bits of a narrower float, round to nearest even ----
uint nx_f64_to_small(double d, int M, int E) {
    uvec2 w = unpackDouble2x32(d);
    uint64_t b = (uint64_t(w.y) << 32) | uint64_t(w.x);
    uint sign = uint(b >> 63);
    int e = int((b >> 52) & 0x7FFul);
    uint64_t m = b & 0xFFFFFFFFFFFFFul;
    uint expmax = (1u << uint(E)) - 1u;
    uint sbit = sign << uint(M + E);
    if (e == 0x7FF) {
        if (m == 0ul) return sbit | (expmax << uint(M));
        // NaN: the top payload bits as they are (a value decoded from this type round-trips
        // bit for bit: copies keep NaN payloads, as BinaryBackend's layout ops do); quiet when
        // nothing of the payload fits. Computed NaNs never get here: wrap() canonicalises them.
        uint pay = uint(m >> uint(52 - M));
        if (pay == 0u) pay = 1u << uint(M - 1);
        return sbit | (expmax << uint(M)) | pay;
    }
    if (e == 0 && m == 0ul) return sbit;
    uint64_t sig = (e == 0) ? m : (m | (1ul << 52));
    int ue = (e == 0) ? -1022 : e - 1023;
    int bias = (1 << (E - 1)) - 1;
    int te = ue + bias;
    int shift = 52 - M;
    if (te < 1) { shift += 1 - te; te = 0; }
    if (shift > 60) return sbit; // far below half the smallest subnormal
    uint64_t kept = sig >> uint(shift);
    uint64_t rest = sig & ((1ul << uint(shift)) - 1ul);
    uint64_t halfway = 1ul << uint(shift - 1);
    if (rest > halfway || (rest == halfway && (kept & 1ul) == 1ul)) kept += 1ul;
    if (te == 0) {
        // subnormal result (a carry into bit M makes it the smallest normal, encoded the same way)
        return sbit | uint(kept);
    }
    if ((kept >> uint(M + 1)) != 0ul) { kept >>= 1; te += 1; }
    if (te >= int(expmax)) return sbit | (expmax << uint(M));
    return sbit | (uint(te) << uint(M)) | uint(kept & ((1ul << uint(M)) - 1ul));
}
uint nx_f64_to_f32(double d) {
    // Fast path, 32-bit operations only: results in f32's normal range round half to even at
    // bit 29 of the low word; a carry out of the mantissa moves into the exponent (up to +Inf).
    uvec2 w = unpackDouble2x32(d);
    uint e = (w.y >> 20) & 0x7FFu;
    if (e >= 897u && e <= 1150u) {
        uint rest = w.x & 0x1FFFFFFFu;
        uint bits = (w.y & 0x80000000u) | ((e - 896u) << 23) | ((w.y & 0xFFFFFu) << 3) | (w.x >> 29);
        if (rest > 0x10000000u || (rest == 0x10000000u && (bits & 1u) != 0u)) bits += 1u;
        return bits;
    }
    return nx_f64_to_small(d, 23, 8);
}
uint nx_f64_to_f16(double d) { return nx_f64_to_small(d, 10, 5); }
// bf16 as Nx.BinaryBackend writes it: round to f32 first, then keep the top 16 bits.
uint nx_f64_to_bf16(double d) {
    uint h = NX_BF16_FROM_F32(nx_f64_to_f32(d));
    if (nx_isnan(d) && (h & 0x7Fu) == 0u) h |= 0x40u; // keep a NaN a NaN
    return h;
}

// ---- round a double to a type's value set (every computed float node) ----
// BinaryBackend holds NaN as the atom :nan and writes it as the positive quiet NaN, so a
// computed NaN is canonical whatever sign or payload the hardware produced.
double nx_canon_f64(double d) { return nx_isnan(d) ? nx_nan() : d; }
double nx_round_f32(double d) {
    uint e = (unpackDouble2x32(d).y >> 20) & 0x7FFu;
    if (e >= 897u && e <= 1150u) return nx_f32_to_f64(nx_f64_to_f32(d)); // normal: not NaN
    return nx_isnan(d) ? nx_nan() : nx_f32_to_f64(nx_f64_to_f32(d));
}
double nx_round_f16(double d) { return nx_isnan(d) ? nx_nan() : nx_f16_to_f64(nx_f64_to_f16(d)); }
double nx_round_bf16(double d) { return nx_isnan(d) ? nx_nan() : nx_bf16_to_f64(nx_f64_to_bf16(d)); }

// ---- complex: dvec2(real, imaginary) in f64 ----
// c64 is two f32 words (the real part in the low word), c128 two f64 words; each part is
// decoded exactly and rounded once on the way out, like a float of its part type.
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufU64x2 { u64vec2 v[]; };
dvec2 nx_c64_to_c(uint64_t b) { return dvec2(nx_f32_to_f64(uint(b & 0xFFFFFFFFul)), nx_f32_to_f64(uint(b >> 32))); }
uint64_t nx_c_to_c64(dvec2 z) { return uint64_t(nx_f64_to_f32(z.x)) | (uint64_t(nx_f64_to_f32(z.y)) << 32); }
dvec2 nx_c128_to_c(u64vec2 b) { return dvec2(nx_bits_to_f64(b.x), nx_bits_to_f64(b.y)); }
u64vec2 nx_c_to_c128(dvec2 z) { return u64vec2(nx_f64_to_bits(z.x), nx_f64_to_bits(z.y)); }
dvec2 nx_round_c64(dvec2 z) { return dvec2(nx_round_f32(z.x), nx_round_f32(z.y)); }
dvec2 nx_canon_c128(dvec2 z) { return dvec2(nx_canon_f64(z.x), nx_canon_f64(z.y)); }
// Scalar helpers behind the elementwise ops, following Nx.BinaryBackend's (Nx 0.7.2) rules.
//
// Where BinaryBackend raises, a kernel cannot: it gives the defined result written here instead.
//   * integer quotient/remainder by zero: 0 (BinaryBackend: ArithmeticError)
//   * integer pow with a negative exponent: 1 for base 1, ±1 for base -1, else 0 (ArithmeticError)
//   * shifts by a negative amount shift the other way (ArgumentError); amounts of 64 or more give
//     0, or -1 for a negative value shifted right (Elixir's bsl/bsr, then wrapped)
//   * float x / 0 for x != 0: IEEE ±Inf (ArithmeticError); 0/0 is NaN in both
//   * float results that overflow f64 (x * y, x / y, x + y): IEEE ±Inf (ArithmeticError)
//   * sqrt of a negative number: NaN (ArithmeticError)
//   * ceil/floor/round of NaN or ±Inf: the value itself (ArgumentError)
//   * float remainder with a NaN or infinite x, or y == 0: NaN; with infinite y: x (ArgumentError)
// Quirks of BinaryBackend reproduced on purpose (so results match it bit for bit):
//   * every computed NaN is the positive quiet NaN (it holds NaN as the atom :nan); copies,
//     bitcasts and as_type to the same type keep NaN bits
//   * sign(NaN) = sign(+Inf) = sign(-Inf) = 1.0 (the atoms compare above numbers); sign(-0.0) = -0.0
//   * abs(-0.0) = -0.0 (x < 0 ? -x : x)
//   * round gives +0.0 for every result of zero (:erlang.round returns an integer)
//   * x / ±Inf = +0.0 whatever the signs; ±Inf / -0.0 = ±Inf (Complex.divide's clauses)
//   * max/min return their first operand when the two compare equal (-0.0 vs 0.0)
//   * as_type from ±Inf to an integer type gives the type's largest/smallest value, NaN gives 0,
//     other floats truncate and wrap; s16's limits are Nx 0.7.2's 32677 and -32678
//   * bf16 is written by truncating the f32 bits (numeric.glsl, NX_BF16_FROM_F32)

// float -> integer: truncate toward zero, then keep the low 64 bits (the caller wraps to the
// target width). NaN and ±Inf: see nx_f64_to_int below.
uint64_t nx_f64_trunc_wrap(double d) {
    uint64_t b = nx_f64_to_bits(d);
    int e = int((b >> 52) & 0x7FFul) - 1023;
    if (e < 0 || e == 1024) return 0ul;
    uint64_t m = (b & 0xFFFFFFFFFFFFFul) | (1ul << 52);
    uint64_t v;
    if (e <= 52) v = m >> uint(52 - e);
    else if (e - 52 < 64) v = m << uint(e - 52);
    else v = 0ul;
    return ((b >> 63) != 0ul) ? (0ul - v) : v;
}
int64_t nx_f64_to_s64(double d) { return int64_t(nx_f64_trunc_wrap(d)); }
uint64_t nx_f64_to_u64(double d) { return nx_f64_trunc_wrap(d); }
// Nx.as_type from a float to an integer type whose extremes are `lo` and `hi` (as 64-bit patterns).
uint64_t nx_f64_to_int(double d, uint64_t lo, uint64_t hi) {
    if (nx_isnan(d)) return 0ul;
    if (nx_isinf(d)) return nx_signbit(d) ? lo : hi;
    return nx_f64_trunc_wrap(d);
}

// Compares a value that may be signed with one that may be unsigned (both as raw 64 bits).
int nx_cmp_mixed(uint64_t a, bool a_signed, uint64_t b, bool b_signed) {
    bool an = a_signed && int64_t(a) < 0l;
    bool bn = b_signed && int64_t(b) < 0l;
    if (an != bn) return an ? -1 : 1;
    if (an) return (int64_t(a) < int64_t(b)) ? -1 : ((a == b) ? 0 : 1);
    return (a < b) ? -1 : ((a == b) ? 0 : 1);
}
// Exact comparison of a 64-bit integer with a double (Erlang compares them exactly; a double of
// the integer may round): -1, 0, 1; 2 when d is NaN.
int nx_cmp_s64_f64(int64_t i, double d) {
    if (nx_isnan(d)) return 2;
    if (d >= 9223372036854775808.0LF) return -1;
    if (d < -9223372036854775808.0LF) return 1;
    precise double di = double(i);
    if (di < d) return -1;
    if (di > d) return 1;
    int64_t k = int64_t(d); // d == double(i) is an integer in range
    return (i < k) ? -1 : ((i > k) ? 1 : 0);
}
int nx_cmp_flip(int c) { return (c == 2) ? 2 : -c; }
int nx_cmp_u64_f64(uint64_t i, double d) {
    if (nx_isnan(d)) return 2;
    if (d >= 18446744073709551616.0LF) return -1;
    if (d < 0.0LF) return 1;
    precise double di = double(i);
    if (di < d) return -1;
    if (di > d) return 1;
    uint64_t k = uint64_t(d);
    return (i < k) ? -1 : ((i > k) ? 1 : 0);
}
// Exact integer quotient/remainder of operands of any signedness (raw 64 bits + signedness):
// truncating division on the true values, then wrapped by the caller. Divisor 0 gives 0.
uint64_t nx_mag(uint64_t a, bool neg) { return neg ? (0ul - a) : a; }
uint64_t nx_rem_mixed(uint64_t a, bool a_signed, uint64_t b, bool b_signed) {
    bool an = a_signed && int64_t(a) < 0l;
    bool bn = b_signed && int64_t(b) < 0l;
    uint64_t mb = nx_mag(b, bn);
    if (mb == 0ul) return 0ul;
    uint64_t r = nx_mag(a, an) % mb;
    return an ? (0ul - r) : r;
}
uint64_t nx_quot_mixed(uint64_t a, bool a_signed, uint64_t b, bool b_signed) {
    bool an = a_signed && int64_t(a) < 0l;
    bool bn = b_signed && int64_t(b) < 0l;
    uint64_t mb = nx_mag(b, bn);
    if (mb == 0ul) return 0ul;
    uint64_t q = nx_mag(a, an) / mb;
    return (an != bn) ? (0ul - q) : q;
}
// max/min of operands of any signedness, exactly; the first when equal.
uint64_t nx_max_mixed(uint64_t a, bool a_signed, uint64_t b, bool b_signed) {
    return (nx_cmp_mixed(b, b_signed, a, a_signed) > 0) ? b : a;
}
uint64_t nx_min_mixed(uint64_t a, bool a_signed, uint64_t b, bool b_signed) {
    return (nx_cmp_mixed(b, b_signed, a, a_signed) < 0) ? b : a;
}

// sign: x < 0 -> -1, x > 0 -> 1, else x; NaN and ±Inf give 1 (see the quirks above).
double nx_sign_f64(double x) {
    if (nx_isnan(x) || nx_isinf(x)) return 1.0LF;
    if (x > 0.0LF) return 1.0LF;
    if (x < 0.0LF) return -1.0LF;
    return x; // keeps the sign of zero
}
// abs as BinaryBackend: -0.0 stays -0.0.
double nx_abs_nx(double x) {
    if (nx_isnan(x)) return x;
    return (x < 0.0LF) ? -x : x;
}

// GLSL trunc() on doubles is wrong on lavapipe (Mesa 22.3) for large values (32856535325.6
// came back unchanged); floor/ceil are exact.
double nx_trunc(double x) { return (x < 0.0LF) ? ceil(x) : floor(x); }

// Round half away from zero, exactly (floor(x + 0.5) is wrong for 0.49999999999999994); a zero
// result is +0.0. NaN and ±Inf pass through.
double nx_round_half_away(double x) {
    if (nx_isnan(x) || nx_isinf(x)) return x;
    precise double t = nx_trunc(x);
    precise double f = x - t; // exact
    if (nx_abs(f) >= 0.5LF) {
        precise double r = t + ((x < 0.0LF) ? -1.0LF : 1.0LF);
        return r;
    }
    return nx_abs(t) == 0.0LF ? 0.0LF : t;
}

uint64_t nx_clz(uint64_t x, int bits) {
    uint64_t v = (bits == 64) ? x : (x & ((1ul << uint(bits)) - 1ul));
    uint hi = uint(v >> 32);
    uint lo = uint(v & 0xFFFFFFFFul);
    int msb = (hi != 0u) ? 32 + findMSB(hi) : findMSB(lo); // -1 when v == 0
    return uint64_t(bits - 1 - msb);
}
int64_t nx_clz(int64_t x, int bits) { return int64_t(nx_clz(uint64_t(x), bits)); }
uint64_t nx_popcount(uint64_t x, int bits) {
    uint64_t v = (bits == 64) ? x : (x & ((1ul << uint(bits)) - 1ul));
    return uint64_t(bitCount(uint(v >> 32)) + bitCount(uint(v & 0xFFFFFFFFul)));
}
int64_t nx_popcount(int64_t x, int bits) { return int64_t(nx_popcount(uint64_t(x), bits)); }

// Complex.divide's clauses, in order (see the quirks above).
double nx_div_f64(double x, double y) {
    bool xf = nx_isnan(x) || nx_isinf(x);
    bool yf = nx_isnan(y) || nx_isinf(y);
    if (xf && yf) return nx_nan();
    if (xf) {
        if (nx_isnan(x)) return x;
        return (y >= 0.0LF) ? x : -x; // -0.0 >= 0: Inf / -0.0 is +Inf
    }
    if (nx_isnan(y)) return y;
    if (nx_isinf(y)) return 0.0LF;
    if (x == 0.0LF && y == 0.0LF) return nx_nan();
    precise double r = x / y;
    return r;
}

// Exact fmod (:math.fmod; the result has the sign of x), by long division of the significands.
double nx_rem_f64(double x, double y) {
    if (nx_isnan(x) || nx_isnan(y) || nx_isinf(x) || y == 0.0LF) return nx_nan();
    if (nx_isinf(y)) return x;
    uint64_t bx = nx_f64_to_bits(x) & 0x7FFFFFFFFFFFFFFFul;
    uint64_t by = nx_f64_to_bits(y) & 0x7FFFFFFFFFFFFFFFul;
    if (bx < by) return x;
    // |v| = m * 2^(e - 1075) with m normalised to 2^52 <= m < 2^53 (e may drop below 1 for
    // subnormals)
    int ex = int(bx >> 52);
    int ey = int(by >> 52);
    uint64_t mx = (bx & 0xFFFFFFFFFFFFFul) | ((ex != 0) ? (1ul << 52) : 0ul);
    uint64_t my = (by & 0xFFFFFFFFFFFFFul) | ((ey != 0) ? (1ul << 52) : 0ul);
    ex = max(ex, 1);
    ey = max(ey, 1);
    for (int k = 0; k < 53 && (mx >> 52) == 0ul; k++) { mx <<= 1; ex--; }
    for (int k = 0; k < 53 && (my >> 52) == 0ul; k++) { my <<= 1; ey--; }
    for (int guard = 0; guard < 2200 && ex > ey; guard++) {
        if (mx >= my) mx -= my;
        mx <<= 1;
        ex--;
    }
    if (mx >= my) mx -= my;
    // |r| = mx * 2^(ey - 1075), mx < my: normalise, or denormalise when below the normal range
    // (exact: r is a multiple of the unit of y, at least 2^-1074)
    if (mx == 0ul) return nx_copysign(0.0LF, x);
    for (int k = 0; k < 53 && (mx >> 52) == 0ul; k++) { mx <<= 1; ey--; }
    uint64_t bits;
    if (ey >= 1) {
        bits = (uint64_t(ey) << 52) | (mx & 0xFFFFFFFFFFFFFul);
    } else {
        bits = mx >> uint(1 - ey);
    }
    return nx_copysign(nx_bits_to_f64(bits), x);
}
int64_t nx_rem_s64(int64_t x, int64_t y) {
    if (y == 0l) return 0l;
    if (y == -1l) return 0l;
    return x - (x / y) * y;
}
uint64_t nx_rem_u64(uint64_t x, uint64_t y) { return (y == 0ul) ? 0ul : (x % y); }
int64_t nx_quot_s64(int64_t x, int64_t y) {
    if (y == 0l) return 0l;
    if (y == -1l) return 0l - x; // wraps for the minimum value instead of trapping
    return x / y;
}
uint64_t nx_quot_u64(uint64_t x, uint64_t y) { return (y == 0ul) ? 0ul : (x / y); }
double nx_quot_f64(double x, double y) { return nx_trunc(x / y); }
int64_t nx_div_s64(int64_t x, int64_t y) { return nx_quot_s64(x, y); }
uint64_t nx_div_u64(uint64_t x, uint64_t y) { return nx_quot_u64(x, y); }
// The same for values of 32 bits or fewer (held in 64-bit variables), divided in 32 bits:
// truncating division and a remainder with the dividend's sign, as above.
int64_t nx_rem_s32(int64_t x, int64_t y) {
    if (y == 0l || y == -1l) return 0l;
    int a = int(x), b = int(y);
    return int64_t(a - (a / b) * b);
}
int64_t nx_quot_s32(int64_t x, int64_t y) {
    if (y == 0l) return 0l;
    if (y == -1l) return 0l - x; // 2^31 for the minimum: wrapped by the caller
    return int64_t(int(x) / int(y));
}
uint64_t nx_rem_u32(uint64_t x, uint64_t y) { return (y == 0ul) ? 0ul : uint64_t(uint(x) % uint(y)); }
uint64_t nx_quot_u32(uint64_t x, uint64_t y) { return (y == 0ul) ? 0ul : uint64_t(uint(x) / uint(y)); }
int64_t nx_div_s32(int64_t x, int64_t y) { return nx_quot_s32(x, y); }
uint64_t nx_div_u32(uint64_t x, uint64_t y) { return nx_quot_u32(x, y); }

// Max/min: a NaN operand wins (canonicalised by the caller); otherwise the first operand
// unless the second is strictly greater/less (Erlang's max/2 and min/2).
double nx_max_f64(double x, double y) {
    if (nx_isnan(x)) return x;
    if (nx_isnan(y)) return y;
    return (y > x) ? y : x;
}
double nx_min_f64(double x, double y) {
    if (nx_isnan(x)) return x;
    if (nx_isnan(y)) return y;
    return (y < x) ? y : x;
}
int64_t nx_max_s64(int64_t x, int64_t y) { return (x > y) ? x : y; }
int64_t nx_min_s64(int64_t x, int64_t y) { return (x < y) ? x : y; }
uint64_t nx_max_u64(uint64_t x, uint64_t y) { return (x > y) ? x : y; }
uint64_t nx_min_u64(uint64_t x, uint64_t y) { return (x < y) ? x : y; }

// Integer power by squaring, wrapping like every other integer op. A negative exponent has no
// integer result except for bases 1 and -1; it gives 0.
int64_t nx_pow_s64(int64_t b, int64_t e) {
    if (e < 0l) return (b == 1l) ? 1l : ((b == -1l) ? (((e & 1l) == 0l) ? 1l : -1l) : 0l);
    int64_t r = 1l;
    for (int k = 0; k < 64 && e != 0l; k++) {
        if ((e & 1l) != 0l) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}
uint64_t nx_pow_u64(uint64_t b, uint64_t e) {
    uint64_t r = 1ul;
    for (int k = 0; k < 64 && e != 0ul; k++) {
        if ((e & 1ul) != 0ul) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

// Shifts as Elixir's bsl/bsr on unbounded integers, then wrapped: a negative amount shifts the
// other way; shifting out everything leaves 0 (or -1 for a negative value shifted right).
// The amount is clamped and narrowed to 32 bits before shifting: lavapipe miscompiled a 64-bit
// shift amount whose result was narrowed to 32 bits (s32 left_shift gave 0).
int64_t nx_shift_s64(int64_t x, int64_t s) { // s > 0: left; s < 0: right
    if (s >= 64l) return 0l;
    if (s <= -64l) return (x < 0l) ? -1l : 0l;
    int k = int(s);
    return (k >= 0) ? (x << uint(k)) : (x >> uint(-k));
}
int64_t nx_shl_s64(int64_t x, int64_t s) { return nx_shift_s64(x, s); }
int64_t nx_shr_s64(int64_t x, int64_t s) { return nx_shift_s64(x, (s < -64l) ? 64l : -s); }
uint64_t nx_shl_u64(uint64_t x, uint64_t s) { return (s >= 64ul) ? 0ul : (x << uint(s)); }
uint64_t nx_shr_u64(uint64_t x, uint64_t s) { return (s >= 64ul) ? 0ul : (x >> uint(s)); }

// ---- complex arithmetic: the `complex` library (0.5.0) as Nx.BinaryBackend calls it ----
// Values are dvec2(real, imaginary). The library's clauses are followed in order, including
// its special cases for a zero real or imaginary part of the right operand (they decide signs
// of zeros and which products meet an infinity). A *real* operand r (a number in BinaryBackend,
// not a complex) takes the library's number-with-complex clauses: a NaN r makes the whole result
// NaN (the real NaN, written NaN+0i); add/subtract with an infinite r give that infinity (+0i).
bool nx_nonfinite(double x) { return nx_isnan(x) || nx_isinf(x); }
dvec2 nx_cadd(dvec2 a, dvec2 b) { precise double re = a.x + b.x; precise double im = a.y + b.y; return dvec2(re, im); }
dvec2 nx_csub(dvec2 a, dvec2 b) { precise double re = a.x - b.x; precise double im = a.y - b.y; return dvec2(re, im); }
// The compilers fold arithmetic with a literal zero (0.0 + x -> x, 0.0 * x -> 0) whatever
// `precise` says, losing signed zeros, NaN and Inf; so the library's "number as (x, 0.0)"
// steps are written out exactly instead of computed with a 0.0 constant.
double nx_zero_plus(double y) { return (y == 0.0LF) ? 0.0LF : y; }             // 0.0 + y, y + 0.0
double nx_zero_minus(double y) { return (y == 0.0LF) ? 0.0LF : -y; }           // 0.0 - y
double nx_zero_times(double y) {                                               // 0.0 * y
    if (nx_nonfinite(y)) return nx_nan();
    return nx_signbit(y) ? nx_bits_to_f64(0x8000000000000000ul) : 0.0LF;
}
double nx_zero_div(double y) {                                                 // Complex.divide(0.0, y)
    if (nx_isnan(y) || y == 0.0LF) return nx_nan();
    if (nx_isinf(y)) return 0.0LF;
    return nx_signbit(y) ? nx_bits_to_f64(0x8000000000000000ul) : 0.0LF;
}
dvec2 nx_cadd_rc(double r, dvec2 z) {
    if (nx_nonfinite(r)) return dvec2(r, 0.0LF);
    precise double re = r + z.x;
    return dvec2(re, nx_zero_plus(z.y));
}
dvec2 nx_cadd_cr(dvec2 z, double r) {
    if (nx_nonfinite(r)) return dvec2(r, 0.0LF);
    precise double re = z.x + r;
    return dvec2(re, nx_zero_plus(z.y));
}
dvec2 nx_csub_rc(double r, dvec2 z) {
    if (nx_nonfinite(r)) return dvec2(r, 0.0LF);
    precise double re = r - z.x;
    return dvec2(re, nx_zero_minus(z.y));
}
dvec2 nx_csub_cr(dvec2 z, double r) {
    if (nx_isnan(r)) return dvec2(r, 0.0LF);
    if (nx_isinf(r)) return dvec2(-r, 0.0LF);
    precise double re = z.x - r;
    return dvec2(re, z.y); // y - 0.0 == y exactly
}
dvec2 nx_cmul_cr(dvec2 z, double r) {
    if (nx_isnan(r)) return dvec2(r, 0.0LF);
    precise double re = z.x * r; precise double im = z.y * r;
    return dvec2(re, im);
}
dvec2 nx_cmul_rc(double r, dvec2 z) { return nx_cmul_cr(z, r); }
dvec2 nx_cmul(dvec2 l, dvec2 r) {
    if (r.y == 0.0LF) {
        precise double re = r.x * l.x; precise double im = r.x * l.y;
        return dvec2(re, im);
    }
    if (r.x == 0.0LF) {
        precise double p = l.y * r.y; precise double im = l.x * r.y;
        return dvec2((p == 0.0LF) ? 0.0LF : -p, im);
    }
    precise double a = l.x * r.x; precise double b = l.y * r.y;
    precise double c = l.y * r.x; precise double d = l.x * r.y;
    precise double re = a - b; precise double im = c + d;
    return dvec2(re, im);
}
dvec2 nx_cdiv(dvec2 x, dvec2 y) {
    if (y.y == 0.0LF) return dvec2(nx_div_f64(x.x, y.x), nx_div_f64(x.y, y.x));
    if (y.x == 0.0LF) return dvec2(nx_div_f64(x.y, y.y), -nx_div_f64(x.x, y.y));
    precise double a = x.x * y.x; precise double b = x.y * y.y;
    precise double c = x.y * y.x; precise double d = x.x * y.y;
    precise double e = y.x * y.x; precise double f = y.y * y.y;
    precise double nre = a + b; precise double nim = c - d; precise double den = e + f;
    return dvec2(nx_div_f64(nre, den), nx_div_f64(nim, den));
}
// Complex.divide((r, 0.0), z), written out (see nx_zero_plus).
dvec2 nx_cdiv_rc(double r, dvec2 z) {
    if (nx_isnan(r)) return dvec2(r, 0.0LF);
    if (z.y == 0.0LF) return dvec2(nx_div_f64(r, z.x), nx_zero_div(z.x));
    if (z.x == 0.0LF) return dvec2(nx_zero_div(z.y), -nx_div_f64(r, z.y));
    precise double a = r * z.x; precise double d = r * z.y;
    precise double e = z.x * z.x; precise double f = z.y * z.y;
    precise double nre = a + nx_zero_times(z.y); precise double nim = nx_zero_times(z.x) - d; precise double den = e + f;
    return dvec2(nx_div_f64(nre, den), nx_div_f64(nim, den));
}
dvec2 nx_cdiv_cr(dvec2 z, double r) {
    if (nx_isnan(r)) return dvec2(r, 0.0LF);
    if (nx_isinf(r)) return dvec2(0.0LF, 0.0LF);
    return dvec2(nx_div_f64(z.x, r), nx_div_f64(z.y, r));
}
// Complex.abs: NaN only when both parts are NaN, +Inf when either part is not finite.
double nx_cabs(dvec2 z) {
    bool rn = nx_isnan(z.x);
    bool in_ = nx_isnan(z.y);
    if (rn && in_) return nx_nan();
    if (rn || in_ || nx_isinf(z.x) || nx_isinf(z.y)) return nx_inf();
    double x = nx_abs_nx(z.x);
    double y = nx_abs_nx(z.y);
    if (x == 0.0LF) return y;
    if (y == 0.0LF) return x;
    if (x > y) {
        precise double q = y / x; precise double r = x * sqrt(1.0LF + q * q);
        return r;
    }
    precise double q = x / y; precise double r = y * sqrt(1.0LF + q * q);
    return r;
}
// Complex.sqrt (its clauses for NaN and infinite parts first).
dvec2 nx_csqrt(dvec2 z) {
    double r = z.x;
    double i = z.y;
    if (nx_isnan(r) || nx_isnan(i)) return dvec2(nx_nan(), nx_nan());
    if (nx_isinf(i)) return dvec2(nx_inf(), i);
    if (nx_isinf(r)) return (r > 0.0LF) ? dvec2(r, 0.0LF) : dvec2(0.0LF, nx_inf());
    if (r == 0.0LF && i == 0.0LF) return z;
    double x = nx_abs_nx(r);
    double y = nx_abs_nx(i);
    precise double w;
    if (x >= y) {
        precise double q = y / x;
        w = sqrt(x) * sqrt(0.5LF * (1.0LF + sqrt(1.0LF + q * q)));
    } else {
        precise double q = x / y;
        w = sqrt(y) * sqrt(0.5LF * (q + sqrt(1.0LF + q * q)));
    }
    if (r >= 0.0LF) {
        precise double im = i / (2.0LF * w);
        return dvec2(w, im);
    }
    double i2 = (i >= 0.0LF) ? w : -w;
    precise double re = i / (2.0LF * i2);
    return dvec2(re, i2);
}
// Complex.conjugate of a real number: n - 0.0i; a non-finite real stays real (written +0i).
dvec2 nx_conj_real(double x) { return dvec2(x, nx_nonfinite(x) ? 0.0LF : nx_bits_to_f64(0x8000000000000000ul)); }
// Equality of two complex values as Elixir's == on %Complex{} structs: NaN parts are the atom
// :nan there, so they compare equal to each other; -0.0 == 0.0.
bool nx_ceq(dvec2 a, dvec2 b) {
    bool re = (a.x == b.x) || (nx_isnan(a.x) && nx_isnan(b.x));
    bool im = (a.y == b.y) || (nx_isnan(a.y) && nx_isnan(b.y));
    return re && im;
}
#define ACC double
#define NONE 0xFFFFFFFFu
uint64_t acc_bits(ACC v) { return nx_f64_to_bits(v); }
ACC acc_from(uint64_t b) { return nx_bits_to_f64(b); }
ACC ident() { return (-nx_inf()); }
void comb(inout ACC av, inout uint ai, ACC bv, uint bi) {
    if (bi == NONE) return;
    bool take;
    if (ai == NONE) take = true;
    else if (nx_isnan(av) || nx_isnan(bv)) take = nx_isnan(bv) && (!nx_isnan(av) || bi < ai);
    else if (bv == av) take = bi < ai;
    else take = bv > av;
    if (take) { av = bv; ai = bi; }
}
#define RAW uint64_t
ACC cand(RAW w) { return nx_bits_to_f64(w); }
RAW pro(uint64_t nx_raw0_, uint64_t nx_raw1_) {
        double x0_ = nx_bits_to_f64(nx_raw0_);
        double x1_ = nx_bits_to_f64(nx_raw1_);
        precise uint64_t t0 = (((((x0_) < (x1_)) ? 1ul : 0ul)) & 0xFFul);
        precise double t1 = nx_canon_f64((((t0) != 0ul)) ? x1_ : x0_);
        return nx_f64_to_bits(t1);
}
void epi(uint64_t nx_raw0_, uint64_t nx_raw1_, uint64_t nx_raw2_, out uint64_t y0) {
        double x0_ = nx_bits_to_f64(nx_raw0_);
        double x1_ = nx_bits_to_f64(nx_raw1_);
        double x2_ = nx_bits_to_f64(nx_raw2_);
        precise uint64_t t0 = (((((x0_) < (x1_)) ? 1ul : 0ul)) & 0xFFul);
        precise double t1 = nx_canon_f64((((t0) != 0ul)) ? x1_ : x0_);
        precise double t2 = nx_canon_f64((t1) - (x2_));
        y0 = nx_f64_to_bits(t2);
}
shared ACC s_v[256];
shared uint s_i[256];
layout(local_size_x = 256) in;
void main() {
    ParamsI32 meta = ParamsI32(pc.params + 32ul);
    int R = meta.v[0]; uint S = uint(meta.v[1]); int L = meta.v[2]; uint P = uint(meta.v[3]);
    int off0 = meta.v[4];
    BufU64 in0 = BufU64(ParamsU64(pc.params).v[1]);
    int off1 = meta.v[5];
    BufU64 in1 = BufU64(ParamsU64(pc.params).v[2]);
    int off2 = meta.v[6];
    BufU64 eo0 = BufU64(ParamsU64(pc.params).v[3]);
    uint kd0 = uint(meta.v[7]); int ks0_0 = meta.v[8]; int ks1_0 = meta.v[9]; int ks2_0 = meta.v[10];
    uint rd0 = uint(meta.v[11]); int rs0_0 = meta.v[12]; int rs1_0 = meta.v[13]; int rs2_0 = meta.v[14];
    uint t = gl_LocalInvocationID.x;
    for (uint o = gl_GlobalInvocationID.x; o < pc.count; o += gl_NumWorkGroups.x * 256u) {
        uint r0 = 0u; uint r1 = uint(R);
        int b0 = off0;
        int b1 = off1;
        int b2 = off2;
        { uint rest = o;
            uint q0 = rest;
            b0 += int(q0) * ks0_0;
            b1 += int(q0) * ks1_0;
            b2 += int(q0) * ks2_0;
        }
        ACC av = ident(); uint ai = NONE;
        uint r = r0;
        for (; r + 7u < r1; r += 8u) {
            uint c0 = r + 0u;
            int e0_0 = b0;
            int e0_1 = b1;
            { uint rr = c0;
                uint q0 = rr;
                e0_0 += int(q0) * rs0_0;
                e0_1 += int(q0) * rs1_0;
            }
            uint64_t w0_0 = in0.v[e0_0];
            uint64_t w0_1 = in1.v[e0_1];
            uint c1 = r + 1u;
            int e1_0 = b0;
            int e1_1 = b1;
            { uint rr = c1;
                uint q0 = rr;
                e1_0 += int(q0) * rs0_0;
                e1_1 += int(q0) * rs1_0;
            }
            uint64_t w1_0 = in0.v[e1_0];
            uint64_t w1_1 = in1.v[e1_1];
            uint c2 = r + 2u;
            int e2_0 = b0;
            int e2_1 = b1;
            { uint rr = c2;
                uint q0 = rr;
                e2_0 += int(q0) * rs0_0;
                e2_1 += int(q0) * rs1_0;
            }
            uint64_t w2_0 = in0.v[e2_0];
            uint64_t w2_1 = in1.v[e2_1];
            uint c3 = r + 3u;
            int e3_0 = b0;
            int e3_1 = b1;
            { uint rr = c3;
                uint q0 = rr;
                e3_0 += int(q0) * rs0_0;
                e3_1 += int(q0) * rs1_0;
            }
            uint64_t w3_0 = in0.v[e3_0];
            uint64_t w3_1 = in1.v[e3_1];
            uint c4 = r + 4u;
            int e4_0 = b0;
            int e4_1 = b1;
            { uint rr = c4;
                uint q0 = rr;
                e4_0 += int(q0) * rs0_0;
                e4_1 += int(q0) * rs1_0;
            }
            uint64_t w4_0 = in0.v[e4_0];
            uint64_t w4_1 = in1.v[e4_1];
            uint c5 = r + 5u;
            int e5_0 = b0;
            int e5_1 = b1;
            { uint rr = c5;
                uint q0 = rr;
                e5_0 += int(q0) * rs0_0;
                e5_1 += int(q0) * rs1_0;
            }
            uint64_t w5_0 = in0.v[e5_0];
            uint64_t w5_1 = in1.v[e5_1];
            uint c6 = r + 6u;
            int e6_0 = b0;
            int e6_1 = b1;
            { uint rr = c6;
                uint q0 = rr;
                e6_0 += int(q0) * rs0_0;
                e6_1 += int(q0) * rs1_0;
            }
            uint64_t w6_0 = in0.v[e6_0];
            uint64_t w6_1 = in1.v[e6_1];
            uint c7 = r + 7u;
            int e7_0 = b0;
            int e7_1 = b1;
            { uint rr = c7;
                uint q0 = rr;
                e7_0 += int(q0) * rs0_0;
                e7_1 += int(q0) * rs1_0;
            }
            uint64_t w7_0 = in0.v[e7_0];
            uint64_t w7_1 = in1.v[e7_1];
            comb(av, ai, cand(pro(w0_0, w0_1)), c0);
            comb(av, ai, cand(pro(w1_0, w1_1)), c1);
            comb(av, ai, cand(pro(w2_0, w2_1)), c2);
            comb(av, ai, cand(pro(w3_0, w3_1)), c3);
            comb(av, ai, cand(pro(w4_0, w4_1)), c4);
            comb(av, ai, cand(pro(w5_0, w5_1)), c5);
            comb(av, ai, cand(pro(w6_0, w6_1)), c6);
            comb(av, ai, cand(pro(w7_0, w7_1)), c7);
        }
        for (; r < r1; r += 1u) {
            uint c0 = r;
            int e0_0 = b0;
            int e0_1 = b1;
            { uint rr = c0;
                uint q0 = rr;
                e0_0 += int(q0) * rs0_0;
                e0_1 += int(q0) * rs1_0;
            }
            uint64_t w0_0 = in0.v[e0_0];
            uint64_t w0_1 = in1.v[e0_1];
            comb(av, ai, cand(pro(w0_0, w0_1)), c0);
        }
        uint64_t res = nx_f64_to_bits(nx_canon_f64(av));
        BufU64(ParamsU64(pc.params).v[0]).v[o] = res;
        for (uint cy = 0u; cy < uint(R); cy += 1u) {
            int ey_0 = b0;
            int ey_1 = b1;
            int ey_2 = b2;
            { uint rr = cy;
                uint q0 = rr;
                ey_0 += int(q0) * rs0_0;
                ey_1 += int(q0) * rs1_0;
                ey_2 += int(q0) * rs2_0;
            }
            uint64_t wy_0 = in0.v[ey_0];
            uint64_t wy_1 = in1.v[ey_1];
            uint64_t y0;
            epi(wy_0, wy_1, res, y0);
            eo0.v[uint(ey_2)] = y0;
        }
    }
}

