//! General convolution (Nx.conv/3): strides, (lo, hi) padding (negative crops), input and
//! kernel dilation, feature and batch groups, input/kernel/output permutations, any tensor
//! views, one invocation per output element. `record_conv` records it into a caller's batch and
//! writes a caller's output (a new contiguous tensor of [`conv_output_shape`]).
//!
//! **Semantics** (Nx 0.7.2 `Nx.BinaryBackend.conv/4`, bit for bit):
//! - The input (after `input_permutation`, laid out `[N, C, spatial...]`) is padded with zeros:
//!   `input_dilation - 1` zeros between elements, then `(lo, hi)` at the edges; the kernel
//!   (after `kernel_permutation`, `[F, C / feature_groups, spatial...]`) is dilated with zeros
//!   likewise. Output position `p` along a spatial axis reads padded positions `p*stride + j`,
//!   `j` over the dilated kernel.
//! - Every term is a product `x * y` of the padded input and the dilated kernel — the zeros
//!   included, so `0 * Inf` gives NaN and signed zeros come out as BinaryBackend's do. Terms
//!   are taken input channel by input channel, each over the dilated kernel window in row-major
//!   order, and folded `acc = term + acc` from the first term (BinaryBackend's
//!   `Enum.reduce(&+/2)`), in f64 when either operand is a float (rounded once to the output
//!   type, NaN canonical) and exactly in 64-bit integers when both are integers (BinaryBackend
//!   sums integer products exactly, with bignums; we wrap at 64 bits, which differs only when
//!   the exact sum leaves the 64-bit range), then converted once to the output type.
//! - Feature groups: filter `f` reads input channels `g*Cg .. (g+1)*Cg` with
//!   `g = f / (F / feature_groups)`. Batch groups: output batch row `i`, filter `f` read input
//!   item `i + (f / (F / batch_groups)) * (N / batch_groups)`.
//! - The output `[N / batch_groups, F, spatial...]` is transposed the way Nx.conv transposes it:
//!   axis `k` of that layout is axis `output_permutation[k]` of the result.
//! - The output type is the caller's (Nx gives `merge(input, kernel) |> to_floating`); an
//!   integer output is allowed only when both operands are integers (wrapped).

use crate::dtype::{DType, Kind};
use crate::elementwise::{buf_type, decode, encode, wrap, Expr};
use crate::error::{invalid, Result};
use crate::ops::check_dense_output;
use crate::params::ParamBlock;
use crate::reduce::to_domain;
use crate::submit::Batch;
use crate::tensor::{Tensor, MAX_ELEMENTS};
use crate::Context;
use std::fmt::Write;

/// Nx.conv's options, spatial entries in spatial order (after the input permutation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvOptions {
    pub strides: Vec<usize>,
    pub padding: Vec<(i64, i64)>,
    pub input_dilation: Vec<usize>,
    pub kernel_dilation: Vec<usize>,
    pub feature_group_size: usize,
    pub batch_group_size: usize,
    pub input_permutation: Vec<usize>,
    pub kernel_permutation: Vec<usize>,
    pub output_permutation: Vec<usize>,
}

impl ConvOptions {
    /// Nx's defaults for tensors of rank `rank` (`rank - 2` spatial axes): stride 1, no padding,
    /// no dilation, one group, identity permutations.
    pub fn new(rank: usize) -> ConvOptions {
        let s = rank.saturating_sub(2);
        let id: Vec<usize> = (0..rank).collect();
        ConvOptions {
            strides: vec![1; s],
            padding: vec![(0, 0); s],
            input_dilation: vec![1; s],
            kernel_dilation: vec![1; s],
            feature_group_size: 1,
            batch_group_size: 1,
            input_permutation: id.clone(),
            kernel_permutation: id.clone(),
            output_permutation: id,
        }
    }
}

const LOCAL: u32 = 64;

fn check_perm(p: &[usize], rank: usize, what: &str) -> Result<()> {
    let mut seen = vec![false; rank];
    if p.len() != rank || p.iter().any(|&a| a >= rank || std::mem::replace(&mut seen[a], true)) {
        return Err(invalid!("conv {what} {p:?} is not a permutation of 0..{rank}"));
    }
    Ok(())
}

/// What the kernel needs after validation (shapes after the input/kernel permutations).
struct Plan {
    n: usize,
    f: usize,
    cg: usize,
    /// The output in `[N / bg, F, spatial...]` order.
    untransposed: Vec<usize>,
    /// The result's shape (Nx.conv's, after the output permutation).
    shape: Vec<usize>,
}

fn plan(input: &[usize], kernel: &[usize], o: &ConvOptions) -> Result<Plan> {
    let rank = input.len();
    if rank < 3 || kernel.len() != rank {
        return Err(invalid!("conv needs an input and a kernel of equal rank >= 3, got shapes {input:?} and {kernel:?}"));
    }
    let s = rank - 2;
    check_perm(&o.input_permutation, rank, "input_permutation")?;
    check_perm(&o.kernel_permutation, rank, "kernel_permutation")?;
    check_perm(&o.output_permutation, rank, "output_permutation")?;
    if o.strides.len() != s || o.padding.len() != s || o.input_dilation.len() != s || o.kernel_dilation.len() != s {
        return Err(invalid!("conv with {s} spatial axes needs {s} strides, paddings, input and kernel dilations; got {o:?}"));
    }
    if o.strides.iter().chain(&o.input_dilation).chain(&o.kernel_dilation).any(|&v| v == 0) {
        return Err(invalid!("conv strides and dilations must be positive, got {o:?}"));
    }
    let inp: Vec<usize> = o.input_permutation.iter().map(|&p| input[p]).collect();
    let ker: Vec<usize> = o.kernel_permutation.iter().map(|&p| kernel[p]).collect();
    let (fg, bg) = (o.feature_group_size, o.batch_group_size);
    let (n, c, f, cg) = (inp[0], inp[1], ker[0], ker[1]);
    if fg == 0 || bg == 0 || (fg != 1 && bg != 1) {
        return Err(invalid!("conv groups: feature_group_size {fg} and batch_group_size {bg} must be positive and one of them 1"));
    }
    if n % bg != 0 || f % fg != 0 || f % bg != 0 || c != cg * fg {
        return Err(invalid!(
            "conv groups do not fit: input {inp:?}, kernel {ker:?}, feature_group_size {fg}, batch_group_size {bg} (need N % bg == 0, F % groups == 0, C == kernel C * fg)"
        ));
    }
    let mut untransposed = vec![n / bg, f];
    for d in 0..s {
        let dilated = if inp[d + 2] == 0 { 0 } else { (inp[d + 2] as i64 - 1) * o.input_dilation[d] as i64 + 1 };
        let padded = o.padding[d].0 + dilated + o.padding[d].1;
        let kd = if ker[d + 2] == 0 { 0 } else { (ker[d + 2] as i64 - 1) * o.kernel_dilation[d] as i64 + 1 };
        if padded < kd {
            return Err(invalid!(
                "conv kernel {ker:?} (dilated {:?}) does not fit input {inp:?} padded by {:?} (input dilation {:?})",
                o.kernel_dilation,
                o.padding,
                o.input_dilation
            ));
        }
        untransposed.push(((padded - kd) / o.strides[d] as i64 + 1) as usize);
    }
    // result axis i is untransposed axis inv[i]
    let mut inv = vec![0; rank];
    for (k, &p) in o.output_permutation.iter().enumerate() {
        inv[p] = k;
    }
    let shape = inv.iter().map(|&k| untransposed[k]).collect();
    Ok(Plan { n, f, cg, untransposed, shape })
}

/// The shape Nx.conv gives for these operands and options.
pub fn conv_output_shape(input: &[usize], kernel: &[usize], opts: &ConvOptions) -> Result<Vec<usize>> {
    Ok(plan(input, kernel, opts)?.shape)
}

/// Checks the operand and result types and the options (in that order); returns the plan.
fn checked_plan(input: &Tensor, kernel: &Tensor, opts: &ConvOptions, out: DType) -> Result<Plan> {
    crate::window::check_real("conv", &[input.dtype, kernel.dtype, out])?;
    let pl = plan(&input.shape, &kernel.shape, opts)?;
    if out.is_integer() && (input.dtype.is_float() || kernel.dtype.is_float()) {
        return Err(invalid!("conv of {} and {} cannot be written as {out}: use a float output type", input.dtype, kernel.dtype));
    }
    Ok(pl)
}

/// How a conv is computed. Both give the same bits (BinaryBackend's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvAlgorithm {
    /// One invocation per output element, walking its channels and window: any operand types,
    /// groups and layouts, no scratch memory. Slow for large convs (each invocation re-reads
    /// its window from global memory: a ResNet 3×3 stage ran at 0.01× cuDNN on the H200).
    Direct,
    /// For float-summed convs without batch groups: the dilated kernel as an f64 matrix
    /// `[F, Cg·W]` (`W` the dilated window's size, its holes +0.0), and per pass of
    /// `items_per_pass` batch items the padded, dilated input gathered into an f64 matrix
    /// `[groups, Cg·W, items·spatial]` (im2col; padding +0.0), multiplied on the tiled f64
    /// GEMM with sums folded from their first term in ascending `Cg·W` — channel by channel,
    /// the window row-major, as the direct kernel and BinaryBackend sum — and rounded once
    /// into the output. Costs `(groups·Cg·W + F)·items·spatial·8` bytes of scratch per pass.
    Im2colGemm { items_per_pass: usize },
}

/// Scratch for one im2col pass at most (the auto choice splits the batch to stay under it).
const IM2COL_PASS_BYTES: u64 = 256 << 20;

/// Convs of fewer multiply-adds stay on the direct kernel (one dispatch instead of four).
const GEMM_MIN_MACS: u64 = 1 << 20;

/// The sizes the im2col path works with.
struct GemmDims {
    groups: usize,
    /// Filters per group (the GEMM's M), `Cg·W` (its K), output positions per item.
    per_group: usize,
    k: usize,
    spatial: usize,
}

fn gemm_dims(pl: &Plan, opts: &ConvOptions, kernel_spatial: &[usize]) -> GemmDims {
    let window: usize = kernel_spatial.iter().zip(&opts.kernel_dilation).map(|(&k, &d)| if k == 0 { 0 } else { (k - 1) * d + 1 }).product();
    let groups = opts.feature_group_size;
    GemmDims { groups, per_group: pl.f / groups, k: pl.cg * window, spatial: pl.untransposed[2..].iter().product() }
}

impl Context {
    /// Nx.conv(input, kernel, opts) written as `out`, by [`Context::conv_algorithm`]'s choice.
    pub fn conv(&self, input: &Tensor, kernel: &Tensor, opts: &ConvOptions, out: DType) -> Result<Tensor> {
        let result = self.empty(out, &checked_plan(input, kernel, opts, out)?.shape)?;
        self.recorded(result, |batch, out| self.record_conv(batch, input, kernel, opts, out))
    }

    /// `conv` computed by `algorithm` (an error where it does not apply) — for tests and
    /// benchmarks of each path.
    pub fn conv_using(&self, algorithm: ConvAlgorithm, input: &Tensor, kernel: &Tensor, opts: &ConvOptions, out: DType) -> Result<Tensor> {
        let result = self.empty(out, &checked_plan(input, kernel, opts, out)?.shape)?;
        self.recorded(result, |batch, out| self.record_conv_using(batch, algorithm, input, kernel, opts, out))
    }

    /// What `conv` uses for these operands: im2col + GEMM for float-summed convs without batch
    /// groups of at least [`GEMM_MIN_MACS`] multiply-adds whose scratch fits (passes of as
    /// many batch items as fit in 256 MiB of columns and products), where the device has the
    /// tiled f64 GEMM; else the direct kernel.
    pub fn conv_algorithm(&self, input: &Tensor, kernel: &Tensor, opts: &ConvOptions, out: DType) -> Result<ConvAlgorithm> {
        let pl = checked_plan(input, kernel, opts, out)?;
        let spec = Spec { x: input.dtype, k: kernel.dtype, out, s: pl.untransposed.len() - 2 };
        let ker: Vec<usize> = opts.kernel_permutation.iter().map(|&p| kernel.shape[p]).collect();
        let d = gemm_dims(&pl, opts, &ker[2..]);
        let tiled = matches!(
            crate::matmul::choose_kernel(&self.caps, DType::F64, d.groups, d.per_group, d.spatial, d.k),
            crate::matmul::MatmulKernel::Tiled { .. }
        );
        let macs = (pl.f as u64) * (d.k as u64) * (pl.n as u64) * (d.spatial as u64);
        // an item's im2col columns and its f64 products (more than the columns when there are
        // more filters than window terms, as in a 1×1 conv widening few channels)
        let per_item = ((d.groups * d.k + pl.f) * d.spatial) as u64 * 8;
        let pass_bytes = IM2COL_PASS_BYTES.min(self.caps.max_allocation_size);
        if spec.acc() != DType::F64 || opts.batch_group_size != 1 || !tiled || macs < GEMM_MIN_MACS || per_item == 0 || per_item > pass_bytes {
            return Ok(ConvAlgorithm::Direct);
        }
        Ok(ConvAlgorithm::Im2colGemm { items_per_pass: ((pass_bytes / per_item) as usize).clamp(1, pl.n) })
    }

    /// Records `conv` into `out`: a new (contiguous, offset 0) tensor of
    /// [`conv_output_shape`] whose type is the result type.
    pub fn record_conv(&self, batch: &mut Batch<'_>, input: &Tensor, kernel: &Tensor, opts: &ConvOptions, out: &Tensor) -> Result<()> {
        let algorithm = self.conv_algorithm(input, kernel, opts, out.dtype)?;
        self.record_conv_using(batch, algorithm, input, kernel, opts, out)
    }

    /// [`Context::record_conv`] by `algorithm`.
    pub fn record_conv_using(&self, batch: &mut Batch<'_>, algorithm: ConvAlgorithm, input: &Tensor, kernel: &Tensor, opts: &ConvOptions, out: &Tensor) -> Result<()> {
        let pl = checked_plan(input, kernel, opts, out.dtype)?;
        check_dense_output(out, out.dtype, &pl.shape, "conv")?;
        let count = out.numel();
        if count == 0 {
            return Ok(());
        }
        if input.numel() > MAX_ELEMENTS || kernel.numel() > MAX_ELEMENTS {
            return Err(invalid!("conv operands exceed {MAX_ELEMENTS} elements"));
        }
        if let ConvAlgorithm::Im2colGemm { items_per_pass } = algorithm {
            return self.record_conv_gemm(batch, &pl, items_per_pass, input, kernel, opts, out);
        }
        let x = input.transpose(&opts.input_permutation)?;
        let k = kernel.transpose(&opts.kernel_permutation)?;
        let u = out.transpose(&opts.output_permutation)?;
        debug_assert_eq!(u.shape, pl.untransposed);
        let s = x.shape.len() - 2;
        let mut p = ParamBlock::new("conv");
        p.addrs([x.buffer.address(), k.buffer.address(), out.buffer.address()]);
        let (bg, fg) = (opts.batch_group_size, opts.feature_group_size);
        p.i32s([x.offset, k.offset, pl.n, pl.f, pl.cg, pl.f / fg, pl.f / bg, pl.n / bg])?;
        p.i32s([x.strides[0], x.strides[1], k.strides[0], k.strides[1], u.strides[0], u.strides[1]])?;
        push_axes(&mut p, &x, &k, &u, opts)?;
        let spec = Spec { x: x.dtype, k: k.dtype, out: out.dtype, s };
        let kern = self.kernels.get(&spec.key(), LOCAL, 1, || spec.source())?;
        batch.keep(&x.buffer);
        batch.keep(&k.buffer);
        batch.keep(&out.buffer);
        batch.dispatch(&kern, p.bytes(), count as u64)
    }

    /// [`ConvAlgorithm::Im2colGemm`]: the kernel matrix, then per pass of `items` batch items
    /// the im2col gather, the GEMM into an f64 scratch and the rounding into `out`'s slice of
    /// the batch axis.
    #[allow(clippy::too_many_arguments)]
    fn record_conv_gemm(&self, batch: &mut Batch<'_>, pl: &Plan, items: usize, input: &Tensor, kernel: &Tensor, opts: &ConvOptions, out: &Tensor) -> Result<()> {
        let x = input.transpose(&opts.input_permutation)?;
        let k = kernel.transpose(&opts.kernel_permutation)?;
        let s = x.shape.len() - 2;
        let spec = Spec { x: x.dtype, k: k.dtype, out: out.dtype, s };
        if spec.acc() != DType::F64 || opts.batch_group_size != 1 {
            return Err(invalid!(
                "conv by im2col + GEMM needs float operands summed in f64 and no batch groups; got {}x{} with batch_group_size {}",
                x.dtype,
                k.dtype,
                opts.batch_group_size
            ));
        }
        let d = gemm_dims(pl, opts, &k.shape[2..]);
        let gemm = crate::matmul::choose_kernel(&self.caps, DType::F64, d.groups, d.per_group, items * d.spatial, d.k);
        if !matches!(gemm, crate::matmul::MatmulKernel::Tiled { .. }) {
            return Err(invalid!("conv by im2col + GEMM: this device has no tiled f64 GEMM"));
        }
        if items == 0 {
            return Err(invalid!("conv by im2col + GEMM: items_per_pass must be positive"));
        }
        let items = items.min(pl.n);
        let (window, spatial_out) = (d.k / pl.cg.max(1), &pl.untransposed[2..]);
        let u = out.transpose(&opts.output_permutation)?;
        // The kernel as [F, Cg·W] in f64, the dilation's holes +0.0.
        let kmat = self.empty(DType::F64, &[pl.f, d.k])?;
        {
            let mut p = ParamBlock::new("conv kernel matrix");
            p.addrs([k.buffer.address(), kmat.buffer.address()]);
            p.i32s([k.offset, pl.cg, window])?.i32s([k.strides[0], k.strides[1]])?;
            push_axes(&mut p, &x, &k, &u, opts)?;
            let g = Gather { from: k.dtype, s, what: GatherWhat::Kernel };
            let kern = self.kernels.get(&g.key(), LOCAL, 1, || g.source())?;
            batch.keep(&k.buffer);
            batch.keep(&kmat.buffer);
            batch.dispatch(&kern, p.bytes(), kmat.numel() as u64)?;
        }
        let cols = self.empty(DType::F64, &[d.groups * d.k * items * d.spatial])?;
        let prods = self.empty(DType::F64, &[pl.f * items * d.spatial])?;
        batch.keep(&x.buffer);
        batch.keep(&cols.buffer);
        batch.keep(&prods.buffer);
        let gather = Gather { from: x.dtype, s, what: GatherWhat::Input };
        let im2col = self.kernels.get(&gather.key(), LOCAL, 1, || gather.source())?;
        let mut n0 = 0;
        while n0 < pl.n {
            let nb = items.min(pl.n - n0);
            let p_cols = nb * d.spatial;
            let cols_t = cols.slice(&[0], &[d.groups * d.k * p_cols], &[1])?.reshape(&[d.groups, d.k, p_cols])?;
            let prods_t = prods.slice(&[0], &[pl.f * p_cols], &[1])?.reshape(&[d.groups, d.per_group, p_cols])?;
            let mut p = ParamBlock::new("conv im2col");
            p.addrs([x.buffer.address(), cols.buffer.address()]);
            p.i32s([x.offset, pl.cg, window])?.i32s([x.strides[0], x.strides[1]])?.i32s([n0, p_cols, d.k])?;
            push_axes(&mut p, &x, &k, &u, opts)?;
            batch.dispatch(&im2col, p.bytes(), cols_t.numel() as u64)?;
            let va = crate::matmul::View3 { offset: 0, s: [(d.per_group * d.k) as isize, d.k as isize, 1] };
            let vb = crate::matmul::View3 { offset: 0, s: [(d.k * p_cols) as isize, p_cols as isize, 1] };
            self.record_gemm_folded(
                batch,
                gemm,
                crate::matmul::FoldStart::FirstTerm,
                // (kmat and cols hold x's and k's values widened, and +0.0 in the holes)
                crate::matmul::F64Products::of(x.dtype, k.dtype),
                &(kmat.clone(), va),
                &(cols_t, vb),
                &prods_t,
                [d.groups, d.per_group, p_cols, d.k],
                false,
            )?;
            // [F, nb, spatial...] -> [nb, F, spatial...], rounded into out's items n0..n0+nb
            let mut shape = vec![pl.f, nb];
            shape.extend_from_slice(spatial_out);
            let mut perm: Vec<usize> = (0..shape.len()).collect();
            perm.swap(0, 1);
            let from = prods_t.reshape(&shape)?.transpose(&perm)?;
            let mut start = vec![0; u.shape.len()];
            start[0] = n0;
            let mut lengths = u.shape.clone();
            lengths[0] = nb;
            let into = u.slice(&start, &lengths, &vec![1; u.shape.len()])?;
            self.record_map(batch, &[Expr::convert(Expr::Input(0), out.dtype)], &[&from], &[&into])?;
            n0 += nb;
        }
        Ok(())
    }
}

/// Which operand a gather lays out as a GEMM matrix.
#[derive(Clone, Copy, Debug)]
enum GatherWhat {
    /// `[F, Cg·W]`: row f, column `ci·W + j` is the dilated kernel at (f, ci, window position
    /// j), +0.0 in the holes.
    Kernel,
    /// `[groups, Cg·W, items·spatial]`: row `ci·W + j` of group g, column `n·spatial + o` is
    /// the padded, dilated input of item `n0 + n`, channel `g·Cg + ci` at output position o's
    /// window position j, +0.0 in the padding.
    Input,
}

/// An im2col-path gather: operand type, spatial rank and which matrix.
struct Gather {
    from: DType,
    s: usize,
    what: GatherWhat,
}

impl Gather {
    fn key(&self) -> String {
        format!("conv gather {:?} {} s{}", self.what, self.from, self.s)
    }

    fn source(&self) -> String {
        let mut s = String::new();
        s.push_str(&crate::kernels::numeric_prelude());
        writeln!(s, "const int S = {};", self.s).unwrap();
        writeln!(s, "layout(local_size_x = {LOCAL}) in;\nvoid main() {{").unwrap();
        let fb = buf_type(self.from);
        writeln!(s, "    {fb} src = {fb}(ParamsU64(pc.params).v[0]);\n    BufU64 dst = BufU64(ParamsU64(pc.params).v[1]);").unwrap();
        s.push_str("    ParamsI32 m = ParamsI32(pc.params + 16ul);\n");
        s.push_str("    int off = m.v[0]; int Cg = m.v[1]; int W = m.v[2]; int s0 = m.v[3]; int s1 = m.v[4];\n");
        let at = match self.what {
            GatherWhat::Kernel => 5,
            GatherWhat::Input => {
                s.push_str("    int n0 = m.v[5]; int P = m.v[6]; int Kc = m.v[7];\n");
                8
            }
        };
        load_axes(&mut s, at);
        writeln!(s, "    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * {LOCAL}u) {{").unwrap();
        let value = to_domain(self.from, DType::F64, &decode(self.from, "src.v[e]"));
        match self.what {
            GatherWhat::Kernel => {
                s.push_str("        int col = int(i % uint(Cg * W)); int f = int(i / uint(Cg * W));\n");
                s.push_str("        int ci = col / W; int j = col - ci * W;\n");
                s.push_str("        int e = off + f * s0 + ci * s1; bool inside = true;\n");
                s.push_str("        for (int d = S - 1; d >= 0; d--) { int jd = j % kd[d]; j /= kd[d]; int q = jd / kdil[d]; inside = inside && q * kdil[d] == jd; e += q * ks[d]; }\n");
            }
            GatherWhat::Input => {
                s.push_str("        int col = int(i % uint(P)); int row = int((i / uint(P)) % uint(Kc)); int g = int(i / (uint(P) * uint(Kc)));\n");
                s.push_str("        int n = n0 + col / OS; int o = col % OS;\n");
                s.push_str("        int ci = row / W; int j = row - ci * W;\n");
                s.push_str("        int e = off + n * s0 + (g * Cg + ci) * s1; bool inside = true;\n");
                s.push_str(
                    "        for (int d = S - 1; d >= 0; d--) {
            int jd = j % kd[d]; j /= kd[d];
            int od = o % on[d]; o /= on[d];
            int q = od * st[d] + jd - lo[d];
            int qq = (q >= 0) ? q / idil[d] : -1;
            inside = inside && q >= 0 && q - qq * idil[d] == 0 && qq < xn[d];
            e += qq * xs[d];
        }
",
                );
            }
        }
        writeln!(s, "        double v = 0.0LF;\n        if (inside) v = {value};\n        dst.v[i] = nx_f64_to_bits(v);\n    }}\n}}").unwrap();
        s
    }
}

/// What every conv kernel reads per spatial axis `d` (after the input/kernel/output
/// permutations), ten ints in this order: the input's size and stride, the kernel's size and
/// stride, the untransposed output's size and stride, the conv stride, the low padding, the
/// input and kernel dilations.
const AXIS_NAMES: [&str; 10] = ["xn", "xs", "kn", "ks", "on", "os", "st", "lo", "idil", "kdil"];

fn push_axes(p: &mut ParamBlock, x: &Tensor, k: &Tensor, u: &Tensor, o: &ConvOptions) -> Result<()> {
    for d in 0..x.shape.len() - 2 {
        p.i32(x.shape[d + 2])?.i32(x.strides[d + 2])?.i32(k.shape[d + 2])?.i32(k.strides[d + 2])?;
        p.i32(u.shape[d + 2])?.i32(u.strides[d + 2])?.i32(o.strides[d])?.i32(o.padding[d].0)?;
        p.i32s([o.input_dilation[d], o.kernel_dilation[d]])?;
    }
    Ok(())
}

/// GLSL: [`push_axes`]'s ints (from `m.v[first]`) into arrays of `S`, with `kd` (the dilated
/// kernel window), its size `KW` and the output positions per item `OS`.
fn load_axes(s: &mut String, first: usize) {
    for n in AXIS_NAMES {
        writeln!(s, "    int {n}[S];").unwrap();
    }
    s.push_str("    int kd[S];\n    int KW = 1;\n    int OS = 1;\n    for (int d = 0; d < S; d++) {\n");
    for (i, n) in AXIS_NAMES.iter().enumerate() {
        writeln!(s, "        {n}[d] = m.v[{first} + d * {} + {i}];", AXIS_NAMES.len()).unwrap();
    }
    s.push_str("        kd[d] = (kn[d] - 1) * kdil[d] + 1; KW *= kd[d]; OS *= on[d];\n    }\n");
}

struct Spec {
    x: DType,
    k: DType,
    out: DType,
    s: usize,
}

impl Spec {
    fn key(&self) -> String {
        format!("conv direct {}x{}->{} s{}", self.x, self.k, self.out, self.s)
    }

    /// The domain terms are summed in.
    fn acc(&self) -> DType {
        match (self.x.kind(), self.k.kind()) {
            (Kind::Unsigned, Kind::Unsigned) => DType::U64,
            (Kind::Float, _) | (_, Kind::Float) => DType::F64,
            _ => DType::S64,
        }
    }

    fn source(&self) -> String {
        let acc_t = self.acc();
        let acc = acc_t.glsl_compute();
        let (xb, kb, ob) = (buf_type(self.x), buf_type(self.k), buf_type(self.out));
        let mut s = String::new();
        s.push_str(&crate::kernels::numeric_prelude());
        writeln!(s, "const int S = {};", self.s).unwrap();
        writeln!(s, "layout(local_size_x = {LOCAL}) in;\nvoid main() {{").unwrap();
        writeln!(
            s,
            "    {xb} xb = {xb}(ParamsU64(pc.params).v[0]);\n    {kb} kb = {kb}(ParamsU64(pc.params).v[1]);\n    {ob} ob = {ob}(ParamsU64(pc.params).v[2]);"
        )
        .unwrap();
        s.push_str("    ParamsI32 m = ParamsI32(pc.params + 24ul);\n");
        s.push_str("    int xoff = m.v[0]; int koff = m.v[1]; int F = m.v[3]; int Cg = m.v[4]; int Fg = m.v[5]; int Fb = m.v[6]; int Nb = m.v[7];\n");
        s.push_str("    int xs0 = m.v[8]; int xs1 = m.v[9]; int ks0 = m.v[10]; int ks1 = m.v[11]; int os0 = m.v[12]; int os1 = m.v[13];\n");
        load_axes(&mut s, 14);
        writeln!(s, "    for (uint o = gl_GlobalInvocationID.x; o < pc.count; o += gl_NumWorkGroups.x * {LOCAL}u) {{").unwrap();
        s.push_str("        uint rest = o; int oc[S]; int oe = 0;\n");
        s.push_str("        for (int d = S - 1; d >= 0; d--) { int c = int(rest % uint(on[d])); rest /= uint(on[d]); oc[d] = c; oe += c * os[d]; }\n");
        s.push_str("        int f = int(rest % uint(F)); int nq = int(rest / uint(F));\n");
        s.push_str("        oe += f * os1 + nq * os0;\n");
        s.push_str("        int n = nq + (f / Fb) * Nb;\n        int cbase = (f / Fg) * Cg;\n");
        let init = match acc_t.kind() {
            Kind::Signed => "0l",
            Kind::Unsigned => "0ul",
            _ => "nx_bits_to_f64(0x8000000000000000ul)", // -0.0: the exact additive identity
        };
        writeln!(s, "        {acc} acc = {init};").unwrap();
        s.push_str("        for (int ci = 0; ci < Cg; ci++) {\n");
        s.push_str("            int xe0 = xoff + n * xs0 + (cbase + ci) * xs1; int ke0 = koff + f * ks0 + ci * ks1;\n");
        s.push_str("            int jc[S];\n            for (int d = 0; d < S; d++) jc[d] = 0;\n");
        s.push_str("            for (int j = 0; j < KW; j++) {\n");
        s.push_str("                bool xv = true; bool kv = true; int xe = xe0; int ke = ke0;\n");
        s.push_str(
            "                for (int d = 0; d < S; d++) {
                    int kq = jc[d] / kdil[d];
                    kv = kv && (jc[d] - kq * kdil[d]) == 0;
                    ke += kq * ks[d];
                    int q = oc[d] * st[d] + jc[d] - lo[d];
                    int qq = (q >= 0) ? q / idil[d] : -1;
                    xv = xv && q >= 0 && (q - qq * idil[d]) == 0 && qq < xn[d];
                    xe += qq * xs[d];
                }
",
        );
        let zero = match acc_t.kind() {
            Kind::Signed => "0l",
            Kind::Unsigned => "0ul",
            _ => "0.0LF",
        };
        let xval = to_domain(self.x, acc_t, &decode(self.x, "xb.v[xe]"));
        let kval = to_domain(self.k, acc_t, &decode(self.k, "kb.v[ke]"));
        writeln!(s, "                {acc} xv_ = {zero}; {acc} kv_ = {zero};").unwrap();
        writeln!(s, "                if (xv) xv_ = {xval};\n                if (kv) kv_ = {kval};").unwrap();
        if acc_t.is_float() {
            s.push_str("                precise double t = xv_ * kv_;\n                precise double r = t + acc;\n                acc = r;\n");
        } else {
            s.push_str("                acc = xv_ * kv_ + acc;\n");
        }
        s.push_str("                for (int d = S - 1; d >= 0; d--) { jc[d]++; if (jc[d] < kd[d]) break; jc[d] = 0; }\n");
        s.push_str("            }\n        }\n");
        let out = self.out;
        let v = wrap(out, &to_domain(acc_t, out, "acc"));
        writeln!(s, "        ob.v[oe] = {};", encode(out, &v)).unwrap();
        s.push_str("    }\n}\n");
        s
    }
}
