//! A token's q/k/v heads from the fused QKV product (norms and rope in the kernel), a prompt
//! chunk's heads, and decode attention in one kernel, alone or for a batch.

use rmx_mlx::{Array, Dtype, Launch, TemplateArg};

use super::launch::{consts, kernel, on_device, pos_array, Spec};
use super::settings::fast_path;
use crate::error::Result;

const DECODE_ATTN: Spec = Spec {
    name: "rmx_decode_attn",
    section: "attn",
    inputs: &["qs", "ks", "vs", "qn", "kn", "inv_freq", "pos", "par", "kc", "vc"],
    outputs: &["o"],
    body: "rmx::decode_attn<T, H, KV, D, NORM, TRADITIONAL, QOFF, KOFF, VOFF, ROT, GATED>(qs, ks, vs, qn, kn, inv_freq, pos, par, kc, vc, o);",
};
const DECODE_ATTN_BATCH: Spec = Spec {
    name: "rmx_decode_attn_batch",
    section: "attn",
    inputs: &["qkv", "qn", "kn", "inv_freq", "pos", "pads", "par", "kc", "vc"],
    outputs: &["o"],
    body: "rmx::decode_attn_batch<T, H, KV, D, NORM, TRADITIONAL, S>(qkv, qn, kn, inv_freq, pos, pads, par, kc, vc, o);",
};
const QKV_ROPE: Spec = Spec {
    name: "rmx_qkv_rope",
    section: "qkv_rope",
    inputs: &["qkv", "qn", "kn", "inv_freq", "offset", "eps"],
    outputs: &["q", "k", "v"],
    body: "rmx::qkv_rope<T, H, KV, D, NORM, TRADITIONAL>(qkv, qn, kn, inv_freq, offset, eps, q, k, v);",
};

const PREFILL_HEADS: Spec = Spec {
    name: "rmx_prefill_heads",
    section: "qkv_rope",
    inputs: &["qkv", "qn", "kn", "inv_freq", "pos", "eps"],
    outputs: &["q", "k", "v"],
    body: "rmx::prefill_heads<T, H, KV, D, NORM, TRADITIONAL>(qkv, qn, kn, inv_freq, pos, eps, q, k, v);",
};

/// The per-head work between a token's fused QKV product and attention.
pub struct QkvRope<'a> {
    pub heads: i32,
    pub kv_heads: i32,
    pub head_dim: i32,
    /// Per-head RMS norm weights for q and k, and their epsilon.
    pub norms: Option<(&'a Array, &'a Array, f32)>,
    pub traditional: bool,
    /// `[rotated / 2]` float32 inverse frequencies, rope scale folded in.
    pub inv_freq: &'a Array,
    /// Dimensions of a head the rope turns: `head_dim`, or fewer (Qwen3.5's partial rotary
    /// factor), which only `decode_attention` takes.
    pub rotated: i32,
    /// q's rows hold each head's queries then its output gate (Qwen3-Next / Qwen3.5), which
    /// only `decode_attention` takes.
    pub gated: bool,
}

impl<'a> QkvRope<'a> {
    /// The q and k norm weights and epsilon a kernel takes; without norms, `unused` stands in
    /// for both weights (the kernel does not read them).
    pub(crate) fn norm_inputs(&self, unused: &'a Array) -> (&'a Array, &'a Array, f32) {
        self.norms.unwrap_or((unused, unused, 0.0))
    }

    /// Whether the head kernels take rows of `dtype`: bf16 or f16, norm weights of the same.
    /// Only `decode_attention` takes a partial rope or an output gate.
    fn takes(&self, dtype: Dtype) -> bool {
        self.whole() && self.takes_any(dtype)
    }

    /// A rope over the whole head and no output gate.
    fn whole(&self) -> bool {
        self.rotated == self.head_dim && !self.gated
    }

    fn takes_any(&self, dtype: Dtype) -> bool {
        matches!(dtype, Dtype::Bf16 | Dtype::F16)
            && self
                .norms
                .is_none_or(|(q, k, _)| q.dtype() == dtype && k.dtype() == dtype)
    }

    /// The template arguments every head kernel (qkv_rope, prefill_heads, decode_attn) takes.
    fn template(&self, dtype: Dtype) -> [(&'static str, TemplateArg); 6] {
        [
            ("T", TemplateArg::Dtype(dtype)),
            ("H", TemplateArg::Int(self.heads)),
            ("KV", TemplateArg::Int(self.kv_heads)),
            ("D", TemplateArg::Int(self.head_dim)),
            ("NORM", TemplateArg::Bool(self.norms.is_some())),
            ("TRADITIONAL", TemplateArg::Bool(self.traditional)),
        ]
    }
}

/// Splits one token's `[1, 1, (H + 2 KV) * D]` QKV row into q `[1, H, 1, D]`, k and v
/// `[1, KV, 1, D]`, q and k normed and rotated at `offset`. `None` when the kernel does not
/// apply (not CUDA, not one token, odd head size or dtype).
pub fn qkv_rope(qkv: &Array, p: &QkvRope, offset: i32) -> Result<Option<[Array; 3]>> {
    let (h, kv, d) = (p.heads, p.kv_heads, p.head_dim);
    let dtype = qkv.dtype();
    if !fast_path().kernels
        || qkv.size() != ((h + 2 * kv) * d) as usize
        || d % 2 != 0
        || d / 2 > 1024
        || !p.takes(dtype)
    {
        return Ok(None);
    }
    let offset = Array::from_slice(&[offset], &[1])?;
    let (qn, kn, eps) = p.norm_inputs(qkv);
    let eps = consts(&[eps])?;
    let out = kernel(&QKV_ROPE)?.launch(&Launch {
        inputs: &[qkv, qn, kn, p.inv_freq, &offset, &eps],
        output_shapes: &[&[1, h, 1, d], &[1, kv, 1, d], &[1, kv, 1, d]],
        output_dtypes: &[dtype, dtype, dtype],
        grid: [(h + 2 * kv) * (d / 2), 1, 1],
        threadgroup: [d / 2, 1, 1],
        template: &p.template(dtype),
        init_value: None,
    })?;
    Ok(out.try_into().ok())
}

/// A prompt chunk's `[1, n, (H + 2 KV) * D]` QKV rows as attention's heads, in one kernel
/// (`prefill_heads` in kernels/qkv_rope.cuh): q `[1, H, n, D]` (a transposed view of `[1, n, H,
/// D]`), k and v `[1, KV, cap, D]` with positions `0..n` normed and rotated at `offset + row` and
/// `n..cap` zeroed. With `cap` past `n` the k and v are a new cache's buffers
/// (`KvCache::adopt`). `None` when the kernel does not apply (off the fast path, one row, odd
/// head size or dtype).
pub fn prefill_heads(
    qkv: &Array,
    p: &QkvRope,
    offset: i32,
    cap: i32,
) -> Result<Option<[Array; 3]>> {
    let (h, kv, d) = (p.heads, p.kv_heads, p.head_dim);
    let dtype = qkv.dtype();
    let n = qkv.dim(1);
    if !fast_path().prefill_heads
        || qkv.ndim() != 3
        || qkv.dim(0) != 1
        || n < 2
        || cap < n
        || cap > 65535
        || qkv.dim(2) != (h + 2 * kv) * d
        || d % 64 != 0
        || d > 2048
        || !p.takes(dtype)
    {
        return Ok(None);
    }
    // Every layer of the chunk shares one `{offset, n}`.
    let pos = pos_array([offset, n])?;
    let (qn, kn, eps) = p.norm_inputs(qkv);
    let eps = consts(&[eps])?;
    let out = kernel(&PREFILL_HEADS)?.launch(&Launch {
        inputs: &[qkv, qn, kn, p.inv_freq, &pos, &eps],
        output_shapes: &[&[1, n, h, d], &[1, kv, cap, d], &[1, kv, cap, d]],
        output_dtypes: &[dtype, dtype, dtype],
        grid: [(h + 2 * kv) * (d / 2), cap, 1],
        threadgroup: [d / 2, 1, 1],
        template: &p.template(dtype),
        init_value: None,
    })?;
    let Ok([q, k, v]) = <[Array; 3]>::try_from(out) else {
        return Ok(None);
    };
    Ok(Some([q.transpose(&[0, 2, 1, 3])?, k, v]))
}

/// Where a decode step's q, k and v rows are.
pub enum QkvRows<'a> {
    /// One `[1, 1, (H + 2 KV) * D]` row from the fused projection.
    Fused(&'a Array),
    /// Three rows, `[1, 1, H * D]` and `[1, 1, KV * D]` twice.
    Separate([&'a Array; 3]),
}

/// Whether `decode_attention` serves a step with `dtype` rows at a context of `positions`
/// (the new token included); checked before the cache hands out a slot.
pub fn decode_attention_fits(p: &QkvRope, dtype: Dtype, positions: i32) -> bool {
    positions <= fast_path().attn_max && heads_fit(p) && p.takes_any(dtype)
}

/// Whether the attention kernels take these heads: the one-launch layer kernel at any context
/// (its positions are split across up to 64 warps a head), `decode_attention` up to
/// `RMX_FAST_ATTN_MAX`.
pub fn attention_heads_fit(p: &QkvRope, dtype: Dtype) -> bool {
    heads_fit(p) && p.takes(dtype)
}

/// Whether the one-launch layer kernel's attention phase takes these heads: `attention_heads_fit`'s
/// shapes with an output gate or a partial rope too, whose rotated halves are whole lanes of a
/// warp's row, a power of two of them (kernels/layer.cuh `head_rope`; Qwen3.5's 64 of 256 are 4).
pub fn layer_heads_fit(p: &QkvRope, dtype: Dtype) -> bool {
    heads_fit(p) && p.takes_any(dtype) && rope_lanes_fit(p.head_dim, p.rotated)
}

/// Whether `head_rope` turns `rotated` of `head_dim` dimensions: each half of them whole lanes
/// of a warp's row (`head_dim / 32` values a lane), a power of two of lanes.
fn rope_lanes_fit(head_dim: i32, rotated: i32) -> bool {
    let per_lane = head_dim / 32;
    let half = rotated / 2;
    per_lane > 0 && half > 0 && half % per_lane == 0 && (half / per_lane).count_ones() == 1
}

/// The head shape `decode_attn` takes (whole warps of rotary pairs, its shared memory), with
/// a partial rope of an even number of dimensions.
fn heads_fit(p: &QkvRope) -> bool {
    let (h, kv, d) = (p.heads, p.kv_heads, p.head_dim);
    fast_path().kernels
        && kv > 0
        && h % kv == 0
        && d % 64 == 0
        && d <= 256
        && p.rotated > 0
        && p.rotated % 2 == 0
        && p.rotated <= d
}

/// One token's attention in one kernel (see `decode_attn` in kernels/attn.cuh): q and k
/// normed and roped at `offset`, k and v written into `keys`/`values` (`[1, KV, cap, D]`, owned
/// by the cache) at `offset`, attention over positions `0..=offset`. Returns `[1, 1, H * D]`.
/// The caller has checked `decode_attention_fits`.
pub fn decode_attention(
    rows: &QkvRows,
    p: &QkvRope,
    scale: f32,
    keys: &Array,
    values: &Array,
    offset: i32,
) -> Result<Array> {
    let (h, kv, d) = (p.heads, p.kv_heads, p.head_dim);
    // A gated q row holds 2 D values a head.
    let qd = if p.gated { 2 * h * d } else { h * d };
    let (srcs, offs) = match rows {
        QkvRows::Fused(r) => ([*r; 3], [0, qd, qd + kv * d]),
        QkvRows::Separate(a) => (*a, [0; 3]),
    };
    let dtype = srcs[0].dtype();
    let cap = keys.dim(2);
    let pos = pos_array([offset, cap])?;
    let (qn, kn, eps) = p.norm_inputs(srcs[0]);
    let par = consts(&[eps, scale])?;
    let out = kernel(&DECODE_ATTN)?.launch(&Launch {
        inputs: &[
            srcs[0], srcs[1], srcs[2], qn, kn, p.inv_freq, &pos, &par, keys, values,
        ],
        output_shapes: &[&[1, 1, h * d]],
        output_dtypes: &[dtype],
        grid: [h * 1024, 1, 1],
        threadgroup: [1024, 1, 1],
        template: &[
            p.template(dtype).as_slice(),
            &[
                ("QOFF", TemplateArg::Int(offs[0])),
                ("KOFF", TemplateArg::Int(offs[1])),
                ("VOFF", TemplateArg::Int(offs[2])),
                ("ROT", TemplateArg::Int(p.rotated)),
                ("GATED", TemplateArg::Bool(p.gated)),
            ],
        ]
        .concat(),
        init_value: None,
    })?;
    Ok(out.into_iter().next().expect("one output"))
}

/// A batch's decode step of attention in one kernel (`decode_attn_batch`): for each of the B
/// rows of `qkv` (`[B, 1, (H + 2 KV) * D]`, one fused product), q and k normed and roped at the
/// row's position (`col - pads[b]`), k and v written at column `col` of the left-padded
/// `keys`/`values` (`[B, KV, cap, D]`, owned by the batch cache), attention over the row's
/// columns `pads[b]..=col`. Returns `[B, 1, H * D]`. The caller has checked
/// `decode_attention_fits` for `col + 1` positions.
pub fn decode_attention_batch(
    qkv: &Array,
    p: &QkvRope,
    scale: f32,
    keys: &Array,
    values: &Array,
    col: i32,
    pads: &Array,
) -> Result<Array> {
    let (h, kv, d) = (p.heads, p.kv_heads, p.head_dim);
    let b = qkv.dim(0);
    let dtype = qkv.dtype();
    let pos = on_device(Array::from_slice(&[col, keys.dim(2)], &[2])?)?;
    let (qn, kn, eps) = p.norm_inputs(qkv);
    let par = consts(&[eps, scale])?;
    let out = kernel(&DECODE_ATTN_BATCH)?.launch(&Launch {
        inputs: &[qkv, qn, kn, p.inv_freq, &pos, pads, &par, keys, values],
        output_shapes: &[&[b, 1, h * d]],
        output_dtypes: &[dtype],
        grid: [h * 1024, b, 1],
        threadgroup: [1024, 1, 1],
        template: &[
            p.template(dtype).as_slice(),
            &[("S", TemplateArg::Int((h + 2 * kv) * d))],
        ]
        .concat(),
        init_value: None,
    })?;
    Ok(out.into_iter().next().expect("one output"))
}

#[cfg(test)]
mod tests {
    use super::rope_lanes_fit;

    #[test]
    fn the_layer_kernel_turns_whole_lanes_of_a_head() {
        // Whole heads of 64, 128, 256; Qwen3.5's 64 of 256 (four lanes a half).
        for (d, r) in [(64, 64), (128, 128), (256, 256), (256, 64), (128, 64)] {
            assert!(rope_lanes_fit(d, r), "{r} of {d}");
        }
        // Phi-4-mini's 96 of 128 (12 values a half: three lanes), halves inside a lane, none.
        for (d, r) in [(128, 96), (256, 8), (128, 0), (256, 192)] {
            assert!(!rope_lanes_fit(d, r), "{r} of {d}");
        }
    }
}
