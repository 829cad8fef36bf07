//! An affine-quantized embedding's rows for token ids as one kernel (kernels/embed_rows.cuh)
//! instead of three takes and a dequantize.

use rmx_mlx::{Array, Dtype, Launch, TemplateArg};

use super::launch::{kernel, Spec};
use super::settings::fused_tail;
use crate::error::Result;

const EMBED: Spec = Spec {
    name: "rmx_embed_rows",
    section: "embed_rows",
    inputs: &["ids", "w", "scales", "biases"],
    outputs: &["y"],
    body: "rmx::embed_rows<T, I, BITS, G, DIM, VOCAB>(ids, w, scales, biases, y);",
};

/// `ids`' rows (`[..ids, dim]`) of the table `w` (`[vocab, dim * bits / 32]` u32) with its
/// `scales` and `biases` (`[vocab, dim / group]`), as `take` and affine `dequantize` make them;
/// `None` unless `fused_tail` says, or for what the kernel does not take.
pub fn embed_rows(
    ids: &Array,
    w: &Array,
    scales: &Array,
    biases: &Array,
    bits: i32,
    group: i32,
) -> Result<Option<Array>> {
    let dtype = scales.dtype();
    let (vocab, words) = (w.dim(0), w.dim(-1));
    let dim = words * 32 / bits.max(1);
    let n = ids.size() as i32;
    if !fused_tail()
        || !matches!(bits, 4 | 8)
        || !matches!(dtype, Dtype::Bf16 | Dtype::F16)
        || !matches!(ids.dtype(), Dtype::U32 | Dtype::I32)
        || w.ndim() != 2
        || w.dtype() != Dtype::U32
        || biases.dtype() != dtype
        || group <= 0
        || group % (32 / bits) != 0
        || dim % group != 0
        || scales.shape() != [vocab, dim / group]
        || biases.shape() != scales.shape()
        || !(1..=65535).contains(&n)
    {
        return Ok(None);
    }
    let flat = ids.reshape(&[n])?;
    let mut shape = ids.shape();
    shape.push(dim);
    let y = kernel(&EMBED)?.launch(&Launch {
        inputs: &[&flat, w, scales, biases],
        output_shapes: &[&shape],
        output_dtypes: &[dtype],
        grid: [words, n, 1],
        threadgroup: [words.min(256), 1, 1],
        template: &[
            ("T", TemplateArg::Dtype(dtype)),
            ("I", TemplateArg::Dtype(ids.dtype())),
            ("BITS", TemplateArg::Int(bits)),
            ("G", TemplateArg::Int(group)),
            ("DIM", TemplateArg::Int(dim)),
            ("VOCAB", TemplateArg::Int(vocab)),
        ],
        init_value: None,
    })?;
    Ok(y.into_iter().next())
}
