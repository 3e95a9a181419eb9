//! Dot products and batched matrix multiplication (Nx.dot/6).
//!
//! `dot` regroups each operand as a 3-axis view — `a` as `[B, M, K]`, `b` as `[B, K, N]` —
//! merging axes through their strides where the layout allows (transposed and sliced inputs are
//! read in place) and materialising with `Context::contiguous` only where it does not. The
//! result is a contiguous `[B, M, N]` tensor reshaped to Nx's axis order: batch axes, then
//! `a`'s free axes, then `b`'s free axes.
//!
//! [`Context::record_dot`] records the whole dot — operand conversions and copies, the GEMM,
//! and for the exact f32 policy the f64 GEMM into a scratch tensor and its rounding to f32 —
//! into a caller's batch, writing a caller's output (a new tensor of [`dot_output_shape`]);
//! `dot`, `dot_with` and `dot_using` allocate the output and commit a batch of their own.
//!
//! Kernels (chosen by [`choose_kernel`] from the output type, the shape and `DeviceCaps`):
//! - [`MatmulKernel::Tiled`] for f32: a shared-memory GEMM. A workgroup of 256 invocations
//!   computes a `BM × BN` tile stepping `BK` along K (64×64×16 by default; 128×128×8/16 also
//!   built, see `choose_kernel` for measurements); each invocation owns a `BM/16 × BN/16`
//!   register block (4×4 or 8×8) laid out as
//!   4×4 sub-blocks 64 rows/columns apart, so its shared-memory reads are 16-byte vectors
//!   without bank conflicts. Both tiles are double-buffered in shared memory (one barrier per
//!   K step) with the next tile prefetched into registers while the current one is multiplied.
//!   Global loads are 16-byte vectors when the operand's contiguous axis allows it, otherwise
//!   four strided scalar loads; each operand's thread mapping follows its contiguous axis so
//!   loads coalesce for transposed operands too. Bounds checks are compiled out when M, N and K
//!   are tile multiples.
//! - [`MatmulKernel::Tiled`] for f64: the same kernel in double (64×64×8 tiles, 4×4 per
//!   invocation; 128×128×8, 8×8, for large products; 128×64 and 64×128, 8×4 and 4×8, can be
//!   forced). A term is `fma(a, b, acc)` where the operands' original types make every
//!   product exact in f64 (the exact f32 dot: [`F64Products`]), else a rounded product then a
//!   rounded sum.
//! - [`MatmulKernel::Simple`]: one invocation per output element, for f16/bf16 (accumulated in
//!   f64, rounded once) and integers (64-bit accumulation, wrapped to the output width).
//!
//! **Numerics.** [`Context::dot`] is exact in Nx.BinaryBackend's sense: an f32 dot is computed
//! as an f64 dot of the (exactly widened) operands — every f32×f32 product is exact in f64 and
//! the sum runs in ascending k — and rounded once to f32, so results are bit-identical to
//! BinaryBackend's. [`DotPrecision::F32Accumulate`] (SGEMM, what cuBLAS and the benchmarks
//! measure) instead accumulates in f32, one `fma` per product in ascending k, so reruns are
//! bit-identical but results differ from BinaryBackend in the last bits. The f32 kernel reads stored bits with
//! `uintBitsToFloat` and multiplies with the device's f32 units: on devices that do not
//! preserve f32 denormals (the H200 reports `shaderDenormPreserveFloat32 = false`), denormal
//! inputs, products and partial sums (|x| < 2^-126) may be flushed to zero. That is the usual
//! GPU SGEMM behaviour; results outside the denormal range are unaffected. f64 products and sums
//! are `precise` and unfused (`acc + a*b` in ascending k), which is exactly Nx.BinaryBackend's
//! order and rounding: f64 results are bit-identical to it. Operands of another type than the
//! f32/f64 output are converted first (`Nx.as_type`), as Nx does.
//!
//! **Tensor cores.** [`DotPrecision::TensorCore`] on f16×f16 or bf16×bf16 operands picks
//! [`tensor_core_kernel`]: [`MatmulKernel::CoopMat`] (VK_KHR_cooperative_matrix) where the
//! device lists a subgroup-scope shape with f32 accumulation for the input type, else
//! [`MatmulKernel::HalfFallback`]. The CoopMat kernel: 256 invocations (8 subgroups of 32, or
//! 4 of 64), each subgroup owning 64 rows of the workgroup's `bm × bn` output tile (128×128 by
//! default; 256×128 and 128×256 can be forced) and stepping `bk` (64, or 32) along K; the
//! projection kernel ([`Context::record_coopmat_linear`]) takes 64×64, 32×32 and 16×16 tiles of
//! at most 128 invocations when few rows would leave 128×128 a grid of a few workgroups (same
//! bits: see [`pick_linear_tile`]), which can also be forced for a dot. A and B
//! tiles are staged in shared memory (typed as the element's 2-vectors by default; raw 16-byte
//! words, two buffers with one barrier per step, direct global loads and a multiply-only
//! ceiling probe are forced variants), loaded
//! with one 16-byte access per 8 elements when the operand's contraction/column axis is
//! contiguous and aligned (else 8 strided loads), with the next tile's loads in flight while
//! the current one is multiplied. Fragments and accumulators are separate generated variables,
//! not arrays: with arrays NVIDIA's driver kept them in memory (35 vs 211 TFLOP/s at 4096³ on
//! the H200). Out-of-range rows, columns and K remainders are zero-filled, and the result
//! leaves through a per-subgroup shared scratch with bounds checks and the exact encoder of the
//! output type (f32, or one rounding to f16/bf16 — Nx.dot of two f16 tensors is f16; NaN
//! canonical). The fallback widens both operands to f32 (exact), runs the f32 tiled kernel (f32
//! accumulation) and rounds once. [`DotPrecision::SplitF32`] runs f32 products on the f16
//! kernel (operands split into two scaled f16 parts, three products: `split_f32.rs`).
//! int8 × int8 → int32 under [`DotPrecision::TensorCore`] runs on the device's int8
//! cooperative matrices (int32 accumulation, raw 16-byte-word staging, 128×128 tiles, K step
//! 128), else on the exact integer kernel: both exact, so the same bits.
//! Measurements: bench/README.md.

use crate::device::DeviceCaps;
use crate::dtype::{DType, Kind};
use crate::elementwise::Expr;
use crate::error::{invalid, EngineError, Result};
use crate::ops::check_dense_output;
use crate::params::ParamBlock;
use crate::reduce::{buf_type, decode, encode, merge_dims, to_domain};
use crate::submit::Batch;
use crate::tensor::{numel, Tensor};
use crate::Context;
use std::fmt::Write;

/// How an f32 dot accumulates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DotPrecision {
    /// Products and sums in f64, one rounding to f32 at the end (Nx.BinaryBackend's result).
    #[default]
    Exact,
    /// f32 accumulation on the tiled SGEMM kernel: faster, not bit-identical to BinaryBackend.
    F32Accumulate,
    /// Tensor cores: f16×f16 or bf16×bf16 operands multiplied exactly and accumulated in f32
    /// on cooperative matrices ([`MatmulKernel::CoopMat`]) where the device has them, else on
    /// the f32 shared-memory kernel ([`MatmulKernel::HalfFallback`]); one rounding to the output
    /// type. The summation order is the hardware's, so results are not bit-identical across
    /// devices (error bound: see `tests/coopmat.rs`). f32×f32→f32: split-f32
    /// ([`DotPrecision::SplitF32`]) for large products on devices with f16 cooperative
    /// matrices ([`tensor_core_f32_uses_split`]), else as `F32Accumulate`. Other operand types:
    /// as `F32Accumulate` for f32 outputs, exact otherwise. Never the default (`:fast` is
    /// this). int8×int8→int32: int8 cooperative matrices where listed, else the exact
    /// integer kernel — exact either way.
    TensorCore,
    /// f32×f32 → f32 on f16 tensor cores: each operand scaled per row/column and split into
    /// two f16 parts, three products accumulated in f32 (`split_f32.rs`); on devices without
    /// cooperative matrices the same parts go through the f32 tiled kernel. Error about the
    /// SGEMM's (measured in `tests/split_f32.rs`), not bit-identical across devices. Other
    /// operand or output types: as `F32Accumulate`. Never the default; `TensorCore` (`:fast`)
    /// takes it for large f32 products only (it costs six more dispatches than an SGEMM).
    SplitF32,
}

/// Which kernel computes a `[B, M, K] × [B, K, N]` product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatmulKernel {
    /// Shared-memory tiled GEMM for f32 or f64 (`bm × bn` per workgroup, `bk` per K step).
    Tiled { dtype: DType, bm: u32, bn: u32, bk: u32 },
    /// One invocation per output element: any output type, exact accumulation.
    Simple,
    /// Cooperative-matrix (tensor core) GEMM: `input`×`input` (f16 or bf16) products
    /// accumulated in f32 on `m × n × k` cooperative matrices (a shape from the device's
    /// property list), written as f32, f16 or bf16; or int8 products accumulated and written
    /// as int32. Chosen only by `DotPrecision::TensorCore` (and split-f32).
    CoopMat { input: DType, m: u32, n: u32, k: u32, bm: u32, bn: u32, bk: u32, staging: CoopStaging },
    /// Workgroup-scope tensor-core GEMM (VK_NV_cooperative_matrix2): one `bm × bn` f32
    /// accumulator per workgroup of `workgroup` invocations, `bk` per step, tiles loaded through
    /// tensor layouts (see `coopmat2.rs`). Writes f32 only. Never chosen (slower than `CoopMat`
    /// on the H200, see [`tensor_core_kernel`]): benchmarks and tests force it.
    CoopMat2 { input: DType, bm: u32, bn: u32, bk: u32, workgroup: u32 },
    /// The same interface without cooperative matrices (lavapipe, older GPUs): the operands
    /// widened to f32 (exact), the f32 tiled kernel accumulating in f32, one rounding.
    HalfFallback,
}

/// How the cooperative-matrix kernel feeds its fragments.
// The probe is a real variant (benchmarks force it), only hidden from the docs.
#[allow(clippy::manual_non_exhaustive)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoopStaging {
    /// A/B tiles in shared memory typed as the element type's 2-vectors (f16vec2/bf16vec2),
    /// fragments loaded from there.
    SharedTyped,
    /// A/B tiles in shared memory as raw 16-byte words (uvec4), fragments loaded from them
    /// with the element type reinterpreted.
    SharedWords,
    /// Fragments loaded straight from the operands in device memory (no shared memory): only
    /// for contiguous, aligned operands whose sizes are tile multiples.
    Global,
    /// Two shared buffers (typed as `SharedTyped`'s, raw words for int8): the next tile is
    /// stored into one while the other is multiplied — one barrier per K step instead of two.
    /// Plain products only (no split parts, f32 staging or epilogue). Measured slower on the
    /// H200 (bench/README.md, stop 28) and never chosen; its results have not been checked on
    /// a device with cooperative matrices (only compiled in CI).
    SharedDouble,
    /// Ceiling probe: fragments loaded once, then only multiply-adds over K. Its result is
    /// NOT the product — it measures the multiply throughput this path can reach.
    #[doc(hidden)]
    ProbeMultiplyOnly,
}

/// The kernel `DotPrecision::TensorCore` uses for `input`×`input` operands on `caps`: the
/// cooperative-matrix kernel with the device's best f32-accumulating shape, else the fallback.
/// Never the coopmat2 kernel: on the H200 its tiles ran at 58–106 TFLOP/s f16 at 4096³ where
/// this one ran 201 in the same run (bench/README.md), so it is only ever forced.
pub fn tensor_core_kernel(caps: &DeviceCaps, input: DType) -> MatmulKernel {
    let Some(t) = coopmat_type(input) else { return MatmulKernel::HalfFallback };
    let Some(s) = caps.coopmat_shape(t) else { return MatmulKernel::HalfFallback };
    // int8 tiles are staged as raw 16-byte words (no 2-vector type of int8 to stage them as)
    let staging = if input == DType::S8 { CoopStaging::SharedWords } else { CoopStaging::SharedTyped };
    // K step: 64 where shared memory allows (fewer barriers per multiply), else 32 (int8: 128
    // and 64, the same bytes per step).
    let steps = if input == DType::S8 { [128, 64] } else { [64, 32] };
    steps
        .into_iter()
        .map(|bk| MatmulKernel::CoopMat { input, m: s.m, n: s.n, k: s.k, bm: 128, bn: 128, bk, staging })
        .find(|k| coopmat_runs_here(caps, *k))
        .unwrap_or(MatmulKernel::HalfFallback)
}

/// The coopmat2 kernel with a `bm × bn × bk` tile for `input`×`input` products on `caps`, if
/// the device's flexible-dimension list has a workgroup-scope f32-accumulating entry for the
/// type whose granularities divide the tile (its workgroup size is the entry's: 128 or 256).
pub fn coopmat2_kernel(caps: &DeviceCaps, input: DType, bm: u32, bn: u32, bk: u32) -> Option<MatmulKernel> {
    use crate::device::CoopMatType;
    let t = coopmat_type(input)?;
    if !caps.coopmat2 || !caps.vulkan_memory_model || !caps.float16 || (t == CoopMatType::BF16 && !(caps.bfloat16 && caps.bfloat16_coopmat)) {
        return None;
    }
    let fits_dims = bm.max(bn).max(bk) <= caps.coopmat2_max_dimension;
    caps.coopmat2_shapes
        .iter()
        .filter(|s| {
            s.scope == "workgroup"
                && s.a == t
                && s.b == t
                && s.c == CoopMatType::F32
                && s.result == CoopMatType::F32
                && !s.saturating
                && matches!(s.workgroup_invocations, 128 | 256)
                && s.workgroup_invocations <= caps.coopmat2_max_workgroup
                && s.m_granularity > 0
                && s.n_granularity > 0
                && s.k_granularity > 0
                && bm.is_multiple_of(s.m_granularity)
                && bn.is_multiple_of(s.n_granularity)
                && bk.is_multiple_of(s.k_granularity)
        })
        .map(|s| s.workgroup_invocations)
        .max()
        .filter(|_| fits_dims)
        .map(|workgroup| MatmulKernel::CoopMat2 { input, bm, bn, bk, workgroup })
}

/// The GEMM [`DotPrecision::SplitF32`] multiplies its parts with on `caps`: the f16
/// tensor-core kernel ([`tensor_core_kernel`]) where the device has cooperative matrices, else
/// the f32 tiled kernel (the parts then stored as f32: the same values).
pub fn split_f32_kernel(caps: &DeviceCaps) -> MatmulKernel {
    match tensor_core_kernel(caps, DType::F16) {
        kernel @ MatmulKernel::CoopMat { .. } => kernel,
        _ => choose_kernel(caps, DType::F32, 1, 1, 1, 1),
    }
}

/// Whether [`DotPrecision::TensorCore`] runs an f32×f32→f32 product of `m × k` by `k × n`
/// matrices as split-f32 on `caps`: where the device has f16 cooperative matrices and the
/// product is large (m·n·k ≥ 2048³); smaller ones stay on the SGEMM, faster there (H200,
/// bench/README.md "Stop 28": 1024³ 20 TFLOP/s split against 27 SGEMM, 2048³ 46 against 31,
/// 4096³ 59 against 32), with errors of the SGEMM's size or smaller at those sizes.
pub fn tensor_core_f32_uses_split(caps: &DeviceCaps, m: usize, n: usize, k: usize) -> bool {
    const LARGE: u128 = 1 << 33;
    matches!(split_f32_kernel(caps), MatmulKernel::CoopMat { .. }) && (m as u128) * (n as u128) * (k as u128) >= LARGE
}

fn coopmat_type(input: DType) -> Option<crate::device::CoopMatType> {
    use crate::device::CoopMatType;
    match input {
        DType::F16 => Some(CoopMatType::F16),
        DType::BF16 => Some(CoopMatType::BF16),
        DType::S8 => Some(CoopMatType::I8),
        _ => None,
    }
}

/// Whether `kernel` (a `CoopMat`) can run on `caps`: its shape is in the device's property list
/// for its input type with f32 accumulation (int32 for int8), the device has the features its
/// shader needs, and its tiles fit the subgroup grid and shared memory.
pub fn coopmat_runs_here(caps: &DeviceCaps, kernel: MatmulKernel) -> bool {
    let MatmulKernel::CoopMat { input, m, n, k, bm, bn, bk, staging } = kernel else { return false };
    let Some(t) = coopmat_type(input) else { return false };
    let acc = t.accumulator();
    let listed = caps.coopmat_shape(t).is_some()
        && caps.coopmat_shapes.iter().any(|s| (s.m, s.n, s.k) == (m, n, k) && s.a == t && s.b == t && s.c == acc && s.result == acc && s.scope == "subgroup");
    let cfg = CoopCfg { out: if input == DType::S8 { DType::S32 } else { DType::F32 }, ..CoopCfg::probe(input, m, n, k, bm, bn, bk, staging, caps.subgroup_size) };
    listed && cfg.fits() && cfg.shared_bytes() <= caps.max_shared_memory as usize
}

/// The kernel for an `out`-typed product of `batch` `m × k` by `k × n` matrices on `caps`.
/// Depends on the shape and the device's capabilities only.
pub fn choose_kernel(caps: &DeviceCaps, out: DType, _batch: usize, m: usize, n: usize, _k: usize) -> MatmulKernel {
    // CoopMat is never chosen here: it changes the summation, so only DotPrecision::TensorCore
    // (tensor_core_kernel) picks it.
    let tile = |dtype, b, bk| MatmulKernel::Tiled { dtype, bm: b, bn: b, bk };
    // Candidates in order of preference; the first whose shared memory fits the device wins.
    let candidates = match out {
        // Measured on an H200 (median of 15 after warm-up; torch SGEMM, TF32 off, same run):
        // 4096³ row-major: 64×64×16 31.6 TFLOP/s, 128×128×16 31.1, 128×128×8 28.9 (torch 49.5);
        // 1024³: 64×64×16 23.4, 128×128×8 15.2 (torch 26.6). With Aᵀ or Bᵀ operands
        // 128×128×8 is ~15 % faster at 4096 (34.9–36.5) and 64×64×16 still 29–32. One choice
        // that is good everywhere: 64×64×16.
        DType::F32 => vec![tile(DType::F32, 64, 16)],
        // f64 on an H200 (median of 7, 2026-12-01; every tile gives the same bits): 4096³
        // 64×64×8 9.0 TFLOP/s, 64×64×16 7.9, 128×128×8 10.7; 1024³ 7.2, 7.3, 5.0.
        // On an H100 (stop 42, 3 calls × 5 reps): 1024³ 128×64×8 8.9 TFLOP/s against 64×64×8's
        // 7.7 (the exact products 9.7 against 7.0); 2048³ and 4096³ 128×64 within ±10 % of
        // 128×128 (exact: 10 % slower), so 128×128 stays above 2048 (only cubes were measured:
        // a 4096×1024 output takes 128×64 by this rule).
        DType::F64 if m >= 2048 && n >= 2048 => vec![tile(DType::F64, 128, 8), tile(DType::F64, 64, 8)],
        DType::F64 if m >= 1024 && n >= 1024 => {
            vec![MatmulKernel::Tiled { dtype: DType::F64, bm: 128, bn: 64, bk: 8 }, tile(DType::F64, 64, 8)]
        }
        DType::F64 => vec![tile(DType::F64, 64, 8)],
        _ => vec![],
    };
    candidates
        .into_iter()
        .find(|k| match *k {
            MatmulKernel::Tiled { dtype, bm, bn, bk } => shared_bytes(dtype, bm, bn, bk) <= caps.max_shared_memory as usize,
            _ => true,
        })
        .unwrap_or(MatmulKernel::Simple)
}

fn shared_bytes(dtype: DType, bm: u32, bn: u32, bk: u32) -> usize {
    // two buffers of [bk][b/4 + 1] 4-vectors per operand
    let v = 4 * dtype.size();
    2 * bk as usize * ((bm / 4 + 1) + (bn / 4 + 1)) as usize * v
}

/// Which of a `rows × cols` view's two matrix axes has unit stride (2: cols, 1: rows); a
/// size-1 axis counts as either.
fn unit_axis(v: &View3, rows: usize, cols: usize) -> Option<usize> {
    if v.s[2] == 1 || cols <= 1 {
        Some(2)
    } else if v.s[1] == 1 || rows <= 1 {
        Some(1)
    } else {
        None
    }
}

/// An operand seen as three strided axes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct View3 {
    pub(crate) offset: usize,
    /// strides of (batch, rows, cols); a size-1 or empty group has stride 0
    pub(crate) s: [isize; 3],
}

/// Views `t` (already permuted to `[batch..., rows..., cols...]` with the given group lengths)
/// as three axes, or `None` when a group's axes cannot be merged through strides.
fn view3(t: &Tensor, groups: [usize; 3]) -> Option<View3> {
    let mut at = 0;
    let mut s = [0isize; 3];
    for g in 0..3 {
        let dims: Vec<(usize, isize)> = (at..at + groups[g]).map(|d| (t.shape[d], t.strides[d])).collect();
        at += groups[g];
        let size: usize = dims.iter().map(|d| d.0).product();
        if size == 0 {
            continue;
        }
        let merged = merge_dims(&dims);
        match merged.len() {
            0 => {}
            1 => s[g] = merged[0].1,
            _ => return None,
        }
    }
    Some(View3 { offset: t.offset, s })
}

/// A dot's sizes after validation: `[B, M, N, K]` and the axes regrouped.
struct DotPlan {
    shape: Vec<usize>,
    bsz: usize,
    m: usize,
    n: usize,
    k: usize,
    free_a: Vec<usize>,
    free_b: Vec<usize>,
}

fn dot_plan(a: &[usize], contract_a: &[usize], batch_a: &[usize], b: &[usize], contract_b: &[usize], batch_b: &[usize]) -> Result<DotPlan> {
    check_axes(a, contract_a, batch_a, "a")?;
    check_axes(b, contract_b, batch_b, "b")?;
    if contract_a.len() != contract_b.len() || batch_a.len() != batch_b.len() {
        return Err(invalid!(
            "dot: {} contraction and {} batch axes on a, {} and {} on b",
            contract_a.len(),
            batch_a.len(),
            contract_b.len(),
            batch_b.len()
        ));
    }
    for (&x, &y) in contract_a.iter().zip(contract_b).chain(batch_a.iter().zip(batch_b)) {
        if a[x] != b[y] {
            return Err(invalid!("dot: axis {x} of a (size {}) does not match axis {y} of b (size {})", a[x], b[y]));
        }
    }
    let free_a: Vec<usize> = (0..a.len()).filter(|d| !contract_a.contains(d) && !batch_a.contains(d)).collect();
    let free_b: Vec<usize> = (0..b.len()).filter(|d| !contract_b.contains(d) && !batch_b.contains(d)).collect();
    let mut shape: Vec<usize> = batch_a.iter().map(|&d| a[d]).collect();
    shape.extend(free_a.iter().map(|&d| a[d]));
    shape.extend(free_b.iter().map(|&d| b[d]));
    crate::tensor::checked_numel(&shape)?;
    let bsz: usize = batch_a.iter().map(|&d| a[d]).product();
    let m: usize = free_a.iter().map(|&d| a[d]).product();
    let n: usize = free_b.iter().map(|&d| b[d]).product();
    let k: usize = contract_a.iter().map(|&d| a[d]).product();
    Ok(DotPlan { shape, bsz, m, n, k, free_a, free_b })
}

/// The shape Nx.dot/6 gives: the batch axes, then `a`'s free axes, then `b`'s free axes.
pub fn dot_output_shape(
    a: &[usize],
    contract_a: &[usize],
    batch_a: &[usize],
    b: &[usize],
    contract_b: &[usize],
    batch_b: &[usize],
) -> Result<Vec<usize>> {
    Ok(dot_plan(a, contract_a, batch_a, b, contract_b, batch_b)?.shape)
}

impl Context {
    /// Nx.dot/6: contracts `contract_a` of `a` with `contract_b` of `b` (pairwise), batching over
    /// `batch_a`/`batch_b`. The result's axes are the batch axes, then `a`'s remaining axes, then
    /// `b`'s remaining axes, in their original order; its type is `out`.
    #[allow(clippy::too_many_arguments)]
    pub fn dot(
        &self,
        a: &Tensor,
        contract_a: &[usize],
        batch_a: &[usize],
        b: &Tensor,
        contract_b: &[usize],
        batch_b: &[usize],
        out: DType,
    ) -> Result<Tensor> {
        self.dot_with(DotPrecision::Exact, a, contract_a, batch_a, b, contract_b, batch_b, out)
    }

    /// `dot` with an explicit f32 accumulation policy (other output types are always exact).
    #[allow(clippy::too_many_arguments)]
    pub fn dot_with(
        &self,
        precision: DotPrecision,
        a: &Tensor,
        contract_a: &[usize],
        batch_a: &[usize],
        b: &Tensor,
        contract_b: &[usize],
        batch_b: &[usize],
        out: DType,
    ) -> Result<Tensor> {
        let shape = dot_output_shape(&a.shape, contract_a, batch_a, &b.shape, contract_b, batch_b)?;
        let result = self.empty(out, &shape)?;
        self.recorded(result, |batch, out| self.record_dot(batch, precision, a, contract_a, batch_a, b, contract_b, batch_b, out))
    }

    /// Records Nx.dot/6 into `out`: a new (contiguous, offset 0) tensor of
    /// [`dot_output_shape`] whose type is the dot's output type. The exact f32 policy records
    /// an f64 GEMM into a scratch tensor and its rounding to f32; operand conversions and
    /// copies go into `batch` too.
    #[allow(clippy::too_many_arguments)]
    pub fn record_dot(
        &self,
        batch: &mut Batch<'_>,
        precision: DotPrecision,
        a: &Tensor,
        contract_a: &[usize],
        batch_a: &[usize],
        b: &Tensor,
        contract_b: &[usize],
        batch_b: &[usize],
        out: &Tensor,
    ) -> Result<()> {
        if precision == DotPrecision::TensorCore && a.dtype == DType::S8 && b.dtype == DType::S8 && out.dtype == DType::S32 {
            // int8 × int8 → int32: exact on either path (no overflow below K = 2^17; beyond it
            // both wrap modulo 2^32 — the listed int8 shapes do not saturate — so the bits agree)
            let kernel = match tensor_core_kernel(&self.caps, DType::S8) {
                k @ MatmulKernel::CoopMat { .. } => Some(k),
                _ => None,
            };
            return self.record_dot_using(batch, kernel, a, contract_a, batch_a, b, contract_b, batch_b, out);
        }
        let half_in = a.dtype == b.dtype && matches!(a.dtype, DType::F16 | DType::BF16);
        if precision == DotPrecision::TensorCore && half_in && matches!(out.dtype, DType::F32 | DType::F16 | DType::BF16) {
            return match tensor_core_kernel(&self.caps, a.dtype) {
                k @ MatmulKernel::CoopMat { .. } => self.record_dot_using(batch, Some(k), a, contract_a, batch_a, b, contract_b, batch_b, out),
                _ => {
                    let f32_kernel = Some(choose_kernel(&self.caps, DType::F32, 1, 1, 1, 1));
                    if out.dtype == DType::F32 {
                        return self.record_dot_using(batch, f32_kernel, a, contract_a, batch_a, b, contract_b, batch_b, out);
                    }
                    self.record_dot_rounded(batch, f32_kernel, DType::F32, a, contract_a, batch_a, b, contract_b, batch_b, out)
                }
            };
        }
        let all_f32 = a.dtype == DType::F32 && b.dtype == DType::F32 && out.dtype == DType::F32;
        if all_f32 && matches!(precision, DotPrecision::SplitF32 | DotPrecision::TensorCore) {
            let plan = dot_plan(&a.shape, contract_a, batch_a, &b.shape, contract_b, batch_b)?;
            if precision == DotPrecision::SplitF32 || tensor_core_f32_uses_split(&self.caps, plan.m, plan.n, plan.k) {
                check_dense_output(out, out.dtype, &plan.shape, "dot")?;
                let (va, vb) = self.operand_views(batch, a, contract_a, batch_a, b, contract_b, batch_b, &plan)?;
                return self.record_split_f32_gemm(batch, &va, &vb, out, [plan.bsz, plan.m, plan.n, plan.k]);
            }
        }
        if out.dtype == DType::F32 && precision == DotPrecision::Exact {
            return self.record_dot_rounded(batch, None, DType::F64, a, contract_a, batch_a, b, contract_b, batch_b, out);
        }
        self.record_dot_using(batch, None, a, contract_a, batch_a, b, contract_b, batch_b, out)
    }

    /// The GEMM into a `wide` scratch tensor, then one rounding to `out`'s type.
    #[allow(clippy::too_many_arguments)]
    fn record_dot_rounded(
        &self,
        batch: &mut Batch<'_>,
        kernel: Option<MatmulKernel>,
        wide: DType,
        a: &Tensor,
        contract_a: &[usize],
        batch_a: &[usize],
        b: &Tensor,
        contract_b: &[usize],
        batch_b: &[usize],
        out: &Tensor,
    ) -> Result<()> {
        let plan = dot_plan(&a.shape, contract_a, batch_a, &b.shape, contract_b, batch_b)?;
        check_dense_output(out, out.dtype, &plan.shape, "dot")?;
        let scratch = self.empty(wide, &plan.shape)?;
        self.record_dot_using(batch, kernel, a, contract_a, batch_a, b, contract_b, batch_b, &scratch)?;
        self.record_map(batch, &[Expr::convert(Expr::Input(0), out.dtype)], &[&scratch], &[out])
    }

    /// `dot` with the kernel forced (`None`: chosen by [`choose_kernel`]) — for benchmarks and
    /// tests of every kernel variant.
    #[allow(clippy::too_many_arguments)]
    pub fn dot_using(
        &self,
        kernel: Option<MatmulKernel>,
        a: &Tensor,
        contract_a: &[usize],
        batch_a: &[usize],
        b: &Tensor,
        contract_b: &[usize],
        batch_b: &[usize],
        out: DType,
    ) -> Result<Tensor> {
        let shape = dot_output_shape(&a.shape, contract_a, batch_a, &b.shape, contract_b, batch_b)?;
        let result = self.empty(out, &shape)?;
        self.recorded(result, |batch, out| self.record_dot_using(batch, kernel, a, contract_a, batch_a, b, contract_b, batch_b, out))
    }

    /// Records one GEMM pass of `dot_using` into `out` (as in [`Context::record_dot`]; the
    /// output type is the kernel's accumulation type: no f32 rounding step).
    #[allow(clippy::too_many_arguments)]
    pub fn record_dot_using(
        &self,
        batch: &mut Batch<'_>,
        kernel: Option<MatmulKernel>,
        a: &Tensor,
        contract_a: &[usize],
        batch_a: &[usize],
        b: &Tensor,
        contract_b: &[usize],
        batch_b: &[usize],
        out: &Tensor,
    ) -> Result<()> {
        let DotPlan { shape, bsz, m, n, k, free_a, free_b } = dot_plan(&a.shape, contract_a, batch_a, &b.shape, contract_b, batch_b)?;
        check_dense_output(out, out.dtype, &shape, "dot")?;
        if bsz * m * n == 0 {
            return Ok(());
        }
        let out_t = out.dtype;
        // Only a kernel chosen here by shape may split K: a caller that names the kernel (the
        // tensor-core fallback the LLM prefill uses, whose rows must not change with the
        // number of rows; benchmarks) gets exactly that kernel.
        let may_split = kernel.is_none();
        let kernel = kernel.unwrap_or_else(|| choose_kernel(&self.caps, out_t, bsz, m, n, k));
        if let MatmulKernel::CoopMat { input, .. } = kernel {
            let out_ok = if input == DType::S8 { out_t == DType::S32 } else { matches!(out_t, DType::F32 | DType::F16 | DType::BF16) };
            if !coopmat_runs_here(&self.caps, kernel) || a.dtype != input || b.dtype != input || !out_ok {
                return Err(invalid!("dot: kernel {kernel:?} cannot compute {}x{}->{out_t} here", a.dtype, b.dtype));
            }
        }
        if let MatmulKernel::CoopMat2 { input, bm, bn, bk, workgroup } = kernel {
            let here = coopmat2_kernel(&self.caps, input, bm, bn, bk) == Some(kernel);
            if !here || a.dtype != input || b.dtype != input || out_t != DType::F32 {
                return Err(invalid!("dot: kernel {kernel:?} cannot compute {}x{}->{out_t} here (it writes f32; workgroup {workgroup})", a.dtype, b.dtype));
            }
        }
        if kernel == MatmulKernel::HalfFallback {
            return Err(invalid!("dot: HalfFallback is chosen through DotPrecision::TensorCore (it is the f32 tiled kernel plus a rounding)"));
        }
        if let MatmulKernel::Tiled { dtype, bm, bn, bk } = kernel {
            let ok = dtype == out_t
                && matches!(dtype, DType::F32 | DType::F64)
                && (bm == 64 || bm == 128)
                && (bn == 64 || bn == 128)
                && bk > 0
                && bk % 4 == 0;
            if !ok || shared_bytes(dtype, bm, bn, bk) > self.caps.max_shared_memory as usize {
                return Err(invalid!("dot: kernel {kernel:?} cannot compute {out_t} here"));
            }
        }
        // The tiled kernels read operands of their own type: convert others first (Nx casts
        // both operands to the output type).
        let (a_type, b_type) = (a.dtype, b.dtype);
        let (a, b) = match kernel {
            MatmulKernel::Tiled { dtype, .. } => (self.as_type_in(batch, a, dtype)?, self.as_type_in(batch, b, dtype)?),
            _ => (a.clone(), b.clone()),
        };
        let plan = DotPlan { shape, bsz, m, n, k, free_a, free_b };
        let (mut va, mut vb) = self.operand_views(batch, &a, contract_a, batch_a, &b, contract_b, batch_b, &plan)?;
        if matches!(kernel, MatmulKernel::CoopMat2 { .. }) {
            // Tensor layouts read rows with unit stride along one of the two axes.
            for (v, rows, cols) in [(&mut va, m, k), (&mut vb, k, n)] {
                if unit_axis(&v.1, rows, cols).is_none() {
                    let c = self.contiguous_in(batch, &v.0)?;
                    let view = View3 { offset: c.offset, s: [(rows * cols) as isize, cols as isize, 1] };
                    *v = (c, view);
                }
            }
        }
        // (the original types: the tiled kernel's operands are their widened copies)
        let products = F64Products::of(a_type, b_type);
        self.record_gemm_folded(batch, kernel, FoldStart::Zero, products, &va, &vb, out, [bsz, m, n, k], may_split)
    }

    /// Both operands of a dot as `[B, M, K]` and `[B, K, N]` views ([`Context::operand`]).
    #[allow(clippy::too_many_arguments)]
    fn operand_views(
        &self,
        batch: &mut Batch<'_>,
        a: &Tensor,
        contract_a: &[usize],
        batch_a: &[usize],
        b: &Tensor,
        contract_b: &[usize],
        batch_b: &[usize],
        plan: &DotPlan,
    ) -> Result<((Tensor, View3), (Tensor, View3))> {
        let perm_a: Vec<usize> = batch_a.iter().chain(&plan.free_a).chain(contract_a).copied().collect();
        let perm_b: Vec<usize> = batch_b.iter().chain(contract_b).chain(&plan.free_b).copied().collect();
        let va = self.operand(batch, a, &perm_a, [batch_a.len(), plan.free_a.len(), contract_a.len()])?;
        let vb = self.operand(batch, b, &perm_b, [batch_b.len(), contract_b.len(), plan.free_b.len()])?;
        Ok((va, vb))
    }

    /// `t` permuted and seen as three axes, copied (into `batch`) where its layout cannot be.
    fn operand(&self, batch: &mut Batch<'_>, t: &Tensor, perm: &[usize], groups: [usize; 3]) -> Result<(Tensor, View3)> {
        let p = t.transpose(perm)?;
        if let Some(v) = view3(&p, groups) {
            return Ok((p, v));
        }
        let c = self.contiguous_in(batch, &p)?;
        let v = view3(&c, groups).ok_or_else(|| EngineError::Vulkan("contiguous operand did not merge".into()))?;
        Ok((c, v))
    }

    fn dispatch_coop(&self, batch: &mut Batch<'_>, cfg: &CoopCfg, params: &[u8], [bsz, m, n]: [usize; 3]) -> Result<()> {
        let key = format!("{cfg:?}");
        let kern = self.kernels.get_for(crate::kernel::ShaderTarget::Vulkan13, &key, cfg.invocations(), 1, || cfg.source())?;
        let max = self.caps.max_workgroup_count;
        let groups = [
            u32::try_from(n.div_ceil(cfg.bn as usize)).unwrap_or(u32::MAX),
            u32::try_from(m.div_ceil(cfg.bm as usize)).unwrap_or(u32::MAX),
            (bsz as u32).min(max[2]).min(65535),
        ];
        batch.dispatch_grid(&kern, params, (bsz * m * n) as u32, groups)
    }

    /// A projection on cooperative matrices: `out[t, n] = epilogue(Σ_k x[t, k] · w[n, k])` with
    /// `x` `[T, K]` f32 (rounded to `w`'s type, to nearest even, as it is staged), `w` `[N, K]`
    /// f16 or bf16 (PyTorch's Linear layout), f32 accumulation, `out` `[T, N]` f32 (a new
    /// contiguous tensor); `bias` `[N]` and `residual` `[T, N]` f32 as the epilogue needs them.
    /// The kernel is [`tensor_core_kernel`]'s for `w`'s type, with the workgroup tile
    /// [`Context::coopmat_linear_tile`] picks for `T` and `N` (an output's bits do not depend
    /// on it): an error where that is not a cooperative-matrix kernel (no silent fallback;
    /// callers check [`Context::coopmat_linear_available`]).
    #[allow(clippy::too_many_arguments)]
    pub fn record_coopmat_linear(
        &self,
        batch: &mut Batch<'_>,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        gelu: bool,
        residual: Option<&Tensor>,
        out: &Tensor,
    ) -> Result<()> {
        self.record_coopmat_linear_tiled(batch, x, w, bias, gelu, residual, out, None)
    }

    /// [`Context::record_coopmat_linear`] with the workgroup tile forced when `forced` names
    /// one (one of [`Context::coopmat_linear_tiles`]; an error otherwise): for tests that
    /// compare tiles. `None` is the tile `record_coopmat_linear` picks.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn record_coopmat_linear_tiled(
        &self,
        batch: &mut Batch<'_>,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        gelu: bool,
        residual: Option<&Tensor>,
        out: &Tensor,
        forced: Option<CoopLinearTile>,
    ) -> Result<()> {
        const OP: &str = "coopmat linear";
        let cfgs = self.coopmat_linear_cfgs(w.dtype);
        if cfgs.is_empty() {
            return Err(invalid!("{OP}: no cooperative-matrix kernel for {} on {}", w.dtype, self.caps.name));
        }
        let dense2 = |t: &Tensor| t.shape.len() == 2 && t.is_contiguous();
        if x.dtype != DType::F32 || !dense2(x) || !dense2(w) || x.shape[1] != w.shape[1] {
            return Err(invalid!("{OP}: x must be a contiguous [T, K] f32 matrix and w a contiguous [N, K] one (got {:?} {} and {:?} {})", x.shape, x.dtype, w.shape, w.dtype));
        }
        let (t, k, n) = (x.shape[0], x.shape[1], w.shape[0]);
        check_dense_output(out, DType::F32, &[t, n], OP)?;
        for (v, name, len) in [(bias, "bias", vec![n]), (residual, "residual", vec![t, n])] {
            if let Some(v) = v {
                if v.dtype != DType::F32 || v.shape != len || !v.is_contiguous() {
                    return Err(invalid!("{OP}: {name} must be a contiguous {len:?} f32 tensor (got {:?} {})", v.shape, v.dtype));
                }
            }
        }
        let tiles: Vec<CoopLinearTile> = cfgs.iter().map(|(tile, _)| *tile).collect();
        let choice = forced.or_else(|| pick_linear_tile(&tiles, t, n)).unwrap_or(tiles[0]);
        let Some(&(_, tile)) = cfgs.iter().find(|(tile, _)| *tile == choice) else {
            return Err(invalid!("{OP}: the {}×{} tile cannot run {} here ({})", choice.rows, choice.cols, w.dtype, self.caps.name));
        };
        if t * n == 0 {
            return Ok(());
        }
        let epilogue = CoopEpilogue { bias: bias.is_some(), gelu, residual: residual.is_some() };
        // 16-byte words of 4 f32 (x) or 8 halves (w): the kernel indexes them from the buffer's
        // start, so the offset must be a whole number of words and K a multiple of 8.
        let aligned = |a: &Tensor, per_word: usize| a.buffer.address().is_multiple_of(16) && a.offset.is_multiple_of(per_word) && k.is_multiple_of(8);
        let (bm, bn, bk) = (tile.bm as usize, tile.bn as usize, tile.bk as usize);
        let cfg = CoopCfg {
            // 8 f32 of x are two 16-byte loads; 8 of w one
            a_v8: aligned(x, 4),
            b_v8: aligned(w, 8),
            checked: t % bm != 0 || n % bn != 0 || k % bk != 0 || k == 0,
            epilogue,
            ..tile
        };
        let addr = |v: &Tensor| v.buffer.address() + 4 * v.offset as u64;
        let mut p = ParamBlock::new(OP);
        p.addrs([x, w, out].map(|v| v.buffer.address()));
        p.i32s([t, n, k, 1, x.offset, 0, k, 1, w.offset, 0, 1, k])?;
        p.addrs([bias.map(addr).unwrap_or(0), residual.map(addr).unwrap_or(0)]);
        for v in [Some(x), Some(w), Some(out), bias, residual].into_iter().flatten() {
            batch.keep(&v.buffer);
        }
        self.dispatch_coop(batch, &cfg, p.bytes(), [1, t, n])
    }

    /// The split-f32 product on cooperative matrices with both parts staged per K step
    /// (`CoopCfg::split`): `parts_a` `[bsz, m, 3·kp]` f16 (`hi` in the first kp columns, `lo`
    /// in the next), `parts_b` `[bsz, 3·kp, n]` (`lo` in the first kp rows, `hi` in the next),
    /// `out` a dense `[bsz, m, n]` f32 tensor; `variant` 1, 2 or 3 (`CoopCfg::split`).
    /// An error where the device's f16 kernel cannot take both parts (no cooperative matrices,
    /// or too little shared memory at a K step of 32).
    pub(crate) fn record_coop_split(&self, batch: &mut Batch<'_>, parts_a: &Tensor, parts_b: &Tensor, out: &Tensor, [bsz, m, n, kp]: [usize; 4], variant: u8) -> Result<()> {
        let MatmulKernel::CoopMat { m: tm, n: tn, k: tk, bm, bn, staging, .. } = tensor_core_kernel(&self.caps, DType::F16) else {
            return Err(invalid!("split-f32 dot: no f16 cooperative-matrix kernel on {}", self.caps.name));
        };
        let aligned = |t: &Tensor| t.buffer.address().is_multiple_of(16) && t.offset == 0;
        let cfg = CoopCfg {
            a_v8: aligned(parts_a) && kp.is_multiple_of(8),
            b_v8: aligned(parts_b) && n.is_multiple_of(8),
            checked: m % bm as usize != 0 || n % bn as usize != 0 || kp % 32 != 0,
            split: variant,
            ..CoopCfg::probe(DType::F16, tm, tn, tk, bm, bn, 32, staging, self.caps.subgroup_size)
        };
        if !cfg.fits() || cfg.shared_bytes() > self.caps.max_shared_memory as usize {
            return Err(invalid!("split-f32 dot: {cfg:?} does not fit on {}", self.caps.name));
        }
        let mut p = ParamBlock::new("dot");
        p.addrs([parts_a, parts_b, out].map(|t| t.buffer.address()));
        p.i32s([m, n, kp, bsz, 0, m * 3 * kp, 3 * kp, 1, 0, 3 * kp * n, n, 1])?;
        for t in [parts_a, parts_b, out] {
            batch.keep(&t.buffer);
        }
        self.dispatch_coop(batch, &cfg, p.bytes(), [bsz, m, n])
    }

    /// Whether [`Context::record_coopmat_linear`] can run `dtype` weights here.
    pub fn coopmat_linear_available(&self, dtype: DType) -> bool {
        !self.coopmat_linear_tiles(dtype).is_empty()
    }

    /// The workgroup tiles [`Context::record_coopmat_linear`] can use for `dtype` weights
    /// here, largest first: none where the 128×128 tile cannot run, else those that fit.
    pub fn coopmat_linear_tiles(&self, dtype: DType) -> Vec<CoopLinearTile> {
        self.coopmat_linear_cfgs(dtype).into_iter().map(|(tile, _)| tile).collect()
    }

    /// The workgroup tile for `T` rows and `N` outputs per row: [`pick_linear_tile`] of
    /// [`Context::coopmat_linear_tiles`].
    pub fn coopmat_linear_tile(&self, dtype: DType, t: usize, n: usize) -> Option<CoopLinearTile> {
        pick_linear_tile(&self.coopmat_linear_tiles(dtype), t, n)
    }

    fn coopmat_linear_cfgs(&self, dtype: DType) -> Vec<(CoopLinearTile, CoopCfg)> {
        linear_cfgs(tensor_core_kernel(&self.caps, dtype), self.caps.subgroup_size, self.caps.max_shared_memory as usize)
    }

    pub(crate) fn record_gemm(&self, batch: &mut Batch<'_>, kernel: MatmulKernel, a: &(Tensor, View3), b: &(Tensor, View3), c: &Tensor, dims: [usize; 4], may_split: bool) -> Result<()> {
        self.record_gemm_folded(batch, kernel, FoldStart::Zero, F64Products::Rounded, a, b, c, dims, may_split)
    }

    /// [`Context::record_gemm`] with the sums' start and the f64 products' rounding named:
    /// [`FoldStart::FirstTerm`] only on the tiled f64 kernel (an error elsewhere); `products`
    /// matters only there.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_gemm_folded(
        &self,
        batch: &mut Batch<'_>,
        kernel: MatmulKernel,
        fold: FoldStart,
        products: F64Products,
        a: &(Tensor, View3),
        b: &(Tensor, View3),
        c: &Tensor,
        dims: [usize; 4],
        may_split: bool,
    ) -> Result<()> {
        let [bsz, m, n, k] = dims;
        if fold == FoldStart::FirstTerm && !matches!(kernel, MatmulKernel::Tiled { dtype: DType::F64, .. }) {
            return Err(invalid!("dot: sums folded from their first term run on the tiled f64 kernel only, not {kernel:?}"));
        }
        let (ta, va) = a;
        let (tb, vb) = b;
        // The kernels' parameter block (META) writing C at `c_addr`.
        let params_to = |c_addr: u64| -> Result<Vec<u8>> {
            let mut p = ParamBlock::new("dot");
            p.addrs([ta.buffer.address(), tb.buffer.address(), c_addr]);
            p.i32s([m, n, k, bsz, va.offset])?.i32s(va.s)?.i32(vb.offset)?.i32s(vb.s)?;
            Ok(p.bytes().to_vec())
        };
        let params = &params_to(c.buffer.address())?[..];
        for t in [ta, tb, c] {
            batch.keep(&t.buffer);
        }
        match kernel {
            MatmulKernel::Tiled { dtype, bm, bn, bk } => {
                let aligned = |addr: u64, v: &View3, contiguous_axis: usize, len: usize| {
                    dtype == DType::F32
                        && addr.is_multiple_of(16)
                        && v.s[contiguous_axis] == 1
                        && len.is_multiple_of(4)
                        && v.offset.is_multiple_of(4)
                        && (0..3).all(|d| d == contiguous_axis || v.s[d] % 4 == 0)
                };
                // A contiguous along k (rows of A) unless it is contiguous along m only.
                let a_kmajor = !(va.s[1] == 1 && va.s[2] != 1);
                let b_nmajor = !(vb.s[1] == 1 && vb.s[2] != 1);
                let cfg = TileCfg {
                    dtype,
                    bm,
                    bn,
                    bk,
                    a_kmajor,
                    b_nmajor,
                    a_v4: if a_kmajor { aligned(ta.buffer.address(), va, 2, k) } else { aligned(ta.buffer.address(), va, 1, m) },
                    b_v4: if b_nmajor { aligned(tb.buffer.address(), vb, 2, n) } else { aligned(tb.buffer.address(), vb, 1, k) },
                    c_v4: dtype == DType::F32 && n.is_multiple_of(4) && c.buffer.address().is_multiple_of(16),
                    // (K == 0 keeps the checks so the first tile load reads nothing)
                    checked: m % bm as usize != 0 || n % bn as usize != 0 || k % bk as usize != 0 || k == 0,
                    split_k: 0,
                    first_term: fold == FoldStart::FirstTerm,
                    exact_products: dtype == DType::F64 && products == F64Products::Exact,
                };
                let max = self.caps.max_workgroup_count;
                let mut groups = [
                    u32::try_from(n.div_ceil(bn as usize)).unwrap_or(u32::MAX),
                    u32::try_from(m.div_ceil(bm as usize)).unwrap_or(u32::MAX),
                    (bsz as u32).min(max[2]).min(65535),
                ];
                let tiles = groups[0] as usize * groups[1] as usize;
                let slices = if may_split { split_k_slices(dtype, bsz, tiles, k, bk as usize) } else { 1 };
                if slices > 1 {
                    // Each slice a whole number of K steps; the last takes what remains.
                    let ks = k.div_ceil(bk as usize).div_ceil(slices) * bk as usize;
                    let slices = k.div_ceil(ks);
                    let cfg = TileCfg { split_k: ks as u32, c_v4: n.is_multiple_of(4), ..cfg };
                    let scratch = self.empty(DType::F32, &[slices, m, n])?;
                    batch.keep(&scratch.buffer);
                    let kern = self.kernels.get(&format!("{cfg:?}"), 256, 1, || cfg.source())?;
                    groups[2] = slices as u32;
                    batch.dispatch_grid(&kern, &params_to(scratch.buffer.address())?, (m * n) as u32, groups)?;
                    let mut sum_params = ParamBlock::new("dot");
                    sum_params.addrs([scratch.buffer.address(), c.buffer.address()]).i32(slices)?;
                    let sum = self.kernels.get("dot split-K sum f32", 256, 1, split_sum_source)?;
                    return batch.dispatch(&sum, sum_params.bytes(), (m * n) as u64);
                }
                let key = format!("{cfg:?}");
                let kern = self.kernels.get(&key, 256, 1, || cfg.source())?;
                batch.dispatch_grid(&kern, params, (bsz * m * n) as u32, groups)?;
            }
            MatmulKernel::Simple => {
                let key = format!("matmul simple {}x{}->{}", ta.dtype, tb.dtype, c.dtype);
                let src = simple_source(ta.dtype, tb.dtype, c.dtype);
                let kern = self.kernels.get(&key, 256, 1, || src)?;
                batch.dispatch(&kern, params, (bsz * m * n) as u64)?;
            }
            MatmulKernel::CoopMat { input, m: tm, n: tn, k: tk, bm, bn, bk, staging } => {
                // (whole 16-byte words: 8 halves or 16 int8)
                let e = if input == DType::S8 { 16 } else { 8 };
                let v8 = |addr: u64, v: &View3, contiguous_axis: usize, len: usize| {
                    addr.is_multiple_of(16)
                        && v.s[contiguous_axis] == 1
                        && len.is_multiple_of(e)
                        && v.offset.is_multiple_of(e)
                        && (0..3).all(|d| d == contiguous_axis || v.s[d] % e as isize == 0)
                };
                // B contiguous along k only (a transposed operand, PyTorch's Linear weight):
                // staged like A, loaded column-major.
                let tile = CoopCfg::probe(input, tm, tn, tk, bm, bn, bk, staging, self.caps.subgroup_size);
                // (its tile takes a little more shared memory: strided loads where it does not fit)
                let b_kmajor = staging != CoopStaging::Global
                    && vb.s[1] == 1
                    && vb.s[2] != 1
                    && CoopCfg { b_kmajor: true, ..tile }.shared_bytes() <= self.caps.max_shared_memory as usize;
                let cfg = CoopCfg {
                    out: c.dtype,
                    a_v8: v8(ta.buffer.address(), va, 2, k),
                    b_v8: if b_kmajor { v8(tb.buffer.address(), vb, 1, k) } else { v8(tb.buffer.address(), vb, 2, n) },
                    checked: m % bm as usize != 0 || n % bn as usize != 0 || k % bk as usize != 0 || k == 0,
                    b_kmajor,
                    ..tile
                };
                if staging == CoopStaging::Global && (cfg.checked || !cfg.a_v8 || !cfg.b_v8 || vb.s[2] != 1) {
                    return Err(invalid!("dot: {kernel:?} needs contiguous aligned operands whose sizes are tile multiples"));
                }
                self.dispatch_coop(batch, &cfg, params, [bsz, m, n])?;
            }
            MatmulKernel::CoopMat2 { input, bm, bn, bk, workgroup } => {
                let (Some(ua), Some(ub)) = (unit_axis(va, m, k), unit_axis(vb, k, n)) else {
                    return Err(EngineError::Vulkan("coopmat2 operand without a unit-stride axis".into()));
                };
                let (a_kmajor, b_nmajor) = (ua == 2, ub == 2);
                // the row strides the layouts use, the batch strides and offsets
                let a_row = if a_kmajor { va.s[1] } else { va.s[2] };
                let b_row = if b_nmajor { vb.s[1] } else { vb.s[2] };
                let aligned = [a_row, b_row, va.s[0], vb.s[0], va.offset as isize, vb.offset as isize].iter().all(|x| x % 8 == 0)
                    && ta.buffer.address().is_multiple_of(16)
                    && tb.buffer.address().is_multiple_of(16);
                let steps = k.div_ceil(bk as usize);
                let cfg = crate::coopmat2::Cm2Cfg {
                    input,
                    bm,
                    bn,
                    bk,
                    a_kmajor,
                    b_nmajor,
                    aligned,
                    checked: m % bm as usize != 0 || n % bn as usize != 0 || k % bk as usize != 0,
                    unroll: if steps >= 4 { 4 } else { 1 },
                    workgroup,
                };
                let key = format!("{cfg:?}");
                let kern = self.kernels.get_for(crate::kernel::ShaderTarget::Vulkan13, &key, workgroup, 1, || cfg.source(META))?;
                let max = self.caps.max_workgroup_count;
                let groups = [
                    u32::try_from(n.div_ceil(bn as usize)).unwrap_or(u32::MAX),
                    u32::try_from(m.div_ceil(bm as usize)).unwrap_or(u32::MAX),
                    (bsz as u32).min(max[2]).min(65535),
                ];
                batch.dispatch_grid(&kern, params, (bsz * m * n) as u32, groups)?;
            }
            MatmulKernel::HalfFallback => return Err(invalid!("dot: HalfFallback is not a GEMM pass of its own")),
        }
        Ok(())
    }
}

fn check_axes(shape: &[usize], contract: &[usize], batch: &[usize], name: &str) -> Result<()> {
    let rank = shape.len();
    let mut seen = vec![false; rank];
    for &d in contract.iter().chain(batch) {
        if d >= rank || std::mem::replace(&mut seen[d], true) {
            return Err(invalid!(
                "dot: axes {contract:?} (contract) and {batch:?} (batch) of {name} must be distinct axes of its rank {rank}"
            ));
        }
    }
    if numel(shape) > crate::tensor::MAX_ELEMENTS {
        return Err(invalid!("dot operand {name} is too large"));
    }
    Ok(())
}

/// The meta block every matmul kernel reads (after the three addresses).
pub(crate) const META: &str = "    ParamsI32 meta = ParamsI32(pc.params + 24ul);
    int M = meta.v[0]; int N = meta.v[1]; int K = meta.v[2]; int Bt = meta.v[3];
    int offA = meta.v[4]; int sAb = meta.v[5]; int sAm = meta.v[6]; int sAk = meta.v[7];
    int offB = meta.v[8]; int sBb = meta.v[9]; int sBk = meta.v[10]; int sBn = meta.v[11];
    uint64_t addrA = ParamsU64(pc.params).v[0];
    uint64_t addrB = ParamsU64(pc.params).v[1];
    uint64_t addrC = ParamsU64(pc.params).v[2];
";

fn simple_source(ta: DType, tb: DType, out: DType) -> String {
    let mut s = String::new();
    s.push_str(&crate::kernels::numeric_prelude());
    s.push_str(crate::kernels::OPS);
    s.push_str("layout(local_size_x = 256) in;\nvoid main() {\n");
    s.push_str(META);
    let acc = out.glsl_compute();
    let xa = decode(ta, &format!("{}(addrA).v[ia]", buf_type(ta)));
    let yb = decode(tb, &format!("{}(addrB).v[ib]", buf_type(tb)));
    let x = to_domain(ta, out, &xa);
    let y = to_domain(tb, out, &yb);
    let zero = match out.kind() {
        Kind::Float => "0.0LF",
        Kind::Signed => "0l",
        Kind::Unsigned => "0ul",
        Kind::Complex => "dvec2(0.0LF, 0.0LF)",
    };
    let precise = if out.is_float() || out.is_complex() { "precise " } else { "" };
    // Complex products as Complex.multiply computes them; a real operand stays real.
    let product = if out.is_complex() {
        let real = |t: DType, v: &str| to_domain(t, DType::F64, v);
        match (ta.is_complex(), tb.is_complex()) {
            (true, true) => format!("nx_cmul({xa}, {yb})"),
            (false, true) => format!("nx_cmul_rc({}, {yb})", real(ta, &xa)),
            (true, false) => format!("nx_cmul_cr({xa}, {})", real(tb, &yb)),
            (false, false) => format!("dvec2(({}) * ({}), 0.0LF)", real(ta, &xa), real(tb, &yb)),
        }
    } else {
        format!("({x}) * ({y})")
    };
    // Floats and complex values through `wrap`: a NaN is stored as the canonical positive quiet
    // NaN (BinaryBackend's), whatever sign or payload the hardware produced (x86 lavapipe and
    // NVIDIA make different ones from Inf * 0).
    let store = if out.is_complex() || out.is_float() { encode(out, &crate::elementwise::wrap(out, "acc")) } else { encode(out, "acc") };
    write!(
        s,
        "    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * 256u) {{
        int n = int(i % uint(N)); int m = int((i / uint(N)) % uint(M)); int b = int(i / (uint(N) * uint(M)));
        int ia = offA + b * sAb + m * sAm;
        int ib = offB + b * sBb + n * sBn;
        {precise}{acc} acc = {zero};
        for (int k = 0; k < K; k++) {{
            {precise}{acc} p = {product};
            acc = acc + p;
            ia += sAk; ib += sBk;
        }}
        {}(addrC).v[i] = {};
    }}
}}
",
        buf_type(out),
        store
    )
    .unwrap();
    s
}

/// Everything the tiled kernel's source depends on (its cache key is its Debug form).
#[derive(Clone, Copy, Debug)]
struct TileCfg {
    dtype: DType,
    bm: u32,
    bn: u32,
    bk: u32,
    /// A's quads run along k (A row-major); else along m.
    a_kmajor: bool,
    /// B's quads run along n (B row-major); else along k.
    b_nmajor: bool,
    /// 16-byte global loads for A / B, 16-byte stores of C.
    a_v4: bool,
    b_v4: bool,
    c_v4: bool,
    /// Bounds checks (M, N or K not a tile multiple).
    checked: bool,
    /// Split K (f32, one batch only; 0: not split): workgroup z sums K range
    /// `[z * split_k, (z + 1) * split_k)` (a multiple of `bk`) into its own slice of a scratch
    /// `[slices, M, N]` that [`split_sum_source`] then adds up in ascending slice order.
    split_k: u32,
    /// f64 sums folded from their first term ([`FoldStart::FirstTerm`]): accumulators start
    /// at -0.0 and A's zero-filled K remainder is -0.0, so the padding adds -0.0 products,
    /// which change no sum (a +0.0 product would turn a -0.0 sum into +0.0).
    first_term: bool,
    /// f64 terms whose product is exact ([`F64Products::Exact`]): one `fma` per term.
    exact_products: bool,
}

/// How the tiled f64 kernel forms each term `a·b` of a sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum F64Products {
    /// The product rounded to f64, then added (two roundings, two instructions):
    /// Nx.BinaryBackend's f64 arithmetic.
    Rounded,
    /// Both operands hold values of types whose products are exact in f64 (f32 × f32: 24 + 24
    /// significant bits, exponents far inside f64's normal range), so `acc + a·b` rounds only
    /// in the addition and `fma(a, b, acc)` is the same sum to the bit — fused (one f64
    /// instruction instead of two) or, where a driver computes it so, a multiply then an add.
    /// The exact f32 dot (BinaryBackend's f64 sum of f32 products) is the case that matters:
    /// it halves the f64 instructions of the tiled kernel's inner loop.
    Exact,
}

impl F64Products {
    /// `Exact` where values of types `a` and `b` always multiply exactly in f64: their
    /// significands fit 53 bits together (f32 24, f16 11, bf16 8, integers their width); the
    /// exponents of the float types are small enough that no product leaves f64's normal range.
    pub(crate) fn of(a: DType, b: DType) -> F64Products {
        let significand = |t: DType| match t {
            DType::F32 => 24,
            DType::F16 => 11,
            DType::BF16 => 8,
            DType::U8 | DType::S8 | DType::U16 | DType::S16 | DType::U32 | DType::S32 => t.bits(),
            _ => 64,
        };
        if significand(a) + significand(b) <= 53 {
            F64Products::Exact
        } else {
            F64Products::Rounded
        }
    }
}

/// Where a GEMM's sums start (the two folds Nx.BinaryBackend uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FoldStart {
    /// `Enum.reduce(terms, 0, &+/2)`, Nx.dot's: a sum of -0.0 products is +0.0.
    Zero,
    /// `Enum.reduce(terms, &+/2)`, Nx.conv's: the sum starts as the first product, so all
    /// -0.0 products sum to -0.0. The same as starting from -0.0, the exact additive identity.
    FirstTerm,
}

/// How many K slices an f32 product of `tiles` output tiles and `k` steps of `bk` is split
/// into (1: not split). A grid of fewer tiles than half the multiprocessors of a large GPU
/// leaves most of it idle while each workgroup walks all of K: on the H200 the MLP step's
/// 128×784 · 784×512 product (16 tiles, 49 steps) and 128×512 · 512×10 (2 tiles, 32 steps)
/// took 31 µs each (stop 23, `bench/profile_compiler.exs`). Slices of at least two steps, up
/// to about 128 workgroups in all. Depends on the shape only, so every device sums alike —
/// but on M too, so a row's bits may change with the number of rows: only kernels chosen by
/// shape split (`record_dot_using` with no kernel named), never a named one (the LLM's
/// tensor-core fallback, whose rows must not depend on the batch).
fn split_k_slices(dtype: DType, bsz: usize, tiles: usize, k: usize, bk: usize) -> usize {
    const TARGET_GROUPS: usize = 128;
    if dtype != DType::F32 || bsz != 1 || tiles >= TARGET_GROUPS / 2 {
        return 1;
    }
    let steps = k.div_ceil(bk);
    TARGET_GROUPS.div_ceil(tiles).min(steps / 2).clamp(1, 32)
}

/// Adds the `S` f32 slices of a split-K product (`[S, count]` at `addrP`) in ascending slice
/// order into `addrC`.
fn split_sum_source() -> String {
    let mut s = crate::kernels::numeric_prelude();
    s.push_str(
        "layout(local_size_x = 256) in;
void main() {
    uint64_t addrP = ParamsU64(pc.params).v[0];
    uint64_t addrC = ParamsU64(pc.params).v[1];
    int S = ParamsI32(pc.params + 16ul).v[0];
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * 256u) {
        precise float acc = uintBitsToFloat(BufU32(addrP).v[i]);
        for (int z = 1; z < S; z++) {
            precise float p = uintBitsToFloat(BufU32(addrP).v[uint(z) * pc.count + i]);
            acc = acc + p;
        }
        BufU32(addrC).v[i] = floatBitsToUint(acc);
    }
}
",
    );
    s
}

impl TileCfg {
    fn source(&self) -> String {
        let f32 = self.dtype == DType::F32;
        let (t, v4) = if f32 { ("float", "vec4") } else { ("double", "dvec4") };
        let (bm, bn, bk) = (self.bm, self.bn, self.bk);
        let (tm, tn) = (bm / 16, bn / 16);
        let qa = bm * bk / 4; // quads per A tile
        let qb = bn * bk / 4;
        let mut s = crate::kernels::numeric_prelude();
        s.push_str("layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufV4 { uvec4 v[]; };\n");
        writeln!(s, "#define BM {bm}\n#define BN {bn}\n#define BK {bk}\n#define TM {tm}\n#define TN {tn}").unwrap();
        writeln!(s, "#define T {t}\n#define V4 {v4}").unwrap();
        // A quad of 4 elements at (r, c..c+3) along the contiguous axis c; rows/cols bounded by
        // R/C; element address base + r*rs + c*cs.
        let scalar = |idx: &str| {
            if f32 {
                format!("uintBitsToFloat(BufU32(addr).v[{idx}])")
            } else {
                format!("nx_bits_to_f64(BufU64(addr).v[{idx}])")
            }
        };
        for (name, v4ok) in [("quadA", self.a_v4), ("quadB", self.b_v4)] {
            writeln!(s, "V4 {name}(uint64_t addr, int base, int r, int c, int R, int C, int rs, int cs) {{").unwrap();
            if self.first_term && name == "quadA" {
                s.push_str("    V4 q = V4(nx_bits_to_f64(0x8000000000000000ul));\n");
            } else {
                s.push_str("    V4 q = V4(0);\n");
            }
            if v4ok {
                let guard = if self.checked { "if (r < R && c < C) " } else { "" };
                writeln!(s, "    {guard}q = uintBitsToFloat(BufV4(addr).v[(base + r * rs + c) >> 2]);").unwrap();
            } else {
                s.push_str("    int at = base + r * rs + c * cs;\n");
                for j in 0..4 {
                    let guard = if self.checked { format!("if (r < R && c + {j} < C) ") } else { String::new() };
                    writeln!(s, "    {guard}q[{j}] = {};", scalar(&format!("at + {j} * cs"))).unwrap();
                }
            }
            s.push_str("    return q;\n}\n");
        }
        // Shared tiles: [buffer][k][row/4 (+1 pad)] 4-vectors.
        writeln!(s, "shared V4 As[2][BK][BM / 4 + 1];\nshared V4 Bs[2][BK][BN / 4 + 1];").unwrap();
        s.push_str("layout(local_size_x = 256) in;\nvoid main() {\n");
        s.push_str(META);
        s.push_str("    int tid = int(gl_LocalInvocationID.x); int tx = tid % 16; int ty = tid / 16;\n");
        s.push_str("    int m0 = int(gl_WorkGroupID.y) * BM; int n0 = int(gl_WorkGroupID.x) * BN;\n");
        s.push_str("    int nt = (K + BK - 1) / BK;\n");
        let la = qa.div_ceil(256);
        let lb = qb.div_ceil(256);
        writeln!(s, "    V4 ra[{la}]; V4 rb[{lb}];").unwrap();
        // Loading tile kt into registers.
        let mut load = String::new();
        for i in 0..la {
            let q = format!("(tid + {})", i * 256);
            let guard = if qa % 256 != 0 { format!("if ({q} < {qa}) ") } else { String::new() };
            if self.a_kmajor {
                // quad (m, k..k+3)
                writeln!(load, "        {guard}ra[{i}] = quadA(addrA, baseA, m0 + {q} / (BK / 4), k0 + ({q} % (BK / 4)) * 4, M, K, sAm, sAk);").unwrap();
            } else {
                // quad (k, m..m+3)
                writeln!(load, "        {guard}ra[{i}] = quadA(addrA, baseA, k0 + {q} / (BM / 4), m0 + ({q} % (BM / 4)) * 4, K, M, sAk, sAm);").unwrap();
            }
        }
        for i in 0..lb {
            let q = format!("(tid + {})", i * 256);
            let guard = if qb % 256 != 0 { format!("if ({q} < {qb}) ") } else { String::new() };
            if self.b_nmajor {
                writeln!(load, "        {guard}rb[{i}] = quadB(addrB, baseB, k0 + {q} / (BN / 4), n0 + ({q} % (BN / 4)) * 4, K, N, sBk, sBn);").unwrap();
            } else {
                writeln!(load, "        {guard}rb[{i}] = quadB(addrB, baseB, n0 + {q} / (BK / 4), k0 + ({q} % (BK / 4)) * 4, N, K, sBn, sBk);").unwrap();
            }
        }
        // Storing the registers into shared buffer `buf`.
        let mut store = String::new();
        for i in 0..la {
            let q = format!("(tid + {})", i * 256);
            let guard = if qa % 256 != 0 { format!("if ({q} < {qa}) ") } else { String::new() };
            if self.a_kmajor {
                writeln!(store, "        {guard}{{ int r = {q} / (BK / 4); int c = ({q} % (BK / 4)) * 4;").unwrap();
                for j in 0..4 {
                    writeln!(store, "            As[buf][c + {j}][r >> 2][r & 3] = ra[{i}][{j}];").unwrap();
                }
                store.push_str("        }\n");
            } else {
                writeln!(store, "        {guard}As[buf][{q} / (BM / 4)][{q} % (BM / 4)] = ra[{i}];").unwrap();
            }
        }
        for i in 0..lb {
            let q = format!("(tid + {})", i * 256);
            let guard = if qb % 256 != 0 { format!("if ({q} < {qb}) ") } else { String::new() };
            if self.b_nmajor {
                writeln!(store, "        {guard}Bs[buf][{q} / (BN / 4)][{q} % (BN / 4)] = rb[{i}];").unwrap();
            } else {
                writeln!(store, "        {guard}{{ int r = {q} / (BK / 4); int c = ({q} % (BK / 4)) * 4;").unwrap();
                for j in 0..4 {
                    writeln!(store, "            Bs[buf][c + {j}][r >> 2][r & 3] = rb[{i}][{j}];").unwrap();
                }
                store.push_str("        }\n");
            }
        }
        let fma = if f32 || self.exact_products {
            "acc[i][j] = fma(a[i], b[j], acc[i][j]);"
        } else {
            // Nx.BinaryBackend's f64 rounding: product rounded, then sum rounded (no fusion).
            "precise double p = a[i] * b[j]; acc[i][j] = acc[i][j] + p;"
        };
        // Split K: this workgroup's K range (the batch is one matrix); else the batch loop.
        let (batch_loop, kbeg, slice_c) = if self.split_k > 0 {
            (
                format!("    int kbeg = int(gl_WorkGroupID.z) * {ks}; nt = (min(K, kbeg + {ks}) - kbeg + BK - 1) / BK;\n    {{ int bz = 0;\n", ks = self.split_k),
                "kbeg",
                "int(gl_WorkGroupID.z)",
            )
        } else {
            ("    for (int bz = int(gl_WorkGroupID.z); bz < Bt; bz += int(gl_NumWorkGroups.z)) {\n".to_string(), "0", "bz")
        };
        let acc0 = if self.first_term { "nx_bits_to_f64(0x8000000000000000ul)" } else { "T(0)" };
        write!(
            s,
            "{batch_loop}        int baseA = offA + bz * sAb;
        int baseB = offB + bz * sBb;
        precise T acc[TM][TN];
        [[unroll]] for (int i = 0; i < TM; i++) [[unroll]] for (int j = 0; j < TN; j++) acc[i][j] = {acc0};
        int k0 = {kbeg};
        int buf = 0;
{load}{store}        barrier();
        for (int kt = 0; kt < nt; kt++) {{
            int cur = kt & 1;
            k0 = {kbeg} + (kt + 1) * BK;
            bool more = kt + 1 < nt;
            if (more) {{
{load}            }}
            [[unroll]] for (int kk = 0; kk < BK; kk++) {{
                T a[TM]; T b[TN];
                [[unroll]] for (int i = 0; i < TM / 4; i++) {{
                    V4 v = As[cur][kk][i * 16 + ty];
                    a[i * 4] = v.x; a[i * 4 + 1] = v.y; a[i * 4 + 2] = v.z; a[i * 4 + 3] = v.w;
                }}
                [[unroll]] for (int j = 0; j < TN / 4; j++) {{
                    V4 v = Bs[cur][kk][j * 16 + tx];
                    b[j * 4] = v.x; b[j * 4 + 1] = v.y; b[j * 4 + 2] = v.z; b[j * 4 + 3] = v.w;
                }}
                [[unroll]] for (int i = 0; i < TM; i++) [[unroll]] for (int j = 0; j < TN; j++) {{ {fma} }}
            }}
            if (more) {{
                buf = cur ^ 1;
{store}            }}
            barrier();
        }}
        int baseC = {slice_c} * M * N;
        [[unroll]] for (int i = 0; i < TM / 4; i++) [[unroll]] for (int r = 0; r < 4; r++) {{
            int m = m0 + i * 64 + ty * 4 + r;
            [[unroll]] for (int j = 0; j < TN / 4; j++) {{
                int n = n0 + j * 64 + tx * 4;
",
        )
        .unwrap();
        if self.c_v4 {
            let guard = if self.checked { "if (m < M && n < N) " } else { "" };
            writeln!(s, "                {guard}BufV4(addrC).v[(baseC + m * N + n) >> 2] = floatBitsToUint(vec4(acc[i * 4 + r][j * 4], acc[i * 4 + r][j * 4 + 1], acc[i * 4 + r][j * 4 + 2], acc[i * 4 + r][j * 4 + 3]));").unwrap();
        } else {
            for c in 0..4 {
                let guard = if self.checked { format!("if (m < M && n + {c} < N) ") } else { String::new() };
                let v = format!("acc[i * 4 + r][j * 4 + {c}]");
                let enc = if f32 {
                    format!("BufU32(addrC).v[baseC + m * N + n + {c}] = floatBitsToUint({v});")
                } else {
                    // canonical NaN, as every exact kernel writes it (see simple_source)
                    format!("BufU64(addrC).v[baseC + m * N + n + {c}] = nx_f64_to_bits(nx_canon_f64({v}));")
                };
                writeln!(s, "                {guard}{enc}").unwrap();
            }
        }
        s.push_str("            }\n        }\n    }\n}\n");
        s
    }
}

/// Everything the cooperative-matrix kernel's source depends on (its cache key is its Debug form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CoopCfg {
    /// f16 or bf16 (both operands).
    input: DType,
    /// f32, f16 or bf16: the f32 accumulator is rounded once into it.
    out: DType,
    /// The cooperative-matrix shape from the device's property list.
    tm: u32,
    tn: u32,
    tk: u32,
    /// Outputs per workgroup (128×128, 256×128, 128×256; the projection's 64×64, 32×32,
    /// 16×16) and K per step (32 or 64).
    bm: u32,
    bn: u32,
    bk: u32,
    staging: CoopStaging,
    subgroup: u32,
    /// 16-byte loads of 8 elements along k (A) / along n (B); otherwise 8 strided loads.
    a_v8: bool,
    b_v8: bool,
    /// Bounds checks (M, N or K not a tile multiple).
    checked: bool,
    /// B stored with k contiguous ([N, K] rows, PyTorch's Linear weight): its tile is staged
    /// as [BN][BK] like A's and its fragments loaded column-major.
    b_kmajor: bool,
    /// A stored as f32 and rounded to the input type (to nearest even) as it is staged, so
    /// f32 activations need no conversion pass.
    a_f32: bool,
    /// Applied to the f32 sum before the store (f32 output only).
    epilogue: CoopEpilogue,
    /// Split-f32 parts (`split_f32.rs`): 0 = a plain product; 1, 2 or 3 = A holds two f16
    /// parts per element (`hi` at column k, `lo` at column K + k) and B two (`lo` at row k,
    /// `hi` at row K + k), and each K step multiplies `hi·lo + lo·hi + hi·hi` from one staging
    /// of the four tiles — into one accumulator (1), or (2) with each step's `hi·hi` computed
    /// from zero and added to an accumulator of its own outside the tensor cores (which
    /// truncate as they accumulate), the two sums added at the end, or (3) with all of a K
    /// tile's products summed from zero on the tensor cores and each tile's sum added to the
    /// accumulator outside them.
    split: u8,
}

/// A projection's epilogue fused into the cooperative-matrix kernel's store:
/// `out = act(sum + bias[n]) + residual[m, n]`, each part optional. Its addresses follow the
/// meta block (bias, then residual).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoopEpilogue {
    pub bias: bool,
    /// PyTorch's exact gelu (`x · Φ(x)`, erf-based).
    pub gelu: bool,
    pub residual: bool,
}

impl CoopEpilogue {
    fn any(&self) -> bool {
        self.bias || self.gelu || self.residual
    }
}

/// A workgroup tile of [`Context::record_coopmat_linear`]: `rows × cols` outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopLinearTile {
    pub rows: u32,
    pub cols: u32,
}

impl CoopLinearTile {
    const fn new(rows: u32, cols: u32) -> CoopLinearTile {
        CoopLinearTile { rows, cols }
    }

    /// Workgroups in the grid of `t` rows and `n` outputs per row.
    pub fn groups(&self, t: usize, n: usize) -> usize {
        t.div_ceil(self.rows as usize) * n.div_ceil(self.cols as usize)
    }
}

/// The projection kernel's tiles, largest first: the GEMM's 128 × 128 (256 invocations) where
/// the grid is big enough, then 64 × 64, 32 × 32 and 16 × 16 (at most 128 invocations; a
/// 16 × 16 tile is one subgroup: `CoopCfg::warp_grid`). Few rows need the small ones: MiniLM
/// at 32 tokens (N = 384) gave 128 × 128 a grid of 3 workgroups, each walking K alone, and
/// ran at half the portable kernel's speed on an H200 (543 vs 1,133 inputs/s); at 64 × 128
/// tokens 128 × 128 was 54 % faster than it.
pub const COOP_LINEAR_TILES: [CoopLinearTile; 4] = [CoopLinearTile::new(128, 128), CoopLinearTile::new(64, 64), CoopLinearTile::new(32, 32), CoopLinearTile::new(16, 16)];
/// Workgroups a projection's grid should have to occupy a GPU of about a hundred compute
/// units (the portable kernel's rule too: `encoder::kernels::linear_tile`).
const COOP_LINEAR_MIN_GROUPS: usize = 128;

/// The projection kernel's tile for `t` rows and `n` outputs per row among `tiles` (largest
/// first): the largest whose grid has at least 128 workgroups, else the smallest. It may
/// depend on `t` because no output's arithmetic does: every tile uses the same
/// cooperative-matrix shape (TM×TN×TK) and the same K step (BK, the 128×128 tile's: see
/// `linear_cfgs`), so each output is the same chain of `coopMatMulAdd`s over the same
/// TK-wide chunks of k in ascending order (the zero-filled ones up to K rounded up to BK
/// included), from the same +0.0, at the same place (m mod TM, n mod TN) of its fragment
/// (every tile's and subgroup's origin is a multiple of TM and TN), from the same rounding of
/// x and into the same epilogue. The tile and its subgroups only decide which workgroup and
/// subgroup compute it (tests: `coopmat_linear_tiles_keep_bits` in tests/encoder_kernels.rs).
pub fn pick_linear_tile(tiles: &[CoopLinearTile], t: usize, n: usize) -> Option<CoopLinearTile> {
    tiles.iter().copied().find(|tile| tile.groups(t, n) >= COOP_LINEAR_MIN_GROUPS).or(tiles.last().copied())
}

/// The projection kernel's tiles and configurations (f32 activations, k-major weights) on the
/// shape, K step and staging of `kernel` ([`tensor_core_kernel`]'s) with subgroups of
/// `subgroup` and `max_shared` bytes of shared memory, largest first: those that fit, none
/// where 128×128 does not (the kernel's K step was chosen for it).
fn linear_cfgs(kernel: MatmulKernel, subgroup: u32, max_shared: usize) -> Vec<(CoopLinearTile, CoopCfg)> {
    let MatmulKernel::CoopMat { input, m, n, k, bk, staging, .. } = kernel else { return Vec::new() };
    let cfgs: Vec<_> = COOP_LINEAR_TILES
        .into_iter()
        .map(|tile| (tile, CoopCfg { b_kmajor: true, a_f32: true, ..CoopCfg::probe(input, m, n, k, tile.rows, tile.cols, bk, staging, subgroup) }))
        .collect();
    let fits = |cfg: &CoopCfg| cfg.fits() && cfg.shared_bytes() <= max_shared;
    if !fits(&cfgs[0].1) {
        return Vec::new();
    }
    cfgs.into_iter().filter(|(_, cfg)| fits(cfg)).collect()
}

impl CoopCfg {
    /// The plain configuration of a tile (f32 output, 16-byte loads, bounds checks, row-major
    /// B, no epilogue): what feasibility checks measure.
    #[allow(clippy::too_many_arguments)]
    fn probe(input: DType, tm: u32, tn: u32, tk: u32, bm: u32, bn: u32, bk: u32, staging: CoopStaging, subgroup: u32) -> CoopCfg {
        CoopCfg {
            input,
            out: DType::F32,
            tm,
            tn,
            tk,
            bm,
            bn,
            bk,
            staging,
            subgroup,
            a_v8: true,
            b_v8: true,
            checked: true,
            b_kmajor: false,
            a_f32: false,
            epilogue: CoopEpilogue::default(),
            split: 0,
        }
    }

    /// Subgroups arranged (rows, cols) over the `bm × bn` tile. The GEMM tiles (128 or 256 on
    /// a side): 256 invocations, each subgroup 64 rows high: 8 subgroups of 32 as 2×4 (128
    /// rows) or 4×2 (256 rows), 4 of 64 as 2×2. The projection's small tiles (64×64, 32×32,
    /// 16×16, for few rows: see [`COOP_LINEAR_TILES`]): at most 128 invocations, up to 2×2
    /// subgroups of 32 (2×1 of 64) and never more subgroups than TM×TN fragments along a
    /// side, so a 16×16 tile is one subgroup (two of 32 for a 16×8 shape) and a small grid's
    /// work spreads over many compute units instead of a few.
    fn warp_grid(&self) -> Option<(u32, u32)> {
        let warps = match self.subgroup {
            32 => 8,
            64 => 4,
            _ => return None,
        };
        if self.bm.max(self.bn) >= 128 {
            let rows = self.bm / 64;
            return (rows > 0 && warps % rows == 0).then_some((rows, warps / rows));
        }
        // (and no more invocations than 8-element words to stage along a side: each loads the
        // same number)
        let most = (warps / 2).min(self.bm.min(self.bn) * self.bk / self.epw() / self.subgroup);
        let rows = (self.bm / self.tm.max(1)).min(2).min(most);
        let cols = (self.bn / self.tn.max(1)).min(most / rows.max(1));
        (rows > 0 && cols > 0).then_some((rows, cols))
    }

    /// Shared A/B tile sets: two for split parts (hi and lo) or double buffering, else one.
    fn tile_sets(&self) -> u32 {
        if self.split > 0 || self.staging == CoopStaging::SharedDouble {
            2
        } else {
            1
        }
    }

    /// Elements per 16-byte word of the operands: 8 halves, or 16 int8.
    fn epw(&self) -> u32 {
        if self.input == DType::S8 {
            16
        } else {
            8
        }
    }

    /// The workgroup's size: its subgroups times their size.
    fn invocations(&self) -> u32 {
        self.warp_grid().map_or(256, |(wr, wc)| wr * wc * self.subgroup)
    }

    fn fits(&self) -> bool {
        let Some((wr, wc)) = self.warp_grid() else { return false };
        let (wm, wn) = (self.bm / wr, self.bn / wc);
        let (tm, tn, tk, bk) = (self.tm, self.tn, self.tk, self.bk);
        let global_ok = self.staging != CoopStaging::Global || !(self.b_kmajor || self.a_f32);
        let epilogue_ok = !self.epilogue.any() || self.out == DType::F32;
        // int8: raw-word staging, int32 out, nothing fused; other inputs never write s32
        let int8_ok = if self.input == DType::S8 {
            self.out == DType::S32
                && !self.epilogue.any()
                && !self.a_f32
                && self.split == 0
                && matches!(self.staging, CoopStaging::SharedWords | CoopStaging::SharedDouble | CoopStaging::ProbeMultiplyOnly)
        } else {
            self.out != DType::S32
        };
        // split parts: plain f16 parts staged in shared memory, f32 out, nothing fused
        let split_ok = self.split == 0
            || (self.split <= 3
                && self.input == DType::F16
                && self.out == DType::F32
                && !self.epilogue.any()
                && !self.a_f32
                && !self.b_kmajor
                && matches!(self.staging, CoopStaging::SharedTyped | CoopStaging::SharedWords));
        // each invocation stages the same whole number of 8-element words of A and of B
        let inv = self.invocations();
        let e = self.epw();
        let loads_ok = [self.bm, self.bn].iter().all(|&rows| rows * bk / e >= inv && (rows * bk / e) % inv == 0);
        let double_ok = self.staging != CoopStaging::SharedDouble || (self.split == 0 && !self.a_f32 && !self.epilogue.any());
        global_ok
            && epilogue_ok
            && double_ok
            && int8_ok
            && split_ok
            && loads_ok
            && matches!((self.bm, self.bn), (128, 128) | (256, 128) | (128, 256) | (64, 64) | (32, 32) | (16, 16))
            && (matches!(bk, 32 | 64) || (self.input == DType::S8 && bk == 128))
            && tk % 8 == 0
            && bk % tk == 0
            && tn % 8 == 0
            && wm % tm == 0
            && wn % tn == 0
            && wn >= tn
    }

    fn shared_bytes(&self) -> usize {
        let (wr, wc) = self.warp_grid().unwrap_or((2, 4));
        let (a, b) = match self.staging {
            CoopStaging::Global => (0, 0),
            _ if self.b_kmajor => (self.bm * (self.bk / self.epw() + 1) * 16, self.bn * (self.bk / self.epw() + 1) * 16),
            _ => (self.bm * (self.bk / self.epw() + 1) * 16, self.bk * (self.bn / self.epw() + 1) * 16),
        };
        let c = wr * wc * self.tm * self.tn * 4;
        (self.tile_sets() * (a + b) + c) as usize
    }

    fn source(&self) -> String {
        let (wr, wc) = self.warp_grid().unwrap_or((2, 4));
        let (wm, wn) = (self.bm / wr, self.bn / wc);
        let (fm, fn_) = (wm / self.tm, wn / self.tn);
        let inv = self.invocations();
        let t = match self.input {
            DType::BF16 => "bfloat16_t",
            DType::S8 => "int8_t",
            _ => "float16_t",
        };
        let mut s = crate::kernels::numeric_prelude();
        // Extensions go right after #version (before any declaration).
        let ext = "#version 460\n#extension GL_KHR_cooperative_matrix : require\n#extension GL_KHR_memory_scope_semantics : require\n\
#extension GL_KHR_shader_subgroup_basic : require\n#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n\
#extension GL_EXT_bfloat16 : enable\n";
        s = s.replacen("#version 460\n", ext, 1);
        s.push_str("layout(buffer_reference, std430, buffer_reference_align = 16) buffer BufV4 { uvec4 v[]; };\n");
        writeln!(
            s,
            "#define T {t}\n#define BM {}\n#define BN {}\n#define BK {}\n#define LDA {}\n#define LDB {}",
            self.bm,
            self.bn,
            self.bk,
            self.bm * self.bk / self.epw() / inv,
            self.bn * self.bk / self.epw() / inv
        )
        .unwrap();
        writeln!(s, "#define TM {}\n#define TN {}\n#define TK {}\n#define WM {wm}\n#define WN {wn}\n#define FM {fm}\n#define FN {fn_}", self.tm, self.tn, self.tk).unwrap();
        writeln!(s, "#define WR {wr}\n#define WC {wc}\n#define SG {}", self.subgroup).unwrap();
        // E elements per 16-byte word (8 halves, 16 int8), ESH its log2; ACC the accumulator's
        // scalar type
        let int8 = self.input == DType::S8;
        writeln!(s, "#define E {}\n#define ESH {}\n#define ACC {}", self.epw(), self.epw().trailing_zeros(), if int8 { "int" } else { "float" }).unwrap();
        // Shared tiles: A [BM][BK + 8], B [BK][BN + 8] elements (16 bytes of padding per row
        // against bank conflicts), declared as uvec4 words (8 elements) or as 2-vectors of T;
        // coopMatLoad offsets and strides count the array's elements: W of them per word.
        let (word, w) = match self.staging {
            CoopStaging::SharedWords => ("uvec4", 1),
            CoopStaging::SharedDouble if self.input == DType::S8 => ("uvec4", 1),
            _ if self.input == DType::BF16 => ("bf16vec2", 4),
            _ => ("f16vec2", 4),
        };
        // A k-major B is staged as [BN][BK + 8], like A.
        let (sb, b_rows) = if self.b_kmajor { ("(BK / E + 1)", "BN") } else { ("(BN / E + 1)", "BK") };
        writeln!(s, "#define W {w}\n#define SA ((BK / E + 1) * W)\n#define SB ({sb} * W)").unwrap();
        // tile sets (split parts, or double buffers): set 1 AP / BP elements after set 0
        writeln!(s, "#define P {}\n#define AP (BM * SA)\n#define BP ({b_rows} * SB)", self.tile_sets()).unwrap();
        if self.staging != CoopStaging::Global {
            writeln!(s, "shared {word} As[P * BM * SA];\nshared {word} Bs[P * {b_rows} * SB];").unwrap();
        }
        if self.a_f32 || self.epilogue.gelu {
            s.push_str(include_str!("kernels/encoder_math.glsl"));
        }
        if self.a_f32 {
            // f32 -> the input type's bits, to nearest even (torch's .half() / .bfloat16())
            if self.input == DType::BF16 {
                s.push_str("uint rnd16(float v) { return floatBitsToUint(enc_round_bf16(v)) >> 16; }\n");
            } else {
                s.push_str("uint rnd16(float v) { return enc_f32_to_f16(floatBitsToUint(v)); }\n");
            }
        }
        s.push_str("shared ACC Cs[WR * WC * TM * TN];\n");
        let to_vec2 = if self.input == DType::BF16 { "uintBitsToBFloat16EXT(unpack16(x))" } else { "uint16BitsToHalf(unpack16(x))" };
        if self.staging == CoopStaging::Global {
            // no shared tiles
        } else if w == 4 {
            writeln!(s, "#define TOV2(x) {to_vec2}").unwrap();
            s.push_str("void putA(int at, uvec4 q) { As[at] = TOV2(q.x); As[at + 1] = TOV2(q.y); As[at + 2] = TOV2(q.z); As[at + 3] = TOV2(q.w); }\n");
            s.push_str("void putB(int at, uvec4 q) { Bs[at] = TOV2(q.x); Bs[at + 1] = TOV2(q.y); Bs[at + 2] = TOV2(q.z); Bs[at + 3] = TOV2(q.w); }\n");
        } else {
            s.push_str("void putA(int at, uvec4 q) { As[at] = q; }\nvoid putB(int at, uvec4 q) { Bs[at] = q; }\n");
        }
        let elem_buf = match self.input {
            DType::BF16 => "BufBF16",
            DType::S8 => "BufS8",
            _ => "BufF16",
        };
        writeln!(s, "layout(buffer_reference, std430, buffer_reference_align = 16) buffer {elem_buf} {{ T v[]; }};").unwrap();
        // E elements at (r, c..c+E-1) along the contiguous axis c of an operand, as a uvec4.
        for (name, v8) in [("octA", self.a_v8), ("octB", self.b_v8)] {
            writeln!(s, "uvec4 {name}(uint64_t addr, int base, int r, int c, int R, int C, int rs, int cs) {{").unwrap();
            if name == "octA" && self.a_f32 {
                // 8 f32 values (two 16-byte loads, or 8 strided ones), rounded and packed
                s.push_str("    vec4 lo = vec4(0.0), hi = vec4(0.0);\n");
                if v8 {
                    let guard = if self.checked { "if (r < R && c < C) " } else { "" };
                    writeln!(s, "    {guard}{{ int q = (base + r * rs + c) >> 2; lo = uintBitsToFloat(BufV4(addr).v[q]); hi = uintBitsToFloat(BufV4(addr).v[q + 1]); }}").unwrap();
                } else {
                    s.push_str("    int at = base + r * rs + c * cs;\n    [[unroll]] for (int j = 0; j < 4; j++) {\n");
                    if self.checked {
                        s.push_str("        if (r < R && c + j < C) lo[j] = uintBitsToFloat(BufU32(addr).v[at + j * cs]);\n");
                        s.push_str("        if (r < R && c + 4 + j < C) hi[j] = uintBitsToFloat(BufU32(addr).v[at + (4 + j) * cs]);\n");
                    } else {
                        s.push_str("        lo[j] = uintBitsToFloat(BufU32(addr).v[at + j * cs]);\n        hi[j] = uintBitsToFloat(BufU32(addr).v[at + (4 + j) * cs]);\n");
                    }
                    s.push_str("    }\n");
                }
                s.push_str("    return uvec4(rnd16(lo.x) | (rnd16(lo.y) << 16), rnd16(lo.z) | (rnd16(lo.w) << 16), rnd16(hi.x) | (rnd16(hi.y) << 16), rnd16(hi.z) | (rnd16(hi.w) << 16));\n}\n");
                continue;
            }
            if v8 {
                let guard = if self.checked { "if (r >= R || c >= C) return uvec4(0);\n    " } else { "" };
                writeln!(s, "    {guard}return BufV4(addr).v[(base + r * rs + c) >> ESH];").unwrap();
            } else if int8 {
                // 16 strided bytes, four to a word
                s.push_str("    uint h[16];\n    int at = base + r * rs + c * cs;\n");
                s.push_str("    [[unroll]] for (int j = 0; j < 16; j++) {\n");
                if self.checked {
                    s.push_str("        h[j] = (r < R && c + j < C) ? uint(BufU8(addr).v[at + j * cs]) : 0u;\n");
                } else {
                    s.push_str("        h[j] = uint(BufU8(addr).v[at + j * cs]);\n");
                }
                s.push_str("    }\n    uvec4 q;\n    [[unroll]] for (int w = 0; w < 4; w++) q[w] = h[4 * w] | (h[4 * w + 1] << 8) | (h[4 * w + 2] << 16) | (h[4 * w + 3] << 24);\n    return q;\n");
            } else {
                s.push_str("    uint h[8];\n    int at = base + r * rs + c * cs;\n");
                s.push_str("    [[unroll]] for (int j = 0; j < 8; j++) {\n");
                if self.checked {
                    s.push_str("        h[j] = (r < R && c + j < C) ? uint(BufU16(addr).v[at + j * cs]) : 0u;\n");
                } else {
                    s.push_str("        h[j] = uint(BufU16(addr).v[at + j * cs]);\n");
                }
                s.push_str("    }\n    return uvec4(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16), h[6] | (h[7] << 16));\n");
            }
            s.push_str("}\n");
        }
        writeln!(s, "layout(local_size_x = {inv}) in;\nvoid main() {{").unwrap();
        s.push_str(META);
        if self.epilogue.any() {
            s.push_str("    uint64_t addrBias = ParamsU64(pc.params + 72ul).v[0];\n    uint64_t addrRes = ParamsU64(pc.params + 72ul).v[1];\n");
        }
        // Fragments and accumulators are separate variables, every loop over them unrolled
        // here: the driver keeps them in registers (arrays of cooperative matrices may live in
        // local memory).
        let steps = self.bk / self.tk;
        let mut frag_decl = String::new();
        for i in 0..fm {
            writeln!(frag_decl, "        coopmat<T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> fa{i};").unwrap();
        }
        for j in 0..fn_ {
            writeln!(frag_decl, "        coopmat<T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> fb{j};").unwrap();
        }
        // split parts: A's lo fragments (faNx) and B's hi fragments (fbNx) beside A's hi and
        // B's lo
        let split = self.split > 0;
        if split {
            for i in 0..fm {
                writeln!(frag_decl, "        coopmat<T, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> fa{i}x;").unwrap();
            }
            for j in 0..fn_ {
                writeln!(frag_decl, "        coopmat<T, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> fb{j}x;").unwrap();
            }
        }
        // double buffering: the current buffer's tiles start AP / BP elements in on odd steps
        let double = self.staging == CoopStaging::SharedDouble;
        let (ab, bb) = if double { ("cur * AP + ", "cur * BP + ") } else { ("", "") };
        let from_shared = |kk: u32| {
            let mut x = String::new();
            for i in 0..fm {
                writeln!(x, "            coopMatLoad(fa{i}, As, uint({ab}(wm0 + {i} * TM) * SA + {kk} * W / E), uint(SA), gl_CooperativeMatrixLayoutRowMajor);").unwrap();
                if split {
                    writeln!(x, "            coopMatLoad(fa{i}x, As, uint(AP + (wm0 + {i} * TM) * SA + {kk} * W / E), uint(SA), gl_CooperativeMatrixLayoutRowMajor);").unwrap();
                }
            }
            for j in 0..fn_ {
                if split {
                    writeln!(x, "            coopMatLoad(fb{j}x, Bs, uint(BP + {kk} * SB + (wn0 + {j} * TN) * W / E), uint(SB), gl_CooperativeMatrixLayoutRowMajor);").unwrap();
                }
                if self.b_kmajor {
                    writeln!(x, "            coopMatLoad(fb{j}, Bs, uint({bb}(wn0 + {j} * TN) * SB + {kk} * W / E), uint(SB), gl_CooperativeMatrixLayoutColumnMajor);").unwrap();
                } else {
                    writeln!(x, "            coopMatLoad(fb{j}, Bs, uint({bb}{kk} * SB + (wn0 + {j} * TN) * W / E), uint(SB), gl_CooperativeMatrixLayoutRowMajor);").unwrap();
                }
            }
            x
        };
        let from_global = |kk: u32| {
            let mut x = String::new();
            for i in 0..fm {
                writeln!(x, "            coopMatLoad(fa{i}, {elem_buf}(addrA).v, uint(baseA + (m0 + wm0 + {i} * TM) * sAm + k0 + {kk}), uint(sAm), gl_CooperativeMatrixLayoutRowMajor);").unwrap();
            }
            for j in 0..fn_ {
                writeln!(x, "            coopMatLoad(fb{j}, {elem_buf}(addrB).v, uint(baseB + (k0 + {kk}) * sBk + n0 + wn0 + {j} * TN), uint(sBk), gl_CooperativeMatrixLayoutRowMajor);").unwrap();
            }
            x
        };
        let mut mma = String::new();
        for i in 0..fm {
            for j in 0..fn_ {
                writeln!(mma, "            acc{i}_{j} = coopMatMulAdd(fa{i}, fb{j}, acc{i}_{j});").unwrap();
                if split {
                    // hi·lo (above), lo·hi, then hi·hi: into the same accumulator, or the
                    // large products into one of their own
                    writeln!(mma, "            acc{i}_{j} = coopMatMulAdd(fa{i}x, fb{j}x, acc{i}_{j});").unwrap();
                    if self.split == 2 {
                        // each step's hi·hi from zero, added outside the tensor cores
                        writeln!(mma, "            big{i}_{j} = big{i}_{j} + coopMatMulAdd(fa{i}, fb{j}x, czero);").unwrap();
                    } else {
                        writeln!(mma, "            acc{i}_{j} = coopMatMulAdd(fa{i}, fb{j}x, acc{i}_{j});").unwrap();
                    }
                }
            }
        }
        // split 3: the tile's products (all three, small first) summed on the tensor cores
        // from zero, the tile's sum added to the accumulator outside them
        let mut tile_mma = vec![mma.clone(); steps as usize];
        if self.split == 3 {
            for (st, text) in tile_mma.iter_mut().enumerate() {
                let mut x = String::new();
                for i in 0..fm {
                    for j in 0..fn_ {
                        let first = if st == 0 { "czero".to_string() } else { format!("big{i}_{j}") };
                        writeln!(x, "            big{i}_{j} = coopMatMulAdd(fa{i}, fb{j}, {first});").unwrap();
                        writeln!(x, "            big{i}_{j} = coopMatMulAdd(fa{i}x, fb{j}x, big{i}_{j});").unwrap();
                        writeln!(x, "            big{i}_{j} = coopMatMulAdd(fa{i}, fb{j}x, big{i}_{j});").unwrap();
                        if st + 1 == steps as usize {
                            writeln!(x, "            acc{i}_{j} = acc{i}_{j} + big{i}_{j};").unwrap();
                        }
                    }
                }
                *text = x;
            }
        }
        let multiply_tile = |load: &dyn Fn(u32) -> String| (0..steps).map(|st| format!("{}{}", load(st * self.tk), tile_mma[st as usize])).collect::<String>();
        let mut acc_decl = String::new();
        if self.split >= 2 {
            acc_decl.push_str("        const coopmat<ACC, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> czero = coopmat<ACC, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(ACC(0));\n");
        }
        for i in 0..fm {
            for j in 0..fn_ {
                writeln!(acc_decl, "        coopmat<ACC, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc{i}_{j} = coopmat<ACC, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(ACC(0));").unwrap();
                if self.split >= 2 {
                    writeln!(acc_decl, "        coopmat<ACC, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> big{i}_{j} = coopmat<ACC, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(ACC(0));").unwrap();
                }
            }
        }
        // Loads of the next tile into registers (LDA / LDB words per invocation).
        // A k-major B is fetched like A: 8 values along k of one column n per word.
        let (fetch_b, put_b) = if self.b_kmajor {
            (
                "rb[i] = octB(addrB, baseB, n0 + q / (BK / E), k0 + (q % (BK / E)) * E, N, K, sBn, sBk);",
                "putB((q / (BK / E)) * SB + (q % (BK / E)) * W, rb[i]);",
            )
        } else {
            (
                "rb[i] = octB(addrB, baseB, k0 + q / (BN / E), n0 + (q % (BN / E)) * E, K, N, sBk, sBn);",
                "putB((q / (BN / E)) * SB + (q % (BN / E)) * W, rb[i]);",
            )
        };
        let mut fetch = format!(
            "[[unroll]] for (int i = 0; i < LDA; i++) {{
                int q = tid + i * {inv};
                ra[i] = octA(addrA, baseA, m0 + q / (BK / E), k0 + (q % (BK / E)) * E, M, K, sAm, sAk);
            }}
            [[unroll]] for (int i = 0; i < LDB; i++) {{
                int q = tid + i * {inv};
                {fetch_b}
            }}\n"
        );
        let mut put = format!(
            "[[unroll]] for (int i = 0; i < LDA; i++) {{
                int q = tid + i * {inv};
                putA((q / (BK / E)) * SA + (q % (BK / E)) * W, ra[i]);
            }}
            [[unroll]] for (int i = 0; i < LDB; i++) {{
                int q = tid + i * {inv};
                {put_b}
            }}\n"
        );
        if split {
            // part 1 of each operand: K columns (A) / K rows (B) after part 0, staged AP / BP
            // elements after it, its registers LDA / LDB after part 0's
            let second = |x: &str, fetching: bool| {
                let x = x.replace("ra[i]", "ra[LDA + i]").replace("rb[i]", "rb[LDB + i]");
                if fetching {
                    x.replace("(addrA, baseA,", "(addrA, baseA + K * sAk,").replace("(addrB, baseB,", "(addrB, baseB + K * sBk,")
                } else {
                    x.replace("putA(", "putA(AP + ").replace("putB(", "putB(BP + ")
                }
            };
            fetch = format!("{fetch}            {}", second(&fetch, true));
            put = format!("{put}            {}", second(&put, false));
        }
        let main_loop = match self.staging {
            CoopStaging::SharedTyped | CoopStaging::SharedWords => format!(
                "        // the next tile's loads are in flight while the current one is multiplied
        uvec4 ra[P * LDA]; uvec4 rb[P * LDB];
        int k0 = 0;
        {fetch}        for (int kt = 0; kt < nt; kt++) {{
            barrier();
            {put}            barrier();
            if (kt + 1 < nt) {{
                k0 = (kt + 1) * BK;
                {fetch}            }}
{tile}        }}
",
                tile = multiply_tile(&from_shared)
            ),
            CoopStaging::SharedDouble => format!(
                "        // tile kt+1 is fetched and stored into the other buffer while tile kt is
        // multiplied: one barrier per step
        uvec4 ra[LDA]; uvec4 rb[LDB];
        int k0 = 0;
        int nxt = 0;
        {fetch}        {put_next}        barrier();
        for (int kt = 0; kt < nt; kt++) {{
            int cur = kt & 1;
            nxt = cur ^ 1;
            bool more = kt + 1 < nt;
            if (more) {{
                k0 = (kt + 1) * BK;
                {fetch}            }}
{tile}            if (more) {{
                {put_next}            }}
            barrier();
        }}
",
                put_next = put.replace("putA(", "putA(nxt * AP + ").replace("putB(", "putB(nxt * BP + "),
                tile = multiply_tile(&from_shared)
            ),
            CoopStaging::Global => format!(
                "        for (int k0 = 0; k0 < K; k0 += BK) {{
{tile}        }}
",
                tile = multiply_tile(&from_global)
            ),
            CoopStaging::ProbeMultiplyOnly => format!(
                "        uvec4 ra[LDA]; uvec4 rb[LDB];
        int k0 = 0;
        {fetch}        {put}        barrier();
{first}        for (int kt = 0; kt < nt; kt++) {{
{repeat}        }}
",
                first = from_shared(0),
                repeat = mma.repeat(steps as usize)
            ),
        };
        let mut epi = String::new();
        if self.epilogue.bias {
            epi.push_str("x = x + uintBitsToFloat(BufU32(addrBias).v[n]); ");
        }
        if self.epilogue.gelu {
            epi.push_str("x = enc_gelu(x); ");
        }
        if self.epilogue.residual {
            epi.push_str("x = x + uintBitsToFloat(BufU32(addrRes).v[at]); ");
        }
        let store_c_expr = match self.out {
            // int8 products: the exact int32 sum
            DType::S32 => "BufU32(addrC).v[at] = uint(x);".to_string(),
            // A projection's epilogue, stored as computed (as the encoder's other kernels do).
            DType::F32 if self.epilogue.any() => format!("{epi}BufU32(addrC).v[at] = floatBitsToUint(x);"),
            // NaN canonical (positive quiet), as the engine's other kernels write it
            DType::F32 => "BufU32(addrC).v[at] = isnan(x) ? 0x7FC00000u : floatBitsToUint(x);".to_string(),
            o => format!("{}(addrC).v[at] = {};", buf_type(o), encode(o, &crate::elementwise::wrap(o, "nx_f32_to_f64(floatBitsToUint(x))"))),
        };
        let store_c = &store_c_expr;
        let mut epilogue = String::new();
        for i in 0..fm {
            for j in 0..fn_ {
                if self.split == 2 {
                    // the small products' sum, then the large ones': one rounding
                    writeln!(epilogue, "        acc{i}_{j} = acc{i}_{j} + big{i}_{j};").unwrap();
                }
                write!(
                    epilogue,
                    "        coopMatStore(acc{i}_{j}, Cs, uint(warp * TM * TN), uint(TN), gl_CooperativeMatrixLayoutRowMajor);
        subgroupMemoryBarrierShared(); subgroupBarrier();
        for (int e = lane; e < TM * TN; e += SG) {{
            int m = m0 + wm0 + {i} * TM + e / TN; int n = n0 + wn0 + {j} * TN + e % TN;
            if (m < M && n < N) {{
                precise ACC x = Cs[warp * TM * TN + e];
                int at = baseC + m * N + n;
                {store_c}
            }}
        }}
        subgroupMemoryBarrierShared(); subgroupBarrier();
"
                )
                .unwrap();
            }
        }
        write!(
            s,
            "    int tid = int(gl_LocalInvocationID.x);
    int warp = int(gl_SubgroupID); int lane = int(gl_SubgroupInvocationID);
    int wm0 = (warp / WC) * WM; int wn0 = (warp % WC) * WN;
    int m0 = int(gl_WorkGroupID.y) * BM; int n0 = int(gl_WorkGroupID.x) * BN;
    int nt = (K + BK - 1) / BK;
    for (int bz = int(gl_WorkGroupID.z); bz < Bt; bz += int(gl_NumWorkGroups.z)) {{
        int baseA = offA + bz * sAb;
        int baseB = offB + bz * sBb;
{acc_decl}{frag_decl}{main_loop}        // Each subgroup writes its accumulators through its own shared scratch: bounds and the
        // output type's rounding (exact integer encoders, one rounding from f32) per element.
        int baseC = bz * M * N;
{epilogue}    }}
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

    /// The tiled f64 kernel fuses a term's multiply and add exactly where the product is exact
    /// (F64Products::of). Lavapipe computes a double `fma` as a multiply and an add, so a wrong
    /// choice would change bits only on a device that fuses (the H200: tests/matmul.rs'
    /// `f64_is_exact` there); this pins the choice itself.
    #[test]
    fn f64_products_fuse_only_where_exact() {
        use DType::*;
        for (a, b, exact) in [
            (F32, F32, true),
            (F16, S8, true),
            (BF16, F32, true),
            (S16, F32, true),
            (S32, S16, true),
            (U8, U8, true),
            (S32, F32, false),
            (F64, F32, false),
            (F64, F64, false),
            (S32, S32, false),
            (U64, U8, false),
        ] {
            assert_eq!(F64Products::of(a, b) == F64Products::Exact, exact, "{a} x {b}");
        }
        let cfg = |dtype, exact_products| {
            let c = TileCfg { dtype, bm: 64, bn: 64, bk: 8, a_kmajor: true, b_nmajor: true, a_v4: false, b_v4: false, c_v4: false, checked: true, split_k: 0, first_term: false, exact_products };
            c.source()
        };
        assert!(cfg(F64, true).contains("acc[i][j] = fma(a[i], b[j], acc[i][j]);"));
        assert!(!cfg(F64, false).contains("fma("), "rounded f64 products must not fuse");
        assert!(cfg(F64, false).contains("precise double p = a[i] * b[j]; acc[i][j] = acc[i][j] + p;"));
        assert!(cfg(F32, false).contains("fma(a[i], b[j], acc[i][j])"));
    }

    /// Every cooperative-matrix variant compiles with the linked glslang (CI has no device that
    /// runs them; the H200 run executes them): both input types, every output type, the
    /// vector/strided load variants, bounds checks, every staging, 16×16×16, 16×8×16, 16×16×32,
    /// the GEMM's tiles and the projection's smaller ones.
    #[test]
    fn coopmat_variants_compile() {
        let compiler = glslang::Compiler::acquire().expect("glslang");
        for input in [DType::F16, DType::BF16] {
            for out in [DType::F32, DType::F16, DType::BF16] {
                for (tm, tn, tk, bm, bn, bk) in [
                    (16, 16, 16, 128, 128, 32),
                    (16, 8, 16, 128, 128, 64),
                    (16, 16, 32, 128, 128, 64),
                    (16, 16, 16, 256, 128, 32),
                    (16, 8, 16, 128, 256, 32),
                    (16, 16, 16, 64, 64, 64),
                    (16, 8, 16, 32, 32, 32),
                    (16, 16, 16, 16, 16, 64),
                ] {
                    for (a_v8, b_v8, checked) in [(true, true, false), (false, false, true), (true, false, true)] {
                      for staging in [CoopStaging::SharedTyped, CoopStaging::SharedWords, CoopStaging::SharedDouble, CoopStaging::Global, CoopStaging::ProbeMultiplyOnly] {
                        let plain = CoopCfg { input, out, tm, tn, tk, bm, bn, bk, staging, subgroup: 32, a_v8, b_v8, checked, b_kmajor: false, a_f32: false, epilogue: CoopEpilogue::default(), split: 0 };
                        let linear = CoopCfg {
                            b_kmajor: true,
                            a_f32: true,
                            out: DType::F32,
                            epilogue: CoopEpilogue { bias: true, gelu: checked, residual: !checked },
                            ..plain
                        };
                        let split_ok = input == DType::F16 && out == DType::F32 && matches!(staging, CoopStaging::SharedTyped | CoopStaging::SharedWords);
                        for cfg in [plain, CoopCfg { b_kmajor: true, ..plain }, linear, CoopCfg { split: 1, ..plain }, CoopCfg { split: 2, ..plain }, CoopCfg { split: 3, ..plain }] {
                            if cfg.staging == CoopStaging::Global && (cfg.b_kmajor || cfg.a_f32) {
                                assert!(!cfg.fits());
                                continue;
                            }
                            if cfg.split > 0 && !split_ok {
                                assert!(!cfg.fits(), "{cfg:?}");
                                continue;
                            }
                            if cfg.staging == CoopStaging::SharedDouble && (cfg.a_f32 || cfg.epilogue.any()) {
                                assert!(!cfg.fits(), "{cfg:?}");
                                continue;
                            }
                            assert!(cfg.fits());
                            let spirv = crate::kernel::compile_glsl(compiler, "coopmat test", &cfg.source(), crate::kernel::ShaderTarget::Vulkan13)
                                .unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
                            assert_eq!(spirv[0], 0x0723_0203, "SPIR-V magic");
                        }
                      }
                    }
                }
            }
        }
    }

    /// The int8 kernel (int8 × int8 → int32 on cooperative matrices) compiles in every form
    /// the device-side tests reach: the listed int8 shapes (16×16×32, 16×8×32), K steps 64 and
    /// 128, the GEMM's tile and the smaller ones, raw-word staging and the probe, 16-byte and
    /// strided loads, bounds checks, k-major B; and the forms it cannot take are refused.
    #[test]
    fn coopmat_int8_variants_compile() {
        let compiler = glslang::Compiler::acquire().expect("glslang");
        let mut compiled = 0;
        for (tm, tn, tk) in [(16, 16, 32), (16, 8, 32)] {
            for (bm, bn, bk) in [(128, 128, 128), (128, 128, 64), (64, 64, 64), (32, 32, 64)] {
                for staging in [CoopStaging::SharedWords, CoopStaging::SharedDouble, CoopStaging::ProbeMultiplyOnly] {
                    for (a_v8, b_v8, checked) in [(true, true, false), (false, false, true), (true, false, true)] {
                        for b_kmajor in [false, true] {
                            let cfg = CoopCfg { out: DType::S32, a_v8, b_v8, checked, b_kmajor, ..CoopCfg::probe(DType::S8, tm, tn, tk, bm, bn, bk, staging, 32) };
                            assert!(cfg.fits(), "{cfg:?}");
                            if cfg.shared_bytes() > 48 << 10 {
                                // two buffers of a 128-deep K step do not fit NVIDIA's 48 KiB
                                assert!(staging == CoopStaging::SharedDouble && bk == 128, "{cfg:?}");
                                continue;
                            }
                            let spirv = crate::kernel::compile_glsl(compiler, "coopmat int8 test", &cfg.source(), crate::kernel::ShaderTarget::Vulkan13)
                                .unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
                            assert_eq!(spirv[0], 0x0723_0203, "SPIR-V magic");
                            compiled += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(compiled, 2 * 4 * 3 * 3 * 2 - 2 * 3 * 2);
        let base = CoopCfg { out: DType::S32, ..CoopCfg::probe(DType::S8, 16, 16, 32, 128, 128, 128, CoopStaging::SharedWords, 32) };
        for refused in [
            CoopCfg { out: DType::F32, ..base },
            CoopCfg { staging: CoopStaging::SharedTyped, ..base },
            CoopCfg { staging: CoopStaging::Global, ..base },
            CoopCfg { split: 3, ..base },
            CoopCfg { a_f32: true, ..base },
            CoopCfg { input: DType::F16, ..base },
        ] {
            assert!(!refused.fits(), "{refused:?}");
        }
    }

    /// Every tile of the projection kernel as `linear_cfgs` builds it for a device with
    /// cooperative matrices compiles (CI has none: this is where a GLSL error in a small tile
    /// shows): both input types, the shapes 16×16×16, 16×8×16 and 16×16×32, K steps 64 and
    /// 32, subgroups of 32 and 64, 16-byte and strided loads, bounds checks, with and without
    /// the epilogue. Every tile keeps what an output's bits depend on (`pick_linear_tile`).
    #[test]
    fn coopmat_linear_tiles_compile() {
        let compiler = glslang::Compiler::acquire().expect("glslang");
        let mut compiled = 0;
        for input in [DType::F16, DType::BF16] {
            for (tm, tn, tk) in [(16, 16, 16), (16, 8, 16), (16, 16, 32)] {
                for bk in [64, 32] {
                    for subgroup in [32, 64] {
                        let kernel = MatmulKernel::CoopMat { input, m: tm, n: tn, k: tk, bm: 128, bn: 128, bk, staging: CoopStaging::SharedTyped };
                        // (NVIDIA's Vulkan limit: 48 KiB)
                        let cfgs = linear_cfgs(kernel, subgroup, 48 << 10);
                        let tiles: Vec<_> = cfgs.iter().map(|(tile, _)| *tile).collect();
                        assert_eq!(tiles, COOP_LINEAR_TILES, "{kernel:?} subgroup {subgroup}");
                        let big = cfgs[0].1;
                        assert_eq!(big, CoopCfg { b_kmajor: true, a_f32: true, ..CoopCfg::probe(input, tm, tn, tk, 128, 128, bk, CoopStaging::SharedTyped, subgroup) });
                        for (tile, cfg) in cfgs {
                            assert_eq!((cfg.bm, cfg.bn), (tile.rows, tile.cols));
                            assert_eq!((cfg.tm, cfg.tn, cfg.tk, cfg.bk, cfg.staging), (big.tm, big.tn, big.tk, big.bk, big.staging), "{tile:?}");
                            let (wr, wc) = cfg.warp_grid().unwrap();
                            let limit = if tile == COOP_LINEAR_TILES[0] { 256 } else { 128 };
                            assert!(cfg.invocations() <= limit && (cfg.bm / wr) % tm == 0 && (cfg.bn / wc) % tn == 0, "{cfg:?}");
                            for (a_v8, b_v8, checked) in [(true, true, false), (false, false, true), (true, false, true)] {
                                for epilogue in [CoopEpilogue::default(), CoopEpilogue { bias: true, gelu: true, residual: true }] {
                                    let cfg = CoopCfg { a_v8, b_v8, checked, epilogue, ..cfg };
                                    let source = cfg.source();
                                    assert!(source.contains(&format!("layout(local_size_x = {}) in;", cfg.invocations())));
                                    let spirv = crate::kernel::compile_glsl(compiler, "coopmat linear test", &source, crate::kernel::ShaderTarget::Vulkan13)
                                        .unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
                                    assert_eq!(spirv[0], 0x0723_0203, "SPIR-V magic");
                                    compiled += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(compiled, 2 * 3 * 2 * 2 * 4 * 3 * 2);
    }

    /// The tile choice: the largest tile whose grid has at least 128 workgroups, else the
    /// smallest; MiniLM at 32 tokens gets the 16×16 tile, at 64 × 128 tokens 128×128.
    #[test]
    fn linear_tile_choice() {
        let pick = |t, n| pick_linear_tile(&COOP_LINEAR_TILES, t, n).map(|tile| (tile.rows, tile.cols));
        assert_eq!(pick(32, 384), Some((16, 16)));
        assert_eq!(pick(32, 1536), Some((16, 16)));
        assert_eq!(pick(1, 384), Some((16, 16)));
        assert_eq!(pick(512, 384), Some((32, 32)));
        assert_eq!(pick(2048, 384), Some((64, 64)));
        assert_eq!(pick(64 * 128, 384), Some((128, 128)));
        assert_eq!(pick(64 * 128, 1536), Some((128, 128)));
        // where some tiles do not fit, among those that do
        assert_eq!(pick_linear_tile(&COOP_LINEAR_TILES[..2], 32, 384), Some(COOP_LINEAR_TILES[1]));
        assert_eq!(pick_linear_tile(&[], 32, 384), None);
    }
}
