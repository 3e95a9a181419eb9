//! GLSL sources shared by generated kernels, and the static kernel families.

/// Our double-precision transcendental library (no driver built-ins: the same bits everywhere).
pub const MATH_F64: &str = include_str!("math_f64.glsl");

/// Our single-precision library for `FloatMath::Fast` (no driver built-ins, no f64).
pub const MATH_F32: &str = include_str!("math_f32.glsl");

/// Scalar helpers behind the elementwise ops (max/min, remainders, shifts, ...).
pub const OPS: &str = include_str!("ops.glsl");

/// The start of every kernel: extensions, buffer-reference types and the push-constant block
/// (`kernel::SHADER_PRELUDE`), Nx.BinaryBackend's bf16 write rule (keep the top 16 bits of the
/// f32), and the exact conversions between stored bits and computed values (numeric.glsl).
pub fn numeric_prelude() -> String {
    let mut s = String::from(crate::kernel::SHADER_PRELUDE);
    s.push_str("#define NX_BF16_FROM_F32(b) ((b) >> 16)\n");
    s.push_str(include_str!("numeric.glsl"));
    s
}
