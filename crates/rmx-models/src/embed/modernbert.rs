//! ModernBERT encoders (nomic-ai/modernbert-embed-base, Alibaba-NLP/gte-modernbert-base,
//! answerdotai/ModernBERT-base), written after mlx-embeddings' `modernbert.py`: token embeddings
//! under a LayerNorm, pre-norm layers of rotary attention and a GeGLU MLP, a final LayerNorm.
//! Layers 0, n, 2n, ... (`global_attn_every_n_layers`) attend over the whole input with rope base
//! `global_rope_theta`; the others see only keys within `local_attention / 2` positions either
//! side, with `local_rope_theta`. Inputs are right-padded; a key mask hides the padding.
//!
//! One departure from mlx-embeddings 0.1.0, on purpose: its MLP computes MLX's tanh GELU
//! (`nn.GELU(approx="precise")`) whatever the config says; rmx computes `hidden_activation`
//! as transformers does, and every ModernBERT says "gelu", the exact erf form it was trained
//! with.

use rmx_mlx::{fast, Array, Dtype};
use serde::Deserialize;

use super::bert::{Gelu, LayerNorm};
use super::pooling::{PoolMode, Pooling};
use super::Embedder;
use crate::config::RawConfig;
use crate::error::{ModelError, Result};
use crate::layers::{Embedding, Linear};
use crate::model::{ModelInfo, ModelKind};
use crate::weights::Weights;

#[derive(Debug, Clone, Deserialize)]
struct Config {
    hidden_size: i32,
    num_hidden_layers: i32,
    num_attention_heads: i32,
    intermediate_size: i32,
    vocab_size: i32,
    max_position_embeddings: Option<i32>,
    #[serde(default = "default_eps")]
    norm_eps: f32,
    #[serde(default)]
    norm_bias: bool,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default)]
    mlp_bias: bool,
    #[serde(default = "default_global_theta")]
    global_rope_theta: f32,
    /// `null` gives the local layers the global base too.
    #[serde(default = "default_local_theta")]
    local_rope_theta: Option<f32>,
    #[serde(default = "default_every")]
    global_attn_every_n_layers: i32,
    #[serde(default = "default_window")]
    local_attention: i32,
    #[serde(default = "default_act")]
    hidden_activation: String,
    pad_token_id: Option<i32>,
}

fn default_eps() -> f32 {
    1e-5
}
fn default_global_theta() -> f32 {
    160_000.0
}
fn default_local_theta() -> Option<f32> {
    Some(10_000.0)
}
fn default_every() -> i32 {
    3
}
fn default_window() -> i32 {
    128
}
fn default_act() -> String {
    "gelu".into()
}

struct Layer {
    /// None on layer 0, whose input is the embeddings' norm already.
    attn_norm: Option<LayerNorm>,
    wqkv: Linear,
    attn_out: Linear,
    mlp_norm: LayerNorm,
    /// `[input; gate]`, `2 * intermediate` outputs.
    wi: Linear,
    mlp_out: Linear,
    /// Attends within the sliding window (else over the whole input).
    local: bool,
    rope_base: f32,
}

pub struct ModernBert {
    words: Embedding,
    embed_norm: LayerNorm,
    layers: Vec<Layer>,
    final_norm: LayerNorm,
    heads: i32,
    head_dim: i32,
    intermediate: i32,
    /// A key is seen from positions at most this far away on the local layers.
    half_window: i32,
    gelu: Gelu,
    pad_id: u32,
    pooling: Pooling,
    info: ModelInfo,
}

/// `model.` in mlx-embeddings' conversions (its sanitize adds it) and in HF's
/// `ModernBertForMaskedLM` files; none in HF's `ModernBertModel` ones.
fn prefix(w: &Weights) -> &'static str {
    ["model.", ""]
        .into_iter()
        .find(|p| w.has(&format!("{p}embeddings.tok_embeddings.weight")))
        .unwrap_or("")
}

/// sentence-transformers' ModernBERT embedders pool by the mean (nomic) or CLS (gte) and say
/// so in their files; without them, mlx-embeddings' `text_embeds` (the normalized mean).
pub fn default_pooling() -> Pooling {
    Pooling {
        mode: PoolMode::Mean,
        normalize: true,
    }
}

fn config_error(raw: &RawConfig, message: &str) -> ModelError {
    ModelError::Config {
        path: raw.path.clone(),
        message: message.into(),
    }
}

pub fn load(raw: &RawConfig, w: &mut Weights, pooling: Pooling) -> Result<Box<dyn Embedder>> {
    let c: Config = raw.parse()?;
    let gelu = Gelu::from_name(raw, &c.hidden_activation)?;
    if c.hidden_size % c.num_attention_heads != 0 {
        return Err(config_error(
            raw,
            "hidden_size is not a multiple of num_attention_heads",
        ));
    }
    if c.global_attn_every_n_layers < 1 {
        return Err(config_error(raw, "global_attn_every_n_layers is below 1"));
    }
    let (hid, inter, q) = (c.hidden_size, c.intermediate_size, &raw.quant);
    let p = prefix(w);
    // Task heads saved beside the encoder (MLM prediction head and decoder, classifier).
    w.discard(|n| {
        n.starts_with("head.") || n.starts_with("decoder.") || n.starts_with("classifier.")
    });
    let words = Embedding::load(
        w,
        q,
        &format!("{p}embeddings.tok_embeddings"),
        c.vocab_size,
        hid,
    )?;
    let norm = |w: &mut Weights, path: &str| {
        LayerNorm::load_with(w, &format!("{p}{path}"), hid, c.norm_eps, c.norm_bias)
    };
    let embed_norm = norm(w, "embeddings.norm")?;
    let mut layers = Vec::with_capacity(c.num_hidden_layers as usize);
    for i in 0..c.num_hidden_layers {
        let l = format!("layers.{i}");
        let lin = |w: &mut Weights, name: &str, inp: i32, out: i32, bias: bool| {
            Linear::load(w, q, &format!("{p}{l}.{name}"), inp, out, bias)
        };
        let local = i % c.global_attn_every_n_layers != 0;
        layers.push(Layer {
            attn_norm: if i == 0 {
                None
            } else {
                Some(norm(w, &format!("{l}.attn_norm"))?)
            },
            wqkv: lin(w, "attn.Wqkv", hid, 3 * hid, c.attention_bias)?,
            attn_out: lin(w, "attn.Wo", hid, hid, c.attention_bias)?,
            mlp_norm: norm(w, &format!("{l}.mlp_norm"))?,
            wi: lin(w, "mlp.Wi", hid, 2 * inter, c.mlp_bias)?,
            mlp_out: lin(w, "mlp.Wo", inter, hid, c.mlp_bias)?,
            local,
            rope_base: match (local, c.local_rope_theta) {
                (true, Some(theta)) => theta,
                _ => c.global_rope_theta,
            },
        });
    }
    let final_norm = norm(w, "final_norm")?;
    let pad = c
        .pad_token_id
        .filter(|&id| (0..c.vocab_size).contains(&id))
        .unwrap_or(0);
    let n_local = layers.iter().filter(|l| l.local).count();
    let n_global = layers.len() - n_local;
    let mut layer_kinds = vec![format!(
        "{n_global}× global attention (rope base {}) + geglu mlp",
        c.global_rope_theta
    )];
    if n_local > 0 {
        layer_kinds.push(format!(
            "{n_local}× sliding-window attention ({} tokens, rope base {}) + geglu mlp",
            c.local_attention,
            c.local_rope_theta.unwrap_or(c.global_rope_theta)
        ));
    }
    layer_kinds.push(format!("{} pooling", pooling.mode.name()));
    let info = ModelInfo {
        model_type: raw.model_type.clone(),
        vocab_size: c.vocab_size,
        hidden_size: hid,
        num_layers: c.num_hidden_layers,
        context_length: c.max_position_embeddings,
        quant_bits: raw.quant.default.map(|s| s.bits),
        tied_embeddings: false,
        layer_kinds,
        kind: ModelKind::Embedding,
        mtp_layers: 0,
    };
    Ok(Box::new(ModernBert {
        words,
        embed_norm,
        layers,
        final_norm,
        heads: c.num_attention_heads,
        head_dim: hid / c.num_attention_heads,
        intermediate: inter,
        half_window: c.local_attention / 2,
        gelu,
        pad_id: pad as u32,
        pooling,
        info,
    }))
}

impl ModernBert {
    fn split_heads(&self, x: &Array) -> Result<Array> {
        let (b, l) = (x.dim(0), x.dim(1));
        Ok(x.reshape(&[b, l, self.heads, self.head_dim])?
            .transpose(&[0, 2, 1, 3])?)
    }

    /// The global and the local layers' masks (`[B, 1, L, L]`, true = attend) for right-padded
    /// rows of `lens` tokens. mlx-embeddings adds -1e9 at hidden keys; a boolean mask gives real
    /// rows the same weights (exp underflows to 0 either way). Each padding row also sees
    /// itself: on a local layer its window may hold no real key, and a row that sees nothing
    /// is NaN, which the next layer would carry through the values into every token of it.
    fn masks(&self, lens: &[usize], longest: usize) -> Result<(Array, Array)> {
        let (b, l) = (lens.len() as i32, longest as i32);
        let mut keep = vec![false; lens.len() * longest];
        for (row, &n) in lens.iter().enumerate() {
            keep[row * longest..row * longest + n].fill(true);
        }
        let keep = Array::from_slice(&keep, &[b, 1, 1, l])?;
        let pos = Array::arange(0.0, l as f64, 1.0, Dtype::I32)?;
        let (rows, cols) = (pos.reshape(&[l, 1])?, pos.reshape(&[1, l])?);
        let global = keep.logical_or(&rows.equal(&cols)?)?;
        // |i - j| <= local_attention / 2, as mlx-embeddings and transformers both draw it.
        let window = rows
            .subtract(&cols)?
            .abs()?
            .less_equal_scalar(self.half_window as f64)?;
        let local = global.logical_and(&window)?;
        Ok((global, local))
    }

    fn layer(&self, layer: &Layer, x: &Array, mask: &Array) -> Result<Array> {
        let (b, l) = (x.dim(0), x.dim(1));
        let hid = self.heads * self.head_dim;
        let normed;
        let h = match &layer.attn_norm {
            Some(n) => {
                normed = n.forward(x)?;
                &normed
            }
            None => x,
        };
        let qkv = layer.wqkv.forward(h)?.split_at(&[hid, 2 * hid], -1)?;
        let rope = fast::Rope {
            dims: self.head_dim,
            traditional: false,
            base: Some(layer.rope_base),
            scale: 1.0,
            freqs: None,
        };
        let q = fast::rope(&self.split_heads(&qkv[0])?, rope, 0)?;
        let k = fast::rope(&self.split_heads(&qkv[1])?, rope, 0)?;
        let v = self.split_heads(&qkv[2])?;
        // head_dim ** -0.5 in Python's double, as mlx-embeddings passes it
        let scale = (self.head_dim as f64).powf(-0.5) as f32;
        let a =
            fast::scaled_dot_product_attention(&q, &k, &v, scale, fast::Mask::Array(mask), None)?
                .transpose(&[0, 2, 1, 3])?
                .reshape(&[b, l, hid])?;
        let x = x.add(&layer.attn_out.forward(&a)?)?;
        let both = layer.wi.forward(&layer.mlp_norm.forward(&x)?)?;
        let parts = both.split_at(&[self.intermediate], -1)?;
        let g = self.gelu.forward(&parts[0])?.multiply(&parts[1])?;
        Ok(x.add(&layer.mlp_out.forward(&g)?)?)
    }
}

impl Embedder for ModernBert {
    fn embed(&self, inputs: &[&[u32]]) -> Result<Array> {
        let b = inputs.len();
        let longest = inputs.iter().map(|t| t.len()).max().unwrap_or(0);
        let mut ids = vec![self.pad_id; b * longest];
        for (row, t) in inputs.iter().enumerate() {
            ids[row * longest..row * longest + t.len()].copy_from_slice(t);
        }
        let ids = Array::from_slice(&ids, &[b as i32, longest as i32])?;
        let lens: Vec<usize> = inputs.iter().map(|t| t.len()).collect();
        let (global, local) = self.masks(&lens, longest)?;
        let mut x = self.embed_norm.forward(&self.words.forward(&ids)?)?;
        for layer in &self.layers {
            let mask = if layer.local { &local } else { &global };
            x = self.layer(layer, &x, mask)?;
        }
        let x = self.final_norm.forward(&x)?;
        self.pooling.apply(&x, &lens, false)
    }

    fn pooling(&self) -> Pooling {
        self.pooling
    }

    fn info(&self) -> &ModelInfo {
        &self.info
    }
}
