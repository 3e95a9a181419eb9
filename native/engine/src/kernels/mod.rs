//! GLSL sources shared by generated kernels, and the static kernel families.

/// Our double-precision transcendental library (no driver built-ins: the same bits everywhere).
pub const MATH_F64: &str = include_str!("math_f64.glsl");
