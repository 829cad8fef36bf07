//! Gemma 3 text (`gemma3_text`, `Gemma3ForCausalLM`; and the 4B-27B vision-language
//! checkpoints, `gemma3`, with their SigLIP tower when the files carry it, vision/siglip.rs):
//! sandwich norms around attention and MLP
//! with Gemma's `1 + w` RMS norm, GELU MLP, q/k norms, embeddings scaled by sqrt(hidden) rounded
//! to bf16, and sliding-window layers (every `sliding_window_pattern`-th layer is global) with
//! their own rope base.

use rmx_mlx::{Array, Dtype};
use serde::Deserialize;

use crate::attention::{Attention, AttentionShape, Mlp, QkNorm};
use crate::cache::{AttnMask, KvCache, LayerCache, RotatingKvCache};
use crate::config::RawConfig;
use crate::error::Result;
use crate::layers::{Embedding, Linear, RmsNorm};
use crate::model::{CausalLm, ModelInfo};
use crate::rope::Rope;
use crate::vision::siglip::{Gemma3Vision, VisionConfig};
use crate::vision::{ImageEncoder, ImageTokens};
use crate::weights::Weights;

defaults! {
    d_hidden: i32 = 1152, d_layers: i32 = 26, d_inter: i32 = 6912, d_heads: i32 = 4,
    d_head_dim: i32 = 256, d_eps: f32 = 1e-6, d_vocab: i32 = 262144, d_kv: i32 = 1,
    d_theta: f32 = 1_000_000.0, d_local: f32 = 10_000.0, d_qpas: f32 = 256.0,
    d_window: i32 = 512, d_pattern: i32 = 6, d_ctx: i32 = 32768,
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
    #[serde(default = "d_eps")]
    pub rms_norm_eps: f32,
    #[serde(default = "d_vocab")]
    pub vocab_size: i32,
    #[serde(default = "d_kv")]
    pub num_key_value_heads: i32,
    #[serde(default = "d_theta")]
    pub rope_theta: f32,
    #[serde(default = "d_local")]
    pub rope_local_base_freq: f32,
    #[serde(default = "d_qpas")]
    pub query_pre_attn_scalar: f32,
    #[serde(default = "d_window")]
    pub sliding_window: i32,
    #[serde(default = "d_pattern")]
    pub sliding_window_pattern: i32,
    #[serde(default = "d_ctx")]
    pub max_position_embeddings: i32,
    pub rope_scaling: Option<serde_json::Value>,
}

struct Layer {
    attn: Attention,
    mlp: Mlp,
    input_norm: RmsNorm,
    post_attn_norm: RmsNorm,
    pre_ff_norm: RmsNorm,
    post_ff_norm: RmsNorm,
}

/// mlx-lm's `clip_residual`: a plain add except in float16, where the sum is clipped to the
/// float16 range in float32 first.
fn clip_residual(x: &Array, y: &Array) -> Result<Array> {
    if x.dtype() != Dtype::F16 {
        return Ok(x.add(y)?);
    }
    let bound = 65504.0;
    let s = x.astype(Dtype::F32)?.add(&y.astype(Dtype::F32)?)?;
    Ok(s.maximum_scalar(-bound)?
        .minimum_scalar(bound)?
        .astype(Dtype::F16)?)
}

impl Layer {
    fn forward(&self, x: &Array, mask: &AttnMask, cache: &mut LayerCache) -> Result<Array> {
        let r = self
            .attn
            .forward(&self.input_norm.forward(x)?, mask, cache)?;
        let h = clip_residual(x, &self.post_attn_norm.forward(&r)?)?;
        let r = self.mlp.forward(&self.pre_ff_norm.forward(&h)?)?;
        clip_residual(&h, &self.post_ff_norm.forward(&r)?)
    }
}

pub struct Gemma3 {
    embed: Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    lm_head: Option<Linear>,
    cfg: Config,
    info: ModelInfo,
    vision: Option<Vision>,
}

/// The image side of a vision-language checkpoint and what the splice needs.
struct Vision {
    encoder: Gemma3Vision,
    /// mlx-vlm divides image features by sqrt of the top-level `hidden_size`, 2048 when the
    /// config has none (as Gemma 3's have none), before the text model scales every embedding
    /// by sqrt of its own width: so image rows enter the layers at sqrt(width / 2048) times
    /// the projector's output. Kept as mlx-vlm does it, the reference these tests hold to.
    feature_divisor: f64,
    /// Token id whose embedding mlx-vlm zeroes in a prompt with images (`pad_token_id`).
    pad_token: i32,
}

impl Gemma3 {
    fn is_global(&self, i: i32) -> bool {
        i % self.cfg.sliding_window_pattern == self.cfg.sliding_window_pattern - 1
    }
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    Ok(load_text(raw, c, w, "model", "lm_head")?)
}

/// `Gemma3ForConditionalGeneration`: as mlx-lm's `gemma3.py`, the text model is `text_config`
/// with the top-level `vocab_size` (262208 when absent) and 8 / 4 heads where it names none;
/// its tensors live under `language_model.`.
pub fn load_multimodal(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse_wrapped_text(
        262208,
        &[("num_attention_heads", 8), ("num_key_value_heads", 4)],
    )?;
    let vision = if w.has("vision_tower.vision_model.embeddings.patch_embedding.weight") {
        Some(load_vision(raw, w, c.hidden_size)?)
    } else {
        // A conversion without the tower (or with another's layout): the text model runs.
        w.discard(|k| k.starts_with("vision_tower.") || k.starts_with("multi_modal_projector."));
        None
    };
    let mut model = load_text(raw, c, w, "language_model.model", "language_model.lm_head")?;
    model.vision = vision;
    Ok(model)
}

fn load_vision(raw: &RawConfig, w: &mut Weights, text_hidden: i32) -> Result<Vision> {
    let cfg: VisionConfig = crate::vision::vision_config(raw)?;
    let int = |key: &str, default: i64| {
        raw.raw
            .get(key)
            .or_else(|| raw.raw.get("text_config").and_then(|t| t.get(key)))
            .and_then(|v| v.as_i64())
            .unwrap_or(default)
    };
    // mlx-vlm's ModelConfig defaults where the config names none.
    let tokens = ImageTokens {
        image_token: int("image_token_index", 262144) as u32,
        per_image: int("mm_tokens_per_image", 256) as usize,
        begin: Some(int("boi_token_index", 255999) as u32),
        end: Some(int("eoi_token_index", 256000) as u32),
    };
    let top_hidden = raw
        .raw
        .get("hidden_size")
        .and_then(|v| v.as_i64())
        .unwrap_or(2048);
    let pad_token = raw
        .raw
        .get("pad_token_id")
        .and_then(|v| v.as_i64())
        .unwrap_or(0) as i32;
    Ok(Vision {
        encoder: Gemma3Vision::load(w, &raw.quant, cfg, text_hidden, tokens, &raw.path)?,
        feature_divisor: (top_hidden as f64).sqrt(),
        pad_token,
    })
}

fn load_text(
    raw: &RawConfig,
    c: Config,
    w: &mut Weights,
    root: &str,
    lm_head_path: &str,
) -> Result<Box<Gemma3>> {
    let q = &raw.quant;
    let eps = c.rms_norm_eps;
    let norm = |w: &mut Weights, p: &str, d: i32| RmsNorm::load_gemma(w, p, d, eps);
    let shape = AttentionShape {
        hidden: c.hidden_size,
        heads: c.num_attention_heads,
        kv_heads: c.num_key_value_heads,
        head_dim: c.head_dim,
        qkv_bias: false,
        o_bias: false,
        scale: (c.query_pre_attn_scalar as f64).powf(-0.5) as f32,
        sinks: false,
        output_gate: false,
    };
    let mut layers = Vec::new();
    for i in 0..c.num_hidden_layers {
        let p = format!("{root}.layers.{i}");
        let sliding = (i + 1) % c.sliding_window_pattern != 0;
        let rope = if sliding {
            Rope::standard(c.head_dim, c.rope_local_base_freq, false, 1.0)
        } else {
            Rope::from_config(
                c.head_dim,
                c.rope_theta,
                false,
                c.rope_scaling.as_ref(),
                Some(c.max_position_embeddings),
            )?
        };
        layers.push(Layer {
            attn: Attention::load(
                w,
                q,
                &format!("{p}.self_attn"),
                &shape,
                rope,
                QkNorm::AfterTranspose,
                &norm,
            )?,
            mlp: Mlp::load(
                w,
                q,
                &format!("{p}.mlp"),
                c.hidden_size,
                c.intermediate_size,
                false,
                true,
            )?,
            input_norm: norm(w, &format!("{p}.input_layernorm"), c.hidden_size)?,
            post_attn_norm: norm(w, &format!("{p}.post_attention_layernorm"), c.hidden_size)?,
            pre_ff_norm: norm(w, &format!("{p}.pre_feedforward_layernorm"), c.hidden_size)?,
            post_ff_norm: norm(w, &format!("{p}.post_feedforward_layernorm"), c.hidden_size)?,
        });
    }
    // As mlx-lm's sanitize: tied exactly when the checkpoint has no lm_head.
    let tied = !w.has(&format!("{lm_head_path}.weight"));
    let lm_head = if tied {
        None
    } else {
        Some(Linear::load(
            w,
            q,
            lm_head_path,
            c.hidden_size,
            c.vocab_size,
            false,
        )?)
    };
    let kinds = (0..c.num_hidden_layers).map(|i| {
        let attn = if (i + 1) % c.sliding_window_pattern != 0 {
            "sliding attention"
        } else {
            "attention"
        };
        format!("{attn} + dense")
    });
    let info = ModelInfo {
        model_type: raw.model_type.clone(),
        vocab_size: c.vocab_size,
        hidden_size: c.hidden_size,
        num_layers: c.num_hidden_layers,
        context_length: Some(c.max_position_embeddings),
        quant_bits: q.default.map(|s| s.bits),
        tied_embeddings: tied,
        layer_kinds: crate::llama::summarize(kinds),
        kind: crate::model::ModelKind::Chat,
        mtp_layers: 0,
    };
    Ok(Box::new(Gemma3 {
        embed: Embedding::load(
            w,
            q,
            &format!("{root}.embed_tokens"),
            c.vocab_size,
            c.hidden_size,
        )?,
        layers,
        norm: norm(w, &format!("{root}.norm"), c.hidden_size)?,
        lm_head,
        cfg: c,
        info,
        vision: None,
    }))
}

impl Gemma3 {
    /// The layers over embeddings `h` (`[B, L, hidden]`, before Gemma's sqrt(hidden) scale).
    fn run(&self, h: Array, cache: &mut [LayerCache]) -> Result<Array> {
        let scale = Array::scalar_as((self.cfg.hidden_size as f64).sqrt(), Dtype::Bf16)?
            .astype(h.dtype())?;
        let mut h = h.multiply(&scale)?;
        let n = h.dim(1);
        let pattern = self.cfg.sliding_window_pattern as usize;
        let global_mask = cache[(pattern - 1).min(cache.len() - 1)].mask(n, None)?;
        let sliding_mask = if pattern > 1 {
            Some(cache[0].mask(n, Some(self.cfg.sliding_window))?)
        } else {
            None
        };
        for (i, (layer, c)) in self.layers.iter().zip(cache.iter_mut()).enumerate() {
            let mask = match (&sliding_mask, self.is_global(i as i32)) {
                (Some(m), false) => m,
                _ => &global_mask,
            };
            h = layer.forward(&h, mask, c)?;
        }
        self.norm.forward(&h)
    }
}

impl CausalLm for Gemma3 {
    fn forward_hidden(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        self.run(self.embed.forward(tokens)?, cache)
    }

    /// As mlx-vlm's `Gemma3.get_input_embeddings` / `prepare_inputs_for_multimodal`: text
    /// tokens keep their embeddings, the pad token's become zero, the image placeholders take
    /// the features divided by sqrt(top-level hidden_size), in the model's dtype. Its
    /// `masked_scatter` is a gather here: one index per position into [embeddings; features].
    fn forward_hidden_with_images(
        &self,
        tokens: &Array,
        features: &Array,
        cache: &mut [LayerCache],
    ) -> Result<Array> {
        let v = crate::vision::loaded(&self.vision, "Gemma 3")?;
        let ids = crate::vision::sequence_ids(tokens)?;
        let image_token = v.encoder.image_token() as i32;
        let l = ids.len() as i32;
        let n = features.dim(0);
        let (mut index, mut next) = (Vec::with_capacity(ids.len()), 0);
        for &t in &ids {
            if t == image_token {
                index.push(l + 1 + next);
                next += 1;
            } else if t == v.pad_token {
                index.push(l); // the zero row
            } else {
                index.push(index.len() as i32);
            }
        }
        if next != n {
            return Err(crate::error::ModelError::Images(format!(
                "{next} image tokens in the prompt but {n} image features"
            )));
        }
        let embeds = self.embed.forward(tokens)?.squeeze(&[0])?;
        let dtype = embeds.dtype();
        let zero = Array::scalar_as(0.0, dtype)?.broadcast_to(&[1, embeds.dim(1)])?;
        let scaled = features.astype(dtype)?.divide_scalar(v.feature_divisor)?;
        let rows = rmx_mlx::concatenate(&[&embeds, &zero, &scaled], 0)?;
        let h = rows
            .take(&Array::from_slice(&index, &[l])?, 0)?
            .expand_dims(&[0])?;
        self.run(h, cache)
    }

    fn vision(&self) -> Option<&dyn ImageEncoder> {
        self.vision
            .as_ref()
            .map(|v| &v.encoder as &dyn ImageEncoder)
    }

    fn lm_head(&self, hidden: &Array) -> Result<Array> {
        match &self.lm_head {
            Some(l) => l.forward(hidden),
            None => self.embed.as_linear(hidden),
        }
    }

    fn make_cache(&self) -> Vec<LayerCache> {
        (0..self.cfg.num_hidden_layers)
            .map(|i| {
                if self.is_global(i) {
                    LayerCache::Full(KvCache::default())
                } else {
                    LayerCache::Rotating(RotatingKvCache::new(self.cfg.sliding_window))
                }
            })
            .collect()
    }

    fn info(&self) -> &ModelInfo {
        &self.info
    }
}
