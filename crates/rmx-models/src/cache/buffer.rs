//! The caches' buffers: `[B, heads, positions, dim]`, grown by whole steps as mlx-lm grows them.

use rmx_mlx::Array;

use crate::error::Result;

pub(crate) const STEP: i32 = 256;

pub(crate) fn seq_slice(a: &Array, start: i32, stop: i32) -> Result<Array> {
    Ok(a.slice_axis(2, start, stop)?)
}

pub(crate) fn write_at(dst: &Array, src: &Array, at: i32) -> Result<Array> {
    let s = src.shape();
    let start = [0, 0, at, 0];
    let stop = [s[0], s[1], at + s[2], s[3]];
    Ok(dst.slice_update(src, &start, &stop, &[1, 1, 1, 1])?)
}

/// What an update hands attention: the first `n` positions of the buffers, or the whole
/// buffers when they hold no more.
pub(crate) fn filled(keys: &Array, values: &Array, n: i32) -> Result<(Array, Array)> {
    Ok(if n < keys.dim(2) {
        (seq_slice(keys, 0, n)?, seq_slice(values, 0, n)?)
    } else {
        (keys.clone(), values.clone())
    })
}
