//! SigLIP's vision transformer and Gemma 3's multimodal projector, op for op as mlx-vlm's
//! `models/gemma3/vision.py` and `gemma3.py` run them: patch embedding by a strided conv plus
//! learned positions, pre-norm encoder layers (LayerNorm, full bidirectional attention with
//! biases, a tanh-GELU MLP), a final LayerNorm; then the projector average-pools the patch grid
//! down to `mm_tokens_per_image`, applies Gemma's `1 + w` RMS norm and projects to the text
//! width.

use rmx_mlx::fast::{self, Mask};
use rmx_mlx::{Array, Dtype};
use serde::Deserialize;

use crate::config::QuantConfig;
use crate::error::{ModelError, Result};
use crate::layers::{gelu_approx, LayerNorm, Linear, RmsNorm};
use crate::vision::{ImageEncoder, ImageTokens};
use crate::weights::Weights;

/// `vision_config` of a Gemma 3 checkpoint (mlx-vlm's `VisionConfig` defaults).
#[derive(Debug, Clone, Deserialize)]
pub struct VisionConfig {
    pub hidden_size: i32,
    pub intermediate_size: i32,
    pub num_hidden_layers: i32,
    pub num_attention_heads: i32,
    pub patch_size: i32,
    #[serde(default = "d_image_size")]
    pub image_size: i32,
    #[serde(default = "d_channels")]
    pub num_channels: i32,
    #[serde(default = "d_eps")]
    pub layer_norm_eps: f32,
}

fn d_image_size() -> i32 {
    224
}
fn d_channels() -> i32 {
    3
}
fn d_eps() -> f32 {
    1e-6
}

struct EncoderLayer {
    norm1: LayerNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    norm2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    heads: i32,
    scale: f32,
}

impl EncoderLayer {
    fn forward(&self, x: &Array) -> Result<Array> {
        let h = self.norm1.forward(x)?;
        let (b, l) = (h.dim(0), h.dim(1));
        let split = |a: Array| -> Result<Array> {
            Ok(a.reshape(&[b, l, self.heads, -1])?
                .transpose(&[0, 2, 1, 3])?)
        };
        let q = split(self.q.forward(&h)?)?;
        let k = split(self.k.forward(&h)?)?;
        let v = split(self.v.forward(&h)?)?;
        let o = fast::scaled_dot_product_attention(&q, &k, &v, self.scale, Mask::None, None)?
            .transpose(&[0, 2, 1, 3])?
            .reshape(&[b, l, -1])?;
        let h = x.add(&self.out.forward(&o)?)?;
        let r = self
            .fc2
            .forward(&gelu_approx(&self.fc1.forward(&self.norm2.forward(&h)?)?)?)?;
        Ok(h.add(&r)?)
    }
}

/// The SigLIP tower and Gemma 3's projector (`vision_tower.vision_model.*`,
/// `multi_modal_projector.*`).
pub struct Gemma3Vision {
    patch_weight: Array,
    patch_bias: Array,
    positions: Array,
    layers: Vec<EncoderLayer>,
    post_norm: LayerNorm,
    soft_emb_norm: RmsNorm,
    projection: Array,
    cfg: VisionConfig,
    tokens_per_side: i32,
    tokens: ImageTokens,
}

impl Gemma3Vision {
    /// Loads the tower; `text_hidden` is the language model's width, `tokens` how the prompt
    /// carries images (`tokens.per_image` must be a square that divides the patch grid).
    pub fn load(
        w: &mut Weights,
        q: &QuantConfig,
        cfg: VisionConfig,
        text_hidden: i32,
        tokens: ImageTokens,
        config_path: &std::path::Path,
    ) -> Result<Gemma3Vision> {
        let bad = |message: String| ModelError::Config {
            path: config_path.to_path_buf(),
            message,
        };
        let d = cfg.hidden_size;
        if cfg.patch_size <= 0 || cfg.image_size % cfg.patch_size != 0 {
            return Err(bad(format!(
                "vision_config: image_size {} is not a multiple of patch_size {}",
                cfg.image_size, cfg.patch_size
            )));
        }
        if cfg.num_attention_heads <= 0 || d % cfg.num_attention_heads != 0 {
            return Err(bad(format!(
                "vision_config: hidden_size {d} does not divide among {} heads",
                cfg.num_attention_heads
            )));
        }
        let per_side = cfg.image_size / cfg.patch_size;
        let tokens_per_side = (tokens.per_image as f64).sqrt() as i32;
        if tokens_per_side <= 0
            || (tokens_per_side * tokens_per_side) as usize != tokens.per_image
            || per_side % tokens_per_side != 0
        {
            return Err(bad(format!(
                "mm_tokens_per_image {} is not a square whose side divides the {per_side}x{per_side} patch grid",
                tokens.per_image
            )));
        }
        let root = "vision_tower.vision_model";
        let eps = cfg.layer_norm_eps;
        let mut layers = Vec::new();
        for i in 0..cfg.num_hidden_layers {
            let p = format!("{root}.encoder.layers.{i}");
            let lin = |w: &mut Weights, name: &str, inp: i32, out: i32| {
                Linear::load(w, q, &format!("{p}.{name}"), inp, out, true)
            };
            layers.push(EncoderLayer {
                norm1: LayerNorm::load(w, &format!("{p}.layer_norm1"), d, eps)?,
                q: lin(w, "self_attn.q_proj", d, d)?,
                k: lin(w, "self_attn.k_proj", d, d)?,
                v: lin(w, "self_attn.v_proj", d, d)?,
                out: lin(w, "self_attn.out_proj", d, d)?,
                norm2: LayerNorm::load(w, &format!("{p}.layer_norm2"), d, eps)?,
                fc1: lin(w, "mlp.fc1", d, cfg.intermediate_size)?,
                fc2: lin(w, "mlp.fc2", cfg.intermediate_size, d)?,
                heads: cfg.num_attention_heads,
                scale: ((d / cfg.num_attention_heads) as f64).powf(-0.5) as f32,
            });
        }
        let emb = format!("{root}.embeddings");
        let c = cfg.num_channels;
        let patch_weight = w.take(
            &format!("{emb}.patch_embedding.weight"),
            &[d, cfg.patch_size, cfg.patch_size, c],
        )?;
        let patch_bias = w.take(&format!("{emb}.patch_embedding.bias"), &[d])?;
        let positions = w
            .take(
                &format!("{emb}.position_embedding.weight"),
                &[per_side * per_side, d],
            )?
            .expand_dims(&[0])?;
        Ok(Gemma3Vision {
            patch_weight,
            patch_bias,
            positions,
            layers,
            // SigLipVisionModel builds its post_layernorm with mlx's default eps (1e-5), not
            // the config's.
            post_norm: LayerNorm::load(w, &format!("{root}.post_layernorm"), d, 1e-5)?,
            soft_emb_norm: RmsNorm::load_gemma(
                w,
                "multi_modal_projector.mm_soft_emb_norm",
                d,
                eps,
            )?,
            projection: w.take(
                "multi_modal_projector.mm_input_projection_weight",
                &[d, text_hidden],
            )?,
            cfg,
            tokens_per_side,
            tokens,
        })
    }

    fn project(&self, x: &Array) -> Result<Array> {
        // [B, P, D] -> [B, side, side, D] patch grid, average-pooled in kernel x kernel windows
        // laid out as mlx.nn.AvgPool2d lays them ([B, t, t, k, k, D], mean over the windows).
        let b = x.dim(0);
        let d = self.cfg.hidden_size;
        let side = self.cfg.image_size / self.cfg.patch_size;
        let t = self.tokens_per_side;
        let k = side / t;
        let grid = x
            .transpose(&[0, 2, 1])?
            .reshape(&[b, d, side, side])?
            .transpose(&[0, 2, 3, 1])?;
        let pooled = grid
            .reshape(&[b, t, k, t, k, d])?
            .transpose(&[0, 1, 3, 2, 4, 5])?
            .mean(&[-3, -2], false)?;
        let tokens = pooled
            .transpose(&[0, 3, 1, 2])?
            .reshape(&[b, d, t * t])?
            .transpose(&[0, 2, 1])?;
        let normed = self.soft_emb_norm.forward(&tokens)?;
        Ok(normed.matmul(&self.projection)?.astype(x.dtype())?)
    }
}

impl ImageEncoder for Gemma3Vision {
    fn image_token(&self) -> u32 {
        self.tokens.image_token
    }

    fn placeholders(&self, _height: u32, _width: u32) -> usize {
        self.tokens.per_image
    }

    fn check_size(&self, height: u32, width: u32) -> std::result::Result<(), String> {
        crate::vision::check_square(self.cfg.image_size as u32, height, width)
    }

    /// The images as one batch, as mlx-vlm runs them.
    fn encode(&self, images: &[Array]) -> Result<Array> {
        let dtype: Dtype = self.patch_weight.dtype();
        let refs: Vec<&Array> = images.iter().collect();
        let x = rmx_mlx::stack(&refs, 0)?
            .transpose(&[0, 2, 3, 1])?
            .astype(dtype)?;
        let patches = x
            .conv2d(&self.patch_weight, self.cfg.patch_size, 0)?
            .add(&self.patch_bias)?;
        let (b, gh, gw) = (patches.dim(0), patches.dim(1), patches.dim(2));
        let mut h = patches
            .reshape(&[b, gh * gw, self.cfg.hidden_size])?
            .add(&self.positions)?;
        for layer in &self.layers {
            h = layer.forward(&h)?;
        }
        let f = self.project(&self.post_norm.forward(&h)?)?;
        Ok(f.reshape(&[f.dim(0) * f.dim(1), f.dim(2)])?)
    }
}
