//! Evaluation, under the process-wide lock (`eval_lock.rs` says why).

use crate::array::{Array, List};
use crate::error::{check, Result};
use crate::eval_lock::lock;
use crate::ffi::bridge;

impl Array {
    /// Evaluates this array (see [`eval`] for several at once).
    pub fn eval(&self) -> Result<()> {
        eval(&[self])
    }
}

/// Evaluates the arrays, blocking until their values exist.
pub fn eval(arrays: &[&Array]) -> Result<()> {
    let l = List::of(arrays.iter().copied());
    let _g = lock();
    check("eval", bridge::eval(l.inner()))
}

/// Starts evaluating the arrays and returns at once; a later `eval` or read-back waits.
pub fn async_eval(arrays: &[&Array]) -> Result<()> {
    let l = List::of(arrays.iter().copied());
    let _g = lock();
    check("async_eval", bridge::async_eval(l.inner()))
}
