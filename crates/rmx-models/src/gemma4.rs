//! Gemma 4 (`gemma4`, the text model of the vision-language checkpoints, and `gemma4_text`), as
//! mlx-lm's `gemma4_text.py`: Gemma 3's sandwich norms (plain RMS norms here, not `1 + w`) and
//! sliding/full layers, plus what the configs switch on:
//! - full-attention layers with their own head size (`global_head_dim`) and a proportional rope
//!   over part of it; q/k norms and a scale-free v norm, attention scale 1;
//! - `attention_k_eq_v` (26B, 31B): full layers' values are their keys' projection;
//! - KV sharing (E2B, E4B): the last `num_kv_shared_layers` layers keep no cache and attend
//!   over the K/V of the last earlier layer of their type, with a double-wide MLP;
//! - per-layer inputs (E2B, E4B): a second embedding per layer, gated into the residual;
//! - an expert block beside the dense MLP (26B-A4B): routed GeGLU experts;
//! - a per-layer output scalar, and final logits soft-capped (`tanh(x / c) * c`).

use rmx_mlx::{fast, Array};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::attention::Mlp;
use crate::cache::{AttnMask, KvCache, LayerCache, RotatingKvCache};
use crate::config::{QuantConfig, RawConfig};
use crate::error::{ModelError, Result};
use crate::layers::{gelu_approx, Embedding, Linear, RmsNorm};
use crate::model::{CausalLm, ModelInfo};
use crate::moe::{ExpertActivation, SwitchGlu};
use crate::rope::Rope;
use crate::weights::Weights;

macro_rules! defaults {
    ($($f:ident: $t:ty = $v:expr),* $(,)?) => { $(fn $f() -> $t { $v })* };
}
defaults! {
    d_hidden: i32 = 1536, d_layers: i32 = 35, d_inter: i32 = 6144, d_heads: i32 = 8,
    d_head_dim: i32 = 256, d_global_head_dim: Option<i32> = Some(512), d_eps: f32 = 1e-6,
    d_vocab: i32 = 262144, d_kv: i32 = 1, d_shared: i32 = 20,
    d_per_layer: Option<i32> = Some(256), d_window: i32 = 512, d_pattern: i32 = 5,
    d_ctx: i32 = 131072, d_softcap: Option<f64> = Some(30.0), d_yes: bool = true,
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
    #[serde(default = "d_global_head_dim")]
    pub global_head_dim: Option<i32>,
    #[serde(default = "d_eps")]
    pub rms_norm_eps: f32,
    #[serde(default = "d_vocab")]
    pub vocab_size: i32,
    #[serde(default = "d_vocab")]
    pub vocab_size_per_layer_input: i32,
    #[serde(default = "d_kv")]
    pub num_key_value_heads: i32,
    pub num_global_key_value_heads: Option<i32>,
    #[serde(default = "d_shared")]
    pub num_kv_shared_layers: i32,
    #[serde(default = "d_per_layer")]
    pub hidden_size_per_layer_input: Option<i32>,
    #[serde(default)]
    pub rope_traditional: bool,
    pub rope_parameters: Option<Value>,
    #[serde(default = "d_window")]
    pub sliding_window: i32,
    #[serde(default = "d_pattern")]
    pub sliding_window_pattern: i32,
    #[serde(default = "d_ctx")]
    pub max_position_embeddings: i32,
    #[serde(default)]
    pub attention_k_eq_v: bool,
    #[serde(default = "d_softcap")]
    pub final_logit_softcapping: Option<f64>,
    #[serde(default = "d_yes")]
    pub use_double_wide_mlp: bool,
    #[serde(default)]
    pub enable_moe_block: bool,
    pub num_experts: Option<i32>,
    pub top_k_experts: Option<i32>,
    pub moe_intermediate_size: Option<i32>,
    pub layer_types: Option<Vec<String>>,
    #[serde(default = "d_yes")]
    pub tie_word_embeddings: bool,
}

fn config_error(raw: &RawConfig, message: String) -> ModelError {
    ModelError::Config {
        path: raw.path.clone(),
        message,
    }
}

impl Config {
    /// mlx-lm's `__post_init__`: the layer pattern from `sliding_window_pattern` when
    /// `layer_types` is absent.
    fn layer_types(&self, raw: &RawConfig) -> Result<Vec<bool>> {
        let n = self.num_hidden_layers;
        let sliding: Vec<bool> = match &self.layer_types {
            Some(t) if t.len() != n as usize => {
                return Err(config_error(
                    raw,
                    format!(
                        "layer_types has {} entries for {n} layers (num_hidden_layers)",
                        t.len()
                    ),
                ))
            }
            Some(t) => t.iter().map(|s| s == "sliding_attention").collect(),
            None if self.sliding_window_pattern < 1 => {
                return Err(config_error(
                    raw,
                    "sliding_window_pattern must be at least 1".into(),
                ))
            }
            None => (0..n)
                .map(|i| (i + 1) % self.sliding_window_pattern != 0)
                .collect(),
        };
        Ok(sliding)
    }

    /// The width of each layer's per-layer input (E2B/E4B); `None` when the model has none.
    fn per_layer_dim(&self) -> Option<i32> {
        self.hidden_size_per_layer_input.filter(|d| *d > 0)
    }

    /// The rope settings of one layer type (`rope_parameters.full_attention` or
    /// `.sliding_attention`), with mlx-lm's defaults when the config has none.
    fn rope_params(&self, sliding: bool) -> Value {
        let key = if sliding {
            "sliding_attention"
        } else {
            "full_attention"
        };
        match &self.rope_parameters {
            Some(p) => p.get(key).cloned().unwrap_or(json!({})),
            None if sliding => json!({"partial_rotary_factor": 1.0, "rope_theta": 10000.0,
                                      "rope_type": "default"}),
            None => json!({"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                           "rope_type": "proportional"}),
        }
    }
}

struct Attention {
    q: Linear,
    /// `None` on a KV-shared layer.
    kv: Option<KvProj>,
    o: Linear,
    q_norm: RmsNorm,
    heads: i32,
    head_dim: i32,
    rope: Rope,
}

struct KvProj {
    k: Linear,
    /// `None` when values are the keys' projection (`attention_k_eq_v`).
    v: Option<Linear>,
    k_norm: RmsNorm,
    kv_heads: i32,
    eps: f32,
}

/// A layer's keys and values as its attention read them, and the position they started at:
/// what a KV-shared layer later in the stack attends over.
#[derive(Clone)]
struct SharedKv {
    keys: Array,
    values: Array,
    offset: i32,
}

impl Attention {
    fn forward(
        &self,
        x: &Array,
        mask: &AttnMask,
        cache: Option<&mut LayerCache>,
        shared: Option<&SharedKv>,
    ) -> Result<(Array, SharedKv)> {
        let s = x.shape();
        let (b, l) = (s[0], s[1]);
        let q = self
            .q
            .forward(x)?
            .reshape(&[b, l, self.heads, self.head_dim])?;
        let q = self.q_norm.forward(&q)?;
        let (keys, values, offset) = match (shared, &self.kv) {
            (Some(sh), _) => (sh.keys.clone(), sh.values.clone(), sh.offset),
            (None, None) => unreachable!("gemma4 load gives every KV-shared layer a source"),
            (None, Some(kv)) => {
                let shape = [b, l, kv.kv_heads, self.head_dim];
                let k = kv.k.forward(x)?.reshape(&shape)?;
                let v = match &kv.v {
                    Some(v) => v.forward(x)?.reshape(&shape)?,
                    None => k.clone(),
                };
                let offset = cache.as_ref().map_or(0, |c| c.offset());
                let k = kv.k_norm.forward(&k)?.transpose(&[0, 2, 1, 3])?;
                let k = self.rope.forward(&k, offset)?;
                let v = fast::rms_norm(&v, None, kv.eps)?.transpose(&[0, 2, 1, 3])?;
                (k, v, offset)
            }
        };
        let q = self.rope.forward(&q.transpose(&[0, 2, 1, 3])?, offset)?;
        let (keys, values) = match cache {
            Some(c) => c.update_and_fetch(&keys, &values)?,
            None => (keys, values),
        };
        let out =
            fast::scaled_dot_product_attention(&q, &keys, &values, 1.0, mask.as_fast(), None)?;
        let out = out.transpose(&[0, 2, 1, 3])?.reshape(&[b, l, -1])?;
        Ok((
            self.o.forward(&out)?,
            SharedKv {
                keys,
                values,
                offset,
            },
        ))
    }
}

/// The 26B-A4B expert block: a router over the normed input (its own scale, then a projection),
/// softmax over the top k logits times a per-expert scale, GeGLU experts.
struct Experts {
    router: Linear,
    /// `scale * hidden^-0.5`, the router norm's weight as mlx-lm computes it on each call.
    router_norm: Array,
    per_expert_scale: Array,
    switch: SwitchGlu,
    num_experts: i32,
    top_k: i32,
    eps: f32,
    pre_norm: RmsNorm,
    post_norm: RmsNorm,
    dense_post_norm: RmsNorm,
}

impl Experts {
    /// `post_norm(experts(pre_norm(h)))`, routed on `h` itself.
    fn forward(&self, h: &Array) -> Result<Array> {
        let (n, k) = (self.num_experts, self.top_k);
        let x = fast::rms_norm(h, Some(&self.router_norm), self.eps)?;
        let scores = self.router.forward(&x)?;
        let inds = scores.argpartition(n - k, -1)?.slice_axis(-1, n - k, n)?;
        let weights = scores
            .take_along_axis(&inds, -1)?
            .softmax(&[-1], false)?
            .multiply(&self.per_expert_scale.take(&inds, 0)?)?;
        let y = self.switch.forward(&self.pre_norm.forward(h)?, &inds)?;
        let y = weights
            .expand_dims(&[-1])?
            .multiply(&y)?
            .sum(&[-2], false)?;
        self.post_norm.forward(&y)
    }
}

/// E2B/E4B: this layer's slice of the per-layer inputs, gated into the residual stream.
struct PerLayerGate {
    gate: Linear,
    projection: Linear,
    norm: RmsNorm,
}

struct Layer {
    attn: Attention,
    mlp: Mlp,
    experts: Option<Experts>,
    per_layer: Option<PerLayerGate>,
    input_norm: RmsNorm,
    post_attn_norm: RmsNorm,
    pre_ff_norm: RmsNorm,
    post_ff_norm: RmsNorm,
    scalar: Array,
    sliding: bool,
    /// The earlier layer whose K/V this one attends over (KV sharing).
    kv_source: Option<usize>,
}

impl Layer {
    fn forward(
        &self,
        x: &Array,
        mask: &AttnMask,
        cache: Option<&mut LayerCache>,
        shared: Option<&SharedKv>,
        per_layer_input: Option<&Array>,
    ) -> Result<(Array, SharedKv)> {
        let (a, kv) = self
            .attn
            .forward(&self.input_norm.forward(x)?, mask, cache, shared)?;
        let h = x.add(&self.post_attn_norm.forward(&a)?)?;
        let f = self.mlp.forward(&self.pre_ff_norm.forward(&h)?)?;
        let f = match &self.experts {
            Some(e) => e.dense_post_norm.forward(&f)?.add(&e.forward(&h)?)?,
            None => f,
        };
        let mut h = h.add(&self.post_ff_norm.forward(&f)?)?;
        if let (Some(p), Some(input)) = (&self.per_layer, per_layer_input) {
            let g = gelu_approx(&p.gate.forward(&h)?)?.multiply(input)?;
            let g = p.norm.forward(&p.projection.forward(&g)?)?;
            h = h.add(&g)?;
        }
        Ok((h.multiply(&self.scalar)?, kv))
    }
}

/// E2B/E4B's per-layer input embeddings: a `[vocab, layers * d]` table and a projection of the
/// embedded input, mixed per layer.
struct PerLayerInputs {
    embed: Embedding,
    projection: Linear,
    norm: RmsNorm,
    dim: i32,
}

pub struct Gemma4 {
    embed: Embedding,
    per_layer: Option<PerLayerInputs>,
    layers: Vec<Layer>,
    norm: RmsNorm,
    lm_head: Option<Linear>,
    softcap: Option<f64>,
    cfg: Config,
    /// Layers with a cache of their own: those before the KV-shared ones.
    cached: usize,
    info: ModelInfo,
}

/// `gemma4_text`: the text model at the top of the checkpoint.
pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    load_text(raw, c, w, "model", "lm_head")
}

/// `Gemma4ForConditionalGeneration`: as mlx-lm's `gemma4.py`, `text_config` with the top-level
/// `vocab_size` (262144 when absent) and 8 / 1 heads where it names none; vision and audio
/// weights stay unloaded.
pub fn load_multimodal(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse_wrapped_text(
        262144,
        &[("num_attention_heads", 8), ("num_key_value_heads", 1)],
    )?;
    if w.has("model.language_model.embed_tokens.weight") {
        return Err(config_error(
            raw,
            "these are transformers' weight names (model.language_model.*); rmx reads \
             mlx-lm's layout: convert with `mlx_lm.convert`, or use an mlx-community upload"
                .into(),
        ));
    }
    const SKIPPED: [&str; 6] = [
        "vision_tower.",
        "multi_modal_projector.",
        "audio_tower.",
        "embed_audio.",
        "embed_vision.",
        "vision_embedder.",
    ];
    w.discard(|k| SKIPPED.iter().any(|s| k.starts_with(s)));
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
    let n = c.num_hidden_layers;
    let sliding = c.layer_types(raw)?;
    let first_shared = (n - c.num_kv_shared_layers).max(0);
    // mlx-lm's `previous_kvs`: each shared layer reads the last unshared layer of its type.
    let mut last_of_type = [None, None];
    for (i, s) in sliding.iter().enumerate().take(first_shared as usize) {
        last_of_type[usize::from(*s)] = Some(i);
    }
    w.discard(|k| {
        [
            "self_attn.rotary_emb",
            "input_max",
            "input_min",
            "output_max",
            "output_min",
        ]
        .iter()
        .any(|s| k.contains(s))
    });
    let mut layers = Vec::new();
    for i in 0..n {
        let p = format!("{root}.layers.{i}");
        let is_sliding = sliding[i as usize];
        let kv_source = if i >= first_shared {
            Some(last_of_type[usize::from(is_sliding)].ok_or_else(|| {
                config_error(
                    raw,
                    format!(
                        "layer {i} shares K/V (num_kv_shared_layers {}) but no earlier layer \
                         has its attention type",
                        c.num_kv_shared_layers
                    ),
                )
            })?)
        } else {
            None
        };
        // mlx-lm's sanitize drops a shared layer's K/V weights, which it never uses.
        if kv_source.is_some() {
            for name in ["k_proj", "v_proj", "k_norm"] {
                let prefix = format!("{p}.self_attn.{name}.");
                w.discard(|k| k.starts_with(&prefix));
            }
        }
        layers.push(load_layer(w, q, &c, &p, is_sliding, kv_source)?);
    }
    let per_layer = match c.per_layer_dim() {
        Some(d) => Some(PerLayerInputs {
            embed: Embedding::load(
                w,
                q,
                &format!("{root}.embed_tokens_per_layer"),
                c.vocab_size_per_layer_input,
                n * d,
            )?,
            projection: Linear::load(
                w,
                q,
                &format!("{root}.per_layer_model_projection"),
                c.hidden_size,
                n * d,
                false,
            )?,
            norm: RmsNorm::load(
                w,
                &format!("{root}.per_layer_projection_norm"),
                d,
                c.rms_norm_eps,
            )?,
            dim: d,
        }),
        None => None,
    };
    let lm_head = if c.tie_word_embeddings {
        w.discard(|k| k.starts_with(&format!("{lm_head_path}.")));
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
    let kinds = layers.iter().map(|l| {
        let attn = if l.sliding {
            "sliding attention"
        } else {
            "attention"
        };
        let shared = if l.kv_source.is_some() {
            " (shared K/V)"
        } else {
            ""
        };
        let ffn = if l.experts.is_some() {
            "dense + moe"
        } else {
            "dense"
        };
        format!("{attn}{shared} + {ffn}")
    });
    let info = ModelInfo {
        model_type: raw.model_type.clone(),
        vocab_size: c.vocab_size,
        hidden_size: c.hidden_size,
        num_layers: n,
        context_length: Some(c.max_position_embeddings),
        quant_bits: q.default.map(|s| s.bits),
        tied_embeddings: c.tie_word_embeddings,
        layer_kinds: crate::llama::summarize(kinds),
    };
    let eps = c.rms_norm_eps;
    Ok(Box::new(Gemma4 {
        embed: Embedding::load(
            w,
            q,
            &format!("{root}.embed_tokens"),
            c.vocab_size,
            c.hidden_size,
        )?,
        per_layer,
        layers,
        norm: RmsNorm::load(w, &format!("{root}.norm"), c.hidden_size, eps)?,
        lm_head,
        softcap: c.final_logit_softcapping,
        cached: first_shared as usize,
        cfg: c,
        info,
    }))
}

#[allow(clippy::too_many_arguments)]
fn load_layer(
    w: &mut Weights,
    q: &QuantConfig,
    c: &Config,
    p: &str,
    sliding: bool,
    kv_source: Option<usize>,
) -> Result<Layer> {
    let eps = c.rms_norm_eps;
    let hidden = c.hidden_size;
    let norm =
        |w: &mut Weights, name: &str, d: i32| RmsNorm::load(w, &format!("{p}.{name}"), d, eps);
    let head_dim = match c.global_head_dim {
        Some(g) if g > 0 && !sliding => g,
        _ => c.head_dim,
    };
    let k_eq_v = c.attention_k_eq_v && !sliding;
    let kv_heads = match c.num_global_key_value_heads {
        Some(g) if k_eq_v => g,
        _ => c.num_key_value_heads,
    };
    let heads = c.num_attention_heads;
    let a = format!("{p}.self_attn");
    let kv = if kv_source.is_none() {
        Some(KvProj {
            k: Linear::load(
                w,
                q,
                &format!("{a}.k_proj"),
                hidden,
                kv_heads * head_dim,
                false,
            )?,
            v: if k_eq_v {
                None
            } else {
                Some(Linear::load(
                    w,
                    q,
                    &format!("{a}.v_proj"),
                    hidden,
                    kv_heads * head_dim,
                    false,
                )?)
            },
            k_norm: norm(w, "self_attn.k_norm", head_dim)?,
            kv_heads,
            eps,
        })
    } else {
        None
    };
    let params = c.rope_params(sliding);
    let theta = params
        .get("rope_theta")
        .and_then(Value::as_f64)
        .unwrap_or(10000.0) as f32;
    let rope = Rope::from_config(
        head_dim,
        theta,
        c.rope_traditional,
        Some(&params),
        Some(c.max_position_embeddings),
    )?;
    let attn = Attention {
        q: Linear::load(
            w,
            q,
            &format!("{a}.q_proj"),
            hidden,
            heads * head_dim,
            false,
        )?,
        kv,
        o: Linear::load(
            w,
            q,
            &format!("{a}.o_proj"),
            heads * head_dim,
            hidden,
            false,
        )?,
        q_norm: norm(w, "self_attn.q_norm", head_dim)?,
        heads,
        head_dim,
        rope,
    };
    // mlx-lm's double-wide MLP goes with KV sharing.
    let wide = if c.use_double_wide_mlp && kv_source.is_some() {
        2
    } else {
        1
    };
    let mlp = Mlp::load(
        w,
        q,
        &format!("{p}.mlp"),
        hidden,
        c.intermediate_size * wide,
        false,
        true,
    )?;
    let experts = if c.enable_moe_block {
        let missing = |f: &str| config_error_at(format!("enable_moe_block needs {f}"));
        let num_experts = c.num_experts.ok_or_else(|| missing("num_experts"))?;
        let top_k = c.top_k_experts.ok_or_else(|| missing("top_k_experts"))?;
        let inter = c
            .moe_intermediate_size
            .ok_or_else(|| missing("moe_intermediate_size"))?;
        if top_k < 1 || top_k > num_experts {
            return Err(config_error_at(format!(
                "top_k_experts {top_k} must be between 1 and num_experts ({num_experts})"
            )));
        }
        let scale = w.take(&format!("{p}.router.scale"), &[hidden])?;
        Some(Experts {
            router: Linear::load(
                w,
                q,
                &format!("{p}.router.proj"),
                hidden,
                num_experts,
                false,
            )?,
            router_norm: scale.multiply_scalar(f64::from(hidden).powf(-0.5))?,
            per_expert_scale: w.take(&format!("{p}.router.per_expert_scale"), &[num_experts])?,
            switch: SwitchGlu::load(
                w,
                q,
                &format!("{p}.experts.switch_glu"),
                num_experts,
                hidden,
                inter,
                false,
                ExpertActivation::GeGlu,
            )?,
            num_experts,
            top_k,
            eps,
            pre_norm: norm(w, "pre_feedforward_layernorm_2", hidden)?,
            post_norm: norm(w, "post_feedforward_layernorm_2", hidden)?,
            dense_post_norm: norm(w, "post_feedforward_layernorm_1", hidden)?,
        })
    } else {
        None
    };
    let per_layer = match c.per_layer_dim() {
        Some(d) => Some(PerLayerGate {
            gate: Linear::load(w, q, &format!("{p}.per_layer_input_gate"), hidden, d, false)?,
            projection: Linear::load(w, q, &format!("{p}.per_layer_projection"), d, hidden, false)?,
            norm: norm(w, "post_per_layer_input_norm", hidden)?,
        }),
        None => None,
    };
    Ok(Layer {
        attn,
        mlp,
        experts,
        per_layer,
        input_norm: norm(w, "input_layernorm", hidden)?,
        post_attn_norm: norm(w, "post_attention_layernorm", hidden)?,
        pre_ff_norm: norm(w, "pre_feedforward_layernorm", hidden)?,
        post_ff_norm: norm(w, "post_feedforward_layernorm", hidden)?,
        scalar: w.take(&format!("{p}.layer_scalar"), &[1])?,
        sliding,
        kv_source,
    })
}

/// A config error the registry puts the config's path on.
fn config_error_at(message: String) -> ModelError {
    ModelError::Config {
        path: "config.json".into(),
        message,
    }
}

impl Gemma4 {
    /// `[B, L, layers, d]`: the per-layer embeddings and the projection of the scaled input
    /// embedding, mixed as mlx-lm's `_project_per_layer_inputs`.
    fn per_layer_inputs(&self, p: &PerLayerInputs, tokens: &Array, h: &Array) -> Result<Array> {
        let s = tokens.shape();
        let shape = [s[0], s[1], self.cfg.num_hidden_layers, p.dim];
        let emb = p
            .embed
            .forward(tokens)?
            .multiply_scalar(f64::from(p.dim).sqrt())?
            .reshape(&shape)?;
        let proj = p
            .projection
            .forward(h)?
            .multiply_scalar(f64::from(self.cfg.hidden_size).powf(-0.5))?
            .reshape(&shape)?;
        let proj = p.norm.forward(&proj)?;
        Ok(proj.add(&emb)?.multiply_scalar(2f64.powf(-0.5))?)
    }
}

impl CausalLm for Gemma4 {
    fn forward_hidden(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        let h = self.embed.forward(tokens)?;
        let mut h = h.multiply_scalar(f64::from(self.cfg.hidden_size).sqrt())?;
        let per_layer = match &self.per_layer {
            Some(p) => Some(self.per_layer_inputs(p, tokens, &h)?),
            None => None,
        };
        let n = tokens.dim(1);
        // As mlx-lm's `_make_masks`: each type's mask from the first layer of that type.
        let first = |s: bool| self.layers.iter().position(|l| l.sliding == s);
        let full_mask = match first(false) {
            Some(i) if i < self.cached => cache[i].mask(n, None)?,
            _ => AttnMask::None,
        };
        let sliding_mask = match first(true) {
            Some(i) if i < self.cached => cache[i].mask(n, Some(self.cfg.sliding_window))?,
            _ => AttnMask::None,
        };
        let mut kvs: Vec<Option<SharedKv>> = vec![None; self.layers.len()];
        for (i, layer) in self.layers.iter().enumerate() {
            let mask = if layer.sliding {
                &sliding_mask
            } else {
                &full_mask
            };
            let input = match &per_layer {
                Some(p) => Some(p.slice_axis(2, i as i32, i as i32 + 1)?.squeeze(&[2])?),
                None => None,
            };
            let shared = layer.kv_source.and_then(|j| kvs[j].clone());
            // KV-shared layers have none: the list holds the first `cached` layers' caches.
            let c = cache.get_mut(i);
            let (y, kv) = layer.forward(&h, mask, c, shared.as_ref(), input.as_ref())?;
            h = y;
            kvs[i] = Some(kv);
        }
        self.norm.forward(&h)
    }

    fn lm_head(&self, hidden: &Array) -> Result<Array> {
        let out = match &self.lm_head {
            Some(l) => l.forward(hidden)?,
            None => self.embed.as_linear(hidden)?,
        };
        Ok(match self.softcap {
            Some(c) => out.divide_scalar(c)?.tanh()?.multiply_scalar(c)?,
            None => out,
        })
    }

    fn make_cache(&self) -> Vec<LayerCache> {
        self.layers[..self.cached]
            .iter()
            .map(|l| {
                if l.sliding {
                    LayerCache::Rotating(RotatingKvCache::new(self.cfg.sliding_window))
                } else {
                    LayerCache::Full(KvCache::default())
                }
            })
            .collect()
    }

    fn info(&self) -> &ModelInfo {
        &self.info
    }
}
