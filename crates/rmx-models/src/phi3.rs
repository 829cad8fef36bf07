//! Phi-3 / Phi-4 (`phi3`: Phi-4, Phi-4-mini, Phi-4-reasoning): Llama's decoder with the q/k/v
//! projections fused in one `qkv_proj` and gate/up in one `gate_up_proj` (attention.rs loads
//! both as stored), `head_dim` = hidden / heads, a partial rotary (`partial_rotary_factor`), and
//! Su/longrope scaling whose original context is the config's top-level
//! `original_max_position_embeddings`, as mlx-lm's `phi3.py` reads it.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::attention::QkNorm;
use crate::config::RawConfig;
use crate::error::{ModelError, Result};
use crate::llama::{load_decoder, Variant};
use crate::model::CausalLm;
use crate::rope::Rope;
use crate::weights::Weights;

defaults! {
    d_theta: f32 = 10000.0, d_partial: f64 = 1.0, d_max_pos: i32 = 131072,
    d_orig_max_pos: i32 = 4096,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Config {
    pub hidden_size: i32,
    pub num_hidden_layers: i32,
    pub intermediate_size: i32,
    pub num_attention_heads: i32,
    pub rms_norm_eps: f32,
    pub vocab_size: i32,
    pub num_key_value_heads: Option<i32>,
    #[serde(default = "d_theta")]
    pub rope_theta: f32,
    #[serde(default)]
    pub rope_traditional: bool,
    #[serde(skip_serializing)]
    pub rope_scaling: Option<Value>,
    #[serde(default = "d_partial", skip_serializing)]
    pub partial_rotary_factor: f64,
    #[serde(default = "d_max_pos")]
    pub max_position_embeddings: i32,
    #[serde(default = "d_orig_max_pos", skip_serializing)]
    pub original_max_position_embeddings: i32,
    #[serde(default)]
    pub tie_word_embeddings: bool,
}

/// mlx-lm's choice of rope for Phi-3: SuScaledRoPE for `longrope`/`su` (long factors only;
/// `long_mscale` is not passed), a linear scale for `linear`, the plain rope otherwise (mlx-lm
/// warns and drops other types).
fn rope(c: &Config, dims: i32) -> Result<Rope> {
    let scaling = c.rope_scaling.as_ref().filter(|s| !s.is_null());
    let kind = scaling.and_then(|s| s.get("type")).and_then(Value::as_str);
    if let Some(s) = scaling {
        if s.get("long_factor").is_none() || kind.is_none() {
            return Err(ModelError::Config {
                path: "config.json".into(),
                message: "rope_scaling must have \"type\" and \"long_factor\" (Phi-3)".into(),
            });
        }
    }
    let (theta, trad) = (c.rope_theta, c.rope_traditional);
    match (kind, scaling) {
        (Some("longrope" | "su"), Some(s)) => {
            let su = json!({
                "rope_type": "longrope",
                "long_factor": s["long_factor"],
                "original_max_position_embeddings": c.original_max_position_embeddings,
            });
            Rope::from_config(
                dims,
                theta,
                false,
                Some(&su),
                Some(c.max_position_embeddings),
            )
        }
        (Some("linear"), Some(s)) => {
            let factor =
                s.get("factor")
                    .and_then(Value::as_f64)
                    .ok_or_else(|| ModelError::Config {
                        path: "config.json".into(),
                        message: "rope_scaling.factor is required for rope type \"linear\"".into(),
                    })?;
            Ok(Rope::standard(dims, theta, trad, (1.0 / factor) as f32))
        }
        _ => Ok(Rope::standard(dims, theta, trad, 1.0)),
    }
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    let mut common = crate::llama::Config::from_family(&c)?;
    common.head_dim = None;
    common.rope_scaling = None;
    common.tie_word_embeddings = c.tie_word_embeddings;
    let head_dim = c.hidden_size / c.num_attention_heads.max(1);
    let dims = (f64::from(head_dim) * c.partial_rotary_factor) as i32;
    let v = Variant::dense(
        false,
        false,
        QkNorm::None,
        head_dim,
        Box::new(move |_| rope(&c, dims)),
    );
    Ok(Box::new(load_decoder(raw, &common, w, v)?))
}
