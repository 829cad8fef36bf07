//! Gated DeltaNet's recurrence (Qwen3.5's linear attention) over a whole chunk in one launch;
//! mlx-lm has only a Metal kernel for it.

use rmx_mlx::{Array, Dtype, Launch, TemplateArg};

use super::launch::{consts, kernel, on_device, Spec};
use super::settings::fast_path;
use crate::delta_net::DeltaNetShape;
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
    let [y, s] = <[Array; 2]>::try_from(out).expect("the kernel has two outputs");
    Ok((y, s))
}

const DELTA_STEP: Spec = Spec {
    name: "rmx_delta_step",
    section: "gated_delta",
    inputs: &[
        "proj", "conv_in", "conv_w", "dt_bias", "rate", "norm_w", "state_in", "eps",
    ],
    outputs: &["y", "conv_out", "state_out"],
    body: "rmx::delta_step<T, W, Dk, Dv, Hk, Hv, K, NT>(proj, conv_in, conv_w, dt_bias, rate, norm_w, state_in, eps, y, conv_out, state_out);",
};

/// Threads of a `delta_step` block (one sequence's value head): 32 warps take its value rows,
/// 4 each at Qwen3.5's 128. A head has one block (32 blocks a layer for Qwen3.5-9B), so the
/// state's 64 KB a head is read by as many warps as a block holds: with 8 warps (16 rows each,
/// one after another) the H100 decoded the Qwen3.5-9B shape at 234 tok/s (docs/perf.md).
const STEP_THREADS: i32 = 1024;

/// A DeltaNet layer's weights that `delta_step` reads (besides the joined projection's output).
pub struct DeltaStepWeights<'a> {
    /// `[channels, kernel, 1]`.
    pub conv: &'a Array,
    pub dt_bias: &'a Array,
    /// `-exp(A_log)`, float32.
    pub rate: &'a Array,
    pub norm: &'a Array,
    /// `{norm eps, q/k eps}`.
    pub eps: [f32; 2],
}

/// Whether a decode step of a DeltaNet layer of this shape (already through
/// `DeltaNetShape::check`: value heads a multiple of key heads) runs as `delta_step` (decided
/// once, at load, with `RMX_DELTA_STEP`): what `gated_delta` takes, a convolution of 2+ taps,
/// and heads whose q, k and v fit the block's shared memory.
pub fn delta_step_fits(s: &DeltaNetShape) -> bool {
    gated_delta_fits(s.k_dim)
        && fast_path().delta_step
        && s.conv_kernel >= 2
        && s.k_dim <= 512
        && (1..=1024).contains(&s.v_dim)
}

/// One decode step of a DeltaNet layer from its joined projection `proj` `[B, 1, P]` (`[qkv | z |
/// b | a]`), the convolution's cached inputs `conv` `[B, kernel - 1, channels]` and the state
/// (float32 `[B, Hv, Dv, Dk]`), in one launch (kernels/gated_delta.cuh `delta_step`): the
/// gated, normed output `[B, 1, Hv * Dv]` for the out projection, the new convolution cache and
/// the new state.
pub fn delta_step(
    proj: &Array,
    conv: &Array,
    state: &Array,
    w: &DeltaStepWeights,
    s: &DeltaNetShape,
) -> Result<(Array, Array, Array)> {
    let b = proj.dim(0);
    let dtype = proj.dtype();
    let eps = consts(&w.eps)?;
    let out = kernel(&DELTA_STEP)?.launch(&Launch {
        inputs: &[proj, conv, w.conv, w.dt_bias, w.rate, w.norm, state, &eps],
        output_shapes: &[&[b, 1, s.v_heads * s.v_dim], &conv.shape(), &state.shape()],
        output_dtypes: &[dtype, dtype, Dtype::F32],
        grid: [STEP_THREADS, 1, b * s.v_heads],
        threadgroup: [STEP_THREADS, 1, 1],
        template: &[
            ("T", TemplateArg::Dtype(dtype)),
            ("W", TemplateArg::Dtype(w.conv.dtype())),
            ("Dk", TemplateArg::Int(s.k_dim)),
            ("Dv", TemplateArg::Int(s.v_dim)),
            ("Hk", TemplateArg::Int(s.k_heads)),
            ("Hv", TemplateArg::Int(s.v_heads)),
            ("K", TemplateArg::Int(s.conv_kernel)),
            ("NT", TemplateArg::Int(STEP_THREADS)),
        ],
        init_value: None,
    })?;
    let [y, c, st] = <[Array; 3]>::try_from(out).expect("the kernel has three outputs");
    Ok((y, c, st))
}
