//! Gemma 4's text config, with mlx-lm's defaults for what a checkpoint leaves out.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::RawConfig;
use crate::error::{ModelError, Result};

defaults! {
    d_hidden: i32 = 1536, d_layers: i32 = 35, d_inter: i32 = 6144, d_heads: i32 = 8,
    d_head_dim: i32 = 256, d_global_head_dim: Option<i32> = Some(512), d_eps: f32 = 1e-6,
    d_vocab: i32 = 262144, d_kv: i32 = 1, d_shared: i32 = 20,
    d_per_layer: Option<i32> = Some(256), d_window: i32 = 512, d_pattern: i32 = 5,
    d_ctx: i32 = 131072, d_softcap: Option<f64> = Some(30.0), d_yes: bool = true,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    #[serde(default = "d_hidden")]
    pub hidden_size: i32,
    #[serde(default = "d_layers")]
    pub num_hidden_layers: i32,
    #[serde(default = "d_inter")]
    pub intermediate_size: i32,
    #[serde(default = "d_heads")]
    pub num_attention_heads: i32,
    #[serde(default = "d_head_dim")]
    pub head_dim: i32,
    #[serde(default = "d_global_head_dim")]
    pub global_head_dim: Option<i32>,
    #[serde(default = "d_eps")]
    pub rms_norm_eps: f32,
    #[serde(default = "d_vocab")]
    pub vocab_size: i32,
    #[serde(default = "d_vocab")]
    pub vocab_size_per_layer_input: i32,
    #[serde(default = "d_kv")]
    pub num_key_value_heads: i32,
    pub num_global_key_value_heads: Option<i32>,
    #[serde(default = "d_shared")]
    pub num_kv_shared_layers: i32,
    #[serde(default = "d_per_layer")]
    pub hidden_size_per_layer_input: Option<i32>,
    #[serde(default)]
    pub rope_traditional: bool,
    pub rope_parameters: Option<Value>,
    #[serde(default = "d_window")]
    pub sliding_window: i32,
    #[serde(default = "d_pattern")]
    pub sliding_window_pattern: i32,
    #[serde(default = "d_ctx")]
    pub max_position_embeddings: i32,
    #[serde(default)]
    pub attention_k_eq_v: bool,
    #[serde(default = "d_softcap")]
    pub final_logit_softcapping: Option<f64>,
    #[serde(default = "d_yes")]
    pub use_double_wide_mlp: bool,
    #[serde(default)]
    pub enable_moe_block: bool,
    pub num_experts: Option<i32>,
    pub top_k_experts: Option<i32>,
    pub moe_intermediate_size: Option<i32>,
    pub layer_types: Option<Vec<String>>,
    #[serde(default = "d_yes")]
    pub tie_word_embeddings: bool,
    /// `"vision"`: each image's placeholders attend to one another both ways.
    pub use_bidirectional_attention: Option<String>,
}

pub(super) fn config_error(raw: &RawConfig, message: String) -> ModelError {
    ModelError::Config {
        path: raw.path.clone(),
        message,
    }
}

impl Config {
    /// Whether an image's placeholders see one another both ways (mlx-vlm's
    /// `use_bidirectional_vision`).
    pub fn images_attend_both_ways(&self) -> bool {
        self.use_bidirectional_attention.as_deref() == Some("vision")
    }

    /// mlx-lm's `__post_init__`: the layer pattern from `sliding_window_pattern` when
    /// `layer_types` is absent.
    pub(super) fn layer_types(&self, raw: &RawConfig) -> Result<Vec<bool>> {
        let n = self.num_hidden_layers;
        let sliding: Vec<bool> = match &self.layer_types {
            Some(t) if t.len() != n as usize => {
                return Err(config_error(
                    raw,
                    format!(
                        "layer_types has {} entries for {n} layers (num_hidden_layers)",
                        t.len()
                    ),
                ))
            }
            Some(t) => t.iter().map(|s| s == "sliding_attention").collect(),
            None if self.sliding_window_pattern < 1 => {
                return Err(config_error(
                    raw,
                    "sliding_window_pattern must be at least 1".into(),
                ))
            }
            None => (0..n)
                .map(|i| (i + 1) % self.sliding_window_pattern != 0)
                .collect(),
        };
        Ok(sliding)
    }

    /// The width of each layer's per-layer input (E2B/E4B); `None` when the model has none.
    pub(super) fn per_layer_dim(&self) -> Option<i32> {
        self.hidden_size_per_layer_input.filter(|d| *d > 0)
    }

    /// The rope settings of one layer type (`rope_parameters.full_attention` or
    /// `.sliding_attention`), with mlx-lm's defaults when the config has none.
    pub(super) fn rope_params(&self, sliding: bool) -> Value {
        let key = if sliding {
            "sliding_attention"
        } else {
            "full_attention"
        };
        match &self.rope_parameters {
            Some(p) => p.get(key).cloned().unwrap_or(json!({})),
            None if sliding => json!({"partial_rotary_factor": 1.0, "rope_theta": 10000.0,
                                      "rope_type": "default"}),
            None => json!({"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                           "rope_type": "proportional"}),
        }
    }
}
