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
//! - a per-layer output scalar, and final logits soft-capped (`tanh(x / c) * c`);
//! - images (the vision-language checkpoints, as mlx-vlm's `gemma4.py`): the encoder's rows
//!   replace the image placeholders' scaled embeddings, the per-layer inputs read those
//!   placeholders as token 0, and where `use_bidirectional_attention` is `"vision"` each image's
//!   placeholders see one another both ways on every layer.

use rmx_mlx::{fast, Array};

use crate::attention::Mlp;
use crate::cache::{image_blocks, with_blocks, AttnMask, KvCache, LayerCache, RotatingKvCache};
use crate::error::Result;
use crate::layers::{gelu_approx, Embedding, Linear, RmsNorm};
use crate::model::{CausalLm, ModelInfo};
use crate::moe::SwitchGlu;
use crate::rope::Rope;
use crate::vision::gemma4::Gemma4Vision;
use crate::vision::ImageEncoder;

mod config;
mod load;

use config::Config;
pub use load::{load, load_multimodal};

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
    /// The vision encoder, when the files carry it.
    vision: Option<Gemma4Vision>,
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

impl Gemma4 {
    /// The layers over `h` (`[B, L, hidden]`, embeddings already scaled). `per_layer_ids` are the
    /// tokens the per-layer inputs embed; `blocks` (one per position, `mask::image_blocks`)
    /// widens every mask so each image's placeholders see one another.
    fn run(
        &self,
        mut h: Array,
        per_layer_ids: &Array,
        blocks: Option<&[i32]>,
        cache: &mut [LayerCache],
    ) -> Result<Array> {
        let per_layer = match &self.per_layer {
            Some(p) => Some(self.per_layer_inputs(p, per_layer_ids, &h)?),
            None => None,
        };
        let n = h.dim(1);
        let blocks = blocks.filter(|b| n > 1 && b.iter().any(|&r| r >= 0));
        // As mlx-lm's `_make_masks`: each type's mask from the first layer of that type.
        let mask_of = |sliding: bool| -> Result<AttnMask> {
            let window = sliding.then_some(self.cfg.sliding_window);
            match self.layers.iter().position(|l| l.sliding == sliding) {
                Some(i) if i < self.cached => match blocks {
                    Some(b) => Ok(AttnMask::Array(with_blocks(
                        &cache[i].mask_array(n, window)?,
                        b,
                    )?)),
                    None => cache[i].mask(n, window),
                },
                _ => Ok(AttnMask::None),
            }
        };
        let full_mask = mask_of(false)?;
        let sliding_mask = mask_of(true)?;
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

    fn embed_scaled(&self, tokens: &Array) -> Result<Array> {
        let h = self.embed.forward(tokens)?;
        Ok(h.multiply_scalar(f64::from(self.cfg.hidden_size).sqrt())?)
    }
}

impl CausalLm for Gemma4 {
    fn forward_hidden(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        self.run(self.embed_scaled(tokens)?, tokens, None, cache)
    }

    /// As mlx-vlm's `Gemma4.get_input_embeddings`: the scaled embeddings with the features (in
    /// the model's dtype, unscaled) in the placeholders' places; the per-layer inputs embed
    /// each placeholder as token 0 and project the spliced embeddings. mlx-vlm reads a prompt
    /// with images in one forward; the engine's chunks never end inside an image, so each
    /// image's block lies whole in one chunk and the widened masks see the same keys.
    fn forward_hidden_with_images(
        &self,
        tokens: &Array,
        features: &Array,
        cache: &mut [LayerCache],
    ) -> Result<Array> {
        let v = crate::vision::loaded(&self.vision, "Gemma 4")?;
        let ids = crate::vision::sequence_ids(tokens)?;
        let image = v.image_token() as i32;
        let embeds = self.embed_scaled(tokens)?.squeeze(&[0])?;
        let h = crate::vision::splice(&embeds, &ids, v.image_token(), features)?;
        let text: Vec<i32> = ids
            .iter()
            .map(|&t| if t == image { 0 } else { t })
            .collect();
        let per_layer_ids = Array::from_slice(&text, &[1, text.len() as i32])?;
        let blocks = self
            .cfg
            .images_attend_both_ways()
            .then(|| image_blocks(&ids, image));
        self.run(h, &per_layer_ids, blocks.as_deref(), cache)
    }

    fn vision(&self) -> Option<&dyn ImageEncoder> {
        self.vision.as_ref().map(|v| v as &dyn ImageEncoder)
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
