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
