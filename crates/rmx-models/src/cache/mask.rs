//! The attention masks the caches hand out, as mlx-lm builds them.

use rmx_mlx::Array;

use crate::error::Result;

/// The mask an attention call uses, as mlx-lm passes it to `scaled_dot_product_attention`.
#[derive(Clone)]
pub enum AttnMask {
    None,
    Causal,
    Array(Array),
}

impl AttnMask {
    pub fn as_fast(&self) -> rmx_mlx::fast::Mask<'_> {
        match self {
            AttnMask::None => rmx_mlx::fast::Mask::None,
            AttnMask::Causal => rmx_mlx::fast::Mask::Causal,
            AttnMask::Array(a) => rmx_mlx::fast::Mask::Array(a),
        }
    }
}

/// mlx-lm's `create_causal_mask`: query rows at `offset..offset+n` against keys `0..offset+n`.
/// Built on the device from two index ranges (a long cache's mask is millions of entries).
pub fn causal_mask(n: i32, offset: i32, window: Option<i32>) -> Result<Array> {
    let cols = offset + n;
    let i32 = rmx_mlx::Dtype::I32;
    let q = Array::arange(offset as f64, cols as f64, 1.0, i32)?.reshape(&[n, 1])?;
    let r = Array::arange(0.0, cols as f64, 1.0, i32)?.reshape(&[1, cols])?;
    let mut m = q.greater_equal(&r)?;
    if let Some(w) = window {
        m = m.logical_and(&q.less(&r.add_scalar(f64::from(w))?)?)?;
    }
    Ok(m)
}

/// mlx-vlm's `_apply_blockwise_bidirectional_overlay` (Gemma 4's images): `base` (`[n, keys]`,
/// the mask of `n` new queries, whose own keys are its last `n` columns) widened so that a
/// query in a run of image placeholders sees every key of its run. `blocks[i]` numbers query
/// `i`'s run, -1 outside images. Built on the device, as `batch.rs` builds its masks.
pub fn with_blocks(base: &Array, blocks: &[i32]) -> Result<Array> {
    let n = blocks.len() as i32;
    let cols = base.dim(-1);
    let b = Array::from_slice(blocks, &[n])?;
    let (q, k) = (b.reshape(&[n, 1])?, b.reshape(&[1, n])?);
    let same = q.equal(&k)?.logical_and(&q.not_equal_scalar(-1.0)?)?;
    let no = Array::scalar_as(0.0, rmx_mlx::Dtype::Bool)?;
    let same = same.pad(&[1], &[cols - n], &[0], &no)?;
    Ok(base.logical_or(&same)?)
}

/// The runs of `image_token` in `ids` numbered from 0, as `with_blocks` takes them (-1 for
/// every other token).
pub fn image_blocks(ids: &[i32], image_token: i32) -> Vec<i32> {
    let mut run = -1;
    let mut prev = false;
    ids.iter()
        .map(|&t| {
            let image = t == image_token;
            if image && !prev {
                run += 1;
            }
            prev = image;
            if image {
                run
            } else {
                -1
            }
        })
        .collect()
}
