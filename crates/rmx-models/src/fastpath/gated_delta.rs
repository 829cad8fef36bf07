//! Gated DeltaNet's recurrence (Qwen3.5's linear attention) over a whole chunk in one launch;
//! mlx-lm has only a Metal kernel for it.

use rmx_mlx::{Array, Dtype, Launch, TemplateArg};

use super::launch::{consts, kernel, on_device, Spec};
use super::settings::fast_path;
use crate::error::Result;

const GATED_DELTA: Spec = Spec {
    name: "rmx_gated_delta",
    section: "gated_delta",
    inputs: &["q", "k", "v", "g", "beta", "state_in", "tlen"],
    outputs: &["y", "state_out"],
    body: "rmx::gated_delta<T, Dk, Dv, Hk, Hv>(q, k, v, g, beta, state_in, tlen, y, state_out);",
};

/// Whether Gated DeltaNet's recurrence of a layer with heads of `k_dim` runs as rmx's kernel
/// (decided once, at load): on CUDA, for key heads of a multiple of 32 (a warp's lanes split a
/// state row). mlx-lm has only a Metal kernel for it; on CUDA it runs the rule op by op, token
/// by token (../shared/PERF-BASELINES.md: 323 tok/s prefill for a Qwen3.5-9B shape).
pub fn gated_delta_fits(k_dim: i32) -> bool {
    fast_path().kernels && k_dim >= 32 && k_dim % 32 == 0
}

/// The gated delta rule over every token of q `[B, T, Hk, Dk]`, k, v `[B, T, Hv, Dv]`, g
/// (float32) and beta `[B, T, Hv]` from `state` (float32 `[B, Hv, Dv, Dk]`) in one launch:
/// `y` `[B, T, Hv, Dv]` in q's dtype and the new state (kernels/gated_delta.cuh).
pub fn gated_delta(
    q: &Array,
    k: &Array,
    v: &Array,
    g: &Array,
    beta: &Array,
    state: &Array,
) -> Result<(Array, Array)> {
    let (qs, vs) = (q.shape(), v.shape());
    let (b, t, hk, dk) = (qs[0], qs[1], qs[2], qs[3]);
    let (hv, dv) = (vs[2], vs[3]);
    let dtype = q.dtype();
    // A decode step's T = 1 is one cached constant; a prompt chunk's length is copied per
    // launch, so the table of constants does not grow with every prompt length seen.
    let tlen = if t == 1 {
        consts(&[1.0])?
    } else {
        on_device(Array::from_slice(&[t as f32], &[1])?)?
    };
    let out = kernel(&GATED_DELTA)?.launch(&Launch {
        inputs: &[
            q,
            k,
            &v.astype(dtype)?,
            g,
            &beta.astype(dtype)?,
            state,
            &tlen,
        ],
        output_shapes: &[&[b, t, hv, dv], &state.shape()],
        output_dtypes: &[dtype, Dtype::F32],
        grid: [32, dv, b * hv],
        threadgroup: [32, 4, 1],
        template: &[
            ("T", TemplateArg::Dtype(dtype)),
            ("Dk", TemplateArg::Int(dk)),
            ("Dv", TemplateArg::Int(dv)),
            ("Hk", TemplateArg::Int(hk)),
            ("Hv", TemplateArg::Int(hv)),
        ],
        init_value: None,
    })?;
    let mut it = out.into_iter();
    match (it.next(), it.next()) {
        (Some(y), Some(s)) => Ok((y, s)),
        _ => unreachable!("the kernel has two outputs"),
    }
}
