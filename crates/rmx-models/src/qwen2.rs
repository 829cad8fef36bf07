//! Qwen2 / Qwen2.5: Llama's layout with biases on q/k/v. As in mlx-lm, `head_dim` is always
//! hidden / heads (a `head_dim` in the config is ignored).

use serde::Deserialize;

use crate::attention::QkNorm;
use crate::config::RawConfig;
use crate::error::Result;
use crate::llama::{load_decoder, Variant};
use crate::model::CausalLm;
use crate::rope::Rope;
use crate::weights::Weights;

fn default_rope_theta() -> f32 {
    1_000_000.0
}
fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub hidden_size: i32,
    pub num_hidden_layers: i32,
    pub intermediate_size: i32,
    pub num_attention_heads: i32,
    pub rms_norm_eps: f32,
    pub vocab_size: i32,
    pub num_key_value_heads: i32,
    #[serde(default)]
    pub max_position_embeddings: Option<i32>,
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f32,
    #[serde(default)]
    pub rope_traditional: bool,
    pub rope_scaling: Option<serde_json::Value>,
    #[serde(default = "yes")]
    pub tie_word_embeddings: bool,
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    let head_dim = c.hidden_size / c.num_attention_heads;
    let common = crate::llama::Config {
        hidden_size: c.hidden_size,
        num_hidden_layers: c.num_hidden_layers,
        intermediate_size: c.intermediate_size,
        num_attention_heads: c.num_attention_heads,
        rms_norm_eps: c.rms_norm_eps,
        vocab_size: c.vocab_size,
        head_dim: Some(head_dim),
        max_position_embeddings: c.max_position_embeddings,
        num_key_value_heads: Some(c.num_key_value_heads),
        attention_bias: true,
        mlp_bias: false,
        rope_theta: c.rope_theta,
        rope_traditional: c.rope_traditional,
        rope_scaling: c.rope_scaling.clone(),
        tie_word_embeddings: c.tie_word_embeddings,
        layer_types: None,
        sliding_window: None,
    };
    let (theta, trad, scaling) = (c.rope_theta, c.rope_traditional, c.rope_scaling);
    let max_pos = c.max_position_embeddings;
    let v = Variant::dense(
        true,
        false,
        QkNorm::None,
        head_dim,
        Box::new(move |_| Rope::from_config(head_dim, theta, trad, scaling.as_ref(), max_pos)),
    );
    Ok(Box::new(load_decoder(raw, &common, w, v)?))
}
