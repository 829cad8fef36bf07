//! The feed-forward half of a decoder layer: a dense gated MLP or a routed mixture of experts.

use rmx_mlx::Array;

use crate::attention::Mlp;
use crate::config::QuantConfig;
use crate::error::Result;
use crate::layers::RmsNorm;
use crate::moe::SparseMoe;
use crate::weights::Weights;

pub enum FeedForward {
    Dense(Mlp),
    Moe(Box<SparseMoe>),
}

impl FeedForward {
    /// A bias-free SwiGLU MLP under `path` (`gate_proj`, `up_proj`, `down_proj`).
    pub fn swiglu(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        dim: i32,
        hidden: i32,
    ) -> Result<FeedForward> {
        Ok(FeedForward::Dense(Mlp::load(
            w, q, path, dim, hidden, false, false,
        )?))
    }

    /// `x + ffn(norm(x))`.
    pub fn forward_prenorm(&self, x: &Array, norm: &RmsNorm) -> Result<Array> {
        match self {
            FeedForward::Dense(m) => m.forward_prenorm(x, norm),
            FeedForward::Moe(m) => m.forward_prenorm(x, norm),
        }
    }

    /// For `rmx run -v`: "dense", "moe", or "moe (CUDA expert kernels)" where a decode step
    /// takes rmx's MoE kernels (moe_kernels.rs).
    pub fn kind(&self) -> &'static str {
        match self {
            FeedForward::Dense(_) => "dense",
            FeedForward::Moe(m) if m.uses_kernels() => "moe (CUDA expert kernels)",
            FeedForward::Moe(_) => "moe",
        }
    }
}
