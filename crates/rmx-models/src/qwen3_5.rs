//! Qwen3.5 / Qwen3.6 (`qwen3_5`, and `qwen3_5_moe` with routed and shared experts on every
//! layer): the text tower of `Qwen3_5ForConditionalGeneration`, on the hybrid decoder of
//! qwen3_next.rs with Qwen3.5's separate DeltaNet projections. The config nests the text
//! model's settings in `text_config` (or is flat), rope settings in `rope_parameters`; weights
//! live under `language_model.`. As mlx-lm's `qwen3_5.py` / `qwen3_5_moe.py`.
//!
//! Where the files carry the vision tower in mlx-vlm's layout (`vision_tower.*`), images go in
//! as mlx-vlm's `qwen3_5` takes them: the tower's rows in the `<|image_pad|>` placeholders'
//! places, and every token's rope position on three axes (mrope.rs), planned for the whole
//! prompt before it is read and kept in the attention layers' caches.

use std::rc::Rc;

use rmx_mlx::Array;
use serde::Deserialize;

use crate::cache::LayerCache;
use crate::config::RawConfig;
use crate::error::{ModelError, Result};
use crate::llama::Llama;
use crate::model::{CausalLm, ModelInfo};
use crate::mrope::{MRope, Plan};
use crate::qwen3_next::{load_hybrid, Config, Layout};
use crate::vision::qwen_vl::{QwenVision, VisionConfig};
use crate::vision::ImageEncoder;
use crate::weights::Weights;

// mlx-lm's TextModelArgs defaults.
defaults! {
    d_hidden: i32 = 4096, d_inter: i32 = 14336, d_layers: i32 = 32, d_heads: i32 = 32,
    d_eps: f32 = 1e-6, d_vocab: i32 = 151936, d_kv: i32 = 8, d_ctx: i32 = 131072,
    d_lv_heads: i32 = 64, d_lk_heads: i32 = 16, d_lk_dim: i32 = 192, d_lv_dim: i32 = 128,
    d_conv: i32 = 4, d_interval: i32 = 4, d_one: i32 = 1, d_yes: bool = true,
}

#[derive(Debug, Clone, Deserialize)]
struct TextConfig {
    #[serde(default = "d_hidden")]
    hidden_size: i32,
    #[serde(default = "d_inter")]
    intermediate_size: i32,
    #[serde(default = "d_layers")]
    num_hidden_layers: i32,
    #[serde(default = "d_heads")]
    num_attention_heads: i32,
    #[serde(default = "d_eps")]
    rms_norm_eps: f32,
    #[serde(default = "d_vocab")]
    vocab_size: i32,
    #[serde(default = "d_kv")]
    num_key_value_heads: i32,
    #[serde(default = "d_ctx")]
    max_position_embeddings: i32,
    #[serde(default = "d_lv_heads")]
    linear_num_value_heads: i32,
    #[serde(default = "d_lk_heads")]
    linear_num_key_heads: i32,
    #[serde(default = "d_lk_dim")]
    linear_key_head_dim: i32,
    #[serde(default = "d_lv_dim")]
    linear_value_head_dim: i32,
    #[serde(default = "d_conv")]
    linear_conv_kernel_dim: i32,
    #[serde(default)]
    tie_word_embeddings: bool,
    #[serde(default)]
    attention_bias: bool,
    head_dim: Option<i32>,
    #[serde(default = "d_interval")]
    full_attention_interval: i32,
    #[serde(default)]
    num_experts: i32,
    #[serde(default)]
    num_experts_per_tok: i32,
    #[serde(default = "d_one")]
    decoder_sparse_step: i32,
    #[serde(default)]
    shared_expert_intermediate_size: i32,
    #[serde(default)]
    moe_intermediate_size: i32,
    #[serde(default = "d_yes")]
    norm_topk_prob: bool,
    rope_parameters: Option<serde_json::Value>,
    partial_rotary_factor: Option<f32>,
    rope_theta: Option<f32>,
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let t: TextConfig = raw.parse_text()?;
    // mlx-lm's __post_init__: rope settings come from rope_parameters when present (its
    // default when absent), which is also the rope_scaling.
    let params = match &t.rope_parameters {
        Some(p) if p.as_object().is_some_and(|o| !o.is_empty()) => Some(p.clone()),
        Some(_) => None,
        None => Some(serde_json::json!({
            "type": "default", "mrope_section": [11, 11, 10], "rope_theta": 100000,
            "partial_rotary_factor": 0.25
        })),
    };
    let num = |k: &str| {
        params
            .as_ref()
            .and_then(|p| p.get(k))
            .and_then(|v| v.as_f64())
            .map(|v| v as f32)
    };
    let (partial, theta) = match &params {
        Some(_) => (
            num("partial_rotary_factor").unwrap_or(0.25),
            num("rope_theta").unwrap_or(100000.0),
        ),
        None => (
            t.partial_rotary_factor.unwrap_or(0.25),
            t.rope_theta.unwrap_or(100000.0),
        ),
    };
    let c = Config {
        hidden_size: t.hidden_size,
        num_hidden_layers: t.num_hidden_layers,
        intermediate_size: t.intermediate_size,
        num_attention_heads: t.num_attention_heads,
        linear_num_value_heads: t.linear_num_value_heads,
        linear_num_key_heads: t.linear_num_key_heads,
        linear_key_head_dim: t.linear_key_head_dim,
        linear_value_head_dim: t.linear_value_head_dim,
        linear_conv_kernel_dim: t.linear_conv_kernel_dim,
        num_experts: t.num_experts,
        num_experts_per_tok: t.num_experts_per_tok,
        decoder_sparse_step: t.decoder_sparse_step,
        shared_expert_intermediate_size: t.shared_expert_intermediate_size,
        mlp_only_layers: vec![],
        moe_intermediate_size: t.moe_intermediate_size,
        rms_norm_eps: t.rms_norm_eps,
        vocab_size: t.vocab_size,
        num_key_value_heads: t.num_key_value_heads,
        rope_theta: theta,
        partial_rotary_factor: partial,
        max_position_embeddings: t.max_position_embeddings,
        head_dim: t
            .head_dim
            .unwrap_or(t.hidden_size / t.num_attention_heads.max(1)),
        norm_topk_prob: t.norm_topk_prob,
        tie_word_embeddings: t.tie_word_embeddings,
        attention_bias: t.attention_bias,
        rope_scaling: params,
        full_attention_interval: t.full_attention_interval,
    };
    // The Hub's own checkpoints, read as mlx-lm reads them (and with their MTP head).
    if crate::hub_layout::is_transformers(w) {
        crate::hub_layout::to_mlx(w, crate::hub_layout::Hub::Qwen35)?;
    }
    // The tower in mlx-vlm's layout takes images; transformers' (`model.visual.*`) is left
    // unloaded and the text model runs alone.
    let vision = if w.has("vision_tower.patch_embed.proj.weight") {
        Some(load_vision(raw, w, &c)?)
    } else {
        None
    };
    w.discard(|k| k.starts_with("vision_tower.") || k.starts_with("model.visual."));
    let text = load_hybrid(
        raw,
        w,
        c,
        Layout {
            fused_projections: false,
            experts_everywhere: true,
            root: "language_model.model",
            lm_head: "language_model.lm_head",
            mtp: true,
        },
    )?;
    Ok(match vision {
        Some(vision) => Box::new(Qwen35Vision { text, vision }),
        None => Box::new(text),
    })
}

/// The image side: the tower and what the prompt's positions need.
struct Vision {
    tower: QwenVision,
    rope: Rc<MRope>,
    vision_start: i32,
}

/// The text model and the image side.
struct Qwen35Vision {
    text: Llama,
    vision: Vision,
}

/// The tower, and the rotation of the text model's `c` by three-axis positions.
fn load_vision(raw: &RawConfig, w: &mut Weights, c: &Config) -> Result<Vision> {
    let bad = |message: String| ModelError::Config {
        path: raw.path.clone(),
        message,
    };
    let cfg: VisionConfig = crate::vision::vision_config(raw)?;
    let id = |key: &str| {
        raw.raw
            .get(key)
            .and_then(|v| v.as_u64())
            .ok_or_else(|| bad(format!("{key} is missing (the vision tower needs it)")))
    };
    let image_token = id("image_token_id")? as u32;
    let vision_start = id("vision_start_token_id")? as i32;
    let section = c
        .rope_scaling
        .as_ref()
        .and_then(|p| p.get("mrope_section"))
        .map(|s| serde_json::from_value::<[i32; 3]>(s.clone()))
        .transpose()
        .map_err(|e| {
            bad(format!(
                "rope_parameters.mrope_section: {e} (three numbers)"
            ))
        })?
        .unwrap_or([11, 11, 10]);
    let rope = MRope::interleaved(c.rotary_dims(), c.rope_theta as f64, section)?;
    Ok(Vision {
        tower: QwenVision::load(w, &raw.quant, cfg, image_token, &raw.path)?,
        rope: Rc::new(rope),
        vision_start,
    })
}

impl CausalLm for Qwen35Vision {
    fn forward_hidden(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        self.text.forward_hidden(tokens, cache)
    }

    fn images_move_positions(&self) -> bool {
        true
    }

    /// The prompt's three-axis positions (mlx-vlm's `get_rope_index`) into every attention
    /// layer's cache.
    fn plan_images(
        &self,
        prompt: &[u32],
        sizes: &[(u32, u32)],
        cache: &mut [LayerCache],
    ) -> Result<()> {
        let v = &self.vision;
        let ids: Vec<i32> = prompt.iter().map(|&t| t as i32).collect();
        let grids: Vec<(i32, i32)> = sizes.iter().map(|&(h, w)| v.tower.grid(h, w)).collect();
        let positions = crate::mrope::positions(
            &ids,
            &grids,
            v.tower.image_token() as i32,
            v.vision_start,
            v.tower.merge(),
        )?;
        let plan = Rc::new(Plan {
            rope: v.rope.clone(),
            positions,
        });
        for c in cache.iter_mut() {
            if let LayerCache::Full(kv) = c {
                kv.mrope = Some(plan.clone());
            }
        }
        Ok(())
    }

    fn forward_hidden_with_images(
        &self,
        tokens: &Array,
        features: &Array,
        cache: &mut [LayerCache],
    ) -> Result<Array> {
        if !cache.iter().any(|c| c.mrope().is_some()) {
            return Err(ModelError::Images(
                "Qwen3.5's images need the prompt's positions planned first (plan_images)".into(),
            ));
        }
        let ids = crate::vision::sequence_ids(tokens)?;
        let embeds = self.text.embed_tokens(tokens)?.squeeze(&[0])?;
        let h = crate::vision::splice(&embeds, &ids, self.vision.tower.image_token(), features)?;
        self.text.forward_embeds(h, cache)
    }

    fn vision(&self) -> Option<&dyn ImageEncoder> {
        Some(&self.vision.tower)
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

    fn mtp_cache(&self) -> Vec<LayerCache> {
        self.text.mtp_cache()
    }

    fn mtp_forward(
        &self,
        hidden: &Array,
        tokens: &Array,
        step: usize,
        cache: &mut [LayerCache],
    ) -> Result<Array> {
        self.text.mtp_forward(hidden, tokens, step, cache)
    }
}
