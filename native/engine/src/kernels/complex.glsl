// Complex functions as the `complex` library (0.5.0) defines them (its clauses for NaN and
// infinite parts in order), computed in f64 on our own m_* functions (math_f64.glsl) — no
// driver built-ins. Concatenated after math_f64.glsl; identifiers start with nx_cm_.
const double NX_CM_PI = 3.141592653589793LF;

// Complex.atan2(b, a) on two reals: :math.atan2 for finite values, the library's table for atoms.
double nx_cm_atan2(double b, double a) {
    bool bn = nx_isnan(b);
    bool an = nx_isnan(a);
    bool bi = nx_isinf(b);
    bool ai = nx_isinf(a);
    if (!bn && !an && !bi && !ai) return m_atan2(b, a);
    if (bi) {
        double s = (b > 0.0LF) ? 1.0LF : -1.0LF;
        if (ai) { precise double v = s * ((a > 0.0LF) ? 0.7853981633974483LF : 2.356194490192345LF); return v; }
        if (an) return nx_nan();
        precise double v = s * 1.5707963267948966LF;
        return v;
    }
    if (bn) return nx_nan();
    if (ai) return (a > 0.0LF) ? 0.0LF : NX_CM_PI;
    return nx_nan(); // finite b, NaN a: the library never returns (infinite recursion)
}
// Complex.phase.
double nx_cm_phase(dvec2 z) {
    double re = z.x;
    double im = z.y;
    bool rf = !nx_nonfinite(re);
    bool imf = !nx_nonfinite(im);
    if (nx_isnan(re) && imf) return nx_nan();
    if (nx_isinf(re) && imf) return (re > 0.0LF) ? 0.0LF : NX_CM_PI;
    if (nx_isinf(re) && nx_isinf(im)) {
        if (re > 0.0LF) return (im > 0.0LF) ? 0.7853981633974483LF : -0.7853981633974483LF;
        return (im > 0.0LF) ? 2.356194490192345LF : 3.9269908169872414LF;
    }
    if (!rf) return nx_nan();
    if (nx_isinf(im)) return (im > 0.0LF) ? 1.5707963267948966LF : -1.5707963267948966LF;
    if (nx_isnan(im)) return nx_nan();
    return nx_cm_atan2(im, re);
}
dvec2 nx_cm_exp(dvec2 z) {
    double re = z.x;
    double im = z.y;
    if (nx_isinf(re) && re < 0.0LF) return dvec2(0.0LF, 0.0LF);
    if (nx_isinf(re) && nx_isnan(im)) return dvec2(re, im);
    if (nx_isinf(re) && !nx_isinf(im)) { precise double v = re * im; return dvec2(re, v); }
    if (nx_nonfinite(re) || nx_nonfinite(im)) return dvec2(nx_nan(), nx_nan());
    double rho = m_exp(re);
    precise double a = rho * m_cos(im);
    precise double b = rho * m_sin(im);
    return dvec2(a, b);
}
// log(z) = log(abs(z)) + i atan2(im, re)
dvec2 nx_cm_log(dvec2 z) { return dvec2(m_log(nx_cabs(z)), nx_cm_atan2(z.y, z.x)); }
dvec2 nx_cm_sqrt(dvec2 z) { return nx_csqrt(z); }
dvec2 nx_cm_sin(dvec2 z) {
    double re = z.x;
    double im = z.y;
    if (nx_nonfinite(re) || nx_isnan(im)) return dvec2(nx_nan(), nx_nan());
    if (nx_isinf(im)) { precise double v = re * im; return dvec2(v, im); }
    precise double a = m_sin(re) * m_cosh(im);
    precise double b = m_cos(re) * m_sinh(im);
    return dvec2(a, b);
}
dvec2 nx_cm_cos(dvec2 z) {
    double re = z.x;
    double im = z.y;
    if (nx_nonfinite(re) || nx_isnan(im)) return dvec2(nx_nan(), nx_nan());
    if (nx_isinf(im)) { precise double v = (-im) * re; return dvec2(nx_inf(), v); }
    precise double a = m_cos(re) * m_cosh(im);
    precise double b = (-m_sin(re)) * m_sinh(im);
    return dvec2(a, b);
}
dvec2 nx_cm_tan(dvec2 z) { return nx_cdiv(nx_cm_sin(z), nx_cm_cos(z)); }
dvec2 nx_cm_expm1(dvec2 z) { return nx_csub_cr(nx_cm_exp(z), 1.0LF); }
dvec2 nx_cm_log1p(dvec2 z) { return nx_cm_log(nx_cadd_cr(z, 1.0LF)); }
dvec2 nx_cm_sigmoid(dvec2 z) { return nx_cdiv_rc(1.0LF, nx_cadd_cr(nx_cm_exp(-z), 1.0LF)); }
dvec2 nx_cm_rsqrt(dvec2 z) { return nx_cdiv_rc(1.0LF, nx_csqrt(z)); }
// Complex.pow(x, y) for two complex values (its general clause).
dvec2 nx_cm_pow(dvec2 x, dvec2 y) {
    if (x.x == 0.0LF && x.y == 0.0LF) return (y.x == 0.0LF && y.y == 0.0LF) ? dvec2(1.0LF, 0.0LF) : dvec2(0.0LF, 0.0LF);
    if (y.x == 1.0LF && y.y == 0.0LF) return x;
    if (y.x == -1.0LF && y.y == 0.0LF) return nx_cdiv(dvec2(1.0LF, 0.0LF), x);
    double rho = nx_cabs(x);
    double theta = nx_cm_phase(x);
    precise double e = (-y.y) * theta;
    precise double s = m_pow(rho, y.x) * m_exp(e);
    precise double r1 = y.x * theta;
    precise double r2 = y.y * m_log(rho);
    precise double r = r1 + r2;
    precise double a = s * m_cos(r);
    precise double b = s * m_sin(r);
    return dvec2(a, b);
}
// A real base or exponent: a NaN gives NaN; an infinite exponent gives 0 or Inf.
dvec2 nx_cm_pow_rc(double r, dvec2 z) {
    if (nx_isnan(r)) return dvec2(r, 0.0LF);
    return nx_cm_pow(dvec2(r, 0.0LF), z);
}
dvec2 nx_cm_pow_cr(dvec2 z, double r) {
    if (nx_isnan(r)) return dvec2(r, 0.0LF);
    if (nx_isinf(r)) {
        bool zero = z.x == 0.0LF && z.y == 0.0LF;
        if (r > 0.0LF) return zero ? dvec2(0.0LF, 0.0LF) : dvec2(nx_inf(), 0.0LF);
        return zero ? dvec2(nx_inf(), 0.0LF) : dvec2(0.0LF, 0.0LF);
    }
    return nx_cm_pow(z, dvec2(r, 0.0LF));
}
