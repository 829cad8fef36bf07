//! Where the CUDA backend leaves mlx-lm's op-for-op graph, because measurement on the H100 said
//! so (docs/perf.md): decode's quantized matrix-vector products run on rmx's own kernels
//! (kernels/*.cuh), the projections that read the same input are fused into one weight
//! (QKV, gate+up) so a token launches fewer kernels, and long prefills on quantized weights
//! dequantize to a dense GEMM instead of MLX's quantized GEMM. On the CPU and Metal backends
//! none of this applies: there the graph is mlx-lm's, which the parity tests pin token for token.
//!
//! A decode step's attention is one kernel too (rope, q/k norms, the KV-cache write and the
//! attention itself), the layers' input norms ride in the GEMV that reads them, and SwiGLU is one
//! elementwise kernel instead of three ops. Fewer nodes matter as much as faster ones: MLX spends
//! several µs of CPU per graph node, which bounds decode on small models.
//!
//! The knobs (`RMX_FAST_PATH=0` turns it all off, for A/B measurements) are declared with the
//! rest of rmx's settings in rmx-settings (docs/settings.md) and read once, into [`FastPath`].
//!
//! Its files: `settings` (the choices, made once per process), `launch` (a kernel of
//! kernels/*.cuh made and cached, and the small device arrays launches share), and one file per
//! family of kernels: `gemv` (quantized products and when prefill dequantizes instead),
//! `attention` (q/k/v heads, rope and decode attention), `swiglu`, `gated_delta`, `pick` (the
//! greedy choice), `embed_rows` (a quantized embedding's rows).

mod attention;
mod embed_rows;
mod gated_delta;
mod gemv;
mod launch;
mod pick;
mod settings;
mod swiglu;

pub use attention::{
    attention_heads_fit, decode_attention, decode_attention_batch, decode_attention_fits,
    layer_heads_fit, prefill_heads, qkv_rope, QkvRope, QkvRows,
};
pub use embed_rows::embed_rows;
pub use gated_delta::{
    delta_step, delta_step_fits, gated_delta, gated_delta_fits, DeltaStepWeights,
};
pub use gemv::{dequant_prefill, qgemv, rows, Epilogue};
pub(crate) use launch::{consts, counters, kernel, layer_pos, on_device, Spec};
pub use pick::greedy_tokens;
pub use settings::{fast_path, set_model_hidden};
pub use swiglu::swiglu;
