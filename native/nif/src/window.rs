//! NIFs for window reductions, window scatters and convolution (engine:
//! `nx_vulkan_engine::window`, `nx_vulkan_engine::conv`). Each returns `{:ok, handle}` or
//! `{:error, {kind, message}}`. Paddings are lists of `{lo, hi}` (negative crops).

use crate::list::List;
use crate::{dtype, get, on_engine, tensor_result, Handle};
use nx_vulkan_engine::conv::ConvOptions;
use nx_vulkan_engine::window::{ScatterOp, WindowOp};
use rustler::{Env, Term};

/// Nx.window_sum/product/max/min: `op` is "window_sum", "window_product", "window_max" or
/// "window_min"; the result has the input's type.
#[rustler::nif(schedule = "DirtyCpu")]
fn window_reduce(env: Env<'_>, op: String, x: Handle, window: List<usize>, strides: List<usize>, padding: List<(i64, i64)>, dilations: List<usize>) -> Term<'_> {
    let r = (|| {
        let op = WindowOp::parse(&op)?;
        let x = get(&x)?;
        on_engine(move |ctx| ctx.window_reduce(op, &x, &window, &strides, &padding, &dilations))
    })();
    tensor_result(env, r)
}

/// Nx.window_scatter_max/min: `op` is "window_scatter_max" or "window_scatter_min"; `init` is a
/// one-element tensor; the result has `x`'s shape and type `out`.
#[allow(clippy::too_many_arguments)]
#[rustler::nif(schedule = "DirtyCpu")]
fn window_scatter(env: Env<'_>, op: String, x: Handle, source: Handle, init: Handle, window: List<usize>, strides: List<usize>, padding: List<(i64, i64)>, out: String) -> Term<'_> {
    let r = (|| {
        let op = ScatterOp::parse(&op)?;
        let (x, s, i) = (get(&x)?, get(&source)?, get(&init)?);
        let out = dtype(&out)?;
        on_engine(move |ctx| ctx.window_scatter(op, &x, &s, &i, &window, &strides, &padding, out))
    })();
    tensor_result(env, r)
}

/// Nx.conv with Nx.Backend's options, spatial lists in spatial order, written as `out`.
#[allow(clippy::too_many_arguments)]
#[rustler::nif(schedule = "DirtyCpu")]
fn conv(
    env: Env<'_>,
    input: Handle,
    kernel: Handle,
    strides: List<usize>,
    padding: List<(i64, i64)>,
    input_dilation: List<usize>,
    kernel_dilation: List<usize>,
    feature_group_size: usize,
    batch_group_size: usize,
    input_permutation: List<usize>,
    kernel_permutation: List<usize>,
    output_permutation: List<usize>,
    out: String,
) -> Term<'_> {
    let r = (|| {
        let (x, k) = (get(&input)?, get(&kernel)?);
        let out = dtype(&out)?;
        let opts = ConvOptions {
            strides: strides.0,
            padding: padding.0,
            input_dilation: input_dilation.0,
            kernel_dilation: kernel_dilation.0,
            feature_group_size,
            batch_group_size,
            input_permutation: input_permutation.0,
            kernel_permutation: kernel_permutation.0,
            output_permutation: output_permutation.0,
        };
        on_engine(move |ctx| ctx.conv(&x, &k, &opts, out))
    })();
    tensor_result(env, r)
}
