//! The process-wide evaluation lock. MLX's scheduler and caches are process-global, so every
//! evaluation (and every read-back, which evaluates) holds it: engine threads of different
//! models build graphs in parallel but never evaluate at the same moment. Below `Array` and
//! `eval`, which both take it.

use std::sync::{Mutex, MutexGuard, Once, TryLockError};
use std::time::Duration;

static EVAL_LOCK: Mutex<()> = Mutex::new(());

/// The lock, held while MLX evaluates (or reads back, or saves).
pub(crate) struct Held {
    _guard: MutexGuard<'static, ()>,
}

pub(crate) fn lock() -> Held {
    // A panic while evaluating leaves nothing half-updated on our side, so poisoning is ignored.
    Held {
        _guard: EVAL_LOCK.lock().unwrap_or_else(|e| e.into_inner()),
    }
}

impl Drop for Held {
    /// After the first evaluation (still under the lock): have the process's exit wait for an
    /// evaluation in flight. Registered then, the handler runs before the destructors of the
    /// statics MLX made in that evaluation (C++ runs exit handlers and static destructors in
    /// reverse order of registration).
    fn drop(&mut self) {
        static ONCE: Once = Once::new();
        ONCE.call_once(crate::ffi::bridge::guard_exit);
    }
}

/// At process exit: takes the lock, waiting up to half a second for an evaluation (or a save)
/// in flight, and keeps it, so no other thread evaluates while MLX's statics are torn down. An
/// engine thread still persisting a prefix when a program returned from main made the process
/// crash on its way out (SIGSEGV after a test binary's tests had passed). A lock held longer (a
/// collective on a dead peer) is left as it is: the exit goes on without it.
pub(crate) fn exit_guard() {
    for _ in 0..50 {
        match EVAL_LOCK.try_lock() {
            Ok(g) => return std::mem::forget(g),
            Err(TryLockError::Poisoned(p)) => return std::mem::forget(p.into_inner()),
            Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}
