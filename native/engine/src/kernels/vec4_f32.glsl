// f32 add/subtract/multiply of two contiguous f32 tensors, four elements per invocation with
// 16-byte loads and stores. Each lane takes the native f32 operation when operands and result
// are normal numbers (Vulkan rounds f32 +,-,* correctly, so that equals the exact path) and the
// exact f64 path otherwise (zeros, subnormals, Inf, NaN), exactly as the generic kernel does.
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufV4 { uvec4 v[]; };
layout(local_size_x = 256) in;

uint lane(uint a, uint b) {
    precise float r = uintBitsToFloat(a) OP uintBitsToFloat(b);
    uint rb = floatBitsToUint(r);
    if (((a >> 23) & 0xFFu) - 1u < 254u && ((b >> 23) & 0xFFu) - 1u < 254u && ((rb >> 23) & 0xFFu) - 1u < 254u) {
        return rb;
    }
    precise double d = nx_f32_to_f64(a) OP nx_f32_to_f64(b);
    return nx_f64_to_f32(nx_round_f32(d));
}

void main() {
    BufV4 o4 = BufV4(ParamsU64(pc.params).v[0]);
    BufV4 a4 = BufV4(ParamsU64(pc.params).v[1]);
    BufV4 b4 = BufV4(ParamsU64(pc.params).v[2]);
    BufU32 o1 = BufU32(ParamsU64(pc.params).v[0]);
    BufU32 a1 = BufU32(ParamsU64(pc.params).v[1]);
    BufU32 b1 = BufU32(ParamsU64(pc.params).v[2]);
    ParamsI32 meta = ParamsI32(pc.params + 24ul);
    uint n = uint(meta.v[0]);
    int qo = meta.v[1]; // offsets in units of four elements
    int qa = meta.v[2];
    int qb = meta.v[3];
    uint step = gl_NumWorkGroups.x * 256u;
    for (uint q = gl_GlobalInvocationID.x; q < pc.count; q += step) {
        if (4u * q + 4u <= n) {
            uvec4 a = a4.v[qa + int(q)];
            uvec4 b = b4.v[qb + int(q)];
            o4.v[qo + int(q)] = uvec4(lane(a.x, b.x), lane(a.y, b.y), lane(a.z, b.z), lane(a.w, b.w));
        } else {
            for (uint i = 4u * q; i < n; i++) {
                o1.v[4 * qo + int(i)] = lane(a1.v[4 * qa + int(i)], b1.v[4 * qb + int(i)]);
            }
        }
    }
}
