//! Evaluation. MLX's scheduler and caches are process-global, so every evaluation (and every
//! read-back, which evaluates) holds one process-wide lock: engine threads of different models
//! build graphs in parallel but never evaluate at the same moment.

use std::sync::{Mutex, MutexGuard};

use crate::array::{Array, List};
use crate::error::{check, Result};
use crate::ffi::bridge;

static EVAL_LOCK: Mutex<()> = Mutex::new(());

pub(crate) fn lock() -> MutexGuard<'static, ()> {
    // A panic while evaluating leaves nothing half-updated on our side, so poisoning is ignored.
    EVAL_LOCK.lock().unwrap_or_else(|e| e.into_inner())
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
