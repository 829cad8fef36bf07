//! The process-wide evaluation lock. MLX's scheduler and caches are process-global, so every
//! evaluation (and every read-back, which evaluates) holds it: engine threads of different
//! models build graphs in parallel but never evaluate at the same moment. Below `Array` and
//! `eval`, which both take it.

use std::sync::{Mutex, MutexGuard};

static EVAL_LOCK: Mutex<()> = Mutex::new(());

pub(crate) fn lock() -> MutexGuard<'static, ()> {
    // A panic while evaluating leaves nothing half-updated on our side, so poisoning is ignored.
    EVAL_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
