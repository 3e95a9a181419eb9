// f32 exp and erf for the encoder's kernels, accurate to about an ulp on every device: the
// drivers' built-in exp is an exp2 approximation (several ulp, more for large |x|) and GLSL
// has no erf. Both are written here from first principles (no library port):
// - enc_expf: x = k·ln2 + r (Cody-Waite, two-part ln2 with fma), exp(r) by its degree-7
//   Taylor polynomial (|r| <= ln2/2: truncation < 1e-8 relative), times 2^k in two steps.
// - enc_erff: |x| < 1: x · H(2x² - 1), H a degree-8 Chebyshev interpolant of erf(√u)/√u on
//   u in [0, 1] (relative error 1e-12 in exact arithmetic); 1 <= |x| < 4: 1 - e^(-x²)·G(t),
//   t = (2|x| - 5)/3, G a degree-12 Chebyshev interpolant of erfc(x)·e^(x²) on [1, 4] (6e-9),
//   with x² split exactly into hi + lo (fma) so e^(-x²) = e^(-hi)·(1 - lo) keeps its accuracy;
//   |x| >= 4: ±1 (erfc(4) < 2^-25). Coefficients from interpolation at Chebyshev nodes of
//   f64 erf/erfc, expanded to monomials.

float enc_expf(float x) {
    if (isnan(x)) return x;
    if (x > 88.72283935546875) return uintBitsToFloat(0x7F800000u);
    if (x < -103.972084045410) return 0.0;
    float k = roundEven(x * 1.44269502162933349609);
    float r = fma(-k, 0.693145751953125, x);
    r = fma(-k, 1.428606765330187045e-06, r);
    float p = 1.0 / 5040.0;
    p = fma(p, r, 1.0 / 720.0);
    p = fma(p, r, 1.0 / 120.0);
    p = fma(p, r, 1.0 / 24.0);
    p = fma(p, r, 1.0 / 6.0);
    p = fma(p, r, 0.5);
    p = fma(p, r, 1.0);
    p = fma(p, r, 1.0);
    int ki = int(k);
    int k1 = ki / 2;
    return ldexp(ldexp(p, k1), ki - k1);
}

float enc_erff(float x) {
    if (isnan(x)) return x;
    float a = abs(x);
    if (a < 1.0) {
        float u = fma(2.0 * x, x, -1.0);
        float h = 4.136589540e-09;
        h = fma(h, u, -7.557486094e-08);
        h = fma(h, u, 1.223367008e-06);
        h = fma(h, u, -1.753682481e-05);
        h = fma(h, u, 2.175171605e-04);
        h = fma(h, u, -2.285485657e-03);
        h = fma(h, u, 1.985249669e-02);
        h = fma(h, u, -1.405360890e-01);
        h = fma(h, u, 9.654687387e-01);
        return x * h;
    }
    if (a >= 4.0) return x > 0.0 ? 1.0 : -1.0;
    float t = (2.0 * a - 5.0) * (1.0 / 3.0);
    float g = 1.336583603e-05;
    g = fma(g, t, -3.688891062e-05);
    g = fma(g, t, 5.630357592e-05);
    g = fma(g, t, -1.440577931e-04);
    g = fma(g, t, 4.129869230e-04);
    g = fma(g, t, -1.017008940e-03);
    g = fma(g, t, 2.402487431e-03);
    g = fma(g, t, -5.567380323e-03);
    g = fma(g, t, 1.248952042e-02);
    g = fma(g, t, -2.700571687e-02);
    g = fma(g, t, 5.611048819e-02);
    g = fma(g, t, -1.115210051e-01);
    g = fma(g, t, 2.108063641e-01);
    float hi = a * a;
    float lo = fma(a, a, -hi);
    float e = enc_expf(-hi);
    e = fma(-lo, e, e);
    float r = fma(-e, g, 1.0);
    return x > 0.0 ? r : -r;
}

// PyTorch's exact gelu: 0.5·x·(1 + erf(x/√2)).
float enc_gelu(float x) {
    return 0.5 * x * (1.0 + enc_erff(x * 0.707106781186547524));
}

// f16 / bf16 <-> f32 with integer operations (exact; round to nearest even, as torch's
// .half() / .bfloat16()), independent of the driver's float conversions and denormal modes.
float enc_f16_to_f32(uint h) {
    uint s = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1Fu;
    uint m = h & 0x3FFu;
    if (e == 0x1Fu) return uintBitsToFloat(s | 0x7F800000u | (m << 13));
    if (e == 0u) {
        float v = float(m) * 5.9604644775390625e-08; // m · 2^-24, exact
        return s != 0u ? -v : v;
    }
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

uint enc_f32_to_f16(uint x) {
    uint s = (x >> 16) & 0x8000u;
    uint a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return s | 0x7E00u;
    if (a >= 0x477FF000u) return s | 0x7C00u; // >= 65520 (and Inf) rounds to Inf
    if (a < 0x38800000u) {
        // below 2^-14: a subnormal count of 2^-24
        if (a < 0x33000000u) return s; // below 2^-25: rounds to zero (2^-25 itself ties to 0)
        uint e = a >> 23;
        uint m = (a & 0x7FFFFFu) | 0x800000u;
        uint sh = 126u - e; // 14..24
        uint q = m >> sh;
        uint rem = m & ((1u << sh) - 1u);
        uint half_ = 1u << (sh - 1u);
        if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) q += 1u;
        return s | q;
    }
    uint r = a - 0x38000000u;
    return s | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13);
}

float enc_round_f16(float v) { return enc_f16_to_f32(enc_f32_to_f16(floatBitsToUint(v))); }

float enc_round_bf16(float v) {
    uint x = floatBitsToUint(v);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return uintBitsToFloat((x | 0x400000u) & 0xFFFF0000u);
    return uintBitsToFloat(((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16) << 16);
}
