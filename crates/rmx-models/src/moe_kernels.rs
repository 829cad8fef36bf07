//! A mixture-of-experts layer's decode step on the CUDA fast path: the chosen experts' fused
//! gate/up products with SwiGLU (or GPT-OSS's biases and swiglu_oai) in one launch, their down products weighted and summed in a
//! second (kernels/moe.cuh), where MLX runs three gather_qmm launches and the ops
//! around them. Measured on the H100 before these (docs/perf.md session 8): Qwen3-30B-A3B 4-bit
//! decoded at 59.6 tok/s with MLX's ops, 1.34x mlx-lm.

use rmx_mlx::quant::{QuantMode, QuantSpec, Quantized};
use rmx_mlx::{Array, Dtype, Launch, TemplateArg};

use crate::error::Result;
use crate::fastpath::{consts, fast_path, kernel, Spec};
use crate::moe::Routing;

const GATE_UP: Spec = Spec {
    name: "rmx_moe_gate_up",
    section: "moe",
    inputs: &["x", "w", "scales", "biases", "idx"],
    outputs: &["y"],
    body: "rmx::qgemv_swiglu<T, BITS, G, ROWS, K, false, true>(x, w, scales, biases, y, F, nullptr, nullptr, idx);",
};
/// GATE_UP of `rms_norm(x)` with the norm's weight `nw` and epsilon: the layer's pre-norm in the
/// same launch.
const GATE_UP_NORM: Spec = Spec {
    name: "rmx_moe_gate_up_norm",
    section: "moe",
    inputs: &["x", "w", "scales", "biases", "nw", "eps", "idx"],
    outputs: &["y"],
    body: "rmx::qgemv_swiglu<T, BITS, G, ROWS, K, true, true>(x, w, scales, biases, y, F, nw, eps, idx);",
};
/// GATE_UP_OAI of `rms_norm(x)`.
const GATE_UP_OAI_NORM: Spec = Spec {
    name: "rmx_moe_gate_up_oai_norm",
    section: "moe",
    inputs: &["x", "w", "scales", "biases", "nw", "eps", "idx", "lb", "ap"],
    outputs: &["y"],
    body: "rmx::qgemv_swiglu<T, BITS, G, ROWS, K, true, true, true>(x, w, scales, biases, y, F, nw, eps, idx, lb, ap);",
};
/// GATE_UP for GPT-OSS's experts: their linear biases `lb` (`[E, 2F]`) and swiglu_oai with
/// `ap` = {alpha, limit}.
const GATE_UP_OAI: Spec = Spec {
    name: "rmx_moe_gate_up_oai",
    section: "moe",
    inputs: &["x", "w", "scales", "biases", "idx", "lb", "ap"],
    outputs: &["y"],
    body: "rmx::qgemv_swiglu<T, BITS, G, ROWS, K, false, true, true>(x, w, scales, biases, y, F, nullptr, nullptr, idx, lb, ap);",
};
const DOWN: Spec = Spec {
    name: "rmx_moe_down",
    section: "moe",
    inputs: &["act", "w", "scales", "biases", "idx", "scores"],
    outputs: &["y"],
    body: "rmx::moe_down<T, BITS, G, ROWS, K, TOPK>(act, w, scales, biases, idx, scores, y, N);",
};

/// DOWN with each expert's linear bias `db` (`[E, N]`) added to its product.
const DOWN_BIAS: Spec = Spec {
    name: "rmx_moe_down_bias",
    section: "moe",
    inputs: &["act", "w", "scales", "biases", "idx", "scores", "db"],
    outputs: &["y"],
    body: "rmx::moe_down<T, BITS, G, ROWS, K, TOPK, true>(act, w, scales, biases, idx, scores, y, N, db);",
};
/// DOWN plus the residual `res`.
const DOWN_RES: Spec = Spec {
    name: "rmx_moe_down_res",
    section: "moe",
    inputs: &["act", "w", "scales", "biases", "idx", "scores", "res"],
    outputs: &["y"],
    body: "rmx::moe_down<T, BITS, G, ROWS, K, TOPK, false, true>(act, w, scales, biases, idx, scores, y, N, nullptr, res);",
};
/// DOWN_BIAS plus the residual `res`.
const DOWN_BIAS_RES: Spec = Spec {
    name: "rmx_moe_down_bias_res",
    section: "moe",
    inputs: &["act", "w", "scales", "biases", "idx", "scores", "db", "res"],
    outputs: &["y"],
    body: "rmx::moe_down<T, BITS, G, ROWS, K, TOPK, true, true>(act, w, scales, biases, idx, scores, y, N, db, res);",
};

const ROUTE: Spec = Spec {
    name: "rmx_moe_route",
    section: "moe",
    inputs: &["logits"],
    outputs: &["idx", "scores"],
    body: "rmx::moe_route<T, E, TOPK, MODE>(logits, idx, scores);",
};

/// GPT-OSS's experts as the gate/up kernel takes them: their gate/up linear biases (`[E, 2F]`,
/// gate's first) and swiglu_oai's alpha and limit.
pub(crate) struct Oai<'a> {
    pub bias: &'a Array,
    pub alpha: f32,
    pub limit: f32,
}

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

/// `[k, F]`: silu(x . gate) * (x . up) of each chosen expert (or GPT-OSS's activation of the
/// biased products, with `oai`), for one token `x` (`[.., hid]`, of `rms_norm(x)` with `norm`'s
/// weight and epsilon), `both` the experts' fused `[E, 2F, hid]` gate/up weights and `idx` the
/// `k` chosen ids.
pub(crate) fn gate_up(
    x: &Array,
    both: &Quantized,
    spec: QuantSpec,
    idx: &Array,
    f: i32,
    oai: Option<Oai<'_>>,
    norm: Option<(&Array, f32)>,
) -> Result<Array> {
    let (dtype, k) = (x.dtype(), idx.size() as i32);
    let hid = x.dim(-1);
    let r = fast_path().rows_per_warp;
    let warps = (f + r - 1) / r;
    let (params, eps);
    let mut inputs = vec![x, &both.weight, &both.scales, biases(both)];
    if let Some((nw, e)) = norm {
        eps = consts(&[e])?;
        inputs.extend([nw, &eps]);
    }
    inputs.push(idx);
    let spec_k = match (&oai, norm.is_some()) {
        (Some(o), normed) => {
            params = consts(&[o.alpha, o.limit])?;
            inputs.extend([o.bias, &params]);
            if normed {
                &GATE_UP_OAI_NORM
            } else {
                &GATE_UP_OAI
            }
        }
        (None, true) => &GATE_UP_NORM,
        (None, false) => &GATE_UP,
    };
    let out = kernel(spec_k)?.launch(&Launch {
        inputs: &inputs,
        output_shapes: &[&[k, f]],
        output_dtypes: &[dtype],
        grid: [warps * 32, k, 1],
        threadgroup: [128, 1, 1],
        template: &template(dtype, spec, hid, ("F", f)),
        init_value: None,
    })?;
    Ok(out.into_iter().next().expect("one output"))
}

/// `[n]`: the chosen experts' down products of `act` (`[k, F]`), each plus its expert's `bias`
/// row (`[E, n]`) where there is one, weighted by `scores` (`k`) and summed, plus `res` (`n`
/// values, the residual stream) where given.
#[allow(clippy::too_many_arguments)]
pub(crate) fn down(
    act: &Array,
    down: &Quantized,
    spec: QuantSpec,
    idx: &Array,
    scores: &Array,
    n: i32,
    bias: Option<&Array>,
    res: Option<&Array>,
) -> Result<Array> {
    let (dtype, k, f) = (act.dtype(), act.dim(0), act.dim(-1));
    let r = fast_path().rows_per_warp;
    let warps = (n + r - 1) / r;
    let mut t = template(dtype, spec, f, ("N", n));
    t.push(("TOPK", TemplateArg::Int(k)));
    let scores = scores.astype(dtype)?;
    let mut inputs = vec![act, &down.weight, &down.scales, biases(down), idx, &scores];
    inputs.extend(bias);
    inputs.extend(res);
    let spec_k = match (bias, res) {
        (Some(_), Some(_)) => &DOWN_BIAS_RES,
        (Some(_), None) => &DOWN_BIAS,
        (None, Some(_)) => &DOWN_RES,
        (None, None) => &DOWN,
    };
    let out = kernel(spec_k)?.launch(&Launch {
        inputs: &inputs,
        output_shapes: &[&[n]],
        output_dtypes: &[dtype],
        grid: [warps * 32, 1, 1],
        threadgroup: [128, 1, 1],
        template: &t,
        init_value: None,
    })?;
    Ok(out.into_iter().next().expect("one output"))
}

/// Most experts the router kernel takes (a warp's lanes hold E / 32 logits each).
const ROUTE_MAX_EXPERTS: i32 = 1024;

/// One token's router choice in one launch (`moe_route` in kernels/moe.cuh): the `top_k`
/// expert ids (uint32 `[.., top_k]`) and their weights (`[.., top_k]` in the logits' dtype), as
/// `routing` defines them. `None` off the fast path (`RMX_MOE_ROUTE=0` too), for several tokens
/// or more experts than it takes; MLX's ops route those.
pub(crate) fn route(
    logits: &Array,
    top_k: i32,
    routing: Routing,
) -> Result<Option<(Array, Array)>> {
    let (e, dtype) = (logits.dim(-1), logits.dtype());
    if !fast_path().moe_route
        || logits.size() != e as usize
        || !(1..=ROUTE_MAX_EXPERTS).contains(&e)
        // moe_route's renormalization sums up to eight 16-byte runs (seq_sum).
        || !(1..=e.min(32)).contains(&top_k)
        || !matches!(dtype, Dtype::Bf16 | Dtype::F16 | Dtype::F32)
    {
        return Ok(None);
    }
    let mode = routing.kernel_mode();
    let mut shape = logits.shape();
    *shape.last_mut().expect("logits have a last axis") = top_k;
    let out = kernel(&ROUTE)?.launch(&Launch {
        inputs: &[logits],
        output_shapes: &[&shape, &shape],
        output_dtypes: &[Dtype::U32, dtype],
        grid: [32, 1, 1],
        threadgroup: [32, 1, 1],
        template: &[
            ("T", TemplateArg::Dtype(dtype)),
            ("E", TemplateArg::Int(e)),
            ("TOPK", TemplateArg::Int(top_k)),
            ("MODE", TemplateArg::Int(mode)),
        ],
        init_value: None,
    })?;
    let [idx, scores] = <[Array; 2]>::try_from(out).expect("the kernel has two outputs");
    Ok(Some((idx, scores)))
}
