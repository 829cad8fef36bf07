//! The layer seam's decoder layer: a token mixer (attention or Gated DeltaNet) and a
//! feed-forward (dense or experts), each behind an RMS norm with a residual add. Whether a layer
//! runs as one CUDA launch is decided by the model that loads it (decode_layer.rs reads the
//! layer; the layer does not know the kernel).

use rmx_mlx::Array;

use crate::cache::{AttnMask, LayerCache};
use crate::decode_layer::{InLaunch, OneLaunch};
use crate::error::Result;
use crate::feed_forward::FeedForward;
use crate::layers::RmsNorm;
use crate::mixer::Mixer;

/// The pre-norm decoder layer shared by Llama, Qwen2, Qwen3, Qwen3-MoE and GPT-OSS: attention
/// and a feed-forward (dense or experts), each behind an RMS norm with a residual add.
pub(crate) struct DecoderLayer {
    pub mixer: Mixer,
    pub ffn: FeedForward,
    pub input_norm: RmsNorm,
    pub post_norm: RmsNorm,
    /// Chosen at load: how a decode step of this layer runs as one launch of the CUDA layer
    /// kernel (decode_layer.rs), which takes bias-free 4/8-bit affine layers; `None`: MLX's ops
    /// and rmx's per-op kernels.
    pub one_launch: Option<OneLaunch>,
}

impl DecoderLayer {
    pub fn new(mixer: Mixer, ffn: FeedForward, input_norm: RmsNorm, post_norm: RmsNorm) -> Self {
        DecoderLayer {
            mixer,
            ffn,
            input_norm,
            post_norm,
            one_launch: None,
        }
    }

    /// The layer by MLX's ops (and rmx's per-op kernels), as mlx-lm computes it.
    pub fn forward_ops(&self, x: &Array, mask: &AttnMask, cache: &mut LayerCache) -> Result<Array> {
        let h = self
            .mixer
            .forward_prenorm(x, &self.input_norm, mask, cache)?;
        self.ffn.forward_prenorm(&h, &self.post_norm)
    }

    /// What this layer is and how a decode step runs it, for `rmx info` / `rmx run -v`.
    /// Mixer and feed-forward name their own kernels; a layer the one-launch kernel runs whole
    /// says so at the end.
    pub fn describe(&self, sliding: bool) -> String {
        let layer = format!("{} + {}", self.mixer.kind(sliding), self.ffn.kind());
        match self.one_launch {
            Some(OneLaunch {
                ffn: InLaunch::Mlp | InLaunch::Experts,
                ..
            }) => format!("{layer} (one CUDA launch)"),
            Some(OneLaunch { delta: true, .. }) => format!("{layer} (DeltaNet in one CUDA launch)"),
            Some(_) => format!("{layer} (attention in one CUDA launch)"),
            None => layer,
        }
    }
}
