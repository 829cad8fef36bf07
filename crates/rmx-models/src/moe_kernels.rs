//! A mixture-of-experts layer's decode step on the CUDA fast path: the chosen experts' fused
//! gate/up products with SwiGLU in one launch, their down products weighted and summed in a
//! second (kernels/moe.cuh), where MLX runs three gather_qmm launches and the ops
//! around them. Measured on the H100 before these (docs/perf.md session 8): Qwen3-30B-A3B 4-bit
//! decoded at 59.6 tok/s with MLX's ops, 1.34x mlx-lm.

use rmx_mlx::quant::{QuantMode, QuantSpec, Quantized};
use rmx_mlx::{Array, Dtype, Launch, TemplateArg};

use crate::error::Result;
use crate::fastpath::{fast_path, kernel, Spec};

const GATE_UP: Spec = Spec {
    name: "rmx_moe_gate_up",
    section: "moe",
    inputs: &["x", "w", "scales", "biases", "idx"],
    outputs: &["y"],
    body: "rmx::qgemv_swiglu<T, BITS, G, ROWS, K, false, true>(x, w, scales, biases, y, F, nullptr, nullptr, idx);",
};
const DOWN: Spec = Spec {
    name: "rmx_moe_down",
    section: "moe",
    inputs: &["act", "w", "scales", "biases", "idx", "scores"],
    outputs: &["y"],
    body: "rmx::moe_down<T, BITS, G, ROWS, K, TOPK>(act, w, scales, biases, idx, scores, y, N);",
};

/// Whether stacked experts quantized as `spec` can run these kernels (decided at load): the
/// CUDA fast path, 4- or 8-bit affine groups that whole 16-byte chunks fill, and `k`-wide rows
/// of whole chunks.
pub(crate) fn fits(spec: QuantSpec, q: &Quantized, k: i32) -> bool {
    let per = 128 / spec.bits.max(1);
    fast_path().kernels
        && spec.mode == QuantMode::Affine
        && matches!(spec.bits, 4 | 8)
        && spec.group_size % per == 0
        && k % per == 0
        && q.biases.is_some()
}

fn template(
    dtype: Dtype,
    spec: QuantSpec,
    k: i32,
    extra: (&'static str, i32),
) -> Vec<(&'static str, TemplateArg)> {
    vec![
        ("T", TemplateArg::Dtype(dtype)),
        ("BITS", TemplateArg::Int(spec.bits)),
        ("G", TemplateArg::Int(spec.group_size)),
        ("ROWS", TemplateArg::Int(fast_path().rows_per_warp)),
        ("K", TemplateArg::Int(k)),
        (extra.0, TemplateArg::Int(extra.1)),
    ]
}

fn biases(q: &Quantized) -> &Array {
    q.biases.as_ref().expect("checked by fits")
}

/// `[k, F]`: silu(x . gate) * (x . up) of each chosen expert, for one token `x` (`[.., hid]`),
/// `both` the experts' fused `[E, 2F, hid]` gate/up weights and `idx` the `k` chosen ids.
pub(crate) fn gate_up(
    x: &Array,
    both: &Quantized,
    spec: QuantSpec,
    idx: &Array,
    f: i32,
) -> Result<Array> {
    let (dtype, k) = (x.dtype(), idx.size() as i32);
    let hid = x.dim(-1);
    let r = fast_path().rows_per_warp;
    let warps = (f + r - 1) / r;
    let out = kernel(&GATE_UP)?.launch(&Launch {
        inputs: &[x, &both.weight, &both.scales, biases(both), idx],
        output_shapes: &[&[k, f]],
        output_dtypes: &[dtype],
        grid: [warps * 32, k, 1],
        threadgroup: [128, 1, 1],
        template: &template(dtype, spec, hid, ("F", f)),
        init_value: None,
    })?;
    Ok(out.into_iter().next().expect("one output"))
}

/// `[n]`: the chosen experts' down products of `act` (`[k, F]`), weighted by `scores` (`k`)
/// and summed.
pub(crate) fn down(
    act: &Array,
    down: &Quantized,
    spec: QuantSpec,
    idx: &Array,
    scores: &Array,
    n: i32,
) -> Result<Array> {
    let (dtype, k, f) = (act.dtype(), act.dim(0), act.dim(-1));
    let r = fast_path().rows_per_warp;
    let warps = (n + r - 1) / r;
    let mut t = template(dtype, spec, f, ("N", n));
    t.push(("TOPK", TemplateArg::Int(k)));
    let out = kernel(&DOWN)?.launch(&Launch {
        inputs: &[
            act,
            &down.weight,
            &down.scales,
            biases(down),
            idx,
            &scores.astype(dtype)?,
        ],
        output_shapes: &[&[n]],
        output_dtypes: &[dtype],
        grid: [warps * 32, 1, 1],
        threadgroup: [128, 1, 1],
        template: &t,
        init_value: None,
    })?;
    Ok(out.into_iter().next().expect("one output"))
}
