//! Qwen3 (dense): Llama's layout with RMS norms on q and k per head, an explicit `head_dim`,
//! and `rope_theta` possibly nested in `rope_parameters`.

use serde::Deserialize;

use crate::attention::QkNorm;
use crate::config::RawConfig;
use crate::error::{ModelError, Result};
use crate::llama::{load_decoder, Variant};
use crate::model::CausalLm;
use crate::rope::Rope;
use crate::weights::Weights;

#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub hidden_size: i32,
    pub num_hidden_layers: i32,
    pub intermediate_size: i32,
    pub num_attention_heads: i32,
    pub rms_norm_eps: f32,
    pub vocab_size: i32,
    pub num_key_value_heads: i32,
    pub max_position_embeddings: Option<i32>,
    pub head_dim: i32,
    pub tie_word_embeddings: bool,
    pub rope_theta: Option<f32>,
    pub rope_scaling: Option<serde_json::Value>,
    pub rope_parameters: Option<serde_json::Value>,
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    let params = c.rope_parameters.clone();
    let theta = c
        .rope_theta
        .or_else(|| {
            params
                .as_ref()?
                .get("rope_theta")?
                .as_f64()
                .map(|v| v as f32)
        })
        .ok_or_else(|| ModelError::Config {
            path: raw.path.clone(),
            message: "rope_theta is missing".into(),
        })?;
    let scaling = c.rope_scaling.clone().or(params);
    let common = crate::llama::Config {
        hidden_size: c.hidden_size,
        num_hidden_layers: c.num_hidden_layers,
        intermediate_size: c.intermediate_size,
        num_attention_heads: c.num_attention_heads,
        rms_norm_eps: c.rms_norm_eps,
        vocab_size: c.vocab_size,
        head_dim: Some(c.head_dim),
        max_position_embeddings: c.max_position_embeddings,
        num_key_value_heads: Some(c.num_key_value_heads),
        attention_bias: false,
        mlp_bias: false,
        rope_theta: theta,
        rope_traditional: false,
        rope_scaling: scaling.clone(),
        tie_word_embeddings: c.tie_word_embeddings,
        layer_types: None,
        sliding_window: None,
    };
    let (head_dim, max_pos) = (c.head_dim, c.max_position_embeddings);
    let v = Variant::dense(
        false,
        false,
        QkNorm::BeforeTranspose,
        head_dim,
        Box::new(move |_| Rope::from_config(head_dim, theta, false, scaling.as_ref(), max_pos)),
    );
    Ok(Box::new(load_decoder(raw, &common, w, v)?))
}
