// nx_vulkan double-precision math library (GLSL 4.60, concatenated into generated compute shaders
// that enable GL_ARB_gpu_shader_int64 / GL_EXT_shader_explicit_arithmetic_types_int64).
//
// Goal: every function within 1 ulp of the correctly rounded f64 result (checked against MPFR by
// native/engine/tests/math_ulp.rs) and the same bits on every device. Hence:
//   * no GLSL built-in transcendental functions; only + - * /, sqrt, floor, comparisons, int/double
//     conversions of exactly representable values, and integer bit manipulation of the doubles;
//   * every floating result is `precise` (no contraction, no reassociation); no fma: extra precision
//     comes from error-free transformations (TwoSum, Dekker split/product) and double-double
//     arithmetic;
//   * classification, scaling by 2^k and subnormal results are done on the integer bits (drivers may
//     flush float denormals): e.g. exp(-740) is rounded once into the subnormal grid by m_scale_dd.
//   * C99 Annex F special values (NaN, +-Inf, signed zeros; pow's table; atan2's quadrants).
//     m_rsqrt(+-0) = +Inf (IEEE 754-2019 rSqrt).
//
// Algorithms (published ones; coefficients derived with mpmath: Taylor coefficients rounded to
// double, erfcx / erf_inv / cbrt fits by mpmath.chebyfit, tables of log/atan/2/pi at high precision):
//   exp/expm1/sinh/cosh/tanh/sigmoid: Cody-Waite reduction by ln2 (42+53-bit split), Taylor to
//     r^14, result kept as a double-double (s + t) * 2^k.
//   log/log2/log10/log1p/pow/asinh/acosh/atanh: log m = 2 atanh(f/(2+f)), m in [sqrt(1/2), sqrt(2)),
//     series in double-double where it matters; result double-double (~2^-70 relative).
//   sin/cos/tan: |x| <= 823549: Cody-Waite with pi/2 in 3 x 33 bits + 53 bits; beyond:
//     Payne-Hanek on the integer mantissa with 2/pi in 32-bit words (224-bit window);
//     double-double kernels, tan = sin/cos in double-double.
//   atan/asin/acos/atan2: atan(v) = atan(i/16) + atan((v - c)/(1 + v c)) in double-double;
//     asin/acos through atan2 with sqrt((1-a)(1+a)) in double-double.
//   erf/erfc: Taylor series for |x| < 1; erfc = exp(-x^2) erfcx(x) with piecewise polynomials for
//     erfcx on [0.5, 27.5]; erf_inv: polynomial start + one Halley step on a double-double residual.
//   cbrt: Newton with an exact residual; rsqrt: double-double sqrt and division.
// Tables are avoided where an index is dynamic (lavapipe compiles indirect reads of constant
// arrays into long if-ladders): only 2/pi (Payne-Hanek) and atan(i/16) remain.
//
// Every identifier starts with m_ / M_.
const double M_LN2_C1 = 0.6931471805598903lf;
const double M_LN2_C2 = 5.497923018708371e-14lf;
const double M_LN2_HI = 0.6931471805599453lf;
const double M_LN2_LO = 2.3190468138462996e-17lf;
const double M_INV_LN2 = 1.4426950408889634lf;
const double M_INV_LN2_HI = 1.4426950408889634lf;
const double M_INV_LN2_LO = 2.0355273740931033e-17lf;
const double M_INV_LN10_HI = 0.4342944819032518lf;
const double M_INV_LN10_LO = 1.098319650216765e-17lf;
const double M_PI_HI = 3.141592653589793lf;
const double M_PI_LO = 1.2246467991473532e-16lf;
const double M_PIO2_HI = 1.5707963267948966lf;
const double M_PIO2_LO = 6.123233995736766e-17lf;
const double M_2OPI = 0.6366197723675814lf;
const double M_PIO2_1 = 1.5707963267341256lf;
const double M_PIO2_2 = 6.077100506303966e-11lf;
const double M_PIO2_3 = 2.0222662487111665e-21lf;
const double M_PIO2_4 = 8.4784276603689e-32lf;
const double M_2OSQRTPI_HI = 1.1283791670955126lf;
const double M_2OSQRTPI_LO = 1.533545961316588e-17lf;
const double M_SQRTPIO2_HI = 0.886226925452758lf;
const double M_SQRTPIO2_LO = -3.8332932499128993e-17lf;
const uint M_2OPI_BITS[40] = uint[](
    0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u,
    0xfe5163abu, 0xdebbc561u, 0xb7246e3au, 0x424dd2e0u, 0x06492eeau, 0x09d1921cu,
    0xfe1deb1cu, 0xb129a73eu, 0xe88235f5u, 0x2ebb4484u, 0xe99c7026u, 0xb45f7e41u,
    0x3991d639u, 0x835339f4u, 0x9c845f8bu, 0xbdf9283bu, 0x1ff897ffu, 0xde05980fu,
    0xef2f118bu, 0x5a0a6d1fu, 0x6d367ecfu, 0x27cb09b7u, 0x4f463f66u, 0x9e5fea2du,
    0x7527bac7u, 0xebe5f17bu, 0x3d0739f7u, 0x8a5292eau, 0x6bfb5fb1u, 0x1f8d5d08u,
    0x56033046u, 0xfc7b6babu, 0xf0cfbc20u, 0x9af4361du
);
const double M_EXP_C2 = 0.5lf;
const double M_EXP_C3 = 0.16666666666666666lf;
const double M_EXP_C4 = 0.041666666666666664lf;
const double M_EXP_C5 = 0.008333333333333333lf;
const double M_EXP_C6 = 0.001388888888888889lf;
const double M_EXP_C7 = 0.0001984126984126984lf;
const double M_EXP_C8 = 2.48015873015873e-05lf;
const double M_EXP_C9 = 2.7557319223985893e-06lf;
const double M_EXP_C10 = 2.755731922398589e-07lf;
const double M_EXP_C11 = 2.505210838544172e-08lf;
const double M_EXP_C12 = 2.08767569878681e-09lf;
const double M_EXP_C13 = 1.6059043836821613e-10lf;
const double M_EXP_C14 = 1.1470745597729725e-11lf;
const double M_2O3_HI = 0.6666666666666666lf;
const double M_2O3_LO = 3.700743415417188e-17lf;
const double M_LOG_R0 = 0.4lf;
const double M_LOG_R1 = 0.2857142857142857lf;
const double M_LOG_R2 = 0.2222222222222222lf;
const double M_LOG_R3 = 0.18181818181818182lf;
const double M_LOG_R4 = 0.15384615384615385lf;
const double M_LOG_R5 = 0.13333333333333333lf;
const double M_LOG_R6 = 0.11764705882352941lf;
const double M_LOG_R7 = 0.10526315789473684lf;
const double M_LOG_R8 = 0.09523809523809523lf;
const double M_LOG_R9 = 0.08695652173913043lf;
const double M_LOG_R10 = 0.08lf;
const double M_LOG_R11 = 0.07407407407407407lf;
const double M_LOG_R12 = 0.06896551724137931lf;
const double M_SIN_C3 = -0.16666666666666666lf;
const double M_SIN_C5 = 0.008333333333333333lf;
const double M_SIN_C7 = -0.0001984126984126984lf;
const double M_SIN_C9 = 2.7557319223985893e-06lf;
const double M_SIN_C11 = -2.505210838544172e-08lf;
const double M_SIN_C13 = 1.6059043836821613e-10lf;
const double M_SIN_C15 = -7.647163731819816e-13lf;
const double M_SIN_C17 = 2.8114572543455206e-15lf;
const double M_SIN_C19 = -8.22063524662433e-18lf;
const double M_COS_C4 = 0.041666666666666664lf;
const double M_COS_C6 = -0.001388888888888889lf;
const double M_COS_C8 = 2.48015873015873e-05lf;
const double M_COS_C10 = -2.755731922398589e-07lf;
const double M_COS_C12 = 2.08767569878681e-09lf;
const double M_COS_C14 = -1.1470745597729725e-11lf;
const double M_COS_C16 = 4.779477332387385e-14lf;
const double M_COS_C18 = -1.5619206968586225e-16lf;
const double M_COS_C20 = 4.110317623312165e-19lf;
const double M_ATAN_TH[17] = double[](
    0.0lf, 0.06241880999595735lf, 0.12435499454676144lf,
    0.18534794999569476lf, 0.24497866312686414lf, 0.3028848683749714lf,
    0.35877067027057225lf, 0.4124104415973873lf, 0.4636476090008061lf,
    0.5123894603107377lf, 0.5585993153435624lf, 0.6022873461349642lf,
    0.6435011087932844lf, 0.6823165548747481lf, 0.7188299996216245lf,
    0.7531512809621944lf, 0.7853981633974483lf
);
const double M_ATAN_TL[17] = double[](
    0.0lf, -1.5490756308295046e-18lf, -3.1253241424539383e-18lf,
    4.180692268843079e-18lf, 1.0698755618734451e-17lf, -1.1010827903001369e-17lf,
    -2.4623815582638635e-17lf, -1.587652227770689e-17lf, 2.2698777452961687e-17lf,
    -2.5462781472855804e-17lf, -5.4556305485916264e-18lf, 2.950430737228402e-17lf,
    1.5834785051444286e-17lf, 6.943223671560008e-18lf, -2.1478388444456983e-17lf,
    -2.4256934659182068e-17lf, 3.061616997868383e-17lf
);
const double M_ATAN_C3 = -0.3333333333333333lf;
const double M_ATAN_C5 = 0.2lf;
const double M_ATAN_C7 = -0.14285714285714285lf;
const double M_ATAN_C9 = 0.1111111111111111lf;
const double M_ATAN_C11 = -0.09090909090909091lf;
const double M_ATAN_C13 = 0.07692307692307693lf;
const double M_ATAN_C15 = -0.06666666666666667lf;
const double M_ATAN_C17 = 0.058823529411764705lf;
const double M_ERF_A0_HI = 1.1283791670955126lf;
const double M_ERF_A0_LO = 1.533545961316588e-17lf;
const double M_ERF_A1_HI = -0.37612638903183754lf;
const double M_ERF_A1_LO = 1.3391897206030649e-17lf;
const double M_ERF_A2 = 0.11283791670955126lf;
const double M_ERF_A3 = -0.026866170645131252lf;
const double M_ERF_A4 = 0.005223977625442188lf;
const double M_ERF_A5 = -0.0008548327023450853lf;
const double M_ERF_A6 = 0.00012055332981789664lf;
const double M_ERF_A7 = -1.492565035840625e-05lf;
const double M_ERF_A8 = 1.6462114365889248e-06lf;
const double M_ERF_A9 = -1.6365844691234924e-07lf;
const double M_ERF_A10 = 1.4807192815879218e-08lf;
const double M_ERF_A11 = -1.2290555301717928e-09lf;
const double M_ERF_A12 = 9.422759064650411e-11lf;
const double M_ERF_A13 = -6.7113668551641105e-12lf;
const double M_ERF_A14 = 4.4632242632864775e-13lf;
const double M_ERF_A15 = -2.7835162072109215e-14lf;
const double M_ERF_A16 = 1.6342614095367152e-15lf;
const double M_ERF_A17 = -9.063970842808673e-17lf;
const double M_ERF_A18 = 4.763348040515068e-18lf;
const double M_ERF_A19 = -2.3784598852774293e-19lf;
const double M_ERF_A20 = 1.131218725924631e-20lf;
const double M_ERF_A21 = -5.136209054585811e-22lf;
const double M_ERF_A22 = 2.2308786802746453e-23lf;
const double M_EINV_A[10] = double[](0.8862269254525995lf, 0.23201366666134357lf, 0.12755615867922887lf, 0.08655297125194032lf, 0.06493809958401431lf, 0.052044454944537764lf, 0.040096972014575794lf, 0.050988924295378435lf, -0.012941905816731542lf, 0.09624460850630183lf);
const double M_EINV_B[12] = double[](1.3170361393766326lf, 1.0455564698076507lf, 0.012897665690245648lf, -0.018434345660584564lf, 0.012896172498159192lf, -0.007175954427409959lf, 0.0033988546611673502lf, -0.001392922728923344lf, 0.0005376992162731673lf, -0.00012517641594153293lf, -0.00011115946893681395lf, 8.410008216486494e-05lf);
const double M_EINV_B_MID = 1.665lf;
const double M_EINV_C[12] = double[](4.060542731987096lf, 1.0294114729225692lf, -0.0038619718638563103lf, 0.0004498050031740364lf, -2.9791547009617364e-05lf, -6.117920306875844e-06lf, 3.834136176197494e-06lf, -1.2857812753370858e-06lf, 2.9256041976317023e-07lf, -7.906951006463275e-08lf, 3.961749023513891e-08lf, -9.07633571450692e-09lf);
const double M_EINV_C_MID = 4.3lf;
const double M_CBRT_A[7] = double[](0.5733512975185816lf, 0.560358238192041lf, -0.16567286530702457lf, 0.03747290165968864lf, -0.00515463512854962lf, 0.000383717666560233lf, -1.1824374463098317e-05lf);

// ---------------------------------------------------------------------------------------------
// Bit-level helpers. Classification and scaling are done on the integer bits so that subnormal
// inputs and outputs are exact even where the driver flushes float denormals (DAZ/FTZ).
// ---------------------------------------------------------------------------------------------
const int64_t M_ABSM = 0x7fffffffffffffffl;
const int64_t M_SIGNBIT = int64_t(0x8000000000000000ul);
const int64_t M_INFB = 0x7ff0000000000000l;
const int64_t M_FRACM = 0x000fffffffffffffl;
const int64_t M_HIDDEN = 0x0010000000000000l;
const int64_t M_ONEB = 0x3ff0000000000000l;

double m_inf() { return int64BitsToDouble(M_INFB); }
double m_nan() { return int64BitsToDouble(0x7ff8000000000000l); }
double m_with_sign(double y, bool neg) {
    int64_t b = doubleBitsToInt64(y) & M_ABSM;
    return int64BitsToDouble(neg ? (b | M_SIGNBIT) : b);
}
double m_neg(double y) { return int64BitsToDouble(doubleBitsToInt64(y) ^ M_SIGNBIT); }
double m_fabs(double y) { return int64BitsToDouble(doubleBitsToInt64(y) & M_ABSM); }
// 2^k for -1022 <= k <= 1023
double m_pow2(int k) { return int64BitsToDouble(int64_t(k + 1023) << 52); }

// x = m * 2^e with m in [1,2); x positive, finite, nonzero (subnormals normalized exactly)
dvec2 m_unpack(double x) {
    int64_t b = doubleBitsToInt64(x) & M_ABSM;
    int e = int(b >> 52);
    if (e == 0) {
        precise double f = double(b);
        int64_t fb = doubleBitsToInt64(f);
        int fe = int(fb >> 52);
        return dvec2(int64BitsToDouble((fb & M_FRACM) | M_ONEB), double(fe - 1023 - 1074));
    }
    return dvec2(int64BitsToDouble((b & M_FRACM) | M_ONEB), double(e - 1023));
}

// (hi + lo) * 2^k rounded to nearest (ties by lo, then even), hi normal or zero, |lo| <= ulp(hi)/2-ish.
// Overflow gives +-Inf; subnormal results are built from the integer mantissa.
double m_scale_dd(double hi, double lo, int k) {
    precise double y = hi + lo;
    precise double rem = lo - (y - hi);
    int64_t b = doubleBitsToInt64(y);
    int64_t sgn = b & M_SIGNBIT;
    int64_t ab = b & M_ABSM;
    if (ab == 0l) return y;
    int ne = int(ab >> 52) + k;
    if (ne >= 2047) return int64BitsToDouble(sgn | M_INFB);
    if (ne >= 1) return int64BitsToDouble(sgn | (int64_t(ne) << 52) | (ab & M_FRACM));
    int sh = 1 - ne;
    if (sh > 54) return int64BitsToDouble(sgn);
    int64_t m = (ab & M_FRACM) | M_HIDDEN;
    int64_t q = m >> sh;
    int64_t rb = m - (q << sh);
    int64_t hlf = int64_t(1) << (sh - 1);
    bool up = rb > hlf;
    if (rb == hlf) {
        if (rem == 0.0lf) up = (q & 1l) == 1l;
        else up = (rem > 0.0lf) == (sgn == 0l);
    }
    if (up) q = q + 1l;
    return int64BitsToDouble(sgn | q);
}

// ---------------------------------------------------------------------------------------------
// Error-free transformations and double-double arithmetic (no fma anywhere).
// ---------------------------------------------------------------------------------------------
dvec2 m_two_sum(double a, double b) {
    precise double s = a + b;
    precise double bb = s - a;
    precise double e = (a - (s - bb)) + (b - bb);
    return dvec2(s, e);
}
dvec2 m_fast_two_sum(double a, double b) {
    precise double s = a + b;
    precise double e = b - (s - a);
    return dvec2(s, e);
}
dvec2 m_split(double a) {
    precise double t = 134217729.0lf * a;
    precise double hi = t - (t - a);
    precise double lo = a - hi;
    return dvec2(hi, lo);
}
dvec2 m_two_prod(double a, double b) {
    precise double p = a * b;
    dvec2 as = m_split(a);
    dvec2 bs = m_split(b);
    precise double e = (((as.x * bs.x - p) + as.x * bs.y) + as.y * bs.x) + as.y * bs.y;
    return dvec2(p, e);
}
dvec2 m_dd_add(dvec2 a, dvec2 b) {
    dvec2 s = m_two_sum(a.x, b.x);
    precise double e = s.y + (a.y + b.y);
    return m_two_sum(s.x, e);
}
dvec2 m_dd_add_d(dvec2 a, double b) {
    dvec2 s = m_two_sum(a.x, b);
    precise double e = s.y + a.y;
    return m_two_sum(s.x, e);
}
dvec2 m_dd_neg(dvec2 a) { return dvec2(-a.x, -a.y); }
dvec2 m_dd_mul(dvec2 a, dvec2 b) {
    dvec2 p = m_two_prod(a.x, b.x);
    precise double e = p.y + (a.x * b.y + a.y * b.x);
    return m_fast_two_sum(p.x, e);
}
dvec2 m_dd_mul_d(dvec2 a, double b) {
    dvec2 p = m_two_prod(a.x, b);
    precise double e = p.y + a.y * b;
    return m_fast_two_sum(p.x, e);
}
dvec2 m_dd_div(dvec2 a, dvec2 b) {
    precise double q1 = a.x / b.x;
    dvec2 p = m_two_prod(q1, b.x);
    precise double r = (((a.x - p.x) - p.y) + a.y) - q1 * b.y;
    precise double q2 = r / b.x;
    return m_fast_two_sum(q1, q2);
}
dvec2 m_dd_sqrt(dvec2 a) {
    precise double s = sqrt(a.x);
    dvec2 p = m_two_prod(s, s);
    precise double r = ((a.x - p.x) - p.y) + a.y;
    precise double s2 = 2.0lf * s;
    precise double c = r / s2;
    return m_fast_two_sum(s, c);
}
double m_dd_round(dvec2 a) { precise double r = a.x + a.y; return r; }

// ---------------------------------------------------------------------------------------------
// exp: Cody-Waite reduction z = k ln2 + r (ln2 in 42+53 bits, k*ln2_hi exact), |r| <= ~0.347,
// exp(r) = 1 + r + r^2 (1/2! + ... + r^12/14!) (Taylor; truncation < 2^-63), kept as s + t.
// Returns (s, t, k): exp(zh + zl) ~= (s + t) * 2^k, s in [0.70, 1.42].
// ---------------------------------------------------------------------------------------------
dvec3 m_exp_core(double zh, double zl) {
    precise double kf = floor(zh * M_INV_LN2 + 0.5lf);
    precise double rh = zh - kf * M_LN2_C1;
    precise double rl = zl - kf * M_LN2_C2;
    dvec2 rr = m_two_sum(rh, rl);
    precise double r = rr.x;
    precise double p = r * r * (M_EXP_C2 + r * (M_EXP_C3 + r * (M_EXP_C4 + r * (M_EXP_C5 + r * (M_EXP_C6
        + r * (M_EXP_C7 + r * (M_EXP_C8 + r * (M_EXP_C9 + r * (M_EXP_C10 + r * (M_EXP_C11 + r * (M_EXP_C12
        + r * (M_EXP_C13 + r * M_EXP_C14))))))))))));
    dvec2 se = m_fast_two_sum(1.0lf, r);
    precise double t = se.y + ((rr.y + rr.y * r) + p);
    return dvec3(se.x, t, kf);
}

double m_exp(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab >= M_INFB) {
        if (ab > M_INFB) return x;
        return b < 0l ? 0.0lf : x;
    }
    if (ab < 0x3c90000000000000l) return 1.0lf;
    if (x > 709.8lf) return m_inf();
    if (x < -745.2lf) return 0.0lf;
    dvec3 c = m_exp_core(x, 0.0lf);
    return m_scale_dd(c.x, c.y, int(c.z));
}

// exp(x) rounded to f32 (the f32 value as a double) = nx_round_f32(m_exp(x)), cheaper where the
// result is a normal f32 away from a rounding boundary. The same reduction, Taylor to r^11 in
// plain double (truncation < 6.4e-15, rounding a few 2^-53): e = exp(r) within 2^-46 relative.
// e's f32 rounding is decided by the 29 bits below the f32 significand unless they lie within
// 2^12 f64 ulps (>= 2^-41 relative) of the midpoint 2^28; there, and outside (-87, 88.5) (f32
// subnormals, overflow, NaN), m_exp decides. Elsewhere the exact value, m_exp's (within 1 ulp)
// and libm's all round to the same f32, so the bits are m_exp's (tests/unary_f32.rs compares both
// paths; its ignored test does every f32).
double m_exp_f32(double x) {
    if (!(x > -87.0lf && x < 88.5lf)) return nx_round_f32(m_exp(x));
    precise double kf = floor(x * M_INV_LN2 + 0.5lf);
    precise double rh = x - kf * M_LN2_C1;
    precise double r = rh - kf * M_LN2_C2;
    precise double q = 1.0lf + r * (M_EXP_C2 + r * (M_EXP_C3 + r * (M_EXP_C4 + r * (M_EXP_C5 + r * (M_EXP_C6
        + r * (M_EXP_C7 + r * (M_EXP_C8 + r * (M_EXP_C9 + r * (M_EXP_C10 + r * M_EXP_C11)))))))));
    precise double p = r * q;
    precise double e = 1.0lf + p;
    int64_t b = doubleBitsToInt64(e);
    int64_t off_mid = (b & 0x1FFFFFFFl) - 0x10000000l;
    if (off_mid <= 0x1000l && off_mid >= -0x1000l) return nx_round_f32(m_exp(x));
    // rounded to 24 significant bits (a carry runs into the exponent), then times 2^k: a normal
    // f32 (x > -87 keeps it above 2^-126, x < 88.5 below the largest f32)
    int64_t rounded = (b + 0x10000000l) & ~0x1FFFFFFFl;
    return int64BitsToDouble(rounded + (int64_t(kf) << 52));
}

// expm1 as a double-double for 2^-54 <= |x| <= 40
dvec2 m_expm1_dd(double x) {
    dvec3 c = m_exp_core(x, 0.0lf);
    precise double sc = m_pow2(int(c.z));
    precise double u = c.x * sc;
    precise double v = c.y * sc;
    dvec2 a = m_two_sum(u, -1.0lf);
    precise double lo = a.y + v;
    return m_two_sum(a.x, lo);
}

double m_expm1(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab < 0x3c90000000000000l) return x;
    if (x > 40.0lf) return m_exp(x);
    if (x < -40.0lf) return -1.0lf;
    return m_dd_round(m_expm1_dd(x));
}

// ---------------------------------------------------------------------------------------------
// log: x = 2^e m, m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f) (double-double),
// log m = 2 atanh(s) = 2s + s^3 (2/3 + s^2 R(s^2)) (|s| < 0.1716, series to s^29),
// the s^3 term in double-double. Result double-double with relative error ~2^-70. No tables
// (lavapipe turns indirect reads of constant arrays into long if-ladders).
// ---------------------------------------------------------------------------------------------
// R(z) = 2/5 + z (2/7 + ... + z 2/29) of log m = 2s + s^3 (2/3 + z R(z)), z = s^2 (plain double)
double m_log_series_tail(double z) {
    precise double R = M_LOG_R0 + z * (M_LOG_R1 + z * (M_LOG_R2 + z * (M_LOG_R3 + z * (M_LOG_R4
        + z * (M_LOG_R5 + z * (M_LOG_R6 + z * (M_LOG_R7 + z * (M_LOG_R8 + z * (M_LOG_R9
        + z * (M_LOG_R10 + z * (M_LOG_R11 + z * M_LOG_R12)))))))))));
    return R;
}
dvec2 m_log_dd(double x) {
    dvec2 u = m_unpack(x);
    precise double m = u.x;
    int e = int(u.y);
    if (m > 1.4142135623730951lf) { m = m * 0.5lf; e = e + 1; }
    precise double f = m - 1.0lf;
    dvec2 den = m_two_sum(2.0lf, f);
    dvec2 s = m_dd_div(dvec2(f, 0.0lf), den);
    precise double sh = s.x;
    precise double z = sh * sh;
    precise double R = m_log_series_tail(z);
    precise double zR = z * R;
    dvec2 s2 = m_dd_mul(s, s);
    dvec2 s3 = m_dd_mul(s2, s);
    dvec2 inner = m_dd_add_d(dvec2(M_2O3_HI, M_2O3_LO), zR);
    dvec2 T = m_dd_mul(s3, inner);
    precise double s2h = 2.0lf * s.x;
    precise double s2l = 2.0lf * s.y;
    dvec2 lm = m_dd_add(dvec2(s2h, s2l), T);
    precise double fe = double(e);
    precise double A = fe * M_LN2_C1;
    dvec2 a = m_two_sum(A, lm.x);
    precise double lo = (a.y + lm.y) + fe * M_LN2_C2;
    return m_two_sum(a.x, lo);
}
// log of a positive double-double
dvec2 m_log_dd2(dvec2 v) {
    dvec2 l = m_log_dd(v.x);
    precise double c = v.y / v.x;
    return m_dd_add_d(l, c);
}
// log1p as double-double, x > -1, x finite
dvec2 m_log1p_dd(double x) {
    dvec2 u = m_two_sum(1.0lf, x);
    return m_log_dd2(u);
}

double m_log(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab == 0l) return -m_inf();
    if (b < 0l) return m_nan();
    if (ab == M_INFB) return x;
    return m_dd_round(m_log_dd(x));
}
double m_log2(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab == 0l) return -m_inf();
    if (b < 0l) return m_nan();
    if (ab == M_INFB) return x;
    return m_dd_round(m_dd_mul(m_log_dd(x), dvec2(M_INV_LN2_HI, M_INV_LN2_LO)));
}
double m_log10(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab == 0l) return -m_inf();
    if (b < 0l) return m_nan();
    if (ab == M_INFB) return x;
    return m_dd_round(m_dd_mul(m_log_dd(x), dvec2(M_INV_LN10_HI, M_INV_LN10_LO)));
}
double m_log1p(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab < 0x3c90000000000000l) return x;
    if (b == int64_t(0xbff0000000000000ul)) return -m_inf();
    if (x < -1.0lf) return m_nan();
    if (ab == M_INFB) return x;
    return m_dd_round(m_log1p_dd(x));
}

// ---------------------------------------------------------------------------------------------
// Trigonometric argument reduction: |x| <= 823549: 4-part Cody-Waite (three 33-bit parts of pi/2,
// products with k < 2^20 exact), result double-double. Larger: Payne-Hanek with the bits of 2/pi
// (32-bit words, 224-bit window, integer multiply), fraction kept to 128 bits.
// Returns (rh, rl, q) with |x| = q pi/2 + r (mod 2 pi), q in 0..3, |r| <= ~pi/4.
// ---------------------------------------------------------------------------------------------
uint m_getbits(uint R[9], int pos) {
    int wi = pos >> 5;
    int sh = pos & 31;
    uint lo = R[wi] >> sh;
    uint hi = 0u;
    if (sh != 0 && wi < 8) hi = R[wi + 1] << (32 - sh);
    return lo | hi;
}

dvec3 m_rem_pio2(double ax) {
    if (ax <= 0.78539816339744828lf) return dvec3(ax, 0.0lf, 0.0lf);
    if (ax <= 823549.0lf) {
        precise double kf = floor(ax * M_2OPI + 0.5lf);
        precise double t1 = ax - kf * M_PIO2_1;
        precise double p2 = kf * M_PIO2_2;
        dvec2 s = m_two_sum(t1, -p2);
        precise double p3 = kf * M_PIO2_3;
        dvec2 s2 = m_two_sum(s.x, -p3);
        precise double lo = (s.y + s2.y) - kf * M_PIO2_4;
        dvec2 r = m_two_sum(s2.x, lo);
        precise double q = kf - 4.0lf * floor(kf * 0.25lf);
        return dvec3(r.x, r.y, q);
    }
    int64_t b = doubleBitsToInt64(ax);
    int ex = int(b >> 52) - 1075;
    int64_t M = (b & M_FRACM) | M_HIDDEN;
    int i0 = ex >= 2 ? ((ex - 2) >> 5) : 0;
    uint mlo = uint(M & 0xffffffffl);
    uint mhi = uint(M >> 32);
    uint A[8];
    uint B[8];
    uint64_t c = 0ul;
    for (int j = 0; j < 7; j++) {
        uint64_t w = uint64_t(M_2OPI_BITS[i0 + 6 - j]);
        uint64_t t = w * uint64_t(mlo) + c;
        A[j] = uint(t & 0xfffffffful);
        c = t >> 32;
    }
    A[7] = uint(c);
    c = 0ul;
    for (int j = 0; j < 7; j++) {
        uint64_t w = uint64_t(M_2OPI_BITS[i0 + 6 - j]);
        uint64_t t = w * uint64_t(mhi) + c;
        B[j] = uint(t & 0xfffffffful);
        c = t >> 32;
    }
    B[7] = uint(c);
    uint R[9];
    R[0] = A[0];
    c = 0ul;
    for (int j = 1; j < 8; j++) {
        uint64_t t = uint64_t(A[j]) + uint64_t(B[j - 1]) + c;
        R[j] = uint(t & 0xfffffffful);
        c = t >> 32;
    }
    R[8] = uint(uint64_t(B[7]) + c);
    int s = 224 + 32 * i0 - ex;
    uint q = m_getbits(R, s) & 3u;
    uint f0 = m_getbits(R, s - 32);
    uint f1 = m_getbits(R, s - 64);
    uint f2 = m_getbits(R, s - 96);
    uint f3 = m_getbits(R, s - 128);
    bool neg = (f0 & 0x80000000u) != 0u;
    if (neg) {
        q = (q + 1u) & 3u;
        // 128-bit two's complement negation
        f0 = ~f0; f1 = ~f1; f2 = ~f2; f3 = ~f3;
        uint64_t t = uint64_t(f3) + 1ul;
        f3 = uint(t & 0xfffffffful);
        t = uint64_t(f2) + (t >> 32);
        f2 = uint(t & 0xfffffffful);
        t = uint64_t(f1) + (t >> 32);
        f1 = uint(t & 0xfffffffful);
        t = uint64_t(f0) + (t >> 32);
        f0 = uint(t & 0xfffffffful);
    }
    precise double d0 = double(f0) * 2.3283064365386963e-10lf;
    precise double d1 = double(f1) * 5.421010862427522e-20lf;
    precise double d2 = double(f2) * 1.2621774483536189e-29lf;
    precise double d3 = double(f3) * 2.938735877055719e-39lf;
    dvec2 f = m_two_sum(d0, d1);
    f = m_dd_add_d(f, d2);
    f = m_dd_add_d(f, d3);
    dvec2 r = m_dd_mul(f, dvec2(M_PIO2_HI, M_PIO2_LO));
    if (neg) r = m_dd_neg(r);
    return dvec3(r.x, r.y, double(q));
}

// sin and cos of a reduced double-double argument, |r| <= ~pi/4 (Taylor to r^19 / r^20)
dvec2 m_sin_dd(double rh, double rl) {
    precise double z = rh * rh;
    precise double ps = z * (M_SIN_C3 + z * (M_SIN_C5 + z * (M_SIN_C7 + z * (M_SIN_C9 + z * (M_SIN_C11
        + z * (M_SIN_C13 + z * (M_SIN_C15 + z * (M_SIN_C17 + z * M_SIN_C19))))))));
    precise double tail = (rl - 0.5lf * z * rl) + rh * ps;
    return m_fast_two_sum(rh, tail);
}
dvec2 m_cos_dd(double rh, double rl) {
    precise double z = rh * rh;
    dvec2 h = m_two_prod(rh, rh);
    precise double hh = 0.5lf * h.x;
    precise double hl = 0.5lf * h.y;
    dvec2 w = m_fast_two_sum(1.0lf, -hh);
    precise double pc = z * z * (M_COS_C4 + z * (M_COS_C6 + z * (M_COS_C8 + z * (M_COS_C10 + z * (M_COS_C12
        + z * (M_COS_C14 + z * (M_COS_C16 + z * (M_COS_C18 + z * M_COS_C20))))))));
    precise double tail = ((w.y - hl) + pc) - rh * rl;
    return m_fast_two_sum(w.x, tail);
}

double m_sin(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab == M_INFB) return m_nan();
    if (ab < 0x3e50000000000000l) return x;
    dvec3 rd = m_rem_pio2(int64BitsToDouble(ab));
    int q = int(rd.z);
    dvec2 v = (q & 1) == 0 ? m_sin_dd(rd.x, rd.y) : m_cos_dd(rd.x, rd.y);
    precise double r = v.x + v.y;
    bool neg = ((q & 2) != 0) != (b < 0l);
    return neg ? -r : r;
}
double m_cos(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab == M_INFB) return m_nan();
    if (ab < 0x3e40000000000000l) return 1.0lf;
    dvec3 rd = m_rem_pio2(int64BitsToDouble(ab));
    int q = int(rd.z);
    dvec2 v = (q & 1) == 0 ? m_cos_dd(rd.x, rd.y) : m_sin_dd(rd.x, rd.y);
    precise double r = v.x + v.y;
    bool neg = q == 1 || q == 2;
    return neg ? -r : r;
}
double m_tan(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab == M_INFB) return m_nan();
    if (ab < 0x3e40000000000000l) return x;
    dvec3 rd = m_rem_pio2(int64BitsToDouble(ab));
    int q = int(rd.z);
    dvec2 s = m_sin_dd(rd.x, rd.y);
    dvec2 c = m_cos_dd(rd.x, rd.y);
    dvec2 t = (q & 1) == 0 ? m_dd_div(s, c) : m_dd_neg(m_dd_div(c, s));
    precise double r = t.x + t.y;
    return b < 0l ? -r : r;
}

// ---------------------------------------------------------------------------------------------
// atan family: atan(v), v in [0,1]: c = i/16 nearest, atan v = atan c + atan((v-c)/(1+vc)),
// |t| <= 1/32, Taylor to t^17; all in double-double. atan2_pos covers y,x > 0.
// ---------------------------------------------------------------------------------------------
dvec2 m_atan_unit_dd(dvec2 v) {
    precise double vi = v.x * 16.0lf + 0.5lf;
    int i = int(vi);
    precise double c = double(i) * 0.0625lf;
    precise double n0 = v.x - c;
    dvec2 num = m_two_sum(n0, v.y);
    dvec2 vc = m_two_prod(v.x, c);
    precise double vcl = vc.y + v.y * c;
    dvec2 den = m_two_sum(1.0lf, vc.x);
    den = m_fast_two_sum(den.x, den.y + vcl);
    dvec2 t = m_dd_div(num, den);
    precise double th = t.x;
    precise double z = th * th;
    precise double poly = th * z * (M_ATAN_C3 + z * (M_ATAN_C5 + z * (M_ATAN_C7 + z * (M_ATAN_C9
        + z * (M_ATAN_C11 + z * (M_ATAN_C13 + z * (M_ATAN_C15 + z * M_ATAN_C17)))))));
    precise double tl = t.y - t.y * z;
    dvec2 s = m_two_sum(M_ATAN_TH[i], th);
    precise double lo = s.y + ((M_ATAN_TL[i] + tl) + poly);
    return m_two_sum(s.x, lo);
}
dvec2 m_atan2_pos_dd(dvec2 y, dvec2 x) {
    if (y.x <= x.x) return m_atan_unit_dd(m_dd_div(y, x));
    return m_dd_add(dvec2(M_PIO2_HI, M_PIO2_LO), m_dd_neg(m_atan_unit_dd(m_dd_div(x, y))));
}

double m_atan(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab < 0x3e40000000000000l) return x;
    if (ab > 0x43b0000000000000l) return m_with_sign(M_PIO2_HI, b < 0l);
    double a = int64BitsToDouble(ab);
    dvec2 v = m_atan2_pos_dd(dvec2(a, 0.0lf), dvec2(1.0lf, 0.0lf));
    return m_with_sign(m_dd_round(v), b < 0l);
}

double m_asin(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab > M_ONEB) return m_nan();
    if (ab == M_ONEB) return m_with_sign(M_PIO2_HI, b < 0l);
    if (ab < 0x3e40000000000000l) return x;
    double a = int64BitsToDouble(ab);
    dvec2 om = m_two_sum(1.0lf, -a);
    dvec2 op = m_two_sum(1.0lf, a);
    dvec2 s = m_dd_sqrt(m_dd_mul(om, op));
    dvec2 v = m_atan2_pos_dd(dvec2(a, 0.0lf), s);
    return m_with_sign(m_dd_round(v), b < 0l);
}

double m_acos(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab > M_ONEB) return m_nan();
    if (ab == M_ONEB) return b < 0l ? M_PI_HI : 0.0lf;
    if (ab < 0x3c80000000000000l) return M_PIO2_HI;
    double a = int64BitsToDouble(ab);
    dvec2 om = m_two_sum(1.0lf, -a);
    dvec2 op = m_two_sum(1.0lf, a);
    dvec2 s = m_dd_sqrt(m_dd_mul(om, op));
    dvec2 v = m_atan2_pos_dd(s, dvec2(a, 0.0lf));
    if (b < 0l) v = m_dd_add(dvec2(M_PI_HI, M_PI_LO), m_dd_neg(v));
    return m_dd_round(v);
}

double m_atan2(double y, double x) {
    int64_t by = doubleBitsToInt64(y);
    int64_t bx = doubleBitsToInt64(x);
    int64_t ay = by & M_ABSM;
    int64_t ax = bx & M_ABSM;
    if (ay > M_INFB) return y;
    if (ax > M_INFB) return x;
    bool yneg = by < 0l;
    bool xneg = bx < 0l;
    if (ay == 0l) return xneg ? m_with_sign(M_PI_HI, yneg) : y;
    if (ax == 0l) return m_with_sign(M_PIO2_HI, yneg);
    if (ay == M_INFB) {
        if (ax == M_INFB) return m_with_sign(xneg ? 2.356194490192345lf : 0.7853981633974483lf, yneg);
        return m_with_sign(M_PIO2_HI, yneg);
    }
    if (ax == M_INFB) return xneg ? m_with_sign(M_PI_HI, yneg) : m_with_sign(0.0lf, yneg);
    dvec2 uy = m_unpack(int64BitsToDouble(ay));
    dvec2 ux = m_unpack(int64BitsToDouble(ax));
    int d = int(uy.y) - int(ux.y);
    dvec2 v;
    if (d > 60) {
        v = dvec2(M_PIO2_HI, M_PIO2_LO);
    } else if (d < -60) {
        if (xneg) return m_with_sign(M_PI_HI, yneg);
        dvec2 q = m_dd_div(dvec2(uy.x, 0.0lf), dvec2(ux.x, 0.0lf));
        return m_with_sign(m_scale_dd(q.x, q.y, d), yneg);
    } else {
        precise double yy = uy.x * m_pow2(d);
        v = m_atan2_pos_dd(dvec2(yy, 0.0lf), dvec2(ux.x, 0.0lf));
    }
    if (xneg) v = m_dd_add(dvec2(M_PI_HI, M_PI_LO), m_dd_neg(v));
    return m_with_sign(m_dd_round(v), yneg);
}

// ---------------------------------------------------------------------------------------------
// Hyperbolic functions and their inverses (through exp_core / expm1_dd / log_dd in double-double)
// ---------------------------------------------------------------------------------------------
double m_sinh(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab >= M_INFB) return x;
    if (ab < 0x3e30000000000000l) return x;
    double a = int64BitsToDouble(ab);
    double r;
    if (a < 22.0lf) {
        dvec2 em = m_expm1_dd(a);
        dvec2 f = m_dd_div(em, m_dd_add_d(em, 1.0lf));
        dvec2 s = m_dd_add(em, f);
        precise double rr = 0.5lf * (s.x + s.y);
        r = rr;
    } else if (a > 710.5lf) {
        r = m_inf();
    } else {
        dvec3 c = m_exp_core(a, 0.0lf);
        r = m_scale_dd(c.x, c.y, int(c.z) - 1);
    }
    return m_with_sign(r, b < 0l);
}
double m_cosh(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab < 0x3e40000000000000l) return 1.0lf;
    double a = int64BitsToDouble(ab);
    if (a > 710.5lf) return m_inf();
    dvec3 c = m_exp_core(a, 0.0lf);
    if (a >= 22.0lf) return m_scale_dd(c.x, c.y, int(c.z) - 1);
    precise double sc = m_pow2(int(c.z));
    precise double eh = c.x * sc;
    precise double el = c.y * sc;
    dvec2 E = m_fast_two_sum(eh, el);
    dvec2 s = m_dd_add(E, m_dd_div(dvec2(1.0lf, 0.0lf), E));
    precise double r = 0.5lf * (s.x + s.y);
    return r;
}
double m_tanh(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab < 0x3e40000000000000l) return x;
    double a = int64BitsToDouble(ab);
    if (a >= 22.0lf) return m_with_sign(1.0lf, b < 0l);
    precise double a2 = 2.0lf * a;
    dvec2 em = m_expm1_dd(a2);
    dvec2 q = m_dd_div(em, m_dd_add_d(em, 2.0lf));
    return m_with_sign(m_dd_round(q), b < 0l);
}
double m_asinh(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab >= M_INFB) return x;
    if (ab < 0x3e30000000000000l) return x;
    double a = int64BitsToDouble(ab);
    dvec2 l;
    if (a > 268435456.0lf) {
        l = m_dd_add(m_log_dd(a), dvec2(M_LN2_HI, M_LN2_LO));
    } else {
        dvec2 aa = m_two_prod(a, a);
        dvec2 w = m_dd_sqrt(m_dd_add_d(aa, 1.0lf));
        l = m_log_dd2(m_dd_add_d(w, a));
    }
    return m_with_sign(m_dd_round(l), b < 0l);
}
double m_acosh(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (b < M_ONEB) return m_nan();
    if (b == M_ONEB) return 0.0lf;
    if (ab == M_INFB) return x;
    dvec2 l;
    if (x > 268435456.0lf) {
        l = m_dd_add(m_log_dd(x), dvec2(M_LN2_HI, M_LN2_LO));
    } else {
        dvec2 d = m_two_sum(x, -1.0lf);
        dvec2 p = m_two_sum(x, 1.0lf);
        dvec2 w = m_dd_sqrt(m_dd_mul(d, p));
        l = m_log_dd2(m_dd_add_d(w, x));
    }
    return m_dd_round(l);
}
double m_atanh(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab > M_ONEB) return m_nan();
    if (ab == M_ONEB) return m_with_sign(m_inf(), b < 0l);
    if (ab < 0x3e30000000000000l) return x;
    double a = int64BitsToDouble(ab);
    dvec2 l1 = m_log1p_dd(a);
    dvec2 l2 = m_log1p_dd(-a);
    dvec2 d = m_dd_add(l1, m_dd_neg(l2));
    precise double r = 0.5lf * (d.x + d.y);
    return m_with_sign(r, b < 0l);
}

// sigmoid(x) = 1 / (1 + exp(-x)); for x < 0 evaluated as e/(1+e), e = exp(x), with subnormal care
double m_sigmoid(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab < 0x3c80000000000000l) return 0.5lf;
    if (b >= 0l) {
        if (x > 40.0lf) return 1.0lf;
        precise double nx = -x;
        dvec3 c = m_exp_core(nx, 0.0lf);
        precise double sc = m_pow2(int(c.z));
        precise double eh = c.x * sc;
        precise double el = c.y * sc;
        dvec2 den = m_dd_add_d(m_fast_two_sum(eh, el), 1.0lf);
        return m_dd_round(m_dd_div(dvec2(1.0lf, 0.0lf), den));
    }
    if (x < -746.0lf) return 0.0lf;
    dvec3 c = m_exp_core(x, 0.0lf);
    int k = int(c.z);
    if (k < -1000) return m_scale_dd(c.x, c.y, k);
    precise double sc = m_pow2(k);
    precise double eh = c.x * sc;
    precise double el = c.y * sc;
    dvec2 E = m_fast_two_sum(eh, el);
    return m_dd_round(m_dd_div(E, m_dd_add_d(E, 1.0lf)));
}

// ---------------------------------------------------------------------------------------------
// f32 results of expm1, tanh, sigmoid, log and erf, cheaper where the result is a normal f32
// away from a rounding boundary; the same bits as the full functions rounded to f32
// (nx_round_f32(m_tanh(x)), ...), by m_exp_f32's argument: each value below is within about
// 2^-48 relative of the exact one (plain double, each function's bound beside it), and the f32
// rounding is taken from it only where its 29 bits below the f32 significand lie more than
// 2^12 f64 ulps (>= 2^-41 relative) from the midpoint 2^28. There the exact value, the full
// function's (within 1 ulp of it) and this one all round to the same f32; elsewhere (and for
// tiny, huge, NaN or subnormal-result inputs) the full function decides. tests/unary_f32.rs
// compares both paths on strided and edge inputs; its ignored test does every f32.
// ---------------------------------------------------------------------------------------------

// exp(z) = 2^k (1 + p), |z| < 709: returns (p, k), p = expm1(r) = r (1 + r/2! + ... + r^12/13!)
// for the reduced |r| <= 0.347 — relative error of p a few 2^-53 (Taylor truncation < 2^-56),
// so p keeps its relative accuracy for tiny z (k = 0, r = z).
dvec2 m_expm1_parts(double z) {
    precise double kf = floor(z * M_INV_LN2 + 0.5lf);
    precise double rh = z - kf * M_LN2_C1;
    precise double r = rh - kf * M_LN2_C2;
    precise double q = 1.0lf + r * (M_EXP_C2 + r * (M_EXP_C3 + r * (M_EXP_C4 + r * (M_EXP_C5 + r * (M_EXP_C6
        + r * (M_EXP_C7 + r * (M_EXP_C8 + r * (M_EXP_C9 + r * (M_EXP_C10 + r * (M_EXP_C11 + r * (M_EXP_C12
        + r * M_EXP_C13)))))))))));
    precise double p = r * q;
    return dvec2(p, kf);
}

// v (positive, a normal f32 once rounded) rounded to f32, or -1.0 where v lies within 2^12 f64
// ulps of an f32 midpoint (the caller's full function decides there).
double m_round_f32_unless_near_midpoint(double v) {
    int64_t b = doubleBitsToInt64(v);
    int64_t off_mid = (b & 0x1FFFFFFFl) - 0x10000000l;
    if (off_mid <= 0x1000l && off_mid >= -0x1000l) return -1.0lf;
    // to 24 significant bits, to nearest (the midpoint excluded); a carry runs into the exponent
    return int64BitsToDouble((b + 0x10000000l) & ~0x1FFFFFFFl);
}

// expm1(z) in plain double, |z| < 700: (2^k - 1) + 2^k p from m_expm1_parts (one rounding;
// exact for k = 0; for k >= 54 the -1 rounds away, far below the result's ulp), within a few
// 2^-53 relative (the sum cancels at most a factor 1.5: k = 1; k = -1 at most 0.7).
double m_expm1_plain(double z) {
    dvec2 pk = m_expm1_parts(z);
    precise double s = m_pow2(int(pk.y));
    precise double em = (s - 1.0lf) + s * pk.x;
    return em;
}

// expm1(x) rounded to f32 from m_expm1_plain. 2^-120 <= |x| and -17 < x < 88.5 (else m_expm1:
// tiny, NaN, f32 overflow, and x <= -17, near -1's half-ulp point -1 + 2^-25).
double m_expm1_f32(double x) {
    int64_t ab = doubleBitsToInt64(x) & M_ABSM;
    if (!(ab >= 0x3870000000000000l && x > -17.0lf && x < 88.5lf)) return nx_round_f32(m_expm1(x));
    precise double em = m_expm1_plain(x);
    double r = m_round_f32_unless_near_midpoint(m_fabs(em));
    if (r < 0.0lf) return nx_round_f32(m_expm1(x));
    return m_with_sign(r, em < 0.0lf);
}

// tanh(x) rounded to f32: tanh|x| = em / (em + 2), em = expm1(2|x|) from m_expm1_plain, each
// step a few 2^-53 relative. 2^-120 <= |x| < 9.5 (below: the
// f32 result may be subnormal or zero; NaN); |x| >= 9.5: tanh|x| > 1 - 2^-26.4, above the
// midpoint 1 - 2^-25 by far more than m_tanh's error, so the f32 result is +-1.
double m_tanh_f32(double x) {
    int64_t bx = doubleBitsToInt64(x);
    int64_t ab = bx & M_ABSM;
    double a = int64BitsToDouble(ab);
    if (ab <= M_INFB && a >= 9.5lf) return m_with_sign(1.0lf, bx < 0l);
    if (!(ab >= 0x3870000000000000l && a < 9.5lf)) return nx_round_f32(m_tanh(x));
    precise double em = m_expm1_plain(2.0lf * a);
    precise double t = em / (em + 2.0lf);
    double r = m_round_f32_unless_near_midpoint(t);
    if (r < 0.0lf) return nx_round_f32(m_tanh(x));
    return m_with_sign(r, bx < 0l);
}

// sigmoid(x) rounded to f32: with e = exp(-|x|) = 2^k (1 + p), 1 / (1 + e) for x >= 0 and
// e / (1 + e) for x < 0. -87 < x < 18 (x <= -87: m_sigmoid, where the f32 result nears the
// subnormals — sigmoid(-87) ~ 1.65e-38 — and for NaN); x >= 18: sigmoid > 1 - 2^-25.9, above
// the midpoint 1 - 2^-25 by far more than m_sigmoid's error: 1.
double m_sigmoid_f32(double x) {
    if (x >= 18.0lf) return 1.0lf;
    if (!(x > -87.0lf)) return nx_round_f32(m_sigmoid(x));
    dvec2 pk = m_expm1_parts(-m_fabs(x));
    precise double e = (1.0lf + pk.x) * m_pow2(int(pk.y));
    precise double d = 1.0lf + e;
    precise double num = x < 0.0lf ? e : 1.0lf;
    precise double v = num / d;
    double r = m_round_f32_unless_near_midpoint(v);
    return r < 0.0lf ? nx_round_f32(m_sigmoid(x)) : r;
}

// log(x) rounded to f32: m_log_dd's reduction and series in plain double — x = 2^e m, m in
// [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f), log m = 2s + s^3 (2/3 + z R(z)),
// z = s^2 (|s| < 0.1716: truncation below 2^-75) — then e ln2 (e C1 exact) + log m: within
// about 2^-50 relative (|log x| >= 0.346 |e| where e != 0, so the last sum cancels at most a
// factor 2). Normal positive finite x (else: zero, negative, subnormal, Inf, NaN), and |log x|
// >= 2^-125 (log 1 = +0 exactly; below, a non-f32 input's result may be a subnormal f32).
double m_log_f32(double x) {
    int64_t bx = doubleBitsToInt64(x);
    if (!(bx >= 0x0010000000000000l && bx < M_INFB)) return nx_round_f32(m_log(x));
    dvec2 u = m_unpack(x);
    precise double m = u.x;
    int e = int(u.y);
    if (m > 1.4142135623730951lf) { m = m * 0.5lf; e = e + 1; }
    precise double f = m - 1.0lf;
    precise double s = f / (2.0lf + f);
    precise double z = s * s;
    precise double R = m_log_series_tail(z);
    precise double lm = 2.0lf * s + s * (z * (M_2O3_HI + z * R));
    precise double fe = double(e);
    precise double v = fe * M_LN2_C1 + (lm + fe * M_LN2_C2);
    if (v == 0.0lf) return 0.0lf;
    double av = m_fabs(v);
    if (av < 2.350988701644575e-38lf) return nx_round_f32(m_log(x));
    double r = m_round_f32_unless_near_midpoint(av);
    if (r < 0.0lf) return nx_round_f32(m_log(x));
    return m_with_sign(r, v < 0.0lf);
}

// ---------------------------------------------------------------------------------------------
// erf / erfc: |x| < 1: Taylor series of erf (to x^45), tail terms in double, last steps double-double.
// erfc(x), 0.5 <= x < 27.5: exp(-x^2) * erfcx(x), erfcx piecewise degree-15 polynomials in
// (x - mid) on 18 intervals (Chebyshev fits, rel. error < 5e-20), x^2 exact by Dekker product.
// ---------------------------------------------------------------------------------------------
// The tail A2 + z (A3 + ... + z A22) of erf's Taylor series in z = x^2 (plain double)
double m_erf_series_tail(double z) {
    precise double P = M_ERF_A2 + z * (M_ERF_A3 + z * (M_ERF_A4 + z * (M_ERF_A5 + z * (M_ERF_A6
        + z * (M_ERF_A7 + z * (M_ERF_A8 + z * (M_ERF_A9 + z * (M_ERF_A10 + z * (M_ERF_A11
        + z * (M_ERF_A12 + z * (M_ERF_A13 + z * (M_ERF_A14 + z * (M_ERF_A15 + z * (M_ERF_A16
        + z * (M_ERF_A17 + z * (M_ERF_A18 + z * (M_ERF_A19 + z * (M_ERF_A20 + z * (M_ERF_A21
        + z * M_ERF_A22)))))))))))))))))));
    return P;
}
dvec2 m_erf_small_dd(double x) {
    dvec2 z = m_two_prod(x, x);
    precise double P = m_erf_series_tail(z.x);
    dvec2 in1 = m_dd_add(dvec2(M_ERF_A1_HI, M_ERF_A1_LO), m_dd_mul_d(z, P));
    dvec2 in2 = m_dd_add(dvec2(M_ERF_A0_HI, M_ERF_A0_LO), m_dd_mul(z, in1));
    return m_dd_mul_d(in2, x);
}
// erfcx(x) = exp(x^2) erfc(x) for 0.5 <= x < 27.5 as (c0h + c0l) + t q: returns (t, q, c0h, c0l)
// (polynomials inline: no indirect reads of constant arrays)
dvec4 m_erfcx_parts(double x) {
    precise double t;
    precise double q;
    double c0h;
    double c0l;
    if (x < 0.75lf) {
        t = x - 0.625lf;
        q = -2.6546646347491735e-06lf;
        q = 8.283992070123788e-06lf + t * q;
        q = -2.4937285796991144e-05lf + t * q;
        q = 7.321147110544137e-05lf + t * q;
        q = -0.00020785294145672184lf + t * q;
        q = 0.000569184798962947lf + t * q;
        q = -0.0014989316374996963lf + t * q;
        q = 0.003782756181395822lf + t * q;
        q = -0.009109414982374347lf + t * q;
        q = 0.020824409090076136lf + t * q;
        q = -0.044898208119606944lf + t * q;
        q = 0.09053460734498123lf + t * q;
        q = -0.16882964988963062lf + t * q;
        q = 0.2865877458709816lf + t * q;
        q = -0.43236181600380946lf + t * q;
        c0h = 0.5568138808733625lf;
        c0l = 2.821567205688007e-17lf;
    } else if (x < 1.0lf) {
        t = x - 0.875lf;
        q = -7.830221152159706e-07lf;
        q = 2.555790120576915e-06lf + t * q;
        q = -8.064298869089891e-06lf + t * q;
        q = 2.4844496141379446e-05lf + t * q;
        q = -7.415790326551459e-05lf + t * q;
        q = 0.00021395736839956804lf + t * q;
        q = -0.0005950811531669351lf + t * q;
        q = 0.0015904828264930568lf + t * q;
        q = -0.004069537662511109lf + t * q;
        q = 0.009922776760813143lf + t * q;
        q = -0.022925811484500114lf + t * q;
        q = 0.0498284153313766lf + t * q;
        q = -0.1009143921262048lf + t * q;
        q = 0.1879569237731824lf + t * q;
        q = -0.3158338964908418lf + t * q;
        c0h = 0.464311583202669lf;
        c0l = -1.851963730288132e-17lf;
    } else if (x < 1.25lf) {
        t = x - 1.125lf;
        q = -2.4327138234335737e-07lf;
        q = 8.302372900087081e-07lf + t * q;
        q = -2.7445618626787054e-06lf + t * q;
        q = 8.86885771005385e-06lf + t * q;
        q = -2.7817441434647436e-05lf + t * q;
        q = 8.450843021969837e-05lf + t * q;
        q = -0.00024806790800622726lf + t * q;
        q = 0.00070161854030844lf + t * q;
        q = -0.0019056264439004623lf + t * q;
        q = 0.004950303910664534lf + t * q;
        q = -0.01223878445314913lf + t * q;
        q = 0.028619544241786244lf + t * q;
        q = -0.06279394840488235lf + t * q;
        q = 0.12788228043906513lf + t * q;
        q = -0.2380584881012718lf + t * q;
        c0h = 0.3956980795529959lf;
        c0l = -5.777675063627393e-18lf;
    } else if (x < 1.5lf) {
        t = x - 1.375lf;
        q = -7.939957942099117e-08lf;
        q = 2.832013988282487e-07lf + t * q;
        q = -9.803004103821306e-07lf + t * q;
        q = 3.3208061286172145e-06lf + t * q;
        q = -1.0938168604798379e-05lf + t * q;
        q = 3.496502571021676e-05lf + t * q;
        q = -0.0001082368363787466lf + t * q;
        q = 0.0003236507762901537lf + t * q;
        q = -0.0009320855811119416lf + t * q;
        q = 0.0025762207792029033lf + t * q;
        q = -0.006804603105295757lf + t * q;
        q = 0.017084991607390333lf + t * q;
        q = -0.0405033712234011lf + t * q;
        q = 0.08986211864695719lf + t * q;
        q = -0.18431546997466777lf + t * q;
        c0h = 0.3432958898621254lf;
        c0l = -1.1924063149125753e-17lf;
    } else if (x < 1.875lf) {
        t = x - 1.6875lf;
        q = -2.1020441628913858e-08lf;
        q = 7.918761363111098e-08lf + t * q;
        q = -2.885219047016882e-07lf + t * q;
        q = 1.0358153678077247e-06lf + t * q;
        q = -3.623477350955186e-06lf + t * q;
        q = 1.2329773591740437e-05lf + t * q;
        q = -4.0735614339355824e-05lf + t * q;
        q = 0.0001303902106285794lf + t * q;
        q = -0.0004033437450237179lf + t * q;
        q = 0.0012022034123278904lf + t * q;
        q = -0.0034404213658858315lf + t * q;
        q = 0.009412321291915434lf + t * q;
        q = -0.024484345594821877lf + t * q;
        q = 0.06014197577509279lf + t * q;
        q = -0.1382161025127019lf + t * q;
        c0h = 0.2933816487652772lf;
        c0l = 1.2539182948894613e-17lf;
    } else if (x < 2.25lf) {
        t = x - 2.0625lf;
        q = -4.634728580241799e-09lf;
        q = 1.8614724731214234e-08lf + t * q;
        q = -7.253968672904094e-08lf + t * q;
        q = 2.788019928046817e-07lf + t * q;
        q = -1.0465699538035111e-06lf + t * q;
        q = 3.831417041063829e-06lf + t * q;
        q = -1.365843147977283e-05lf + t * q;
        q = 4.732759878009113e-05lf + t * q;
        q = -0.00015907611415690004lf + t * q;
        q = 0.0005174048805867966lf + t * q;
        q = -0.0016239139657593024lf + t * q;
        q = 0.004901537196138831lf + t * q;
        q = -0.014169205381434596lf + t * q;
        q = 0.039027060491486514lf + t * q;
        q = -0.10174712033584284lf + t * q;
        c0h = 0.24888049618416236lf;
        c0l = 2.5864040827619825e-18lf;
    } else if (x < 2.75lf) {
        t = x - 2.5lf;
        q = -8.950364154729952e-10lf;
        q = 3.867207001299473e-09lf + t * q;
        q = -1.6168410418195576e-08lf + t * q;
        q = 6.713503562408622e-08lf + t * q;
        q = -2.7295267110477657e-07lf + t * q;
        q = 1.0852229169087498e-06lf + t * q;
        q = -4.214295964845809e-06lf + t * q;
        q = 1.5961853129554565e-05lf + t * q;
        q = -5.886896469374173e-05lf + t * q;
        q = 0.00021101982428460849lf + t * q;
        q = -0.0007335909371391995lf + t * q;
        q = 0.0024670368157014423lf + t * q;
        q = -0.008001569382101607lf + t * q;
        q = 0.024937997086656904lf + t * q;
        q = -0.07434734678979467lf + t * q;
        c0h = 0.2108063640611436lf;
        c0l = -5.627727354481198e-18lf;
    } else if (x < 3.25lf) {
        t = x - 3.0lf;
        q = -1.5545711330973515e-10lf;
        q = 7.2798835754428e-10lf + t * q;
        q = -3.312720939869993e-09lf + t * q;
        q = 1.497685798764271e-08lf + t * q;
        q = -6.646686359625002e-08lf + t * q;
        q = 2.892667196691322e-07lf + t * q;
        q = -1.2333677273005638e-06lf + t * q;
        q = 5.146436560761952e-06lf + t * q;
        q = -2.0989464460189257e-05lf + t * q;
        q = 8.3554139628759e-05lf + t * q;
        q = -0.00032412554449686326lf + t * q;
        q = 0.0012230390523768054lf + t * q;
        q = -0.004479431018372575lf + t * q;
        q = 0.015884371159871336lf + t * q;
        q = -0.05437226000717287lf + t * q;
        c0h = 0.17900115118138996lf;
        c0l = -5.427217824076544e-18lf;
    } else if (x < 4.0lf) {
        t = x - 3.625lf;
        q = -2.113680823460758e-11lf;
        q = 1.0902386175942674e-10lf + t * q;
        q = -5.422782021889784e-10lf + t * q;
        q = 2.712980014026838e-09lf + t * q;
        q = -1.3361881242048407e-08lf + t * q;
        q = 6.471782220395485e-08lf + t * q;
        q = -3.080921641099169e-07lf + t * q;
        q = 1.4404228963573059e-06lf + t * q;
        q = -6.607947756017772e-06lf + t * q;
        q = 2.9715502217313563e-05lf + t * q;
        q = -0.00013084651268319895lf + t * q;
        q = 0.000563465115128099lf + t * q;
        q = -0.0023696773240473664lf + t * q;
        q = 0.009717010529927907lf + t * q;
        q = -0.03877867915705971lf + t * q;
        c0h = 0.15028972247426936lf;
        c0l = -1.371757255640134e-19lf;
    } else if (x < 5.0lf) {
        t = x - 4.5lf;
        q = -1.7208665585767544e-12lf;
        q = 1.0076087322182222e-11lf + t * q;
        q = -5.657676903425503e-11lf + t * q;
        q = 3.2308791138271125e-10lf + t * q;
        q = -1.8223041030800369e-09lf + t * q;
        q = 1.0139606142827147e-08lf + t * q;
        q = -5.565076488582275e-08lf + t * q;
        q = 3.0112634754455143e-07lf + t * q;
        q = -1.605497021304551e-06lf + t * q;
        q = 8.429241997777432e-06lf + t * q;
        q = -4.355082856361761e-05lf + t * q;
        q = 0.000221266454529052lf + t * q;
        q = -0.0011045761167898067lf + t * q;
        q = 0.005413125434612246lf + t * q;
        q = -0.026015928630939815lf + t * q;
        c0h = 0.12248480427384142lf;
        c0l = -6.888828418511396e-18lf;
    } else if (x < 6.0lf) {
        t = x - 5.5lf;
        q = -1.3607682215287646e-13lf;
        q = 9.101116201964687e-13lf + t * q;
        q = -5.893083811756424e-12lf + t * q;
        q = 3.8641291390259616e-11lf + t * q;
        q = -2.5088501529863637e-10lf + t * q;
        q = 1.6117645768494334e-09lf + t * q;
        q = -1.0244561828391328e-08lf + t * q;
        q = 6.440390426173556e-08lf + t * q;
        q = -4.0032200291808846e-07lf + t * q;
        q = 2.459386633909806e-06lf + t * q;
        q = -1.4927753496639548e-05lf + t * q;
        q = 8.948080413320813e-05lf + t * q;
        q = -0.000529463806474246lf + t * q;
        q = 0.00309101254387477lf + t * q;
        q = -0.017794764701022602lf + t * q;
        c0h = 0.10096221839949909lf;
        c0l = -4.702866999331905e-18lf;
    } else if (x < 7.5lf) {
        t = x - 6.75lf;
        q = -8.823559072163767e-15lf;
        q = 6.861239457714351e-14lf + t * q;
        q = -5.097808648083773e-13lf + t * q;
        q = 3.903489515785367e-12lf + t * q;
        q = -2.967968541579606e-11lf + t * q;
        q = 2.2377276861433364e-10lf + t * q;
        q = -1.6736962428011064e-09lf + t * q;
        q = 1.2416307949357211e-08lf + t * q;
        q = -9.134171387980284e-08lf + t * q;
        q = 6.662218016525376e-07lf + t * q;
        q = -4.816693159434403e-06lf + t * q;
        q = 3.4511344231014646e-05lf + t * q;
        q = -0.0002449933064579556lf + t * q;
        q = 0.0017227275070532352lf + t * q;
        q = -0.01199590063229627lf + t * q;
        c0h = 0.08269505677505307lf;
        c0l = -6.762728512067182e-18lf;
    } else if (x < 9.5lf) {
        t = x - 8.5lf;
        q = -3.411712809225076e-16lf;
        q = 3.191821017318346e-15lf + t * q;
        q = -2.8340059323054123e-14lf + t * q;
        q = 2.6221213191293994e-13lf + t * q;
        q = -2.415180817034957e-12lf + t * q;
        q = 2.2103731353564412e-11lf + t * q;
        q = -2.011633983873774e-10lf + t * q;
        q = 1.8204065411776622e-09lf + t * q;
        q = -1.6378691732453234e-08lf + t * q;
        q = 1.4650050626603024e-07lf + t * q;
        q = -1.302579724113635e-06lf + t * q;
        q = 1.1511429173692362e-05lf + t * q;
        q = -0.00010110359728669525lf + t * q;
        q = 0.0008824034352843003lf + t * q;
        q = -0.007652084595846594lf + t * q;
        c0h = 0.06592512249998035lf;
        c0l = 2.859955490246294e-19lf;
    } else if (x < 12.0lf) {
        t = x - 10.75lf;
        q = -1.0742834065432515e-17lf;
        q = 1.2300865720104328e-16lf + t * q;
        q = -1.3362827553516856e-15lf + t * q;
        q = 1.5184975072911657e-14lf + t * q;
        q = -1.7209220439906258e-13lf + t * q;
        q = 1.9411905065699854e-12lf + t * q;
        q = -2.181408482135447e-11lf + t * q;
        q = 2.442072658557805e-10lf + t * q;
        q = -2.7233916497059453e-09lf + t * q;
        q = 3.025328935544215e-08lf + t * q;
        q = -3.3475473128181216e-07lf + t * q;
        q = 3.689373229328615e-06lf + t * q;
        q = -4.049764904349938e-05lf + t * q;
        q = 0.0004427284736762778lf + t * q;
        q = -0.004820077565585235lf + t * q;
        c0h = 0.05225856230371755lf;
        c0l = -1.906557410833195e-18lf;
    } else if (x < 15.0lf) {
        t = x - 13.5lf;
        q = -3.3957357067599604e-19lf;
        q = 4.77793955411017e-18lf + t * q;
        q = -6.400827922354597e-17lf + t * q;
        q = 8.960326027828548e-16lf + t * q;
        q = -1.2523555050688059e-14lf + t * q;
        q = 1.7444896501513013e-13lf + t * q;
        q = -2.4239196293347106e-12lf + t * q;
        q = 3.359515224756017e-11lf + t * q;
        q = -4.6444221565770195e-10lf + t * q;
        q = 6.4043505267552875e-09lf + t * q;
        q = -8.808427985347253e-08lf + t * q;
        q = 1.208350829599404e-06lf + t * q;
        q = -1.653294689922914e-05lf + t * q;
        q = 0.0002256114847987927lf + t * q;
        q = -0.003070554465132545lf + t * q;
        c0h = 0.04167809676408815lf;
        c0l = -2.450612869924628e-18lf;
    } else if (x < 19.0lf) {
        t = x - 17.0lf;
        q = -9.722960421409128e-21lf;
        q = 1.6976732391083077e-19lf + t * q;
        q = -2.8039121911238832e-18lf + t * q;
        q = 4.879222988900794e-17lf + t * q;
        q = -8.486978598867702e-16lf + t * q;
        q = 1.4720965851327057e-14lf + t * q;
        q = -2.5492086904943866e-13lf + t * q;
        q = 4.407258619769838e-12lf + t * q;
        q = -7.607054677941894e-11lf + t * q;
        q = 1.3108283312030944e-09lf + t * q;
        q = -2.25503285377543e-08lf + t * q;
        q = 3.872880701343079e-07lf + t * q;
        q = -6.640273013630822e-06lf + t * q;
        q = 0.00011365921737199297lf + t * q;
        q = -0.001942167104844326lf + t * q;
        c0h = 0.03313049999972554lf;
        c0l = -2.518793607999762e-18lf;
    } else if (x < 23.0lf) {
        t = x - 21.0lf;
        q = -3.5111215165291715e-22lf;
        q = 7.505196929028653e-21lf + t * q;
        q = -1.5463701835443583e-19lf + t * q;
        q = 3.29806855603794e-18lf + t * q;
        q = -7.030093561704561e-17lf + t * q;
        q = 1.496118336033353e-15lf + t * q;
        q = -3.180501742500563e-14lf + t * q;
        q = 6.753859286317968e-13lf + t * q;
        q = -1.4326227309380027e-11lf + t * q;
        q = 3.035523172549464e-10lf + t * q;
        q = -6.424740457703346e-09lf + t * q;
        q = 1.3583020656350193e-07lf + t * q;
        q = -2.8684961889779155e-06lf + t * q;
        q = 6.051008038166324e-05lf + t * q;
        q = -0.0012750144322983949lf + t * q;
        c0h = 0.026835813158647956lf;
        c0l = 7.305242350399787e-19lf;
    } else {
        t = x - 25.25lf;
        q = -1.9187146435671462e-23lf;
        q = 4.9049865240906335e-22lf + t * q;
        q = -1.2141051503051312e-20lf + t * q;
        q = 3.0988834688590944e-19lf + t * q;
        q = -7.906784124647203e-18lf + t * q;
        q = 2.0150638132500862e-16lf + t * q;
        q = -5.131509812157828e-15lf + t * q;
        q = 1.305781519798431e-13lf + t * q;
        q = -3.3201901639381285e-12lf + t * q;
        q = 8.435711425244984e-11lf + t * q;
        q = -2.141637800406593e-09lf + t * q;
        q = 5.43294258030189e-08lf + t * q;
        q = -1.37717209602727e-06lf + t * q;
        q = 3.488225427629461e-05lf + t * q;
        q = -0.0008828426786204797lf + t * q;
        c0h = 0.022326659889443407lf;
        c0l = 1.290461945232296e-18lf;
    }
    return dvec4(t, q, c0h, c0l);
}
// erfcx(x) as a double-double, 0.5 <= x < 27.5
dvec2 m_erfcx_dd(double x) {
    dvec4 c = m_erfcx_parts(x);
    dvec2 tq = m_two_prod(c.x, c.y);
    return m_dd_add(dvec2(c.z, c.w), tq);
}
// erfc(x) = (h + l) 2^k for 0.5 <= x < 27.5
dvec3 m_erfc_scaled(double x) {
    dvec2 z = m_two_prod(x, x);
    dvec3 c = m_exp_core(-z.x, -z.y);
    dvec2 p = m_dd_mul(dvec2(c.x, c.y), m_erfcx_dd(x));
    return dvec3(p.x, p.y, c.z);
}
// erfc(x) as a normal double-double for 0 <= x <= 6
dvec2 m_erfc_dd(double x) {
    if (x < 0.5lf) return m_dd_add_d(m_dd_neg(m_erf_small_dd(x)), 1.0lf);
    dvec3 e = m_erfc_scaled(x);
    precise double sc = m_pow2(int(e.z));
    precise double h = e.x * sc;
    precise double l = e.y * sc;
    return dvec2(h, l);
}

double m_erf(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    bool neg = b < 0l;
    if (ab == 0l) return x;
    if (ab < 0x3e30000000000000l) {
        dvec2 u = m_unpack(int64BitsToDouble(ab));
        dvec2 p = m_dd_mul_d(dvec2(M_2OSQRTPI_HI, M_2OSQRTPI_LO), u.x);
        return m_with_sign(m_scale_dd(p.x, p.y, int(u.y)), neg);
    }
    double a = int64BitsToDouble(ab);
    if (a < 1.0lf) return m_with_sign(m_dd_round(m_erf_small_dd(a)), neg);
    if (a >= 6.0lf) return m_with_sign(1.0lf, neg);
    dvec2 e = m_erfc_dd(a);
    return m_with_sign(m_dd_round(m_dd_add_d(m_dd_neg(e), 1.0lf)), neg);
}

double m_erfc(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab < 0x3c80000000000000l) return 1.0lf;
    if (ab < 0x3fe0000000000000l) {
        return m_dd_round(m_dd_add_d(m_dd_neg(m_erf_small_dd(x)), 1.0lf));
    }
    if (b >= 0l) {
        if (x >= 27.5lf) return 0.0lf;
        dvec3 e = m_erfc_scaled(x);
        return m_scale_dd(e.x, e.y, int(e.z));
    }
    if (x <= -6.0lf) return 2.0lf;
    precise double a = -x;
    dvec2 e = m_erfc_dd(a);
    return m_dd_round(m_dd_add_d(m_dd_neg(e), 2.0lf));
}

// erf(x) rounded to f32 (see m_tanh_f32's section for the argument): |x| < 1: x (A0 + z (A1 +
// z P(z))), z = x^2, the Taylor series of m_erf_small_dd in plain double; 1 <= |x| < 4:
// 1 - exp(-x^2) erfcx(|x|), exp from m_expm1_parts (x^2 rounded once — exact for f32 and s32
// inputs — so at most 2^-49 relative on the exponential) and erfcx's piecewise polynomial in
// plain double, so erfc is within about 2^-48 and erf (>= 0.84, erfc <= 0.16) within 2^-50.
// 2^-120 <= |x| < 4 (below: NaN, zero or a subnormal f32); |x| >= 4: erfc < 1.6e-8, below the
// midpoint 2^-25 by far more than m_erf's error, so the f32 result is +-1.
double m_erf_f32(double x) {
    int64_t bx = doubleBitsToInt64(x);
    int64_t ab = bx & M_ABSM;
    double a = int64BitsToDouble(ab);
    if (ab <= M_INFB && a >= 4.0lf) return m_with_sign(1.0lf, bx < 0l);
    if (!(ab >= 0x3870000000000000l && a < 4.0lf)) return nx_round_f32(m_erf(x));
    precise double z = a * a;
    precise double v;
    if (a < 1.0lf) {
        precise double P = m_erf_series_tail(z);
        precise double sum = M_ERF_A0_HI + z * (M_ERF_A1_HI + z * P);
        v = a * sum;
    } else {
        dvec2 pk = m_expm1_parts(-z);
        precise double e = (1.0lf + pk.x) * m_pow2(int(pk.y));
        dvec4 c = m_erfcx_parts(a);
        precise double cx = c.z + c.x * c.y;
        precise double erfc = e * cx;
        v = 1.0lf - erfc;
    }
    double r = m_round_f32_unless_near_midpoint(v);
    if (r < 0.0lf) return nx_round_f32(m_erf(x));
    return m_with_sign(r, bx < 0l);
}

// erf_inv: initial approximation (central: polynomial in x^2 for |x| <= 0.5; tail: polynomials in
// w = sqrt(-log(1-|x|)) on two intervals), then one Halley step on erf(y) - |x| evaluated in
// double-double (for |x| > 0.5 as (1-|x|) - erfc(y), 1-|x| exact).
double m_erf_inv(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab > M_ONEB) return m_nan();
    bool neg = b < 0l;
    if (ab == M_ONEB) return m_with_sign(m_inf(), neg);
    if (ab == 0l) return x;
    if (ab < 0x3e30000000000000l) {
        dvec2 u = m_unpack(int64BitsToDouble(ab));
        dvec2 p = m_dd_mul_d(dvec2(M_SQRTPIO2_HI, M_SQRTPIO2_LO), u.x);
        return m_with_sign(m_scale_dd(p.x, p.y, int(u.y)), neg);
    }
    double a = int64BitsToDouble(ab);
    precise double y;
    precise double f;
    if (a <= 0.5lf) {
        precise double t = a * a;
        precise double p = M_EINV_A[9];
        for (int j = 8; j >= 0; j--) p = M_EINV_A[j] + t * p;
        y = a * p;
        dvec2 e = m_erf_small_dd(y);
        dvec2 r = m_dd_add_d(e, -a);
        f = r.x + r.y;
    } else {
        precise double z = 1.0lf - a;
        precise double lz = -m_log(z);
        precise double w = sqrt(lz);
        precise double p;
        if (w < 2.5lf) {
            precise double tw = w - M_EINV_B_MID;
            p = M_EINV_B[11];
            for (int j = 10; j >= 0; j--) p = M_EINV_B[j] + tw * p;
        } else {
            precise double tw = w - M_EINV_C_MID;
            p = M_EINV_C[11];
            for (int j = 10; j >= 0; j--) p = M_EINV_C[j] + tw * p;
        }
        y = p;
        if (y < 0.5lf) {
            dvec2 e = m_erf_small_dd(y);
            dvec2 r = m_dd_add_d(e, -a);
            f = r.x + r.y;
        } else {
            dvec2 e = m_erfc_dd(y);
            dvec2 r = m_dd_add_d(m_dd_neg(e), z);
            f = r.x + r.y;
        }
    }
    precise double ny2 = -(y * y);
    precise double fp = M_2OSQRTPI_HI * m_exp(ny2);
    precise double dl = f / fp;
    precise double yn = y - dl / (1.0lf + y * dl);
    return m_with_sign(yn, neg);
}

// ---------------------------------------------------------------------------------------------
// pow (C99 Annex F special cases), via log_dd (rel. ~2^-70) times y in double-double, exp_core.
// ---------------------------------------------------------------------------------------------
double m_pow(double x, double y) {
    int64_t bx = doubleBitsToInt64(x);
    int64_t by = doubleBitsToInt64(y);
    int64_t ax = bx & M_ABSM;
    int64_t ay = by & M_ABSM;
    if (ay == 0l) return 1.0lf;
    if (bx == M_ONEB) return 1.0lf;
    if (ax > M_INFB) return x;
    if (ay > M_INFB) return y;
    bool yint = false;
    bool yodd = false;
    if (ay >= 0x4340000000000000l) {
        yint = true;
    } else if (ay >= M_ONEB) {
        precise double fy = floor(y);
        yint = fy == y;
        precise double hy = 0.5lf * y;
        precise double fh = floor(hy);
        yodd = yint && fh != hy;
    }
    bool yneg = by < 0l;
    if (ay == M_INFB) {
        if (ax == M_ONEB) return 1.0lf;
        return ((ax < M_ONEB) == yneg) ? m_inf() : 0.0lf;
    }
    bool xneg = bx < 0l;
    if (ax == 0l) {
        if (yneg) return yodd ? m_with_sign(m_inf(), xneg) : m_inf();
        return yodd ? x : 0.0lf;
    }
    if (ax == M_INFB) {
        bool sg = xneg && yodd;
        return m_with_sign(yneg ? 0.0lf : m_inf(), sg);
    }
    bool neg = false;
    if (xneg) {
        if (!yint) return m_nan();
        neg = yodd;
    }
    if (ay > 0x43f0000000000000l) {
        if (ax == M_ONEB) return 1.0lf;
        return ((ax > M_ONEB) != yneg) ? m_inf() : 0.0lf;
    }
    double a = int64BitsToDouble(ax);
    dvec2 l = m_log_dd(a);
    dvec2 z = m_dd_mul_d(l, y);
    double r;
    if (z.x > 709.8lf) r = m_inf();
    else if (z.x < -745.2lf) r = 0.0lf;
    else {
        dvec3 c = m_exp_core(z.x, z.y);
        r = m_scale_dd(c.x, c.y, int(c.z));
    }
    return m_with_sign(r, neg);
}

// ---------------------------------------------------------------------------------------------
// cbrt: x = m 2^(3q+r), polynomial start on [1,8), three Newton steps, final step with an exact
// (double-double) residual; rsqrt: 1 / sqrt in double-double (a plain sqrt + division corrected by a
// Newton step gave different bits on the H200).
// ---------------------------------------------------------------------------------------------
double m_cbrt(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab >= M_INFB || ab == 0l) return x;
    dvec2 u = m_unpack(int64BitsToDouble(ab));
    int e = int(u.y);
    int q = (e + 3000) / 3 - 1000;
    int rr = e - 3 * q;
    precise double m = u.x * (rr == 0 ? 1.0lf : (rr == 1 ? 2.0lf : 4.0lf));
    precise double y = M_CBRT_A[6];
    for (int j = 5; j >= 0; j--) y = M_CBRT_A[j] + m * y;
    for (int j = 0; j < 3; j++) {
        precise double y2 = y * y;
        precise double d = m / y2;
        y = (2.0lf * y + d) * 0.33333333333333331lf;
    }
    dvec2 yy = m_two_prod(y, y);
    dvec2 y3 = m_dd_mul_d(yy, y);
    dvec2 res = m_dd_add_d(y3, -m);
    precise double corr = (res.x + res.y) / (3.0lf * y * y);
    precise double yf = y - corr;
    int64_t rb = doubleBitsToInt64(yf) + int64_t(q) * M_HIDDEN;
    return int64BitsToDouble(b < 0l ? (rb | M_SIGNBIT) : rb);
}

double m_rsqrt(double x) {
    int64_t b = doubleBitsToInt64(x);
    int64_t ab = b & M_ABSM;
    if (ab > M_INFB) return x;
    if (ab == 0l) return m_inf();
    if (b < 0l) return m_nan();
    if (ab == M_INFB) return 0.0lf;
    dvec2 u = m_unpack(x);
    int e = int(u.y);
    precise double m = u.x;
    if ((e & 1) != 0) { m = 2.0lf * m; e = e - 1; }
    dvec2 q = m_dd_div(dvec2(1.0lf, 0.0lf), m_dd_sqrt(dvec2(m, 0.0lf)));
    precise double yf = q.x + q.y;
    int64_t rb = doubleBitsToInt64(yf) - int64_t(e / 2) * M_HIDDEN;
    return int64BitsToDouble(rb);
}
