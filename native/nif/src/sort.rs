//! NIFs for sorting and scans (engine: `nx_vulkan_engine::sort`, `nx_vulkan_engine::scan`).
//! Each returns `{:ok, handle}` (top_k: `{:ok, {values, indices}}`) or
//! `{:error, {kind, message}}`.

use crate::{dtype, encode_result, get, handle, nowait_result, on_engine, tensor_result, without_waiting, Handle};
use nx_vulkan_engine::scan::ScanOp;
use nx_vulkan_engine::sort::Direction;
use rustler::{Encoder, Env, Term};

/// Nx.sort along `axis`; `direction` is "asc" or "desc".
#[rustler::nif(schedule = "DirtyCpu")]
fn sort(env: Env<'_>, x: Handle, axis: usize, direction: String) -> Term<'_> {
    let r = (|| {
        let x = get(&x)?;
        let dir = Direction::parse(&direction)?;
        on_engine(move |ctx| ctx.sort(&x, axis, dir))
    })();
    tensor_result(env, r)
}

/// Nx.argsort along `axis`, indices of integer type `out` (always stable).
#[rustler::nif(schedule = "DirtyCpu")]
fn argsort(env: Env<'_>, x: Handle, axis: usize, direction: String, stable: bool, out: String) -> Term<'_> {
    let r = (|| {
        let x = get(&x)?;
        let dir = Direction::parse(&direction)?;
        let out = dtype(&out)?;
        on_engine(move |ctx| ctx.argsort(&x, axis, dir, stable, out))
    })();
    tensor_result(env, r)
}

/// Nx.top_k along the last axis: `{:ok, {values, indices}}`, indices of type `index_type`.
#[rustler::nif(schedule = "DirtyCpu")]
fn top_k(env: Env<'_>, x: Handle, k: usize, index_type: String) -> Term<'_> {
    let r = (|| {
        let x = get(&x)?;
        let it = dtype(&index_type)?;
        on_engine(move |ctx| ctx.top_k(&x, k, it))
    })();
    encode_result(env, r, |env, (v, i)| (handle(v), handle(i)).encode(env))
}

/// Nx.cumulative_{sum,product,max,min}: `op` is "cumulative_sum" (or "sum"), etc.
#[rustler::nif(schedule = "DirtyCpu")]
fn cumulative(env: Env<'_>, op: String, x: Handle, axis: usize, reverse: bool) -> Term<'_> {
    let r = (|| {
        let x = get(&x)?;
        let op = ScanOp::parse(&op)?;
        on_engine(move |ctx| ctx.cumulative(op, &x, axis, reverse))
    })();
    tensor_result(env, r)
}

/// `cumulative` on the calling normal scheduler; see `unary_nowait`.
#[rustler::nif]
fn cumulative_nowait(env: Env<'_>, op: String, x: Handle, axis: usize, reverse: bool) -> Term<'_> {
    let r = (|| {
        let (x, op) = (get(&x)?, ScanOp::parse(&op)?);
        without_waiting(|ctx| ctx.cumulative(op, &x, axis, reverse))
    })();
    nowait_result(env, r)
}
