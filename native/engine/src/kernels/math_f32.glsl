// nx_vulkan's f32 math for `precision: :fast` (FloatMath::Fast): f32/f16/bf16 nodes computed
// in f32 with our own functions, every result within 2 ulp of the correctly rounded one
// (checked against MPFR by native/engine/tests/math_f32_ulp.rs), and the same bits on every
// device. Vulkan promises correct rounding only for f32 add, subtract and multiply (and exact
// conversions); division is 2.5 ulp, sqrt is inherited from inversesqrt, fma() may be split
// into a multiply and an add, and a device may flush subnormals (the H200 does not promise to
// keep them). Hence, as in math_f64.glsl:
//   * only + - * (each result `precise`: no contraction), comparisons and integer/bit operations;
//     no built-in float function, no float division, no fma();
//   * classification, scaling by 2^k and every subnormal input or result on the integer bits,
//     so a flushing device never sees a subnormal operand or produces one: add/sub/mul use the
//     native operation only when both operands and the result are normal, and an exact integer
//     path otherwise; sqrt is an exact integer construction (correctly rounded), and so is
//     division where the quotient or an operand is not normal;
//   * NaN results are the canonical quiet NaN (BinaryBackend's), special values follow the
//     f64 library's (and so BinaryBackend's) rules.
// Algorithms (coefficients: Chebyshev fits by mpmath.chebyfit, rounded to f32):
//   div: normal operands and quotient: mantissa quotient from a Newton reciprocal, corrected
//     once by its exact residual (Dekker's product), faithful (<= 1 ulp); otherwise a quotient
//     fixed by an exact integer remainder (correctly rounded).
//   sqrt: integer square root of the mantissa from a Newton estimate, exact remainder.
//   rsqrt: 1 / sqrt, the square root correctly rounded, the division as above (<= 2 ulp).
//   exp: Cody-Waite reduction by ln2 (15-bit high part: k ln2_hi exact), Taylor to r^8,
//     1 + r kept as a float-float; 2^k applied on the bits (subnormal results rounded there).
//   log: x = 2^e m, m in [sqrt(1/2), sqrt(2)), f = m - 1 exact, s = f / (2 + f) as a
//     float-float (Newton reciprocal, exact residual), log m = 2s + 2s^3/3 + ... (to s^15),
//     the s^3 term in float-float (log as a float-float has relative error ~2^-33).
//   expm1: Taylor series for |x| < 0.35, else exp as a float-float minus 1 (exact two-sum).
//   log1p: 1 + x = u + ul exactly, log(u) + ul/u.
//   pow: C99's special values, then exp(y log|x|) with log|x| (its s^3 term too) and the
//     product as float-floats.
//   tanh: |x| < 2^-12: x; < 0.625: x + x z P(z) (degree 6 in z = x^2); < 9.02: 1 - 2/(e^2|x| + 1)
//     with e^2|x| and the reciprocal as float-floats; beyond: +-1.
//   sigmoid: 1/(1 + e^-x) (x >= 0) or e^x/(1 + e^x) (x < 0) in float-float; exp(x) below -17.34.
//   erf: |x| < 2^-12: 2x/sqrt(pi) on a scaled copy; < 1: x + x T(x^2) (degree 8);
//     < 3.92: 1 - e^(-x^2) G(t) (erfcx, degree 12 in t = (2|x| - 5)/3, x^2 as a float-float);
//     beyond: +-1.
// Every identifier starts with nxf_.

float nxf_nan() { return uintBitsToFloat(0x7FC00000u); }
bool nxf_isnan(float x) { return (floatBitsToUint(x) & 0x7FFFFFFFu) > 0x7F800000u; }
bool nxf_isinf(float x) { return (floatBitsToUint(x) & 0x7FFFFFFFu) == 0x7F800000u; }
float nxf_canon(float x) { return nxf_isnan(x) ? nxf_nan() : x; }
// exponent field 1..254: not zero, subnormal, Inf or NaN. Tested with two float comparisons
// (NaN fails both), a third cheaper on the H200 than the integer field test (layernorm :fast
// 76 -> 71 us; stop 22, run 1), and exact on a device that flushes subnormals: a subnormal
// flushed by abs() is 0, which is not normal either.
bool nxf_normal(uint b) { float a = abs(uintBitsToFloat(b)); return a >= 1.17549435e-38 && a <= 3.40282347e38; }
// Zero or normal (a speculative native operation's operand, elementwise.rs): on the bits, so a
// device that flushes subnormals cannot pass one as a zero.
bool nxf_ok(float x) { uint e = floatBitsToUint(x) & 0x7F800000u; return e != 0x7F800000u && (e != 0u || (floatBitsToUint(x) & 0x7FFFFFu) == 0u); }
bool nxf_iszero(float x) { return (floatBitsToUint(x) & 0x7FFFFFFFu) == 0u; }
float nxf_with_sign(float x, uint sign) { return uintBitsToFloat(floatBitsToUint(x) | sign); }
// The sign bit as a mask the shader compiler cannot see as a constant. Flipping or clearing the
// sign with a constant mask is recognised as a float negate or abs, and NVIDIA's compiler may
// emit that as a float instruction, which flushes a subnormal to zero (the H200 reports
// shaderDenormPreserveFloat32 = false): on the H200 a fused `negate(multiply(a, b))` gave other
// bits than the unfused pair exactly where the product was subnormal (random-graph case 168,
// stop 21). `pad_` of the push constants is always 0, so the operation stays an integer one.
uint nxf_sign_bit() { return 0x80000000u | pc.pad_; }
float nxf_neg(float x) { return uintBitsToFloat(floatBitsToUint(x) ^ nxf_sign_bit()); }

// ---- exact integer helpers: unpack, round-and-pack ----
// |x| = sig * 2^(e - 23) with sig in [2^23, 2^24), for finite nonzero bits (subnormals normalised)
uint nxf_sig(uint b, out int e) {
    uint ex = (b >> 23) & 0xFFu;
    uint m = b & 0x7FFFFFu;
    if (ex == 0u) {
        int p = findMSB(m);
        e = p - 149;
        return m << uint(23 - p);
    }
    e = int(ex) - 127;
    return m | 0x800000u;
}
// sign * (sig / 2^30) * 2^e rounded to nearest even, sig in [2^30, 2^31), `sticky`: nonzero
// bits below sig. Subnormal results are rounded at their own position; overflow gives Inf.
float nxf_pack(uint sign, int e, uint sig, bool sticky) {
    int be = e + 127;
    if (be >= 255) return uintBitsToFloat(sign | 0x7F800000u);
    uint shift = 7u;
    if (be < 1) {
        int s = 8 - be;
        if (s > 31) return uintBitsToFloat(sign); // below half the smallest subnormal
        shift = uint(s);
    }
    uint kept = sig >> shift;
    uint rest = sig & ((1u << shift) - 1u);
    uint half_ = 1u << (shift - 1u);
    if (rest > half_ || (rest == half_ && (sticky || (kept & 1u) != 0u))) kept += 1u;
    // normal: the implicit bit in `kept` adds one to the exponent field (and a carry one more)
    uint bits = (be >= 1) ? (uint(be - 1) << 23) + kept : kept;
    if (bits >= 0x7F800000u) return uintBitsToFloat(sign | 0x7F800000u);
    return uintBitsToFloat(sign | bits);
}
// p * 2^k for a normal p, rounded once (subnormal results on the integer path)
float nxf_ldexp(float p, int k) {
    uint b = floatBitsToUint(p);
    int be = int((b >> 23) & 0xFFu) + k;
    if (be >= 1 && be <= 254) return uintBitsToFloat((b & 0x807FFFFFu) | (uint(be) << 23));
    return nxf_pack(b & 0x80000000u, be - 127, ((b & 0x7FFFFFu) | 0x800000u) << 7, false);
}
// 2^k as a float, -126 <= k <= 127
float nxf_pow2(int k) { return uintBitsToFloat(uint(k + 127) << 23); }

// ---- add, subtract, multiply: native when everything is normal, else exact integers ----
float nxf_add_slow(float x, float y) {
    uint a = floatBitsToUint(x);
    uint b = floatBitsToUint(y);
    if (nxf_isnan(x) || nxf_isnan(y)) return nxf_nan();
    if (nxf_isinf(x)) return (nxf_isinf(y) && a != b) ? nxf_nan() : x;
    if (nxf_isinf(y)) return y;
    bool az = (a & 0x7FFFFFFFu) == 0u;
    bool bz = (b & 0x7FFFFFFFu) == 0u;
    if (az && bz) return uintBitsToFloat(a & b); // -0 only for -0 + -0
    if (az) return y;
    if (bz) return x;
    int ea;
    int eb;
    uint sa = nxf_sig(a, ea) << 7;
    uint sb = nxf_sig(b, eb) << 7;
    uint ga = a & 0x80000000u;
    uint gb = b & 0x80000000u;
    if (eb > ea || (eb == ea && sb > sa)) {
        uint ts = sa; sa = sb; sb = ts;
        int te = ea; ea = eb; eb = te;
        uint tg = ga; ga = gb; gb = tg;
    }
    int d = ea - eb;
    bool sticky = false;
    if (d > 31) {
        sticky = true;
        sb = 0u;
    } else if (d > 0) {
        sticky = (sb & ((1u << uint(d)) - 1u)) != 0u;
        sb >>= uint(d);
    }
    int e = ea;
    uint s;
    if (ga == gb) {
        s = sa + sb;
        if (s >= 0x80000000u) {
            sticky = sticky || (s & 1u) != 0u;
            s >>= 1;
            e += 1;
        }
        return nxf_pack(ga, e, s, sticky);
    }
    // |A| >= |B|: the bits shifted out of B make the difference (s - 1) + a fraction
    s = sa - sb;
    if (sticky) s -= 1u;
    if (s == 0u) return 0.0; // exact cancellation: +0
    int p = findMSB(s);
    if (p < 30) {
        s <<= uint(30 - p);
        e -= 30 - p;
    }
    return nxf_pack(ga, e, s, sticky);
}
float nxf_add(float x, float y) {
    precise float r = x + y;
    if (nxf_normal(floatBitsToUint(x)) && nxf_normal(floatBitsToUint(y)) && nxf_normal(floatBitsToUint(r))) return r;
    return nxf_add_slow(x, y);
}
float nxf_sub(float x, float y) { return nxf_add(x, nxf_neg(y)); }

float nxf_mul_slow(float x, float y) {
    uint a = floatBitsToUint(x);
    uint b = floatBitsToUint(y);
    uint sign = (a ^ b) & 0x80000000u;
    if (nxf_isnan(x) || nxf_isnan(y)) return nxf_nan();
    bool az = (a & 0x7FFFFFFFu) == 0u;
    bool bz = (b & 0x7FFFFFFFu) == 0u;
    if (nxf_isinf(x) || nxf_isinf(y)) return (az || bz) ? nxf_nan() : uintBitsToFloat(sign | 0x7F800000u);
    if (az || bz) return uintBitsToFloat(sign);
    int ea;
    int eb;
    uint sa = nxf_sig(a, ea);
    uint sb = nxf_sig(b, eb);
    uint hi;
    uint lo;
    umulExtended(sa, sb, hi, lo); // in [2^46, 2^48)
    int e = ea + eb;
    uint shift = 16u;
    if ((hi & 0x8000u) != 0u) {
        shift = 17u;
        e += 1;
    }
    uint sig = (hi << (32u - shift)) | (lo >> shift);
    bool sticky = (lo & ((1u << shift) - 1u)) != 0u;
    return nxf_pack(sign, e, sig, sticky);
}
float nxf_mul(float x, float y) {
    precise float r = x * y;
    if (nxf_normal(floatBitsToUint(x)) && nxf_normal(floatBitsToUint(y)) && nxf_normal(floatBitsToUint(r))) return r;
    return nxf_mul_slow(x, y);
}

// ---- float-float helpers (exact for normal operands and results) ----
vec2 nxf_fast_two_sum(float a, float b) { // |a| >= |b|
    precise float s = a + b;
    precise float e = b - (s - a);
    return vec2(s, e);
}
vec2 nxf_two_sum(float a, float b) {
    precise float s = a + b;
    precise float bb = s - a;
    precise float e = (a - (s - bb)) + (b - bb);
    return vec2(s, e);
}
vec2 nxf_split(float a) {
    precise float t = 4097.0 * a;
    precise float hi = t - (t - a);
    precise float lo = a - hi;
    return vec2(hi, lo);
}
vec2 nxf_two_prod(float a, float b) {
    precise float p = a * b;
    vec2 x = nxf_split(a);
    vec2 y = nxf_split(b);
    precise float e = ((x.x * y.x - p) + x.x * y.y + x.y * y.x) + x.y * y.y;
    return vec2(p, e);
}
// ~1/m for m in [1, 2): linear start (within 1/17), three Newton steps (relative error
// ~2^-23, limited by rounding)
float nxf_recip_est(float m) {
    precise float r = 1.4117647 - 0.47058824 * m;
    precise float t = 1.0 - m * r;
    r = r + r * t;
    t = 1.0 - m * r;
    r = r + r * t;
    t = 1.0 - m * r;
    r = r + r * t;
    return r;
}
// ~1/m for m in [0.75, 2] (relative error ~2^-23): nxf_recip_est and a fourth Newton step
// (the same operations in the same order as when it was written out in full)
float nxf_recip12(float m) {
    precise float r = nxf_recip_est(m);
    precise float t = 1.0 - m * r;
    r = r + r * t;
    return r;
}
// 1 / (hi + lo) as a float-float (q.x + q.y, error ~2^-40 relative): hi positive normal,
// |lo| <= ulp(hi), the reciprocal normal.
vec2 nxf_recip_ff(float hi, float lo) {
    uint b = floatBitsToUint(hi);
    int e = int(b >> 23) - 127;
    float r = nxf_recip12(uintBitsToFloat((b & 0x7FFFFFu) | 0x3F800000u));
    float q0 = uintBitsToFloat(floatBitsToUint(r) - uint(e << 23)); // r * 2^-e
    vec2 p = nxf_two_prod(q0, hi);
    precise float rho = ((1.0 - p.x) - p.y) - q0 * lo;
    precise float q1 = q0 * rho;
    return vec2(q0, q1);
}

// ---- division and square roots ----
// a / b correctly rounded for the bits of nonzero finite floats (subnormals included): the
// mantissa quotient Q = floor(sa 2^25 / sb) in (2^24, 2^26) is estimated within a few units,
// then fixed by the exact remainder (small, so 32-bit wrapping arithmetic holds it).
float nxf_div_exact(uint a, uint b) {
    uint sign = (a ^ b) & 0x80000000u;
    int ea;
    int eb;
    uint sa = nxf_sig(a, ea);
    uint sb = nxf_sig(b, eb);
    float ma = uintBitsToFloat((sa & 0x7FFFFFu) | 0x3F800000u);
    float mb = uintBitsToFloat((sb & 0x7FFFFFu) | 0x3F800000u);
    precise float q = ma * nxf_recip12(mb);
    precise float qs = q * 33554432.0;
    uint Q = uint(qs);
    int R = int((sa << 25) - Q * sb);
    int ib = int(sb);
    while (R < 0) {
        Q -= 1u;
        R += ib;
    }
    while (R >= ib) {
        Q += 1u;
        R -= ib;
    }
    int e = ea - eb;
    uint sig;
    if (Q >= 0x2000000u) {
        sig = Q << 5;
    } else {
        sig = Q << 6;
        e -= 1;
    }
    return nxf_pack(sign, e, sig, R != 0);
}

// x / y for normal x and y whose quotient is normal (the common case): faithfully rounded
// (within 1 ulp; 12 of tests/math_f32_ulp.rs's 28,568 f32 quotients differ from the correctly
// rounded one) with float + - * only. The mantissa quotient q0 = ma / mb from a Newton
// reciprocal is corrected once by its residual ma - q0 mb, which Dekker's product gives
// exactly; 2^e is applied on the bits. It replaced the exact integer division below, whose
// float/integer conversions run at a quarter of the float rate on NVIDIA GPUs: with it and
// exp's conversion-free rounding, softmax :fast went 81.8 -> 74.9 us on the H200 (stop 22,
// run 1); `:fast` promises 2 ulp, not correct rounding. Subnormal or overflowing quotients
// take the exact path.
float nxf_div_normal(uint a, uint b) {
    float ma = uintBitsToFloat((a & 0x7FFFFFu) | 0x3F800000u);
    float mb = uintBitsToFloat((b & 0x7FFFFFu) | 0x3F800000u);
    float rb = nxf_recip_est(mb);
    precise float q0 = ma * rb; // (0.5, 2)
    vec2 p = nxf_two_prod(q0, mb);
    precise float rem = (ma - p.x) - p.y; // ma - p.x exact (Sterbenz)
    precise float q1 = q0 + rem * rb;
    uint qb = floatBitsToUint(q1);
    int be = int(qb >> 23) + int((a >> 23) & 0xFFu) - int((b >> 23) & 0xFFu);
    if (be >= 1 && be <= 254) return uintBitsToFloat(((a ^ b) & 0x80000000u) | (uint(be) << 23) | (qb & 0x7FFFFFu));
    return nxf_div_exact(a, b);
}
float nxf_div(float x, float y) {
    uint a = floatBitsToUint(x);
    uint b = floatBitsToUint(y);
    if (nxf_normal(a) && nxf_normal(b)) return nxf_div_normal(a, b);
    bool xf = (a & 0x7F800000u) == 0x7F800000u;
    bool yf = (b & 0x7F800000u) == 0x7F800000u;
    // BinaryBackend's clauses (ops.glsl, nx_div_f64)
    if (xf && yf) return nxf_nan();
    if (xf) {
        if (nxf_isnan(x)) return nxf_nan();
        return ((b & 0x80000000u) != 0u && (b & 0x7FFFFFFFu) != 0u) ? nxf_neg(x) : x;
    }
    if (nxf_isnan(y)) return nxf_nan();
    if (yf) return 0.0;
    bool xz = (a & 0x7FFFFFFFu) == 0u;
    bool yz = (b & 0x7FFFFFFFu) == 0u;
    if (xz && yz) return nxf_nan();
    uint sign = (a ^ b) & 0x80000000u;
    if (yz) return uintBitsToFloat(sign | 0x7F800000u);
    if (xz) return uintBitsToFloat(sign);
    return nxf_div_exact(a, b);
}

float nxf_sqrt(float x) {
    uint a = floatBitsToUint(x);
    if (nxf_isnan(x)) return nxf_nan();
    if ((a & 0x7FFFFFFFu) == 0u) return x; // sqrt(-0) = -0
    if ((a & 0x80000000u) != 0u) return nxf_nan();
    if (a == 0x7F800000u) return x;
    int e;
    uint s = nxf_sig(a, e);
    // S = floor(sqrt(N)), N = s 2^25 (e even) or s 2^26 (e odd): S in [2^24, 2^25)
    bool odd = (e & 1) != 0;
    float m = uintBitsToFloat((s & 0x7FFFFFu) | 0x3F800000u);
    precise float u = odd ? m * 2.0 : m; // [1, 4)
    precise float y = 1.1 - 0.15 * u; // ~1/sqrt(u), then Newton
    precise float t = 1.5 - 0.5 * u * y * y;
    y = y * t;
    t = 1.5 - 0.5 * u * y * y;
    y = y * t;
    t = 1.5 - 0.5 * u * y * y;
    y = y * t;
    t = 1.5 - 0.5 * u * y * y;
    y = y * t;
    precise float r = u * y * 16777216.0;
    uint S = uint(r);
    uint N = odd ? (s << 26) : (s << 25);
    int R = int(N - S * S);
    while (R < 0) {
        R += int(2u * S) - 1;
        S -= 1u;
    }
    while (R > int(2u * S)) {
        R -= int(2u * S) + 1;
        S += 1u;
    }
    return nxf_pack(0u, e >> 1, S << 6, R != 0);
}

// 1/sqrt(x); rsqrt(+-0) = +Inf (IEEE rSqrt, as m_rsqrt)
float nxf_rsqrt(float x) {
    uint a = floatBitsToUint(x);
    if (nxf_isnan(x)) return nxf_nan();
    if ((a & 0x7FFFFFFFu) == 0u) return uintBitsToFloat(0x7F800000u);
    if ((a & 0x80000000u) != 0u) return nxf_nan();
    if (a == 0x7F800000u) return 0.0;
    return nxf_div(1.0, nxf_sqrt(x));
}

// ---- exp ----
// exp(x + xl) = (h.x + h.y) * 2^k for |x| <= 105 (not NaN), |xl| <= ulp(x):
// h.x in [0.70, 1.42], |h.y| <= ulp(h.x)/2
vec2 nxf_exp_ff2(float x, float xl, out int k) {
    precise float t = x * 1.44269502;
    // k = t rounded to the nearest integer (ties to even) by adding 1.5 * 2^23 (|t| < 2^22),
    // without float/integer conversions (a quarter of the float rate on the H200)
    precise float tk = t + 12582912.0;
    precise float kf = tk - 12582912.0;
    k = floatBitsToInt(tk) - 0x4B400000;
    precise float rh = x - kf * 0.693145751953125; // exact (Sterbenz; 15-bit ln2_hi)
    precise float rl = xl - kf * 1.42860682030941723212e-06;
    precise float r = rh + rl;
    precise float q = r * r * (0.5 + r * (0.16666667 + r * (0.041666668 + r * (0.008333334 + r * (0.0013888889 + r * (1.984127e-4 + r * 2.4801587e-5))))));
    vec2 a = nxf_fast_two_sum(1.0, rh);
    precise float lo = a.y + (rl + q);
    return nxf_fast_two_sum(a.x, lo);
}
vec2 nxf_exp_ff(float x, out int k) { return nxf_exp_ff2(x, 0.0, k); }
float nxf_exp(float x) {
    uint a = floatBitsToUint(x);
    uint ax = a & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return nxf_nan();
    if (ax <= 0x33000000u) return 1.0; // |x| <= 2^-25 (zeros and subnormals too)
    if (a >= 0xC2D00000u) return 0.0; // x <= -104 (and -Inf)
    if (a > 0x42B20000u && a < 0x80000000u) return uintBitsToFloat(0x7F800000u); // x > 89
    int k;
    vec2 h = nxf_exp_ff(x, k);
    return nxf_ldexp(h.x, k);
}
// exp(x) as a float-float for -104 < x < 89 with a normal result and a normal low part's scale
vec2 nxf_exp_ff_scaled(float x) {
    int k;
    vec2 h = nxf_exp_ff(x, k);
    float p = nxf_pow2(k);
    precise float hi = h.x * p;
    precise float lo = h.y * p;
    return vec2(hi, lo);
}

// ---- log ----
// log(x) + extra as a float-float (relative error ~2^-35) for the bits `a` of a positive finite
// x (subnormals too), |extra| below 2^-23 of log's result scale (log1p adds its lost low part)
vec2 nxf_log_ff(uint a, float extra) {
    int e;
    uint s = nxf_sig(a, e);
    float m = uintBitsToFloat((s & 0x7FFFFFu) | 0x3F800000u);
    if (m > 1.41421356) {
        m = uintBitsToFloat(floatBitsToUint(m) - 0x800000u); // m / 2
        e += 1;
    }
    precise float f = m - 1.0; // exact
    // s = f / (2 + f) as s0 + s1: t = 2 + f exactly as th + tl, s0 from a Newton reciprocal,
    // s1 from the exact residual f - s0 t
    vec2 t = nxf_fast_two_sum(2.0, f);
    float rt = nxf_recip12(t.x * 0.5) * 0.5;
    precise float s0 = f * rt;
    vec2 p = nxf_two_prod(s0, t.x);
    precise float rho = ((f - p.x) - p.y) - s0 * t.y;
    precise float s1 = rho * rt;
    // s0^3 (2/3 + s0^2 R): the leading term in float-float (2/3 = 0.6666667 - 1.9868215e-08)
    vec2 z2 = nxf_two_prod(s0, s0);
    vec2 z3 = nxf_two_prod(z2.x, s0);
    precise float c3l = z3.y + z2.y * s0;
    vec2 ch = nxf_two_prod(z3.x, 0.6666667);
    precise float z = z2.x;
    precise float tail = z3.x * z * (0.4 + z * (0.2857143 + z * (0.22222222 + z * (0.18181819 + z * (0.15384616 + z * 0.13333334)))));
    // and 2 s0^2 s1, the s1 part of (2/3) s^3 (s1 is up to ~2^-22 of s0)
    precise float cl = ch.y + (((z3.x * -1.9868215e-08 + c3l * 0.6666667) + z * s1 * 2.0) + tail);
    float fe = float(e);
    vec2 h = nxf_two_sum(fe * 0.693145751953125, 2.0 * s0);
    vec2 h2 = nxf_two_sum(h.x, ch.x);
    precise float lo = (h.y + h2.y) + (fe * 1.42860682030941723212e-06 + ((2.0 * s1 + cl) + extra));
    return vec2(h2.x, lo);
}
float nxf_log_plus(uint a, float extra) {
    vec2 l = nxf_log_ff(a, extra);
    precise float r = l.x + l.y;
    return r;
}
float nxf_log(float x) {
    uint a = floatBitsToUint(x);
    if (nxf_isnan(x)) return nxf_nan();
    if ((a & 0x7FFFFFFFu) == 0u) return uintBitsToFloat(0xFF800000u);
    if ((a & 0x80000000u) != 0u) return nxf_nan();
    if (a == 0x7F800000u) return x;
    return nxf_log_plus(a, 0.0);
}
// log1p(x) = log(u) + ul/u with 1 + x = u + ul exactly (the next term is below 2^-48 of it)
float nxf_log1p(float x) {
    uint a = floatBitsToUint(x);
    uint ax = a & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return nxf_nan();
    if (ax < 0x33800000u) return x; // |x| < 2^-24: x - x^2/2 rounds to x (zeros, subnormals)
    if (a == 0xBF800000u) return uintBitsToFloat(0xFF800000u); // -1
    if (a > 0xBF800000u) return nxf_nan(); // below -1
    if (a >= 0x4B800000u && a < 0x80000000u) return nxf_log(x); // x >= 2^24: 1 adds < 2^-24 of x
    vec2 u = nxf_two_sum(1.0, x);
    vec2 r = nxf_recip_ff(u.x, 0.0);
    precise float extra = u.y * r.x;
    return nxf_log_plus(floatBitsToUint(u.x), extra);
}
// expm1: |x| < 0.35 by its Taylor series to x^8 (no cancellation); else (e^x as a float-float)
// minus 1 with an exact two-sum
float nxf_expm1(float x) {
    uint a = floatBitsToUint(x);
    uint ax = a & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return nxf_nan();
    if (ax < 0x33000000u) return x; // |x| < 2^-25: x + x^2/2 rounds to x
    if (a >= 0xC18AB852u) return -1.0; // x <= -17.34 (and -Inf): e^x < 2^-25
    if (a > 0x42B20000u && a < 0x80000000u) return uintBitsToFloat(0x7F800000u); // x > 89
    if (ax < 0x3EB33333u) {
        precise float q = x * x * (0.5 + x * (0.16666667 + x * (0.041666668 + x * (0.008333334 + x * (0.0013888889 + x * (1.984127e-4 + x * 2.4801587e-5))))));
        precise float r = x + q;
        return r;
    }
    int k;
    vec2 h = nxf_exp_ff(x, k);
    if (k > 60) return nxf_ldexp(h.x, k); // the 1 is far below its rounding
    float p = nxf_pow2(k);
    precise float hh = h.x * p;
    precise float hl = h.y * p;
    vec2 d = nxf_two_sum(hh, -1.0);
    precise float r = d.x + (d.y + hl);
    return r;
}

// pow with C99 Annex F's special values (as m_pow): exp(y log|x|) with log|x| and the product
// as float-floats, the sign from an odd integer y
float nxf_pow(float x, float y) {
    uint bx = floatBitsToUint(x);
    uint by = floatBitsToUint(y);
    uint ax = bx & 0x7FFFFFFFu;
    uint ay = by & 0x7FFFFFFFu;
    if (ay == 0u) return 1.0;
    if (bx == 0x3F800000u) return 1.0;
    if (ax > 0x7F800000u || ay > 0x7F800000u) return nxf_nan();
    bool yint = false;
    bool yodd = false;
    if (ay >= 0x4B800000u) {
        yint = true; // |y| >= 2^24: an even integer
    } else if (ay >= 0x3F800000u) {
        uint sh = uint(150 - int(ay >> 23)); // fraction bits: 23 - exponent
        uint m = (ay & 0x7FFFFFu) | 0x800000u;
        yint = (m & ((1u << sh) - 1u)) == 0u;
        yodd = yint && ((m >> sh) & 1u) != 0u;
    }
    bool yneg = (by & 0x80000000u) != 0u;
    if (ay == 0x7F800000u) {
        if (ax == 0x3F800000u) return 1.0;
        return ((ax < 0x3F800000u) == yneg) ? uintBitsToFloat(0x7F800000u) : 0.0;
    }
    bool xneg = (bx & 0x80000000u) != 0u;
    if (ax == 0u) {
        if (yneg) return yodd ? uintBitsToFloat((bx & 0x80000000u) | 0x7F800000u) : uintBitsToFloat(0x7F800000u);
        return yodd ? x : 0.0;
    }
    if (ax == 0x7F800000u) return uintBitsToFloat(((xneg && yodd) ? 0x80000000u : 0u) | (yneg ? 0u : 0x7F800000u));
    uint sign = 0u;
    if (xneg) {
        if (!yint) return nxf_nan();
        if (yodd) sign = 0x80000000u;
    }
    if (ay > 0x5F800000u) { // |y| > 2^64
        if (ax == 0x3F800000u) return 1.0;
        return ((ax > 0x3F800000u) != yneg) ? uintBitsToFloat(0x7F800000u) : 0.0;
    }
    if (ay < 0x0D800000u) return nxf_with_sign(1.0, sign); // |y log|x|| < 2^-92
    vec2 l = nxf_log_ff(ax, 0.0);
    vec2 p = nxf_two_prod(y, l.x);
    precise float pl = p.y + y * l.y;
    vec2 z = nxf_fast_two_sum(p.x, pl);
    uint az = floatBitsToUint(z.x);
    if (az > 0x42B30000u && az < 0x80000000u) return uintBitsToFloat(sign | 0x7F800000u); // > 89.5
    if (az > 0xC2D10000u) return uintBitsToFloat(sign); // < -104.5
    int k;
    vec2 h = nxf_exp_ff2(z.x, z.y, k);
    return nxf_with_sign(nxf_ldexp(h.x, k), sign);
}

// ---- tanh, sigmoid ----
float nxf_tanh(float x) {
    uint a = floatBitsToUint(x);
    uint ax = a & 0x7FFFFFFFu;
    uint sign = a & 0x80000000u;
    if (ax > 0x7F800000u) return nxf_nan();
    if (ax < 0x39800000u) return x; // |x| < 2^-12: x - x^3/3 rounds to x
    if (ax >= 0x411051ECu) return nxf_with_sign(1.0, sign); // |x| >= 9.02
    if (ax < 0x3F200000u) {
        // |x| < 0.625
        precise float z = x * x;
        precise float p = z * (-0.3333333432674408 + z * (0.13333332538604736 + z * (-0.053967639803886414 + z * (0.021859895437955856 + z * (-0.008791004307568073 + z * (0.003306247526779771 + z * -0.0008622168097645044))))));
        precise float r = x + x * p;
        return r;
    }
    float v = uintBitsToFloat(ax);
    vec2 e = nxf_exp_ff_scaled(2.0 * v); // in [3.49, 7e7]
    vec2 d = nxf_fast_two_sum(e.x, 1.0);
    precise float dl = d.y + e.y;
    vec2 q = nxf_recip_ff(d.x, dl);
    vec2 s = nxf_two_sum(1.0, -2.0 * q.x);
    precise float r = s.x + (s.y - 2.0 * q.y);
    return nxf_with_sign(r, sign);
}

float nxf_sigmoid(float x) {
    uint a = floatBitsToUint(x);
    uint ax = a & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return nxf_nan();
    if (ax <= 0x33800000u) return 0.5; // |x| <= 2^-24
    if ((a & 0x80000000u) == 0u) {
        if (a >= 0x418AB852u) return 1.0; // x >= 17.34
        vec2 e = nxf_exp_ff_scaled(-x);
        vec2 d = nxf_fast_two_sum(1.0, e.x);
        precise float dl = d.y + e.y;
        vec2 q = nxf_recip_ff(d.x, dl);
        precise float r = q.x + q.y;
        return r;
    }
    if (a >= 0xC18AB852u) return nxf_exp(x); // x <= -17.34: e^x (1 - e^x) rounds as e^x
    vec2 e = nxf_exp_ff_scaled(x);
    vec2 d = nxf_fast_two_sum(1.0, e.x);
    precise float dl = d.y + e.y;
    vec2 q = nxf_recip_ff(d.x, dl);
    vec2 p = nxf_two_prod(e.x, q.x);
    precise float r = p.x + (p.y + (e.x * q.y + e.y * q.x));
    return r;
}

// ---- erf ----
float nxf_erf(float x) {
    uint a = floatBitsToUint(x);
    uint ax = a & 0x7FFFFFFFu;
    uint sign = a & 0x80000000u;
    if (ax > 0x7F800000u) return nxf_nan();
    if (ax < 0x39800000u) {
        // |x| < 2^-12: 2x/sqrt(pi) (the x^3 term is below 2^-25 of it), computed on |x| 2^64 and
        // scaled back on the bits, so a subnormal x or result never meets the float unit
        if (ax == 0u) return x;
        int e;
        uint s = nxf_sig(ax, e);
        float v = uintBitsToFloat((uint(e + 64 + 127) << 23) | (s & 0x7FFFFFu));
        precise float r = v + v * 0.12837916612625122;
        return nxf_with_sign(nxf_ldexp(r, -64), sign);
    }
    if (ax < 0x3F800000u) {
        // |x| < 1
        precise float z = x * x;
        precise float t = 0.12837916612625122 + z * (-0.37612637877464294 + z * (0.11283791065216064 + z * (-0.026866132393479347 + z * (0.005223783664405346 + z * (-0.0008542637806385756 + z * (0.00011956562229897827 + z * (-1.3909339941164944e-05 + z * 1.0589380963210715e-06)))))));
        precise float r = x + x * t;
        return r;
    }
    if (ax >= 0x407AE148u) return nxf_with_sign(1.0, sign); // |x| >= 3.92
    // 1 <= |x| < 3.92: 1 - e^(-x^2) G(t), G = erfcx
    float v = uintBitsToFloat(ax);
    precise float t = v * 0.6666667 - 1.6666666;
    precise float g = 0.21080636978149414 + t * (-0.11152100563049316 + t * (0.05611048638820648 + t * (-0.027005717158317566 + t * (0.012489520013332367 + t * (-0.005567380227148533 + t * (0.0024024874437600374 + t * (-0.0010170089080929756 + t * (0.00041298693395219743 + t * (-0.000144057790748775 + t * (5.630357554764487e-05 + t * (-3.6888912291033193e-05 + t * 1.3365835911827162e-05)))))))))));
    vec2 z = nxf_two_prod(v, v);
    int k;
    vec2 e = nxf_exp_ff(-z.x, k);
    precise float ex = e.x + (e.y - e.x * z.y); // e^(-hi) (1 - lo)
    precise float c = ex * g * nxf_pow2(k);
    precise float r = 1.0 - c;
    return nxf_with_sign(r, sign);
}

// ---- exact helpers the generator calls ----
float nxf_abs(float x) { // BinaryBackend: NaN stays NaN, -0.0 stays -0.0
    uint a = floatBitsToUint(x);
    if (nxf_isnan(x)) return x;
    return ((a & 0x80000000u) != 0u && (a & 0x7FFFFFFFu) != 0u) ? uintBitsToFloat(a & ~nxf_sign_bit()) : x;
}
float nxf_sign(float x) { // NaN and +-Inf give 1.0; zeros keep their sign
    uint a = floatBitsToUint(x);
    if ((a & 0x7FFFFFFFu) >= 0x7F800000u) return 1.0;
    if ((a & 0x7FFFFFFFu) == 0u) return x;
    return ((a & 0x80000000u) != 0u) ? -1.0 : 1.0;
}
// A total order on non-NaN floats on the bits (-0 == +0), so comparisons never depend on a
// device flushing subnormals.
int nxf_key(float x) {
    int b = floatBitsToInt(x);
    return (b < 0) ? -(b & 0x7FFFFFFF) : b;
}
float nxf_max(float x, float y) {
    if (nxf_isnan(x)) return x;
    if (nxf_isnan(y)) return y;
    return (nxf_key(y) > nxf_key(x)) ? y : x;
}
float nxf_min(float x, float y) {
    if (nxf_isnan(x)) return x;
    if (nxf_isnan(y)) return y;
    return (nxf_key(y) < nxf_key(x)) ? y : x;
}
bool nxf_nonzero(float x) { return (floatBitsToUint(x) & 0x7FFFFFFFu) != 0u; }

// ---- f16 / bf16 <-> f32 on the bits ----
float nxf_of_f16(uint h) {
    uint s = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1Fu;
    uint m = h & 0x3FFu;
    if (e == 0x1Fu) return uintBitsToFloat(s | 0x7F800000u | (m << 13));
    if (e == 0u) {
        if (m == 0u) return uintBitsToFloat(s);
        int p = findMSB(m); // m 2^-24 = 1.f 2^(p - 24)
        return uintBitsToFloat(s | (uint(p + 103) << 23) | ((m << uint(23 - p)) & 0x7FFFFFu));
    }
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}
// round to nearest even; a NaN keeps the top of its payload (quiet when none is left)
uint nxf_f16_bits(float v) {
    uint x = floatBitsToUint(v);
    uint s = (x >> 16) & 0x8000u;
    uint a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        uint pay = (a >> 13) & 0x3FFu;
        return s | 0x7C00u | ((pay == 0u) ? 0x200u : pay);
    }
    if (a >= 0x477FF000u) return s | 0x7C00u; // >= 65520 rounds to Inf
    if (a < 0x38800000u) {
        if (a < 0x33000000u) return s; // below 2^-25 (ties at 2^-25 go to 0)
        uint e = a >> 23;
        uint m = (a & 0x7FFFFFu) | 0x800000u;
        uint sh = 126u - e;
        uint q = m >> sh;
        uint rem = m & ((1u << sh) - 1u);
        uint half_ = 1u << (sh - 1u);
        if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) q += 1u;
        return s | q;
    }
    uint r = a - 0x38000000u;
    return s | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13);
}
float nxf_round_f16(float v) { return nxf_isnan(v) ? nxf_nan() : nxf_of_f16(nxf_f16_bits(v)); }
// bf16 as Nx.BinaryBackend writes it: the top 16 bits of the f32 (a NaN kept a NaN)
uint nxf_bf16_bits(float v) {
    uint h = floatBitsToUint(v) >> 16;
    if (nxf_isnan(v) && (h & 0x7Fu) == 0u) h |= 0x40u;
    return h;
}
float nxf_round_bf16(float v) { return nxf_isnan(v) ? nxf_nan() : uintBitsToFloat(floatBitsToUint(v) & 0xFFFF0000u); }
