//! Elementwise work as expressions compiled into generated kernels.
//!
//! An `Expr` tree over input tensors (any dtypes, any strides: broadcast, transposed, sliced,
//! reversed views) becomes one GLSL kernel. The same path serves a single `add` and a whole fused
//! chain from the Defn compiler. Kernels are keyed by the expression, the dtypes, the rank and
//! each input's access pattern; shapes, strides and addresses travel in a parameter block, so a
//! new shape never means a new compile.
//!
//! Numerics follow Nx.BinaryBackend: every float node is computed in f64 and rounded once to its
//! own type; integer nodes are computed in 64 bits and wrapped to their width. Under
//! [`FloatMath::Fast`] f32, f16 and bf16 nodes are computed in f32 instead, with our own f32
//! library (`kernels/math_f32.glsl`: within 2 ulp, the same bits on every device) where it has
//! the op (`fast_unary`, `fast_binary`: add, subtract, multiply, divide, pow, max, min, negate, abs,
//! sign, exp, expm1, log, log1p, tanh, sigmoid, erf, sqrt, rsqrt, comparisons), and through the
//! f64 library rounded to f32 where it does not; each node is still rounded to its own type, so
//! fused equals unfused under either.
//!
//! **Complex** (c64, c128) nodes are `dvec2(re, im)` in f64, each part rounded once to f32 for
//! c64. Operations follow the `complex` library (0.5.0) clause by clause as BinaryBackend calls
//! it (`ops.glsl`, `kernels/complex.glsl`): add/subtract/multiply/divide (with its zero-part
//! special cases), abs, sqrt, exp, log, sin, cos, tan, expm1, log1p, sigmoid, rsqrt, pow. A real
//! operand of a complex op stays real (BinaryBackend does not convert it: `NaN + z` is `NaN+0i`,
//! `x + (a - 0.0i)` has imaginary part +0.0). `real`/`imag` of a complex copy the part's bits;
//! `conjugate` of a real x gives `x - 0.0i` (`x + 0i` for NaN/Inf); `as_type` to a real type
//! takes the real part; `sign` of a complex is `1+0i` (BinaryBackend compares the struct with 0);
//! `equal` compares parts with NaN parts equal (Elixir's `==` on `%Complex{}` with `:nan` atoms)
//! and a complex never equals a real. Ordered comparisons, max/min, rounding, bitwise and the
//! other transcendental ops raise an `InvalidArgument` for complex operands.
//! Known limit: drivers fold arithmetic with a literal 0.0 (`0.0 * x -> 0`) whatever `precise`
//! says; the mixed real/complex helpers avoid such literals, but a real converted to complex
//! *inside* a fused expression carries a literal +0.0 imaginary part, so an infinite or NaN
//! part meeting it there may give 0 where op-by-op evaluation (and BinaryBackend) gives NaN.

use crate::dtype::{DType, Kind};
use crate::error::{invalid, Result};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

macro_rules! ops {
    ($name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),* }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];
            /// Nx's name for the op.
            pub fn name(self) -> &'static str { match self { $($name::$variant => $text),* } }
            pub fn parse(s: &str) -> Result<$name> {
                match s { $($text => Ok($name::$variant),)* _ => Err(invalid!("unknown {} {s:?}", stringify!($name))) }
            }
        }
    };
}

ops!(UnaryOp {
    Negate = "negate", Abs = "abs", Sign = "sign", Ceil = "ceil", Floor = "floor", Round = "round",
    Exp = "exp", Expm1 = "expm1", Log = "log", Log1p = "log1p", Sigmoid = "sigmoid", Sqrt = "sqrt",
    Rsqrt = "rsqrt", Cbrt = "cbrt", Sin = "sin", Cos = "cos", Tan = "tan", Asin = "asin", Acos = "acos",
    Atan = "atan", Sinh = "sinh", Cosh = "cosh", Tanh = "tanh", Asinh = "asinh", Acosh = "acosh",
    Atanh = "atanh", Erf = "erf", Erfc = "erfc", ErfInv = "erf_inv", IsNan = "is_nan",
    IsInfinity = "is_infinity", BitwiseNot = "bitwise_not", LogicalNot = "logical_not",
    CountLeadingZeros = "count_leading_zeros", PopulationCount = "population_count",
    Real = "real", Imag = "imag", Conjugate = "conjugate",
});

ops!(BinaryOp {
    Add = "add", Subtract = "subtract", Multiply = "multiply", Divide = "divide", Pow = "pow",
    Remainder = "remainder", Quotient = "quotient", Atan2 = "atan2", Max = "max", Min = "min",
    BitwiseAnd = "bitwise_and", BitwiseOr = "bitwise_or", BitwiseXor = "bitwise_xor",
    LeftShift = "left_shift", RightShift = "right_shift", Equal = "equal", NotEqual = "not_equal",
    Greater = "greater", Less = "less", GreaterEqual = "greater_equal", LessEqual = "less_equal",
    LogicalAnd = "logical_and", LogicalOr = "logical_or", LogicalXor = "logical_xor",
});

impl UnaryOp {
    /// Float-only ops: integer inputs are converted to the (float) result type first.
    fn is_float_math(self) -> bool {
        !matches!(
            self,
            UnaryOp::Negate
                | UnaryOp::Abs
                | UnaryOp::Sign
                | UnaryOp::Ceil
                | UnaryOp::Floor
                | UnaryOp::Round
                | UnaryOp::IsNan
                | UnaryOp::IsInfinity
                | UnaryOp::BitwiseNot
                | UnaryOp::LogicalNot
                | UnaryOp::CountLeadingZeros
                | UnaryOp::PopulationCount
                | UnaryOp::Real
                | UnaryOp::Imag
                | UnaryOp::Conjugate
        )
    }
    fn is_predicate(self) -> bool {
        matches!(self, UnaryOp::IsNan | UnaryOp::IsInfinity | UnaryOp::LogicalNot)
    }
    fn integer_only(self) -> bool {
        matches!(self, UnaryOp::BitwiseNot | UnaryOp::CountLeadingZeros | UnaryOp::PopulationCount)
    }
}

impl BinaryOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Equal
                | BinaryOp::NotEqual
                | BinaryOp::Greater
                | BinaryOp::Less
                | BinaryOp::GreaterEqual
                | BinaryOp::LessEqual
        )
    }
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::LogicalAnd | BinaryOp::LogicalOr | BinaryOp::LogicalXor)
    }
    fn integer_only(self) -> bool {
        matches!(
            self,
            BinaryOp::BitwiseAnd
                | BinaryOp::BitwiseOr
                | BinaryOp::BitwiseXor
                | BinaryOp::LeftShift
                | BinaryOp::RightShift
                | BinaryOp::Quotient
        )
    }
}

/// How generated kernels evaluate float math.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FloatMath {
    /// Every float node in f64 with our f64 library, rounded once to its type: Nx.BinaryBackend's
    /// bits.
    #[default]
    Exact,
    /// f32, f16 and bf16 nodes in f32 with our f32 library (within 2 ulp of the correctly
    /// rounded result; the same bits on every device), rounded to their type; f64, integer and
    /// complex nodes as under `Exact`.
    Fast,
}

/// A scalar constant stored as the bits of its compute form (f64 bits or i64/u64).
#[derive(Clone, Copy, PartialEq)]
pub enum Scalar {
    F(f64),
    I(i64),
    U(u64),
}

/// Kernel keys are built from `Debug`: a float prints with its bits, so constants that print
/// alike (NaNs with different payloads) never share a kernel. (A constant node rounds to its
/// type and canonicalises NaN today, so no result depended on it; the key says what the
/// kernel was generated from.)
impl std::fmt::Debug for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::F(x) => write!(f, "F({x:?}={:#x})", x.to_bits()),
            Scalar::I(i) => write!(f, "I({i})"),
            Scalar::U(u) => write!(f, "U({u})"),
        }
    }
}

/// An elementwise expression. `dtype` on each node is its result type.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Input(usize),
    Const { value: Scalar, dtype: DType },
    Unary { op: UnaryOp, arg: Box<Expr>, dtype: DType },
    Binary { op: BinaryOp, lhs: Box<Expr>, rhs: Box<Expr>, dtype: DType },
    /// `pred != 0 ? on_true : on_false`
    Select { pred: Box<Expr>, on_true: Box<Expr>, on_false: Box<Expr>, dtype: DType },
    /// Nx.as_type: value conversion.
    Convert { arg: Box<Expr>, dtype: DType },
    /// Nx.bitcast: same bits, another type of the same width.
    Bitcast { arg: Box<Expr>, dtype: DType },
    /// The flat (row-major) index of the output element, as Nx.iota over all axes; `axis`
    /// picks the coordinate along one axis instead.
    Iota { axis: Option<usize>, dtype: DType },
}

impl Expr {
    pub fn input(i: usize) -> Expr {
        Expr::Input(i)
    }
    pub fn unary(op: UnaryOp, arg: Expr, dtype: DType) -> Expr {
        Expr::Unary { op, arg: Box::new(arg), dtype }
    }
    pub fn binary(op: BinaryOp, lhs: Expr, rhs: Expr, dtype: DType) -> Expr {
        Expr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs), dtype }
    }
    pub fn convert(arg: Expr, dtype: DType) -> Expr {
        Expr::Convert { arg: Box::new(arg), dtype }
    }
    pub fn select(pred: Expr, on_true: Expr, on_false: Expr, dtype: DType) -> Expr {
        Expr::Select { pred: Box::new(pred), on_true: Box::new(on_true), on_false: Box::new(on_false), dtype }
    }

    /// The result type, given the input dtypes.
    pub fn dtype(&self, inputs: &[DType]) -> Result<DType> {
        Ok(match self {
            Expr::Input(i) => *inputs.get(*i).ok_or_else(|| invalid!("expression uses input {i} of {}", inputs.len()))?,
            Expr::Const { dtype, .. }
            | Expr::Unary { dtype, .. }
            | Expr::Binary { dtype, .. }
            | Expr::Select { dtype, .. }
            | Expr::Convert { dtype, .. }
            | Expr::Bitcast { dtype, .. }
            | Expr::Iota { dtype, .. } => *dtype,
        })
    }
}

/// How a kernel indexes one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// `offset + i`: same shape as the output, row-major.
    Contiguous,
    /// `offset`: one element broadcast everywhere.
    Scalar,
    /// `offset + Σ coord[d] * stride[d]`: any view.
    Strided,
}

pub(crate) struct Generated {
    pub key: String,
    pub source: String,
}

/// Generates the kernel for `outputs` (all of the same shape, rank `rank`) over inputs with the
/// given dtypes and access patterns.
/// The identity of the kernel `generate` would build: expressions, dtypes, rank and access
/// patterns — never shapes. Cheap next to generating the source, so lookups use it first.
pub(crate) fn kernel_key(outputs: &[Expr], inputs: &[(DType, Access)], rank: usize, out_access: Access, math: FloatMath, wide: bool, speculate: bool) -> String {
    let mut key = format!("ew r{rank} out:{out_access:?}");
    if math == FloatMath::Fast {
        key.push_str(" fast"); // exact keys stay as they were (SPIR-V disk cache, digests)
    }
    if wide {
        key.push_str(" x4");
    }
    if !speculate {
        key.push_str(" nospec"); // (measurements and tests: the default keys stay as they were)
    }
    for (t, a) in inputs {
        write!(key, " {t}:{a:?}").unwrap();
    }
    for e in outputs {
        write!(key, " => {e:?}").unwrap();
    }
    key
}

/// Elements from which an elementwise kernel that can ([`wide_eligible`]) takes four elements
/// per invocation: 2^20, where a GPU still gets about a quarter million invocations (an H200
/// holds 270 K resident) — fewer, and the kernel is latency-bound, where four serial elements
/// per invocation would only lengthen it. Four wide, the f32 add went from 0.76× to 0.91×
/// PyTorch's bandwidth on the H200 (`vec4_f32.glsl`; bench/README.md, 2026-11-29): more bytes
/// in flight per invocation, and four independent chains of a long fused expression for the
/// scheduler to interleave.
pub const WIDE_MIN_ELEMENTS: usize = 1 << 20;

/// [`WIDE_MIN_ELEMENTS`], or `NX_VULKAN_WIDE_MIN` where set (0: never wide; measurements).
pub(crate) fn wide_min_from_env() -> usize {
    match std::env::var("NX_VULKAN_WIDE_MIN").ok().and_then(|v| v.parse::<usize>().ok()) {
        Some(0) => usize::MAX,
        Some(n) => n,
        None => WIDE_MIN_ELEMENTS,
    }
}

/// Whether a kernel over these streams can take four elements per invocation: the outputs and
/// every input read element by element are contiguous 8-, 16- or 32-bit elements at offsets
/// that are multiples of four (four elements are one aligned 4-, 8- or 16-byte word; buffers
/// start 16-byte aligned), and the other inputs are one element broadcast (read once per
/// invocation, any type).
pub(crate) fn wide_eligible(out_types: &[DType], out_access: Access, out_offset: usize, inputs: &[(DType, Access, usize)]) -> bool {
    let narrow = |t: &DType| matches!(t.bits(), 8 | 16 | 32);
    out_access == Access::Contiguous
        && out_offset % 4 == 0
        && out_types.iter().all(narrow)
        && inputs.iter().all(|(t, a, off)| match a {
            Access::Scalar => true,
            Access::Contiguous => narrow(t) && off % 4 == 0,
            Access::Strided => false,
        })
}

/// Four 16- or 8-bit elements to and from the word a wide kernel loads or stores (little
/// endian: element k in bits 16k / 8k up).
const WIDE_PACKING: &str = "\
uvec4 nx_unpack16(uvec2 w) { return uvec4(w.x & 0xFFFFu, w.x >> 16, w.y & 0xFFFFu, w.y >> 16); }
uvec4 nx_unpack8(uint w) { return uvec4(w & 0xFFu, (w >> 8) & 0xFFu, (w >> 16) & 0xFFu, w >> 24); }
uvec2 nx_pack16(uvec4 v) { return uvec2((v.x & 0xFFFFu) | (v.y << 16), (v.z & 0xFFFFu) | (v.w << 16)); }
uint nx_pack8(uvec4 v) { return (v.x & 0xFFu) | ((v.y & 0xFFu) << 8) | ((v.z & 0xFFu) << 16) | (v.w << 24); }
";

/// The buffer reference type a wide kernel reads four elements of type `t` through.
fn quad_buf(t: DType) -> &'static str {
    match t.bits() {
        32 => "BufQ32",
        16 => "BufQ16",
        _ => "BufQ8",
    }
}

/// The kernel for `outputs` over `inputs`; `wide` (only where [`wide_eligible`]): four
/// elements per invocation, `pc.count` then counting groups of four and the element count
/// read from the parameter block after the inputs' strides. Each element runs the same
/// statements either way, so `wide` never changes a bit. `speculate`: f32 chains try
/// [`speculative_block`] first (the same bits).
pub(crate) fn generate(outputs: &[Expr], inputs: &[(DType, Access)], rank: usize, out_access: Access, math: FloatMath, wide: bool, speculate: bool) -> Result<Generated> {
    let in_types: Vec<DType> = inputs.iter().map(|(t, _)| *t).collect();
    let key = kernel_key(outputs, inputs, rank, out_access, math, wide, speculate);
    let mut g = Gen::new(inputs, &in_types, math);
    let mut stores = String::new();
    for (o, e) in outputs.iter().enumerate() {
        let t = e.dtype(&in_types)?;
        let v = g.node(e)?;
        let enc = g.enc(t, &v);
        if wide {
            writeln!(stores, "            nx_o{o}[k] = uint({enc});").unwrap();
        } else {
            writeln!(stores, "        out{o}.v[oi] = {enc};").unwrap();
        }
    }
    let n_addr = outputs.len() + inputs.len();
    // Tried first for each element: the exact single-op fast path (already what speculation
    // would give), else the speculative block.
    let store0 = if wide { "nx_o0[k]" } else { "out0.v[oi]" };
    let exact_single = if math == FloatMath::Exact { f32_fast_path(outputs, inputs, store0) } else { None };
    let first_try = exact_single.or_else(|| if speculate { speculative_block(outputs, inputs, math, wide) } else { None });
    let mut src = crate::kernels::numeric_prelude();
    src.push_str(crate::kernels::OPS);
    // (input decodes call the library too: f16 under :fast)
    let decode_calls: String = inputs.iter().map(|(t, _)| g.dec(*t, "r")).collect();
    src.push_str(&libraries(&format!("{}{stores}{decode_calls}{}", g.body, first_try.as_deref().unwrap_or(""))));
    if wide {
        // four elements of 32, 16 and 8 bits as one 16-, 8- and 4-byte word
        src.push_str("layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufQ32 { uvec4 v[]; };\n");
        src.push_str("layout(buffer_reference, std430, buffer_reference_align = 8) buffer BufQ16 { uvec2 v[]; };\n");
        src.push_str("layout(buffer_reference, std430, buffer_reference_align = 4) buffer BufQ8 { uint v[]; };\n");
        src.push_str(WIDE_PACKING);
    }
    src.push_str("layout(local_size_x = 256) in;\nvoid main() {\n");
    writeln!(src, "    ParamsI32 meta = ParamsI32(pc.params + {}ul);", n_addr * 8).unwrap();
    // meta layout: shape[rank], output offset and strides[rank], then per input: offset, strides[rank]
    writeln!(src, "    int ooff = meta.v[{rank}];").unwrap();
    if out_access == Access::Strided {
        for d in 0..rank {
            writeln!(src, "    int ost_{d} = meta.v[{}];", rank + 1 + d).unwrap();
        }
    }
    for (j, (_, access)) in inputs.iter().enumerate() {
        let base = 2 * rank + 1 + j * (rank + 1);
        writeln!(src, "    int off{j} = meta.v[{base}];").unwrap();
        if *access == Access::Strided {
            for d in 0..rank {
                writeln!(src, "    int st{j}_{d} = meta.v[{}];", base + 1 + d).unwrap();
            }
        }
    }
    for d in 0..rank {
        writeln!(src, "    uint dim{d} = uint(meta.v[{d}]);").unwrap();
    }
    // Buffer references are loaded once: the compiler cannot hoist them itself, since a store
    // through one reference might alias the parameter block.
    for (o, e) in outputs.iter().enumerate() {
        let t = buf_type(e.dtype(&in_types)?);
        writeln!(src, "    {t} out{o} = {t}(ParamsU64(pc.params).v[{o}]);").unwrap();
        if wide {
            let q = quad_buf(e.dtype(&in_types)?);
            writeln!(src, "    {q} out{o}q = {q}(ParamsU64(pc.params).v[{o}]);").unwrap();
        }
    }
    let used: Vec<bool> = (0..inputs.len()).map(|j| reads_input(j, &g.body, &stores)).collect();
    for (j, (t, access)) in inputs.iter().enumerate() {
        if used[j] {
            let b = buf_type(*t);
            writeln!(src, "    {b} in{j} = {b}(ParamsU64(pc.params).v[{}]);", outputs.len() + j).unwrap();
            if wide && *access == Access::Contiguous {
                let q = quad_buf(*t);
                writeln!(src, "    {q} in{j}q = {q}(ParamsU64(pc.params).v[{}]);", outputs.len() + j).unwrap();
            }
        }
    }
    if wide {
        let needs_coords = g.used_coords;
        let out_types = outputs.iter().map(|e| e.dtype(&in_types)).collect::<Result<Vec<_>>>()?;
        wide_loop(&mut src, &out_types, inputs, &used, rank, needs_coords, first_try, &g, &stores);
        if std::env::var_os("NX_VULKAN_DUMP_KERNELS").is_some() {
            eprintln!("// ---- {key}\n{}", &src[src.find("layout(local_size_x").unwrap_or(0)..]);
        }
        return Ok(Generated { key, source: src });
    }
    src.push_str("    uint step = gl_NumWorkGroups.x * 256u;\n");
    src.push_str("    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += step) {\n");
    let needs_coords = g.used_coords || out_access == Access::Strided || inputs.iter().any(|(_, a)| *a == Access::Strided);
    if needs_coords && rank > 0 {
        src.push_str("        uint rest = i;\n");
        for d in (0..rank).rev() {
            writeln!(src, "        uint c{d} = rest % dim{d}; rest /= dim{d};").unwrap();
        }
    }
    let mut oi = "ooff + int(i)".to_string();
    if out_access == Access::Strided {
        oi = "ooff".to_string();
        for d in 0..rank {
            write!(oi, " + int(c{d}) * ost_{d}").unwrap();
        }
    }
    writeln!(src, "        int oi = {oi};").unwrap();
    let mut decodes = vec![];
    for (j, (t, access)) in inputs.iter().enumerate() {
        if !used[j] {
            continue;
        }
        let index = match access {
            Access::Contiguous => format!("off{j} + int(i)"),
            Access::Scalar => format!("off{j}"),
            Access::Strided => {
                let mut s = format!("off{j}");
                for d in 0..rank {
                    write!(s, " + int(c{d}) * st{j}_{d}").unwrap();
                }
                s
            }
        };
        // Raw loads first, so the fast path below runs before any decoding.
        writeln!(src, "        {} nx_raw{j}_ = in{j}.v[{index}];", storage_type(*t)).unwrap();
        decodes.push(format!("        {} x{j}_ = {};\n", g.compute(*t), g.dec(*t, &format!("nx_raw{j}_"))));
    }
    if let Some(first) = &first_try {
        src.push_str(first);
    }
    for d in decodes {
        src.push_str(&d);
    }
    src.push_str(&g.body);
    src.push_str(&stores);
    src.push_str("    }\n}\n");
    if std::env::var_os("NX_VULKAN_DUMP_KERNELS").is_some() {
        eprintln!("// ---- {key}\n{}", &src[src.find("layout(local_size_x").unwrap_or(0)..]);
    }
    Ok(Generated { key, source: src })
}

/// Expressions turned into GLSL statements for another kernel family to embed (a reduction's
/// prologue and epilogue): the statements `generate` emits for the same expressions, so every
/// node is rounded to its own type exactly as in an elementwise kernel. Inputs and values are
/// in the compute domain of `math` ([`compute_type`], [`decode_with`], [`encode_with`]).
pub(crate) struct EmbeddedExprs {
    /// Declarations of the intermediate nodes (`precise <type> tN = ...;`).
    pub body: String,
    /// Each expression's value: a GLSL expression in its type's compute domain under `math`.
    pub values: Vec<String>,
}

/// `exprs` as statements reading input `j` from a variable `x{j}_` (decoded with
/// [`decode_with`] into [`compute_type`]), `Iota { axis: None }` from `uint i` and
/// `Iota { axis: Some(d) }` from `uint c{d}`; the embedding kernel declares those.
pub(crate) fn embed_exprs(exprs: &[Expr], in_types: &[DType], math: FloatMath) -> Result<EmbeddedExprs> {
    let inputs: Vec<(DType, Access)> = in_types.iter().map(|t| (*t, Access::Strided)).collect();
    let mut g = Gen::new(&inputs, in_types, math);
    let values = exprs.iter().map(|e| g.node(e)).collect::<Result<Vec<_>>>()?;
    Ok(EmbeddedExprs { body: g.body, values })
}

/// Whether nodes of type `t` compute in f32 (`float`) under `math`.
fn is_fast(math: FloatMath, t: DType) -> bool {
    math == FloatMath::Fast && matches!(t, DType::F32 | DType::F16 | DType::BF16)
}

/// The GLSL type values of type `t` are computed in under `math`.
pub(crate) fn compute_type(t: DType, math: FloatMath) -> &'static str {
    if is_fast(math, t) {
        "float"
    } else {
        t.glsl_compute()
    }
}

/// Stored bits `raw` of type `t` as a value of [`compute_type`] (exact).
pub(crate) fn decode_with(t: DType, raw: &str, math: FloatMath) -> String {
    match (is_fast(math, t), t) {
        (true, DType::F32) => format!("uintBitsToFloat({raw})"),
        (true, DType::F16) => format!("nxf_of_f16(uint({raw}))"),
        (true, _) => format!("uintBitsToFloat(uint({raw}) << 16)"),
        _ => decode(t, raw),
    }
}

/// A value of [`compute_type`] (already rounded to `t`) as stored bits of type `t`.
pub(crate) fn encode_with(t: DType, v: &str, math: FloatMath) -> String {
    match (is_fast(math, t), t) {
        (true, DType::F32) => format!("floatBitsToUint({v})"),
        (true, DType::F16) => format!("uint16_t(nxf_f16_bits({v}))"),
        (true, _) => format!("uint16_t(nxf_bf16_bits({v}))"),
        _ => encode(t, v),
    }
}

/// The GLSL libraries that generated statements `body` call (our f64 libm, complex functions,
/// our f32 library), to include after the numeric prelude and `OPS`.
pub(crate) fn libraries(body: &str) -> String {
    let mut libraries = String::new();
    if body.contains("m_") {
        libraries.push_str(crate::kernels::MATH_F64);
        if body.contains("nx_cm_") {
            libraries.push_str(COMPLEX_GLSL);
        }
    }
    if body.contains("nxf_") {
        libraries.push_str(crate::kernels::MATH_F32);
    }
    libraries
}

/// The main loop of a wide kernel ([`generate`]): invocation `q` takes elements 4q .. 4q + 3,
/// loading each contiguous input as one word of four elements (a partial last group reads its
/// elements one by one, clamped to the last, and stores only those that exist), a broadcast
/// input once; then runs the per-element statements four times and stores each output as one
/// word. The per-element statements are those of the one-element kernel, so the results are
/// its bits.
#[allow(clippy::too_many_arguments)]
fn wide_loop(src: &mut String, out_types: &[DType], inputs: &[(DType, Access)], used: &[bool], rank: usize, needs_coords: bool, fast: Option<String>, g: &Gen<'_>, stores: &str) {
    let n_out = out_types.len();
    let n_index = 2 * rank + 1 + inputs.len() * (rank + 1);
    writeln!(src, "    uint n = uint(meta.v[{n_index}]);").unwrap();
    src.push_str("    uint step = gl_NumWorkGroups.x * 256u;\n");
    src.push_str("    for (uint q = gl_GlobalInvocationID.x; q < pc.count; q += step) {\n");
    src.push_str("        bool nx_full = 4u * q + 4u <= n;\n");
    for (j, (t, access)) in inputs.iter().enumerate() {
        if !used[j] {
            continue;
        }
        match access {
            Access::Contiguous => {
                // the four elements' stored bits, one per component
                writeln!(src, "        uvec4 nx_q{j};").unwrap();
                let word = format!("in{j}q.v[(off{j} >> 2) + int(q)]");
                let unpack = match t.bits() {
                    32 => word,
                    16 => format!("nx_unpack16({word})"),
                    _ => format!("nx_unpack8({word})"),
                };
                writeln!(src, "        if (nx_full) nx_q{j} = {unpack};").unwrap();
                writeln!(src, "        else for (uint k = 0u; k < 4u; k++) nx_q{j}[k] = uint(in{j}.v[off{j} + int(min(4u * q + k, n - 1u))]);").unwrap();
            }
            _ => writeln!(src, "        {} nx_s{j} = in{j}.v[off{j}];", storage_type(*t)).unwrap(),
        }
    }
    for o in 0..n_out {
        writeln!(src, "        uvec4 nx_o{o};").unwrap();
    }
    src.push_str("        [[unroll]] for (uint k = 0u; k < 4u; k++) {\n");
    src.push_str("            uint i = 4u * q + k;\n");
    if needs_coords && rank > 0 {
        src.push_str("            uint rest = i;\n");
        for d in (0..rank).rev() {
            writeln!(src, "            uint c{d} = rest % dim{d}; rest /= dim{d};").unwrap();
        }
    }
    let mut decodes = String::new();
    for (j, (t, access)) in inputs.iter().enumerate() {
        if !used[j] {
            continue;
        }
        let from = if *access == Access::Contiguous { format!("{}(nx_q{j}[k])", storage_type(*t)) } else { format!("nx_s{j}") };
        writeln!(src, "            {} nx_raw{j}_ = {from};", storage_type(*t)).unwrap();
        writeln!(decodes, "            {} x{j}_ = {};", g.compute(*t), g.dec(*t, &format!("nx_raw{j}_"))).unwrap();
    }
    if let Some(fast) = fast {
        src.push_str(&fast);
    }
    src.push_str(&decodes);
    src.push_str(&g.body);
    src.push_str(stores);
    src.push_str("        }\n");
    for (o, t) in out_types.iter().enumerate() {
        let packed = match t.bits() {
            32 => format!("nx_o{o}"),
            16 => format!("nx_pack16(nx_o{o})"),
            _ => format!("nx_pack8(nx_o{o})"),
        };
        writeln!(src, "        if (nx_full) out{o}q.v[(ooff >> 2) + int(q)] = {packed};").unwrap();
        writeln!(src, "        else for (uint k = 0u; 4u * q + k < n; k++) out{o}.v[ooff + int(4u * q + k)] = {}(nx_o{o}[k]);", storage_type(*t)).unwrap();
    }
    src.push_str("    }\n}\n");
}

/// A speculative copy of an f32 chain's statements, tried first for each element: f32 add,
/// subtract and multiply of operands that are zero or normal as the native operation (one
/// instruction; Vulkan rounds these three correctly), and max/min/negate/abs of such operands
/// on the bits without NaN handling, every other node as the checked path writes it. Each
/// native node's operands and result are tested into `nx_ok` without a branch: a result is
/// right when it is normal, or a zero the operands make exact (x + -x, x - x, a zero factor);
/// a subnormal or overflowing one, which a device may flush (the H200 and H100 do not promise
/// to keep subnormals), fails it. Where `nx_ok` holds, the element's outputs are stored and the
/// checked statements are skipped; elsewhere they run as before — so the bits are the checked
/// path's, and a chain pays one test per value instead of its checked operations' three
/// classifications, branch and NaN canonicalisation per node. Under `Exact` (where the checked
/// path holds every f32 value in an f64 and rounds each node with integer code) chains of f32
/// nodes are speculated: the native ones as above, every other f32 node exactly as the checked
/// path computes it (its operands widened, its f64 result rounded to f32 and narrowed);
/// under `Fast`, any f32 chain. Either way only where at least one node is native: `None`
/// where nothing would be.
fn speculative_block(outputs: &[Expr], inputs: &[(DType, Access)], math: FloatMath, wide: bool) -> Option<String> {
    let in_types: Vec<DType> = inputs.iter().map(|(t, _)| *t).collect();
    let mode = if math == FloatMath::Fast { Speculate::Fast } else { Speculate::ExactF32 };
    // f32 values as floats: the :fast domain (its f32 functions are exact for these nodes)
    let mut g = Gen::new(inputs, &in_types, FloatMath::Fast);
    g.spec = mode;
    let mut stores = String::new();
    for (o, e) in outputs.iter().enumerate() {
        let t = e.dtype(&in_types).ok()?;
        if mode == Speculate::ExactF32 && t != DType::F32 {
            return None;
        }
        let v = g.node(e).ok()?;
        let enc = g.enc(t, &v);
        if wide {
            writeln!(stores, "                nx_o{o}[k] = uint({enc});").unwrap();
        } else {
            writeln!(stores, "                out{o}.v[oi] = {enc};").unwrap();
        }
    }
    if g.natives == 0 {
        return None;
    }
    let mut decodes = String::new();
    for (j, (t, _)) in inputs.iter().enumerate() {
        if reads_input(j, &g.body, &stores) {
            writeln!(decodes, "        {} x{j}_ = {};", g.compute(*t), g.dec(*t, &format!("nx_raw{j}_"))).unwrap();
        }
    }
    Some(format!("        {{\n        bool nx_ok = true;\n{decodes}{}        if (nx_ok) {{\n{stores}                continue;\n            }}\n        }}\n", g.body))
}

/// Whether generated statements `body` and `stores` read input `j` (its decoded `x{j}_`).
fn reads_input(j: usize, body: &str, stores: &str) -> bool {
    let x = format!("x{j}_");
    body.contains(&x) || stores.contains(&x)
}

/// Whether `e` is a node [`speculative_block`] takes in a chain under `Exact`: f32 inputs and
/// constants, and f32 → f32 float operations (its children are checked as they are visited).
fn exact_speculated(e: &Expr, in_types: &[DType]) -> bool {
    let f32 = |e: &Expr| e.dtype(in_types).is_ok_and(|t| t == DType::F32);
    match e {
        Expr::Input(_) | Expr::Const { .. } => f32(e),
        Expr::Unary { op, arg, dtype: DType::F32 } => {
            f32(arg) && !op.is_predicate() && !op.integer_only() && !matches!(op, UnaryOp::Real | UnaryOp::Imag | UnaryOp::Conjugate)
        }
        Expr::Binary { op, lhs, rhs, dtype: DType::F32 } => f32(lhs) && f32(rhs) && !op.is_comparison() && !op.is_logical() && !op.integer_only(),
        _ => false,
    }
}

/// A native-f32 fast path for the commonest kernel, one f32 add/subtract/multiply of two f32
/// inputs. Vulkan requires these three to be correctly rounded, so the f32 result equals the
/// f64 result rounded once — except where a driver flushes subnormals (the H200 does not
/// promise to keep them). So the fast path is taken only when both operands and the result are
/// normal numbers; anything else (zeros, subnormals, Inf, NaN) falls through to the exact f64
/// path below. Division and sqrt are not correctly rounded in f32 on every driver: not here.
fn f32_fast_path(outputs: &[Expr], inputs: &[(DType, Access)], store_to: &str) -> Option<String> {
    let [Expr::Binary { op, lhs, rhs, dtype: DType::F32 }] = outputs else { return None };
    let (Expr::Input(a), Expr::Input(b)) = (lhs.as_ref(), rhs.as_ref()) else { return None };
    if inputs.get(*a)?.0 != DType::F32 || inputs.get(*b)?.0 != DType::F32 {
        return None;
    }
    let sym = match op {
        BinaryOp::Add => "+",
        BinaryOp::Subtract => "-",
        BinaryOp::Multiply => "*",
        _ => return None,
    };
    Some(format!(
        "        {{
            uint ab = nx_raw{a}_;
            uint bb = nx_raw{b}_;
            uint ea = (ab >> 23) & 0xFFu;
            uint eb = (bb >> 23) & 0xFFu;
            precise float r = uintBitsToFloat(ab) {sym} uintBitsToFloat(bb);
            uint rb = floatBitsToUint(r);
            uint er = (rb >> 23) & 0xFFu;
            if (ea - 1u < 254u && eb - 1u < 254u && er - 1u < 254u) {{
                {store_to} = rb;
                continue;
            }}
        }}
"
    ))
}

/// Complex functions (exp, log, sqrt, sin, pow, ...) on math_f64.glsl: included after it.
pub(crate) const COMPLEX_GLSL: &str = include_str!("kernels/complex.glsl");

pub(crate) fn storage_type(t: DType) -> &'static str {
    match t.bits() {
        128 => "u64vec2",
        8 => "uint8_t",
        16 => "uint16_t",
        32 => "uint",
        _ => "uint64_t",
    }
}

pub(crate) fn buf_type(t: DType) -> &'static str {
    match t.bits() {
        128 => "BufU64x2",
        8 => "BufU8",
        16 => "BufU16",
        32 => "BufU32",
        _ => "BufU64",
    }
}

pub(crate) fn decode(t: DType, raw: &str) -> String {
    match t {
        DType::F32 => format!("nx_f32_to_f64({raw})"),
        DType::F64 => format!("nx_bits_to_f64({raw})"),
        DType::F16 => format!("nx_f16_to_f64(uint({raw}))"),
        DType::BF16 => format!("nx_bf16_to_f64(uint({raw}))"),
        DType::S8 => format!("int64_t(int8_t({raw}))"),
        DType::S16 => format!("int64_t(int16_t({raw}))"),
        // sign-extend by shifts: lavapipe (Mesa 22.3) miscompiled int64_t(int(uint)) in some
        // contexts (abs, shifts and pow of s32 went wrong)
        DType::S32 => format!("(int64_t(uint64_t({raw}) << 32) >> 32)"),
        DType::S64 => format!("int64_t({raw})"),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => format!("uint64_t({raw})"),
        DType::C64 => format!("nx_c64_to_c({raw})"),
        DType::C128 => format!("nx_c128_to_c({raw})"),
    }
}

pub(crate) fn encode(t: DType, v: &str) -> String {
    match t {
        DType::F32 => format!("nx_f64_to_f32({v})"),
        DType::F64 => format!("nx_f64_to_bits({v})"),
        DType::F16 => format!("uint16_t(nx_f64_to_f16({v}))"),
        DType::BF16 => format!("uint16_t(nx_f64_to_bf16({v}))"),
        DType::S8 | DType::U8 => format!("uint8_t({v})"),
        DType::S16 | DType::U16 => format!("uint16_t({v})"),
        DType::S32 | DType::U32 => format!("uint({v})"),
        DType::S64 | DType::U64 => format!("uint64_t({v})"),
        DType::C64 => format!("nx_c_to_c64({v})"),
        DType::C128 => format!("nx_c_to_c128({v})"),
    }
}

/// Rounds or wraps a computed value to `t`'s value set (so every node's result is exactly what
/// an unfused op writing `t` would have produced).
pub(crate) fn wrap(t: DType, v: &str) -> String {
    match t {
        DType::F32 => format!("nx_round_f32({v})"),
        DType::F16 => format!("nx_round_f16({v})"),
        DType::BF16 => format!("nx_round_bf16({v})"),
        DType::F64 => format!("nx_canon_f64({v})"),
        DType::S64 | DType::U64 => v.to_string(),
        DType::S8 => format!("int64_t(int8_t({v}))"),
        DType::S16 => format!("int64_t(int16_t({v}))"),
        DType::S32 => format!("(int64_t(uint64_t({v}) << 32) >> 32)"),
        DType::U8 => format!("(({v}) & 0xFFul)"),
        DType::U16 => format!("(({v}) & 0xFFFFul)"),
        DType::U32 => format!("(({v}) & 0xFFFFFFFFul)"),
        DType::C64 => format!("nx_round_c64({v})"),
        DType::C128 => format!("nx_canon_c128({v})"),
    }
}

/// Converts a value of type `from` into the compute domain of `to` (no rounding to `to`).
/// A complex value becomes its real part; a real one the complex `(v, +0.0)`.
pub(crate) fn to_domain(from: DType, to: DType, v: &str) -> String {
    match (from.kind(), to.kind()) {
        (a, b) if a == b => v.to_string(),
        (Kind::Complex, _) => to_domain(from.real_part(), to, &format!("({v}).x")),
        (_, Kind::Complex) => format!("dvec2({}, 0.0LF)", to_domain(from, DType::F64, v)),
        (Kind::Float, Kind::Signed) => format!("nx_f64_to_s64({v})"),
        (Kind::Float, Kind::Unsigned) => format!("nx_f64_to_u64({v})"),
        (_, Kind::Float) => format!("double({v})"),
        (Kind::Signed, Kind::Unsigned) => format!("uint64_t({v})"),
        (Kind::Unsigned, Kind::Signed) => format!("int64_t({v})"),
        _ => unreachable!(),
    }
}

/// The common type two operands are compared in: float if either is, else the wider integer
/// (signed when either is).
fn compare_type(a: DType, b: DType) -> DType {
    if a.is_complex() || b.is_complex() {
        DType::C128
    } else if a.is_float() || b.is_float() {
        DType::F64
    } else if a.kind() == Kind::Signed || b.kind() == Kind::Signed {
        DType::S64
    } else {
        DType::U64
    }
}

struct Gen<'a> {
    body: String,
    memo: HashMap<String, String>,
    next: usize,
    inputs: &'a [(DType, Access)],
    in_types: &'a [DType],
    used_coords: bool,
    math: FloatMath,
    /// Writing a [`speculative_block`]'s statements (in the :fast domain).
    spec: Speculate,
    /// f32 values known zero or normal (tested into `nx_ok`, or so by construction).
    known_ok: HashSet<String>,
    /// Constant temporaries (never tested at run time: known or not by their value).
    consts: HashSet<String>,
    /// Constant zeros: operands of the bit-order max/min only. A float operation on a constant
    /// zero is what a shader compiler rewrites (lavapipe gave -0.0 for `(a * -0.0) + -0.0`
    /// where IEEE and the checked path give +0.0), so add/subtract/multiply leave them to the
    /// checked path.
    zero_consts: HashSet<String>,
    /// Native operations written (whose results `nx_ok` tests).
    natives: usize,
    /// Each visited node's value (speculative blocks: a node's constness from its children's).
    node_names: HashMap<*const Expr, String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Speculate {
    Off,
    Fast,
    ExactF32,
}

/// A double holding an f32 value, as that f32 (exact; NaN payloads kept).
fn narrow(v: &str) -> String {
    format!("uintBitsToFloat(nx_f64_to_f32({v}))")
}

impl<'a> Gen<'a> {
    fn new(inputs: &'a [(DType, Access)], in_types: &'a [DType], math: FloatMath) -> Gen<'a> {
        Gen {
            body: String::new(),
            memo: HashMap::new(),
            next: 0,
            inputs,
            in_types,
            used_coords: false,
            math,
            spec: Speculate::Off,
            known_ok: HashSet::new(),
            consts: HashSet::new(),
            zero_consts: HashSet::new(),
            natives: 0,
            node_names: HashMap::new(),
        }
    }

    /// Makes runtime f32 value `v` known zero or normal for a native operation: a test into
    /// `nx_ok` unless it is known already (constants are known by their value instead).
    fn ensure_ok(&mut self, v: &str) {
        if !self.known_ok.contains(v) && !self.consts.contains(v) {
            writeln!(self.body, "        nx_ok = nx_ok && nxf_ok({v});").unwrap();
            self.known_ok.insert(v.to_string());
        }
    }

    /// An f32 binary node of f32 operands as a native operation, or `None`.
    fn speculate_binary(&mut self, op: BinaryOp, a: &str, b: &str) -> Option<String> {
        let sym = match op {
            BinaryOp::Add => "+",
            BinaryOp::Subtract => "-",
            BinaryOp::Multiply => "*",
            BinaryOp::Max => ">",
            BinaryOp::Min => "<",
            _ => return None,
        };
        let bit_order = matches!(op, BinaryOp::Max | BinaryOp::Min);
        let testable = |g: &Gen, v: &str| g.known_ok.contains(v) || !g.consts.contains(v) || (bit_order && g.zero_consts.contains(v));
        if !testable(self, a) || !testable(self, b) || (self.consts.contains(a) && self.consts.contains(b)) {
            return None; // (a node of constants alone is left to the checked statements)
        }
        for v in [a, b] {
            if !self.zero_consts.contains(v) {
                self.ensure_ok(v);
            }
        }
        if bit_order {
            // nxf_max/nxf_min without their NaN tests: the bits' order, ties (-0, +0) to `a`
            let r = self.tmp(DType::F32, format!("(nxf_key({b}) {sym} nxf_key({a})) ? {b} : {a}"));
            self.known_ok.insert(r.clone());
            return Some(r);
        }
        let r = self.tmp(DType::F32, format!("{a} {sym} {b}"));
        if self.known_ok.insert(r.clone()) {
            let (exact_zero, zero_sign) = match op {
                BinaryOp::Add => (format!("{a} == -{b}"), format!("floatBitsToUint({a}) & floatBitsToUint({b})")),
                BinaryOp::Subtract => (format!("{a} == {b}"), format!("floatBitsToUint({a}) & ~floatBitsToUint({b})")),
                _ => (format!("nxf_iszero({a}) || nxf_iszero({b})"), format!("floatBitsToUint({a}) ^ floatBitsToUint({b})")),
            };
            // The result test as the checked path's (nxf_normal: two float comparisons; an
            // exponent-bit test measured the same, stop 42 runs 7-8). A zero's sign is rebuilt
            // on the bits as IEEE gives it (+0 for x - x, the sign product for a zero factor,
            // -0 only for -0 + -0 or -0 - +0), so it does not depend on a compiler keeping
            // signed zeros (Vulkan does not require it; the checked path never uses a native
            // zero). That select costs about 8 % of chain10_arith :exact on the H100 (170 ->
            // 185 us, runs 6 and 8): the price of not trusting the compiler with zero signs.
            writeln!(self.body, "        nx_ok = nx_ok && (nxf_normal(floatBitsToUint({r})) || (nxf_iszero({r}) && ({exact_zero})));").unwrap();
            writeln!(self.body, "        if (nxf_iszero({r})) {r} = uintBitsToFloat(({zero_sign}) & 0x80000000u);").unwrap();
            self.natives += 1;
        }
        Some(r)
    }

    fn fast(&self, t: DType) -> bool {
        is_fast(self.math, t)
    }

    fn compute(&self, t: DType) -> &'static str {
        compute_type(t, self.math)
    }

    /// A value of type `t` in the exact compute domain (an f32 value widened exactly to f64).
    fn exact_val(&self, t: DType, v: &str) -> String {
        if self.fast(t) {
            format!("nx_f32_to_f64(floatBitsToUint({v}))")
        } else {
            v.to_string()
        }
    }

    /// `to_domain` across the two float domains: into f32, a value is rounded to f32 (the
    /// node's own rounding follows).
    fn dom(&self, from: DType, to: DType, v: &str) -> String {
        match (self.fast(from), self.fast(to)) {
            (true, true) => v.to_string(),
            (true, false) => to_domain(DType::F64, to, &self.exact_val(from, v)),
            (false, true) => narrow(&to_domain(from, DType::F64, v)),
            (false, false) => to_domain(from, to, v),
        }
    }

    /// Rounds a computed value to `t`'s value set (`wrap`, in `t`'s domain here).
    fn round(&self, t: DType, v: &str) -> String {
        match (self.fast(t), t) {
            (true, DType::F32) => format!("nxf_canon({v})"),
            (true, DType::F16) => format!("nxf_round_f16({v})"),
            (true, _) => format!("nxf_round_bf16({v})"),
            _ => wrap(t, v),
        }
    }

    fn enc(&self, t: DType, v: &str) -> String {
        encode_with(t, v, self.math)
    }

    fn dec(&self, t: DType, raw: &str) -> String {
        decode_with(t, raw, self.math)
    }

    fn nonzero(&self, t: DType, v: &str) -> String {
        if self.fast(t) {
            format!("nxf_nonzero({v})")
        } else {
            nonzero(t, v)
        }
    }

    fn tmp(&mut self, t: DType, value: String) -> String {
        if let Some(v) = self.memo.get(&value) {
            return v.clone(); // common subexpression
        }
        let name = format!("t{}", self.next);
        self.next += 1;
        writeln!(self.body, "        precise {} {name} = {value};", self.compute(t)).unwrap();
        self.memo.insert(value, name.clone());
        name
    }

    fn tmp_int(&mut self, value: String) -> String {
        if let Some(v) = self.memo.get(&value) {
            return v.clone();
        }
        let name = format!("t{}", self.next);
        self.next += 1;
        writeln!(self.body, "        int {name} = {value};").unwrap();
        self.memo.insert(value, name.clone());
        name
    }

    fn node(&mut self, e: &Expr) -> Result<String> {
        let v = self.node_inner(e)?;
        if self.spec != Speculate::Off {
            // In a speculative block a value computed from constants alone is a constant too:
            // the shader compiler folds it to a literal, so it must meet native operations only
            // as the constant leaves do (`consts`; never as a tested runtime value). Known from
            // the children's names (visited first): one step per node, however deep the chain.
            let children: Vec<&Expr> = match e {
                Expr::Input(_) | Expr::Iota { .. } | Expr::Const { .. } => vec![],
                Expr::Unary { arg, .. } | Expr::Convert { arg, .. } | Expr::Bitcast { arg, .. } => vec![arg.as_ref()],
                Expr::Binary { lhs, rhs, .. } => vec![lhs.as_ref(), rhs.as_ref()],
                Expr::Select { pred, on_true, on_false, .. } => vec![pred.as_ref(), on_true.as_ref(), on_false.as_ref()],
            };
            let constant = match e {
                Expr::Const { .. } => true,
                Expr::Input(_) | Expr::Iota { .. } => false,
                _ => children.iter().all(|c| self.node_names.get(&(*c as *const Expr)).is_some_and(|n| self.consts.contains(n))),
            };
            if constant {
                self.consts.insert(v.clone());
            }
            self.node_names.insert(e as *const Expr, v.clone());
        }
        Ok(v)
    }

    fn node_inner(&mut self, e: &Expr) -> Result<String> {
        let ty = |e: &Expr, g: &Gen| e.dtype(g.in_types);
        if self.spec == Speculate::ExactF32 && !exact_speculated(e, self.in_types) {
            return Err(invalid!("not speculated under Exact"));
        }
        match e {
            Expr::Input(i) => {
                if *i >= self.inputs.len() {
                    return Err(invalid!("expression uses input {i} of {}", self.inputs.len()));
                }
                Ok(format!("x{i}_"))
            }
            Expr::Const { value, dtype } if self.fast(*dtype) => {
                let f = match *value {
                    Scalar::F(f) => f,
                    Scalar::I(i) => i as f64,
                    Scalar::U(u) => u as f64,
                };
                let lit = format!("uintBitsToFloat({:#x}u)", (f as f32).to_bits());
                let name = self.tmp(*dtype, self.round(*dtype, &lit));
                if self.spec != Speculate::Off && *dtype == DType::F32 {
                    let c = f as f32;
                    if c.is_normal() {
                        self.known_ok.insert(name.clone());
                    } else if c == 0.0 {
                        self.zero_consts.insert(name.clone());
                    }
                    self.consts.insert(name.clone());
                }
                Ok(name)
            }
            Expr::Const { value, dtype } => {
                let lit = match (value, dtype.kind()) {
                    (Scalar::F(f), Kind::Float) => format!("nx_bits_to_f64({:#x}ul)", f.to_bits()),
                    (Scalar::I(i), Kind::Signed) => format!("int64_t({:#x}ul)", *i as u64),
                    (Scalar::U(u), Kind::Unsigned) => format!("uint64_t({u:#x}ul)"),
                    (Scalar::I(i), Kind::Unsigned) => format!("uint64_t({:#x}ul)", *i as u64),
                    (Scalar::U(u), Kind::Signed) => format!("int64_t({u:#x}ul)"),
                    (Scalar::I(i), Kind::Float) => format!("double(int64_t({:#x}ul))", *i as u64),
                    (Scalar::U(u), Kind::Float) => format!("double(uint64_t({u:#x}ul))"),
                    // a complex constant from a real scalar: (value, +0.0)
                    (Scalar::F(f), Kind::Complex) => format!("dvec2(nx_bits_to_f64({:#x}ul), 0.0LF)", f.to_bits()),
                    (Scalar::I(i), Kind::Complex) => format!("dvec2(double(int64_t({:#x}ul)), 0.0LF)", *i as u64),
                    (Scalar::U(u), Kind::Complex) => format!("dvec2(double(uint64_t({u:#x}ul)), 0.0LF)"),
                    (Scalar::F(_), _) => return Err(invalid!("float constant for integer type {dtype}")),
                };
                Ok(self.tmp(*dtype, wrap(*dtype, &lit)))
            }
            Expr::Iota { axis, dtype } => {
                let raw = match axis {
                    None => "uint64_t(i)".to_string(),
                    Some(a) => {
                        self.used_coords = true;
                        format!("uint64_t(c{a})")
                    }
                };
                let v = self.dom(DType::U64, *dtype, &raw);
                Ok(self.tmp(*dtype, self.round(*dtype, &v)))
            }
            Expr::Convert { arg, dtype } => {
                let from = ty(arg, self)?;
                let a = self.node(arg)?;
                if from == *dtype {
                    return Ok(a); // as_type to the same type is the tensor itself: bits kept
                }
                let v = match (self.fast(from), self.fast(*dtype)) {
                    (true, true) => a,
                    (false, true) => narrow(&wrap(*dtype, &convert(from, *dtype, &a))),
                    _ => convert(from, *dtype, &self.exact_val(from, &a)),
                };
                Ok(self.tmp(*dtype, self.round(*dtype, &v)))
            }
            Expr::Bitcast { arg, dtype } => {
                let from = ty(arg, self)?;
                if from.bits() != dtype.bits() {
                    return Err(invalid!("bitcast {from} to {dtype}: widths differ"));
                }
                let a = self.node(arg)?;
                let v = self.dec(*dtype, &self.enc(from, &a));
                Ok(self.tmp(*dtype, v))
            }
            Expr::Select { pred, on_true, on_false, dtype } => {
                let pt = ty(pred, self)?;
                let (tt, ft) = (ty(on_true, self)?, ty(on_false, self)?);
                let p = self.node(pred)?;
                let a = self.node(on_true)?;
                let b = self.node(on_false)?;
                let cond = self.nonzero(pt, &p);
                let v = format!("({cond}) ? {} : {}", self.dom(tt, *dtype, &a), self.dom(ft, *dtype, &b));
                Ok(self.tmp(*dtype, self.round(*dtype, &v)))
            }
            Expr::Unary { op, arg, dtype } => {
                let from = ty(arg, self)?;
                let a = self.node(arg)?;
                if self.spec != Speculate::Off && (from, *dtype) == (DType::F32, DType::F32) && self.known_ok.contains(&a) {
                    // of a value known zero or normal: no NaN to canonicalise
                    let f = match op {
                        UnaryOp::Negate => Some("nxf_neg"),
                        UnaryOp::Abs => Some("nxf_abs"),
                        _ => None,
                    };
                    if let Some(f) = f {
                        let r = self.tmp(DType::F32, format!("{f}({a})"));
                        self.known_ok.insert(r.clone());
                        return Ok(r);
                    }
                }
                if self.spec == Speculate::ExactF32 && !matches!(op, UnaryOp::Negate | UnaryOp::Abs) {
                    // as the checked path: the f64 function of the widened value, rounded to f32
                    // (nxf_neg / nxf_abs, below, are those bits already)
                    let v = unary(*op, *dtype, from, &self.exact_val(from, &a));
                    let v = if unary_rounds_itself(*op, *dtype) { v } else { wrap(*dtype, &v) };
                    return Ok(self.tmp(*dtype, narrow(&v)));
                }
                if matches!(op, UnaryOp::Real | UnaryOp::Imag | UnaryOp::Conjugate)
                    || (!op.is_predicate() && (from.is_complex() || dtype.is_complex()))
                {
                    // in the exact domain (an f32 result is narrowed exactly after its rounding)
                    let (v, keep_bits) = complex_unary(*op, from, *dtype, &self.exact_val(from, &a))?;
                    return Ok(match (keep_bits, self.fast(*dtype)) {
                        (true, false) => v,
                        (true, true) => self.tmp(*dtype, narrow(&v)),
                        (false, false) => self.tmp(*dtype, wrap(*dtype, &v)),
                        (false, true) => self.tmp(*dtype, narrow(&wrap(*dtype, &v))),
                    });
                }
                if op.integer_only() && (from.is_float() || dtype.is_float()) {
                    return Err(invalid!("{} needs integer tensors, got {from}", op.name()));
                }
                let (v, rounded) = if op.is_predicate() {
                    // 0/1 converted like a comparison's, so any result type works
                    let p = if self.fast(from) { fast_predicate(*op, &a) } else { unary_predicate(*op, from, &a) };
                    (self.dom(DType::U8, *dtype, &p), false)
                } else {
                    let x = self.dom(from, *dtype, &a);
                    if op.is_float_math() && !dtype.is_float() {
                        return Err(invalid!("{} needs a float result type, got {dtype}", op.name()));
                    }
                    if self.fast(*dtype) {
                        (fast_unary(*op, &x), false)
                    } else {
                        (unary(*op, *dtype, from, &x), unary_rounds_itself(*op, *dtype))
                    }
                };
                Ok(self.tmp(*dtype, if rounded { v } else { self.round(*dtype, &v) }))
            }
            Expr::Binary { op, lhs, rhs, dtype } => {
                let (lt, rt) = (ty(lhs, self)?, ty(rhs, self)?);
                let a = self.node(lhs)?;
                let b = self.node(rhs)?;
                if self.spec != Speculate::Off && (lt, rt, *dtype) == (DType::F32, DType::F32, DType::F32) {
                    if let Some(r) = self.speculate_binary(*op, &a, &b) {
                        return Ok(r);
                    }
                    let correctly_rounded = matches!(op, BinaryOp::Add | BinaryOp::Subtract | BinaryOp::Multiply | BinaryOp::Max | BinaryOp::Min);
                    if self.spec == Speculate::ExactF32 && !correctly_rounded {
                        // as the checked path (division, powers, ...: our f32 library is not
                        // correctly rounded there); nxf_add/sub/mul/max/min, below, are
                        let v = binary(*op, DType::F32, &self.exact_val(lt, &a), &self.exact_val(rt, &b));
                        return Ok(self.tmp(*dtype, narrow(&wrap(*dtype, &v))));
                    }
                }
                if self.fast(lt) && self.fast(rt) && (op.is_comparison() || op.is_logical()) {
                    let v = fast_compare(*op, &a, &b);
                    return Ok(self.tmp(*dtype, self.round(*dtype, &self.dom(DType::U8, *dtype, &v))));
                }
                if self.fast(*dtype) && !op.is_comparison() && !op.is_logical() && !lt.is_complex() && !rt.is_complex() {
                    if op.integer_only() {
                        return Err(invalid!("{} needs integer tensors, got {dtype}", op.name()));
                    }
                    let v = fast_binary(*op, &self.dom(lt, *dtype, &a), &self.dom(rt, *dtype, &b));
                    return Ok(self.tmp(*dtype, self.round(*dtype, &v)));
                }
                // Everything else in the exact domain (comparisons of an f32 with another type,
                // complex operands), then into the result's.
                let (a, b) = (self.exact_val(lt, &a), self.exact_val(rt, &b));
                let v = if op.is_comparison() && (lt.is_complex() || rt.is_complex()) {
                    // Elixir's == on values: a complex never equals a real number
                    let eq = match (lt.is_complex(), rt.is_complex()) {
                        (true, true) => format!("nx_ceq({a}, {b})"),
                        _ => "false".to_string(),
                    };
                    let cmp = match op {
                        BinaryOp::Equal => eq,
                        BinaryOp::NotEqual => format!("!({eq})"),
                        _ => return Err(invalid!("{} is not defined for complex numbers", op.name())),
                    };
                    to_domain(DType::U8, *dtype, &format!("(({cmp}) ? 1ul : 0ul)"))
                } else if !op.is_logical() && (dtype.is_complex() || lt.is_complex() || rt.is_complex()) {
                    if !dtype.is_complex() {
                        return Err(invalid!("{} of complex operands needs a complex result type, got {dtype}", op.name()));
                    }
                    complex_binary(*op, lt, rt, &a, &b)?
                } else if op.is_comparison() {
                    let ct = compare_type(lt, rt);
                    let (x, y) = (to_domain(lt, ct, &a), to_domain(rt, ct, &b));
                    let sym = match op {
                        BinaryOp::Equal => "==",
                        BinaryOp::NotEqual => "!=",
                        BinaryOp::Greater => ">",
                        BinaryOp::Less => "<",
                        BinaryOp::GreaterEqual => ">=",
                        _ => "<=",
                    };
                    // u64 against s64: a negative signed value is below every unsigned one.
                    let mixed = lt.is_integer() && rt.is_integer() && lt.kind() != rt.kind() && (lt == DType::U64 || rt == DType::U64);
                    let wide_int = |t: DType| t == DType::S64 || t == DType::U64;
                    let int_float = (wide_int(lt) && rt.is_float()) || (lt.is_float() && wide_int(rt));
                    let cmp = if int_float {
                        // Erlang compares integers with floats exactly: double(i) may round
                        let c = if lt.is_float() {
                            format!("nx_cmp_flip(nx_cmp_{}_f64({b}, {a}))", if rt == DType::S64 { "s64" } else { "u64" })
                        } else {
                            format!("nx_cmp_{}_f64({a}, {b})", if lt == DType::S64 { "s64" } else { "u64" })
                        };
                        let c = self.tmp_int(c);
                        match op {
                            BinaryOp::Equal => format!("{c} == 0"),
                            BinaryOp::NotEqual => format!("{c} != 0"),
                            BinaryOp::Greater => format!("{c} == 1"),
                            BinaryOp::Less => format!("{c} == -1"),
                            BinaryOp::GreaterEqual => format!("({c} == 0 || {c} == 1)"),
                            _ => format!("({c} == 0 || {c} == -1)"),
                        }
                    } else if mixed {
                        let (sa, sb) = (lt.kind() == Kind::Signed, rt.kind() == Kind::Signed);
                        format!("nx_cmp_mixed({}, {}, {}, {}) {sym} 0", to_domain(lt, DType::U64, &a), sa, to_domain(rt, DType::U64, &b), sb)
                    } else {
                        format!("({x}) {sym} ({y})")
                    };
                    to_domain(DType::U8, *dtype, &format!("(({cmp}) ? 1ul : 0ul)"))
                } else if op.is_logical() {
                    let (x, y) = (nonzero(lt, &a), nonzero(rt, &b));
                    let v = match op {
                        BinaryOp::LogicalAnd => format!("({x}) && ({y})"),
                        BinaryOp::LogicalOr => format!("({x}) || ({y})"),
                        _ => format!("({x}) != ({y})"),
                    };
                    to_domain(DType::U8, *dtype, &format!("(({v}) ? 1ul : 0ul)"))
                } else {
                    if op.integer_only() && dtype.is_float() {
                        return Err(invalid!("{} needs integer tensors, got {dtype}", op.name()));
                    }
                    if *op == BinaryOp::Atan2 && !dtype.is_float() && !dtype.is_complex() {
                        return Err(invalid!("atan2 needs a float result type, got {dtype}"));
                    }
                    let exact_mixed = lt.is_integer()
                        && rt.is_integer()
                        && lt.kind() != rt.kind()
                        && (lt == DType::U64 || rt == DType::U64)
                        && matches!(op, BinaryOp::Max | BinaryOp::Min | BinaryOp::Remainder | BinaryOp::Quotient);
                    if exact_mixed {
                        // u64 with a signed operand: no 64-bit domain holds both exactly
                        let f = match op {
                            BinaryOp::Max => "max",
                            BinaryOp::Min => "min",
                            BinaryOp::Remainder => "rem",
                            _ => "quot",
                        };
                        let (sa, sb) = (lt.kind() == Kind::Signed, rt.kind() == Kind::Signed);
                        let raw = format!("nx_{f}_mixed({}, {sa}, {}, {sb})", to_domain(lt, DType::U64, &a), to_domain(rt, DType::U64, &b));
                        to_domain(DType::U64, *dtype, &raw)
                    } else {
                        let (x, y) = (to_domain(lt, *dtype, &a), to_domain(rt, *dtype, &b));
                        binary(*op, *dtype, &x, &y)
                    }
                };
                let v = if self.fast(*dtype) { narrow(&wrap(*dtype, &v)) } else { wrap(*dtype, &v) };
                Ok(self.tmp(*dtype, v))
            }
        }
    }
}

/// `op` of an f32 value `x` under `FloatMath::Fast`: our f32 function, or the f64 library's
/// result rounded to f32 where math_f32.glsl has none.
fn fast_unary(op: UnaryOp, x: &str) -> String {
    match op {
        UnaryOp::Negate => format!("nxf_neg({x})"),
        UnaryOp::Abs
        | UnaryOp::Sign
        | UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Tanh
        | UnaryOp::Sigmoid
        | UnaryOp::Erf
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt => {
            format!("nxf_{}({x})", op.name())
        }
        _ => narrow(&unary(op, DType::F64, DType::F64, &format!("nx_f32_to_f64(floatBitsToUint({x}))"))),
    }
}

fn fast_binary(op: BinaryOp, x: &str, y: &str) -> String {
    match op {
        BinaryOp::Add => format!("nxf_add({x}, {y})"),
        BinaryOp::Subtract => format!("nxf_sub({x}, {y})"),
        BinaryOp::Multiply => format!("nxf_mul({x}, {y})"),
        BinaryOp::Divide => format!("nxf_div({x}, {y})"),
        BinaryOp::Pow => format!("nxf_pow({x}, {y})"),
        BinaryOp::Max => format!("nxf_max({x}, {y})"),
        BinaryOp::Min => format!("nxf_min({x}, {y})"),
        _ => {
            let w = |v: &str| format!("nx_f32_to_f64(floatBitsToUint({v}))");
            narrow(&binary(op, DType::F64, &w(x), &w(y)))
        }
    }
}

/// A comparison or logical op of two f32 values as 0/1 (`uint64_t`), on the bits: a device
/// that flushes subnormals would call two of them equal.
fn fast_compare(op: BinaryOp, x: &str, y: &str) -> String {
    let ordered = format!("!nxf_isnan({x}) && !nxf_isnan({y})");
    let (kx, ky) = (format!("nxf_key({x})"), format!("nxf_key({y})"));
    let b = match op {
        BinaryOp::Equal => format!("{ordered} && {kx} == {ky}"),
        BinaryOp::NotEqual => format!("!({ordered} && {kx} == {ky})"),
        BinaryOp::Greater => format!("{ordered} && {kx} > {ky}"),
        BinaryOp::Less => format!("{ordered} && {kx} < {ky}"),
        BinaryOp::GreaterEqual => format!("{ordered} && {kx} >= {ky}"),
        BinaryOp::LessEqual => format!("{ordered} && {kx} <= {ky}"),
        BinaryOp::LogicalAnd => format!("nxf_nonzero({x}) && nxf_nonzero({y})"),
        BinaryOp::LogicalOr => format!("nxf_nonzero({x}) || nxf_nonzero({y})"),
        _ => format!("nxf_nonzero({x}) != nxf_nonzero({y})"),
    };
    format!("(({b}) ? 1ul : 0ul)")
}

fn fast_predicate(op: UnaryOp, x: &str) -> String {
    let b = match op {
        UnaryOp::IsNan => format!("nxf_isnan({x})"),
        UnaryOp::IsInfinity => format!("nxf_isinf({x})"),
        _ => format!("!nxf_nonzero({x})"),
    };
    format!("(({b}) ? 1ul : 0ul)")
}

fn nonzero(t: DType, v: &str) -> String {
    match t.kind() {
        // %Complex{} is false only when both parts == 0 (a NaN part is true)
        Kind::Complex => format!("(!(({v}).x == 0.0LF && ({v}).y == 0.0LF))"),
        Kind::Float => format!("(({v}) != 0.0LF || nx_isnan({v}))"),
        Kind::Signed => format!("(({v}) != 0l)"),
        Kind::Unsigned => format!("(({v}) != 0ul)"),
    }
}

/// Nx.as_type from `from` to `to` (the result is wrapped/rounded by the caller). Floats become
/// integers as BinaryBackend does: NaN 0, ±Inf the target's extremes, else truncated and wrapped.
fn convert(from: DType, to: DType, v: &str) -> String {
    if from.is_complex() && !to.is_complex() {
        // Nx.as_type takes the real part (then the float rules below)
        return convert(from.real_part(), to, &format!("({v}).x"));
    }
    if from.is_float() && to.is_integer() {
        let (lo, hi): (i64, u64) = match to {
            DType::U8 => (0, 0xFF),
            DType::U16 => (0, 0xFFFF),
            DType::U32 => (0, 0xFFFF_FFFF),
            DType::U64 => (0, u64::MAX),
            DType::S8 => (-128, 127),
            // Nx 0.7.2's Nx.Type.{min,max}_finite_binary({:s, 16}) say -32678 and 32677
            DType::S16 => (-32678, 32677),
            DType::S32 => (i32::MIN as i64, i32::MAX as u64),
            _ => (i64::MIN, i64::MAX as u64),
        };
        let raw = format!("nx_f64_to_int({v}, {:#x}ul, {hi:#x}ul)", lo as u64);
        return if to.kind() == Kind::Signed { format!("int64_t({raw})") } else { raw };
    }
    to_domain(from, to, v)
}

fn unary_predicate(op: UnaryOp, from: DType, a: &str) -> String {
    let b = match (op, from.kind()) {
        (UnaryOp::IsNan, Kind::Float) => format!("nx_isnan({a})"),
        (UnaryOp::IsInfinity, Kind::Float) => format!("nx_isinf({a})"),
        (UnaryOp::LogicalNot, _) => format!("!{}", nonzero(from, a)),
        (UnaryOp::IsNan, Kind::Complex) => format!("(nx_isnan(({a}).x) || nx_isnan(({a}).y))"),
        (UnaryOp::IsInfinity, Kind::Complex) => format!("(nx_isinf(({a}).x) || nx_isinf(({a}).y))"),
        _ => "false".to_string(),
    };
    format!("(({b}) ? 1ul : 0ul)")
}

/// Whether `op` has a cheaper path to its full f64 function's f32 rounding (the same bits):
/// m_exp_f32, m_expm1_f32, m_log_f32, m_tanh_f32, m_sigmoid_f32, m_erf_f32 in math_f64.glsl.
fn has_f32_path(op: UnaryOp) -> bool {
    matches!(op, UnaryOp::Exp | UnaryOp::Expm1 | UnaryOp::Log | UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Erf)
}

/// Whether `unary`'s expression for `op` with result type `t` takes the f32 path: an f32
/// result, or a bf16 one, which Nx writes by rounding to f32 first and then keeping the top 16
/// bits — a function of the f32 value alone, so the node's bf16 rounding of the f32 path's
/// value is the full function's bf16 bits.
fn unary_takes_f32_path(op: UnaryOp, t: DType) -> bool {
    has_f32_path(op) && matches!(t, DType::F32 | DType::BF16)
}

/// Whether `unary`'s expression for `op` with result type `t` already gives a value of `t` (or
/// the canonical NaN), which the node then stores without rounding it again: the f32 paths
/// with an f32 result.
fn unary_rounds_itself(op: UnaryOp, t: DType) -> bool {
    has_f32_path(op) && t == DType::F32
}

fn unary(op: UnaryOp, t: DType, from: DType, x: &str) -> String {
    let k = t.kind();
    let bits = from.bits();
    match (op, k) {
        (UnaryOp::Negate, Kind::Float) => format!("(-({x}))"),
        (UnaryOp::Negate, Kind::Signed) => format!("(-({x}))"),
        (UnaryOp::Negate, Kind::Unsigned) => format!("(0ul - ({x}))"),
        (UnaryOp::Abs, Kind::Float) => format!("nx_abs_nx({x})"),
        (UnaryOp::Abs, Kind::Signed) => format!("((({x}) < 0l) ? -({x}) : ({x}))"),
        (UnaryOp::Abs, Kind::Unsigned) => x.to_string(),
        (UnaryOp::Sign, Kind::Float) => format!("nx_sign_f64({x})"),
        (UnaryOp::Sign, Kind::Signed) => format!("((({x}) > 0l) ? 1l : ((({x}) < 0l) ? -1l : 0l))"),
        (UnaryOp::Sign, Kind::Unsigned) => format!("((({x}) > 0ul) ? 1ul : 0ul)"),
        (UnaryOp::Ceil | UnaryOp::Floor | UnaryOp::Round, Kind::Signed | Kind::Unsigned) => x.to_string(),
        (UnaryOp::Ceil, _) => format!("ceil({x})"),
        (UnaryOp::Floor, _) => format!("floor({x})"),
        (UnaryOp::Round, _) => format!("nx_round_half_away({x})"),
        (UnaryOp::Sqrt, _) => format!("sqrt({x})"),
        (UnaryOp::BitwiseNot, _) => format!("(~({x}))"),
        (UnaryOp::CountLeadingZeros, _) => format!("nx_clz({x}, {bits})"),
        (UnaryOp::PopulationCount, _) => format!("nx_popcount({x}, {bits})"),
        // f32 and bf16 results: cheaper paths to the full function's f32 rounding (the same
        // bits; math_f64.glsl)
        (_, _) if unary_takes_f32_path(op, t) => format!("m_{}_f32({x})", op.name()),
        (op, _) => format!("m_{}({x})", op.name()),
    }
}

fn binary(op: BinaryOp, t: DType, x: &str, y: &str) -> String {
    let k = t.kind();
    let suffix = match k {
        Kind::Float | Kind::Complex => "f64", // complex results never get here (complex_binary)
        Kind::Signed => "s64",
        Kind::Unsigned => "u64",
    };
    // Integers of 32 bits or fewer divide in 32 bits (their values are in range: every node
    // is wrapped to its type): the same quotient and remainder, without the 64-bit division
    // routine GPUs emulate, on which NVIDIA's compiler refused two fused s32 kernels on the
    // H200 ("NVVM compilation failed: 3"; with 32-bit division they build).
    let div_suffix = match k {
        Kind::Signed if t.bits() <= 32 => "s32",
        Kind::Unsigned if t.bits() <= 32 => "u32",
        _ => suffix,
    };
    match op {
        BinaryOp::Add => format!("({x}) + ({y})"),
        BinaryOp::Subtract => format!("({x}) - ({y})"),
        BinaryOp::Multiply => format!("({x}) * ({y})"),
        BinaryOp::Divide => format!("nx_div_{div_suffix}({x}, {y})"),
        BinaryOp::Pow => match k {
            Kind::Float => format!("m_pow({x}, {y})"),
            _ => format!("nx_pow_{suffix}({x}, {y})"),
        },
        BinaryOp::Remainder => format!("nx_rem_{div_suffix}({x}, {y})"),
        BinaryOp::Quotient => format!("nx_quot_{div_suffix}({x}, {y})"),
        BinaryOp::Atan2 => format!("m_atan2({x}, {y})"),
        BinaryOp::Max => format!("nx_max_{suffix}({x}, {y})"),
        BinaryOp::Min => format!("nx_min_{suffix}({x}, {y})"),
        BinaryOp::BitwiseAnd => format!("({x}) & ({y})"),
        BinaryOp::BitwiseOr => format!("({x}) | ({y})"),
        BinaryOp::BitwiseXor => format!("({x}) ^ ({y})"),
        BinaryOp::LeftShift => format!("nx_shl_{suffix}({x}, {y})"),
        BinaryOp::RightShift => format!("nx_shr_{suffix}({x}, {y})"),
        _ => unreachable!("comparisons and logical ops are generated elsewhere"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(op: BinaryOp, a: DType, b: DType, out: DType) -> String {
        let e = Expr::binary(op, Expr::Input(0), Expr::Input(1), out);
        generate(&[e], &[(a, Access::Contiguous), (b, Access::Contiguous)], 1, Access::Contiguous, FloatMath::Exact, false, true).unwrap().source
    }

    #[test]
    fn f32_fast_path_only_for_correctly_rounded_f32_ops() {
        for op in [BinaryOp::Add, BinaryOp::Subtract, BinaryOp::Multiply] {
            assert!(source(op, DType::F32, DType::F32, DType::F32).contains("precise float r"), "{op:?}");
        }
        assert!(!source(BinaryOp::Divide, DType::F32, DType::F32, DType::F32).contains("precise float r"));
        assert!(!source(BinaryOp::Add, DType::F16, DType::F32, DType::F32).contains("precise float r"));
        assert!(!source(BinaryOp::Add, DType::F64, DType::F64, DType::F64).contains("precise float r"));
    }

    #[test]
    fn kernels_are_keyed_by_structure_not_shape() {
        let e = Expr::binary(BinaryOp::Add, Expr::Input(0), Expr::Input(1), DType::F32);
        let k1 = generate(std::slice::from_ref(&e), &[(DType::F32, Access::Contiguous), (DType::F32, Access::Scalar)], 2, Access::Contiguous, FloatMath::Exact, false, true).unwrap().key;
        let k2 = generate(std::slice::from_ref(&e), &[(DType::F32, Access::Contiguous), (DType::F32, Access::Strided)], 2, Access::Contiguous, FloatMath::Exact, false, true).unwrap().key;
        assert_ne!(k1, k2);
        assert!(!k1.contains("shape"));
        let k3 = generate(std::slice::from_ref(&e), &[(DType::F32, Access::Contiguous), (DType::F32, Access::Scalar)], 2, Access::Contiguous, FloatMath::Fast, false, true).unwrap().key;
        assert_ne!(k1, k3, "precision is part of the key");
    }

    /// Which chains get a speculative block: those with a native node (f32 add/subtract/
    /// multiply of runtime values), under Exact only if every node is an f32 float operation,
    /// input or constant; never with `speculate` off, nor for one exact add (its own fast path),
    /// nor for a node of constants alone.
    #[test]
    fn speculative_blocks_where_they_apply() {
        let (x, y) = (|| Expr::Input(0), || Expr::Input(1));
        let c = |v: f64| Expr::Const { value: Scalar::F(v), dtype: DType::F32 };
        let bin = |op, a, b| Expr::binary(op, a, b, DType::F32);
        let relu = bin(BinaryOp::Max, bin(BinaryOp::Add, bin(BinaryOp::Multiply, x(), y()), x()), c(0.0));
        let with_div = bin(BinaryOp::Divide, bin(BinaryOp::Add, x(), y()), c(3.0));
        let with_exp = Expr::unary(UnaryOp::Exp, bin(BinaryOp::Multiply, x(), y()), DType::F32);
        let zero_factor = bin(BinaryOp::Max, bin(BinaryOp::Multiply, x(), y()), c(0.0)); // a constant zero: max/min only
        let nan_factor = bin(BinaryOp::Add, bin(BinaryOp::Multiply, x(), c(0.0)), c(f64::NAN)); // never native
        let ins = [(DType::F32, Access::Contiguous), (DType::F32, Access::Contiguous)];
        let has = |e: &Expr, math, speculate| generate(std::slice::from_ref(e), &ins, 1, Access::Contiguous, math, false, speculate).unwrap().source.contains("bool nx_ok");
        for (e, exact, fast) in [(&relu, true, true), (&with_div, true, true), (&with_exp, true, true), (&zero_factor, true, true), (&nan_factor, false, false)] {
            assert_eq!(has(e, FloatMath::Exact, true), exact, "{e:?} Exact");
            assert_eq!(has(e, FloatMath::Fast, true), fast, "{e:?} Fast");
            assert!(!has(e, FloatMath::Exact, false) && !has(e, FloatMath::Fast, false), "{e:?} with speculation off");
        }
        assert!(!has(&bin(BinaryOp::Add, x(), y()), FloatMath::Exact, true), "one exact add keeps its own fast path");
        // the native node and its test
        let src = generate(std::slice::from_ref(&relu), &ins, 1, Access::Contiguous, FloatMath::Exact, false, true).unwrap().source;
        assert!(src.contains("= x0_ * x1_;") && src.contains("nx_ok = nx_ok && nxf_ok(x0_);"), "{src}");
        // under Exact the division and exp as the checked path computes them, widened and narrowed
        for (e, call) in [(&with_div, "nx_div_f64("), (&with_exp, "m_exp_f32(")] {
            let src = generate(std::slice::from_ref(e), &ins, 1, Access::Contiguous, FloatMath::Exact, false, true).unwrap().source;
            let block = &src[src.find("bool nx_ok").unwrap()..src.find("if (nx_ok)").unwrap()];
            assert!(block.contains(call) && block.contains("nx_f32_to_f64(floatBitsToUint(") && !block.contains("nxf_div(") && !block.contains("nxf_exp("), "{block}");
        }
        // not speculated under Exact: a conversion
        let convert = Expr::convert(bin(BinaryOp::Multiply, x(), y()), DType::F64);
        assert!(!has(&convert, FloatMath::Exact, true));
        // a zero computed from constants alone meets no native operation (it is a constant)
        let folded_zero = || bin(BinaryOp::Multiply, c(0.0), c(-1.0));
        let e = bin(BinaryOp::Add, bin(BinaryOp::Multiply, x(), folded_zero()), folded_zero());
        assert!(!has(&e, FloatMath::Exact, true) && !has(&e, FloatMath::Fast, true), "{e:?}");
    }

    /// Under :fast, f32 work uses our f32 library and no f64 at all where every op has an f32
    /// implementation (the f64 library only for ops it lacks).
    #[test]
    fn fast_kernels_compute_f32_in_f32() {
        let x = || Expr::Input(0);
        let chain = Expr::binary(
            BinaryOp::Divide,
            Expr::unary(UnaryOp::Exp, Expr::binary(BinaryOp::Subtract, x(), Expr::Input(1), DType::F32), DType::F32),
            Expr::unary(UnaryOp::Sqrt, x(), DType::F32),
            DType::F32,
        );
        let ins = [(DType::F32, Access::Contiguous), (DType::F32, Access::Scalar)];
        let fast = generate(std::slice::from_ref(&chain), &ins, 1, Access::Contiguous, FloatMath::Fast, false, true).unwrap().source;
        let body = &fast[fast.find("void main()").unwrap()..];
        assert!(body.contains("nxf_exp(") && body.contains("nxf_div(") && body.contains("nxf_sqrt("), "{body}");
        assert!(!body.contains("double") && !fast.contains("double m_exp("), "no f64 in a :fast f32 chain: {body}");
        let sin = Expr::unary(UnaryOp::Sin, x(), DType::F32);
        let fast = generate(&[sin], &ins, 1, Access::Contiguous, FloatMath::Fast, false, true).unwrap().source;
        assert!(fast.contains("m_sin(nx_f32_to_f64("), "sin goes through the f64 library");
    }

    /// The capabilities a SPIR-V module declares (OpCapability: opcode 17, one operand).
    fn capabilities(words: &[u32]) -> Vec<u32> {
        let (mut caps, mut i) = (vec![], 5);
        while i < words.len() {
            let (count, opcode) = ((words[i] >> 16) as usize, words[i] & 0xFFFF);
            if opcode == 17 {
                caps.push(words[i + 1]);
            }
            i += count.max(1);
        }
        caps
    }

    /// A :fast kernel whose f32/f16/bf16 ops all have f32 implementations declares no Float64
    /// capability, so it runs on a device without shaderFloat64 (Int64 is still declared: every
    /// kernel addresses memory through 64-bit buffer device addresses).
    #[test]
    fn fast_f32_kernels_declare_no_float64() {
        const FLOAT64: u32 = 10;
        const INT64: u32 = 11;
        let x = || Expr::Input(0);
        let y = || Expr::Input(1);
        let f = DType::F32;
        let un = |op, e| Expr::unary(op, e, f);
        let bin = |op, a, b| Expr::binary(op, a, b, f);
        let mut e = bin(BinaryOp::Add, un(UnaryOp::Exp, x()), un(UnaryOp::Log, y()));
        for op in [UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Erf, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Negate, UnaryOp::Abs, UnaryOp::Sign] {
            e = bin(BinaryOp::Multiply, un(op, e), y());
        }
        e = bin(BinaryOp::Divide, bin(BinaryOp::Subtract, e, x()), bin(BinaryOp::Max, x(), bin(BinaryOp::Min, y(), x())));
        let pred = Expr::binary(BinaryOp::Less, e.clone(), x(), DType::U8);
        e = Expr::select(pred, e, Expr::Const { value: Scalar::F(0.5), dtype: f }, f);
        let half = Expr::convert(Expr::unary(UnaryOp::Exp, Expr::Input(2), DType::F16), DType::BF16);
        let ins = [(f, Access::Contiguous), (f, Access::Strided), (DType::F16, Access::Contiguous)];
        let compiler = glslang::Compiler::acquire().expect("glslang");
        let spirv = |math| {
            let g = generate(&[e.clone(), half.clone()], &ins, 2, Access::Contiguous, math, false, true).unwrap();
            capabilities(&crate::kernel::compile_glsl(compiler, &g.key, &g.source, crate::kernel::ShaderTarget::Vulkan12).expect("compiles"))
        };
        let (fast, exact) = (spirv(FloatMath::Fast), spirv(FloatMath::Exact));
        assert!(exact.contains(&FLOAT64), "the exact kernel computes in f64: {exact:?}");
        assert!(!fast.contains(&FLOAT64), "the :fast kernel declares Float64: {fast:?}");
        assert!(fast.contains(&INT64), "64-bit device addresses: {fast:?}");
    }
}

/// A complex result of `op` on operands of types `lt` and `rt` (at least one complex, or a
/// complex result type): the `complex` library's clauses, real operands kept real.
fn complex_binary(op: BinaryOp, lt: DType, rt: DType, a: &str, b: &str) -> Result<String> {
    let f = match op {
        BinaryOp::Add => "nx_cadd",
        BinaryOp::Subtract => "nx_csub",
        BinaryOp::Multiply => "nx_cmul",
        BinaryOp::Divide => "nx_cdiv",
        BinaryOp::Pow => "nx_cm_pow",
        _ => return Err(invalid!("{} is not defined for complex numbers", op.name())),
    };
    let real = |t: DType, v: &str| to_domain(t, DType::F64, v);
    Ok(match (lt.is_complex(), rt.is_complex()) {
        (true, true) => format!("{f}({a}, {b})"),
        (false, true) => format!("{f}_rc({}, {b})", real(lt, a)),
        (true, false) => format!("{f}_cr({a}, {})", real(rt, b)),
        (false, false) => format!("dvec2({}, 0.0LF)", binary(op, DType::F64, &real(lt, a), &real(rt, b))),
    })
}

/// `op` where the argument or the result is complex (and real/imag/conjugate of anything).
/// Returns the value and whether it is the stored bits as they are (real/imag of a complex
/// into its part type copy the part, NaN payloads included, as BinaryBackend does).
fn complex_unary(op: UnaryOp, from: DType, to: DType, a: &str) -> Result<(String, bool)> {
    let unsupported = || invalid!("{} of {from} to {to} is not supported", op.name());
    match op {
        UnaryOp::Real | UnaryOp::Imag => {
            if from.is_complex() {
                let part = if op == UnaryOp::Real { format!("({a}).x") } else { format!("({a}).y") };
                if to == from.real_part() {
                    return Ok((part, true));
                }
                return Ok((convert(from.real_part(), to, &part), false));
            }
            if to.is_complex() {
                return Err(unsupported());
            }
            if op == UnaryOp::Imag {
                return Ok((to_domain(DType::F64, to, "0.0LF"), false));
            }
            if from == to {
                return Ok((a.to_string(), true));
            }
            return Ok((convert(from, to, a), false));
        }
        UnaryOp::Conjugate => {
            if !to.is_complex() {
                return Err(unsupported());
            }
            return Ok((if from.is_complex() { format!("dvec2(({a}).x, -({a}).y)") } else { format!("nx_conj_real({})", to_domain(from, DType::F64, a)) }, false));
        }
        _ => {}
    }
    // Every other op works on a complex value (a real argument is promoted to (x, +0.0)).
    let z = to_domain(from, DType::C128, a);
    let v = match op {
        UnaryOp::Abs => {
            let r = format!("nx_cabs({z})");
            return Ok((to_domain(DType::F64, to, &r), false));
        }
        // Nx.BinaryBackend's sign compares the %Complex{} struct with 0: a map is greater than
        // every number in Erlang's term order, so the sign of any complex is 1.
        UnaryOp::Sign => "dvec2(1.0LF, 0.0LF)".to_string(),
        UnaryOp::Negate => format!("(-({z}))"),
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Sigmoid
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tan => format!("nx_cm_{}({z})", op.name()),
        _ => return Err(invalid!("{} is not defined for complex numbers ({from} to {to})", op.name())),
    };
    if !to.is_complex() {
        return Err(invalid!("{} of {from} needs a complex result type, got {to}", op.name()));
    }
    Ok((v, false))
}
