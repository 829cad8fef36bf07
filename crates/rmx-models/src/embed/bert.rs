//! BERT-family encoders: BERT (all-MiniLM, bge-small/base/large, e5, gte) and XLM-RoBERTa
//! (bge-m3, multilingual-e5), written after mlx-embeddings' `bert.py` and `xlm_roberta.py`:
//! word + position + token-type embeddings under a LayerNorm, then post-norm layers of
//! bidirectional attention and a GELU MLP. Inputs are right-padded; a key mask hides the padding.
//! XLM-R differs in its positions only: they count from `pad_token_id + 1`, as fairseq did.

use rmx_mlx::{fast, Array};
use serde::Deserialize;

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
    max_position_embeddings: i32,
    vocab_size: i32,
    #[serde(default = "default_type_vocab")]
    type_vocab_size: i32,
    #[serde(default = "default_eps")]
    layer_norm_eps: f32,
    #[serde(default = "default_act")]
    hidden_act: String,
    pad_token_id: Option<i32>,
}

fn default_type_vocab() -> i32 {
    2
}
fn default_eps() -> f32 {
    1e-12
}
fn default_act() -> String {
    "gelu".into()
}

/// mlx.nn.LayerNorm, with or without its bias (ModernBERT's `norm_bias: false` has none).
pub(super) struct LayerNorm {
    weight: Array,
    bias: Option<Array>,
    eps: f32,
}

impl LayerNorm {
    fn load(w: &mut Weights, path: &str, dim: i32, eps: f32) -> Result<LayerNorm> {
        LayerNorm::load_with(w, path, dim, eps, true)
    }

    pub(super) fn load_with(
        w: &mut Weights,
        path: &str,
        dim: i32,
        eps: f32,
        bias: bool,
    ) -> Result<LayerNorm> {
        Ok(LayerNorm {
            weight: w.take(&format!("{path}.weight"), &[dim])?,
            bias: if bias {
                Some(w.take(&format!("{path}.bias"), &[dim])?)
            } else {
                None
            },
            eps,
        })
    }

    pub(super) fn forward(&self, x: &Array) -> Result<Array> {
        Ok(fast::layer_norm(
            x,
            Some(&self.weight),
            self.bias.as_ref(),
            self.eps,
        )?)
    }
}

#[derive(Clone, Copy)]
pub(super) enum Gelu {
    /// mlx.nn.gelu: `x * (1 + erf(x / sqrt 2)) / 2` (HF `gelu`).
    Erf,
    /// mlx.nn.gelu_approx, the tanh form (HF `gelu_new`, `gelu_pytorch_tanh`).
    Tanh,
}

impl Gelu {
    /// The GELU an HF activation name (`hidden_act`, `hidden_activation`) stands for.
    pub(super) fn from_name(raw: &RawConfig, name: &str) -> Result<Gelu> {
        match name {
            "gelu" => Ok(Gelu::Erf),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Gelu::Tanh),
            other => Err(ModelError::Config {
                path: raw.path.clone(),
                message: format!("activation {other:?} is not one rmx computes (gelu, gelu_new)"),
            }),
        }
    }

    pub(super) fn forward(self, x: &Array) -> Result<Array> {
        match self {
            Gelu::Erf => Ok(x
                .multiply(
                    &x.divide_scalar(std::f64::consts::SQRT_2)?
                        .erf()?
                        .add_scalar(1.0)?,
                )?
                .divide_scalar(2.0)?),
            Gelu::Tanh => crate::layers::gelu_approx(x),
        }
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    out_norm: LayerNorm,
}

/// Which of the family's two position schemes the model uses.
#[derive(Clone, Copy)]
enum Positions {
    /// 0, 1, 2, ...
    FromZero,
    /// `pad + 1`, `pad + 2`, ... for tokens; `pad` for padding (XLM-R, RoBERTa).
    AfterPad(i32),
}

pub struct Bert {
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    embed_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: i32,
    head_dim: i32,
    gelu: Gelu,
    scheme: Positions,
    /// XLM-R adds the token type before the position, BERT after: the same sum, rounded alike.
    roberta: bool,
    pad_id: u32,
    pooling: Pooling,
    info: ModelInfo,
}

/// The prefix a checkpoint's encoder tensors carry: none for `BertModel`/`XLMRobertaModel`
/// files, `bert.`/`roberta.` where a task head was saved with them.
fn prefix(w: &Weights) -> &'static str {
    ["", "bert.", "roberta.", "model."]
        .into_iter()
        .find(|p| w.has(&format!("{p}embeddings.word_embeddings.weight")))
        .unwrap_or("")
}

fn is_roberta(raw: &RawConfig) -> bool {
    matches!(raw.model_type.as_str(), "xlm-roberta" | "roberta")
}

/// What a conversion without sentence-transformers files gets: mean pooling for BERT (what
/// mlx-embeddings' `text_embeds` computes), CLS for XLM-R (bge-m3's dense vector), normalized.
pub fn default_pooling(raw: &RawConfig) -> Pooling {
    Pooling {
        mode: if is_roberta(raw) {
            PoolMode::Cls
        } else {
            PoolMode::Mean
        },
        normalize: true,
    }
}

pub fn load(raw: &RawConfig, w: &mut Weights, pooling: Pooling) -> Result<Box<dyn Embedder>> {
    let c: Config = raw.parse()?;
    let roberta = is_roberta(raw);
    let gelu = Gelu::from_name(raw, &c.hidden_act)?;
    if c.hidden_size % c.num_attention_heads != 0 {
        return Err(ModelError::Config {
            path: raw.path.clone(),
            message: "hidden_size is not a multiple of num_attention_heads".into(),
        });
    }
    let (hid, q) = (c.hidden_size, &raw.quant);
    let p = prefix(w);
    w.discard(|n| {
        n.ends_with("position_ids")
            || n.contains("pooler.")
            || n.starts_with("lm_head")
            || n.starts_with("cls.")
    });
    let e = format!("{p}embeddings");
    let words = Embedding::load(w, q, &format!("{e}.word_embeddings"), c.vocab_size, hid)?;
    let positions = Embedding::load(
        w,
        q,
        &format!("{e}.position_embeddings"),
        c.max_position_embeddings,
        hid,
    )?;
    let token_types = Embedding::load(
        w,
        q,
        &format!("{e}.token_type_embeddings"),
        c.type_vocab_size,
        hid,
    )?;
    let embed_norm = LayerNorm::load(w, &format!("{e}.LayerNorm"), hid, c.layer_norm_eps)?;
    let mut layers = Vec::with_capacity(c.num_hidden_layers as usize);
    for i in 0..c.num_hidden_layers {
        let l = format!("{p}encoder.layer.{i}");
        let lin = |w: &mut Weights, name: &str, inp: i32, out: i32| {
            Linear::load(w, q, &format!("{l}.{name}"), inp, out, true)
        };
        layers.push(Layer {
            query: lin(w, "attention.self.query", hid, hid)?,
            key: lin(w, "attention.self.key", hid, hid)?,
            value: lin(w, "attention.self.value", hid, hid)?,
            attn_out: lin(w, "attention.output.dense", hid, hid)?,
            attn_norm: LayerNorm::load(
                w,
                &format!("{l}.attention.output.LayerNorm"),
                hid,
                c.layer_norm_eps,
            )?,
            intermediate: lin(w, "intermediate.dense", hid, c.intermediate_size)?,
            output: lin(w, "output.dense", c.intermediate_size, hid)?,
            out_norm: LayerNorm::load(w, &format!("{l}.output.LayerNorm"), hid, c.layer_norm_eps)?,
        });
    }
    let pad = c.pad_token_id.unwrap_or(if roberta { 1 } else { 0 });
    let scheme = if roberta {
        Positions::AfterPad(pad)
    } else {
        Positions::FromZero
    };
    // The longest input the position table holds.
    let context = match scheme {
        Positions::FromZero => c.max_position_embeddings,
        Positions::AfterPad(pad) => c.max_position_embeddings - pad - 1,
    };
    let info = ModelInfo {
        model_type: raw.model_type.clone(),
        vocab_size: c.vocab_size,
        hidden_size: hid,
        num_layers: c.num_hidden_layers,
        context_length: Some(context),
        quant_bits: raw.quant.default.map(|s| s.bits),
        tied_embeddings: false,
        layer_kinds: vec![format!(
            "{}× bidirectional attention + gelu mlp, {} pooling",
            c.num_hidden_layers,
            pooling.mode.name()
        )],
        kind: ModelKind::Embedding,
        mtp_layers: 0,
    };
    Ok(Box::new(Bert {
        words,
        positions,
        token_types,
        embed_norm,
        layers,
        heads: c.num_attention_heads,
        head_dim: hid / c.num_attention_heads,
        gelu,
        scheme,
        roberta,
        pad_id: pad.max(0) as u32,
        pooling,
        info,
    }))
}

impl Bert {
    fn split_heads(&self, x: &Array) -> Result<Array> {
        let (b, l) = (x.dim(0), x.dim(1));
        Ok(x.reshape(&[b, l, self.heads, self.head_dim])?
            .transpose(&[0, 2, 1, 3])?)
    }

    fn layer(&self, layer: &Layer, x: &Array, mask: &Array) -> Result<Array> {
        let (b, l) = (x.dim(0), x.dim(1));
        let q = self.split_heads(&layer.query.forward(x)?)?;
        let k = self.split_heads(&layer.key.forward(x)?)?;
        let v = self.split_heads(&layer.value.forward(x)?)?;
        let scale = 1.0 / (self.head_dim as f32).sqrt();
        let a =
            fast::scaled_dot_product_attention(&q, &k, &v, scale, fast::Mask::Array(mask), None)?
                .transpose(&[0, 2, 1, 3])?
                .reshape(&[b, l, self.heads * self.head_dim])?;
        let x = layer
            .attn_norm
            .forward(&layer.attn_out.forward(&a)?.add(x)?)?;
        let h = self.gelu.forward(&layer.intermediate.forward(&x)?)?;
        layer.out_norm.forward(&layer.output.forward(&h)?.add(&x)?)
    }
}

impl Embedder for Bert {
    fn embed(&self, inputs: &[&[u32]]) -> Result<Array> {
        let b = inputs.len();
        let longest = inputs.iter().map(|t| t.len()).max().unwrap_or(0);
        let (mut ids, mut pos, mut keep) = (
            vec![self.pad_id; b * longest],
            vec![0i32; b * longest],
            vec![false; b * longest],
        );
        for (row, t) in inputs.iter().enumerate() {
            let base = row * longest;
            ids[base..base + t.len()].copy_from_slice(t);
            keep[base..base + t.len()].fill(true);
            for (j, p) in pos[base..base + longest].iter_mut().enumerate() {
                *p = match self.scheme {
                    Positions::FromZero => j as i32,
                    Positions::AfterPad(pad) if j < t.len() => pad + 1 + j as i32,
                    Positions::AfterPad(pad) => pad,
                };
            }
        }
        let shape = [b as i32, longest as i32];
        let ids = Array::from_slice(&ids, &shape)?;
        let pos = Array::from_slice(&pos, &shape)?;
        let types = Array::from_slice(&vec![0i32; b * longest], &shape)?;
        let mask = Array::from_slice(&keep, &[b as i32, 1, 1, longest as i32])?;
        let words = self.words.forward(&ids)?;
        let (positions, types) = (
            self.positions.forward(&pos)?,
            self.token_types.forward(&types)?,
        );
        let sum = if self.roberta {
            words.add(&types)?.add(&positions)?
        } else {
            words.add(&positions)?.add(&types)?
        };
        let mut x = self.embed_norm.forward(&sum)?;
        for layer in &self.layers {
            x = self.layer(layer, &x, &mask)?;
        }
        let lens: Vec<usize> = inputs.iter().map(|t| t.len()).collect();
        self.pooling.apply(&x, &lens, false)
    }

    fn pooling(&self) -> Pooling {
        self.pooling
    }

    fn info(&self) -> &ModelInfo {
        &self.info
    }
}
