//! Element types: the Nx types the engine stores and computes.

use crate::error::{invalid, Result};
use std::fmt;

/// An element type, named as Nx names it (`{:f, 32}` is `F32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    F16,
    BF16,
    F32,
    F64,
    /// Complex of two f32 (real, imaginary), computed as two f64 and rounded once per part.
    C64,
    /// Complex of two f64 (real, imaginary).
    C128,
}

/// How a kernel computes with a type: every float is evaluated in f64, every integer in
/// 64 bits, then rounded or wrapped once to its own type (Nx.BinaryBackend's contract).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Float,
    Signed,
    Unsigned,
    /// Complex: computed as a `dvec2` (f64 real, f64 imaginary).
    Complex,
}

impl DType {
    /// Every real type (the complex ones are in [`DType::COMPLEX`]).
    pub const ALL: [DType; 12] = [
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::S8,
        DType::S16,
        DType::S32,
        DType::S64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The complex types.
    pub const COMPLEX: [DType; 2] = [DType::C64, DType::C128];

    pub fn size(self) -> usize {
        self.bits() / 8
    }

    pub fn bits(self) -> usize {
        match self {
            DType::U8 | DType::S8 => 8,
            DType::U16 | DType::S16 | DType::F16 | DType::BF16 => 16,
            DType::U32 | DType::S32 | DType::F32 => 32,
            DType::U64 | DType::S64 | DType::F64 | DType::C64 => 64,
            DType::C128 => 128,
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => Kind::Unsigned,
            DType::S8 | DType::S16 | DType::S32 | DType::S64 => Kind::Signed,
            DType::C64 | DType::C128 => Kind::Complex,
            _ => Kind::Float,
        }
    }

    /// Real floating-point types only (Nx's `float?` also includes complex: see `is_complex`).
    pub fn is_float(self) -> bool {
        self.kind() == Kind::Float
    }

    pub fn is_integer(self) -> bool {
        matches!(self.kind(), Kind::Signed | Kind::Unsigned)
    }

    pub fn is_complex(self) -> bool {
        self.kind() == Kind::Complex
    }

    /// The type of one part of a complex type (f32 for c64, f64 for c128); `self` otherwise.
    pub fn real_part(self) -> DType {
        match self {
            DType::C64 => DType::F32,
            DType::C128 => DType::F64,
            t => t,
        }
    }

    /// Nx.Type.to_complex: f64 and c128 give c128, every other type c64.
    pub fn to_complex(self) -> DType {
        match self {
            DType::F64 | DType::C128 => DType::C128,
            _ => DType::C64,
        }
    }

    /// The name Nx prints (`"f32"`, `"bf16"`, `"u8"`).
    pub fn name(self) -> &'static str {
        match self {
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::S8 => "s8",
            DType::S16 => "s16",
            DType::S32 => "s32",
            DType::S64 => "s64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C64 => "c64",
            DType::C128 => "c128",
        }
    }

    pub fn parse(name: &str) -> Result<DType> {
        DType::ALL
            .into_iter()
            .chain(DType::COMPLEX)
            .find(|t| t.name() == name)
            .ok_or_else(|| invalid!("unknown element type {name:?} (expected one of u8..u64, s8..s64, f16, bf16, f32, f64, c64, c128)"))
    }

    /// The GLSL type a kernel computes this type in.
    pub(crate) fn glsl_compute(self) -> &'static str {
        match self.kind() {
            Kind::Float => "double",
            Kind::Signed => "int64_t",
            Kind::Unsigned => "uint64_t",
            Kind::Complex => "dvec2",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
