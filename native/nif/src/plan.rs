//! Compiled plans (engine `plan.rs`): the IR terms NxVulkan.Compiler hands over, translated
//! into an engine `Graph` once (`plan_compile`), and runs binding new inputs (`plan_run`).
//!
//! IR terms: `params` is `[{type, shape}]`; `nodes` is `[{op, args, shape, type, attr}]` in
//! topological order (`args` are indices of earlier nodes); `op` is the Nx op name and `attr`
//! depends on it (see `translate`); `outputs` is `[index]`.

use crate::list::List;
use crate::{dtype, get, handle, on_engine, Handle};
use nx_vulkan_engine::matmul::DotPrecision;
use nx_vulkan_engine::plan::{scalar_from_bytes, Graph, Plan, PlanNode, PlanOp, PlanOptions};
use nx_vulkan_engine::reduce::{ArgOp, ReduceOp, TieBreak};
use nx_vulkan_engine::scan::ScanOp;
use nx_vulkan_engine::sort::Direction;
use nx_vulkan_engine::{self as engine, BinaryOp, DType, EngineError, FloatMath, UnaryOp};
use rustler::{Binary, Encoder, Env, ResourceArc, Term};
use std::sync::Arc;

pub struct PlanRef {
    plan: Arc<Plan>,
}

#[rustler::resource_impl]
impl rustler::Resource for PlanRef {}

type NodeTerm<'a> = (String, List<usize>, List<usize>, String, Term<'a>);

fn bad(msg: String) -> EngineError {
    EngineError::InvalidArgument(msg)
}

fn attr<'a, T: rustler::Decoder<'a>>(op: &str, t: Term<'a>) -> engine::Result<T> {
    if !crate::list::lists_are_proper(t) {
        return Err(bad(format!("plan node {op}: malformed attribute {t:?} (an improper list)")));
    }
    t.decode().map_err(|_| bad(format!("plan node {op}: malformed attribute {t:?}")))
}

fn translate(name: &str, a: Term<'_>, t: DType) -> engine::Result<PlanOp> {
    let reduce = |op| -> engine::Result<PlanOp> { Ok(PlanOp::Reduce { op, axes: attr(name, a)? }) };
    Ok(match name {
        "parameter" => PlanOp::Parameter(attr(name, a)?),
        "constant" => {
            let b: Binary = attr(name, a)?;
            PlanOp::Constant(scalar_from_bytes(t, b.as_slice())?)
        }
        "iota" => PlanOp::Iota(attr(name, a)?),
        "select" => PlanOp::Select,
        "clip" => PlanOp::Clip,
        "as_type" => PlanOp::Convert,
        "bitcast" => PlanOp::Bitcast,
        "reshape" => PlanOp::Reshape,
        "broadcast" => PlanOp::Broadcast(attr(name, a)?),
        "transpose" => PlanOp::Transpose(attr(name, a)?),
        "slice" => {
            let (start, steps) = attr(name, a)?;
            PlanOp::Slice { start, steps }
        }
        "reverse" => PlanOp::Reverse(attr(name, a)?),
        "sum" => reduce(ReduceOp::Sum)?,
        "product" => reduce(ReduceOp::Product)?,
        "reduce_max" => reduce(ReduceOp::Max)?,
        "reduce_min" => reduce(ReduceOp::Min)?,
        "all" => reduce(ReduceOp::All)?,
        "any" => reduce(ReduceOp::Any)?,
        "argmax" | "argmin" => {
            let (axis, high): (Option<usize>, bool) = attr(name, a)?;
            let op = if name == "argmax" { ArgOp::ArgMax } else { ArgOp::ArgMin };
            PlanOp::ArgReduce { op, axis, tie_break: if high { TieBreak::High } else { TieBreak::Low } }
        }
        "dot" => {
            let (contract_a, batch_a, contract_b, batch_b) = attr(name, a)?;
            PlanOp::Dot { contract_a, batch_a, contract_b, batch_b }
        }
        "concatenate" => PlanOp::Concatenate(attr(name, a)?),
        "pad" => PlanOp::Pad(attr(name, a)?),
        "sort" | "argsort" => {
            let (axis, direction): (usize, String) = attr(name, a)?;
            let direction = Direction::parse(&direction)?;
            if name == "sort" {
                PlanOp::Sort { axis, direction }
            } else {
                PlanOp::Argsort { axis, direction }
            }
        }
        "cumulative_sum" | "cumulative_product" | "cumulative_max" | "cumulative_min" => {
            let (axis, reverse) = attr(name, a)?;
            PlanOp::Cumulative { op: ScanOp::parse(name)?, axis, reverse }
        }
        other => match (UnaryOp::parse(other), BinaryOp::parse(other)) {
            (Ok(op), _) => PlanOp::Unary(op),
            (_, Ok(op)) => PlanOp::Binary(op),
            _ => return Err(bad(format!("plans have no op {other:?}"))),
        },
    })
}

/// Translates IR terms into a plan (scheduling included). `precision`: `"exact"`
/// (Nx.BinaryBackend's bits), `"f32"` (dots accumulate in f32; f16/bf16 on tensor cores) or
/// `"fast"` (that, and f32/f16/bf16 elementwise math in f32: `FloatMath::Fast`).
#[rustler::nif(schedule = "DirtyCpu")]
fn plan_compile<'a>(env: Env<'a>, params: List<(String, List<usize>)>, nodes: List<NodeTerm<'a>>, outputs: List<usize>, precision: String) -> Term<'a> {
    let r = (|| {
        let params = params.into_iter().map(|(t, s)| Ok((dtype(&t)?, s.0))).collect::<engine::Result<Vec<_>>>()?;
        let nodes = nodes
            .into_iter()
            .enumerate()
            .map(|(i, (op, args, shape, t, a))| {
                let dtype = dtype(&t)?;
                let op = translate(&op, a, dtype).map_err(|e| bad(format!("plan node {i}: {e}")))?;
                Ok(PlanNode { op, args: args.0, shape: shape.0, dtype })
            })
            .collect::<engine::Result<Vec<_>>>()?;
        let options = match precision.as_str() {
            "exact" => PlanOptions::default(),
            // dots accumulate in f32 (f16/bf16 operands on tensor cores where the device has
            // them); elementwise math stays exact
            "f32" => PlanOptions { dot: DotPrecision::TensorCore, math: FloatMath::Exact },
            // and f32/f16/bf16 elementwise math in f32 (math_f32.glsl)
            "fast" => PlanOptions { dot: DotPrecision::TensorCore, math: FloatMath::Fast },
            other => return Err(bad(format!("unknown precision {other:?} (exact, f32, fast)"))),
        };
        let plan = Plan::new(Graph { params, nodes, outputs: outputs.0 }, options)?;
        let s = plan.summary();
        Ok((ResourceArc::new(PlanRef { plan: Arc::new(plan) }), (s.nodes, s.fused_kernels, s.inlined_nodes, s.family_steps, s.fused_prologues, s.fused_epilogues)))
    })();
    crate::encode_result(env, r, |env, (p, s)| (p, s).encode(env))
}

/// Runs a plan on new inputs: one recording, committed without waiting; `{:ok, [handle]}`.
#[rustler::nif(schedule = "DirtyCpu")]
fn plan_run(env: Env<'_>, plan: ResourceArc<PlanRef>, inputs: List<Handle>) -> Term<'_> {
    let r = (|| {
        let inputs = inputs.iter().map(get).collect::<engine::Result<Vec<_>>>()?;
        let plan = plan.plan.clone();
        on_engine(move |ctx| plan.run(ctx, &inputs))
    })();
    crate::device_result(env, r, |env, ts| ts.into_iter().map(handle).collect::<Vec<Handle>>().encode(env))
}
