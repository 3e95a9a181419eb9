//! Quantized matrix × many token rows on tensor cores: the prefill GEMM.
//!
//! [`Context::record_llm_gemm`] has the contract of [`Context::record_llm_matvec`] (`out[t, n]
//! = Σ_k w[n, k] · x[t, k]`, bias, residual that may alias `out`, SwiGLU with gate and up) for
//! steps of many rows, where the matvec would read the weights once per 8 rows. Three steps,
//! recorded into the caller's batch:
//! 1. `llm_gemm.glsl` dequantizes W with ggml's formulas (`dq_unit`, the matvec's own) and
//!    writes it as f16 rows into a scratch `W16 [cols, K]` — up's rows after gate's for
//!    SwiGLU; rows as stored, so the writes and the reads of the quantized blocks both run
//!    along k (a transposed copy wrote 32 rows apart: 1.7× slower on the H200) — and rounds x
//!    to f16 (round to nearest even, integer operations: the same bits on every device);
//! 2. `record_dot` with [`DotPrecision::TensorCore`]: `x16 [T, K] · W16ᵀ` on
//!    cooperative matrices (f32 accumulation), or on devices without them the f32 tiled SGEMM
//!    over the widened f16 operands (`HalfFallback`, what lavapipe runs in CI);
//! 3. `llm_gemm.glsl` (EPILOGUE): SwiGLU / bias / residual as the matvec applies them (skipped
//!    when there is none and N needs no padding: the dot writes `out`).
//!
//! **Numerics** ([`LlmGemmPrecision`]). `F16`: both operands rounded to f16 once (|value| ≥
//! 65520 becomes ±Inf; below 2^-14 f16 keeps an absolute step of 2^-24), products accumulated
//! in f32 in the GEMM kernel's order: per element |err| ≤ (2^-10 + 2^-22)·Σ|w x| +
//! 2^-25·Σ(|w| + |x|) + the f32 summation error — what llama.cpp's f16 mul_mm computes; on
//! the fixtures prompt logits move by up to 7e-3 (the matvec: 1e-5). `Split`: each operand as
//! f16 hi + lo, three products (x_hi·w_hi + x_lo·w_hi + x_hi·w_lo) in one GEMM over 3K — three
//! times the tensor-core work for ≈ 2^-17 relative operands (lo parts are often f16
//! subnormals); bounds and measurements in tests/llm_gemm.rs. Either is a precision change
//! against the matvec (f32 activations, exact f32 weights), so [`llm_gemm_pays`] picks the
//! GEMM only on devices with f16 cooperative matrices. A row's result does not depend on how
//! many rows share the call (each output element's sum runs over k in a fixed order; tested
//! on the fallback), but it differs from the matvec's.
//!
//! Scratch: [`Context::llm_gemm_scratch`] sizes one set of buffers for every product of a
//! forward step (a step's products run in stream order, so one scratch serves them all);
//! `record_llm_gemm` allocates one per call.

use super::kernels::{check_product, Epilogue, QMatrix};
use super::quant::GgmlType;
use crate::device::DeviceCaps;
use crate::dtype::DType;
use crate::error::{invalid, Result};
use crate::matmul::{tensor_core_kernel, DotPrecision, MatmulKernel};
use crate::params::ParamBlock;
use crate::submit::Batch;
use crate::tensor::{Tensor, MAX_ELEMENTS};
use crate::Context;

/// Rows from which the GEMM beats the matvec on a device with tensor cores. The matvec's cost
/// grows with the rows (it reads the weights once per 8 and multiplies on f32 units); the GEMM
/// pays a fixed round trip — the weights written and read back as f16, 7× the Q4_K bytes:
/// ≈ 8 ms for the 8B model at 4 TB/s — then ≈ 0.1 ms per row at 150 TFLOP/s. Against today's
/// matvec (8B prefill 190 tok/s on the H200: 5.3 ms per row) the GEMM pays from 2 rows;
/// against a matvec bound by its f32 multiplies (8 rows per weight pass, ≈ 0.25 ms per row)
/// from about 50. 32 until `nx-vulkan llm-gemm-bench --rows` has measured the crossover.
pub const LLM_GEMM_MIN_ROWS: usize = 32;

/// Whether `rows` token rows should use [`Context::record_llm_gemm`]: only where the device
/// has f16 cooperative matrices (never a silent precision change on devices without tensor
/// cores) and `rows ≥ LLM_GEMM_MIN_ROWS`. `NX_VULKAN_LLM_GEMM=on|off|on:N` overrides the choice
/// (tests force the GEMM on lavapipe, where it runs the f32 fallback of the dot).
///
/// Batching never changes a bit only if a row's path does not depend on its batch-mates:
/// ask per kind of rows (a prompt chunk's), not per step — `x` and `out` may be row ranges,
/// so a step can run its prompt rows here and its decode rows on the matvec. `F16` moves the
/// fixtures' prompt logits by up to 7e-3 (beyond a 1e-4 decode-vs-recompute check); `Split`
/// by 2e-5.
pub fn llm_gemm_pays(caps: &DeviceCaps, rows: usize) -> bool {
    match std::env::var("NX_VULKAN_LLM_GEMM").as_deref() {
        Ok("on") => true,
        Ok("off") => false,
        // `on:N`: from N rows, tensor cores or not (tests mixing both paths in one step).
        Ok(v) if v.starts_with("on:") => v[3..].parse::<usize>().is_ok_and(|min| rows >= min),
        _ => rows >= LLM_GEMM_MIN_ROWS && matches!(tensor_core_kernel(caps, DType::F16), MatmulKernel::CoopMat { .. }),
    }
}

/// How the GEMM's operands are represented (module docs: bounds and costs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LlmGemmPrecision {
    /// Both operands rounded to f16: one tensor-core product per term.
    F16,
    /// Both operands as f16 hi + lo, three products per term (K tripled).
    #[default]
    Split,
}

impl LlmGemmPrecision {
    /// `NX_VULKAN_LLM_GEMM_PRECISION`: `split` (the default, also when unset: the forward
    /// pass then stays within the runtime's stated tolerances — on the H200, `f16` moved the
    /// fixtures' decode-vs-recompute logits by up to 1e-2) or `f16` (llama.cpp's precision,
    /// about 2.5× faster).
    pub fn from_env() -> Result<LlmGemmPrecision> {
        match std::env::var("NX_VULKAN_LLM_GEMM_PRECISION").as_deref() {
            Ok("f16") => Ok(LlmGemmPrecision::F16),
            Err(_) | Ok("split") => Ok(LlmGemmPrecision::Split),
            Ok(other) => Err(invalid!("NX_VULKAN_LLM_GEMM_PRECISION={other:?}: expected \"f16\" or \"split\"")),
        }
    }

    /// By name: "split" or "f16" (the CLI's `--prefill-precision`, Elixir's
    /// `:prefill_precision`).
    pub fn parse(name: &str) -> Result<LlmGemmPrecision> {
        match name {
            "split" => Ok(LlmGemmPrecision::Split),
            "f16" => Ok(LlmGemmPrecision::F16),
            other => Err(invalid!("prefill precision {other:?}: expected \"split\" or \"f16\"")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LlmGemmPrecision::Split => "split",
            LlmGemmPrecision::F16 => "f16",
        }
    }

    /// The GEMM's contraction length for a product over `k`.
    fn k(self, k: usize) -> Option<usize> {
        match self {
            LlmGemmPrecision::F16 => Some(k),
            LlmGemmPrecision::Split => k.checked_mul(3),
        }
    }
}

/// Scratch buffers for [`Context::record_llm_gemm_in`], flat, sized for the largest product
/// they serve: the f16 weights `[cols, K']`, the f16 activations `[T, K']` (K' = K, or 3K
/// split) and the f32 sums `[T, cols]`.
pub struct LlmGemmScratch {
    precision: LlmGemmPrecision,
    weights: Tensor,
    x: Tensor,
    acc: Tensor,
}

/// Rows of `w`'s f16 copy (the GEMM's output columns): N, twice that with an up matrix.
fn gemm_cols(w: &QMatrix, swiglu: bool) -> usize {
    w.rows * if swiglu { 2 } else { 1 }
}

/// The first `numel(shape)` elements of a flat scratch tensor, as a contiguous `shape`.
fn prefix(t: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let n = crate::tensor::checked_numel(shape)?;
    t.slice(&[0], &[n], &[1])?.reshape(shape)
}


/// Kernel source: the matvec kernels' assembly (`kernels::source`: prelude, defines, f16
/// conversions, for DEQUANT the dequantizer of `ty`) around `llm_gemm.glsl`.
fn source(ty: Option<GgmlType>, defines: &[&str]) -> String {
    super::kernels::source(ty, defines, include_str!("kernels/llm_gemm.glsl"))
}

impl Context {
    /// Scratch for every product `(w, swiglu)` of a step of `t` rows at `precision` (see
    /// [`LlmGemmScratch`]).
    pub fn llm_gemm_scratch(&self, t: usize, products: &[(&QMatrix, bool)], precision: LlmGemmPrecision) -> Result<LlmGemmScratch> {
        let (mut wt, mut xs, mut acc) = (0usize, 0usize, 0usize);
        for &(w, swiglu) in products {
            let cols = gemm_cols(w, swiglu);
            let kx = precision.k(w.cols);
            let fit = |s: Option<usize>| s.filter(|&s| s <= MAX_ELEMENTS);
            let Some(a) = fit(kx.and_then(|kx| kx.checked_mul(cols))) else {
                return Err(invalid!("llm gemm: the {precision:?} f16 copy of a [{}, {}] matrix exceeds 2^31 elements; use the matvec for it", w.rows, w.cols));
            };
            let (Some(b), Some(c)) = (fit(kx.and_then(|kx| kx.checked_mul(t))), fit(t.checked_mul(cols))) else {
                return Err(invalid!("llm gemm: a [{}, {}] product over {t} rows exceeds 2^31 scratch elements; feed fewer rows per step", w.rows, w.cols));
            };
            (wt, xs, acc) = (wt.max(a), xs.max(b), acc.max(c));
        }
        Ok(LlmGemmScratch { precision, weights: self.empty(DType::F16, &[wt])?, x: self.empty(DType::F16, &[xs])?, acc: self.empty(DType::F32, &[acc])? })
    }

    /// [`Context::record_llm_matvec`]'s product for many rows on tensor cores (module docs;
    /// [`LlmGemmPrecision::F16`]): `out[t, n] = Σ_k w[n, k] · x[t, k]` (+ bias[n])
    /// (+ residual[t, n], which may be `out`); with `up`, `out = silu(w·x) · (up·x)`. `x`
    /// `[T, K]` f32, `out` `[T, N]` f32, both contiguous (row ranges of larger tensors
    /// allowed). Allocates its scratch; the products of a forward step share one through
    /// [`Context::record_llm_gemm_in`].
    pub fn record_llm_gemm(&self, batch: &mut Batch<'_>, w: &QMatrix, up: Option<&QMatrix>, x: &Tensor, epi: Epilogue<'_>, out: &Tensor) -> Result<()> {
        let (t, n, _) = check_product("llm gemm", w, up, x, &epi, out)?;
        if t == 0 || n == 0 {
            return Ok(());
        }
        let scratch = self.llm_gemm_scratch(t, &[(w, up.is_some())], LlmGemmPrecision::F16)?;
        self.record_llm_gemm_in(batch, &scratch, w, up, x, epi, out)
    }

    /// [`Context::record_llm_gemm`] with the caller's scratch (from
    /// [`Context::llm_gemm_scratch`] for this product and `T` or more rows), at the scratch's
    /// precision.
    #[allow(clippy::too_many_arguments)]
    pub fn record_llm_gemm_in(&self, batch: &mut Batch<'_>, scratch: &LlmGemmScratch, w: &QMatrix, up: Option<&QMatrix>, x: &Tensor, epi: Epilogue<'_>, out: &Tensor) -> Result<()> {
        const OP: &str = "llm gemm";
        let (t, n, k) = check_product(OP, w, up, x, &epi, out)?;
        if t == 0 || n == 0 {
            return Ok(());
        }
        let cols = gemm_cols(w, up.is_some());
        let split = scratch.precision == LlmGemmPrecision::Split;
        let kx = scratch.precision.k(k).ok_or_else(|| invalid!("{OP}: K = {k} is too large"))?;
        let fits = |s: &Tensor, len: Option<usize>| len.is_some_and(|len| len <= s.numel());
        if !(fits(&scratch.weights, kx.checked_mul(cols)) && fits(&scratch.x, t.checked_mul(kx)) && fits(&scratch.acc, t.checked_mul(cols))) {
            return Err(invalid!("{OP}: the scratch is too small for [{n}, {k}] over {t} rows (llm_gemm_scratch)"));
        }
        let w16 = prefix(&scratch.weights, &[cols, kx])?;
        let x16 = prefix(&scratch.x, &[t, kx])?;
        // Without an epilogue the dot writes out itself (from its buffer's start).
        let direct = up.is_none() && epi.bias.is_none() && epi.residual.is_none() && out.offset == 0;
        let acc = if direct { out.clone() } else { prefix(&scratch.acc, &[t, cols])? };
        // 1. Weights to f16 rows (gate's from row 0, up's from row N), and x to f16.
        let with_split = |d: &'static str| if split { vec![d, "SPLIT"] } else { vec![d] };
        for (m, row0) in std::iter::once((w, 0)).chain(up.map(|u| (u, n))) {
            let defines = with_split("DEQUANT");
            let key = format!("llm gemm dequant {} {}", m.ty.name(), defines.join(" "));
            let kernel = self.kernels.get(&key, 256, 1, || source(Some(m.ty), &defines))?;
            let mut p = ParamBlock::new(OP);
            p.addrs([&m.data, &w16].map(|t| t.buffer.address()));
            p.i32s([n, k, m.row_bytes(), kx, row0])?;
            batch.keep(&m.data.buffer);
            batch.dispatch(&kernel, p.bytes(), (n * (k / 32)) as u64)?;
        }
        let defines = with_split("X_F16");
        let kernel = self.kernels.get(&format!("llm gemm {}", defines.join(" ")), 256, 1, || source(None, &defines))?;
        let mut p = ParamBlock::new(OP);
        p.addrs([x, &x16].map(|t| t.buffer.address()));
        p.i32s([t, k, x.offset, kx])?;
        batch.keep(&x.buffer);
        batch.dispatch(&kernel, p.bytes(), (t * k / 2) as u64)?;
        // 2. acc = x16 · W16ᵀ on tensor cores (or the f32 fallback of the same dot).
        self.record_dot(batch, DotPrecision::TensorCore, &x16, &[1], &[], &w16, &[1], &[], &acc)?;
        if direct {
            batch.keep(&scratch.weights.buffer);
            batch.keep(&scratch.x.buffer);
            return Ok(());
        }
        // 3. The epilogue into out.
        let mut defines = vec!["EPILOGUE"];
        for (on, d) in [(up.is_some(), "SWIGLU"), (epi.bias.is_some(), "BIAS"), (epi.residual.is_some(), "RESIDUAL")] {
            if on {
                defines.push(d);
            }
        }
        let key = format!("llm gemm {}", defines.join(" "));
        let kernel = self.kernels.get(&key, 256, 1, || source(None, &defines))?;
        let bias = epi.bias.unwrap_or(out);
        let res = epi.residual.unwrap_or(out);
        let mut p = ParamBlock::new(OP);
        p.addrs([&acc, bias, res, out].map(|t| t.buffer.address()));
        p.i32s([t, n, cols, n, bias.offset, res.offset, out.offset])?;
        for b in [&scratch.weights, &scratch.x, &scratch.acc, bias, res, out] {
            batch.keep(&b.buffer);
        }
        batch.dispatch(&kernel, p.bytes(), (t * n) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_names_round_trip() {
        for p in [LlmGemmPrecision::Split, LlmGemmPrecision::F16] {
            assert_eq!(LlmGemmPrecision::parse(p.name()).unwrap(), p);
        }
        let err = LlmGemmPrecision::parse("bf16").unwrap_err().to_string();
        assert!(err.contains("\"split\" or \"f16\""), "{err}");
    }

    /// Every kernel variant compiles with the linked glslang, including those the integration
    /// tests do not run (the split dequantizer of every weight type): each type × plain/split,
    /// the activation conversion, every epilogue combination.
    #[test]
    fn every_variant_compiles() {
        let compiler = glslang::Compiler::acquire().expect("glslang");
        let compile = |what: String, src: String| {
            crate::kernel::compile_glsl(compiler, "llm gemm test", &src, crate::kernel::ShaderTarget::Vulkan12).unwrap_or_else(|e| panic!("{what}: {e}"));
        };
        for ty in GgmlType::ALL.into_iter().filter(|t| t.is_weight_type()) {
            for defines in [&["DEQUANT"][..], &["DEQUANT", "SPLIT"]] {
                compile(format!("{ty:?} {defines:?}"), source(Some(ty), defines));
            }
        }
        for defines in [&["X_F16"][..], &["X_F16", "SPLIT"]] {
            compile(format!("{defines:?}"), source(None, defines));
        }
        for mask in 0..8 {
            let mut defines = vec!["EPILOGUE"];
            defines.extend([(1, "SWIGLU"), (2, "BIAS"), (4, "RESIDUAL")].into_iter().filter(|(b, _)| mask & b != 0).map(|(_, d)| d));
            compile(format!("{defines:?}"), source(None, &defines));
        }
    }
}
