//! MLX's allocator: how much memory arrays hold now, the peak, and the buffer cache.

use crate::ffi::bridge;

/// Bytes held by live arrays.
pub fn active_memory() -> usize {
    bridge::active_memory()
}

/// Highest `active_memory` since start or the last `reset_peak_memory`.
pub fn peak_memory() -> usize {
    bridge::peak_memory()
}

pub fn reset_peak_memory() {
    bridge::reset_peak_memory()
}

/// Bytes of freed buffers MLX keeps for reuse.
pub fn cache_memory() -> usize {
    bridge::cache_memory()
}

/// Caps the buffer cache; returns the previous limit.
pub fn set_cache_limit(bytes: usize) -> usize {
    bridge::set_cache_limit(bytes)
}

/// Caps total allocation; returns the previous limit.
pub fn set_memory_limit(bytes: usize) -> usize {
    bridge::set_memory_limit(bytes)
}

/// Returns cached buffers to the system.
pub fn clear_cache() {
    bridge::clear_cache()
}
