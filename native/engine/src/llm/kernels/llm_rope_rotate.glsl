// The rotary embedding of one dimension pair (x0, x1) by its position's (cos, sin). The RoPE
// kernel (llm_rope.glsl) and the Q/K products' fused store (llm_matvec.glsl, ROPE) both call
// this one function: fused and separate must give the same bits, so the expression is written
// once and `precise` (no contraction into fused multiply-adds, which a compiler could choose
// differently in the two kernels).
vec2 rope_rotate(float x0, float x1, float c, float s) {
    precise float r0 = x0 * c - x1 * s;
    precise float r1 = x0 * s + x1 * c;
    return vec2(r0, r1);
}
