//! Gemma 3 text (`gemma3_text`, `Gemma3ForCausalLM`; and the text tower of the 4B-27B
//! vision-language checkpoints, `gemma3`, whose vision weights stay unloaded): sandwich norms around attention and MLP
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
use crate::weights::Weights;

macro_rules! defaults {
    ($($f:ident: $t:ty = $v:expr),* $(,)?) => { $(fn $f() -> $t { $v })* };
}
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
}

impl Gemma3 {
    fn is_global(&self, i: i32) -> bool {
        i % self.cfg.sliding_window_pattern == self.cfg.sliding_window_pattern - 1
    }
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    load_text(raw, c, w, "model", "lm_head")
}

/// `Gemma3ForConditionalGeneration`: as mlx-lm's `gemma3.py`, the text model is `text_config`
/// with the top-level `vocab_size` (262208 when absent) and 8 / 4 heads where it names none;
/// its tensors live under `language_model.`.
pub fn load_multimodal(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse_wrapped_text(
        262208,
        &[("num_attention_heads", 8), ("num_key_value_heads", 4)],
    )?;
    w.discard(|k| k.starts_with("vision_tower.") || k.starts_with("multi_modal_projector."));
    load_text(raw, c, w, "language_model.model", "language_model.lm_head")
}

fn load_text(
    raw: &RawConfig,
    c: Config,
    w: &mut Weights,
    root: &str,
    lm_head_path: &str,
) -> Result<Box<dyn CausalLm>> {
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
    }))
}

impl CausalLm for Gemma3 {
    fn forward_hidden(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        let h = self.embed.forward(tokens)?;
        let scale = Array::scalar_as((self.cfg.hidden_size as f64).sqrt(), Dtype::Bf16)?
            .astype(h.dtype())?;
        let mut h = h.multiply(&scale)?;
        let n = tokens.dim(1);
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
