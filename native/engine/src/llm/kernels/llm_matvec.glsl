// out[t, n] = Σ_k W[n, k] · x'[t, k] (+ bias[n]) (+ residual[t, n]) for a quantized W (row n's
// bytes at W + n · ROW_BYTES), x and out f32. SWIGLU: two matrices (gate, up) of the same type;
// out = silu(gate·x') · (up·x'). NORM: RMSNorm fused in front — x'[t, k] = x[t, k] · gamma[k]
// and each sum is multiplied by 1 / sqrt(mean_k x[t, k]² + eps), so the normalised activations
// are never written and the norm costs no dispatch of its own.
//
// A row is cut into tasks (llm_qdot.glsl: the format's natural group of TASK_VALUES values);
// each task's dot is one fixed chain, the tasks of a thread are added in ascending order and
// threads' partial sums over a fixed tree. The order of every sum depends on K (and NT) alone —
// not on T, the chunk of columns or the other rows — so a token's result is the same bits
// however many tokens (or sessions) share the dispatch.
//
// ROPE (the Q and K products): the rotary embedding of the first ROPE_DIMS dimensions of each
// HD-wide head, for column t's position, applied in the store (lane rows (2i, 2i + 1) are in
// one lane group: LANE_ROWS is even; they compute a pair — adjacent output rows, or with
// ROPE_NEOX rows i and i + ROPE_DIMS/2 of the head: out_row). KV_OUT (K and V):
// the row is stored into the KV cache at column t's (slot, position) — f16 with KV_F16 —
// instead of out. Together they do what llm_rope.glsl does for these products, with the same
// arithmetic (so the same bits), and save its dispatch.
//
// RMSNorm by block sums (NX_VULKAN_LLM_NORM=sums; llm::model's NormWay), so that no
// norm needs a dispatch of its own and no lane reads gamma or squares x in the hot loop:
// NORM_OUT (a residual product, the norm after it known): besides out, the product writes
// out · gamma' (gamma' the next norm's weight) to XG and, per column, the sum of squares of
// each block of 8 consecutive output rows to SUMS (from zero, rows ascending, each square
// rounded before its addition: no fma, which a driver may split).
// NORM_SUMS (a product after that norm): x is XG's rows (gamma already applied) and each sum
// is multiplied by 1 / sqrt(S / K + eps), S the row's sum of squares from its block sums in a
// fixed order (sums_chain). llm_rows.glsl's SUMS writes both for rows no product wrote
// (the first layer's). Neither order depends on T, the columns' chunk or the workgroup size.

layout(local_size_x = WG) in;

// Parameters: addresses W, W2 (up), X, bias, residual, out, gamma; then N, K, T, row bytes,
// the element offsets of x, bias, residual and out, and eps's bits.
struct Args {
    uint64_t w, w2, x, b, r, o, g;
    uint N, K, T, rowBytes, offX, offB, offR, offO;
    float eps;
    // ROPE / KV_OUT: the step's (slot, position) rows (row t of this product at offRows + t),
    // the cos/sin table, positions per slot and slots.
    uint64_t rows, cs;
    uint ctx, slots, offRows;
    // NORM_SUMS / NORM_OUT: the block sums (SUMS), XG and gamma' (GN); the element offsets of
    // the sums and of XG.
    uint64_t sums, xg, gn;
    uint offS, offG;
};

Args args() {
    ParamsU64 a = ParamsU64(pc.params);
    ParamsI32 m = ParamsI32(pc.params + 56ul);
    Args r = Args(a.v[0], a.v[1], a.v[2], a.v[3], a.v[4], a.v[5], a.v[6],
                  uint(m.v[0]), uint(m.v[1]), uint(m.v[2]), uint(m.v[3]), uint(m.v[4]), uint(m.v[5]), uint(m.v[6]), uint(m.v[7]),
                  intBitsToFloat(m.v[8]), 0ul, 0ul, 0u, 0u, 0u, 0ul, 0ul, 0ul, 0u, 0u);
#if defined(ROPE) || defined(KV_OUT)
    // (only these blocks are that long)
    ParamsU64 e = ParamsU64(pc.params + 96ul);
    ParamsI32 f = ParamsI32(pc.params + 112ul);
    r.rows = e.v[0];
    r.cs = e.v[1];
    r.ctx = uint(f.v[0]);
    r.slots = uint(f.v[1]);
    r.offRows = uint(f.v[2]);
#endif
#if defined(NORM_SUMS) || defined(NORM_OUT)
    // (at byte 128, after the RoPE block's room)
    ParamsU64 s = ParamsU64(pc.params + 128ul);
    ParamsI32 o = ParamsI32(pc.params + 152ul);
    r.sums = s.v[0];
    r.xg = s.v[1];
    r.gn = s.v[2];
    r.offS = uint(o.v[0]);
    r.offG = uint(o.v[1]);
#endif
    return r;
}

#if defined(NORM_OUT) && defined(ROPE)
#error "NORM_OUT is for residual products"
#endif

// Blocks of 8 rows per sum: ceil(n / 8).
uint norm_blocks(uint n) { return (n + 7u) / 8u; }

#ifdef NORM_SUMS
// The sum of squares of column t's K values from its block sums: NSC chains (chain q adds
// blocks q, q + NSC, q + 2·NSC, ... in ascending order, from zero), then the fixed tree over
// the chains (level s: chain l absorbs chain l + s). sums_chain is one chain; the GPU path
// runs the chains on separate invocations and the tree in shared memory, the row path all of
// it in each invocation (its main's prologue) — the same additions in the same order.
const uint NSC = 64u;
float sums_chain(Args p, uint t, uint q) {
    uint nb = norm_blocks(p.K);
    uint base = p.offS + t * nb;
    precise float a = 0.0;
    // (eight loads issued before their additions; the chain's order is unchanged)
    for (uint b0 = q; b0 < nb; b0 += 8u * NSC) {
        float v[8];
        [[unroll]] for (uint e = 0u; e < 8u; e++) v[e] = uintBitsToFloat(BufU32(p.sums).v[base + min(b0 + e * NSC, nb - 1u)]);
        [[unroll]] for (uint e = 0u; e < 8u; e++) {
            if (b0 + e * NSC < nb) a = a + v[e];
        }
    }
    return a;
}
#endif

// The output row that lane row n computes: n itself, except with ROPE_NEOX (NEOX rotation, as
// qwen2's, pairs dimensions i and i + ROPE_DIMS/2 of a head), where lane rows 2i and 2i + 1 of
// a head compute its rows i and i + ROPE_DIMS/2, so a pair still meets in one lane group;
// dimensions from ROPE_DIMS on keep their places.
uint out_row(uint n) {
#ifdef ROPE_NEOX
    uint d = n % uint(HD);
    if (d >= uint(ROPE_DIMS)) return n;
    return n - d + (d >> 1) + (d & 1u) * uint(ROPE_DIMS / 2);
#else
    return n;
#endif
}

// Adds task `task` of the LANE_ROWS lane rows n0, n0 + 1, ... (output rows out_row(n0 + j);
// then, with SWIGLU, the same rows of the up matrix) for columns t0 .. t0+TC-1 (those < T):
// acc[c][j] is column c's sum for row pointer j, ss[c] its Σ x². Rows past N repeat row N − 1
// (computed, never stored), so every lane runs the same code.
void add_task(Args p, uint n0, uint task, uint t0, inout float acc[TC][NR], inout float ss[TC]) {
    uint64_t rows[NR];
    [[unroll]] for (int j = 0; j < LANE_ROWS; j++) {
        uint n = out_row(min(n0 + uint(j), p.N - 1u));
        rows[j] = p.w + uint64_t(n) * uint64_t(p.rowBytes);
#ifdef SWIGLU
        rows[LANE_ROWS + j] = p.w2 + uint64_t(n) * uint64_t(p.rowBytes);
#endif
    }
    uint ncols = min(uint(TC), p.T - t0);
    task_acc(rows, task, p.x, p.g, p.offX + t0 * p.K, p.K, ncols, acc);
#ifdef NORM
    [[unroll]] for (int c = 0; c < TC; c++) {
        if (TC == 1 || uint(c) < ncols) ss[c] = task_sumsq(p.x, p.offX + (t0 + uint(c)) * p.K, task, ss[c]);
    }
#endif
}

// out[t, n]'s value from column t's sums (gate and, with SWIGLU, up) and Σ x²: the norm's
// scale, then the epilogue.
float epilogue(Args p, float v, float up, float ss, uint n, uint t) {
#if defined(NORM) || defined(NORM_SUMS)
    precise float rs = 1.0 / sqrt(ss / float(p.K) + p.eps);
    v = v * rs;
    up = up * rs;
#endif
#ifdef SWIGLU
    v = (v / (1.0 + exp(-v))) * up;
#endif
#ifdef BIAS
    v += uintBitsToFloat(BufU32(p.b).v[p.offB + n]);
#endif
#ifdef RESIDUAL
    v = uintBitsToFloat(BufU32(p.r).v[p.offR + t * p.N + n]) + v;
#endif
    return v;
}

// Stores lane row n's value v at out[t, out_row(n)]; with ROPE, v is first rotated with its
// pair's value `pair` (lane row n ^ 1, its epilogue applied) by rope_rotate
// (llm_rope_rotate.glsl, as llm_rope.glsl rotates); with KV_OUT, into the cache.
void store_out(Args p, float v, float pair, uint n, uint t) {
#if defined(ROPE) || defined(KV_OUT)
    uint slot = min(BufU32(p.rows).v[2u * (p.offRows + t)], p.slots - 1u);
    uint pos = min(BufU32(p.rows).v[2u * (p.offRows + t) + 1u], p.ctx - 1u);
#endif
#ifdef ROPE
    uint d = n % uint(HD);   // pair d / 2 of the head; its first member where d is even
    if (d < uint(ROPE_DIMS)) {
        uint cs = (pos * uint(ROPE_DIMS / 2) + d / 2u) * 2u;
        float c = uintBitsToFloat(BufU32(p.cs).v[cs]), s = uintBitsToFloat(BufU32(p.cs).v[cs + 1u]);
        bool first = (d & 1u) == 0u;
        vec2 r = rope_rotate(first ? v : pair, first ? pair : v, c, s);
        v = first ? r.x : r.y;
    }
#endif
#ifdef KV_OUT
    uint idx = (slot * p.ctx + pos) * p.N + out_row(n);
#ifdef KV_F16
    BufU16(p.o).v[idx] = uint16_t(enc_f32_to_f16(floatBitsToUint(v)));
#else
    BufU32(p.o).v[idx] = floatBitsToUint(v);
#endif
#else
    BufU32(p.o).v[p.offO + t * p.N + out_row(n)] = floatBitsToUint(v);
#endif
}

#ifdef SWIGLU
const int UP = LANE_ROWS;
#else
const int UP = 0;
#endif

#ifdef NORM_OUT
// Writes XG's element (the output times gamma').
void norm_out_store(Args p, float v, uint n, uint t) {
    BufU32(p.xg).v[p.offG + t * p.N + n] = floatBitsToUint(v * uintBitsToFloat(BufU32(p.gn).v[n]));
}

// A workgroup's outputs of one pass (BLK_ROWS consecutive rows from `first`, a multiple of 8;
// the host checks both) are kept in blk for their block sums.
#ifdef ROW_PER_THREAD
const uint BLK_ROWS = uint(WG);
#else
const uint BLK_ROWS = (uint(WG) / uint(NT)) * uint(LANE_ROWS);
#endif
shared float blk[TC][BLK_ROWS];

// SUMS[t, b] for the blocks of rows first .. first + BLK_ROWS - 1 (after a barrier): each
// block's squares added from zero, rows ascending (a last block may be short).
void norm_out_sums(Args p, uint first, uint t0, uint tid) {
    uint nb = norm_blocks(p.N);
    for (uint i = tid; i < uint(TC) * (BLK_ROWS / 8u); i += uint(WG)) {
        uint c = i / (BLK_ROWS / 8u), b = i % (BLK_ROWS / 8u), t = t0 + c;
        uint n = first + 8u * b;
        if (t < p.T && n < p.N) {
            precise float a = 0.0;
            for (uint r = 0u; r < 8u && n + r < p.N; r++) {
                float v = blk[c][8u * b + r];
                a = a + v * v;
            }
            BufU32(p.sums).v[p.offS + t * nb + n / 8u] = floatBitsToUint(a);
        }
    }
}
#endif

#ifdef ROW_PER_THREAD
// CPU devices (lavapipe): one invocation per (LANE_ROWS rows — 1, or a RoPE pair — chunk of TC
// columns), the rows' tasks in ascending order — no barriers, which a CPU driver pays for per
// workgroup (except NORM_OUT's two per pass over WG rows, for the block sums).
void main() {
    Args p = args();
    uint tasks = p.K / TASK_VALUES;
    uint t0 = gl_WorkGroupID.y * uint(TC);
    uint lid = gl_LocalInvocationID.x;
    uint span = uint(WG) * uint(LANE_ROWS);
#ifdef NORM_SUMS
    float ssum[TC];
    // column c's sum of squares from its block sums: the GPU path's chains and tree, in turn
    [[unroll]] for (int c = 0; c < TC; c++) {
        float ch[NSC];
        uint t = min(t0 + uint(c), p.T - 1u);
        for (uint q = 0u; q < NSC; q++) ch[q] = sums_chain(p, t, q);
        for (uint s = NSC / 2u; s > 0u; s >>= 1) {
            for (uint l = 0u; l < s; l++) ch[l] = ch[l] + ch[l + s];
        }
        ssum[c] = ch[0];
    }
#endif
    // (the loop bound is uniform over the workgroup: NORM_OUT's barriers are inside)
    for (uint it = gl_WorkGroupID.x; it * span < p.N; it += gl_NumWorkGroups.x) {
        uint n0 = (it * uint(WG) + lid) * uint(LANE_ROWS);
        if (n0 < p.N) {
            float acc[TC][NR];
            float ss[TC];
            [[unroll]] for (int c = 0; c < TC; c++) {
                ss[c] = 0.0;
                [[unroll]] for (int j = 0; j < NR; j++) acc[c][j] = 0.0;
            }
            for (uint u = 0u; u < tasks; u++) add_task(p, n0, u, t0, acc, ss);
#ifdef NORM_SUMS
            [[unroll]] for (int c = 0; c < TC; c++) ss[c] = ssum[c];
#endif
            for (int c = 0; c < TC; c++) {
                uint t = t0 + uint(c);
                [[unroll]] for (int j = 0; j < LANE_ROWS; j++) {
                    if (t < p.T && n0 + uint(j) < p.N) {
                        float v = epilogue(p, acc[c][j], acc[c][UP + j], ss[c], out_row(n0 + uint(j)), t);
#ifdef ROPE
                        int q = j ^ 1;
                        float pair = epilogue(p, acc[c][q], acc[c][UP + q], ss[c], out_row(n0 + uint(q)), t);
#else
                        float pair = 0.0;
#endif
                        store_out(p, v, pair, n0 + uint(j), t);
#ifdef NORM_OUT
                        // (LANE_ROWS is 1 here: no RoPE pair)
                        norm_out_store(p, v, n0, t);
                        blk[c][lid] = v;
#endif
                    }
                }
            }
        }
#ifdef NORM_OUT
        barrier();
        norm_out_sums(p, it * uint(WG), t0, lid);
        barrier();
#endif
    }
}
#else
// GPUs: WG / NT lane groups per workgroup, each of NT lanes and LANE_ROWS rows. Lane i takes
// tasks i, i + NT, ... of its rows in ascending order (the activations read once for all the
// rows), then the NT partial sums of each (row, column) are added over a fixed tree. The order
// depends on K and NT alone — not on T, the chunk of columns, LANE_ROWS or the other rows — so
// a token's result is the same bits however many tokens share a step.
const uint GROUPS = uint(WG) / uint(NT);
const uint ROWS = GROUPS * uint(LANE_ROWS);
#if defined(NORM) || defined(SUMS_IN_TREE)
const int NRED = TC * NR + TC;
#else
const int NRED = TC * NR;
#endif
shared float red[NRED][WG];

#if defined(NORM_SUMS) && !defined(SUMS_IN_TREE)
// Each column's NSC chains, then (in place, by the tree) its sum of squares at [c][0].
shared float nsc[TC][NSC];
#endif
#if defined(SUMS_IN_TREE) && (!defined(NORM_SUMS) || NT != 64)
#error "SUMS_IN_TREE is a way of NORM_SUMS for lane groups of NSC (64) lanes"
#endif

void main() {
    Args p = args();
    uint tid = gl_LocalInvocationID.x, lane = tid % uint(NT), grp = tid / uint(NT);
    uint tasks = p.K / TASK_VALUES;
    uint t0 = gl_WorkGroupID.y * uint(TC);
#if defined(NORM_SUMS) && !defined(SUMS_IN_TREE)
    // The columns' sums of squares from their block sums (sums_chain's order): the chains on
    // separate invocations, then the tree's levels in shared memory. (SUMS_IN_TREE, where a
    // lane group has NSC lanes: lane q takes chain q after its tasks and the chains meet over
    // the dot sums' own tree — the same pairs in the same order, no barriers of their own.)
    for (uint i = tid; i < uint(TC) * NSC; i += uint(WG)) {
        uint c = i / NSC;
        nsc[c][i % NSC] = sums_chain(p, min(t0 + c, p.T - 1u), i % NSC);
    }
    barrier();
    for (uint s = NSC / 2u; s > 0u; s >>= 1) {
        for (uint i = tid; i < uint(TC) * s; i += uint(WG)) {
            uint c = i / s, l = i % s;
            nsc[c][l] = nsc[c][l] + nsc[c][l + s];
        }
        barrier();
    }
#endif
    // The loop bound is uniform over the workgroup (barriers inside); rows past N idle.
    for (uint g = gl_WorkGroupID.x; g * ROWS < p.N; g += gl_NumWorkGroups.x) {
        uint n0 = g * ROWS + grp * uint(LANE_ROWS);
        bool live = n0 < p.N;
        float acc[TC][NR];
        float ss[TC];
        [[unroll]] for (int c = 0; c < TC; c++) {
            ss[c] = 0.0;
            [[unroll]] for (int j = 0; j < NR; j++) acc[c][j] = 0.0;
        }
#ifdef TASK_PAIRS
        // (A measurement: NX_VULKAN_LLM_TASK_PAIRS=1.) Two tasks per loop step, in the same
        // order (so the same bits), so that the second task's loads can be issued before the
        // first task's arithmetic: twice the bytes in flight per lane.
        uint u = lane;
        for (; live && u + uint(NT) < tasks; u += 2u * uint(NT)) {
            add_task(p, n0, u, t0, acc, ss);
            add_task(p, n0, u + uint(NT), t0, acc, ss);
        }
        if (live && u < tasks) add_task(p, n0, u, t0, acc, ss);
#else
        for (uint u = lane; live && u < tasks; u += uint(NT)) add_task(p, n0, u, t0, acc, ss);
#endif
#ifdef SUMS_IN_TREE
        [[unroll]] for (int c = 0; c < TC; c++) ss[c] = sums_chain(p, min(t0 + uint(c), p.T - 1u), lane);
#endif
        [[unroll]] for (int c = 0; c < TC; c++) {
            [[unroll]] for (int j = 0; j < NR; j++) red[c * NR + j][tid] = acc[c][j];
#if defined(NORM) || defined(SUMS_IN_TREE)
            red[TC * NR + c][tid] = ss[c];
#endif
        }
        barrier();
        // The fixed tree (level s: lane l < s absorbs lane l + s). Where SUBGROUP_TREE, its
        // levels below the subgroup size run in registers by subgroupShuffleDown — the same
        // pairs in the same order (so the same bits), and 3 barriers instead of 7 for 64 lanes
        // on a 32-wide subgroup (a lane group narrower than a subgroup lies inside one).
#ifdef SUBGROUP_TREE
        uint lowest = gl_SubgroupSize;
#else
        const uint lowest = 1u;
#endif
        [[unroll]] for (uint s = uint(NT) / 2u; s >= lowest; s >>= 1) {
            if (lane < s) {
                [[unroll]] for (int c = 0; c < NRED; c++) red[c][tid] += red[c][tid + s];
            }
            barrier();
        }
#ifdef SUBGROUP_TREE
        {
            float v[NRED];
            [[unroll]] for (int c = 0; c < NRED; c++) v[c] = red[c][tid];
            for (uint s = min(uint(NT), gl_SubgroupSize) / 2u; s > 0u; s >>= 1) {
                [[unroll]] for (int c = 0; c < NRED; c++) v[c] = v[c] + subgroupShuffleDown(v[c], s);
            }
            if (lane == 0u) {
                [[unroll]] for (int c = 0; c < NRED; c++) red[c][tid] = v[c];
            }
        }
        barrier();
#endif
        uint base = grp * uint(NT);
        for (uint o = lane; o < uint(LANE_ROWS * TC); o += uint(NT)) {
            uint j = o / uint(TC), c = o % uint(TC);
            uint n = n0 + j, t = t0 + c;
            if (live && n < p.N && t < p.T) {
#if defined(NORM) || defined(SUMS_IN_TREE)
                float sq = red[TC * NR + int(c)][base];
#elif defined(NORM_SUMS)
                float sq = nsc[c][0];
#else
                float sq = 0.0;
#endif
                float v = epilogue(p, red[int(c) * NR + int(j)][base], red[int(c) * NR + UP + int(j)][base], sq, out_row(n), t);
#ifdef ROPE
                uint q = j ^ 1u;   // the pair's row: in this lane group (LANE_ROWS is even)
                float pair = epilogue(p, red[int(c) * NR + int(q)][base], red[int(c) * NR + UP + int(q)][base], sq, out_row(n0 + q), t);
#else
                float pair = 0.0;
#endif
                store_out(p, v, pair, n, t);
#ifdef NORM_OUT
                norm_out_store(p, v, n, t);
                blk[c][grp * uint(LANE_ROWS) + j] = v;
#endif
            }
        }
        barrier();
#ifdef NORM_OUT
        norm_out_sums(p, g * ROWS, t0, tid);
        barrier();
#endif
    }
}
#endif
