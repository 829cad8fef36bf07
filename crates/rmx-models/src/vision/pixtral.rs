//! Pixtral's vision transformer and Mistral 3's projector (Mistral Small 3.1 / 3.2), op for op
//! as mlx-vlm's `models/pixtral/vision.py` and `models/mistral3/mistral3.py` run them. An image
//! keeps its own size (the processor rounds each side up to `patch_size * spatial_merge_size`
//! pixels): a strided conv makes its grid of patches, an RMS norm, then pre-norm encoder layers
//! (RMS norms, attention with a 2-D rope over each patch's row and column, a SiLU-gated MLP)
//! over all the request's patches at once, each image attending to its own (a block mask).
//! The projector RMS-norms the last layer's output, merges each 2x2 block of patches into one
//! row (unfold, then a linear layer), then linear, exact GELU, linear to the text width: one
//! feature row per `[IMG]` placeholder, row-major over the merged grid.

use rmx_mlx::fast::{self, Mask};
use rmx_mlx::{Array, Dtype};
use serde::Deserialize;

use crate::config::QuantConfig;
use crate::error::{ModelError, Result};
use crate::layers::{gelu, silu, Linear, RmsNorm};
use crate::vision::ImageEncoder;
use crate::weights::Weights;

/// `vision_config` of a Mistral 3 checkpoint (mlx-vlm's Pixtral `VisionConfig` defaults).
#[derive(Debug, Clone, Deserialize)]
pub struct VisionConfig {
    #[serde(default = "d_layers")]
    pub num_hidden_layers: i32,
    #[serde(default = "d_hidden")]
    pub hidden_size: i32,
    #[serde(default = "d_head_dim")]
    pub head_dim: i32,
    #[serde(default = "d_intermediate")]
    pub intermediate_size: i32,
    #[serde(default = "d_heads")]
    pub num_attention_heads: i32,
    #[serde(default = "d_image_size")]
    pub image_size: i32,
    #[serde(default = "d_patch")]
    pub patch_size: i32,
    #[serde(default = "d_channels")]
    pub num_channels: i32,
    #[serde(default = "d_eps")]
    pub rms_norm_eps: f32,
    #[serde(default = "d_theta")]
    pub rope_theta: f32,
}

defaults! {
    d_layers: i32 = 24, d_hidden: i32 = 1024, d_head_dim: i32 = 64, d_intermediate: i32 = 4096,
    d_heads: i32 = 16, d_image_size: i32 = 336, d_patch: i32 = 14, d_channels: i32 = 3,
    d_eps: f32 = 1e-5, d_theta: f32 = 10000.0,
}

/// The most entries of the block mask for several images at once (a 4,096-patch request's; 32
/// MB in f32): past it each image runs on its own, which differs from mlx-vlm's joint pass only
/// in the rounding of its attention's sums.
const JOINT_MASK_MAX: i64 = 1 << 24;

/// What Mistral 3's top-level config adds: the merge and how the prompt carries images.
#[derive(Debug, Clone)]
pub struct Mistral3Vision {
    pub spatial_merge_size: i32,
    pub projector_bias: bool,
    /// The text model's `rms_norm_eps`, which the projector's norm takes.
    pub text_eps: f32,
    pub text_hidden: i32,
    /// `image_token_index`: the `[IMG]` placeholder.
    pub image_token: u32,
}

struct EncoderLayer {
    attention_norm: RmsNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    ffn_norm: RmsNorm,
    gate: Linear,
    up: Linear,
    down: Linear,
}

/// The tower and the projector (`vision_tower.vision_model.*`, `multi_modal_projector.*`).
pub struct PixtralVision {
    patch_weight: Array,
    ln_pre: RmsNorm,
    layers: Vec<EncoderLayer>,
    norm: RmsNorm,
    merging: Linear,
    linear_1: Linear,
    linear_2: Linear,
    /// `[head_dim / 4]` each: the rope's frequencies for rows and for columns.
    freqs_rows: Array,
    freqs_cols: Array,
    cfg: VisionConfig,
    top: Mistral3Vision,
}

impl PixtralVision {
    pub fn load(
        w: &mut Weights,
        q: &QuantConfig,
        cfg: VisionConfig,
        top: Mistral3Vision,
        config_path: &std::path::Path,
    ) -> Result<PixtralVision> {
        let bad = |message: String| ModelError::Config {
            path: config_path.to_path_buf(),
            message,
        };
        let d = cfg.hidden_size;
        let heads = cfg.num_attention_heads;
        if heads <= 0 || d % heads != 0 || d / heads != cfg.head_dim || cfg.head_dim % 4 != 0 {
            return Err(bad(format!(
                "vision_config: hidden_size {d} over {heads} heads is not head_dim {} (a multiple \
                 of 4, for the 2-D rope)",
                cfg.head_dim
            )));
        }
        if cfg.patch_size <= 0 || top.spatial_merge_size <= 0 {
            return Err(bad(
                "vision_config.patch_size and spatial_merge_size must be positive".into(),
            ));
        }
        let root = "vision_tower.vision_model";
        let eps = cfg.rms_norm_eps;
        let mut layers = Vec::new();
        for i in 0..cfg.num_hidden_layers {
            let p = format!("{root}.transformer.layers.{i}");
            let lin = |w: &mut Weights, name: &str, inp: i32, out: i32| {
                Linear::load(w, q, &format!("{p}.{name}"), inp, out, false)
            };
            let f = cfg.intermediate_size;
            layers.push(EncoderLayer {
                attention_norm: RmsNorm::load(w, &format!("{p}.attention_norm"), d, eps)?,
                q: lin(w, "attention.q_proj", d, d)?,
                k: lin(w, "attention.k_proj", d, d)?,
                v: lin(w, "attention.v_proj", d, d)?,
                o: lin(w, "attention.o_proj", d, d)?,
                ffn_norm: RmsNorm::load(w, &format!("{p}.ffn_norm"), d, eps)?,
                gate: lin(w, "feed_forward.gate_proj", d, f)?,
                up: lin(w, "feed_forward.up_proj", d, f)?,
                down: lin(w, "feed_forward.down_proj", f, d)?,
            });
        }
        let (p, c) = (cfg.patch_size, cfg.num_channels);
        let patch_weight = w.take(&format!("{root}.patch_conv.weight"), &[d, p, p, c])?;
        let m = top.spatial_merge_size;
        let proj = "multi_modal_projector";
        let bias = top.projector_bias;
        // PixtralRotaryEmbedding: 1 / theta^(arange(0, dim, 2) / dim) in float32; rows take
        // the even ones, columns the odd ones.
        let freqs = crate::rope::python_inv_freq(cfg.head_dim, cfg.rope_theta as f64)?;
        let half = cfg.head_dim / 2;
        let pick = |start: i32| -> Result<Array> {
            let idx: Vec<i32> = (start..half).step_by(2).collect();
            Ok(freqs.take(&Array::from_slice(&idx, &[idx.len() as i32])?, 0)?)
        };
        Ok(PixtralVision {
            patch_weight,
            // PixtralVisionModel builds ln_pre with mlx's default eps, not the config's.
            ln_pre: RmsNorm::load(w, &format!("{root}.ln_pre"), d, 1e-5)?,
            layers,
            norm: RmsNorm::load(w, &format!("{proj}.norm"), d, top.text_eps)?,
            merging: Linear::load(
                w,
                q,
                &format!("{proj}.patch_merger.merging_layer"),
                d * m * m,
                d,
                false,
            )?,
            linear_1: Linear::load(w, q, &format!("{proj}.linear_1"), d, top.text_hidden, bias)?,
            linear_2: Linear::load(
                w,
                q,
                &format!("{proj}.linear_2"),
                top.text_hidden,
                top.text_hidden,
                bias,
            )?,
            freqs_rows: pick(0)?,
            freqs_cols: pick(1)?,
            cfg,
            top,
        })
    }

    /// Pixels a merged patch spans on each side.
    fn unit(&self) -> u32 {
        (self.cfg.patch_size * self.top.spatial_merge_size) as u32
    }

    /// `(cos, sin)` `[n, head_dim]` of each patch of a `rows` x `cols` grid, row-major: the
    /// row's frequencies then the column's, twice, as mlx-vlm's table indexed by position id.
    fn rope(&self, rows: i32, cols: i32, dtype: Dtype) -> Result<(Array, Array)> {
        let q = self.cfg.head_dim / 4;
        let r = Array::arange(0.0, rows as f64, 1.0, Dtype::F32)?
            .reshape(&[rows, 1, 1])?
            .multiply(&self.freqs_rows.reshape(&[1, 1, q])?)?
            .broadcast_to(&[rows, cols, q])?;
        let c = Array::arange(0.0, cols as f64, 1.0, Dtype::F32)?
            .reshape(&[1, cols, 1])?
            .multiply(&self.freqs_cols.reshape(&[1, 1, q])?)?
            .broadcast_to(&[rows, cols, q])?;
        let half = rmx_mlx::concatenate(&[&r, &c], -1)?.reshape(&[rows * cols, 2 * q])?;
        let emb = rmx_mlx::concatenate(&[&half, &half], -1)?;
        Ok((emb.cos()?.astype(dtype)?, emb.sin()?.astype(dtype)?))
    }

    /// The projector's patch merger on one image's `[rows * cols, d]` patches: each
    /// `m x m` block's rows side by side, channel-major (`unfold`'s `c * m * m + i * m + j`),
    /// blocks row-major.
    fn merge(&self, x: &Array, rows: i32, cols: i32) -> Result<Array> {
        let (d, m) = (self.cfg.hidden_size, self.top.spatial_merge_size);
        Ok(x.reshape(&[rows / m, m, cols / m, m, d])?
            .transpose(&[0, 2, 4, 1, 3])?
            .reshape(&[(rows / m) * (cols / m), d * m * m])?)
    }
}

/// `x * cos + rotate_half(x) * sin` on `[B, H, L, D]`, as mlx-vlm's `apply_rotary_pos_emb`.
fn rotate(x: &Array, cos: &Array, sin: &Array) -> Result<Array> {
    let half = x.dim(-1) / 2;
    let (a, b) = (
        x.slice_axis(-1, 0, half)?,
        x.slice_axis(-1, half, 2 * half)?,
    );
    let rotated = rmx_mlx::concatenate(&[&b.negative()?, &a], -1)?;
    Ok(x.multiply(cos)?.add(&rotated.multiply(sin)?)?)
}

impl EncoderLayer {
    fn forward(
        &self,
        x: &Array,
        cos: &Array,
        sin: &Array,
        mask: Option<&Array>,
        heads: i32,
    ) -> Result<Array> {
        let h = self.attention_norm.forward(x)?;
        let (b, l) = (h.dim(0), h.dim(1));
        let split = |a: Array| -> Result<Array> {
            Ok(a.reshape(&[b, l, heads, -1])?.transpose(&[0, 2, 1, 3])?)
        };
        let q = rotate(&split(self.q.forward(&h)?)?, cos, sin)?;
        let k = rotate(&split(self.k.forward(&h)?)?, cos, sin)?;
        let v = split(self.v.forward(&h)?)?;
        let scale = ((q.dim(-1)) as f64).powf(-0.5) as f32;
        let mask = mask.map_or(Mask::None, Mask::Array);
        let o = fast::scaled_dot_product_attention(&q, &k, &v, scale, mask, None)?
            .transpose(&[0, 2, 1, 3])?
            .reshape(&[b, l, -1])?;
        let h = x.add(&self.o.forward(&o)?)?;
        let y = self.ffn_norm.forward(&h)?;
        let act = silu(&self.gate.forward(&y)?)?.multiply(&self.up.forward(&y)?)?;
        Ok(h.add(&self.down.forward(&act)?)?)
    }
}

impl ImageEncoder for PixtralVision {
    fn image_token(&self) -> u32 {
        self.top.image_token
    }

    fn placeholders(&self, height: u32, width: u32) -> usize {
        crate::vision::cells(self.unit(), height, width)
    }

    fn check_size(&self, height: u32, width: u32) -> std::result::Result<(), String> {
        crate::vision::check_cells(self.unit(), height, width)
    }

    fn encode(&self, images: &[Array]) -> Result<Array> {
        let dtype = self.patch_weight.dtype();
        let p = self.cfg.patch_size;
        let d = self.cfg.hidden_size;
        let heads = self.cfg.num_attention_heads;
        let mut grids = Vec::with_capacity(images.len());
        let mut patches = Vec::with_capacity(images.len());
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        for img in images {
            let x = img
                .expand_dims(&[0])?
                .transpose(&[0, 2, 3, 1])?
                .astype(dtype)?;
            let e = x.conv2d(&self.patch_weight, p, 0)?;
            let (rows, cols) = (e.dim(1), e.dim(2));
            patches.push(e.reshape(&[rows * cols, d])?);
            let (c, s) = self.rope(rows, cols, dtype)?;
            cos.push(c);
            sin.push(s);
            grids.push((rows, cols));
        }
        let cat = |v: &[Array]| -> Result<Array> {
            let refs: Vec<&Array> = v.iter().collect();
            Ok(rmx_mlx::concatenate(&refs, 0)?)
        };
        let n: i32 = grids.iter().map(|(r, c)| r * c).sum();
        let h = if grids.len() == 1 || (n as i64) * (n as i64) > JOINT_MASK_MAX {
            // Each image on its own: what the block mask computes, without an n x n mask
            // (real images have thousands of patches each).
            let mut out = Vec::with_capacity(grids.len());
            for (i, x) in patches.iter().enumerate() {
                let mut h = self.ln_pre.forward(&x.expand_dims(&[0])?)?;
                for layer in &self.layers {
                    h = layer.forward(&h, &cos[i], &sin[i], None, heads)?;
                }
                out.push(h.squeeze(&[0])?);
            }
            cat(&out)?
        } else {
            // mlx-vlm's way, to its bits: every patch in one sequence, each image attending to
            // its own by an additive block mask (-1e9 off the blocks, in the model's dtype).
            let mut m = vec![-1e9f32; (n * n) as usize];
            let mut start = 0;
            for (r, c) in &grids {
                let len = r * c;
                for i in start..start + len {
                    m[(i * n + start) as usize..(i * n + start + len) as usize].fill(0.0);
                }
                start += len;
            }
            let block = Array::from_slice(&m, &[1, 1, n, n])?.astype(dtype)?;
            let (cos, sin) = (cat(&cos)?, cat(&sin)?);
            let mut h = self.ln_pre.forward(&cat(&patches)?.expand_dims(&[0])?)?;
            for layer in &self.layers {
                h = layer.forward(&h, &cos, &sin, Some(&block), heads)?;
            }
            h.squeeze(&[0])?
        };
        let normed = self.norm.forward(&h)?;
        let mut merged = Vec::with_capacity(grids.len());
        let mut start = 0;
        for &(rows, cols) in &grids {
            let x = normed.slice_axis(0, start, start + rows * cols)?;
            merged.push(self.merge(&x, rows, cols)?);
            start += rows * cols;
        }
        let x = self.merging.forward(&cat(&merged)?)?;
        self.linear_2.forward(&gelu(&self.linear_1.forward(&x)?)?)
    }
}
