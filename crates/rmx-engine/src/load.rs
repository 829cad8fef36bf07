//! What the engine thread is doing, for `rmx ps` and the daemon's metrics. A sequence counts from
//! its admission until its last event is sent, not until the engine loop next looks: a client
//! that has its whole answer never finds its sequence still running.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Default)]
pub(crate) struct Load {
    /// Admitted sequences that have not sent their last event.
    live: AtomicUsize,
    /// Of those, prefilled ones waiting for a row in the full batch.
    waiting: AtomicUsize,
    /// Bytes of the live sequences' KV caches, and what they would take unquantized.
    kv: AtomicUsize,
    kv_plain: AtomicUsize,
}

impl Load {
    /// A new sequence's share of the count, given back by [`Busy::release`] or on drop.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        self.live.fetch_add(1, Ordering::Relaxed);
        Busy {
            load: self.clone(),
            released: AtomicBool::new(false),
        }
    }

    pub(crate) fn set_waiting(&self, n: usize) {
        self.waiting.store(n, Ordering::Relaxed);
    }

    /// Sequences being prefilled or decoded.
    pub(crate) fn running(&self) -> usize {
        let live = self.live.load(Ordering::Relaxed);
        live.saturating_sub(self.waiting())
    }

    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    pub(crate) fn set_kv(&self, (bytes, plain): (usize, usize)) {
        self.kv.store(bytes, Ordering::Relaxed);
        self.kv_plain.store(plain, Ordering::Relaxed);
    }

    /// (bytes, bytes unquantized) of the live sequences' KV caches, as of the last step.
    pub(crate) fn kv(&self) -> (usize, usize) {
        (
            self.kv.load(Ordering::Relaxed),
            self.kv_plain.load(Ordering::Relaxed),
        )
    }
}

/// One sequence in [`Load`]'s count.
pub(crate) struct Busy {
    load: Arc<Load>,
    released: AtomicBool,
}

impl Busy {
    /// The sequence is over (its last event goes out next); later calls do nothing.
    pub(crate) fn release(&self) {
        if !self.released.swap(true, Ordering::Relaxed) {
            self.load.live.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequence_counts_until_released_or_dropped_once() {
        let load = Arc::new(Load::default());
        let a = load.busy();
        let b = load.busy();
        load.set_waiting(1);
        assert_eq!((load.running(), load.waiting()), (1, 1));
        a.release();
        a.release();
        assert_eq!(load.running(), 0);
        load.set_waiting(0);
        assert_eq!(load.running(), 1);
        drop(a);
        drop(b);
        assert_eq!(load.running(), 0);
    }
}
