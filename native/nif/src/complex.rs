//! NIFs for Nx.fft/ifft (engine: `nx_vulkan_engine::fft`). Complex tensors themselves need no
//! NIF of their own: "c64"/"c128" are element type names like the others (upload, download,
//! unary "real"/"imag"/"conjugate", binary, convert, reduce sum/product, dot).

use crate::{get, on_engine, tensor_result, Handle};
use rustler::{Env, Term};

/// Nx.fft along `axis` (already normalised), padded/truncated to `length`; parts with
/// `|part| <= eps` become +0.0. Returns `{:ok, handle}` (c64, or c128 for f64/c128 input).
#[rustler::nif(schedule = "DirtyCpu")]
fn fft(env: Env<'_>, x: Handle, axis: usize, length: usize, eps: f64) -> Term<'_> {
    let r = get(&x).and_then(|x| on_engine(move |ctx| ctx.fft(&x, axis, length, eps)));
    tensor_result(env, r)
}

/// Nx.ifft, as `fft`.
#[rustler::nif(schedule = "DirtyCpu")]
fn ifft(env: Env<'_>, x: Handle, axis: usize, length: usize, eps: f64) -> Term<'_> {
    let r = get(&x).and_then(|x| on_engine(move |ctx| ctx.ifft(&x, axis, length, eps)));
    tensor_result(env, r)
}
