//! Mistral Small 3.1 / 3.2 (`mistral3`, `Mistral3ForConditionalGeneration`): a Llama decoder
//! configured by the nested `text_config` (as mlx-lm's `mistral3.py`: untied unless
//! `text_config` says otherwise), and, where the files carry it in mlx-vlm's layout, the
//! Pixtral tower and Mistral 3 projector (vision/pixtral.rs) whose features take the `[IMG]`
//! placeholders' places, as mlx-vlm's `merge_input_ids_with_image_features`.

use rmx_mlx::Array;

use crate::cache::LayerCache;
use crate::config::RawConfig;
use crate::error::{ModelError, Result};
use crate::llama::{load_decoder, Llama, Variant};
use crate::model::{CausalLm, ModelInfo};
use crate::vision::pixtral::{Mistral3Vision, PixtralVision, VisionConfig};
use crate::vision::ImageEncoder;
use crate::weights::Weights;

/// The text model and, when loaded, the image side.
struct Mistral3 {
    text: Llama,
    vision: Option<PixtralVision>,
}

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
    let vision = if w.has("vision_tower.vision_model.patch_conv.weight") {
        Some(load_vision(raw, w, &c)?)
    } else {
        // Transformers' own layout, or a conversion without the tower: the text model runs.
        w.discard(|k| k.contains("vision_tower.") || k.contains("multi_modal_projector."));
        None
    };
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
    let text = load_decoder(raw, &c, w, v)?;
    Ok(match vision {
        Some(vision) => Box::new(Mistral3 {
            text,
            vision: Some(vision),
        }),
        None => Box::new(text),
    })
}

fn load_vision(
    raw: &RawConfig,
    w: &mut Weights,
    c: &crate::llama::Config,
) -> Result<PixtralVision> {
    let bad = |message: String| ModelError::Config {
        path: raw.path.clone(),
        message,
    };
    let cfg: VisionConfig = crate::vision::vision_config(raw)?;
    let top = |key: &str| raw.raw.get(key);
    // mlx-vlm's Mistral 3 ModelConfig defaults where the config names none.
    let image_token = top("image_token_index")
        .or_else(|| top("image_token_id"))
        .and_then(|v| v.as_u64())
        .ok_or_else(|| bad("image_token_index is missing".into()))? as u32;
    if matches!(top("vision_feature_layer").and_then(|v| v.as_i64()), Some(l) if l != -1) {
        return Err(bad(
            "vision_feature_layer other than -1 (the last layer) is not supported".into(),
        ));
    }
    let vision = Mistral3Vision {
        spatial_merge_size: top("spatial_merge_size")
            .and_then(|v| v.as_i64())
            .unwrap_or(2) as i32,
        projector_bias: top("multimodal_projector_bias")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        text_eps: c.rms_norm_eps,
        text_hidden: c.hidden_size,
        image_token,
    };
    PixtralVision::load(w, &raw.quant, cfg, vision, &raw.path)
}

impl CausalLm for Mistral3 {
    fn forward_hidden(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        self.text.forward_hidden(tokens, cache)
    }

    /// The `[IMG]` placeholders' embeddings replaced by the feature rows in order (one gather
    /// over [embeddings; features]); every other token keeps its own.
    fn forward_hidden_with_images(
        &self,
        tokens: &Array,
        features: &Array,
        cache: &mut [LayerCache],
    ) -> Result<Array> {
        let v = crate::vision::loaded(&self.vision, "Mistral 3")?;
        let ids = crate::vision::sequence_ids(tokens)?;
        let embeds = self.text.embed_tokens(tokens)?.squeeze(&[0])?;
        let h = crate::vision::splice(&embeds, &ids, v.image_token(), features)?;
        self.text.forward_embeds(h, cache)
    }

    fn vision(&self) -> Option<&dyn ImageEncoder> {
        self.vision.as_ref().map(|v| v as &dyn ImageEncoder)
    }

    fn lm_head(&self, hidden: &Array) -> Result<Array> {
        self.text.lm_head(hidden)
    }

    fn make_cache(&self) -> Vec<LayerCache> {
        self.text.make_cache()
    }

    fn batches(&self) -> bool {
        self.text.batches()
    }

    fn info(&self) -> &ModelInfo {
        self.text.info()
    }
}
