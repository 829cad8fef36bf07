//! Qwen3-MoE (`qwen3_moe`: Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B): Qwen3's
//! attention with a routed mixture of experts in place of the MLP on every
//! `decoder_sparse_step`-th layer not listed in `mlp_only_layers`. As in mlx-lm's
//! `qwen3_moe.py`, the rope is plain (`rope_theta`): a `rope_scaling` entry is not applied.

use serde::{Deserialize, Serialize};

use crate::attention::QkNorm;
use crate::config::RawConfig;
use crate::error::{ModelError, Result};
use crate::feed_forward::FeedForward;
use crate::llama::{load_decoder, Variant};
use crate::model::CausalLm;
use crate::moe::SparseMoe;
use crate::rope::Rope;
use crate::weights::Weights;

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Config {
    pub hidden_size: i32,
    pub num_hidden_layers: i32,
    pub intermediate_size: i32,
    pub num_attention_heads: i32,
    pub num_experts: i32,
    pub num_experts_per_tok: i32,
    pub decoder_sparse_step: i32,
    pub mlp_only_layers: Vec<i32>,
    pub moe_intermediate_size: i32,
    pub rms_norm_eps: f32,
    pub vocab_size: i32,
    pub num_key_value_heads: i32,
    pub head_dim: i32,
    pub rope_theta: f32,
    pub tie_word_embeddings: bool,
    pub max_position_embeddings: i32,
    pub norm_topk_prob: bool,
}

impl Config {
    /// mlx-lm's rule for which layers route to experts.
    fn is_moe(&self, layer: i32) -> bool {
        !self.mlp_only_layers.contains(&layer)
            && self.num_experts > 0
            && (layer + 1) % self.decoder_sparse_step == 0
    }
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    if c.decoder_sparse_step < 1 {
        return Err(ModelError::Config {
            path: raw.path.clone(),
            message: format!(
                "decoder_sparse_step must be at least 1, not {}",
                c.decoder_sparse_step
            ),
        });
    }
    // mlx-lm's qwen3_moe builds a plain rope: rope_scaling is not applied.
    let common = crate::llama::Config {
        rope_scaling: None,
        ..crate::llama::Config::from_family(&c)?
    };
    let (head_dim, theta) = (c.head_dim, c.rope_theta);
    let mut v = Variant::dense(
        false,
        false,
        QkNorm::BeforeTranspose,
        head_dim,
        Box::new(move |_| Ok(Rope::standard(head_dim, theta, false, 1.0))),
    );
    // Split over a tensor-parallel group as mlx-lm's `shard()` does: dense layers as the dense
    // families (Mlp::load), experts in SparseMoe::load_qwen.
    let cfg = c.clone();
    v.ffn = Some(Box::new(move |w, q, i, p| {
        let c = &cfg;
        if !c.is_moe(i) {
            return FeedForward::swiglu(w, q, p, c.hidden_size, c.intermediate_size);
        }
        Ok(FeedForward::Moe(Box::new(SparseMoe::load_qwen(
            w,
            q,
            p,
            c.hidden_size,
            c.num_experts,
            c.num_experts_per_tok,
            c.moe_intermediate_size,
            c.norm_topk_prob,
        )?)))
    }));
    Ok(Box::new(load_decoder(raw, &common, w, v)?))
}
