//! mlx-lm's greedy choice, `argmax(logits - logsumexp(logits))` with the first index winning a
//! tie, as one kernel (kernels/pick.cuh) instead of a subtract and MLX's one-block argmax a row.

use rmx_mlx::{Array, Dtype, Launch, TemplateArg};

use super::launch::{counters, kernel, Spec};
use super::settings::fused_tail;
use crate::error::Result;

/// The most rows one launch takes (a batch's step, a verify's block); more go to MLX's ops.
const RMAX: i32 = 64;
/// Threads a block, and blocks sharing a row: 16K threads over 128K logits read 8 each.
const NT: i32 = 256;
const BPR: i32 = 64;

const PICK: Spec = Spec {
    name: "rmx_greedy_pick",
    section: "pick",
    inputs: &["logits", "lse", "keys"],
    outputs: &["tokens"],
    body: "rmx::greedy_pick<T, NT, BPR, RMAX>(logits, lse, V, keys, tokens);",
};

/// Each row's greedy token (u32, `logits`' shape without its last axis) from `logits` and
/// their `lse = logits.logsumexp(-1, keepdims)`: the token `(logits - lse).argmax(-1)` gives,
/// from the same rounded values, in one launch where `fused_tail` says, else by those ops.
pub fn greedy_tokens(logits: &Array, lse: &Array) -> Result<Array> {
    let shape = logits.shape();
    let v = *shape.last().unwrap_or(&0);
    let rows: i32 = shape[..shape.len().saturating_sub(1)].iter().product();
    let fits = fused_tail()
        && matches!(logits.dtype(), Dtype::Bf16 | Dtype::F16)
        && lse.dtype() == logits.dtype()
        && lse.size() == rows as usize
        && (1..=RMAX).contains(&rows)
        && v > 0;
    if !fits {
        return Ok(logits.subtract(lse)?.argmax(-1, false)?);
    }
    let flat = logits.reshape(&[rows, v])?;
    let lse = lse.reshape(&[rows])?;
    // The rows' keys and counts, zero between launches (each launch's last block zeroes its row's).
    let keys = counters("greedy_pick", 3 * RMAX as usize)?;
    let out = kernel(&PICK)?.launch(&Launch {
        inputs: &[&flat, &lse, &keys],
        output_shapes: &[&[rows]],
        output_dtypes: &[Dtype::U32],
        grid: [NT * BPR, rows, 1],
        threadgroup: [NT, 1, 1],
        template: &[
            ("T", TemplateArg::Dtype(logits.dtype())),
            ("NT", TemplateArg::Int(NT)),
            ("BPR", TemplateArg::Int(BPR)),
            ("RMAX", TemplateArg::Int(RMAX)),
            ("V", TemplateArg::Int(v)),
        ],
        init_value: None,
    })?;
    let tokens = out.into_iter().next().expect("one output");
    Ok(tokens.reshape(&shape[..shape.len() - 1])?)
}
