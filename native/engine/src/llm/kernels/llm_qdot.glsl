// Dot products of one *task* of a quantized weight row with activations, for the matvec
// (llm_matvec.glsl). A task is TASK_VALUES values of the row — a piece of the format's natural
// layout: with f32 activations 32 values (half a Q4_K/Q5_K sub-block pair, an eighth of a
// Q6_K/Q2_K/Q3_K half super-block, one Q8_0/Q4_0/Q4_1 block; small tasks keep every lane of a
// row busy and the registers per lane few), with int8 activations the whole quantization group
// of x — and the tasks of a row partition it: task t owns values
// [t·TASK_VALUES, (t+1)·TASK_VALUES) for the sum of squares of a fused RMSNorm, and whichever
// values its layout holds for the dot.
//
// The hot formats use the factored form ggml's own GPU kernels use: per scale group,
// Σ (d·q − m)·x = d·Σ q·x − m·Σ x, with the quant fields turned into floats by building the
// float's bits (2^23 + q, minus 2^23 — exact, and no integer-to-float conversion, which runs at
// a quarter of the FMA rate or less on NVIDIA GPUs) and wide loads of whole blocks. The sums are
// one explicit fma chain each, `precise`, so every column of every dispatch takes the same
// path: a column's bits never depend on its batch-mates. The values differ from the unit path
// (dequantize, then one chain) by rounding only; the kernel test bounds both against an f64 dot.
// Q5_0 and Q5_1 (and Q2_K and Q3_K with int8 activations) use the unit path: dq_unit (ggml's
// dequantization) and one fma chain.
//
// Opt-in int8 activations (X_INT8, every quantized format): each group of 32 activations
// (Q6_K: of 16, its weight scale group) becomes dx·round(x / dx) with dx = max|x| / 127, and
// the sums Σ q·xq exact integer dot products, four values an instruction.

#ifdef X_L2
layout(buffer_reference, std430, buffer_reference_align = 16) coherent readonly buffer BufV4 { vec4 v[]; };
#else
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer BufV4 { vec4 v[]; };
#endif
// The weights' loads. W_STREAM (a measurement): coherent, which keeps them out of the SM's L1
// on NVIDIA GPUs, so that streaming the matrix through it cannot evict the activations every
// lane group re-reads; the same values either way.
#ifdef W_STREAM
#define W_QUAL coherent readonly
#else
#define W_QUAL readonly
#endif
layout(buffer_reference, std430, buffer_reference_align = 16) W_QUAL buffer BufUV4 { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) W_QUAL buffer WU8 { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) W_QUAL buffer WU16 { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) W_QUAL buffer WU32 { uint v[]; };

// x'[xb + k .. xb + k + 4): the activations of one column (xb = its first element), times the
// RMSNorm weight gamma[k ..] with NORM (the norm's 1/rms is applied to the whole sum).
vec4 x4(uint64_t addrX, uint64_t addrG, uint xb, uint k) {
#ifdef X_VEC4
    precise vec4 v = BufV4(addrX).v[(xb + k) >> 2];
#else
    precise vec4 v = vec4(uintBitsToFloat(BufU32(addrX).v[xb + k]), uintBitsToFloat(BufU32(addrX).v[xb + k + 1u]),
                          uintBitsToFloat(BufU32(addrX).v[xb + k + 2u]), uintBitsToFloat(BufU32(addrX).v[xb + k + 3u]));
#endif
#ifdef NORM
    v = v * BufV4(addrG).v[k >> 2];
#endif
    return v;
}

float dot4(vec4 q, vec4 x, float acc) {
    precise float a = fma(q.x, x.x, acc);
    a = fma(q.y, x.y, a);
    a = fma(q.z, x.z, a);
    a = fma(q.w, x.w, a);
    return a;
}

float sum4(vec4 x, float acc) {
    precise float a = acc + x.x;
    a = a + x.y;
    a = a + x.z;
    a = a + x.w;
    return a;
}

// The four bytes of w as floats, each minus `bias` (exact for bytes < 2^8 and small integer
// biases): 2^23 + byte built from its bits, minus (2^23 + bias).
vec4 bytes_minus(uint w, float bias) {
    float o = 8388608.0 + bias;
    return vec4(uintBitsToFloat((w & 255u) | 0x4B000000u) - o, uintBitsToFloat(((w >> 8) & 255u) | 0x4B000000u) - o,
                uintBitsToFloat(((w >> 16) & 255u) | 0x4B000000u) - o, uintBitsToFloat((w >> 24) | 0x4B000000u) - o);
}

#ifdef QF_MANT
// QF_MANT (f32 activations, Q4_K and Q5_K; the default, NX_VULKAN_LLM_QUANT_MANTISSA=0 keeps
// bytes_minus): the `bits`-bit quants q at bit `lsb` of each byte of w as the floats
// 1 + q·2^-bits — the quant's bits moved to the top of 1.0's mantissa, a shift and a masked or
// per value (the compiler folds the constant shifts; Q4_K needs no nibble masks first), where
// bytes_minus also subtracts 2^23. The dots then sum (1 + q·2^-bits)·x; the task takes Σ x
// (which it sums anyway for the dmin term) back off, and the 2^bits rides on the sub-block's
// scale (an exact power of two). The sums' rounding grows with the 1 each value carries (worst
// 0.19-0.35 against 0.06-0.20 ε·Σ|w·x| in the kernel test, far inside its bound); every column
// still takes one fixed chain, so no bit depends on the batch. H100 (stop 47 run 1): a Q4_K
// 57344×4096 product 72.2 against 75.7 µs of device time, 8B decode +1.6 %. The same form for
// Q6_K, Q8_0 and Q4_0 (signed quants: u = q + 2^(bits−1), with a Σ x of their own per block to
// take 1.5·Σ x off) was no faster there (Q6_K +2 % device time, 8B Q8_0 decode −0.7 %): not kept.
uint move_bits(uint w, int by) { return by >= 0 ? (w << uint(by)) : (w >> uint(-by)); }
vec4 mant4(uint w, uint lsb, uint bits) {
    int top = 23 - int(bits);
    uint mask = ((1u << bits) - 1u) << uint(top);
    return vec4(uintBitsToFloat((move_bits(w, top - int(lsb)) & mask) | 0x3F800000u),
                uintBitsToFloat((move_bits(w, top - 8 - int(lsb)) & mask) | 0x3F800000u),
                uintBitsToFloat((move_bits(w, top - 16 - int(lsb)) & mask) | 0x3F800000u),
                uintBitsToFloat((move_bits(w, top - 24 - int(lsb)) & mask) | 0x3F800000u));
}
#endif

// An f16 (low 16 bits of h) as an f32 — exactly, as every f16 is one, without a branch: the
// device's conversion (one instruction) for normal values; zero and subnormals as m · 2^-24
// built from bits (a device may flush f16 subnormals in its conversion), Inf and NaN from bits
// (a device may canonicalise a NaN); the same bits on every device. Selects, not branches: a
// branch here, inside the products' unrolled row loops, cost most of what the device's
// conversion saves (H100, stop 44 runs 3-4: 8B decode 202 tok/s with the software conversion,
// 246 with the device's alone, 217 with the device's behind a branch for the rare cases; stop
// 45 run 1: 229 with these selects), so where a probe finds the device's conversion exact for
// every f16 (F16_HW_EXACT, kernels.rs), it is used alone.
float f16_exact(uint h) {
#ifdef F16_HW_EXACT
    // (a device whose conversion a probe found exact for all 65,536 values: kernels.rs)
    return unpackHalf2x16(h).x;
#endif
    uint e = h & 0x7C00u, m = h & 0x3FFu, sign = (h & 0x8000u) << 16;
    float hw = unpackHalf2x16(h).x;
    precise float sub = (uintBitsToFloat(0x4B000000u | m) - 8388608.0) * 5.9604644775390625e-08;
    float subs = uintBitsToFloat(floatBitsToUint(sub) | sign);
    float special = uintBitsToFloat(sign | 0x7F800000u | (m << 13));
    // (mix with a bool is a select in SPIR-V; a nested ?: may compile to branches)
    return mix(mix(hw, special, e == 0x7C00u), subs, e == 0u);
}

// A signed byte's value as a float, built from its bits (exact) instead of converted.
float s8_float(uint b) { return uintBitsToFloat(0x4B000000u | ((b & 0xFFu) ^ 0x80u)) - 8388736.0; }

// The 32-bit word at byte `off` (a multiple of 2) of a 2-aligned block, from two 16-bit loads.
uint w16x2(uint64_t a, uint off) { return uint(WU16(a).v[off >> 1]) | (uint(WU16(a).v[(off >> 1) + 1u]) << 16); }

#ifdef X_INT8
float max4(vec4 v) { return max(max(v.x, v.y), max(v.z, v.w)); }
// round(v · inv) for |v · inv| ≤ 127, packed as four int8: one fma onto 1.5·2^23 rounds to an
// integer whose two's complement is the float's low byte.
int pack_q8(vec4 v, float inv) {
    precise vec4 r = fma(v, vec4(inv), vec4(12582912.0));
    uvec4 b = floatBitsToUint(r);
    return int(bitfieldInsert(bitfieldInsert(bitfieldInsert(b.x & 255u, b.y, 8, 8), b.z, 16, 8), b.w, 24, 8));
}
// A quantization group of activations as int8 (its own scale for every row and batch
// composition): dx = max|x| / 127, xq = round(x / dx), four to an int in p; returns dx. An
// all-zero group gives dx = 0 and xq = 0.
float quant_x8(vec4 v[8], out int p[8]) {
    float amax = 0.0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) amax = max(amax, max4(abs(v[i])));
    float inv = amax > 0.0 ? 127.0 / amax : 0.0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) p[i] = pack_q8(v[i], inv);
    return amax / 127.0;
}
float quant_x4(vec4 v[4], out int p[4]) {
    float amax = 0.0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) amax = max(amax, max4(abs(v[i])));
    float inv = amax > 0.0 ? 127.0 / amax : 0.0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) p[i] = pack_q8(v[i], inv);
    return amax / 127.0;
}
// Four quants (the bytes of w) as the signed bytes q − 8 (4-bit, Q4_0) or q − 32 (6-bit, Q6_K):
// each byte lifted by 0x80 first, so the subtraction never borrows across bytes.
int s8_minus8(uint w) { return int(((w | 0x80808080u) - 0x08080808u) ^ 0x80808080u); }
int s8_minus32(uint w) { return int(((w | 0x80808080u) - 0x20202020u) ^ 0x80808080u); }
#endif

// Each format's task_acc adds task `task` of NR weight rows (addresses rows[0 .. NR)) to
// acc[c][0 .. NR) for the columns c < ncols of x (column c at xb0 + c·K): the activations are
// read once and shared by the rows (the rows of a matvec all read the same x, so re-reading it
// per row makes x, not the weights, most of the memory traffic: Q8_0 and Q4_1 decode ran 1.5-1.6×
// faster once they stopped, stop 38), the weights of Q4_K/Q5_K/Q8_0/Q4_0/Q4_1 are loaded once
// for all the columns, and each (row, column) result is the same chain it would be alone.
#if defined(WT_Q4_K) || defined(WT_Q5_K)
// Super-blocks of 256 — Q4_K: 144 bytes (d, dmin, scales[12], qs[128]); Q5_K: 176 bytes (d,
// dmin, scales[12], qh[32], qs[128]). Task (s, m): sub-blocks 2m (low nibbles of qs[32m ..+32])
// and 2m+1 (high nibbles) = values 64m .. 64m+63; Q5_K's fifth bit of value l of sub-block j is
// bit j of qh[l]. Both block sizes keep 16-byte alignment: 16-byte loads (the header, and per
// 16 values of each sub-block one of qs and, Q5_K, one of qh), and each value's quant built
// whole before its one conversion.
#if defined(WT_Q4_K)
const uint KBLOCK = 144u, KQS = 16u, KQ_BITS = 4u;
#else
const uint KBLOCK = 176u, KQS = 48u, KQ_BITS = 5u;
#endif
#ifndef X_INT8
// With f32 activations, half tasks (s, m, f): values 16f .. 16f+15 of both sub-blocks of the
// pair — one 16-byte load of qs (and of qh) per row, words i < 4 below. Twice the tasks of
// whole pairs, so a 2,048-wide row fills 64 lanes, and fewer registers per lane: decode
// +9-11 % on the 1B and 8B shapes (H100, stop 38 run 5). (The int8 form quantizes x per
// whole sub-block.)
#define KQ_SPLIT
#define TASK_VALUES 32u
const uint KQ_I = 4u;
#else
#define TASK_VALUES 64u
const uint KQ_I = 8u;
#endif
// The quants of values 4i .. 4i+3 of sub-blocks 2m (lo) and 2m+1 (hi), one per byte.
void kq_words(uvec4 q0, uvec4 q1, uvec4 h0, uvec4 h1, uint m, uint i, out uint lo, out uint hi) {
    uint w = i < 4u ? q0[i] : q1[i - 4u];
    lo = w & 0x0F0F0F0Fu;
    hi = (w >> 4) & 0x0F0F0F0Fu;
#if defined(WT_Q5_K)
    uint h = i < 4u ? h0[i] : h1[i - 4u];
    lo |= ((h >> (2u * m)) & 0x01010101u) << 4;
    hi |= ((h >> (2u * m + 1u)) & 0x01010101u) << 4;
#endif
}
// Values 4i .. 4i+3 of sub-blocks 2m (lo) and 2m+1 (hi) as floats for the f32 dots: q, or
// with QF_MANT 1 + q·2^-KQ_BITS (Q4_K's straight from the word of qs: no nibble masks).
void kq_floats(uvec4 q0, uvec4 q1, uvec4 h0, uvec4 h1, uint m, uint i, out vec4 lo4, out vec4 hi4) {
#if defined(QF_MANT) && defined(WT_Q4_K)
    uint w = i < 4u ? q0[i] : q1[i - 4u];
    lo4 = mant4(w, 0u, 4u);
    hi4 = mant4(w, 4u, 4u);
#else
    uint lo, hi;
    kq_words(q0, q1, h0, h1, m, i, lo, hi);
#ifdef QF_MANT
    lo4 = mant4(lo, 0u, KQ_BITS);
    hi4 = mant4(hi, 0u, KQ_BITS);
#else
    lo4 = bytes_minus(lo, 0.0);
    hi4 = bytes_minus(hi, 0.0);
#endif
#endif
}
// A task's term from its two sub-blocks' dots sa, sb (of q·x, or with QF_MANT of
// (1 + q·2^-KQ_BITS)·x) and their Σ x (xa, xh): the scales da, db (with QF_MANT times 2^KQ_BITS)
// on the dots, the mins ma, mb on the Σ x — one expression for both sum paths below.
float kq_pair_term(float da, float ma, float db, float mb, float sa, float sb, float xa, float xh) {
#ifdef QF_MANT
    precise float t = da * (sa - xa) - ma * xa;
    t = t + (db * (sb - xh) - mb * xh);
#else
    precise float t = da * sa - ma * xa;
    t = t + (db * sb - mb * xh);
#endif
    return t;
}
void task_acc(uint64_t rows[NR], uint task, uint64_t addrX, uint64_t addrG, uint xb0, uint K, uint ncols, inout float acc[TC][NR]) {
#ifdef KQ_SPLIT
    uint s = task >> 3, m = (task >> 1) & 3u, f = task & 1u;
#else
    uint s = task >> 2, m = task & 3u, f = 0u;
#endif
    uvec4 q0[NR], q1[NR], h0[NR], h1[NR];
    float da[NR], ma[NR], db[NR], mb[NR];
    [[unroll]] for (int r = 0; r < NR; r++) {
        uint64_t blk = rows[r] + uint64_t(s * KBLOCK);
        uvec4 hd = BufUV4(blk).v[0];
        q0[r] = BufUV4(blk + uint64_t(KQS + 32u * m + 16u * f)).v[0];
#ifdef KQ_SPLIT
        q1[r] = uvec4(0u);
#else
        q1[r] = BufUV4(blk + uint64_t(KQS + 16u + 32u * m)).v[0];
#endif
#if defined(WT_Q5_K)
        h0[r] = BufUV4(blk + uint64_t(16u + 16u * f)).v[0];
#ifdef KQ_SPLIT
        h1[r] = uvec4(0u);
#else
        h1[r] = BufUV4(blk + 32ul).v[0];
#endif
#else
        h0[r] = uvec4(0u); h1[r] = uvec4(0u);
#endif
        float d = f16_exact(hd.x & 0xFFFFu), dmin = f16_exact(hd.x >> 16);
        // Both sub-blocks' 6-bit scales and mins at once, without a branch per lane (ggml's
        // get_scale_min_k4 for j = 2m, 2m + 1): bytes 2(m & 1) and 2(m & 1) + 1 of each scale
        // word, and floats built from their bits (exact) instead of converted.
        uint sh = (m & 1u) * 16u;
        uint A = (hd.y >> sh) & 0xFFFFu, B = (hd.z >> sh) & 0xFFFFu, C = (hd.w >> sh) & 0xFFFFu;
        uint sp = m < 2u ? (A & 0x3F3Fu) : ((C & 0x0F0Fu) | ((A >> 2) & 0x3030u));
        uint mp = m < 2u ? (B & 0x3F3Fu) : (((C >> 4) & 0x0F0Fu) | ((B >> 2) & 0x3030u));
        vec4 sm = bytes_minus(sp | (mp << 16), 0.0);
        precise float a = d * sm.x, b = dmin * sm.z, c = d * sm.y, e = dmin * sm.w;
#ifdef QF_MANT
        a = a * float(1u << KQ_BITS);   // exact: the sums below are 2^-KQ_BITS of Σ q·x
        c = c * float(1u << KQ_BITS);
#endif
        da[r] = a; ma[r] = b; db[r] = c; mb[r] = e;
    }
    uint k0 = s * 256u + 64u * m + 16u * f;
#ifdef X_INT8
    // Opt-in int8 activations: each sub-block's 32 values of x as dx·xq (dx = max|x| / 127,
    // xq = round(x / dx), the same for every row and batch composition), then Σ q·xq as exact
    // integer dot products, four values an instruction; Σ x (the dmin term) stays the exact f32
    // sum.
    [[unroll]] for (int c = 0; c < TC; c++) {
        if (TC == 1 || uint(c) < ncols) {
            uint xb = xb0 + uint(c) * K;
            vec4 xl[8], xu[8];
            precise float xa = 0.0, xh = 0.0;
            [[unroll]] for (uint i = 0u; i < 8u; i++) {
                xl[i] = x4(addrX, addrG, xb, k0 + 4u * i);
                xu[i] = x4(addrX, addrG, xb, k0 + 32u + 4u * i);
                xa = sum4(xl[i], xa);
                xh = sum4(xu[i], xh);
            }
            int pa[8], pb[8];
            float dx_a = quant_x8(xl, pa), dx_b = quant_x8(xu, pb);
            [[unroll]] for (int r = 0; r < NR; r++) {
                int ia = 0, ib = 0;
                [[unroll]] for (uint i = 0u; i < 8u; i++) {
                    uint lo, hi;
                    kq_words(q0[r], q1[r], h0[r], h1[r], m, i, lo, hi);
                    ia += dotPacked4x8EXT(int(lo), pa[i]);
                    ib += dotPacked4x8EXT(int(hi), pb[i]);
                }
                precise float t = da[r] * (dx_a * float(ia)) - ma[r] * xa;
                t = t + (db[r] * (dx_b * float(ib)) - mb[r] * xh);
                acc[c][r] = acc[c][r] + t;
            }
        }
    }
    return;
#endif
#if defined(BATCH_SHARE) && TC > 1
    // (The default; NX_VULKAN_LLM_BATCH_SHARE=0 turns it off.) Steps of several columns: each quant word
    // made floats once for all the columns instead of once per column; every (row, column) sum
    // is still its own chain in the same order, so the bits are the per-column path's.
    float sa[TC][NR], sb[TC][NR], xa[TC], xh[TC];
    [[unroll]] for (int c = 0; c < TC; c++) {
        xa[c] = 0.0; xh[c] = 0.0;
        [[unroll]] for (int r = 0; r < NR; r++) { sa[c][r] = 0.0; sb[c][r] = 0.0; }
    }
    [[unroll]] for (uint i = 0u; i < KQ_I; i++) {
        vec4 wl[NR], wh[NR];
        [[unroll]] for (int r = 0; r < NR; r++) {
            kq_floats(q0[r], q1[r], h0[r], h1[r], m, i, wl[r], wh[r]);
        }
        [[unroll]] for (int c = 0; c < TC; c++) {
            if (TC == 1 || uint(c) < ncols) {
                uint xb = xb0 + uint(c) * K;
                vec4 xl = x4(addrX, addrG, xb, k0 + 4u * i);
                vec4 xu = x4(addrX, addrG, xb, k0 + 32u + 4u * i);
                xa[c] = sum4(xl, xa[c]);
                xh[c] = sum4(xu, xh[c]);
                [[unroll]] for (int r = 0; r < NR; r++) {
                    sa[c][r] = dot4(wl[r], xl, sa[c][r]);
                    sb[c][r] = dot4(wh[r], xu, sb[c][r]);
                }
            }
        }
    }
    [[unroll]] for (int c = 0; c < TC; c++) {
        if (TC == 1 || uint(c) < ncols) {
            [[unroll]] for (int r = 0; r < NR; r++) {
                acc[c][r] = acc[c][r] + kq_pair_term(da[r], ma[r], db[r], mb[r], sa[c][r], sb[c][r], xa[c], xh[c]);
            }
        }
    }
#else
    [[unroll]] for (int c = 0; c < TC; c++) {
        if (TC == 1 || uint(c) < ncols) {
            uint xb = xb0 + uint(c) * K;
            float sa[NR], sb[NR];
            [[unroll]] for (int r = 0; r < NR; r++) { sa[r] = 0.0; sb[r] = 0.0; }
            precise float xa = 0.0, xh = 0.0;
            [[unroll]] for (uint i = 0u; i < KQ_I; i++) {
                vec4 xl = x4(addrX, addrG, xb, k0 + 4u * i);
                vec4 xu = x4(addrX, addrG, xb, k0 + 32u + 4u * i);
                xa = sum4(xl, xa);
                xh = sum4(xu, xh);
                [[unroll]] for (int r = 0; r < NR; r++) {
                    vec4 wl, wh;
                    kq_floats(q0[r], q1[r], h0[r], h1[r], m, i, wl, wh);
                    sa[r] = dot4(wl, xl, sa[r]);
                    sb[r] = dot4(wh, xu, sb[r]);
                }
            }
            [[unroll]] for (int r = 0; r < NR; r++) {
                acc[c][r] = acc[c][r] + kq_pair_term(da[r], ma[r], db[r], mb[r], sa[r], sb[r], xa, xh);
            }
        }
    }
#endif
}
#elif defined(WT_Q6_K)
// Super-blocks of 256 (210 bytes: ql[128], qh[64], scales[16] int8, d); value (n, r, l) of
// half n, quarter r, l < 32 is (ql[64n + 32(r&1) + l] nibble r/2 | ((qh[32n + l] >> 2r) & 3) << 4)
// − 32, times d·scales[8n + 2r + l/16]. Task (s, n, h): l in [16h, 16h + 16) of all four
// quarters: 16 + 16 bytes of ql, 16 of qh, four scales. 210-byte blocks are only 2-aligned:
// the quants in aligned 32-bit words (w16x8), the scales and d in 8- and 16-bit loads.
#ifndef X_INT8
// With f32 activations, half tasks (s, n, h, g): l in [16h + 8g, +8) of the four quarters —
// 8 + 8 bytes of ql and 8 of qh per row, as Q4_K's halves: decode +10-19 % on the 1B
// Q4_K_M-like file, +3 % on the 8B one (H100, stop 38 run 6). The int8 form quantizes x per
// whole 16-value scale group.
#define Q6_SPLIT
#define TASK_VALUES 32u
#else
#define TASK_VALUES 64u
#endif
// 8 bytes at byte `off` (even) of a 2-aligned block: three aligned 32-bit loads, shifted as
// w16x8's.
uvec2 w16x4(uint64_t blk, uint off) {
    uint64_t a = blk + uint64_t(off);
    uint64_t base = a & ~3ul;
    uint w0 = WU32(base).v[0], w1 = WU32(base).v[1], w2 = WU32(base).v[2];
    if ((uint(a) & 2u) == 0u) return uvec2(w0, w1);
    return uvec2((w0 >> 16) | (w1 << 16), (w1 >> 16) | (w2 << 16));
}
// 16 bytes at byte `off` (even) of a 2-aligned block: five aligned 32-bit loads, the words
// shifted by 16 bits where the start is 2 mod 4 (eight 16-bit loads otherwise). The fifth word
// stays inside the block for every range read here.
uvec4 w16x8(uint64_t blk, uint off) {
    uint64_t a = blk + uint64_t(off);
    uint64_t base = a & ~3ul;
    uint w0 = WU32(base).v[0], w1 = WU32(base).v[1], w2 = WU32(base).v[2], w3 = WU32(base).v[3], w4 = WU32(base).v[4];
    if ((uint(a) & 2u) == 0u) return uvec4(w0, w1, w2, w3);
    return uvec4((w0 >> 16) | (w1 << 16), (w1 >> 16) | (w2 << 16), (w2 >> 16) | (w3 << 16), (w3 >> 16) | (w4 << 16));
}
// The 6-bit quants (before the −32) of four values of each quarter 0..3, one per byte, from
// one word of ql's first and second 32 bytes of the half (a, b) and the word of qh beside them.
uvec4 q6_quarters(uint a, uint b, uint hh) {
    return uvec4((a & 0x0F0F0F0Fu) | ((hh & 0x03030303u) << 4), (b & 0x0F0F0F0Fu) | (((hh >> 2) & 0x03030303u) << 4),
                 ((a >> 4) & 0x0F0F0F0Fu) | (((hh >> 4) & 0x03030303u) << 4), ((b >> 4) & 0x0F0F0F0Fu) | (((hh >> 6) & 0x03030303u) << 4));
}
void task_acc_col(uint64_t rows[NR], uint task, uint64_t addrX, uint64_t addrG, uint xb, inout float acc[NR]) {
#ifdef Q6_SPLIT
    uint s = task >> 3, n = (task >> 2) & 1u, h = (task >> 1) & 1u;
    uint l0 = 16u * h + 8u * (task & 1u);
    const uint WORDS = 2u;
#else
    uint s = task >> 2, n = (task >> 1) & 1u, h = task & 1u;
    uint l0 = 16u * h;
    const uint WORDS = 4u;
#endif
    uint kb = s * 256u + n * 128u + l0;
    float part[NR][4];
    uvec4 qa[NR], qb[NR], qhh[NR];
    [[unroll]] for (int r = 0; r < NR; r++) {
        part[r][0] = 0.0; part[r][1] = 0.0; part[r][2] = 0.0; part[r][3] = 0.0;
        uint64_t blk = rows[r] + uint64_t(s * 210u);
#ifdef Q6_SPLIT
        qa[r] = uvec4(w16x4(blk, 64u * n + l0), 0u, 0u);
        qb[r] = uvec4(w16x4(blk, 64u * n + 32u + l0), 0u, 0u);
        qhh[r] = uvec4(w16x4(blk, 128u + 32u * n + l0), 0u, 0u);
#else
        qa[r] = w16x8(blk, 64u * n + l0);
        qb[r] = w16x8(blk, 64u * n + 32u + l0);
        qhh[r] = w16x8(blk, 128u + 32u * n + l0);
#endif
    }
    [[unroll]] for (uint i = 0u; i < WORDS; i++) {
        vec4 x0 = x4(addrX, addrG, xb, kb + 4u * i);
        vec4 x1 = x4(addrX, addrG, xb, kb + 32u + 4u * i);
        vec4 x2 = x4(addrX, addrG, xb, kb + 64u + 4u * i);
        vec4 x3 = x4(addrX, addrG, xb, kb + 96u + 4u * i);
        [[unroll]] for (int r = 0; r < NR; r++) {
            uvec4 q = q6_quarters(qa[r][i], qb[r][i], qhh[r][i]);
            part[r][0] = dot4(bytes_minus(q.x, 32.0), x0, part[r][0]);
            part[r][1] = dot4(bytes_minus(q.y, 32.0), x1, part[r][1]);
            part[r][2] = dot4(bytes_minus(q.z, 32.0), x2, part[r][2]);
            part[r][3] = dot4(bytes_minus(q.w, 32.0), x3, part[r][3]);
        }
    }
    [[unroll]] for (int r = 0; r < NR; r++) {
        uint64_t blk = rows[r] + uint64_t(s * 210u);
        float d = f16_exact(uint(WU16(blk).v[104]));
        precise float t = 0.0;
        [[unroll]] for (uint q = 0u; q < 4u; q++) {
            precise float ds = d * s8_float(uint(WU8(blk).v[192u + 8u * n + 2u * q + h]));
            t = t + ds * part[r][q];
        }
        acc[r] = acc[r] + t;
    }
}
#ifdef X_INT8
// Opt-in int8 activations: each quarter's 16 values of x (one weight scale group) as dx·xq
// (quant_x4), then Σ (q − 32)·xq as integer dot products.
void task_acc_col_int8(uint64_t rows[NR], uint task, uint64_t addrX, uint64_t addrG, uint xb, inout float acc[NR]) {
    uint s = task >> 2, n = (task >> 1) & 1u, h = task & 1u;
    uint l0 = 16u * h;
    uint kb = s * 256u + n * 128u + l0;
    int p[4][4];
    float dx[4];
    [[unroll]] for (uint q = 0u; q < 4u; q++) {
        vec4 v[4];
        [[unroll]] for (uint i = 0u; i < 4u; i++) v[i] = x4(addrX, addrG, xb, kb + 32u * q + 4u * i);
        dx[q] = quant_x4(v, p[q]);
    }
    [[unroll]] for (int r = 0; r < NR; r++) {
        uint64_t blk = rows[r] + uint64_t(s * 210u);
        uvec4 qa = w16x8(blk, 64u * n + l0), qb = w16x8(blk, 64u * n + 32u + l0), qhh = w16x8(blk, 128u + 32u * n + l0);
        int iq[4] = int[4](0, 0, 0, 0);
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            uvec4 q = q6_quarters(qa[i], qb[i], qhh[i]);
            [[unroll]] for (uint j = 0u; j < 4u; j++) iq[j] += dotPacked4x8EXT(s8_minus32(q[j]), p[j][i]);
        }
        float d = f16_exact(uint(WU16(blk).v[104]));
        precise float t = 0.0;
        [[unroll]] for (uint q = 0u; q < 4u; q++) {
            int sc = s8(uint(WU8(blk).v[192u + 8u * n + 2u * q + h]));
            precise float ds = d * float(sc);
            t = t + ds * (dx[q] * float(iq[q]));
        }
        acc[r] = acc[r] + t;
    }
}
#endif
void task_acc(uint64_t rows[NR], uint task, uint64_t addrX, uint64_t addrG, uint xb0, uint K, uint ncols, inout float acc[TC][NR]) {
#if defined(BATCH_SHARE) && TC > 1 && defined(Q6_SPLIT)
    // (The default, as Q4_K's.) Row by row: the row's quants made
    // floats once for all the columns (x then read once per row); each (row, column) sum is
    // task_acc_col's chain in its order, so the same bits.
    uint s = task >> 3, n = (task >> 2) & 1u, h = (task >> 1) & 1u;
    uint l0 = 16u * h + 8u * (task & 1u);
    uint kb = s * 256u + n * 128u + l0;
    [[unroll]] for (int r = 0; r < NR; r++) {
        uint64_t blk = rows[r] + uint64_t(s * 210u);
        uvec2 qa = w16x4(blk, 64u * n + l0), qb = w16x4(blk, 64u * n + 32u + l0), qhh = w16x4(blk, 128u + 32u * n + l0);
        vec4 wq[2][4];
        [[unroll]] for (uint i = 0u; i < 2u; i++) {
            uvec4 q = q6_quarters(qa[i], qb[i], qhh[i]);
            [[unroll]] for (uint j = 0u; j < 4u; j++) wq[i][j] = bytes_minus(q[j], 32.0);
        }
        float d = f16_exact(uint(WU16(blk).v[104]));
        float ds[4];
        [[unroll]] for (uint q = 0u; q < 4u; q++) {
            precise float v = d * s8_float(uint(WU8(blk).v[192u + 8u * n + 2u * q + h]));
            ds[q] = v;
        }
        [[unroll]] for (int c = 0; c < TC; c++) {
            if (TC == 1 || uint(c) < ncols) {
                uint xb = xb0 + uint(c) * K;
                float part[4] = float[4](0.0, 0.0, 0.0, 0.0);
                [[unroll]] for (uint i = 0u; i < 2u; i++) {
                    [[unroll]] for (uint q = 0u; q < 4u; q++) part[q] = dot4(wq[i][q], x4(addrX, addrG, xb, kb + 32u * q + 4u * i), part[q]);
                }
                precise float t = 0.0;
                [[unroll]] for (uint q = 0u; q < 4u; q++) t = t + ds[q] * part[q];
                acc[c][r] = acc[c][r] + t;
            }
        }
    }
#else
    [[unroll]] for (int c = 0; c < TC; c++) {
#ifdef X_INT8
        if (TC == 1 || uint(c) < ncols) task_acc_col_int8(rows, task, addrX, addrG, xb0 + uint(c) * K, acc[c]);
#else
        if (TC == 1 || uint(c) < ncols) task_acc_col(rows, task, addrX, addrG, xb0 + uint(c) * K, acc[c]);
#endif
    }
#endif
}
#elif defined(WT_Q8_0) || defined(WT_Q4_0)
// Q8_0: blocks of 32 (34 bytes: d, qs[32] int8); a byte b is the signed value (b ^ 0x80) − 128.
// Q4_0: blocks of 32 (18 bytes: d, qs[16]); value i is (qs[i] & 15) − 8, value i + 16 is
// (qs[i] >> 4) − 8. Both times d; 2-aligned blocks: 16-bit loads.
#define TASK_VALUES 32u
#if defined(WT_Q8_0)
const uint BLOCK_BYTES = 34u;
#else
const uint BLOCK_BYTES = 18u;
#endif
#if defined(WT_Q8_0) && defined(Q8_WORDS)
// Block `task` of a row whose bytes start 4-aligned (Q8_WORDS: the row length is a multiple
// of 4 bytes): 9 aligned 32-bit loads instead of 17 16-bit ones. The lanes' blocks are 34
// bytes apart, so every load of a warp touches about one 32-byte sector per lane: half the
// load instructions touch about half the sectors (H100, stop 45 run 4: 41.5 -> 32.8 us per
// 8B FFN product, decode +16 %). A block at byte 34·task starts at 0 or 2 mod 4 (task even or odd):
// from 4-aligned `base`, d is the low or high half of word 0 and quant word i is words
// (i, i + 1) shifted by 16 bits or word i + 1 itself. The same bytes, so the same values.
void q8_block(uint64_t row, uint task, out uint d16, out uint q[8]) {
    uint64_t blk = row + uint64_t(task * 34u);
    uint64_t base = blk & ~3ul;
    bool odd = (task & 1u) != 0u;
    uint w[9];
    [[unroll]] for (uint i = 0u; i < 9u; i++) w[i] = WU32(base).v[i];
    d16 = odd ? (w[0] >> 16) : (w[0] & 0xFFFFu);
    [[unroll]] for (uint i = 0u; i < 8u; i++) q[i] = odd ? w[i + 1u] : ((w[i] >> 16) | (w[i + 1u] << 16));
}
#endif
void task_acc(uint64_t rows[NR], uint task, uint64_t addrX, uint64_t addrG, uint xb0, uint K, uint ncols, inout float acc[TC][NR]) {
    uint k0 = task * 32u;
#ifdef X_INT8
    // Opt-in int8 activations: the block's 32 values of x as dx·xq (quant_x8), then Σ q·xq as
    // integer dot products, four values an instruction; the weights' words are loaded once
    // for all the columns. Q8_0's bytes are already signed; Q4_0's nibbles become q − 8.
    int wq[NR][8];
    float dw[NR];
    [[unroll]] for (int r = 0; r < NR; r++) {
        uint64_t blk = rows[r] + uint64_t(task * BLOCK_BYTES);
#if defined(WT_Q8_0) && defined(Q8_WORDS)
        uint d16, qw[8];
        q8_block(rows[r], task, d16, qw);
        dw[r] = f16_exact(d16);
        [[unroll]] for (uint i = 0u; i < 8u; i++) wq[r][i] = int(qw[i]);
#elif defined(WT_Q8_0)
        dw[r] = f16_exact(uint(WU16(blk).v[0]));
        [[unroll]] for (uint i = 0u; i < 8u; i++) wq[r][i] = int(uint(WU16(blk).v[1u + 2u * i]) | (uint(WU16(blk).v[2u + 2u * i]) << 16));
#else
        dw[r] = f16_exact(uint(WU16(blk).v[0]));
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            uint w = uint(WU16(blk).v[1u + 2u * i]) | (uint(WU16(blk).v[2u + 2u * i]) << 16);
            wq[r][i] = s8_minus8(w & 0x0F0F0F0Fu);        // values 4i .. 4i+3
            wq[r][4u + i] = s8_minus8((w >> 4) & 0x0F0F0F0Fu);  // values 16+4i ..
        }
#endif
    }
    [[unroll]] for (int c = 0; c < TC; c++) {
        if (TC == 1 || uint(c) < ncols) {
            uint xb = xb0 + uint(c) * K;
            vec4 xv[8];
            [[unroll]] for (uint i = 0u; i < 8u; i++) xv[i] = x4(addrX, addrG, xb, k0 + 4u * i);
            int p[8];
            float dx = quant_x8(xv, p);
            [[unroll]] for (int r = 0; r < NR; r++) {
                int iq = 0;
                [[unroll]] for (uint i = 0u; i < 8u; i++) iq += dotPacked4x8EXT(wq[r][i], p[i]);
                precise float t = dw[r] * (dx * float(iq));
                acc[c][r] = acc[c][r] + t;
            }
        }
    }
    return;
#endif
    // f32 activations: the rows' quant words loaded once for all the columns, and each
    // column's x read once per word for all the rows (not once per row).
#if defined(WT_Q8_0)
    const uint WORDS = 8u;
#else
    const uint WORDS = 4u;
#endif
    uint wv[NR][WORDS];
    float dwf[NR];
    [[unroll]] for (int r = 0; r < NR; r++) {
#if defined(WT_Q8_0) && defined(Q8_WORDS)
        uint d16;
        q8_block(rows[r], task, d16, wv[r]);
        dwf[r] = f16_exact(d16);
#else
        uint64_t blk = rows[r] + uint64_t(task * BLOCK_BYTES);
        dwf[r] = f16_exact(uint(WU16(blk).v[0]));
        [[unroll]] for (uint i = 0u; i < WORDS; i++) wv[r][i] = uint(WU16(blk).v[1u + 2u * i]) | (uint(WU16(blk).v[2u + 2u * i]) << 16);
#endif
    }
    [[unroll]] for (int c = 0; c < TC; c++) {
        if (TC == 1 || uint(c) < ncols) {
            uint xb = xb0 + uint(c) * K;
            float part[NR];
            [[unroll]] for (int r = 0; r < NR; r++) part[r] = 0.0;
            [[unroll]] for (uint i = 0u; i < WORDS; i++) {
#if defined(WT_Q8_0)
                vec4 xv = x4(addrX, addrG, xb, k0 + 4u * i);
                [[unroll]] for (int r = 0; r < NR; r++) part[r] = dot4(bytes_minus(wv[r][i] ^ 0x80808080u, 128.0), xv, part[r]);
#else
                vec4 xl = x4(addrX, addrG, xb, k0 + 4u * i), xu = x4(addrX, addrG, xb, k0 + 16u + 4u * i);
                [[unroll]] for (int r = 0; r < NR; r++) {
                    part[r] = dot4(bytes_minus(wv[r][i] & 0x0F0F0F0Fu, 8.0), xl, part[r]);
                    part[r] = dot4(bytes_minus((wv[r][i] >> 4) & 0x0F0F0F0Fu, 8.0), xu, part[r]);
                }
#endif
            }
            [[unroll]] for (int r = 0; r < NR; r++) {
                precise float t = dwf[r] * part[r];
                acc[c][r] = acc[c][r] + t;
            }
        }
    }
}
#elif defined(WT_Q4_1)
// Blocks of 32 (20 bytes: d, m, qs[16]): value i is d·(qs[i] & 15) + m, value i + 16 uses the
// high nibble. 4-aligned: 32-bit loads.
#define TASK_VALUES 32u
void task_acc(uint64_t rows[NR], uint task, uint64_t addrX, uint64_t addrG, uint xb0, uint K, uint ncols, inout float acc[TC][NR]) {
    uint k0 = task * 32u;
#ifdef X_INT8
    // Opt-in int8 activations: d·dx·Σ q·xq as integer dot products (quant_x8); the m term
    // meets the exact f32 Σ x, as Q4_K's dmin does.
    int wq[NR][8];
    [[unroll]] for (int r = 0; r < NR; r++) {
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            uint w = WU32(rows[r] + uint64_t(task * 20u)).v[1u + i];
            wq[r][i] = int(w & 0x0F0F0F0Fu);
            wq[r][4u + i] = int((w >> 4) & 0x0F0F0F0Fu);
        }
    }
    [[unroll]] for (int c = 0; c < TC; c++) {
        if (TC == 1 || uint(c) < ncols) {
            uint xb = xb0 + uint(c) * K;
            vec4 xv[8];
            precise float xs = 0.0;
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                xv[i] = x4(addrX, addrG, xb, k0 + 4u * i);
                xv[4u + i] = x4(addrX, addrG, xb, k0 + 16u + 4u * i);
                xs = sum4(xv[i], xs);
                xs = sum4(xv[4u + i], xs);
            }
            int p[8];
            float dx = quant_x8(xv, p);
            [[unroll]] for (int r = 0; r < NR; r++) {
                int iq = 0;
                [[unroll]] for (uint i = 0u; i < 8u; i++) iq += dotPacked4x8EXT(wq[r][i], p[i]);
                uint dm = WU32(rows[r] + uint64_t(task * 20u)).v[0];
                float d = f16_exact(dm & 0xFFFFu), m = f16_exact(dm >> 16);
                precise float t = d * (dx * float(iq)) + m * xs;
                acc[c][r] = acc[c][r] + t;
            }
        }
    }
    return;
#endif
    // f32 activations: as Q8_0's (words once for all the columns, x once for all the rows).
    uint wv[NR][4], dmv[NR];
    [[unroll]] for (int r = 0; r < NR; r++) {
        uint64_t blk = rows[r] + uint64_t(task * 20u);
        dmv[r] = WU32(blk).v[0];
        [[unroll]] for (uint i = 0u; i < 4u; i++) wv[r][i] = WU32(blk).v[1u + i];
    }
    [[unroll]] for (int c = 0; c < TC; c++) {
        if (TC == 1 || uint(c) < ncols) {
            uint xb = xb0 + uint(c) * K;
            float part[NR];
            [[unroll]] for (int r = 0; r < NR; r++) part[r] = 0.0;
            float xs = 0.0;
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                vec4 xl = x4(addrX, addrG, xb, k0 + 4u * i), xu = x4(addrX, addrG, xb, k0 + 16u + 4u * i);
                xs = sum4(xl, xs);
                xs = sum4(xu, xs);
                [[unroll]] for (int r = 0; r < NR; r++) {
                    part[r] = dot4(bytes_minus(wv[r][i] & 0x0F0F0F0Fu, 0.0), xl, part[r]);
                    part[r] = dot4(bytes_minus((wv[r][i] >> 4) & 0x0F0F0F0Fu, 0.0), xu, part[r]);
                }
            }
            [[unroll]] for (int r = 0; r < NR; r++) {
                float d = f16_exact(dmv[r] & 0xFFFFu), m = f16_exact(dmv[r] >> 16);
                precise float t = d * part[r] + m * xs;
                acc[c][r] = acc[c][r] + t;
            }
        }
    }
}
#elif (defined(WT_Q2_K) || defined(WT_Q3_K)) && !defined(X_INT8)
// Super-blocks of 256 — Q2_K: 84 bytes (scales[16], qs[64], d, dmin), 4-aligned: 32-bit loads;
// Q3_K: 110 bytes (hmask[32], qs[64], scales[12], d), 2-aligned: 16-bit loads. Value
// (n, j, h, l) = 128n + 32j + 16h + l (l < 16) has the 2-bit quant (qs[32n + 16h + l] >> 2j) & 3
// and scale group 8n + 2j + h — Q2_K: d·(sc & 15)·q − dmin·(sc >> 4); Q3_K: d·(sc − 32)·(q − 4
// + 4·bit (4n + j) of hmask[16h + l]). Task (s, n, h, g): l in [16h + 8g, +8) of the four j —
// two words of qs (and of hmask) per row, each word four values of each of the four groups.
// (Tasks of l in [16h, +16), twice the work per lane, ran 10-12 % slower: H100, stop 38 run 6,
// 1B Q3_K and Q2_K.) The sums are factored per group as Q4_K's are: d·Σ q·x − m·Σ x. (The
// int8 form keeps the unit path: its quantization groups of x are 32 consecutive values.)
#define TASK_VALUES 32u
void task_acc_col(uint64_t rows[NR], uint task, uint64_t addrX, uint64_t addrG, uint xb, inout float acc[NR]) {
    uint s = task >> 3, n = (task >> 2) & 1u, h = (task >> 1) & 1u;
    uint l0 = 16u * h + 8u * (task & 1u);
    const uint WORDS = 2u;
    uint kb = s * 256u + n * 128u + l0;
    float part[NR][4];
    [[unroll]] for (int r = 0; r < NR; r++) { part[r][0] = 0.0; part[r][1] = 0.0; part[r][2] = 0.0; part[r][3] = 0.0; }
#if defined(WT_Q2_K)
    float xs[4] = float[4](0.0, 0.0, 0.0, 0.0);
#endif
    [[unroll]] for (uint i = 0u; i < WORDS; i++) {
        vec4 xv[4];
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            xv[j] = x4(addrX, addrG, xb, kb + 32u * j + 4u * i);
#if defined(WT_Q2_K)
            xs[j] = sum4(xv[j], xs[j]);
#endif
        }
        [[unroll]] for (int r = 0; r < NR; r++) {
#if defined(WT_Q2_K)
            uint w = WU32(rows[r] + uint64_t(s * 84u)).v[(16u + 32u * n + l0 + 4u * i) >> 2];
            [[unroll]] for (uint j = 0u; j < 4u; j++) part[r][j] = dot4(bytes_minus((w >> (2u * j)) & 0x03030303u, 0.0), xv[j], part[r][j]);
#else
            uint64_t blk = rows[r] + uint64_t(s * 110u);
            uint w = w16x2(blk, 32u + 32u * n + l0 + 4u * i);
            uint hm = w16x2(blk, l0 + 4u * i);
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                uint q = ((w >> (2u * j)) & 0x03030303u) | (((hm >> (4u * n + j)) & 0x01010101u) << 2);
                part[r][j] = dot4(bytes_minus(q, 4.0), xv[j], part[r][j]);
            }
#endif
        }
    }
    [[unroll]] for (int r = 0; r < NR; r++) {
        precise float t = 0.0;
#if defined(WT_Q2_K)
        uint64_t blk = rows[r] + uint64_t(s * 84u);
        uint dd = WU32(blk).v[20];
        float d = f16_exact(dd & 0xFFFFu), dmin = f16_exact(dd >> 16);
        uvec2 scw = uvec2(WU32(blk).v[2u * n], WU32(blk).v[2u * n + 1u]);
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint sc = byte_of(j < 2u ? scw.x : scw.y, (2u * j + h) & 3u);
            precise float dl = d * float(sc & 15u);
            precise float ml = dmin * float(sc >> 4);
            t = t + (dl * part[r][j] - ml * xs[j]);
        }
#else
        float d = f16_exact(uint(WU16(rows[r] + uint64_t(s * 110u)).v[54]));
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            precise float dl = d * float(int(q3k_scale(rows[r], s * 110u, 8u * n + 2u * j + h)) - 32);
            t = t + dl * part[r][j];
        }
#endif
        acc[r] = acc[r] + t;
    }
}
void task_acc(uint64_t rows[NR], uint task, uint64_t addrX, uint64_t addrG, uint xb0, uint K, uint ncols, inout float acc[TC][NR]) {
    [[unroll]] for (int c = 0; c < TC; c++) {
        if (TC == 1 || uint(c) < ncols) task_acc_col(rows, task, addrX, addrG, xb0 + uint(c) * K, acc[c]);
    }
}
#else
// The unit path: ggml's dequantization of 32 values, then one fma chain per row.
#define TASK_VALUES 32u
void task_acc_col(uint64_t rows[NR], uint task, uint64_t addrX, uint64_t addrG, uint xb, inout float acc[NR]) {
    vec4 xv[8];   // read once for all the rows
    [[unroll]] for (uint i = 0u; i < 8u; i++) xv[i] = x4(addrX, addrG, xb, task * 32u + 4u * i);
    [[unroll]] for (int r = 0; r < NR; r++) {
        float w[32];
        dq_unit(rows[r], task, w);
        precise float part = 0.0;
        [[unroll]] for (uint i = 0u; i < 8u; i++) {
            part = dot4(vec4(w[4u * i], w[4u * i + 1u], w[4u * i + 2u], w[4u * i + 3u]), xv[i], part);
        }
        acc[r] = acc[r] + part;
    }
}
#ifdef X_INT8
// Opt-in int8 activations (Q5_0, Q5_1, Q2_K, Q3_K): the unit's 32 values of x as dx·xq
// (quant_x8), then each 16-value half's Σ v·xq as integer dot products against the weights'
// integer fields (qi_unit), times the half's scale d·dx; a half's offset m meets the exact f32
// Σ x of its 16 values, as Q4_K's dmin does. Weights are decoded once for all the columns.
void task_acc(uint64_t rows[NR], uint task, uint64_t addrX, uint64_t addrG, uint xb0, uint K, uint ncols, inout float acc[TC][NR]) {
    uint k0 = task * 32u;
    int wq[NR][8];
    vec2 wd[NR], wm[NR];
    [[unroll]] for (int r = 0; r < NR; r++) qi_unit(rows[r], task, wq[r], wd[r], wm[r]);
    [[unroll]] for (int c = 0; c < TC; c++) {
        if (TC == 1 || uint(c) < ncols) {
            uint xb = xb0 + uint(c) * K;
            vec4 xv[8];
            [[unroll]] for (uint i = 0u; i < 8u; i++) xv[i] = x4(addrX, addrG, xb, k0 + 4u * i);
#ifdef QI_OFFSET
            precise float xs0 = 0.0, xs1 = 0.0;
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                xs0 = sum4(xv[i], xs0);
                xs1 = sum4(xv[4u + i], xs1);
            }
#endif
            int p[8];
            float dx = quant_x8(xv, p);
            [[unroll]] for (int r = 0; r < NR; r++) {
                int i0 = 0, i1 = 0;
                [[unroll]] for (uint i = 0u; i < 4u; i++) {
                    i0 += dotPacked4x8EXT(wq[r][i], p[i]);
                    i1 += dotPacked4x8EXT(wq[r][4u + i], p[4u + i]);
                }
#ifdef QI_OFFSET
                precise float t = wd[r].x * (dx * float(i0)) + wm[r].x * xs0;
                t = t + (wd[r].y * (dx * float(i1)) + wm[r].y * xs1);
#else
                precise float t = wd[r].x * (dx * float(i0));
                t = t + wd[r].y * (dx * float(i1));
#endif
                acc[c][r] = acc[c][r] + t;
            }
        }
    }
}
#else
void task_acc(uint64_t rows[NR], uint task, uint64_t addrX, uint64_t addrG, uint xb0, uint K, uint ncols, inout float acc[TC][NR]) {
    [[unroll]] for (int c = 0; c < TC; c++) {
        if (TC == 1 || uint(c) < ncols) task_acc_col(rows, task, addrX, addrG, xb0 + uint(c) * K, acc[c]);
    }
}
#endif
#endif

// Σ x² over task t's values [t·TASK_VALUES, ..) of one column (raw x: the RMSNorm's statistic).
float task_sumsq(uint64_t addrX, uint xb, uint task, float acc) {
    precise float a = acc;
    [[unroll]] for (uint i = 0u; i < TASK_VALUES / 4u; i++) {
        uint k = task * TASK_VALUES + 4u * i;
#ifdef X_VEC4
        vec4 v = BufV4(addrX).v[(xb + k) >> 2];
#else
        vec4 v = vec4(uintBitsToFloat(BufU32(addrX).v[xb + k]), uintBitsToFloat(BufU32(addrX).v[xb + k + 1u]),
                      uintBitsToFloat(BufU32(addrX).v[xb + k + 2u]), uintBitsToFloat(BufU32(addrX).v[xb + k + 3u]));
#endif
        a = dot4(v, v, a);
    }
    return a;
}
