//! SmolLM3 (`smollm3`): Llama with no rotary embedding (NoPE) on some layers — every
//! `no_rope_layer_interval`-th by default, or as `no_rope_layers` lists them (1 = rope).

use serde::Deserialize;

use crate::config::RawConfig;
use crate::error::{ModelError, Result};
use crate::llama::{load_decoder, Variant};
use crate::model::CausalLm;
use crate::weights::Weights;

fn d_interval() -> i32 {
    4
}

#[derive(Deserialize)]
struct NoPe {
    #[serde(default = "d_interval")]
    no_rope_layer_interval: i32,
    no_rope_layers: Option<Vec<i32>>,
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: crate::llama::Config = raw.parse()?;
    let nope: NoPe = raw.parse()?;
    let n = c.num_hidden_layers;
    let use_rope: Vec<bool> = match nope.no_rope_layers {
        Some(l) if l.len() != n as usize => {
            return Err(ModelError::Config {
                path: raw.path.clone(),
                message: format!(
                    "no_rope_layers has {} entries for {n} layers (num_hidden_layers)",
                    l.len()
                ),
            })
        }
        Some(l) => l.iter().map(|&r| r != 0).collect(),
        None if nope.no_rope_layer_interval < 1 => {
            return Err(ModelError::Config {
                path: raw.path.clone(),
                message: "no_rope_layer_interval must be at least 1".into(),
            })
        }
        None => (0..n)
            .map(|i| (i + 1) % nope.no_rope_layer_interval != 0)
            .collect(),
    };
    let v = Variant::llama(&c, move |i| {
        use_rope.get(i as usize).copied().unwrap_or(true)
    });
    Ok(Box::new(load_decoder(raw, &c, w, v)?))
}
