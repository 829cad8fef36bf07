//! Llama 2/3/3.1/3.2 (and SmolLM, and Mistral, which mlx-lm reads as Llama): pre-norm decoder,
//! grouped-query attention, SwiGLU MLP, `llama3` rope scaling, optional sliding-window layers.

use rmx_mlx::Array;
use serde::Deserialize;

use crate::attention::{Attention, AttentionShape, Mlp, QkNorm};
use crate::cache::{AttnMask, KvCache, LayerCache, RotatingKvCache};
use crate::config::RawConfig;
use crate::error::Result;
use crate::layers::{Embedding, Linear, RmsNorm};
use crate::model::{CausalLm, ModelInfo};
use crate::rope::Rope;
use crate::weights::Weights;

fn default_rope_theta() -> f32 {
    10000.0
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
    pub head_dim: Option<i32>,
    pub max_position_embeddings: Option<i32>,
    pub num_key_value_heads: Option<i32>,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub mlp_bias: bool,
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f32,
    #[serde(default)]
    pub rope_traditional: bool,
    pub rope_scaling: Option<serde_json::Value>,
    #[serde(default = "yes")]
    pub tie_word_embeddings: bool,
    pub layer_types: Option<Vec<String>>,
    pub sliding_window: Option<i32>,
}

/// The pre-norm decoder layer shared by Llama, Qwen2 and Qwen3.
pub(crate) struct DecoderLayer {
    pub attn: Attention,
    pub mlp: Mlp,
    pub input_norm: RmsNorm,
    pub post_norm: RmsNorm,
}

impl DecoderLayer {
    pub fn forward(&self, x: &Array, mask: &AttnMask, cache: &mut LayerCache) -> Result<Array> {
        if let Some(y) = crate::decode_layer::forward(self, x, mask, cache)? {
            return Ok(y);
        }
        let h = self
            .attn
            .forward_prenorm(x, &self.input_norm, mask, cache)?;
        self.mlp.forward_prenorm(&h, &self.post_norm)
    }
}

pub struct Llama {
    embed: Embedding,
    layers: Vec<DecoderLayer>,
    sliding: Vec<bool>,
    norm: RmsNorm,
    lm_head: Option<Linear>,
    window: Option<i32>,
    info: ModelInfo,
}

/// What Llama, Qwen2 and Qwen3 differ in.
pub(crate) struct Variant {
    pub qkv_bias: bool,
    pub o_bias: bool,
    pub qk_norm: QkNorm,
    pub head_dim: i32,
    pub rope: Box<dyn Fn() -> Result<Rope>>,
}

pub(crate) fn load_decoder(
    raw: &RawConfig,
    c: &Config,
    w: &mut Weights,
    v: Variant,
) -> Result<Llama> {
    let q = &raw.quant;
    let kv_heads = c.num_key_value_heads.unwrap_or(c.num_attention_heads);
    let shape = AttentionShape {
        hidden: c.hidden_size,
        heads: c.num_attention_heads,
        kv_heads,
        head_dim: v.head_dim,
        qkv_bias: v.qkv_bias,
        o_bias: v.o_bias,
        scale: (v.head_dim as f64).powf(-0.5) as f32,
    };
    w.discard(|k| k.contains("self_attn.rotary_emb.inv_freq"));
    if c.tie_word_embeddings {
        w.discard(|k| k.starts_with("lm_head."));
    }
    let eps = c.rms_norm_eps;
    let norm = |w: &mut Weights, p: &str, d: i32| RmsNorm::load(w, p, d, eps);
    let mut layers = Vec::new();
    for i in 0..c.num_hidden_layers {
        let p = format!("model.layers.{i}");
        layers.push(DecoderLayer {
            attn: Attention::load(
                w,
                q,
                &format!("{p}.self_attn"),
                &shape,
                (v.rope)()?,
                v.qk_norm,
                &norm,
            )?,
            mlp: Mlp::load(
                w,
                q,
                &format!("{p}.mlp"),
                c.hidden_size,
                c.intermediate_size,
                c.mlp_bias,
                false,
            )?,
            input_norm: norm(w, &format!("{p}.input_layernorm"), c.hidden_size)?,
            post_norm: norm(w, &format!("{p}.post_attention_layernorm"), c.hidden_size)?,
        });
    }
    let sliding: Vec<bool> = match &c.layer_types {
        Some(t) => t.iter().map(|s| s == "sliding_attention").collect(),
        None => vec![false; layers.len()],
    };
    Ok(Llama {
        embed: Embedding::load(w, q, "model.embed_tokens", c.vocab_size, c.hidden_size)?,
        layers,
        sliding,
        norm: norm(w, "model.norm", c.hidden_size)?,
        lm_head: if c.tie_word_embeddings {
            None
        } else {
            Some(Linear::load(
                w,
                q,
                "lm_head",
                c.hidden_size,
                c.vocab_size,
                false,
            )?)
        },
        window: c.sliding_window,
        info: ModelInfo {
            model_type: raw.model_type.clone(),
            vocab_size: c.vocab_size,
            hidden_size: c.hidden_size,
            num_layers: c.num_hidden_layers,
            context_length: c.max_position_embeddings,
            quant_bits: q.default.map(|s| s.bits),
            tied_embeddings: c.tie_word_embeddings,
        },
    })
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    let head_dim = c.head_dim.unwrap_or(c.hidden_size / c.num_attention_heads);
    let (theta, trad, scaling) = (c.rope_theta, c.rope_traditional, c.rope_scaling.clone());
    let v = Variant {
        qkv_bias: c.attention_bias,
        o_bias: c.attention_bias,
        qk_norm: QkNorm::None,
        head_dim,
        rope: Box::new(move || Rope::from_config(head_dim, theta, trad, scaling.as_ref())),
    };
    Ok(Box::new(load_decoder(raw, &c, w, v)?))
}

impl CausalLm for Llama {
    fn forward_hidden(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        let mut h = self.embed.forward(tokens)?;
        let n = tokens.dim(1);
        let fa = self.sliding.iter().position(|s| !s).unwrap_or(0);
        let fa_mask = cache[fa].mask(n, None)?;
        let swa_mask = match self.sliding.iter().position(|s| *s) {
            Some(i) => Some(cache[i].mask(n, self.window)?),
            None => None,
        };
        let group = crate::fastpath::fast_path().layers_per_launch;
        let mut i = 0;
        while i < self.layers.len() {
            let mask = match (&swa_mask, self.sliding[i]) {
                (Some(m), true) => m,
                _ => &fa_mask,
            };
            // A decode step runs up to `group` consecutive full-attention layers in one launch
            // of the layer kernel where it applies (decode_layer.rs); otherwise layer by layer.
            let end = (i..self.layers.len().min(i + group))
                .take_while(|&j| !self.sliding[j])
                .last()
                .map_or(i, |j| j + 1);
            if n == 1 && end > i + 1 {
                let (ls, cs) = (&self.layers[i..end], &mut cache[i..end]);
                if let Some(y) = crate::decode_layer::forward_group(ls, &h, mask, cs)? {
                    h = y;
                    i = end;
                    continue;
                }
            }
            h = self.layers[i].forward(&h, mask, &mut cache[i])?;
            i += 1;
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
        self.sliding
            .iter()
            .map(|s| match (s, self.window) {
                (true, Some(w)) => LayerCache::Rotating(RotatingKvCache::new(w)),
                _ => LayerCache::Full(KvCache::default()),
            })
            .collect()
    }

    fn info(&self) -> &ModelInfo {
        &self.info
    }
}
