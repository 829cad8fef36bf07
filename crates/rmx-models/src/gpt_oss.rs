//! GPT-OSS (`gpt_oss`: gpt-oss-20b, gpt-oss-120b): attention with biases and per-head sinks,
//! sliding-window and full layers alternating, YaRN rope, and on every layer a mixture of
//! experts with biases and the clamped SwiGLU (`swiglu_oai`), routed top-k then softmax. As
//! mlx-lm's `gpt_oss.py`; weights as mlx-lm writes them (`mlp.experts.{gate,up,down}_proj`,
//! `mlp.router`), in mxfp4 as the official MLX conversions ship them, or affine, or dense.

use serde::{Deserialize, Serialize};

use crate::attention::QkNorm;
use crate::config::RawConfig;
use crate::error::Result;
use crate::feed_forward::FeedForward;
use crate::layers::Linear;
use crate::llama::{load_decoder, Variant};
use crate::model::CausalLm;
use crate::moe::{ExpertActivation, Routing, SparseMoe, SwitchGlu};
use crate::rope::Rope;
use crate::weights::Weights;

// mlx-lm's ModelArgs defaults (gpt-oss-120b's shape).
defaults! {
    d_layers: i32 = 36, d_experts: i32 = 128, d_top_k: i32 = 4, d_vocab: i32 = 201088,
    d_eps: f32 = 1e-5, d_hidden: i32 = 2880, d_inter: i32 = 2880, d_head_dim: i32 = 64,
    d_heads: i32 = 64, d_kv: i32 = 8, d_window: i32 = 128, d_theta: f32 = 150000.0,
}

/// `swiglu_oai`'s constants (mlx-lm's `SwigluOAI()` defaults).
const ALPHA: f64 = 1.702;
const LIMIT: f64 = 7.0;

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Config {
    #[serde(default = "d_layers")]
    pub num_hidden_layers: i32,
    #[serde(default = "d_experts")]
    pub num_local_experts: i32,
    #[serde(default = "d_top_k")]
    pub num_experts_per_tok: i32,
    #[serde(default = "d_vocab")]
    pub vocab_size: i32,
    #[serde(default = "d_eps")]
    pub rms_norm_eps: f32,
    #[serde(default = "d_hidden")]
    pub hidden_size: i32,
    #[serde(default = "d_inter")]
    pub intermediate_size: i32,
    #[serde(default = "d_head_dim")]
    pub head_dim: i32,
    #[serde(default = "d_heads")]
    pub num_attention_heads: i32,
    #[serde(default = "d_kv")]
    pub num_key_value_heads: i32,
    #[serde(default = "d_window")]
    pub sliding_window: i32,
    #[serde(default = "d_theta")]
    pub rope_theta: f32,
    pub rope_scaling: Option<serde_json::Value>,
    pub layer_types: Option<Vec<String>>,
    pub max_position_embeddings: Option<i32>,
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    let layer_types = c.layer_types.clone().unwrap_or_else(|| {
        ["sliding_attention", "full_attention"]
            .iter()
            .map(|s| s.to_string())
            .cycle()
            .take((c.num_hidden_layers / 2 * 2) as usize)
            .collect()
    });
    let common = crate::llama::Config {
        attention_bias: true,
        // mlx-lm's GPT-OSS always has its own lm_head.
        tie_word_embeddings: false,
        layer_types: Some(layer_types),
        sliding_window: Some(c.sliding_window),
        ..crate::llama::Config::from_family(&c)?
    };
    let (head_dim, theta, scaling) = (c.head_dim, c.rope_theta, c.rope_scaling.clone());
    // mlx-lm builds this rope without max_position_embeddings.
    let mut v = Variant::dense(
        true,
        true,
        QkNorm::None,
        head_dim,
        Box::new(move |_| Rope::from_config(head_dim, theta, false, scaling.as_ref(), None)),
    );
    v.sinks = true;
    // Split over a tensor-parallel group as mlx-lm's `shard()` does: the attention (its sinks
    // with its heads) as the dense families, the experts below.
    let cfg = c.clone();
    v.ffn = Some(Box::new(move |w, q, _, p| {
        let c = &cfg;
        let tp = w.tensor_parallel().cloned();
        let router = Linear::load(
            w,
            q,
            &format!("{p}.router"),
            c.hidden_size,
            c.num_local_experts,
            true,
        )?;
        // Split, each expert's down bias is added by rank 0 alone, so the ranks' sum has it
        // once (mlx-lm divides it by the number of ranks instead).
        let experts = SwitchGlu::load_split(
            w,
            q,
            &format!("{p}.experts"),
            c.num_local_experts,
            c.hidden_size,
            c.intermediate_size,
            true,
            ExpertActivation::SwiGluOai {
                alpha: ALPHA,
                limit: LIMIT,
            },
            tp.as_ref(),
        )?;
        let moe = SparseMoe::new(
            router,
            experts,
            c.num_local_experts,
            c.num_experts_per_tok,
            Routing::TopKSoftmax,
        )?;
        Ok(FeedForward::Moe(Box::new(match tp {
            Some(tp) => moe.split_over(tp.group().clone()),
            None => moe,
        })))
    }));
    Ok(Box::new(load_decoder(raw, &common, w, v)?))
}
