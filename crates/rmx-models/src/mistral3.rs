//! Mistral Small 3.1 / 3.2 (`mistral3`, `Mistral3ForConditionalGeneration`): the text model of
//! the vision-language checkpoint, a Llama decoder configured by the nested `text_config`. As
//! mlx-lm's `mistral3.py`: the vision tower and projector are left unloaded, and the text model
//! is untied unless `text_config` says otherwise.

use crate::config::RawConfig;
use crate::error::{ModelError, Result};
use crate::llama::{load_decoder, Variant};
use crate::model::CausalLm;
use crate::weights::Weights;

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let text = raw
        .raw
        .get("text_config")
        .ok_or_else(|| ModelError::Config {
            path: raw.path.clone(),
            message: "text_config is missing (a mistral3 checkpoint nests its text model there)"
                .into(),
        })?;
    match text.get("model_type").and_then(|v| v.as_str()) {
        None | Some("mistral" | "llama") => {}
        Some(other) => {
            return Err(ModelError::Config {
                path: raw.path.clone(),
                message: format!(
                    "text_config.model_type {other:?} is not supported yet (rmx runs mistral3 \
                     checkpoints whose text model is \"mistral\", as Mistral Small 3.1/3.2)"
                ),
            })
        }
    }
    let mut c: crate::llama::Config = raw.parse_text()?;
    if text.get("tie_word_embeddings").is_none() {
        c.tie_word_embeddings = false;
    }
    // Image input is a later feature: its weights stay on disk.
    w.discard(|k| k.contains("vision_tower.") || k.contains("multi_modal_projector."));
    // mlx-community files keep mlx-vlm's names (`language_model.model.*`); transformers' own
    // layout is `model.language_model.*` with `lm_head` at the top, which mlx-lm renames.
    let (root, lm_head) = if w.has("model.language_model.embed_tokens.weight") {
        ("model.language_model", "lm_head")
    } else {
        ("language_model.model", "language_model.lm_head")
    };
    let mut v = Variant::llama(&c, |_| true);
    v.root = root.into();
    v.lm_head = lm_head.into();
    Ok(Box::new(load_decoder(raw, &c, w, v)?))
}
