// Cumulative ops (sum, product, max, min) with Nx 0.7.2's exact combination tree.
//
// Nx.BinaryBackend has no cumulative callbacks: Nx falls back to associative_scan, a
// recursive work-efficient scan built from whole-tensor ops, each rounding to the tensor's
// type. Unrolled, its tree is the classic in-place up-sweep/down-sweep over logical
// positions p of a row of length n:
//   up, d = 1, 2, 4, ... (2d <= n):   x[p] = f(x[p], x[p - d])   for p = 2d-1, 4d-1, ... < n
//   down, d = ..., 2, 1 (3d <= n):    x[p] = f(x[p - d], x[p])   for p = 3d-1, 5d-1, ... < n
// (operand order matters: max/min return the left operand on ties, -0.0 vs +0.0). Each level
// is one pass over all rows; the first up level also copies the input view into the output.
// `reverse` mirrors the logical positions (Nx reverses, scans, reverses back).
//
// The including Rust code defines LOCAL, STORE_T, BUF, DECODE(raw), ENCODE(v), T (compute
// type), FUN(a, b) (rounded to the type), RANK, and K_FIRST or K_UP or K_DOWN.
//
// Parameters: u64 slots 0 input, 1 output; int slots from 4: n, inner, outer, d, npos,
// reverse, in_offset, axis (index into the dims), then RANK x (size, in_stride).

layout(local_size_x = LOCAL) in;

#define PU(i) ParamsU64(pc.params).v[i]
#define PI(i) ParamsI32(pc.params).v[i]
#define N_ uint(PI(4))
#define INNER uint(PI(5))
#define D_ uint(PI(7))
#define NPOS uint(PI(8))
#define REVERSE (PI(9) != 0)

#ifdef K_FIRST
// Copies the input view into the (contiguous) output, applying the d = 1 up-sweep level.
void main() {
    uint total = uint(pc.count);
    int axis = PI(11);
    uint n = N_;
    bool rev = REVERSE;
    for (uint e = gl_GlobalInvocationID.x; e < total; e += gl_NumWorkGroups.x * LOCAL) {
        uint rest = e;
        int src = PI(10);
        uint q = 0u;
        int axis_stride = 0;
        for (int d = RANK - 1; d >= 0; d--) {
            uint sz = uint(PI(12 + 2 * d));
            uint c = rest % sz;
            rest /= sz;
            src += int(c) * PI(13 + 2 * d);
            if (d == axis) { q = c; axis_stride = PI(13 + 2 * d); }
        }
        uint p = rev ? (n - 1u - q) : q;
        STORE_T raw = BUF(PU(0)).v[uint(src)];
        if ((p & 1u) == 1u) {
            // x[p] = f(x[p], x[p - 1]); logical p - 1 is physical q - 1 (q + 1 when reversed)
            STORE_T prev = BUF(PU(0)).v[uint(src + (rev ? axis_stride : -axis_stride))];
            T a = DECODE(raw);
            T b = DECODE(prev);
            BUF(PU(1)).v[e] = ENCODE(FUN(a, b));
        } else {
            BUF(PU(1)).v[e] = raw;
        }
    }
}
#else
void main() {
    uint total = uint(pc.count);
    uint n = N_;
    uint inner = INNER;
    uint npos = NPOS;
    uint d = D_;
    bool rev = REVERSE;
    for (uint t = gl_GlobalInvocationID.x; t < total; t += gl_NumWorkGroups.x * LOCAL) {
        uint in_ = t % inner;
        uint rest = t / inner;
        uint j = rest % npos;
        uint o = rest / npos;
#ifdef K_UP
        uint p = (j + 1u) * 2u * d - 1u;
#else
        uint p = (2u * j + 3u) * d - 1u;
#endif
        uint pa = p - d;
        uint qp = rev ? (n - 1u - p) : p;
        uint qa = rev ? (n - 1u - pa) : pa;
        uint base = o * n * inner + in_;
        uint ip = base + qp * inner;
        uint ia = base + qa * inner;
        T xp = DECODE(BUF(PU(1)).v[ip]);
        T xa = DECODE(BUF(PU(1)).v[ia]);
#ifdef K_UP
        BUF(PU(1)).v[ip] = ENCODE(FUN(xp, xa));
#else
        BUF(PU(1)).v[ip] = ENCODE(FUN(xa, xp));
#endif
    }
}
#endif
