//! Model families for rmx: one module per family, each a serde `Config` and a forward pass
//! written to match mlx-lm's op for op, and a registry that picks the family from config.json.

/// `fn name() -> T { value }` for each `name: T = value`: serde's `#[serde(default = "name")]`
/// takes a function, and the configs have many defaults. Defined before the modules so every
/// one of them sees it.
macro_rules! defaults {
    ($($f:ident: $t:ty = $v:expr),* $(,)?) => { $(fn $f() -> $t { $v })* };
}

mod attention;
pub mod batch_cache;
pub mod cache;
pub mod checkpoint;
mod config;
mod decode_layer;
mod decoder_layer;
mod delta_net;
pub mod embed;
mod error;
mod fastpath;
mod feed_forward;
mod gemma3;
mod gemma4;
mod gpt_oss;
mod hub_layout;
mod kernel_source;
mod layers;
mod llama;
mod mistral3;
mod mixer;
mod model;
mod moe;
mod moe_kernels;
pub mod mrope;
mod mtp;
mod parallel;
mod phi3;
mod pipeline;
mod product_attention;
mod qwen2;
mod qwen3;
mod qwen3_5;
mod qwen3_moe;
mod qwen3_next;
mod registry;
mod rope;
mod safetensors_part;
mod smollm3;
mod tensor_parallel;
pub mod vision;
mod weights;

pub use cache::LayerCache;
pub use config::QuantConfig;
pub use embed::{Embedder, Pooling};
pub use error::{ModelError, Result};
pub use fastpath::{greedy_tokens, set_model_hidden};
pub use model::{CausalLm, ModelInfo, ModelKind};
pub use parallel::{Parallel, ParallelMode};
pub use registry::{
    is_supported, load, load_any, load_parallel, supported, supported_architectures, Loaded,
    PARALLEL,
};
pub use vision::{ImageEncoder, ImageTokens};
