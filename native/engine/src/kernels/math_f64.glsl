// PLACEHOLDER until the f64 math library lands (owned by the math work): these use driver
// built-ins in f32 and are NOT accurate. The ulp tests fail against them by design.
double m_exp(double x) { return double(exp(float(x))); }
double m_expm1(double x) { return double(exp(float(x))) - 1.0LF; }
double m_log(double x) { return double(log(float(x))); }
double m_log1p(double x) { return double(log(float(1.0LF + x))); }
double m_sin(double x) { return double(sin(float(x))); }
double m_cos(double x) { return double(cos(float(x))); }
double m_tan(double x) { return double(tan(float(x))); }
double m_asin(double x) { return double(asin(float(x))); }
double m_acos(double x) { return double(acos(float(x))); }
double m_atan(double x) { return double(atan(float(x))); }
double m_atan2(double y, double x) { return double(atan(float(y), float(x))); }
double m_sinh(double x) { return double(sinh(float(x))); }
double m_cosh(double x) { return double(cosh(float(x))); }
double m_tanh(double x) { return double(tanh(float(x))); }
double m_asinh(double x) { return double(asinh(float(x))); }
double m_acosh(double x) { return double(acosh(float(x))); }
double m_atanh(double x) { return double(atanh(float(x))); }
double m_erf(double x) { return 0.0LF; }
double m_erfc(double x) { return 1.0LF; }
double m_erf_inv(double x) { return 0.0LF; }
double m_pow(double x, double y) { return double(pow(float(x), float(y))); }
double m_cbrt(double x) { return double(pow(float(x), 1.0/3.0)); }
double m_sigmoid(double x) { return 1.0LF / (1.0LF + m_exp(-x)); }
double m_rsqrt(double x) { return 1.0LF / sqrt(x); }
