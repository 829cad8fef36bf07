//! MLX's fused kernels (`mlx::core::fast`): the normalizations, rotary embedding and attention
//! that a transformer layer spends its time in.

use crate::array::{Array, List};
use crate::error::{check, Result};
use crate::ffi::bridge;

pub fn rms_norm(x: &Array, weight: Option<&Array>, eps: f32) -> Result<Array> {
    // SAFETY: pointer from a live `&Array` or null.
    check("rms_norm", unsafe {
        bridge::rms_norm(x.inner(), Array::ptr(weight), eps)
    })
    .map(Array::from_raw)
}

pub fn layer_norm(
    x: &Array,
    weight: Option<&Array>,
    bias: Option<&Array>,
    eps: f32,
) -> Result<Array> {
    // SAFETY: pointers from live `&Array`s or null.
    check("layer_norm", unsafe {
        bridge::layer_norm(x.inner(), Array::ptr(weight), Array::ptr(bias), eps)
    })
    .map(Array::from_raw)
}

/// Rotary embedding parameters. Either `base` or `freqs` is given (MLX's rule).
#[derive(Clone, Copy)]
pub struct Rope<'a> {
    pub dims: i32,
    pub traditional: bool,
    pub base: Option<f32>,
    pub scale: f32,
    pub freqs: Option<&'a Array>,
}

/// Rotary embedding of `x` (`[..., seq, head_dim]`) at positions `offset..offset+seq`.
pub fn rope(x: &Array, p: Rope<'_>, offset: i32) -> Result<Array> {
    // SAFETY: pointer from a live `&Array` or null.
    check("rope", unsafe {
        bridge::rope(
            x.inner(),
            p.dims,
            p.traditional,
            p.base.is_some(),
            p.base.unwrap_or(0.0),
            p.scale,
            offset,
            Array::ptr(p.freqs),
        )
    })
    .map(Array::from_raw)
}

/// Rotary embedding with per-sequence offsets (`offset` is an int array, one per batch row).
pub fn rope_offsets(x: &Array, p: Rope<'_>, offset: &Array) -> Result<Array> {
    // SAFETY: pointer from a live `&Array` or null.
    check("rope", unsafe {
        bridge::rope_dynamic(
            x.inner(),
            p.dims,
            p.traditional,
            p.base.is_some(),
            p.base.unwrap_or(0.0),
            p.scale,
            offset.inner(),
            Array::ptr(p.freqs),
        )
    })
    .map(Array::from_raw)
}

/// The mask of an attention call.
pub enum Mask<'a> {
    None,
    Causal,
    /// Boolean (true = attend) or additive, broadcastable to `[B, H, Lq, Lk]`.
    Array(&'a Array),
}

/// `softmax(q k^T * scale + mask) v`, grouped-query aware (k/v may have fewer heads than q).
/// `sinks`: per-head attention-sink logits (gpt-oss).
pub fn scaled_dot_product_attention(
    q: &Array,
    k: &Array,
    v: &Array,
    scale: f32,
    mask: Mask<'_>,
    sinks: Option<&Array>,
) -> Result<Array> {
    let (mode, arr) = match mask {
        Mask::None => ("", None),
        Mask::Causal => ("causal", None),
        Mask::Array(a) => ("array", Some(a)),
    };
    // SAFETY: pointers from live `&Array`s or null.
    check("scaled_dot_product_attention", unsafe {
        bridge::sdpa(
            q.inner(),
            k.inner(),
            v.inner(),
            scale,
            mode,
            Array::ptr(arr),
            Array::ptr(sinks),
        )
    })
    .map(Array::from_raw)
}

/// The gated delta rule recurrence (Qwen3-Next / Qwen3.5 linear attention). Returns
/// `(output, final_state)`.
pub fn gated_delta_update(
    q: &Array,
    k: &Array,
    v: &Array,
    g: &Array,
    beta: &Array,
    state: Option<&Array>,
    mask: Option<&Array>,
) -> Result<(Array, Array)> {
    // SAFETY: pointers from live `&Array`s or null.
    let l = check("gated_delta_update", unsafe {
        bridge::gated_delta_update(
            q.inner(),
            k.inner(),
            v.inner(),
            g.inner(),
            beta.inner(),
            Array::ptr(state),
            Array::ptr(mask),
        )
    })?;
    let mut v = List(l).into_vec("gated_delta_update")?.into_iter();
    match (v.next(), v.next()) {
        (Some(y), Some(s)) => Ok((y, s)),
        _ => crate::error::invalid("gated_delta_update", "MLX returned fewer than two arrays"),
    }
}
