//! NIFs for the indexing family (engine: `nx_vulkan_engine::indexing`). Each returns
//! `{:ok, handle}` or `{:error, {kind, message}}`; an out-of-range index is
//! `{:error, {:argument, "index i is out of bounds for axis a in shape {..}"}}`.

use crate::list::List;
use crate::{dtype, get, on_engine, tensor_result, Handle};
use nx_vulkan_engine::indexing::IndexedOp;
use rustler::{Env, Term};

/// Nx.gather: `indices[..., k]` indexes the increasing tensor axes `axes` (k of them).
#[rustler::nif(schedule = "DirtyCpu")]
fn gather(env: Env<'_>, x: Handle, indices: Handle, axes: List<usize>) -> Term<'_> {
    let r = (|| {
        let (x, i) = (get(&x)?, get(&indices)?);
        on_engine(move |ctx| ctx.gather(&x, &i, &axes))
    })();
    tensor_result(env, r)
}

/// Nx.take along `axis`.
#[rustler::nif(schedule = "DirtyCpu")]
fn take(env: Env<'_>, x: Handle, indices: Handle, axis: usize) -> Term<'_> {
    let r = (|| {
        let (x, i) = (get(&x)?, get(&indices)?);
        on_engine(move |ctx| ctx.take(&x, &i, axis))
    })();
    tensor_result(env, r)
}

/// Nx.take_along_axis.
#[rustler::nif(schedule = "DirtyCpu")]
fn take_along_axis(env: Env<'_>, x: Handle, indices: Handle, axis: usize) -> Term<'_> {
    let r = (|| {
        let (x, i) = (get(&x)?, get(&indices)?);
        on_engine(move |ctx| ctx.take_along_axis(&x, &i, axis))
    })();
    tensor_result(env, r)
}

fn indexed<'a>(env: Env<'a>, op: IndexedOp, target: Handle, indices: Handle, updates: Handle, axes: List<usize>, out: String) -> Term<'a> {
    let r = (|| {
        let (t, i, u) = (get(&target)?, get(&indices)?, get(&updates)?);
        let out = dtype(&out)?;
        on_engine(move |ctx| ctx.indexed(op, &t, &i, &u, &axes, out, None))
    })();
    tensor_result(env, r)
}

/// Nx.indexed_add: `indices` is `{n, k}` over the increasing `axes`, `updates` `{n, ...}`;
/// `out` is the result type name (Nx's merged type of target and updates).
#[rustler::nif(schedule = "DirtyCpu")]
fn indexed_add(env: Env<'_>, target: Handle, indices: Handle, updates: Handle, axes: List<usize>, out: String) -> Term<'_> {
    indexed(env, IndexedOp::Add, target, indices, updates, axes, out)
}

/// Nx.indexed_put: as indexed_add; the last update naming a position wins.
#[rustler::nif(schedule = "DirtyCpu")]
fn indexed_put(env: Env<'_>, target: Handle, indices: Handle, updates: Handle, axes: List<usize>, out: String) -> Term<'_> {
    indexed(env, IndexedOp::Put, target, indices, updates, axes, out)
}
