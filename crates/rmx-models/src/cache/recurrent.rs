//! A linear-attention layer's state (mlx-lm's `ArraysCache`).

use rmx_mlx::Array;

/// A linear-attention (Gated DeltaNet) layer's state, mlx-lm's `ArraysCache(size=2)`: the
/// last `kernel - 1` inputs of its causal convolution `[B, kernel - 1, channels]` and the
/// recurrent state `[B, heads, value dim, key dim]` (float32). Unlike a KV cache it cannot be
/// cut back to an earlier position, only replaced by a copy taken there.
/// A clone shares its arrays, which no op writes in place while the clone holds them: a
/// speculative block keeps one to go back to (rmx-engine speculative.rs).
#[derive(Default, Clone)]
pub struct RecurrentCache {
    pub conv: Option<Array>,
    pub state: Option<Array>,
    /// Positions seen.
    pub offset: i32,
}

impl RecurrentCache {
    /// A fresh cache: no inputs seen, a zero state (made at the first chunk, in its dtype).
    pub fn new() -> RecurrentCache {
        RecurrentCache::default()
    }

    pub fn state(&self) -> Vec<&Array> {
        self.conv.iter().chain(self.state.iter()).collect()
    }
}
