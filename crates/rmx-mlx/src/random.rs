//! Random numbers from explicit keys, so a request's seed decides its samples no matter what
//! else the engine is doing.

use crate::array::Array;
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::ffi::bridge;

/// A PRNG key for `seed`.
pub fn key(seed: u64) -> Result<Array> {
    check("random.key", bridge::random_key(seed)).map(Array::from_raw)
}

/// Splits a key into `num` new keys (shape `[num, 2]`).
pub fn split(key: &Array, num: i32) -> Result<Array> {
    check("random.split", bridge::random_split(key.inner(), num)).map(Array::from_raw)
}

/// Samples indices from unnormalized log-probabilities along `axis`.
pub fn categorical(logits: &Array, axis: i32, key: Option<&Array>) -> Result<Array> {
    // SAFETY: pointer from a live `&Array` or null.
    check("random.categorical", unsafe {
        bridge::random_categorical(logits.inner(), axis, Array::ptr(key))
    })
    .map(Array::from_raw)
}

pub fn uniform(
    low: f32,
    high: f32,
    shape: &[i32],
    dtype: Dtype,
    key: Option<&Array>,
) -> Result<Array> {
    let lo = Array::scalar(low)?;
    let hi = Array::scalar(high)?;
    // SAFETY: pointer from a live `&Array` or null.
    check("random.uniform", unsafe {
        bridge::random_uniform(lo.inner(), hi.inner(), shape, dtype.code(), Array::ptr(key))
    })
    .map(Array::from_raw)
}

pub fn normal(
    shape: &[i32],
    dtype: Dtype,
    loc: f32,
    scale: f32,
    key: Option<&Array>,
) -> Result<Array> {
    // SAFETY: pointer from a live `&Array` or null.
    check("random.normal", unsafe {
        bridge::random_normal(shape, dtype.code(), loc, scale, Array::ptr(key))
    })
    .map(Array::from_raw)
}

/// Seeds MLX's global generator (used when no key is passed).
pub fn seed(seed: u64) {
    bridge::random_seed(seed)
}
