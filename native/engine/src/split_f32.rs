//! Split-f32 GEMM ([`DotPrecision::SplitF32`]): an f32 product on f16 tensor cores.
//!
//! Each f32 operand is scaled by a power of two per row of A and per column of B (so its
//! largest finite magnitude lies in [2^14, 2^15), well inside f16's range) and split into two
//! f16 parts, `x·2^e = hi + lo` with `hi = f16(x·2^e)` and `lo = f16(x·2^e − hi)` (both to
//! nearest even; the subtraction is exact in f32). Then
//!
//! `A·B ≈ 2^-(ea+eb) · (Ahi·Bhi + Ahi·Blo + Alo·Bhi)`
//!
//! — three f16 products accumulated in f32 on the device's cooperative matrices; the dropped
//! `Alo·Blo` and the rounding of `lo` are each about 2^-22 of a product, below what f32
//! accumulation over a few hundred terms already loses (tests/split_f32.rs measures the
//! error beside the SGEMM's on the same inputs). The parts are laid out along a threefold K —
//! A's `[B, M, 3·Kp]` as `[hi | lo | hi]`, B's `[B, 3·Kp, N]` as `[lo; hi; hi]` (Kp = K
//! rounded up to 8, zero-padded, so every row is whole 16-byte words) — so that ONE plain GEMM
//! over 3·Kp computes the three products (the `concat` form and the fallback below; the
//! default fused kernel reads the first two blocks of the same layout). The
//! small products come first: summed before the large ones, they lose less to the running
//! sum's rounding (sequential f32 sums on random data, K = 4099: 8.4e-8 of Σ|ab| in this
//! order, 2.7e-7 with the large products first, 1.1e-7 for a plain f32 sum). Where the
//! device has no cooperative matrices the parts are written as f32 (their values exactly) and
//! the f32 tiled kernel multiplies them (products exact, f32 accumulation): the same split,
//! checked in CI on lavapipe.
//!
//! Dispatches: a fill of the scale words, the max pass over each operand (largest finite
//! |x| per row of A / column of B, as bits, by atomic max), the split pass over each
//! operand, the GEMM, and the unscaling of the output in place.
//!
//! On cooperative matrices the default multiplies both parts of each operand from one
//! staging per K step (`CoopCfg::split`, a K tile of 32): a tile's products (small first)
//! are summed on the tensor cores from zero and each tile's sum is added to the accumulator
//! outside them, rounding to nearest — NVIDIA's tensor cores truncate as they accumulate,
//! which on the H200 gave ten times the SGEMM's error when the whole sum stayed inside.
//! `NX_VULKAN_SPLIT_F32` = `fused1` (one tensor-core accumulator throughout), `fused2` (each
//! 16-step's large products added outside) and `concat` (one f16 GEMM over the threefold K)
//! are the variants measured against it (bench/README.md "Stop 28").
//!
//! Special values: parts cannot carry ±Inf or NaN (Inf·hi + Inf·lo is NaN where lo is zero or
//! of the other sign), so the max pass also flags each row of A and column of B holding one,
//! their parts are zero, and the unscaling pass computes every output a flagged row or column
//! reaches as a plain f32 dot of the operands (IEEE's rules; one invocation walks K: slow,
//! and only where such values are). They never set a scale; a row or column without a finite
//! non-zero value keeps scale 1. Scales are clamped to 2^±126: a row whose largest magnitude
//! is below 2^-112 keeps fewer bits (its parts become f16 subnormals). Denormal inputs are
//! scaled from their bits (not read as floats), so devices that flush f32 denormals (the
//! H200) keep them, unlike their SGEMM; a denormal output may still be flushed there.

use crate::dtype::DType;
use crate::elementwise::Scalar;
use crate::error::{invalid, Result};
use crate::matmul::{split_f32_kernel, MatmulKernel, View3};
use crate::ops::check_dense_output;
use crate::params::ParamBlock;
use crate::submit::Batch;
use crate::tensor::Tensor;
use crate::Context;

/// Rows (or columns) of one max-pass tile, and its width along the contiguous axis.
const TILE_ROWS: usize = 16;
const TILE_COLS: usize = 256;

/// How an operand's scale index and parts layout follow its view `[B, D1, D2]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// A, viewed `[B, M, K]`: a scale per (b, m); parts `[B, M, 3·Kp]` as `[hi | lo | hi]`.
    Rows,
    /// B, viewed `[B, K, N]`: a scale per (b, n); parts `[B, 3·Kp, N]` as `[lo; hi; hi]`.
    Cols,
}

/// The exponent a scale word (the largest finite |x| as bits) gives: x·2^e has its largest
/// magnitude in [2^14, 2^15); 0 where there is none; clamped to ±126 (2^e a normal f32).
const SCALE_EXP: &str = "
int split_exp(uint mx) {
    if (mx == 0u) return 0;
    int ex = int(mx >> 23);
    int fl = ex != 0 ? ex - 127 : findMSB(mx) - 149;
    return clamp(14 - fl, -126, 126);
}
float pow2(int e) { return uintBitsToFloat(uint(e + 127) << 23); }
";

/// The operand's view and the parameters both passes read: addresses (x, parts, scale
/// words), then B, D1, D2, offset, strides (b, 1, 2), Kp, the scale words' base index, and
/// where the non-finite flags start (a flag per scale word, set where the row or column
/// holds an Inf or NaN).
const PARAMS: &str = "
    ParamsI32 p = ParamsI32(pc.params + 24ul);
    int Bt = p.v[0]; int D1 = p.v[1]; int D2 = p.v[2];
    int off = p.v[3]; int s0 = p.v[4]; int s1 = p.v[5]; int s2 = p.v[6];
    int KP = p.v[7]; int ebase = p.v[8]; int fbase = p.v[9];
    uint64_t addrX = ParamsU64(pc.params).v[0];
    uint64_t addrP = ParamsU64(pc.params).v[1];
    uint64_t addrE = ParamsU64(pc.params).v[2];
";

/// The max pass: tiles of 16 × 256 of the view (256 along D2, its contiguous axis when the
/// operand is stored as usual); each invocation takes 16 elements — for `Rows` 16 of one row
/// (16 invocations per row, then one shared atomic each and one global per row), for `Cols`
/// one column over the tile's 16 rows (one global atomic per column).
fn max_source(side: Side) -> String {
    let mut s = crate::kernels::numeric_prelude();
    s.push_str("layout(local_size_x = 256) in;\nshared uint smax[16];\nvoid main() {\n");
    s.push_str(PARAMS);
    s.push_str(
        "    int tid = int(gl_LocalInvocationID.x);
    int TX = (D2 + 255) / 256; int TY = (D1 + 15) / 16; int tiles = Bt * TX * TY;
    for (int t = int(gl_WorkGroupID.x); t < tiles; t += int(gl_NumWorkGroups.x)) {
        int tx = t % TX; int ty = (t / TX) % TY; int b = t / (TX * TY);
        uint mx = 0u;
",
    );
    match side {
        Side::Rows => s.push_str(
            "        if (tid < 16) smax[tid] = 0u;
        barrier();
        int r = ty * 16 + (tid >> 4);
        [[unroll]] for (int i = 0; i < 16; i++) {
            int c = tx * 256 + (tid & 15) + 16 * i;
            if (r < D1 && c < D2) {
                uint a = BufU32(addrX).v[off + b * s0 + r * s1 + c * s2] & 0x7FFFFFFFu;
                if (a < 0x7F800000u) mx = max(mx, a);
                else BufU32(addrE).v[fbase + ebase + b * D1 + r] = 1u;
            }
        }
        if (mx != 0u) atomicMax(smax[tid >> 4], mx);
        barrier();
        if (tid < 16 && ty * 16 + tid < D1 && smax[tid] != 0u) atomicMax(BufU32(addrE).v[ebase + b * D1 + ty * 16 + tid], smax[tid]);
        barrier();
",
        ),
        Side::Cols => s.push_str(
            "        int c = tx * 256 + tid;
        [[unroll]] for (int i = 0; i < 16; i++) {
            int r = ty * 16 + i;
            if (r < D1 && c < D2) {
                uint a = BufU32(addrX).v[off + b * s0 + r * s1 + c * s2] & 0x7FFFFFFFu;
                if (a < 0x7F800000u) mx = max(mx, a);
                else BufU32(addrE).v[fbase + ebase + b * D2 + c] = 1u;
            }
        }
        if (mx != 0u) atomicMax(BufU32(addrE).v[ebase + b * D2 + c], mx);
",
        ),
    }
    s.push_str("    }\n}\n");
    s
}

/// The split pass: one invocation per element of the padded view (K padded to Kp with
/// zeros), its three part values written where the layout of `side` puts them, as f16 bits
/// or (`f32_parts`, for the fallback GEMM) as the f32 values of those f16s.
fn split_source(side: Side, f32_parts: bool) -> String {
    let mut s = crate::kernels::numeric_prelude();
    s.push_str(include_str!("kernels/encoder_math.glsl"));
    s.push_str(SCALE_EXP);
    s.push_str("layout(local_size_x = 256) in;\nvoid main() {\n");
    s.push_str(PARAMS);
    let (d1p, d2p, scale_at, lo_block) = match side {
        Side::Rows => ("D1", "KP", "b * D1 + i1", 1),
        Side::Cols => ("KP", "D2", "b * D2 + i2", 0),
    };
    let out_at = match side {
        Side::Rows => "((b * D1 + i1) * 3 + blk) * KP + i2",
        Side::Cols => "((b * 3 + blk) * KP + i1) * D2 + i2",
    };
    let store = if f32_parts {
        "BufU32(addrP).v[o] = floatBitsToUint(enc_f16_to_f32(v));"
    } else {
        "BufU16(addrP).v[o] = uint16_t(v);"
    };
    s.push_str(&format!(
        "    uint E1 = uint({d1p}); uint E2 = uint({d2p});
    uint total = uint(Bt) * E1 * E2;
    for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * 256u) {{
        int i2 = int(i % E2); int i1 = int((i / E2) % E1); int b = int(i / (E1 * E2));
        uint hi = 0u, lo = 0u;
        if (i1 < D1 && i2 < D2) {{
            int e = split_exp(BufU32(addrE).v[ebase + {scale_at}]);
            uint xb = BufU32(addrX).v[off + b * s0 + i1 * s1 + i2 * s2];
            precise float xs;
            if ((xb & 0x7F800000u) != 0u) {{
                xs = uintBitsToFloat(xb) * pow2(e);
            }} else {{
                // a denormal (or zero) input scaled from its bits, not read as a float: devices
                // that flush denormal operands (the H200) would read it as zero
                precise float mag = e >= -37 ? float(xb & 0x7FFFFFu) * pow2(e - 89) * pow2(-60) : 0.0;
                xs = (xb >> 31) != 0u ? -mag : mag;
            }}
            hi = enc_f32_to_f16(floatBitsToUint(xs));
            if ((xb & 0x7F800000u) != 0x7F800000u) {{
                precise float rem = xs - enc_f16_to_f32(hi);
                lo = enc_f32_to_f16(floatBitsToUint(rem));
            }} else {{
                // Inf and NaN: zero parts; the unscaling pass computes the outputs they reach
                hi = 0u;
            }}
        }}
        [[unroll]] for (int blk = 0; blk < 3; blk++) {{
            uint v = blk == {lo_block} ? lo : hi;
            uint o = uint({out_at});
            {store}
        }}
    }}
}}
"
    ));
    s
}

/// The unscaling, in place on the `[B, M, N]` output: `c · 2^-ea[b, m] · 2^-eb[b, n]` (two
/// exact multiplications by powers of two, short of underflow); NaN canonical.
fn unscale_source() -> String {
    let mut s = crate::kernels::numeric_prelude();
    s.push_str(SCALE_EXP);
    s.push_str(
        "layout(local_size_x = 256) in;
void main() {
    ParamsI32 p = ParamsI32(pc.params + 32ul);
    int Bt = p.v[0]; int M = p.v[1]; int N = p.v[2]; int eb = p.v[3]; int fl = p.v[4]; int K = p.v[5];
    int offA = p.v[6]; int sAb = p.v[7]; int sAm = p.v[8]; int sAk = p.v[9];
    int offB = p.v[10]; int sBb = p.v[11]; int sBk = p.v[12]; int sBn = p.v[13];
    uint64_t addrC = ParamsU64(pc.params).v[0];
    uint64_t addrE = ParamsU64(pc.params).v[1];
    uint64_t addrA = ParamsU64(pc.params).v[2];
    uint64_t addrB = ParamsU64(pc.params).v[3];
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * 256u) {
        uint n = i % uint(N); uint bm = i / uint(N); uint b = bm / uint(M); uint m = bm % uint(M);
        if ((BufU32(addrE).v[uint(fl) + bm] | BufU32(addrE).v[uint(fl + eb) + b * uint(N) + n]) != 0u) {
            // an Inf or NaN in the row or column: this output as a plain f32 dot of the
            // operands (IEEE's rules for Inf and NaN; rare, so one invocation walks K)
            precise float acc = 0.0;
            for (int k = 0; k < K; k++) {
                precise float pr = uintBitsToFloat(BufU32(addrA).v[offA + int(b) * sAb + int(m) * sAm + k * sAk])
                    * uintBitsToFloat(BufU32(addrB).v[offB + int(b) * sBb + k * sBk + int(n) * sBn]);
                acc = acc + pr;
            }
            BufU32(addrC).v[i] = isnan(acc) ? 0x7FC00000u : floatBitsToUint(acc);
            continue;
        }
        precise float x = uintBitsToFloat(BufU32(addrC).v[i]);
        // 2^-(ea + eb) in two equal steps: no intermediate overflow or underflow that the
        // result itself does not have
        int e = -(split_exp(BufU32(addrE).v[bm]) + split_exp(BufU32(addrE).v[uint(eb) + b * uint(N) + n]));
        int h = e / 2;
        x = x * pow2(h);
        x = x * pow2(e - h);
        BufU32(addrC).v[i] = isnan(x) ? 0x7FC00000u : floatBitsToUint(x);
    }
}
",
    );
    s
}

/// How the parts meet on cooperative matrices: `Some(1 | 2 | 3)` multiplies both parts of
/// each operand from one staging per K step (`hi·lo + lo·hi + hi·hi`; `CoopCfg::split` says
/// where each sum runs; 3, the default, sums a K tile on the tensor cores from zero and adds
/// the tiles outside them), `None` runs one f16 GEMM over the threefold K.
/// `NX_VULKAN_SPLIT_F32` = `concat`, `fused1`, `fused2` or `fused3` chooses (for measurements;
/// see `CoopCfg::split` for 3).
fn fused_variant() -> Option<u8> {
    match std::env::var("NX_VULKAN_SPLIT_F32").as_deref() {
        Ok("concat") => None,
        Ok("fused1") => Some(1),
        Ok("fused3") => Some(3),
        Ok("fused2") => Some(2),
        _ => Some(3),
    }
}

impl Context {
    /// The split-f32 dot of `a` (viewed `[bsz, m, k]` as `va`) and `b` (`[bsz, k, n]` as `vb`)
    /// into `out` (a dense `[bsz, m, n]` f32 tensor): see the module docs. Called by
    /// `record_dot` for [`DotPrecision::SplitF32`](crate::matmul::DotPrecision::SplitF32).
    pub(crate) fn record_split_f32_gemm(&self, batch: &mut Batch<'_>, a: &(Tensor, View3), b: &(Tensor, View3), out: &Tensor, [bsz, m, n, k]: [usize; 4]) -> Result<()> {
        check_dense_output(out, DType::F32, &out.shape, "split-f32 dot")?;
        if a.0.dtype != DType::F32 || b.0.dtype != DType::F32 {
            return Err(invalid!("split-f32 dot: operands must be f32 (got {} and {})", a.0.dtype, b.0.dtype));
        }
        if bsz * m * n == 0 {
            return Ok(());
        }
        let kp = k.div_ceil(8).max(1) * 8;
        let gemm = split_f32_kernel(&self.caps);
        let parts_type = if matches!(gemm, MatmulKernel::CoopMat { .. }) { DType::F16 } else { DType::F32 };
        let parts_a = self.empty(parts_type, &[bsz, m, 3 * kp])?;
        let parts_b = self.empty(parts_type, &[bsz, 3 * kp, n])?;
        // scale words: A's (b, m) then B's (b, n); then as many non-finite flags
        let words = self.empty(DType::U32, &[2 * bsz * (m + n)])?;
        for t in [&a.0, &b.0, &parts_a, &parts_b, &words, out] {
            batch.keep(&t.buffer);
        }
        self.record_full(batch, Scalar::U(0), &words)?;
        let sides = [(Side::Rows, a, &parts_a, [bsz, m, k], 0), (Side::Cols, b, &parts_b, [bsz, k, n], bsz * m)];
        let params: Vec<Vec<u8>> = sides
            .iter()
            .map(|(_, (t, v), parts, dims, ebase)| {
                let mut p = ParamBlock::new("split-f32 dot");
                p.addrs([t.buffer.address(), parts.buffer.address(), words.buffer.address()]);
                p.i32s(*dims)?.i32(v.offset)?.i32s(v.s)?.i32s([kp, *ebase, bsz * (m + n)])?;
                Ok(p.bytes().to_vec())
            })
            .collect::<Result<_>>()?;
        let max = self.caps.max_workgroup_count[0].min(65535) as usize;
        for (i, (side, _, _, [bt, d1, d2], _)) in sides.iter().enumerate() {
            let kern = self.kernels.get(&format!("split-f32 max {side:?}"), 256, 1, || max_source(*side))?;
            let tiles = bt * d1.div_ceil(TILE_ROWS) * d2.div_ceil(TILE_COLS);
            let groups = [tiles.min(max) as u32, 1, 1];
            let count = u32::try_from(bt * d1 * d2).unwrap_or(u32::MAX);
            // B's max pass touches none of what A's writes: no barrier between them
            if i == 0 {
                batch.dispatch_grid(&kern, &params[i], count, groups)?;
            } else {
                batch.dispatch_grid_concurrent(&kern, &params[i], count, groups)?;
            }
        }
        for (i, (side, ..)) in sides.iter().enumerate() {
            let f32_parts = parts_type == DType::F32;
            let kern = self.kernels.get(&format!("split-f32 split {side:?} f32 parts {f32_parts}"), 256, 1, || split_source(*side, f32_parts))?;
            let count = (bsz * kp * if i == 0 { m } else { n }) as u64;
            let groups = [count.div_ceil(256).min(max as u64) as u32, 1, 1];
            let count = u32::try_from(count).map_err(|_| invalid!("split-f32 dot: {count} elements exceed 2^32 in one operand"))?;
            if i == 0 {
                batch.dispatch_grid(&kern, &params[i], count, groups)?;
            } else {
                batch.dispatch_grid_concurrent(&kern, &params[i], count, groups)?;
            }
        }
        if let (MatmulKernel::CoopMat { .. }, Some(variant)) = (gemm, fused_variant()) {
            if self.record_coop_split(batch, &parts_a, &parts_b, out, [bsz, m, n, kp], variant).is_ok() {
                return self.record_unscale(batch, out, &words, a, b, [bsz, m, n, k]);
            }
        }
        let va = View3 { offset: 0, s: [(m * 3 * kp) as isize, (3 * kp) as isize, 1] };
        let vb = View3 { offset: 0, s: [(3 * kp * n) as isize, n as isize, 1] };
        // (the f32 fallback may split K across workgroups as the SGEMM does for few tiles)
        self.record_gemm(batch, gemm, &(parts_a, va), &(parts_b, vb), out, [bsz, m, n, 3 * kp], true)?;
        self.record_unscale(batch, out, &words, a, b, [bsz, m, n, k])
    }

    /// The unscaling (and the outputs an Inf or NaN reaches, from the operands `a` and `b`).
    fn record_unscale(&self, batch: &mut Batch<'_>, out: &Tensor, words: &Tensor, a: &(Tensor, View3), b: &(Tensor, View3), [bsz, m, n, k]: [usize; 4]) -> Result<()> {
        let mut p = ParamBlock::new("split-f32 dot");
        p.addrs([out.buffer.address(), words.buffer.address(), a.0.buffer.address(), b.0.buffer.address()]);
        p.i32s([bsz, m, n, bsz * m, bsz * (m + n), k])?.i32(a.1.offset)?.i32s(a.1.s)?.i32(b.1.offset)?.i32s(b.1.s)?;
        let kern = self.kernels.get("split-f32 unscale", 256, 1, unscale_source)?;
        batch.dispatch(&kern, p.bytes(), (bsz * m * n) as u64)
    }
}
