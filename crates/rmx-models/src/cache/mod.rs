//! Per-sequence key/value caches, ported from mlx-lm's `KVCache` and `RotatingKVCache`
//! (step-wise preallocation, the rotating buffer's order, its masks) because the order in which
//! attention sums its keys decides the low bits of the logits; mlx-lm's `QuantizedKVCache`
//! (keys and values stored 4- or 8-bit, quantized.rs); the recurrent state of linear
//! attention beside them; and `LayerCache`, the one a layer holds.

mod batch;
mod buffer;
mod kv;
mod layer;
mod mask;
mod quantized;
mod recurrent;
mod rotating;

pub(crate) use batch::index as batch_rows;
#[cfg(test)]
pub(crate) use buffer::seq_slice;
pub use kv::KvCache;
pub use layer::LayerCache;
pub use mask::{causal_mask, image_blocks, with_blocks, AttnMask};
pub use quantized::{quantize_caches, KvQuant, QuantizedKvCache};
pub use recurrent::RecurrentCache;
pub use rotating::RotatingKvCache;

pub use batch::BatchKvCache;
