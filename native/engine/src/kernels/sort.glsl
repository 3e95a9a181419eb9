// Sorting kernels (sort, argsort, top_k): a bitonic sort of (key, index) pairs per row.
//
// Every element becomes a 64-bit key whose unsigned order is Nx.BinaryBackend's order
// (floats: -Inf < ... < -0.0 == +0.0 < ... < +Inf < NaN; :desc complements the key), paired
// with its position in the row. Pairs are compared lexicographically, so the order is total
// and the sort is stable by construction in both directions (BinaryBackend's Enum.sort is
// stable: equal keys keep their original order). Rows are padded to a power of two P with
// (max key, max index), which sorts after every real element.
//
// The including Rust code defines: LOCAL (invocations), BLK (elements per shared-memory
// block), one of K_INIT / K_LOCAL / K_GLOBAL / K_OUT, and for K_INIT/K_OUT the element type
// macros STORE_T, BUF, DECODE(raw), KIND (0 float, 1 signed, 2 unsigned), DESC, RANK (number
// of non-sorted axes), for K_OUT: VALUES, INDICES, IDX_BUF, IDX_ENCODE(u64), and for K_GLOBAL:
// STEPS (steps per pass).
//
// Parameters: u64 slots 0 input, 1 keys, 2 indices (scratch), 3 values out, 4 indices out;
// int slots from 10: len, P, rows, k, in_offset, in_axis_stride, out_axis_stride, total,
// stage_k, stage_j, presort, then RANK x (size, in_stride, out_stride), outer to inner.

layout(local_size_x = LOCAL) in;
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Keys { uint64_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Idx { uint v[]; };

#define PU(i) ParamsU64(pc.params).v[i]
#define PI(i) ParamsI32(pc.params).v[i]
#define LEN PI(10)
#define PP uint(PI(11))
#define ROWS uint(PI(12))
#define KOUT uint(PI(13))
#define IN_OFFSET PI(14)
#define IN_AXIS PI(15)
#define OUT_AXIS PI(16)
#define TOTAL uint(PI(17))
#define STAGE_K uint(PI(18))
#define STAGE_J uint(PI(19))
#define PRESORT (PI(20) != 0)

#if defined(K_INIT) || defined(K_OUT)
// Offsets of row r's first element in the input (strided view) and in the output.
void row_offsets(uint r, out int in_off, out int out_off) {
    in_off = IN_OFFSET;
    out_off = 0;
    uint rest = r;
    for (int d = RANK - 1; d >= 0; d--) {
        uint n = uint(PI(21 + 3 * d));
        int c = int(rest % n);
        rest /= n;
        in_off += c * PI(22 + 3 * d);
        out_off += c * PI(23 + 3 * d);
    }
}
#endif

#ifdef K_INIT
uint64_t key_of(STORE_T raw) {
#if KIND == 0
    double d = DECODE(raw);
    uint64_t b = nx_f64_to_bits(d);
    if (nx_isnan(d)) b = 0xFFFFFFFFFFFFFFFFul;
    else if ((b << 1) == 0ul) b = 0x8000000000000000ul; // -0.0 ties with +0.0
    else b = ((b >> 63) != 0ul) ? ~b : (b | 0x8000000000000000ul);
#elif KIND == 1
    uint64_t b = uint64_t(DECODE(raw)) ^ 0x8000000000000000ul;
#else
    uint64_t b = uint64_t(DECODE(raw));
#endif
#ifdef DESC
    b = ~b;
#endif
    return b;
}

void main() {
    Keys keys = Keys(PU(1));
    Idx idx = Idx(PU(2));
    uint total = TOTAL;
    uint p2 = PP;
    uint logp = uint(findMSB(p2));
    for (uint g = gl_GlobalInvocationID.x; g < total; g += gl_NumWorkGroups.x * LOCAL) {
        uint r = g >> logp;
        uint p = g & (p2 - 1u);
        if (r < ROWS && p < uint(LEN)) {
            int in_off, out_off;
            row_offsets(r, in_off, out_off);
            STORE_T raw = BUF(PU(0)).v[uint(in_off + int(p) * IN_AXIS)];
            keys.v[g] = key_of(raw);
            idx.v[g] = p;
        } else {
            keys.v[g] = 0xFFFFFFFFFFFFFFFFul;
            idx.v[g] = 0xFFFFFFFFu;
        }
    }
}
#endif

#ifdef K_LOCAL
shared uint64_t sk[BLK];
shared uint si[BLK];

// Presort: every bitonic stage k <= min(P, BLK) of each block; merge: stage STAGE_K's steps
// j < BLK (the steps with j >= BLK ran as K_GLOBAL passes).
void main() {
    Keys keys = Keys(PU(1));
    Idx idx = Idx(PU(2));
    uint t = gl_LocalInvocationID.x;
    uint nblocks = TOTAL / BLK;
    uint p2 = PP;
    bool presort = PRESORT;
    uint k_first = presort ? 2u : STAGE_K;
    uint k_last = presort ? min(p2, uint(BLK)) : STAGE_K;
    for (uint b = gl_WorkGroupID.x; b < nblocks; b += gl_NumWorkGroups.x) {
        uint base = b * BLK;
        for (uint e = t; e < BLK; e += LOCAL) {
            sk[e] = keys.v[base + e];
            si[e] = idx.v[base + e];
        }
        barrier();
        for (uint k = k_first; k <= k_last; k <<= 1) {
            uint j_first = presort ? (k >> 1) : uint(BLK / 2);
            for (uint j = j_first; j > 0u; j >>= 1) {
                for (uint q = t; q < BLK / 2; q += LOCAL) {
                    uint i = 2u * q - (q & (j - 1u));
                    uint l = i + j;
                    bool asc = (((base + i) & (p2 - 1u)) & k) == 0u;
                    uint64_t ka = sk[i];
                    uint64_t kb = sk[l];
                    uint ia = si[i];
                    uint ib = si[l];
                    bool gt = ka > kb || (ka == kb && ia > ib);
                    if (gt == asc) {
                        sk[i] = kb; sk[l] = ka;
                        si[i] = ib; si[l] = ia;
                    }
                }
                barrier();
            }
        }
        for (uint e = t; e < BLK; e += LOCAL) {
            keys.v[base + e] = sk[e];
            idx.v[base + e] = si[e];
        }
        barrier();
    }
}
#endif

#ifdef K_GLOBAL
// STEPS consecutive compare-exchange steps of stage STAGE_K: distances STAGE_J, STAGE_J / 2,
// ... (each >= BLK). Elements whose indices differ only in those distances' bits exchange only
// among themselves, so each invocation loads such a group of 2^STEPS (indices i0 + m * jlo),
// runs the steps in registers in the usual order (largest distance first) and stores it back.
// Every pair is compared and exchanged as a one-step pass would: the same network.
#define NG (1u << STEPS)
void main() {
    Keys keys = Keys(PU(1));
    Idx idx = Idx(PU(2));
    uint p2 = PP;
    uint k = STAGE_K;
    uint jlo = STAGE_J >> (STEPS - 1u);
    uint lj = uint(findMSB(jlo));
    uint groups = TOTAL >> STEPS;
    for (uint q = gl_GlobalInvocationID.x; q < groups; q += gl_NumWorkGroups.x * LOCAL) {
        // q with STEPS zero bits inserted at bit lj
        uint i0 = ((q >> lj) << (lj + STEPS)) | (q & (jlo - 1u));
        // the stage's direction: bit k is the same for the whole group (k > STAGE_J)
        bool asc = ((i0 & (p2 - 1u)) & k) == 0u;
        uint64_t kv[NG];
        uint iv[NG];
        [[unroll]] for (uint m = 0u; m < NG; m++) {
            kv[m] = keys.v[i0 + m * jlo];
            iv[m] = idx.v[i0 + m * jlo];
        }
        [[unroll]] for (int s = int(STEPS) - 1; s >= 0; s--) {
            uint d = 1u << uint(s);
            [[unroll]] for (uint m = 0u; m < NG; m++) {
                if ((m & d) == 0u) {
                    uint64_t ka = kv[m];
                    uint64_t kb = kv[(m + d) & (NG - 1u)]; // (m + d < NG here)
                    uint ia = iv[m];
                    uint ib = iv[(m + d) & (NG - 1u)];
                    bool gt = ka > kb || (ka == kb && ia > ib);
                    if (gt == asc) {
                        kv[m] = kb; kv[(m + d) & (NG - 1u)] = ka;
                        iv[m] = ib; iv[(m + d) & (NG - 1u)] = ia;
                    }
                }
            }
        }
        [[unroll]] for (uint m = 0u; m < NG; m++) {
            keys.v[i0 + m * jlo] = kv[m];
            idx.v[i0 + m * jlo] = iv[m];
        }
    }
}
#endif

#ifdef K_OUT
// The first KOUT sorted positions of each row: values (the input's stored bits, moved as they
// are) and/or indices (converted to the index type).
void main() {
    Idx idx = Idx(PU(2));
    uint kout = KOUT;
    uint total = uint(pc.count);
    for (uint g = gl_GlobalInvocationID.x; g < total; g += gl_NumWorkGroups.x * LOCAL) {
        uint r = g / kout;
        uint p = g - r * kout;
        uint id = idx.v[r * PP + p];
        int in_off, out_off;
        row_offsets(r, in_off, out_off);
        uint o = uint(out_off + int(p) * OUT_AXIS);
#ifdef VALUES
        BUF(PU(3)).v[o] = BUF(PU(0)).v[uint(in_off + int(id) * IN_AXIS)];
#endif
#ifdef INDICES
        IDX_BUF(PU(4)).v[o] = IDX_ENCODE(uint64_t(id));
#endif
    }
}
#endif
