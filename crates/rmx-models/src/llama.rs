//! Llama 2/3/3.1/3.2 (and SmolLM, and Mistral, which mlx-lm reads as Llama): pre-norm decoder,
//! grouped-query attention, SwiGLU MLP, `llama3` rope scaling, optional sliding-window layers.

use rmx_mlx::Array;
use serde::Deserialize;

use crate::attention::{Attention, AttentionShape, Mlp, QkNorm};
use crate::cache::{AttnMask, LayerCache};
use crate::config::QuantConfig;
use crate::config::RawConfig;
use crate::decode_layer;
use crate::decoder_layer::DecoderLayer;
use crate::error::{ModelError, Result};
use crate::feed_forward::FeedForward;
use crate::layers::{Embedding, Linear, RmsNorm};
use crate::mixer::Mixer;
use crate::model::{CausalLm, ModelInfo};
use crate::mtp::MtpHead;
use crate::parallel::ParallelMode;
use crate::pipeline::Stage;
use crate::rope::Rope;
use crate::tensor_parallel::{self, Split, VocabShard};
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

impl Config {
    /// The shared decoder's settings from a family's own config, field for field by name (the
    /// families spell them as Llama does; what a family lacks takes Llama's default). The family
    /// then sets what it reads differently.
    pub(crate) fn from_family<T: serde::Serialize>(c: &T) -> Result<Config> {
        serde_json::to_value(c)
            .and_then(serde_json::from_value)
            .map_err(|e| ModelError::Config {
                path: "config.json".into(),
                message: format!("invalid config: {e}"),
            })
    }
}

/// A layer's decode step as one launch of the CUDA layer kernel where it was chosen at load
/// (decode_layer.rs); otherwise MLX's ops and rmx's per-op kernels.
fn forward_layer(
    layer: &DecoderLayer,
    x: &Array,
    mask: &AttnMask,
    cache: &mut LayerCache,
) -> Result<Array> {
    if layer.one_launch.is_some() {
        if let Some(y) = decode_layer::forward(layer, x, mask, cache)? {
            return Ok(y);
        }
    }
    layer.forward_ops(x, mask, cache)
}

/// Builds layer `i`'s mixer from the weights under the layer's prefix (`model.layers.{i}`), or
/// says `None`: the layer has the variant's attention (`{prefix}.self_attn`).
pub(crate) type MixerLoader =
    Box<dyn Fn(&mut Weights, &QuantConfig, i32, &str) -> Result<Option<Mixer>>>;

/// Builds layer `i`'s feed-forward from the weights under `prefix` (`model.layers.{i}.mlp`).
pub(crate) type FfnLoader =
    Box<dyn Fn(&mut Weights, &QuantConfig, i32, &str) -> Result<FeedForward>>;

pub struct Llama {
    embed: Embedding,
    /// On a rank of a group the model is split over: the vocabulary rows `embed` and `lm_head`
    /// hold.
    vocab: Option<VocabShard>,
    /// In a pipeline: this rank's place; `layers` are then only its own.
    stage: Option<Stage>,
    layers: Vec<DecoderLayer>,
    sliding: Vec<bool>,
    norm: RmsNorm,
    lm_head: Option<Linear>,
    /// The checkpoint's multi-token-prediction head, when it has one and the variant reads it.
    mtp: Option<MtpHead>,
    window: Option<i32>,
    info: ModelInfo,
}

/// What the families on this decoder differ in.
pub(crate) struct Variant {
    pub qkv_bias: bool,
    pub o_bias: bool,
    pub qk_norm: QkNorm,
    pub head_dim: i32,
    pub rope: Box<dyn Fn(i32) -> Result<Rope>>,
    /// Attention sinks (GPT-OSS).
    pub sinks: bool,
    /// The feed-forward of each layer; `None`: the dense SwiGLU MLP of the config's sizes. On a
    /// rank of a tensor-parallel group it loads the rank's share, as the mixer loader does.
    pub ffn: Option<FfnLoader>,
    /// Layers whose mixer is not the attention (Gated DeltaNet); `None`: all attention.
    pub mixer: Option<MixerLoader>,
    /// q_proj also gives a sigmoid gate on attention's output (Qwen3-Next, Qwen3.5).
    pub output_gate: bool,
    /// Where the decoder's tensors live: `model` (`model.layers.0...`), or
    /// `language_model.model` in the text tower of a vision-language checkpoint.
    pub root: String,
    /// The output projection's path: `lm_head`, or `language_model.lm_head`.
    pub lm_head: String,
    /// Reads the checkpoint's multi-token-prediction head (`mtp.*`, mtp.rs) when it has one;
    /// otherwise its tensors are dropped.
    pub mtp: bool,
}

impl Variant {
    /// A dense family's variant: no sinks, the config's MLP.
    pub fn dense(
        qkv_bias: bool,
        o_bias: bool,
        qk_norm: QkNorm,
        head_dim: i32,
        rope: Box<dyn Fn(i32) -> Result<Rope>>,
    ) -> Variant {
        Variant {
            qkv_bias,
            o_bias,
            qk_norm,
            head_dim,
            rope,
            sinks: false,
            ffn: None,
            mixer: None,
            output_gate: false,
            root: "model".into(),
            lm_head: "lm_head".into(),
            mtp: false,
        }
    }
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
        sinks: v.sinks,
        output_gate: v.output_gate,
    };
    w.discard(|k| k.contains("self_attn.rotary_emb.inv_freq"));
    if c.tie_word_embeddings {
        let head = format!("{}.", v.lm_head);
        w.discard(|k| k.starts_with(&head));
    }
    let vocab = match w.parallel() {
        Some(p) => Some(VocabShard::new(p, c.vocab_size)?),
        None => None,
    };
    let stage = match w.parallel() {
        Some(p) if p.mode() == ParallelMode::Pipeline => Some(Stage::new(p, c.num_hidden_layers)?),
        _ => None,
    };
    let root = v.root.as_str();
    let eps = c.rms_norm_eps;
    let norm = |w: &mut Weights, p: &str, d: i32| RmsNorm::load(w, p, d, eps);
    let mut layers = Vec::new();
    for i in 0..c.num_hidden_layers {
        let p = format!("{root}.layers.{i}");
        if stage.as_ref().is_some_and(|s| !s.layers().contains(i)) {
            // Another rank's layer: its tensors are never read.
            let prefix = format!("{p}.");
            w.discard(|k| k.starts_with(&prefix));
            continue;
        }
        let mut layer = load_layer(w, q, c, &v, &shape, i, &p, false)?;
        layer.one_launch = decode_layer::fits(&layer);
        layers.push(layer);
    }
    // Its multi-token-prediction layers are full-attention layers of the model's kind (their
    // feed-forward as the family's, here as layer `num_hidden_layers`); read by the ops.
    let mtp = match v.mtp {
        true => MtpHead::load(w, q, c.hidden_size, eps, |w, i, p| {
            load_layer(w, q, c, &v, &shape, c.num_hidden_layers + i, p, true)
        })?,
        false => None,
    };
    let sliding: Vec<bool> = match &c.layer_types {
        Some(t) if t.len() != c.num_hidden_layers as usize => {
            return Err(ModelError::Config {
                path: raw.path.clone(),
                message: format!(
                    "layer_types has {} entries for {} layers (num_hidden_layers)",
                    t.len(),
                    c.num_hidden_layers
                ),
            })
        }
        Some(t) => t.iter().map(|s| s == "sliding_attention").collect(),
        None => vec![false; c.num_hidden_layers as usize],
    };
    if let Some(s) = &stage {
        // A rank's engine decides from its own layers whether to batch sequences and how to
        // reuse prefixes (`batches`, `is_trimmable`): with a sliding-window layer on some ranks
        // and none on others, their engines would schedule differently and wait on each other
        // for ever. So every rank's range holds one, or none does.
        let with_window: Vec<bool> = s
            .every_rank(c.num_hidden_layers)
            .iter()
            .map(|p| sliding[p.start as usize..(p.start + p.len) as usize].contains(&true))
            .collect();
        if with_window.iter().any(|w| *w != with_window[0]) {
            return Err(ModelError::Parallel {
                ranks: with_window.len() as i32,
                message: format!(
                    "over {} pipeline ranks some ranks' layers would have a sliding window and \
                     others none, and their engines would not run in step; use fewer ranks \
                     (each range then holds a sliding-window layer) or tensor parallelism",
                    with_window.len()
                ),
            });
        }
    }
    // This rank's layers' kinds, in a pipeline.
    let sliding: Vec<bool> = match &stage {
        Some(s) => {
            let l = s.layers();
            sliding[l.start as usize..(l.start + l.len) as usize].to_vec()
        }
        None => sliding,
    };
    if sliding.iter().any(|s| *s) && c.sliding_window.is_none() {
        return Err(ModelError::Config {
            path: raw.path.clone(),
            message: "layer_types has sliding_attention layers but sliding_window is not set"
                .into(),
        });
    }
    let mut layer_kinds = summarize(layers.iter().zip(&sliding).map(|(l, s)| l.describe(*s)));
    if let Some(m) = &mtp {
        layer_kinds.push(m.describe());
    }
    let embed_path = format!("{root}.embed_tokens");
    let embed = match &vocab {
        Some(v) => v.load_embedding(w, q, &embed_path, c.hidden_size)?,
        None => Embedding::load(w, q, &embed_path, c.vocab_size, c.hidden_size)?,
    };
    let lm_head = if c.tie_word_embeddings {
        None
    } else {
        let split = vocab.as_ref().map(|v| Split::Rows(v.rows()));
        Some(tensor_parallel::linear(
            w,
            q,
            &v.lm_head,
            c.hidden_size,
            c.vocab_size,
            false,
            split,
        )?)
    };
    Ok(Llama {
        embed,
        vocab,
        stage,
        layers,
        sliding,
        norm: norm(w, &format!("{root}.norm"), c.hidden_size)?,
        lm_head,
        window: c.sliding_window,
        info: ModelInfo {
            model_type: raw.model_type.clone(),
            vocab_size: c.vocab_size,
            hidden_size: c.hidden_size,
            num_layers: c.num_hidden_layers,
            context_length: c.max_position_embeddings,
            quant_bits: q.default.map(|s| s.bits),
            tied_embeddings: c.tie_word_embeddings,
            layer_kinds,
            kind: crate::model::ModelKind::Chat,
            mtp_layers: mtp.as_ref().map_or(0, MtpHead::layers),
        },
        mtp,
    })
}

/// Layer `i` of the decoder at `p`: the family's mixer (unless `attention`, which forces the
/// attention) and feed-forward, each behind its norm.
#[allow(clippy::too_many_arguments)]
fn load_layer(
    w: &mut Weights,
    q: &QuantConfig,
    c: &Config,
    v: &Variant,
    shape: &AttentionShape,
    i: i32,
    p: &str,
    attention: bool,
) -> Result<DecoderLayer> {
    let eps = c.rms_norm_eps;
    let norm = |w: &mut Weights, p: &str, d: i32| RmsNorm::load(w, p, d, eps);
    let custom = match (&v.mixer, attention) {
        (Some(load), false) => load(w, q, i, p)?,
        _ => None,
    };
    let mixer = match custom {
        Some(m) => m,
        None => Mixer::Attention(Box::new(Attention::load(
            w,
            q,
            &format!("{p}.self_attn"),
            shape,
            (v.rope)(i)?,
            v.qk_norm,
            &norm,
        )?)),
    };
    let mlp = format!("{p}.mlp");
    let ffn = match &v.ffn {
        Some(load) => load(w, q, i, &mlp)?,
        None => FeedForward::Dense(Mlp::load(
            w,
            q,
            &mlp,
            c.hidden_size,
            c.intermediate_size,
            c.mlp_bias,
            false,
        )?),
    };
    Ok(DecoderLayer::new(
        mixer,
        ffn,
        norm(w, &format!("{p}.input_layernorm"), c.hidden_size)?,
        norm(w, &format!("{p}.post_attention_layernorm"), c.hidden_size)?,
    ))
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    let v = Variant::llama(&c, |_| true);
    Ok(Box::new(load_decoder(raw, &c, w, v)?))
}

impl Variant {
    /// Llama's own variant: `head_dim` or hidden / heads, biases as `attention_bias`, the
    /// config's rope on the layers `rotates` says (SmolLM3's NoPE layers have none).
    pub fn llama(c: &Config, rotates: impl Fn(i32) -> bool + 'static) -> Variant {
        let head_dim = c.head_dim.unwrap_or(c.hidden_size / c.num_attention_heads);
        let (theta, trad, scaling) = (c.rope_theta, c.rope_traditional, c.rope_scaling.clone());
        let max_pos = c.max_position_embeddings;
        Variant::dense(
            c.attention_bias,
            c.attention_bias,
            QkNorm::None,
            head_dim,
            Box::new(move |i| match rotates(i) {
                true => Rope::from_config(head_dim, theta, trad, scaling.as_ref(), max_pos),
                false => Ok(Rope::none()),
            }),
        )
    }
}

/// "N× kind" lines for runs of equal layer descriptions, in layer order.
pub(crate) fn summarize(kinds: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for k in kinds {
        match out.iter_mut().find(|(d, _)| *d == k) {
            Some((_, n)) => *n += 1,
            None => out.push((k, 1)),
        }
    }
    out.into_iter().map(|(d, n)| format!("{n}× {d}")).collect()
}

impl Llama {
    /// The tokens' `[B, L, hidden]` input embeddings.
    pub(crate) fn embed_tokens(&self, tokens: &Array) -> Result<Array> {
        match &self.vocab {
            Some(v) => v.embed(&self.embed, tokens),
            None => self.embed.forward(tokens),
        }
    }

    /// The decoder over input embeddings `h` (`[B, L, hidden]`), to the final norm's output.
    pub(crate) fn forward_embeds(&self, mut h: Array, cache: &mut [LayerCache]) -> Result<Array> {
        if let Some(s) = &self.stage {
            h = s.input(&h)?;
        }
        let n = h.dim(1);
        let fa = (0..self.layers.len())
            .find(|&i| !self.sliding[i] && !self.layers[i].mixer.is_recurrent());
        let fa_mask = match fa {
            Some(i) => cache[i].mask(n, None)?,
            None => AttnMask::None,
        };
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
            // A decode step runs up to `group` consecutive full-attention (or DeltaNet) layers
            // of one kind in one launch of the layer kernel where it applies (decode_layer.rs);
            // otherwise layer by layer.
            let kind = self.layers[i].one_launch.filter(|k| k.groups());
            let most = kind.map_or(1, |k| group.min(k.max_layers()));
            // Sliding-window layers join a launch when their mask is none too (a window as
            // long as the ring: GPT-OSS's); the kernel attends a ring's whole buffer.
            let window_free = swa_mask
                .as_ref()
                .is_none_or(|m| matches!(m, AttnMask::None));
            let end = (i..self.layers.len().min(i + most))
                .take_while(|&j| {
                    kind.is_some()
                        && (window_free || !self.sliding[j])
                        && self.layers[j].one_launch == kind
                })
                .last()
                .map_or(i, |j| j + 1);
            // A verify's block of a few tokens takes the same launch (rows::forward_block).
            if n <= decode_layer::MAX_BLOCK && end > i + 1 {
                let (ls, cs) = (&self.layers[i..end], &mut cache[i..end]);
                if let Some(y) = decode_layer::forward_group(ls, &h, mask, cs)? {
                    h = y;
                    i = end;
                    continue;
                }
            }
            h = forward_layer(&self.layers[i], &h, mask, &mut cache[i])?;
            i += 1;
        }
        if let Some(s) = &self.stage {
            h = s.output(&h, cache)?;
        }
        self.norm.forward(&h)
    }
}

impl CausalLm for Llama {
    fn forward_hidden(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        self.forward_embeds(self.embed_tokens(tokens)?, cache)
    }

    fn lm_head(&self, hidden: &Array) -> Result<Array> {
        let logits = match &self.lm_head {
            Some(l) => l.forward(hidden)?,
            None => self.embed.as_linear(hidden)?,
        };
        match &self.vocab {
            Some(v) => v.logits(&logits),
            None => Ok(logits),
        }
    }

    fn make_cache(&self) -> Vec<LayerCache> {
        self.layers
            .iter()
            .zip(&self.sliding)
            .map(|(l, s)| l.mixer.make_cache(self.window.filter(|_| *s)))
            .collect()
    }

    fn batches(&self) -> bool {
        !self.sliding.iter().any(|s| *s)
            && self
                .layers
                .iter()
                .filter_map(|l| l.mixer.attention())
                .all(|a| a.rotates_rows())
            && crate::batch_cache::batches(&self.make_cache())
    }

    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn mtp_cache(&self) -> Vec<LayerCache> {
        self.mtp.as_ref().map_or(Vec::new(), MtpHead::make_cache)
    }

    fn mtp_forward(
        &self,
        hidden: &Array,
        tokens: &Array,
        step: usize,
        cache: &mut [LayerCache],
    ) -> Result<Array> {
        let Some(mtp) = &self.mtp else {
            return Err(ModelError::NoMtp(self.info.model_type.clone()));
        };
        mtp.forward(&self.embed_tokens(tokens)?, hidden, step, cache)
    }
}
