// Scalar helpers behind the elementwise ops, following Nx.BinaryBackend's rules.

// float -> integer: truncate toward zero, then keep the low 64 bits (Nx then wraps to the
// target width). NaN and ±Inf have no integer value: they become 0.
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

// Compares a value that may be signed with one that may be unsigned (both as raw 64 bits).
int nx_cmp_mixed(uint64_t a, bool a_signed, uint64_t b, bool b_signed) {
    bool an = a_signed && int64_t(a) < 0l;
    bool bn = b_signed && int64_t(b) < 0l;
    if (an != bn) return an ? -1 : 1;
    if (an) return (int64_t(a) < int64_t(b)) ? -1 : ((a == b) ? 0 : 1);
    return (a < b) ? -1 : ((a == b) ? 0 : 1);
}

double nx_sign_f64(double x) {
    if (nx_isnan(x)) return x;
    if (x > 0.0LF) return 1.0LF;
    if (x < 0.0LF) return -1.0LF;
    return x; // keeps the sign of zero
}

// Round half away from zero, exactly (floor(x + 0.5) is wrong for 0.49999999999999994).
double nx_round_half_away(double x) {
    precise double t = trunc(x);
    precise double f = x - t; // exact
    if (nx_abs(f) >= 0.5LF) {
        precise double r = t + ((x < 0.0LF) ? -1.0LF : 1.0LF);
        return r;
    }
    return nx_copysign(t, x);
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

double nx_div_f64(double x, double y) { precise double r = x / y; return r; }

// Exact IEEE fmod (the result has the sign of x): repeated exact subtraction of y scaled by
// powers of two; each step is exact because the operands share enough exponent range.
double nx_rem_f64(double x, double y) {
    if (nx_isnan(x) || nx_isnan(y) || nx_isinf(x) || y == 0.0LF) return nx_nan();
    if (nx_isinf(y)) return x;
    precise double r = nx_abs(x);
    precise double ay = nx_abs(y);
    if (r < ay) return x;
    int ey = int((nx_f64_to_bits(ay) >> 52) & 0x7FFul);
    for (int guard = 0; guard < 2200 && r >= ay; guard++) {
        int er = int((nx_f64_to_bits(r) >> 52) & 0x7FFul);
        int shift = er - ey;
        // ay * 2^shift, built by exponent arithmetic (ay normal or subnormal alike via ldexp)
        precise double s = ldexp(ay, shift);
        if (s > r) s = ldexp(ay, shift - 1);
        r = r - s;
    }
    return nx_copysign(r, x);
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
double nx_quot_f64(double x, double y) { return trunc(x / y); }
int64_t nx_div_s64(int64_t x, int64_t y) { return nx_quot_s64(x, y); }
uint64_t nx_div_u64(uint64_t x, uint64_t y) { return nx_quot_u64(x, y); }

// Max/min: a NaN operand wins.
double nx_max_f64(double x, double y) {
    if (nx_isnan(x)) return x;
    if (nx_isnan(y)) return y;
    return (x > y) ? x : y;
}
double nx_min_f64(double x, double y) {
    if (nx_isnan(x)) return x;
    if (nx_isnan(y)) return y;
    return (x < y) ? x : y;
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
int64_t nx_sar_s64(int64_t x, int64_t s) { return (s >= 64l) ? ((x < 0l) ? -1l : 0l) : (x >> s); }
int64_t nx_sal_s64(int64_t x, int64_t s) { return (s >= 64l) ? 0l : (x << s); }
int64_t nx_shl_s64(int64_t x, int64_t s) { return (s < 0l) ? nx_sar_s64(x, -s) : nx_sal_s64(x, s); }
int64_t nx_shr_s64(int64_t x, int64_t s) { return (s < 0l) ? nx_sal_s64(x, -s) : nx_sar_s64(x, s); }
uint64_t nx_shl_u64(uint64_t x, uint64_t s) { return (s >= 64ul) ? 0ul : (x << s); }
uint64_t nx_shr_u64(uint64_t x, uint64_t s) { return (s >= 64ul) ? 0ul : (x >> s); }
