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
