//! The token-mixing half of a decoder layer: softmax attention over a KV cache, or Gated
//! DeltaNet's linear attention over a recurrent state.

use rmx_mlx::Array;

use crate::attention::Attention;
use crate::cache::{AttnMask, KvCache, LayerCache, RecurrentCache, RotatingKvCache};
use crate::delta_net::GatedDeltaNet;
use crate::error::Result;
use crate::layers::RmsNorm;

pub enum Mixer {
    Attention(Box<Attention>),
    DeltaNet(Box<GatedDeltaNet>),
}

impl Mixer {
    /// `x + mixer(norm(x))`.
    pub fn forward_prenorm(
        &self,
        x: &Array,
        norm: &RmsNorm,
        mask: &AttnMask,
        cache: &mut LayerCache,
    ) -> Result<Array> {
        match self {
            Mixer::Attention(a) => a.forward_prenorm(x, norm, mask, cache),
            Mixer::DeltaNet(d) => d.forward_prenorm(x, norm, cache),
        }
    }

    pub fn attention(&self) -> Option<&Attention> {
        match self {
            Mixer::Attention(a) => Some(a),
            Mixer::DeltaNet(_) => None,
        }
    }

    pub fn is_recurrent(&self) -> bool {
        matches!(self, Mixer::DeltaNet(_))
    }

    /// A fresh cache of the kind this mixer needs (`window`: a sliding-attention layer's).
    pub fn make_cache(&self, window: Option<i32>) -> LayerCache {
        match (self, window) {
            (Mixer::DeltaNet(_), _) => LayerCache::Recurrent(RecurrentCache::new()),
            (Mixer::Attention(_), Some(w)) => LayerCache::Rotating(RotatingKvCache::new(w)),
            (Mixer::Attention(_), None) => LayerCache::Full(KvCache::default()),
        }
    }

    /// For `rmx info` and `rmx run -v`.
    pub fn kind(&self, sliding: bool) -> &'static str {
        match (self, sliding) {
            (Mixer::DeltaNet(d), _) if d.uses_step_kernel() => {
                "linear attention (Gated DeltaNet, CUDA step and recurrence kernels)"
            }
            (Mixer::DeltaNet(d), _) if d.uses_kernel() => {
                "linear attention (Gated DeltaNet, CUDA recurrence kernel)"
            }
            (Mixer::DeltaNet(_), _) => "linear attention (Gated DeltaNet)",
            (Mixer::Attention(_), true) => "sliding attention",
            (Mixer::Attention(_), false) => "attention",
        }
    }
}
