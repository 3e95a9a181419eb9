//! The workgroup-scope tensor-core GEMM (VK_NV_cooperative_matrix2): one `BM × BN`
//! accumulator per workgroup, its A and B tiles loaded straight from device memory through
//! tensor layouts (`coopMatLoadTensorNV`). The driver stages the tiles and schedules the
//! multiplies itself; the KHR kernel in `matmul.rs` does both by hand with 16×16 subgroup
//! fragments, which on the H200 tops out near half of cuBLAS even multiplying only (its
//! ceiling probe). Clamped layouts read zeros outside the operands and drop stores outside
//! the output, so odd sizes need no bounds code; tiles that divide the sizes use the
//! unclamped layouts. The accumulator is f32; a NaN is stored as the canonical quiet NaN.
//! Correctness: `tests/coopmat.rs` on the H200 (lavapipe has no coopmat2: the shaders are
//! only compiled there, below).

use crate::dtype::DType;
use std::fmt::Write;

/// Everything the coopmat2 kernel's source depends on (its cache key is its Debug form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cm2Cfg {
    /// f16 or bf16 (both operands).
    pub input: DType,
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    /// A stored with k contiguous (rows of A); otherwise m contiguous (loaded transposed).
    pub a_kmajor: bool,
    /// B stored with n contiguous (rows of B); otherwise k contiguous (loaded transposed).
    pub b_nmajor: bool,
    /// Strides and offsets multiples of 8 elements (16 bytes): told to the compiler.
    pub aligned: bool,
    /// M, N or K not a tile multiple: clamped layouts.
    pub checked: bool,
    /// K steps per unrolled loop body (1, 2 or 4); the remainder runs one step at a time.
    pub unroll: u32,
    /// Invocations per workgroup: the flexible-dimension entry's (128 or 256).
    pub workgroup: u32,
}

impl Cm2Cfg {
    pub fn source(&self, meta: &str) -> String {
        let t = if self.input == DType::BF16 { "bfloat16_t" } else { "float16_t" };
        let mut s = crate::kernels::numeric_prelude();
        let ext = "#version 460\n#extension GL_KHR_cooperative_matrix : require\n#extension GL_NV_cooperative_matrix2 : require\n\
#extension GL_KHR_memory_scope_semantics : require\n#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n\
#extension GL_EXT_control_flow_attributes : enable\n#extension GL_EXT_bfloat16 : enable\n";
        s = s.replacen("#version 460\n", ext, 1);
        writeln!(s, "#define T {t}\n#define BM {}\n#define BN {}\n#define BK {}\n#define UNROLL {}", self.bm, self.bn, self.bk, self.unroll).unwrap();
        let elem = if self.input == DType::BF16 { "BufCm2BF16" } else { "BufCm2F16" };
        writeln!(s, "layout(buffer_reference, std430, buffer_reference_align = 16) buffer {elem} {{ T v[]; }};").unwrap();
        s.push_str("layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufCm2F32 { float v[]; };\n");
        let layout = if self.checked {
            "tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV>"
        } else {
            "tensorLayoutNV<2>"
        };
        let create = if self.checked { "createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV)" } else { "createTensorLayoutNV(2)" };
        // `& ~7u` tells the compiler the strides and offsets are 16-byte multiples.
        let al = if self.aligned { " & ~7u" } else { "" };
        // The layouts name the operands in storage order: A as (m, k) rows or (k, m) rows
        // read through the transposing view, B as (k, n) or (n, k).
        let (a_dims, a_stride, a_slice, a_view) = if self.a_kmajor {
            ("uint(M), uint(K)", "sAm", "m0, BM, k0, BK", "")
        } else {
            ("uint(K), uint(M)", "sAk", "k0, BK, m0, BM", ", tr")
        };
        let (b_dims, b_stride, b_slice, b_view) = if self.b_nmajor {
            ("uint(K), uint(N)", "sBk", "k0, BK, n0, BN", "")
        } else {
            ("uint(N), uint(K)", "sBn", "n0, BN, k0, BK", ", tr")
        };
        let step = format!(
            "{{
                coopmat<T, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> a;
                coopmat<T, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> b;
                coopMatLoadTensorNV(a, {elem}(addrA).v, baseA, sliceTensorLayoutNV(lA, {a_slice}){a_view});
                coopMatLoadTensorNV(b, {elem}(addrB).v, baseB, sliceTensorLayoutNV(lB, {b_slice}){b_view});
                acc = coopMatMulAdd(a, b, acc);
                k0 += BK;
            }}"
        );
        writeln!(s, "layout(local_size_x = {}) in;\nvoid main() {{", self.workgroup).unwrap();
        s.push_str(meta);
        write!(
            s,
            "    {layout} lA = {create};
    lA = setTensorLayoutDimensionNV(lA, {a_dims});
    lA = setTensorLayoutStrideNV(lA, uint({a_stride}){al}, 1);
    {layout} lB = {create};
    lB = setTensorLayoutDimensionNV(lB, {b_dims});
    lB = setTensorLayoutStrideNV(lB, uint({b_stride}){al}, 1);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lC = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lC = setTensorLayoutDimensionNV(lC, uint(M), uint(N));
    lC = setTensorLayoutStrideNV(lC, uint(N), 1);
    tensorViewNV<2, false, 1, 0> tr = createTensorViewNV(2, false, 1, 0);
    uint m0 = gl_WorkGroupID.y * BM; uint n0 = gl_WorkGroupID.x * BN;
    uint steps = (uint(K) + BK - 1u) / BK;
    for (uint bz = gl_WorkGroupID.z; bz < uint(Bt); bz += gl_NumWorkGroups.z) {{
        uint baseA = uint(offA + int(bz) * sAb){al};
        uint baseB = uint(offB + int(bz) * sBb){al};
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc = coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
        uint k0 = 0u;
        uint s = 0u;
        for (; s + UNROLL <= steps; s += UNROLL) {{
            [[unroll]] for (uint u = 0u; u < UNROLL; u++) {step}
        }}
        for (; s < steps; s++) {step}
        for (int i = 0; i < acc.length(); i++) {{
            if (isnan(acc[i])) acc[i] = uintBitsToFloat(0x7FC00000u);
        }}
        coopMatStoreTensorNV(acc, BufCm2F32(addrC).v, bz * uint(M) * uint(N), sliceTensorLayoutNV(lC, m0, BM, n0, BN));
    }}
}}
"
        )
        .unwrap();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every coopmat2 variant compiles with the linked glslang (CI has no device that runs
    /// them; the H200 run executes them against CPU references in tests/coopmat.rs).
    #[test]
    fn coopmat2_variants_compile() {
        let compiler = glslang::Compiler::acquire().expect("glslang");
        for input in [DType::F16, DType::BF16] {
            for (bm, bn, bk) in [(128, 128, 32), (128, 256, 64), (256, 128, 32), (64, 64, 64)] {
                for (a_kmajor, b_nmajor, aligned, checked, unroll) in
                    [(true, true, true, false, 4), (false, false, false, true, 1), (true, false, true, true, 2)]
                {
                    let cfg = Cm2Cfg { input, bm, bn, bk, a_kmajor, b_nmajor, aligned, checked, unroll, workgroup: 256 };
                    let spirv = crate::kernel::compile_glsl(compiler, "coopmat2 test", &cfg.source(crate::matmul::META), crate::kernel::ShaderTarget::Vulkan13)
                        .unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
                    assert_eq!(spirv[0], 0x0723_0203, "SPIR-V magic");
                }
            }
        }
    }
}
