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
// Where segments hold SCAN_R or more positions, each invocation keeps SCAN_R consecutive
// positions (a block) in registers and runs the levels d < SCAN_R there: their operands never
// leave the block, except the down-sweep's, which read the previous block's last position,
// final once the levels d >= SCAN_R are done. Only the blocks' last positions go through the
// shared levels d >= SCAN_R, compacted one per invocation. The operations and their operands
// are the level-by-level scan's, so are the bits. Shorter segments run every level in shared
// memory.
//
// The including Rust code defines LOCAL, SCAN_R (positions per invocation, a power of two),
// SCAN_LOG_R, TILE (SCAN_R * LOCAL: a segment's longest length), STORE_T, SH_T (STORE_T
// widened to 32 or 64 bits), BUF, COMBINE(a, b) (the op on two stored values, rounded or
// wrapped to the type, stored again), RANK, K_FIRST (this pass copies the input view into the
// output; K_DENSE: a contiguous one), and K_UP and/or K_DOWN.
//
// Parameters: u64 slots 0 input, 1 output; int slots from 4: n, inner, outer, s (stride),
// tiles (segments per row), reverse, in_offset, axis (index into the dims), seg (segment
// length, a power of two dividing TILE; TILE when tiles > 1), log2(seg), then RANK x (size,
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
#define LOG_SEG uint(PI(13))

// Slot p of the staging array, padded one per 32: an invocation reads its block's SCAN_R slots
// at a stride of SCAN_R across the subgroup, which would otherwise fall in two banks.
#define SI(p) ((p) + ((p) >> 5u))
shared SH_T sh[TILE + TILE / 32];
shared SH_T sh_prev;

// Output index of level element m of row r (rows: outer-major, inner-minor).
uint out_index(uint r, uint m) {
    uint q = (m + 1u) * S_ - 1u;
    uint phys = REVERSE ? (N_ - 1u - q) : q;
    if (INNER == 1u) return r * N_ + phys;
    return (r / INNER) * N_ * INNER + (r % INNER) + phys * INNER;
}

#ifdef K_FIRST
// The input view's element at output (contiguous) index e.
STORE_T load_elem(uint e) {
#ifdef K_DENSE
    return BUF(PU(0)).v[uint(PI(10)) + e];
#else
    uint rest = e;
    int src = PI(10);
    for (int d = RANK - 1; d >= 0; d--) {
        uint sz = uint(PI(14 + 2 * d));
        uint c = rest % sz;
        rest /= sz;
        src += int(c) * PI(15 + 2 * d);
    }
    return BUF(PU(0)).v[uint(src)];
#endif
}
#else
STORE_T load_elem(uint e) { return BUF(PU(1)).v[e]; }
#endif

void main() {
    uint seg = SEG;
    uint lseg = LOG_SEG;
    uint per_group = TILE >> lseg;
    uint ns = N_ / S_;
    uint tiles = TILES;
    uint nseg = OUTER * INNER * tiles;
    uint ngroups = (nseg + per_group - 1u) / per_group;
    uint lid = gl_LocalInvocationID.x;
    // Levels d >= dmin run in shared memory; below it, in registers. A level's shared slot
    // for position `at` of the group is SI(at >> cs): the blocks' lasts compacted
    // (cs = SCAN_LOG_R), or every position (cs = 0) where segments are shorter than a block.
    bool regs = seg >= SCAN_R;
    uint dmin = regs ? SCAN_R : 1u;
    uint cs = regs ? uint(SCAN_LOG_R) : 0u;
    for (uint g = gl_WorkGroupID.x; g < ngroups; g += gl_NumWorkGroups.x) {
        // Segment sg of the group holds positions g_m + l of row sg (tiles == 1). With more
        // than one segment per row there is one segment per group (seg == TILE): its row and
        // start are the group's.
        uint g_row = tiles > 1u ? g / tiles : 0u;
        uint g_m = tiles > 1u ? (g % tiles) * seg : 0u;
        // The group's slots in use: its segments that exist (one short row leaves the rest of
        // the tile empty)
        uint held = min(per_group, nseg - g * per_group);
        uint span = held << lseg;
        for (uint i = lid; i < span; i += LOCAL) {
            uint sg = g * per_group + (i >> lseg);
            uint m = g_m + (i & (seg - 1u));
            if (sg < nseg && m < ns) sh[SI(i)] = SH_T(load_elem(out_index(tiles > 1u ? g_row : sg, m)));
        }
#ifdef K_DOWN
        // tiles > 1 only with seg == TILE: one segment per group
        if (lid == 0u && tiles > 1u && g < nseg && g % tiles > 0u) {
            sh_prev = SH_T(BUF(PU(1)).v[out_index(g_row, g_m - 1u)]);
        }
#endif
        barrier();
        // This invocation's block (the register levels; seg >= SCAN_R: it lies in one segment)
        uint at0 = SCAN_R * lid;
        uint sg0 = g * per_group + (at0 >> lseg);
        uint m0 = g_m + (at0 & (seg - 1u));
        uint live = sg0 < nseg && m0 < ns ? min(ns - m0, SCAN_R) : 0u; // positions < ns
        SH_T v[SCAN_R];
        if (regs) {
            [[unroll]] for (uint i = 0u; i < SCAN_R; i++) v[i] = sh[SI(at0 + i)];
            barrier(); // the staging slots are free: the lasts go to slots 0 .. LOCAL-1
#ifdef K_UP
            [[unroll]] for (uint ld = 0u; ld < uint(SCAN_LOG_R); ld++) {
                uint d = 1u << ld;
                [[unroll]] for (uint l = 2u * d - 1u; l < SCAN_R; l += 2u * d) {
                    if (l < live) v[l] = COMBINE(v[l], v[l - d]);
                }
            }
#endif
            sh[SI(lid)] = v[SCAN_R - 1u];
            barrier();
        }
#ifdef K_UP
        for (uint d = dmin, ld = uint(findLSB(dmin)); 2u * d <= seg; d *= 2u, ld++) {
            uint lper = lseg - ld - 1u; // per = seg / 2d targets per segment
            for (uint i = lid; i < (held << lper); i += LOCAL) {
                uint s = i >> lper;
                uint l = ((i & ((1u << lper) - 1u)) + 1u) * 2u * d - 1u;
                uint sg = g * per_group + s;
                if (sg < nseg && g_m + l < ns) {
                    uint at = s * seg + l;
                    sh[SI(at >> cs)] = COMBINE(sh[SI(at >> cs)], sh[SI((at - d) >> cs)]);
                }
            }
            barrier();
        }
#endif
#ifdef K_DOWN
        for (uint d = seg / 2u, ld = lseg - 1u; d >= dmin; d /= 2u, ld--) {
            uint lper = lseg - ld - 1u;
            for (uint i = lid; i < (held << lper); i += LOCAL) {
                uint s = i >> lper;
                uint k = i & ((1u << lper) - 1u);
                uint l = (2u * k + 1u) * d - 1u;
                uint sg = g * per_group + s;
                uint m = g_m + l;
                // m + 1 >= 3d: the first such position of a row is 3d - 1; with k == 0 that
                // means a segment after the first, whose operand is the one before it
                if (sg < nseg && m < ns && m + 1u >= 3u * d) {
                    uint at = s * seg + l;
                    SH_T before;
                    if (k == 0u) before = sh_prev; else before = sh[SI((at - d) >> cs)];
                    sh[SI(at >> cs)] = COMBINE(before, sh[SI(at >> cs)]);
                }
            }
            barrier();
        }
#endif
        if (regs) {
            v[SCAN_R - 1u] = sh[SI(lid)]; // after the shared levels
#ifdef K_DOWN
            // x[l] = f(x[l - d], x[l]) for l = (2k + 1)d - 1 where position l + 1 >= 3d, from
            // d = SCAN_R/2 down to 1; x[-1] is the previous block's last (at a segment's start,
            // the previous segment's last)
            SH_T before = (at0 & (seg - 1u)) == 0u ? sh_prev : sh[SI(lid - 1u)];
            [[unroll]] for (int ld = SCAN_LOG_R - 1; ld >= 0; ld--) {
                uint d = 1u << uint(ld);
                [[unroll]] for (uint l = d - 1u; l < SCAN_R - 1u; l += 2u * d) {
                    if (l < live && m0 + l + 1u >= 3u * d) {
                        // (the index kept in range: for l < d the other arm is taken)
                        SH_T left = v[(l - d) & (SCAN_R - 1u)];
                        v[l] = COMBINE(l >= d ? left : before, v[l]);
                    }
                }
            }
#endif
            barrier(); // every invocation has read the lasts before the staging slots refill
            [[unroll]] for (uint i = 0u; i < SCAN_R; i++) sh[SI(at0 + i)] = v[i];
            barrier();
        }
        for (uint i = lid; i < span; i += LOCAL) {
            uint sg = g * per_group + (i >> lseg);
            uint m = g_m + (i & (seg - 1u));
            if (sg < nseg && m < ns) BUF(PU(1)).v[out_index(tiles > 1u ? g_row : sg, m)] = STORE_T(sh[SI(i)]);
        }
        barrier();
    }
}
