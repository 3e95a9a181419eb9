//! The LLM runtime's kernels, each recorded into a caller's batch: quantized matrix × activation
//! products (with bias, residual and SwiGLU epilogues), the embedding lookup, RMSNorm, RoPE with
//! the KV-cache store, causal attention over the cache, and greedy argmax.
//!
//! Token rows are packed: row `t` of a step belongs to session slot `rows[t].0` at position
//! `rows[t].1` (a `[T, 2]` u32 tensor); prefill rows of one session and decode rows of many
//! sessions go through the same kernels. Every kernel's summation order depends on the model's
//! shapes and the row's own position only — never on `T` or the row's batch-mates — so a
//! session's tokens are the same bits alone or batched (tests/llm.rs checks this).
//!
//! Numerics: weights are dequantized exactly as ggml does ([`super::quant`], bit for bit);
//! every sum accumulates in f32 (one fma chain per thread, then a fixed tree).

use super::quant::GgmlType;
use crate::dtype::DType;
use crate::encoder::kernels::{matrix, vector};
use crate::error::{invalid, Result};
use crate::ops::{check_dense_output, check_output};
use crate::params::ParamBlock;
use crate::submit::Batch;
use crate::tensor::Tensor;
use crate::Context;
use std::fmt::Write;
use std::sync::Arc;

/// A weight matrix `[rows, cols]` (PyTorch's `[out, in]`) on the device as its GGUF bytes.
pub struct QMatrix {
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    /// `[rows · row_bytes]` U8.
    pub data: Tensor,
    /// The decode matvec quantizes the activations to int8 per 32 values and takes integer
    /// dot products (opt-in, [`QMatrix::with_int8_activations`]; off: exact f32 activations).
    pub x_int8: bool,
}

impl QMatrix {
    /// Uploads `bytes` (rows of `ty` blocks) as they are stored.
    pub fn upload(ctx: &Context, ty: GgmlType, rows: usize, cols: usize, bytes: &[u8]) -> Result<QMatrix> {
        check_weight_type(ty)?;
        if cols % 32 != 0 || cols as u64 % ty.block_size() != 0 {
            return Err(invalid!("{} matrix rows of {cols} values are not whole 32-value units", ty.name()));
        }
        if bytes.len() != rows * ty.row_bytes(cols) {
            return Err(invalid!("{} matrix [{rows}, {cols}] needs {} bytes, got {}", ty.name(), rows * ty.row_bytes(cols), bytes.len()));
        }
        let data = ctx.upload(DType::U8, &[bytes.len()], bytes)?;
        Ok(QMatrix { ty, rows, cols, data, x_int8: false })
    }

    /// The formats whose matvec has an int8-activation form: every quantized weight format
    /// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K .. Q6_K); not F32, F16 or BF16.
    pub fn int8_capable(ty: GgmlType) -> bool {
        ty.is_weight_type() && !matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
    }

    /// Opts this matrix's matvecs into int8 activations where its format has that form
    /// (others keep f32 activations). Needs the device's integer dot product.
    pub fn with_int8_activations(mut self, ctx: &Context, on: bool) -> Result<QMatrix> {
        if on && !ctx.caps.integer_dot_product {
            return Err(invalid!("int8 activations need shaderIntegerDotProduct, which {} lacks", ctx.caps.name));
        }
        self.x_int8 = on && QMatrix::int8_capable(self.ty);
        Ok(self)
    }

    pub fn row_bytes(&self) -> usize {
        self.ty.row_bytes(self.cols)
    }

    pub fn bytes(&self) -> u64 {
        self.data.byte_size() as u64
    }
}

fn check_weight_type(ty: GgmlType) -> Result<()> {
    if !ty.is_weight_type() {
        return Err(invalid!("{} is an activation format, not a weight type", ty.name()));
    }
    Ok(())
}

/// The checks every quantized product (matvec and prefill GEMM) makes: shapes, types, SwiGLU
/// without bias or residual; returns (T, N, K).
pub(crate) fn check_product(op: &str, w: &QMatrix, up: Option<&QMatrix>, x: &Tensor, epi: &Epilogue<'_>, out: &Tensor) -> Result<(usize, usize, usize)> {
    let (t, n, k) = check_product_inputs(op, w, up, x, epi)?;
    // out may be a row range of a larger tensor (offset ≠ 0): a step runs its prompt rows on
    // the GEMM and its other rows on the matvec.
    check_output(out, DType::F32, &[t, n], op)?;
    if !out.is_contiguous() {
        return Err(invalid!("{op}: out must be contiguous, got strides {:?}", out.strides));
    }
    Ok((t, n, k))
}

/// [`check_product`] but for `out`: (T, N, K).
fn check_product_inputs(op: &str, w: &QMatrix, up: Option<&QMatrix>, x: &Tensor, epi: &Epilogue<'_>) -> Result<(usize, usize, usize)> {
    let (t, k) = matrix(x, DType::F32, op, "x")?;
    let n = w.rows;
    if w.cols != k {
        return Err(invalid!("{op}: x is [{t}, {k}] but the weight is [{n}, {}]", w.cols));
    }
    if let Some(u) = up {
        if (u.ty, u.rows, u.cols) != (w.ty, w.rows, w.cols) {
            return Err(invalid!("{op}: gate {} [{n}, {k}] and up {} [{}, {}] differ", w.ty.name(), u.ty.name(), u.rows, u.cols));
        }
        if epi.bias.is_some() || epi.residual.is_some() {
            return Err(invalid!("{op}: SwiGLU takes no bias or residual"));
        }
    }
    if let Some(b) = epi.bias {
        vector(b, DType::F32, n, op, "bias")?;
    }
    if let Some(r) = epi.residual {
        if matrix(r, DType::F32, op, "residual")? != (t, n) {
            return Err(invalid!("{op}: residual is {:?}, expected [{t}, {n}]", r.shape));
        }
    }
    Ok((t, n, k))
}

/// The kernel sources share the f16 conversions with the encoder and the dequantizer, and the
/// RoPE rotation (`llm_rope_rotate.glsl`: the RoPE kernel's and the fused Q/K store's).
pub(super) fn source<D: AsRef<str>>(ty: Option<GgmlType>, defines: &[D], body: &str) -> String {
    let mut s = String::from(crate::kernel::SHADER_PRELUDE);
    // extensions go before any declaration: right after the prelude's #version line
    let at = s.find('\n').map_or(0, |i| i + 1);
    if defines.iter().any(|d| d.as_ref() == "X_INT8") {
        s.insert_str(at, "#extension GL_EXT_integer_dot_product : require\n");
    }
    if defines.iter().any(|d| d.as_ref() == "SUBGROUP_TREE") {
        s.insert_str(at, "#extension GL_KHR_shader_subgroup_basic : require\n#extension GL_KHR_shader_subgroup_shuffle_relative : require\n");
    }
    for d in defines {
        writeln!(s, "#define {}", d.as_ref()).unwrap();
    }
    s.push_str(include_str!("../kernels/encoder_math.glsl"));
    s.push_str(include_str!("kernels/llm_rope_rotate.glsl"));
    if let Some(ty) = ty {
        writeln!(s, "#define WT_{}", ty.name()).unwrap();
        s.push_str(include_str!("kernels/llm_dequant.glsl"));
    }
    s.push_str(body);
    s
}

/// The exact f32 value of every f16 (`bits`): what `f16_exact`'s software path in
/// llm_qdot.glsl computes — zero and subnormals as m · 2^-24, Inf and NaN with their payload
/// (no quiet bit added), normal values re-biased.
pub(crate) fn f16_bits_to_f32_exact(bits: u16) -> u32 {
    let (sign, e, m) = (((bits & 0x8000) as u32) << 16, ((bits >> 10) & 0x1F) as u32, (bits & 0x3FF) as u32);
    match e {
        0 => sign | (m as f32 * 5.960_464_5e-8).to_bits(),
        31 => sign | 0x7F80_0000 | (m << 13),
        _ => sign | ((e + 112) << 23) | (m << 13),
    }
}

const F16_PROBE: &str = r#"
layout(local_size_x = 256) in;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < 65536u) BufU32(ParamsU64(pc.params).v[0]).v[i] = floatBitsToUint(unpackHalf2x16(i).x);
}
"#;

impl Context {
    /// Whether this device's f16 → f32 conversion (`unpackHalf2x16`, one instruction) gives
    /// all 65,536 f16 values exactly — subnormals not flushed, NaNs NaN — measured
    /// once per context by converting every value on the device against
    /// [`f16_bits_to_f32_exact`]. Where it does, the decode products read their f16 scales
    /// with it alone; elsewhere they build the rare classes from bits and select (the same
    /// values either way, so the same bits on every device). On an H100 (stop 45 run 1) the
    /// selects cost 6–7 % of decode (8B Q4_K_M-like 229 against 245 tok/s).
    /// NX_VULKAN_LLM_F16=software takes the select form regardless (tests cover both).
    pub fn f16_conversion_is_exact(&self) -> Result<bool> {
        if std::env::var("NX_VULKAN_LLM_F16").as_deref() == Ok("software") {
            return Ok(false);
        }
        self.f16_conversion_exact
            .get_or_try_init(|| {
                let kernel = self.kernels.get("f16 conversion probe", 256, 1, || format!("{}{F16_PROBE}", crate::kernel::SHADER_PRELUDE))?;
                let out = self.recorded(self.empty(DType::U32, &[65536])?, |batch, out| {
                    batch.keep(&out.buffer);
                    let mut p = ParamBlock::new("f16 conversion probe");
                    p.addrs([out.buffer.address()]);
                    batch.dispatch(&kernel, p.bytes(), 65536)
                })?;
                let bytes = self.download(&out)?;
                // (A NaN need only stay a NaN: arithmetic on one gives the device's own NaN
                // bits, whatever its payload — lavapipe quiets signalling ones here.)
                let exact = bytes.chunks_exact(4).enumerate().all(|(i, b)| {
                    let (got, want) = (u32::from_le_bytes([b[0], b[1], b[2], b[3]]), f16_bits_to_f32_exact(i as u16));
                    got == want || (f32::from_bits(got).is_nan() && f32::from_bits(want).is_nan())
                });
                Ok(exact)
            })
            .copied()
    }
}

/// Columns (tokens) per matvec invocation (steps of several rows): 4. At 8 the Q4_K kernel
/// took 246-254 registers on an H100 (the driver's statistics, stop 45 run 1: two workgroups
/// of 128 per SM); 8B Q4_K_M-like aggregate decode with 8 / 32 sessions (stop 45 runs 2 and
/// 4): TC 8 440-449 / 531-532 tok/s, TC 4 493-508 / 609-613, TC 2 493 / 563.
const MATVEC_TC: usize = 4;
/// Threads per workgroup of the GPU kernel: measured on an H200 (8B shapes, one token, one
/// submission of 50 products; bench/README.md), 128 ran 1–10 % faster than 64 on every shape
/// and 256 slower.
const MATVEC_WG: u32 = 128;
/// Threads per workgroup of the one-row-per-invocation kernel (CPU drivers).
const MATVEC_WG_ROW: u32 = 64;

/// Threads per workgroup of the GPU matvec; NX_VULKAN_LLM_WG=64|128|256|512 overrides it
/// (benchmarks; it cannot change a bit).
fn matvec_wg() -> u32 {
    match std::env::var("NX_VULKAN_LLM_WG").ok().and_then(|v| v.parse::<u32>().ok()) {
        Some(w @ (64 | 128 | 256 | 512)) => w,
        _ => MATVEC_WG,
    }
}

/// Threads per workgroup of either matvec kernel.
fn matvec_workgroup(row_per_thread: bool) -> u32 {
    if row_per_thread {
        MATVEC_WG_ROW
    } else {
        matvec_wg()
    }
}

/// Output rows one pass of a matvec workgroup computes (llm_matvec.glsl's BLK_ROWS): a row
/// group per invocation (row kernel) or per lane group of `nt` lanes, `lane_rows` rows each.
fn matvec_rows_per_pass(row_per_thread: bool, wg: u32, nt: usize, lane_rows: usize) -> usize {
    if row_per_thread {
        wg as usize * lane_rows
    } else {
        wg as usize / nt * lane_rows
    }
}

/// Weight rows each lane group of the GPU kernel takes (sharing its reads of x): four
/// pointers in all, so two rows of a SwiGLU pair. NX_VULKAN_LLM_ROWS=1|2|4|8 overrides it
/// (benchmarks; it cannot change a bit).
fn matvec_lane_rows(nsum: usize) -> usize {
    match std::env::var("NX_VULKAN_LLM_ROWS").ok().and_then(|v| v.parse::<usize>().ok()) {
        Some(r @ (1 | 2 | 4 | 8)) => r,
        _ => 4 / nsum,
    }
}

/// Lanes per row group: 64. Measured on an H200 (8B shapes, one token, Q4_K; bench/README.md),
/// 64 lanes of 4 rows for a plain product (14336×4096 in 34 µs, 4096×14336 in 34 µs against
/// 54–87 µs with 16 lanes of 1–2 rows). SwiGLU took 32 lanes of 2 row pairs while tasks were 64
/// values wide; with the half tasks (stop 38) 64 lanes took 0.5–2 % less device time per
/// decoded token in all six runs on an H100 (stop 42: 1B Q4_K_M/Q5_K_M-like, 8B Q4_K_M-like).
/// NX_VULKAN_LLM_NT=8|16|32|64 overrides it (benchmarks; the lanes' partial sums meet over a
/// tree of NT leaves, so NT changes the sums' order, within the runtime's tolerances).
fn matvec_lanes() -> usize {
    match std::env::var("NX_VULKAN_LLM_NT").ok().and_then(|v| v.parse::<usize>().ok()) {
        Some(nt @ (8 | 16 | 32 | 64)) => nt,
        _ => 64,
    }
}

/// Columns per invocation of the GPU kernel in steps of several rows: MATVEC_TC;
/// NX_VULKAN_LLM_TC=2|4|8 overrides it (benchmarks; it cannot change a bit).
fn matvec_tc() -> usize {
    match std::env::var("NX_VULKAN_LLM_TC").ok().and_then(|v| v.parse::<usize>().ok()) {
        Some(c @ (2 | 4 | 8)) => c,
        _ => MATVEC_TC,
    }
}

/// Whether the matvec's and the RMSNorm's reduction trees run their levels below the subgroup
/// size by subgroup shuffles (`SUBGROUP_TREE`: the same pairs in the same order, so the same
/// bits, with fewer barriers): where the device has relative shuffles, unless
/// NX_VULKAN_LLM_SUBGROUP_TREE=0 (benchmarks and the tests that compare the two forms).
fn subgroup_tree(caps: &crate::device::DeviceCaps) -> bool {
    caps.subgroup_shuffle_relative && std::env::var("NX_VULKAN_LLM_SUBGROUP_TREE").as_deref() != Ok("0")
}

/// What a matrix product adds after the sum.
#[derive(Clone, Copy, Debug, Default)]
pub struct Epilogue<'a> {
    pub bias: Option<&'a Tensor>,
    /// `out = residual + W·x` (may be `out` itself: each element is read before it is written
    /// by the same invocation).
    pub residual: Option<&'a Tensor>,
}

/// An RMSNorm applied to a matrix product's input inside the product
/// ([`Context::record_llm_normed_matvec`]): `x / sqrt(mean(x²) + eps) · gamma`.
#[derive(Clone, Copy, Debug)]
pub struct RmsNorm<'a> {
    /// `[K]` f32, at its buffer's start.
    pub gamma: &'a Tensor,
    pub eps: f32,
}

/// An RMSNorm whose input was prepared by what wrote it ([`NextNorm`] of the residual product
/// before, or [`Context::record_llm_norm_sums`]): the product reads those rows (x · gamma
/// already) and scales each sum by `1 / sqrt(S / K + eps)`, S the row's sum of squares taken
/// from its blocks' sums. Neither the product nor a dispatch of its own reads gamma or squares x
/// again (llm_matvec.glsl's NORM_SUMS).
#[derive(Clone, Copy, Debug)]
pub struct NormSums<'a> {
    /// `[T, llm_norm_blocks(K)]` f32: each row's sums of squares of its blocks of 8 values.
    pub sums: &'a Tensor,
    pub eps: f32,
}

/// How a product normalises its input: fused ([`RmsNorm`]: gamma and the squares in the
/// product) or from block sums ([`NormSums`]).
#[derive(Clone, Copy, Debug)]
pub enum InputNorm<'a> {
    Fused(RmsNorm<'a>),
    Sums(NormSums<'a>),
}

impl<'a> From<RmsNorm<'a>> for InputNorm<'a> {
    fn from(n: RmsNorm<'a>) -> Self {
        InputNorm::Fused(n)
    }
}

impl<'a> From<NormSums<'a>> for InputNorm<'a> {
    fn from(n: NormSums<'a>) -> Self {
        InputNorm::Sums(n)
    }
}

/// What a residual product writes for the RMSNorm after it ([`Context::record_llm_matvec_norm_out`]):
/// `scaled = out · gamma` and `sums`, each row's sums of squares of its blocks of 8 outputs — a
/// [`NormSums`] product's input.
#[derive(Clone, Copy, Debug)]
pub struct NextNorm<'a> {
    /// `[N]` f32 at its buffer's start: the next norm's weight.
    pub gamma: &'a Tensor,
    /// `[T, N]` f32.
    pub scaled: &'a Tensor,
    /// `[T, llm_norm_blocks(N)]` f32.
    pub sums: &'a Tensor,
}

/// Block sums per row of `h` values ([`NormSums`]): one per 8 values.
pub fn llm_norm_blocks(h: usize) -> usize {
    h.div_ceil(8)
}

/// What [`Context::record_llm_rope_store`] does to the Q, K and V products, done by the products
/// themselves ([`Context::record_llm_qkv_rope`]): q rotated in place, k rotated and v stored
/// into the layer's caches at each row's (slot, position). Adjacent-pair (llama) or NEOX
/// (qwen2) rotation; not with a per-head norm (qwen3's QK norm).
#[derive(Clone, Copy, Debug)]
pub struct RopeStore<'a> {
    pub shape: &'a AttnShape,
    /// `[T, 2]` u32 (slot, position) of the product's rows (a view of a step's rows may start
    /// past its buffer's start).
    pub rows: &'a Tensor,
    /// `[ctx, rope_dims / 2, 2]` f32.
    pub cos_sin: &'a Tensor,
    pub cache_k: &'a Tensor,
    pub cache_v: &'a Tensor,
}

/// Where one product of [`Context::record_llm_qkv_rope`] puts its rows.
#[derive(Clone, Copy)]
enum FusedStore<'a> {
    /// q: rotated, into the product's out.
    Rope(RopeStore<'a>),
    /// k (rotated) or v: into the cache that is the product's out.
    Cache { rope: bool, store: RopeStore<'a> },
}

impl Context {
    /// `out[t, n] = Σ_k w[n, k] · x[t, k]` (+ bias[n]) (+ residual[t, n]); `x` `[T, K]` f32,
    /// `out` `[T, N]` f32. With `up`, a SwiGLU: `out = silu(w·x) · (up·x)` (`w` the gate; no
    /// epilogue). One dispatch.
    pub fn record_llm_matvec(&self, batch: &mut Batch<'_>, w: &QMatrix, up: Option<&QMatrix>, x: &Tensor, epi: Epilogue<'_>, out: &Tensor) -> Result<()> {
        self.record_matvec(batch, w, up, x, None, epi, out)
    }

    /// [`Context::record_llm_matvec`] of `rmsnorm(x)` without writing the normalised rows: the
    /// kernel scales x by gamma as it reads it and the sum by the row's 1/rms. One dispatch
    /// (the plain norm and product are two, with a write and a read of the normalised rows).
    /// With [`NormSums`], `x` is the rows its writer scaled by gamma.
    #[allow(clippy::too_many_arguments)]
    pub fn record_llm_normed_matvec<'n>(&self, batch: &mut Batch<'_>, w: &QMatrix, up: Option<&QMatrix>, x: &Tensor, norm: impl Into<InputNorm<'n>>, epi: Epilogue<'_>, out: &Tensor) -> Result<()> {
        self.record_matvec(batch, w, up, x, Some(norm.into()), epi, out)
    }

    /// [`Context::record_llm_matvec`] (a residual product: `epi.residual` given) that also
    /// writes the next RMSNorm's input (`next`, for [`NormSums`] products): one dispatch, where
    /// the norm would be one more and a barrier. Only where [`Context::llm_summed_norms_fit`].
    pub fn record_llm_matvec_norm_out(&self, batch: &mut Batch<'_>, w: &QMatrix, x: &Tensor, epi: Epilogue<'_>, out: &Tensor, next: NextNorm<'_>) -> Result<()> {
        self.record_matvec_in(batch, w, None, x, None, epi, out, false, None, Some(next))
    }

    /// What [`NextNorm`] holds, for rows no product wrote (the first layer's input): `scaled =
    /// x · gamma`, `sums` each row's block sums of squares. `x` `[T, H]` f32, `gamma` `[H]` and
    /// `scaled` `[T, H]` at their buffers' starts, `sums` `[T, llm_norm_blocks(H)]` f32.
    pub fn record_llm_norm_sums(&self, batch: &mut Batch<'_>, x: &Tensor, gamma: &Tensor, scaled: &Tensor, sums: &Tensor) -> Result<()> {
        const OP: &str = "llm norm sums";
        let (t, h) = matrix(x, DType::F32, OP, "x")?;
        vector(gamma, DType::F32, h, OP, "gamma")?;
        check_dense_output(scaled, DType::F32, &[t, h], OP)?;
        check_dense_output(sums, DType::F32, &[t, llm_norm_blocks(h)], OP)?;
        if gamma.offset != 0 || scaled.offset != 0 {
            return Err(invalid!("{OP}: gamma and scaled must start at their buffer's start"));
        }
        if t == 0 || h == 0 {
            return Ok(());
        }
        let defines = ["SUMS"];
        let kernel = self.kernels.get("llm norm sums", 256, 1, || source(None, &defines, include_str!("kernels/llm_rows.glsl")))?;
        let mut p = ParamBlock::new(OP);
        p.addrs([x, sums, gamma, scaled].map(|t| t.buffer.address()));
        p.i32s([t, h, 0, x.offset, sums.offset, 0])?;
        for b in [x, sums, gamma, scaled] {
            batch.keep(&b.buffer);
        }
        batch.dispatch_grid(&kernel, p.bytes(), t as u32, [t.min(65535) as u32, 1, 1])
    }

    /// Whether [`NextNorm`] products can run here: the residual products' workgroups cover
    /// whole blocks of 8 rows per pass (true for the defaults; the NX_VULKAN_LLM_* kernel
    /// overrides may break it).
    pub fn llm_summed_norms_fit(&self) -> bool {
        // (a residual product's lane rows: one product, no RoPE pair)
        let row_per_thread = self.matvec_row_per_thread();
        let rows = matvec_rows_per_pass(row_per_thread, matvec_workgroup(row_per_thread), matvec_lanes(), if row_per_thread { 1 } else { matvec_lane_rows(1) });
        rows > 0 && rows % 8 == 0
    }

    /// Whether the matvec runs one row per invocation (CPU drivers; see record_matvec_in).
    fn matvec_row_per_thread(&self) -> bool {
        // NX_VULKAN_LLM_MATVEC=workgroup|row overrides the choice (tests run the GPU kernel on
        // lavapipe with it).
        match std::env::var("NX_VULKAN_LLM_MATVEC").as_deref() {
            Ok("workgroup") => false,
            Ok("row") => true,
            _ => self.caps.device_type == "cpu",
        }
    }

    /// The attention block's input projections `q, k, v = (wq, wk, wv) · rmsnorm(x)` (or of x
    /// itself without `norm`; + the biases `bias[i]`): three products recorded without
    /// barriers between them, so
    /// the device overlaps them (K and V are small: alone, each would leave most of a GPU
    /// idle).
    #[allow(clippy::too_many_arguments)]
    pub fn record_llm_qkv(&self, batch: &mut Batch<'_>, w: [&QMatrix; 3], x: &Tensor, norm: Option<InputNorm<'_>>, bias: [Option<&Tensor>; 3], out: [&Tensor; 3]) -> Result<()> {
        if out.iter().any(|o| Arc::ptr_eq(&o.buffer, &x.buffer)) || Arc::ptr_eq(&out[0].buffer, &out[1].buffer) || Arc::ptr_eq(&out[0].buffer, &out[2].buffer) || Arc::ptr_eq(&out[1].buffer, &out[2].buffer) {
            return Err(invalid!("llm qkv: q, k, v and x must be four distinct buffers (the products run concurrently)"));
        }
        for i in 0..3 {
            self.record_matvec_in(batch, w[i], None, x, norm, Epilogue { bias: bias[i], residual: None }, out[i], i > 0, None, None)?;
        }
        Ok(())
    }

    /// [`Context::record_llm_qkv`] followed by [`Context::record_llm_rope_store`], in the three
    /// products alone: `q` (`[T, n_head · head_dim]`) gets the rotated queries and the caches
    /// the rotated keys and the values, with the same bits as the two calls and one dispatch
    /// and barrier fewer. Both rotations: adjacent pairs (llama) and NEOX's pairs half the
    /// rotated dimensions apart (qwen2); not the QK norm (qwen3: record_llm_rope_store).
    #[allow(clippy::too_many_arguments)]
    pub fn record_llm_qkv_rope(&self, batch: &mut Batch<'_>, w: [&QMatrix; 3], x: &Tensor, norm: Option<InputNorm<'_>>, bias: [Option<&Tensor>; 3], q: &Tensor, rope: RopeStore<'_>) -> Result<()> {
        const OP: &str = "llm qkv rope";
        let shape = rope.shape;
        shape.check(OP)?;
        let (t, two) = matrix(rope.rows, DType::U32, OP, "rows")?;
        let (qd, kvd) = (shape.n_head * shape.head_dim, shape.n_head_kv * shape.head_dim);
        if two != 2 || rope.rows.offset % 2 != 0 || matrix(q, DType::F32, OP, "q")? != (t, qd) || w[0].rows != qd || w[1].rows != kvd || w[2].rows != kvd {
            return Err(invalid!("{OP}: rows {:?}, q {:?} and products of {}, {}, {} rows do not fit the shape {shape:?}", rope.rows.shape, q.shape, w[0].rows, w[1].rows, w[2].rows));
        }
        shape.check_cos_sin(OP, rope.cos_sin)?;
        shape.check_caches(OP, rope.cache_k, rope.cache_v)?;
        if Arc::ptr_eq(&q.buffer, &x.buffer) {
            return Err(invalid!("{OP}: q and x must be distinct buffers (the products run concurrently)"));
        }
        let stores = [
            (FusedStore::Rope(rope), q),
            (FusedStore::Cache { rope: true, store: rope }, rope.cache_k),
            (FusedStore::Cache { rope: false, store: rope }, rope.cache_v),
        ];
        for (i, (store, out)) in stores.into_iter().enumerate() {
            self.record_matvec_in(batch, w[i], None, x, norm, Epilogue { bias: bias[i], residual: None }, out, i > 0, Some(store), None)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn record_matvec(&self, batch: &mut Batch<'_>, w: &QMatrix, up: Option<&QMatrix>, x: &Tensor, norm: Option<InputNorm<'_>>, epi: Epilogue<'_>, out: &Tensor) -> Result<()> {
        self.record_matvec_in(batch, w, up, x, norm, epi, out, false, None, None)
    }

    /// The one matvec recorder; `concurrent`: without a barrier in front (the caller vouches
    /// that the dispatches since the last barrier touch nothing this one writes); `fused`: the
    /// RoPE / KV-cache store of [`Context::record_llm_qkv_rope`] (checked there); `next`: the
    /// next norm's input written too ([`Context::record_llm_matvec_norm_out`]).
    #[allow(clippy::too_many_arguments)]
    fn record_matvec_in(
        &self,
        batch: &mut Batch<'_>,
        w: &QMatrix,
        up: Option<&QMatrix>,
        x: &Tensor,
        norm: Option<InputNorm<'_>>,
        epi: Epilogue<'_>,
        out: &Tensor,
        concurrent: bool,
        fused: Option<FusedStore<'_>>,
        next: Option<NextNorm<'_>>,
    ) -> Result<()> {
        const OP: &str = "llm matvec";
        // a cache store's out is the cache (checked by record_llm_qkv_rope), indexed by the
        // kernel by slot and position
        let (t, n, k) = match fused {
            Some(FusedStore::Cache { .. }) => check_product_inputs(OP, w, up, x, &epi)?,
            _ => check_product(OP, w, up, x, &epi, out)?,
        };
        let (rope, kv_out, store) = match fused {
            None => (false, false, None),
            Some(FusedStore::Rope(st)) => (true, false, Some(st)),
            Some(FusedStore::Cache { rope, store }) => (rope, true, Some(store)),
        };
        let eps = match norm {
            Some(InputNorm::Fused(nm)) => {
                vector(nm.gamma, DType::F32, k, OP, "norm weight")?;
                if nm.gamma.offset != 0 {
                    return Err(invalid!("{OP}: the norm weight must start at its buffer's start"));
                }
                Some(nm.eps)
            }
            Some(InputNorm::Sums(ns)) => {
                if matrix(ns.sums, DType::F32, OP, "norm sums")? != (t, llm_norm_blocks(k)) {
                    return Err(invalid!("{OP}: norm sums {:?} must be [{t}, {}]", ns.sums.shape, llm_norm_blocks(k)));
                }
                Some(ns.eps)
            }
            None => None,
        };
        if let Some(eps) = eps {
            if !(eps.is_finite() && eps >= 0.0) {
                return Err(invalid!("{OP}: norm eps {eps} must be finite and non-negative"));
            }
        }
        if let Some(nx) = next {
            vector(nx.gamma, DType::F32, n, OP, "next norm weight")?;
            if matrix(nx.scaled, DType::F32, OP, "next norm input")? != (t, n) || matrix(nx.sums, DType::F32, OP, "next norm sums")? != (t, llm_norm_blocks(n)) {
                return Err(invalid!("{OP}: the next norm's input {:?} and sums {:?} must be [{t}, {n}] and [{t}, {}]", nx.scaled.shape, nx.sums.shape, llm_norm_blocks(n)));
            }
            if nx.gamma.offset != 0 {
                return Err(invalid!("{OP}: the next norm weight must start at its buffer's start"));
            }
            if up.is_some() || fused.is_some() || epi.residual.is_none() {
                return Err(invalid!("{OP}: the next norm's input is written by residual products alone"));
            }
            // (other workgroups still read x and the residual while one writes these)
            let written = [&nx.scaled.buffer, &nx.sums.buffer];
            let others: Vec<_> = [Some(x), Some(out), Some(nx.gamma), epi.residual].into_iter().flatten().map(|t| &t.buffer).collect();
            if Arc::ptr_eq(written[0], written[1]) || written.iter().any(|b| others.iter().any(|r| Arc::ptr_eq(b, r))) {
                return Err(invalid!("{OP}: the next norm's input and sums need buffers of their own"));
            }
            if !self.llm_summed_norms_fit() {
                return Err(invalid!("{OP}: this matvec configuration cannot write the next norm's block sums"));
            }
        }
        if t == 0 || n == 0 {
            return Ok(());
        }
        // Columns per invocation: one for a single row (a decode step of one session), else
        // MATVEC_TC. Each column's sum is the same chain either way, so this cannot change a bit.
        // (A CPU driver runs the workgroup kernel only when tests force it, and compiles a
        // barrier kernel with all of TC's columns unrolled for minutes: one column there.)
        let cpu = self.caps.device_type == "cpu";
        // A CPU driver pays for every workgroup and barrier: one row per invocation there.
        let row_per_thread = self.matvec_row_per_thread();
        let tc = if t == 1 || (cpu && !row_per_thread) { 1 } else { matvec_tc() };
        let nsum = if up.is_some() { 2 } else { 1 };
        let nt = matvec_lanes();
        // A RoPE pair (rows 2i, 2i + 1) is computed by one invocation (rows) or lane group.
        let lane_rows = match (row_per_thread, rope) {
            (true, false) => 1,
            (true, true) => 2,
            (false, _) => matvec_lane_rows(nsum).next_multiple_of(if rope { 2 } else { 1 }),
        };
        let wg = matvec_workgroup(row_per_thread);
        let mut defines = vec![format!("WG {wg}"), format!("NT {nt}"), format!("TC {tc}"), format!("LANE_ROWS {lane_rows}"), format!("NR {}", lane_rows * nsum)];
        if x.offset % 4 == 0 {
            defines.push("X_VEC4".into());
        }
        if row_per_thread {
            defines.push("ROW_PER_THREAD".into());
        }
        // Measurements only: NX_VULKAN_LLM_CACHE=w|x|wx loads the weights (W_STREAM) and/or the
        // activations (X_L2) as coherent, past the L1 on NVIDIA GPUs (llm_qdot.glsl).
        if let Ok(v) = std::env::var("NX_VULKAN_LLM_CACHE") {
            if v.contains('w') {
                defines.push("W_STREAM".into());
            }
            if v.contains('x') {
                defines.push("X_L2".into());
            }
        }
        // f16 scales by the device's conversion alone where it is exact for every f16
        // (f16_conversion_is_exact; the same values as the select form).
        if self.f16_conversion_is_exact()? {
            defines.push("F16_HW_EXACT".into());
        }
        // The lanes' partial sums meet over the same tree with its levels below the subgroup
        // size in registers (llm_matvec.glsl; the same bits, fewer barriers): subgroup_tree.
        if !row_per_thread && subgroup_tree(&self.caps) {
            defines.push("SUBGROUP_TREE".into());
        }
        // Q8_0 rows whose length is a multiple of 4 bytes (an even number of blocks): the
        // blocks read as aligned 32-bit words (llm_qdot.glsl's q8_block; the same values).
        // NX_VULKAN_LLM_Q8_WORDS=0 (a measurement) keeps the 16-bit loads.
        if w.ty == GgmlType::Q8_0 && w.row_bytes() % 4 == 0 && std::env::var("NX_VULKAN_LLM_Q8_WORDS").as_deref() != Ok("0") {
            defines.push("Q8_WORDS".into());
        }
        // NX_VULKAN_LLM_TASK_PAIRS=1 (a measurement; the same bits): two tasks per loop step —
        // 1-6 % slower on an H100 (stop 45 run 1).
        if std::env::var("NX_VULKAN_LLM_TASK_PAIRS").as_deref() == Ok("1") && !row_per_thread {
            defines.push("TASK_PAIRS".into());
        }
        // Q4_K/Q5_K/Q6_K quant words made floats once for all the columns of a step of several
        // rows (llm_qdot.glsl; the same bits): on an H100 (stop 42) 8 sessions' aggregate decode
        // rose 12-33 % (1B) and 24 % (8B), one session unchanged. NX_VULKAN_LLM_BATCH_SHARE=0
        // (a measurement) turns it off.
        if std::env::var("NX_VULKAN_LLM_BATCH_SHARE").map_or(true, |v| v != "0") {
            defines.push("BATCH_SHARE".into());
        }
        // Q4_K/Q5_K quants as 1 + q·2^-bits (llm_qdot.glsl's mant4; f32 activations only):
        // a float subtraction per value (and Q4_K's nibble masks) fewer than 2^23 + q minus
        // 2^23; on an H100 a Q4_K product's device time −4-5 %, decode +1.6-2.5 % (8B
        // Q4_K_M-like) and +6-8 % (1B Q5_K_M-like; stop 47).
        // Slightly different rounding, still the same bits for every batch.
        // NX_VULKAN_LLM_QUANT_MANTISSA=0 (a measurement) keeps the old form.
        if !w.x_int8 && matches!(w.ty, GgmlType::Q4_K | GgmlType::Q5_K) && std::env::var("NX_VULKAN_LLM_QUANT_MANTISSA").as_deref() != Ok("0") {
            defines.push("QF_MANT".into());
        }
        if w.x_int8 {
            if up.is_some_and(|u| !u.x_int8) {
                return Err(invalid!("{OP}: gate and up must both take int8 activations or neither"));
            }
            defines.push("X_INT8".into());
        }
        let (fused_norm, summed_norm) = (matches!(norm, Some(InputNorm::Fused(_))), matches!(norm, Some(InputNorm::Sums(_))));
        // A norm's sum from its block sums: by a prologue of its own (chains, then a tree in
        // shared memory), or — NX_VULKAN_LLM_SUMS_IN_TREE=1, a measurement, where a lane group
        // has as many lanes as the sum has chains (64) — over the dot sums' tree: the same bits.
        if summed_norm && !row_per_thread && nt == 64 && std::env::var("NX_VULKAN_LLM_SUMS_IN_TREE").as_deref() == Ok("1") {
            defines.push("SUMS_IN_TREE".into());
        }
        for (on, d) in [(up.is_some(), "SWIGLU"), (epi.bias.is_some(), "BIAS"), (epi.residual.is_some(), "RESIDUAL"), (fused_norm, "NORM"), (summed_norm, "NORM_SUMS"), (next.is_some(), "NORM_OUT")] {
            if on {
                defines.push(d.into());
            }
        }
        if let Some(st) = store {
            defines.push(format!("HD {}", st.shape.head_dim));
            defines.push(format!("ROPE_DIMS {}", st.shape.rope_dims));
            if rope {
                defines.push("ROPE".into());
                if st.shape.rope_neox {
                    defines.push("ROPE_NEOX".into());
                }
            }
            if kv_out {
                defines.push("KV_OUT".into());
                if st.shape.kv_f16 {
                    defines.push("KV_F16".into());
                }
            }
        }
        let key = format!("llm matvec {} {}", w.ty.name(), defines.join(" "));
        let kernel = self.kernels.get(&key, wg, 1, || {
            let body = format!("{}{}", include_str!("kernels/llm_qdot.glsl"), include_str!("kernels/llm_matvec.glsl"));
            source(Some(w.ty), &defines, &body)
        })?;
        let w2 = up.map_or(&w.data, |u| &u.data);
        let bias = epi.bias.unwrap_or(out);
        let res = epi.residual.unwrap_or(out);
        let gamma = match norm {
            Some(InputNorm::Fused(nm)) => nm.gamma,
            _ => out,
        };
        let mut p = ParamBlock::new(OP);
        p.addrs([&w.data, w2, x, bias, res, out, gamma].map(|t| t.buffer.address()));
        p.i32s([n, k, t, w.row_bytes(), x.offset, bias.offset, res.offset, out.offset])?;
        p.i32(eps.unwrap_or(0.0).to_bits() as i32)?;
        if let Some(st) = store {
            // (rows, cos/sin) at byte 96, (ctx, slots, the rows' first row) at 112
            p.i32(0)?;
            p.addrs([st.rows, st.cos_sin].map(|t| t.buffer.address()));
            p.i32s([st.shape.ctx, st.shape.slots, st.rows.offset / 2])?;
            for b in [st.rows, st.cos_sin] {
                batch.keep(&b.buffer);
            }
        }
        // (the norm sums, XG and gamma' at byte 128, their offsets at 152)
        let sums = match (norm, next) {
            (Some(InputNorm::Sums(ns)), _) => Some(ns.sums),
            (_, Some(nx)) => Some(nx.sums),
            _ => None,
        };
        if let Some(sums) = sums {
            while p.len() < 128 {
                p.i32(0)?;
            }
            let (scaled, gn) = next.map_or((out, out), |nx| (nx.scaled, nx.gamma));
            p.addrs([sums, scaled, gn].map(|t| t.buffer.address()));
            p.i32s([sums.offset, scaled.offset])?;
            for b in [sums, scaled, gn] {
                batch.keep(&b.buffer);
            }
        }
        for b in [&w.data, w2, x, bias, res, out, gamma] {
            batch.keep(&b.buffer);
        }
        let max = self.caps.max_workgroup_count;
        let rows_per_group = matvec_rows_per_pass(row_per_thread, wg, nt, lane_rows);
        // NX_VULKAN_LLM_GROUPS=N (a measurement; the same bits: each workgroup loops over row
        // groups, and a row's sums do not depend on which workgroup computes them) caps the
        // grid's row groups — fewer, longer-lived workgroups instead of one per row group.
        let cap = std::env::var("NX_VULKAN_LLM_GROUPS").ok().and_then(|v| v.parse::<usize>().ok()).filter(|&g| g > 0).unwrap_or(usize::MAX);
        let groups = [n.div_ceil(rows_per_group).min(max[0].min(65535) as usize).min(cap) as u32, t.div_ceil(tc) as u32, 1];
        let count = (t * n).min(u32::MAX as usize) as u32;
        if concurrent {
            batch.dispatch_grid_concurrent(&kernel, p.bytes(), count, groups)
        } else {
            batch.dispatch_grid(&kernel, p.bytes(), count, groups)
        }
    }

    /// `out[t] = dequant(table[ids[t]])`: the token embedding lookup. `ids` `[T]` u32 (checked
    /// against the table on the host by the caller; clamped on the device), `out` `[T, H]` f32.
    pub fn record_llm_get_rows(&self, batch: &mut Batch<'_>, table: &QMatrix, ids: &Tensor, out: &Tensor) -> Result<()> {
        const OP: &str = "llm embedding lookup";
        let t = ids.shape.first().copied().unwrap_or(0);
        vector(ids, DType::U32, t, OP, "ids")?;
        check_dense_output(out, DType::F32, &[t, table.cols], OP)?;
        if t == 0 || table.rows == 0 {
            return Ok(());
        }
        let key = format!("llm get_rows {}", table.ty.name());
        let defines = vec!["GET_ROWS".to_string()];
        let kernel = self.kernels.get(&key, 256, 1, || source(Some(table.ty), &defines, include_str!("kernels/llm_rows.glsl")))?;
        let mut p = ParamBlock::new(OP);
        p.addrs([&table.data, ids, out, out].map(|t| t.buffer.address()));
        p.i32s([t, table.cols, table.row_bytes(), 0, ids.offset, 0, table.rows])?;
        for b in [&table.data, ids, out] {
            batch.keep(&b.buffer);
        }
        batch.dispatch_grid(&kernel, p.bytes(), t as u32, [t.min(65535) as u32, 1, 1])
    }

    /// `out[r] = x[src] / sqrt(mean(x[src]²) + eps) · gamma` with `src = rows[r]` when `rows`
    /// (`[R]` u32, gathering the rows whose logits are wanted) is given, else `src = r`. `x`
    /// `[T, H]` f32, `gamma` `[H]` f32, `out` `[R, H]` f32.
    pub fn record_llm_rmsnorm(&self, batch: &mut Batch<'_>, x: &Tensor, rows: Option<&Tensor>, gamma: &Tensor, eps: f32, out: &Tensor) -> Result<()> {
        const OP: &str = "llm rmsnorm";
        let (t, h) = matrix(x, DType::F32, OP, "x")?;
        vector(gamma, DType::F32, h, OP, "gamma")?;
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(invalid!("{OP}: eps {eps} must be finite and non-negative"));
        }
        let r = match rows {
            Some(ix) => {
                let r = ix.shape.first().copied().unwrap_or(0);
                vector(ix, DType::U32, r, OP, "rows")?;
                r
            }
            None => t,
        };
        check_dense_output(out, DType::F32, &[r, h], OP)?;
        if r == 0 || h == 0 || t == 0 {
            return Ok(());
        }
        let mut defines: Vec<String> = if rows.is_some() { vec!["GATHER".into()] } else { vec![] };
        // Rows of up to 4,096 values: each thread's (at most 16) values and gammas loaded at
        // once and kept for the output (one memory latency instead of four), and the tree's
        // levels below the subgroup size in registers where the device has shuffles — the
        // same sums in the same order, so the same bits (llm_rows.glsl).
        // NX_VULKAN_LLM_NORM_REGS=0 (a measurement) keeps the looped form.
        if h <= 4096 && std::env::var("NX_VULKAN_LLM_NORM_REGS").as_deref() != Ok("0") {
            defines.push(format!("RMS_NV {}", h.div_ceil(256)));
            if subgroup_tree(&self.caps) {
                defines.push("SUBGROUP_TREE".into());
            }
        }
        let key = format!("llm rmsnorm {}", defines.join(" "));
        let kernel = self.kernels.get(&key, 256, 1, || source(None, &defines, include_str!("kernels/llm_rows.glsl")))?;
        let ix = rows.unwrap_or(x);
        let mut p = ParamBlock::new(OP);
        p.addrs([x, ix, gamma, out].map(|t| t.buffer.address()));
        p.i32s([r, h, t, x.offset, ix.offset])?.i32(eps.to_bits() as i32)?;
        if gamma.offset != 0 || out.offset != 0 {
            return Err(invalid!("{OP}: gamma and out must start at their buffer's start"));
        }
        for b in [x, ix, gamma, out] {
            batch.keep(&b.buffer);
        }
        batch.dispatch_grid(&kernel, p.bytes(), r as u32, [r.min(65535) as u32, 1, 1])
    }

    /// `ids[r] = argmax(logits[r])` (lowest index among ties; NaN never wins). `logits`
    /// `[R, V]` f32, `ids` `[R]` u32.
    pub fn record_llm_argmax(&self, batch: &mut Batch<'_>, logits: &Tensor, ids: &Tensor) -> Result<()> {
        const OP: &str = "llm argmax";
        let (r, v) = matrix(logits, DType::F32, OP, "logits")?;
        check_dense_output(ids, DType::U32, &[r], OP)?;
        if r == 0 || v == 0 {
            return Ok(());
        }
        let kernel = self.kernels.get("llm argmax", 256, 1, || source::<&str>(None, &[], include_str!("kernels/llm_argmax.glsl")))?;
        let mut p = ParamBlock::new(OP);
        p.addrs([logits, ids].map(|t| t.buffer.address()));
        p.i32s([r, v, logits.offset])?;
        batch.keep(&logits.buffer);
        batch.keep(&ids.buffer);
        batch.dispatch_grid(&kernel, p.bytes(), r as u32, [r.min(65535) as u32, 1, 1])
    }
}

/// Rows from which a step's attention runs [`AttnWay::Blocked`] (fewer: [`AttnWay::Wide`]).
pub const ATTN_BLOCKED_FROM: usize = 32;

/// How [`Context::record_llm_attention_as`] runs a step's chunks (llm_attention_split.glsl).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnWay {
    /// A workgroup of 64 per (`rows_per_group` rows, kv head, chunk) computes all the kv
    /// head's query heads: steps of many rows.
    Blocked { rows_per_group: usize },
    /// 64 invocations per query head, the chunk's values staged for the kv head's heads: steps
    /// of few rows (decode), where the blocked way leaves most of a GPU idle. `fused_combine`:
    /// the workgroup that finishes a row's last chunk combines the chunks (counting them in
    /// the scratch's counters) instead of a combine dispatch.
    Wide { fused_combine: bool },
}

/// The split attention's scratch ([`Context::llm_attention_scratch`]): the chunks' parts and,
/// for [`AttnWay::Wide`]'s fused combine, a count of finished chunks per (row, kv head) that is
/// zero between dispatches.
#[derive(Clone, Debug)]
pub struct AttnScratch {
    /// `[T, n_head, chunks, head_dim + 2]` f32.
    pub partials: Tensor,
    /// `[T, n_head_kv]` u32.
    pub counters: Tensor,
}

impl AttnScratch {
    /// Keeps both buffers alive until `batch`'s work is committed.
    pub fn keep(&self, batch: &mut Batch<'_>) {
        batch.keep(&self.partials.buffer);
        batch.keep(&self.counters.buffer);
    }
}

/// The attention block's fixed shape, shared by [`Context::record_llm_rope_store`] and
/// [`Context::record_llm_attention`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub rope_dims: usize,
    pub rope_neox: bool,
    /// Positions per session slot in the cache.
    pub ctx: usize,
    pub slots: usize,
    pub kv_f16: bool,
}

impl AttnShape {
    fn check(&self, op: &str) -> Result<()> {
        let ok = self.n_head > 0
            && self.n_head_kv > 0
            && self.n_head % self.n_head_kv == 0
            // the split attention keeps a chain per query head of a kv head in registers
            && self.n_head / self.n_head_kv <= 16
            && self.head_dim > 0
            && self.head_dim <= 256
            && self.rope_dims % 2 == 0
            && self.rope_dims <= self.head_dim
            && self.ctx > 0
            && self.slots > 0;
        if !ok {
            return Err(invalid!("{op}: unsupported attention shape {self:?}"));
        }
        Ok(())
    }

    pub fn kv_dtype(&self) -> DType {
        if self.kv_f16 { DType::F16 } else { DType::F32 }
    }

    /// The shape of one layer's K (or V) cache.
    pub fn cache_shape(&self) -> [usize; 3] {
        [self.slots, self.ctx, self.n_head_kv * self.head_dim]
    }

    /// `op`'s K and V caches are one layer's, of the cache type, at their buffers' starts.
    fn check_caches(&self, op: &str, cache_k: &Tensor, cache_v: &Tensor) -> Result<()> {
        for (c, name) in [(cache_k, "k cache"), (cache_v, "v cache")] {
            if c.dtype != self.kv_dtype() || c.shape != self.cache_shape() || c.offset != 0 {
                return Err(invalid!("{op}: {name} is {} {:?}, expected {} {:?}", c.dtype, c.shape, self.kv_dtype(), self.cache_shape()));
            }
        }
        Ok(())
    }

    /// `op`'s RoPE table is f32 [ctx, rope_dims / 2, 2] (cos, sin) at its buffer's start.
    fn check_cos_sin(&self, op: &str, cos_sin: &Tensor) -> Result<()> {
        if cos_sin.dtype != DType::F32 || cos_sin.shape != [self.ctx, self.rope_dims / 2, 2] || cos_sin.offset != 0 {
            return Err(invalid!("{op}: cos/sin table is {:?}, expected [{}, {}, 2] f32", cos_sin.shape, self.ctx, self.rope_dims / 2));
        }
        Ok(())
    }

    /// Keys whose values the WIDE split attention stages in shared memory at once (its `SK`):
    /// 64 (a whole chunk, kept across rows of one slot) where that fits beside each query
    /// head's query, probabilities and tree (lavapipe's 32 KiB: up to head_dim 64 with 4 heads
    /// per kv head), else 32, 16 or 8.
    fn staged_keys(&self, max_shared: usize) -> Result<usize> {
        let fixed = self.n_head / self.n_head_kv * (self.head_dim + 128) * 4;
        [64, 32, 16, 8]
            .into_iter()
            .find(|sk| fixed + sk * self.head_dim * 4 <= max_shared)
            .ok_or_else(|| invalid!("llm attention: head_dim {} needs more shared memory than the device's {max_shared} bytes", self.head_dim))
    }

    fn defines(&self) -> Vec<String> {
        let mut d = vec![format!("NH {}", self.n_head), format!("NKV {}", self.n_head_kv), format!("HD {}", self.head_dim), format!("ROPE_DIMS {}", self.rope_dims)];
        if self.rope_neox {
            d.push("NEOX".into());
        }
        if self.kv_f16 {
            d.push("KV_F16".into());
        }
        d
    }
}

fn check_rows(rows: &Tensor, op: &str) -> Result<usize> {
    let (t, two) = matrix(rows, DType::U32, op, "rows")?;
    if two != 2 || rows.offset != 0 {
        return Err(invalid!("{op}: rows must be a [T, 2] u32 tensor of (slot, position) at its buffer's start"));
    }
    Ok(t)
}

impl Context {
    /// For each row `t` (slot, position `rows[t]`): optional per-head RMSNorm of q and k
    /// (`qk_norm` = (q gamma, k gamma), `[head_dim]` f32 each), rotary embedding of q and k with
    /// `cos_sin` (`[ctx, rope_dims/2, 2]` f32), q written back in place, k and v stored in the
    /// layer's caches (`cache_k`, `cache_v` of [`AttnShape::cache_shape`]). Positions and slots
    /// are checked on the host by the caller (clamped on the device). One dispatch.
    #[allow(clippy::too_many_arguments)]
    pub fn record_llm_rope_store(
        &self,
        batch: &mut Batch<'_>,
        shape: &AttnShape,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        rows: &Tensor,
        cos_sin: &Tensor,
        qk_norm: Option<(&Tensor, &Tensor, f32)>,
        cache_k: &Tensor,
        cache_v: &Tensor,
    ) -> Result<()> {
        const OP: &str = "llm rope";
        shape.check(OP)?;
        let t = check_rows(rows, OP)?;
        let (qd, kvd) = (shape.n_head * shape.head_dim, shape.n_head_kv * shape.head_dim);
        for (x, w, name) in [(q, qd, "q"), (k, kvd, "k"), (v, kvd, "v")] {
            if matrix(x, DType::F32, OP, name)? != (t, w) || x.offset != 0 {
                return Err(invalid!("{OP}: {name} is {:?}, expected [{t}, {w}] at its buffer's start", x.shape));
            }
        }
        shape.check_cos_sin(OP, cos_sin)?;
        shape.check_caches(OP, cache_k, cache_v)?;
        let (qn, kn, eps) = match qk_norm {
            Some((qn, kn, eps)) => {
                vector(qn, DType::F32, shape.head_dim, OP, "q norm")?;
                vector(kn, DType::F32, shape.head_dim, OP, "k norm")?;
                (qn, kn, eps)
            }
            None => (q, q, 0.0),
        };
        if t == 0 {
            return Ok(());
        }
        let mut defines = shape.defines();
        if qk_norm.is_some() {
            defines.push("QK_NORM".into());
        }
        let key = format!("llm rope {}", defines.join(" "));
        let kernel = self.kernels.get(&key, 128, 1, || source(None, &defines, include_str!("kernels/llm_rope.glsl")))?;
        let all = [q, k, v, rows, cos_sin, cache_k, cache_v, qn, kn];
        let mut p = ParamBlock::new(OP);
        p.addrs(all.map(|t| t.buffer.address()));
        p.i32s([t, shape.ctx, shape.slots])?.i32(eps.to_bits() as i32)?;
        for b in all {
            batch.keep(&b.buffer);
        }
        let heads = shape.n_head + 2 * shape.n_head_kv;
        batch.dispatch_grid(&kernel, p.bytes(), (t * heads) as u32, [t.min(65535) as u32, heads as u32, 1])
    }

    /// The split attention's scratch for a step of `t` rows whose largest position is
    /// `max_pos` (see [`AttnScratch`]), reusable by every layer of the step (each layer's
    /// attention finishes before the next starts, and leaves the counters zero).
    pub fn llm_attention_scratch(&self, shape: &AttnShape, t: usize, max_pos: usize) -> Result<AttnScratch> {
        let chunks = max_pos.min(shape.ctx.saturating_sub(1)) / 64 + 1;
        let floats = t as u64 * shape.n_head as u64 * chunks as u64 * (shape.head_dim as u64 + 2);
        // The kernels index it with 32-bit offsets.
        if floats > u32::MAX as u64 {
            return Err(invalid!("llm attention: a step of {t} rows up to position {max_pos} needs {floats} scratch values; feed fewer rows per step"));
        }
        let partials = self.empty(DType::F32, &[t, shape.n_head, chunks, shape.head_dim + 2])?;
        // Zeros, queued on the stream ahead of the work that reads them (or written in place).
        let counters = self.upload(DType::U32, &[t, shape.n_head_kv], &vec![0u8; 4 * t * shape.n_head_kv])?;
        Ok(AttnScratch { partials, counters })
    }

    /// Causal attention: `out[t, h] = Σ_{j ≤ pos} softmax_j(q[t, h] · k_j · scale) · v_j` over
    /// row `t`'s session cache (query head `h` reads kv head `h / (n_head / n_head_kv)`). `q`
    /// and `out` `[T, n_head · head_dim]` f32; `scratch` from [`Context::llm_attention_scratch`]
    /// for the step's largest position. The keys in chunks of 64, each chunk its own
    /// workgroup, then the chunks combined in order (llm_attention_split.glsl): a dispatch of
    /// its own, or, in decode steps, by each row's last chunk's workgroup.
    #[allow(clippy::too_many_arguments)]
    pub fn record_llm_attention(&self, batch: &mut Batch<'_>, shape: &AttnShape, q: &Tensor, rows: &Tensor, cache_k: &Tensor, cache_v: &Tensor, scale: f32, scratch: &AttnScratch, out: &Tensor) -> Result<()> {
        // Decode steps (few rows) run 64 invocations per query head, the chunk's values staged
        // for a kv head's heads; steps of many rows (a prompt chunk) one workgroup of 64 for
        // all of a kv head's heads, a row at a time (rows per workgroup 1 unless
        // NX_VULKAN_LLM_ATTN_ROWS says otherwise, for measurements). Same bits either way.
        let t = rows.shape().first().copied().unwrap_or(0);
        let way = if t >= ATTN_BLOCKED_FROM {
            let r = match std::env::var("NX_VULKAN_LLM_ATTN_ROWS") {
                Ok(v) => v.parse::<usize>().map_err(|_| invalid!("NX_VULKAN_LLM_ATTN_ROWS={v:?}: expected a positive integer"))?,
                Err(_) => 1,
            };
            AttnWay::Blocked { rows_per_group: r }
        } else {
            // NX_VULKAN_LLM_COMBINE=separate: the combine dispatch (measurements)
            AttnWay::Wide { fused_combine: std::env::var("NX_VULKAN_LLM_COMBINE").as_deref() != Ok("separate") }
        };
        self.record_llm_attention_as(batch, shape, q, rows, cache_k, cache_v, scale, scratch, out, way)
    }

    /// [`Context::record_llm_attention`] run the given way: a performance choice only — the
    /// tests check that every way gives the same bits.
    #[allow(clippy::too_many_arguments)]
    pub fn record_llm_attention_as(&self, batch: &mut Batch<'_>, shape: &AttnShape, q: &Tensor, rows: &Tensor, cache_k: &Tensor, cache_v: &Tensor, scale: f32, scratch: &AttnScratch, out: &Tensor, way: AttnWay) -> Result<()> {
        const OP: &str = "llm attention";
        shape.check(OP)?;
        let t = check_rows(rows, OP)?;
        let qd = shape.n_head * shape.head_dim;
        if matrix(q, DType::F32, OP, "q")? != (t, qd) || q.offset != 0 {
            return Err(invalid!("{OP}: q is {:?}, expected [{t}, {qd}]", q.shape));
        }
        shape.check_caches(OP, cache_k, cache_v)?;
        check_dense_output(out, DType::F32, &[t, qd], OP)?;
        if out.offset != 0 || !scale.is_finite() {
            return Err(invalid!("{OP}: out must start at its buffer's start and the scale be finite"));
        }
        if t == 0 {
            return Ok(());
        }
        // Chunks of the step's longest row (the scratch's third axis); a row past a chunk's
        // start skips it on the device.
        let partials = &scratch.partials;
        if scratch.counters.dtype != DType::U32 || scratch.counters.shape != [t, shape.n_head_kv] || scratch.counters.offset != 0 {
            return Err(invalid!("{OP}: scratch counters are {} {:?}, expected [{t}, {}] u32 (llm_attention_scratch)", scratch.counters.dtype, scratch.counters.shape, shape.n_head_kv));
        }
        let chunks = match partials.shape() {
            [pt, ph, c, pd] if (*pt, *ph, *pd) == (t, shape.n_head, shape.head_dim + 2) && partials.dtype == DType::F32 && partials.offset == 0 => *c,
            other => return Err(invalid!("{OP}: scratch is {other:?}, expected [{t}, {}, chunks, {}] f32 (llm_attention_scratch)", shape.n_head, shape.head_dim + 2)),
        };
        let mut split_defines = shape.defines();
        let (rows_per_group, group) = match way {
            AttnWay::Blocked { rows_per_group: 0 } => return Err(invalid!("{OP}: rows_per_group must be at least 1")),
            AttnWay::Blocked { rows_per_group } => (rows_per_group, 64),
            AttnWay::Wide { fused_combine } => {
                split_defines.push("WIDE".into());
                split_defines.push(format!("SK {}", shape.staged_keys(self.caps.max_shared_memory as usize)?));
                if fused_combine {
                    split_defines.push("FUSED_COMBINE".into());
                }
                (1, 64 * (shape.n_head / shape.n_head_kv) as u32)
            }
        };
        let fused_combine = matches!(way, AttnWay::Wide { fused_combine: true });
        let key = format!("llm attention split {}", split_defines.join(" "));
        let split = self.kernels.get(&key, group, 1, || source(None, &split_defines, include_str!("kernels/llm_attention_split.glsl")))?;
        // The combine is the same for both ways.
        let mut defines = shape.defines();
        defines.push("COMBINE".into());
        let key = format!("llm attention combine {}", defines.join(" "));
        let combine = self.kernels.get(&key, 64, 1, || source(None, &defines, include_str!("kernels/llm_attention_split.glsl")))?;
        let all = [q, rows, cache_k, cache_v, partials, out, &scratch.counters];
        let mut p = ParamBlock::new(OP);
        p.addrs(all.map(|t| t.buffer.address()));
        p.i32s([t, shape.ctx, shape.slots])?.i32(scale.to_bits() as i32)?.i32s([chunks, rows_per_group])?;
        for b in all {
            batch.keep(&b.buffer);
        }
        let blocks_x = t.div_ceil(rows_per_group).min(65535) as u32;
        batch.dispatch_grid(&split, p.bytes(), (t * shape.n_head * chunks) as u32, [blocks_x, shape.n_head_kv as u32, chunks as u32])?;
        if fused_combine {
            return Ok(());
        }
        let rows_x = t.min(65535) as u32;
        batch.dispatch_grid(&combine, p.bytes(), (t * shape.n_head) as u32, [rows_x, shape.n_head as u32, 1])
    }
}

#[cfg(test)]
mod tests {
    use super::f16_bits_to_f32_exact;

    /// The probe's reference is every f16's exact value: the `half` crate's conversion for
    /// all non-NaN values, and for NaNs the same sign and payload without a quiet bit added.
    #[test]
    fn the_f16_reference_is_exact_for_every_value() {
        for bits in 0..=u16::MAX {
            let got = f16_bits_to_f32_exact(bits);
            let h = half::f16::from_bits(bits);
            if h.is_nan() {
                assert_eq!(got & 0xFF80_0000 & !0x8000_0000, 0x7F80_0000, "{bits:#06x}: not a NaN");
                assert_eq!(got >> 31, (bits >> 15) as u32, "{bits:#06x}: sign");
                assert_eq!(got & 0x7F_FFFF, ((bits & 0x3FF) as u32) << 13, "{bits:#06x}: payload");
            } else {
                assert_eq!(got, h.to_f32().to_bits(), "{bits:#06x}");
            }
        }
    }
}
