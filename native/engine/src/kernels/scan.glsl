// Cumulative ops (sum, product, max, min) with Nx 0.7.2's exact combination tree.
//
// Nx.BinaryBackend has no cumulative callbacks: Nx falls back to associative_scan, a
// recursive work-efficient scan built from whole-tensor ops, each rounding to the tensor's
// type. Unrolled, its tree is the classic in-place up-sweep/down-sweep over logical
// positions p of a row of length n:
//   up, d = 1, 2, 4, ... (2d <= n):   x[p] = f(x[p], x[p - d])   for p = 2d-1, 4d-1, ... < n
//   down, d = ..., 2, 1 (3d <= n):    x[p] = f(x[p - d], x[p])   for p = 3d-1, 5d-1, ... < n
// (operand order matters: max/min return the left operand on ties, -0.0 vs +0.0).
// `reverse` mirrors the logical positions (Nx reverses, scans, reverses back).
//
// Levels with d < SEG never leave an aligned segment of SEG positions (the down-sweep's
// d < SEG levels read one value before it: the previous segment's last, final by then), and
// the levels with d >= SEG touch only the positions SEG-1, 2*SEG-1, ...: the same tree again
// over that sub-sequence (level element m = logical position (m+1)*s - 1 at stride s, n/s of
// them). So a pass at stride s loads segments of its level sequence into shared memory and
// runs its in-segment levels there: K_UP the up levels, K_DOWN the down levels, both for the
// last stride (one segment per row). Every combination reads and writes the stored bits, so
// the result is the level-by-level scan's, bit for bit.
//
// The including Rust code defines LOCAL, TILE (shared slots per workgroup), STORE_T, SH_T
// (STORE_T widened to 32 or 64 bits), BUF, DECODE(raw), ENCODE(v), T (compute type),
// FUN(a, b) (rounded to the type), RANK, K_FIRST (this pass copies the input view into the
// output), and K_UP and/or K_DOWN.
//
// Parameters: u64 slots 0 input, 1 output; int slots from 4: n, inner, outer, s (stride),
// tiles (segments per row), reverse, in_offset, axis (index into the dims), seg (segment
// length, a power of two dividing TILE; TILE when tiles > 1), unused, then RANK x (size,
// in_stride).

layout(local_size_x = LOCAL) in;

#define PU(i) ParamsU64(pc.params).v[i]
#define PI(i) ParamsI32(pc.params).v[i]
#define N_ uint(PI(4))
#define INNER uint(PI(5))
#define OUTER uint(PI(6))
#define S_ uint(PI(7))
#define TILES uint(PI(8))
#define REVERSE (PI(9) != 0)
#define SEG uint(PI(12))

// (Padding one slot per 32 against bank conflicts at the tree's power-of-two strides measured
// no faster on an H100, stop 37: 16 M 681-697 us against 644-671 unpadded.)
shared SH_T sh[TILE];
shared SH_T sh_prev;

// Output index of level element m of row r (rows: outer-major, inner-minor).
uint out_index(uint r, uint m) {
    uint q = (m + 1u) * S_ - 1u;
    uint phys = REVERSE ? (N_ - 1u - q) : q;
    return (r / INNER) * N_ * INNER + (r % INNER) + phys * INNER;
}

// Position l of segment sg (its row's segment sg % TILES): whether it is in the level
// sequence (of ns elements; sg < nseg) and, if so, its output index e. The passes' load and
// store loops both walk a workgroup's slots through this.
bool element_of(uint sg, uint l, uint nseg, uint ns, out uint e) {
    uint m = (sg % TILES) * SEG + l;
    e = 0u;
    if (sg >= nseg || m >= ns) return false;
    e = out_index(sg / TILES, m);
    return true;
}

#ifdef K_FIRST
// The input view's element at output (contiguous) index e.
STORE_T load_elem(uint e) {
    uint rest = e;
    int src = PI(10);
    for (int d = RANK - 1; d >= 0; d--) {
        uint sz = uint(PI(14 + 2 * d));
        uint c = rest % sz;
        rest /= sz;
        src += int(c) * PI(15 + 2 * d);
    }
    return BUF(PU(0)).v[uint(src)];
}
#else
STORE_T load_elem(uint e) { return BUF(PU(1)).v[e]; }
#endif

SH_T combine(SH_T a, SH_T b) { return SH_T(ENCODE(FUN(DECODE(STORE_T(a)), DECODE(STORE_T(b))))); }

void main() {
    uint seg = SEG;
    uint per_group = TILE / seg;
    uint ns = N_ / S_;
    uint tiles = TILES;
    uint nseg = OUTER * INNER * tiles;
    uint ngroups = (nseg + per_group - 1u) / per_group;
    uint lid = gl_LocalInvocationID.x;
    for (uint g = gl_WorkGroupID.x; g < ngroups; g += gl_NumWorkGroups.x) {
        for (uint i = lid; i < TILE; i += LOCAL) {
            uint e;
            if (element_of(g * per_group + i / seg, i % seg, nseg, ns, e)) sh[i] = SH_T(load_elem(e));
        }
#ifdef K_DOWN
        // tiles > 1 only with seg == TILE: one segment per group
        if (lid == 0u && tiles > 1u && g < nseg && g % tiles > 0u) {
            sh_prev = SH_T(BUF(PU(1)).v[out_index(g / tiles, (g % tiles) * seg - 1u)]);
        }
#endif
        barrier();
#ifdef K_UP
        for (uint d = 1u; 2u * d <= seg; d *= 2u) {
            uint per = seg / (2u * d);
            for (uint i = lid; i < per_group * per; i += LOCAL) {
                uint s = i / per;
                uint l = (i % per + 1u) * 2u * d - 1u;
                uint sg = g * per_group + s;
                if (sg < nseg && (sg % tiles) * seg + l < ns) {
                    uint at = s * seg + l;
                    sh[at] = combine(sh[at], sh[at - d]);
                }
            }
            barrier();
        }
#endif
#ifdef K_DOWN
        for (uint d = seg / 2u; d >= 1u; d /= 2u) {
            uint per = seg / (2u * d);
            for (uint i = lid; i < per_group * per; i += LOCAL) {
                uint s = i / per;
                uint k = i % per;
                uint l = (2u * k + 1u) * d - 1u;
                uint sg = g * per_group + s;
                uint m = (sg % tiles) * seg + l;
                // m + 1 >= 3d: the first such position of a row is 3d - 1; with k == 0 that
                // means a segment after the first, whose operand is the one before it
                if (sg < nseg && m < ns && m + 1u >= 3u * d) {
                    uint at = s * seg + l;
                    SH_T before;
                    if (k == 0u) before = sh_prev; else before = sh[at - d];
                    sh[at] = combine(before, sh[at]);
                }
            }
            barrier();
        }
#endif
        for (uint i = lid; i < TILE; i += LOCAL) {
            uint e;
            if (element_of(g * per_group + i / seg, i % seg, nseg, ns, e)) BUF(PU(1)).v[e] = STORE_T(sh[i]);
        }
        barrier();
    }
}
