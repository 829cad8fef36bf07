//! The attention masks the caches hand out, as mlx-lm builds them.

use rmx_mlx::Array;

use crate::error::Result;

/// The mask an attention call uses, as mlx-lm passes it to `scaled_dot_product_attention`.
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
pub fn causal_mask(n: i32, offset: i32, window: Option<i32>) -> Result<Array> {
    let cols = offset + n;
    let mut m = Vec::with_capacity((n * cols) as usize);
    for i in 0..n {
        let l = offset + i;
        for r in 0..cols {
            m.push(l >= r && window.is_none_or(|w| l < r + w));
        }
    }
    Ok(Array::from_slice(&m, &[n, cols])?)
}
