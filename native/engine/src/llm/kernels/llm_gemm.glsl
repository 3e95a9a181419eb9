// The small kernels around the prefill GEMM (prefill.rs); one is selected by a define.
//
// DEQUANT: a quantized W [N, K] (row n's bytes at W + n · ROW_BYTES, dq_unit from
// llm_dequant.glsl, so the values are ggml's bit for bit) written as f16 rows into W16 [.., ldw]
// from row row0: the k-contiguous B operand of the cooperative-matrix GEMM (x · W16ᵀ). Each
// value is rounded to f16 once (round to nearest even, with integer operations: the same bits on
// every device). One invocation per (row, unit of 32 k), units fastest: neighbouring invocations
// read neighbouring bytes of a row (and the Q4_K/Q5_K unit pairs that share their quant bytes)
// and write neighbouring 64-byte runs, four 16-byte stores each.
//
// X_F16: x [T, K] f32 (from element offX) to f16 rows of ld16 elements, two k per invocation.
//
// SPLIT (with either): each value v as hi = f16(v) and lo = f16(v − hi) (v − hi is exact in
// f32), laid out along k so that one GEMM over 3K sums x_hi·w_hi + x_lo·w_hi + x_hi·w_lo:
// W16 rows [hi | hi | lo] (K each), x rows [hi | lo | hi].
//
// EPILOGUE: out[t, n] from the GEMM's f32 sums acc [T, ld]: SwiGLU silu(acc[t, n]) ·
// acc[t, up0 + n], bias, residual — the matvec's epilogue (llm_matvec.glsl store_out), in its
// order; out from element offO (a row range of a larger tensor). `residual` may be `out`
// itself: each element is read before the same invocation writes it.

layout(local_size_x = 256) in;

#ifdef DEQUANT
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer BufW16V4 { uvec4 v[]; };

void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrW = a.v[0], addrT = a.v[1];
    ParamsI32 meta = ParamsI32(pc.params + 16ul);
    uint N = uint(meta.v[0]), K = uint(meta.v[1]), rowBytes = uint(meta.v[2]);
    uint ldw = uint(meta.v[3]), row0 = uint(meta.v[4]);
    uint units = K / 32u;
    uint total = N * units;
    for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * 256u) {
        uint n = i / units, u = i % units;
        float w[32];
        dq_unit(addrW + uint64_t(n) * uint64_t(rowBytes), u, w);
        uint hw[16];
#ifdef SPLIT
        uint lw[16];
#endif
        [[unroll]] for (uint j = 0u; j < 16u; j++) {
            uint h0 = enc_f32_to_f16(floatBitsToUint(w[2u * j])), h1 = enc_f32_to_f16(floatBitsToUint(w[2u * j + 1u]));
            hw[j] = h0 | (h1 << 16);
#ifdef SPLIT
            uint l0 = enc_f32_to_f16(floatBitsToUint(w[2u * j] - enc_f16_to_f32(h0)));
            uint l1 = enc_f32_to_f16(floatBitsToUint(w[2u * j + 1u] - enc_f16_to_f32(h1)));
            lw[j] = l0 | (l1 << 16);
#endif
        }
        // In 16-byte units: the row's start, then this unit's 32 values (64 bytes).
        uint at = ((row0 + n) * ldw + u * 32u) / 8u;
        [[unroll]] for (uint q = 0u; q < 4u; q++) {
            uvec4 hv = uvec4(hw[4u * q], hw[4u * q + 1u], hw[4u * q + 2u], hw[4u * q + 3u]);
            BufW16V4(addrT).v[at + q] = hv;
#ifdef SPLIT
            BufW16V4(addrT).v[at + K / 8u + q] = hv;
            BufW16V4(addrT).v[at + K / 4u + q] = uvec4(lw[4u * q], lw[4u * q + 1u], lw[4u * q + 2u], lw[4u * q + 3u]);
#endif
        }
    }
}
#endif

#ifdef X_F16
void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrX = a.v[0], addrH = a.v[1];
    ParamsI32 meta = ParamsI32(pc.params + 16ul);
    uint T = uint(meta.v[0]), K = uint(meta.v[1]), offX = uint(meta.v[2]), ld16 = uint(meta.v[3]);
    uint half_k = K / 2u, total = T * half_k;
    for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * 256u) {
        uint t = i / half_k, k = 2u * (i % half_k);
        float v0 = uintBitsToFloat(BufU32(addrX).v[offX + t * K + k]), v1 = uintBitsToFloat(BufU32(addrX).v[offX + t * K + k + 1u]);
        uint h0 = enc_f32_to_f16(floatBitsToUint(v0)), h1 = enc_f32_to_f16(floatBitsToUint(v1));
        uint at = (t * ld16 + k) / 2u;
        BufU32(addrH).v[at] = h0 | (h1 << 16);
#ifdef SPLIT
        uint l0 = enc_f32_to_f16(floatBitsToUint(v0 - enc_f16_to_f32(h0)));
        uint l1 = enc_f32_to_f16(floatBitsToUint(v1 - enc_f16_to_f32(h1)));
        BufU32(addrH).v[at + half_k] = l0 | (l1 << 16);
        BufU32(addrH).v[at + K] = h0 | (h1 << 16);
#endif
    }
}
#endif

#ifdef EPILOGUE
void main() {
    ParamsU64 a = ParamsU64(pc.params);
    uint64_t addrA = a.v[0], addrB = a.v[1], addrR = a.v[2], addrO = a.v[3];
    ParamsI32 meta = ParamsI32(pc.params + 32ul);
    uint T = uint(meta.v[0]), N = uint(meta.v[1]), ld = uint(meta.v[2]), up0 = uint(meta.v[3]);
    uint offB = uint(meta.v[4]), offR = uint(meta.v[5]), offO = uint(meta.v[6]);
    uint total = T * N;
    for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * 256u) {
        uint t = i / N, n = i % N;
        float v = uintBitsToFloat(BufU32(addrA).v[t * ld + n]);
#ifdef SWIGLU
        float up = uintBitsToFloat(BufU32(addrA).v[t * ld + up0 + n]);
        v = (v / (1.0 + exp(-v))) * up;
#endif
#ifdef BIAS
        v += uintBitsToFloat(BufU32(addrB).v[offB + n]);
#endif
#ifdef RESIDUAL
        v = uintBitsToFloat(BufU32(addrR).v[offR + t * N + n]) + v;
#endif
        BufU32(addrO).v[offO + t * N + n] = floatBitsToUint(v);
    }
}
#endif
