//! Gemma 4's vision encoder and its embedder into the text model, op for op as mlx-vlm's
//! `models/gemma4/vision.py` and `gemma4.py` (`embed_vision`) run them. An image keeps its own
//! size (the processor fits it to a patch budget, each side whole pooled patches): its patches
//! (rows, then columns, then channels) scaled to [-1, 1] and projected, plus a learned
//! embedding of each patch's column and of its row; then blocks of RMS-normed attention (q, k
//! and v normed per head, a 2-D rope turning one half of each head by the column and the other
//! by the row, no score scale, every patch seeing every other) and a tanh-GELU gated MLP, each
//! sublayer normed before and after. Each `k x k` block of patches is averaged into one row
//! (times `sqrt(hidden)`), optionally standardized, then RMS-normed without a scale and
//! projected to the text width: one row per soft token.

use rmx_mlx::fast;
use rmx_mlx::{Array, Dtype};
use serde::Deserialize;

use crate::config::QuantConfig;
use crate::error::{ModelError, Result};
use crate::layers::{gelu_approx, Linear};
use crate::vision::ImageEncoder;
use crate::weights::Weights;

/// `vision_config` of a Gemma 4 checkpoint (mlx-vlm's `VisionConfig` defaults).
#[derive(Debug, Clone, Deserialize)]
pub struct VisionConfig {
    #[serde(default = "d_hidden")]
    pub hidden_size: i32,
    #[serde(default = "d_intermediate")]
    pub intermediate_size: i32,
    #[serde(default = "d_layers")]
    pub num_hidden_layers: i32,
    #[serde(default = "d_heads")]
    pub num_attention_heads: i32,
    #[serde(default = "d_heads")]
    pub num_key_value_heads: i32,
    #[serde(default = "d_head_dim")]
    pub head_dim: i32,
    #[serde(default = "d_eps")]
    pub rms_norm_eps: f32,
    #[serde(default = "d_patch")]
    pub patch_size: i32,
    #[serde(default = "d_positions")]
    pub position_embedding_size: i32,
    #[serde(default = "d_pooling")]
    pub pooling_kernel_size: i32,
    #[serde(default)]
    pub use_clipped_linears: bool,
    #[serde(default)]
    pub standardize: bool,
    #[serde(default)]
    pub rope_parameters: Option<serde_json::Value>,
}

defaults! {
    d_hidden: i32 = 768, d_intermediate: i32 = 3072, d_layers: i32 = 16, d_heads: i32 = 12,
    d_head_dim: i32 = 64, d_eps: f32 = 1e-6, d_patch: i32 = 16, d_positions: i32 = 10240,
    d_pooling: i32 = 3,
}

/// mlx-vlm's `ClippableLinear`: a bias-free linear layer whose input and output are clamped
/// to bounds stored beside it, where the config says so.
struct ClipLinear {
    linear: Linear,
    /// `(input_min, input_max, output_min, output_max)`, scalars.
    clip: Option<[Array; 4]>,
}

impl ClipLinear {
    fn load(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        inp: i32,
        out: i32,
        clip: bool,
    ) -> Result<Self> {
        let clip = if clip {
            let s = |w: &mut Weights, n: &str| w.take(&format!("{path}.{n}"), &[]);
            Some([
                s(w, "input_min")?,
                s(w, "input_max")?,
                s(w, "output_min")?,
                s(w, "output_max")?,
            ])
        } else {
            None
        };
        Ok(ClipLinear {
            linear: Linear::load(w, q, &format!("{path}.linear"), inp, out, false)?,
            clip,
        })
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        let Some([imin, imax, omin, omax]) = &self.clip else {
            return self.linear.forward(x);
        };
        // mx.clip: the minimum of the maximum.
        let x = x.maximum(imin)?.minimum(imax)?;
        Ok(self.linear.forward(&x)?.maximum(omin)?.minimum(omax)?)
    }
}

/// mlx-vlm's `VisionRMSNorm` (a `weight`) and `VisionRMSNormNoScale` (none): computed in
/// float32, rounded back to the input's dtype.
fn rms_f32(x: &Array, weight: Option<&Array>, eps: f32) -> Result<Array> {
    let xf = x.astype(Dtype::F32)?;
    let var = xf.power_scalar(2.0)?.mean(&[-1], true)?;
    let mut y = xf.multiply(&var.add_scalar(eps as f64)?.rsqrt()?)?;
    if let Some(w) = weight {
        y = y.multiply(&w.astype(Dtype::F32)?)?;
    }
    Ok(y.astype(x.dtype())?)
}

struct Block {
    input_norm: Array,
    post_attention_norm: Array,
    pre_ffn_norm: Array,
    post_ffn_norm: Array,
    q: ClipLinear,
    k: ClipLinear,
    v: ClipLinear,
    o: ClipLinear,
    q_norm: Array,
    k_norm: Array,
    gate: ClipLinear,
    up: ClipLinear,
    down: ClipLinear,
}

/// The encoder, its pooling and the embedder into the text model.
pub struct Gemma4Vision {
    input_proj: Linear,
    /// `[2, positions, hidden]`: columns' embeddings, rows'.
    position_table: Array,
    blocks: Vec<Block>,
    /// `(std_bias, std_scale)` where the config standardizes.
    standardize: Option<(Array, Array)>,
    projection: Linear,
    cfg: VisionConfig,
    rope_base: f64,
    image_token: u32,
}

impl Gemma4Vision {
    /// The tower of the checkpoint `raw` describes, its weights in `w` (mlx-vlm's layout), for a
    /// text model `text_hidden` wide: its `vision_config`, and the placeholder its rows replace
    /// (`image_token_id`, mlx-vlm's default where the config names none).
    pub(crate) fn from_checkpoint(
        raw: &crate::config::RawConfig,
        w: &mut Weights,
        text_hidden: i32,
    ) -> Result<Gemma4Vision> {
        let cfg: VisionConfig = crate::vision::vision_config(raw)?;
        let image_token = raw
            .raw
            .get("image_token_id")
            .and_then(|v| v.as_u64())
            .unwrap_or(258880) as u32;
        Gemma4Vision::load(w, &raw.quant, cfg, text_hidden, image_token, &raw.path)
    }

    /// The tower of a checkpoint whose weights `w` holds in mlx-vlm's layout (`vision_tower.*`,
    /// `embed_vision.*`); `text_hidden`: the text model's width; `image_token`: the placeholder
    /// its rows replace.
    fn load(
        w: &mut Weights,
        q: &QuantConfig,
        cfg: VisionConfig,
        text_hidden: i32,
        image_token: u32,
        config_path: &std::path::Path,
    ) -> Result<Gemma4Vision> {
        let bad = |message: String| ModelError::Config {
            path: config_path.to_path_buf(),
            message,
        };
        let (d, hd) = (cfg.hidden_size, cfg.head_dim);
        if hd <= 0 || hd % 4 != 0 || cfg.patch_size <= 0 || cfg.pooling_kernel_size <= 0 {
            return Err(bad(format!(
                "vision_config: head_dim {hd} (a multiple of 4, for the 2-D rope), patch_size \
                 and pooling_kernel_size must be positive"
            )));
        }
        let root = "vision_tower";
        let clip = cfg.use_clipped_linears;
        let mut blocks = Vec::new();
        for i in 0..cfg.num_hidden_layers {
            let p = format!("{root}.encoder.layers.{i}");
            let lin = |w: &mut Weights, name: &str, inp: i32, out: i32| {
                ClipLinear::load(w, q, &format!("{p}.{name}"), inp, out, clip)
            };
            let norm = |w: &mut Weights, name: &str, dim: i32| {
                w.take(&format!("{p}.{name}.weight"), &[dim])
            };
            let (h, kv, f) = (
                cfg.num_attention_heads,
                cfg.num_key_value_heads,
                cfg.intermediate_size,
            );
            blocks.push(Block {
                input_norm: norm(w, "input_layernorm", d)?,
                post_attention_norm: norm(w, "post_attention_layernorm", d)?,
                pre_ffn_norm: norm(w, "pre_feedforward_layernorm", d)?,
                post_ffn_norm: norm(w, "post_feedforward_layernorm", d)?,
                q: lin(w, "self_attn.q_proj", d, h * hd)?,
                k: lin(w, "self_attn.k_proj", d, kv * hd)?,
                v: lin(w, "self_attn.v_proj", d, kv * hd)?,
                o: lin(w, "self_attn.o_proj", h * hd, d)?,
                q_norm: norm(w, "self_attn.q_norm", hd)?,
                k_norm: norm(w, "self_attn.k_norm", hd)?,
                gate: lin(w, "mlp.gate_proj", d, f)?,
                up: lin(w, "mlp.up_proj", d, f)?,
                down: lin(w, "mlp.down_proj", f, d)?,
            });
        }
        let p = cfg.patch_size;
        let standardize = if cfg.standardize {
            Some((
                w.take(&format!("{root}.std_bias"), &[d])?,
                w.take(&format!("{root}.std_scale"), &[d])?,
            ))
        } else {
            None
        };
        let rope_base = cfg
            .rope_parameters
            .as_ref()
            .and_then(|r| r.get("rope_theta"))
            .and_then(|v| v.as_f64())
            .unwrap_or(100.0);
        Ok(Gemma4Vision {
            input_proj: Linear::load(
                w,
                q,
                &format!("{root}.patch_embedder.input_proj"),
                3 * p * p,
                d,
                false,
            )?,
            position_table: w.take(
                &format!("{root}.patch_embedder.position_embedding_table"),
                &[2, cfg.position_embedding_size, d],
            )?,
            blocks,
            standardize,
            projection: Linear::load(
                w,
                q,
                "embed_vision.embedding_projection",
                d,
                text_hidden,
                false,
            )?,
            cfg,
            rope_base,
            image_token,
        })
    }

    /// Pixels a pooled patch spans on each side.
    fn unit(&self) -> u32 {
        (self.cfg.patch_size * self.cfg.pooling_kernel_size) as u32
    }

    /// `x` (`[1, L, heads, D]`) turned by each patch's column (first half of the head) and row
    /// (second half): mlx-vlm's `apply_multidimensional_rope` with two position axes.
    fn rope(&self, x: &Array, cols: &Array, rows: &Array) -> Result<Array> {
        let hd = x.dim(-1);
        let per = 2 * (hd / 4);
        let half = per / 2;
        let exps =
            Array::arange(0.0, half as f64, 1.0, Dtype::F32)?.multiply_scalar(2.0 / per as f64)?;
        let timescale = Array::scalar_as(self.rope_base, Dtype::F32)?.power(&exps)?;
        let mut parts = Vec::with_capacity(2);
        for (d, pos) in [cols, rows].into_iter().enumerate() {
            let part = x.slice_axis(-1, d as i32 * per, (d as i32 + 1) * per)?;
            let angle = pos.divide(&timescale.reshape(&[1, 1, half])?)?;
            let dup = |a: Array| -> Result<Array> {
                Ok(rmx_mlx::concatenate(&[&a, &a], -1)?
                    .astype(x.dtype())?
                    .expand_dims(&[2])?)
            };
            let (cos, sin) = (dup(angle.cos()?)?, dup(angle.sin()?)?);
            let rotated = rmx_mlx::concatenate(
                &[
                    &part.slice_axis(-1, half, per)?.negative()?,
                    &part.slice_axis(-1, 0, half)?,
                ],
                -1,
            )?;
            parts.push(part.multiply(&cos)?.add(&rotated.multiply(&sin)?)?);
        }
        Ok(rmx_mlx::concatenate(&[&parts[0], &parts[1]], -1)?)
    }

    /// One image's `[3, H, W]` pixel values to its `[soft tokens, text hidden]` rows.
    fn encode_one(&self, img: &Array) -> Result<Array> {
        let dtype = self.position_table.dtype();
        let p = self.cfg.patch_size;
        let (c, h, w) = (img.dim(0), img.dim(1), img.dim(2));
        let (ph, pw) = (h / p, w / p);
        let n = ph * pw;
        // _patchify: [1, C, pH, p, pW, p] -> [1, pH, pW, p, p, C], scaled to [-1, 1].
        let patches = img
            .reshape(&[1, c, ph, p, pw, p])?
            .transpose(&[0, 2, 4, 3, 5, 1])?
            .reshape(&[1, n, c * p * p])?
            .subtract_scalar(0.5)?
            .multiply_scalar(2.0)?
            .astype(dtype)?;
        // Each patch's (column, row), row-major, and their embeddings summed (one_hot @ table
        // picks rows exactly; the sum over the two axes rounds once).
        let cols: Vec<i32> = (0..n).map(|i| i % pw).collect();
        let rows: Vec<i32> = (0..n).map(|i| i / pw).collect();
        let col_ids = Array::from_slice(&cols, &[n])?;
        let row_ids = Array::from_slice(&rows, &[n])?;
        let pick = |axis: i32, ids: &Array| -> Result<Array> {
            Ok(self
                .position_table
                .slice_axis(0, axis, axis + 1)?
                .squeeze(&[0])?
                .take(ids, 0)?)
        };
        let positions = pick(0, &col_ids)?.add(&pick(1, &row_ids)?)?;
        let mut x = self
            .input_proj
            .forward(&patches)?
            .add(&positions.expand_dims(&[0])?)?;
        let colf = col_ids.astype(Dtype::F32)?.reshape(&[1, n, 1])?;
        let rowf = row_ids.astype(Dtype::F32)?.reshape(&[1, n, 1])?;
        let eps = self.cfg.rms_norm_eps;
        let (heads, kv, hd) = (
            self.cfg.num_attention_heads,
            self.cfg.num_key_value_heads,
            self.cfg.head_dim,
        );
        for b in &self.blocks {
            let normed = fast::rms_norm(&x, Some(&b.input_norm), eps)?;
            let split = |a: Array, hh: i32| a.reshape(&[1, n, hh, hd]);
            let q = rms_f32(&split(b.q.forward(&normed)?, heads)?, Some(&b.q_norm), eps)?;
            let k = rms_f32(&split(b.k.forward(&normed)?, kv)?, Some(&b.k_norm), eps)?;
            let v = rms_f32(&split(b.v.forward(&normed)?, kv)?, None, eps)?;
            let q = self.rope(&q, &colf, &rowf)?.transpose(&[0, 2, 1, 3])?;
            let k = self.rope(&k, &colf, &rowf)?.transpose(&[0, 2, 1, 3])?;
            let v = v.transpose(&[0, 2, 1, 3])?;
            // No score scale: q and k are normed.
            let o = crate::vision::fused_sdpa(&q, &k, &v, 1.0)?
                .transpose(&[0, 2, 1, 3])?
                .reshape(&[1, n, -1])?;
            let a = fast::rms_norm(&b.o.forward(&o)?, Some(&b.post_attention_norm), eps)?;
            let hx = x.add(&a)?;
            let y = fast::rms_norm(&hx, Some(&b.pre_ffn_norm), eps)?;
            let f = b
                .down
                .forward(&gelu_approx(&b.gate.forward(&y)?)?.multiply(&b.up.forward(&y)?)?)?;
            x = hx.add(&fast::rms_norm(&f, Some(&b.post_ffn_norm), eps)?)?;
        }
        // The pooler: each k x k block of patches averaged (an einsum with one-hot weights of
        // 1/k^2 over every patch, in float32), then times sqrt(hidden).
        let k = self.cfg.pooling_kernel_size;
        let length = n / (k * k);
        let pooled = if length == n {
            x
        } else {
            let mut weights = vec![0f32; (n * length) as usize];
            let w_of = 1.0 / (k * k) as f32;
            for i in 0..n as usize {
                let idx = (cols[i] / k + (pw / k) * (rows[i] / k)) as usize;
                weights[i * length as usize + idx] = w_of;
            }
            let wts = Array::from_slice(&weights, &[1, n, length])?;
            wts.transpose(&[0, 2, 1])?
                .matmul(&x.astype(Dtype::F32)?)?
                .astype(x.dtype())?
        };
        let mut h = pooled.multiply_scalar((self.cfg.hidden_size as f64).sqrt())?;
        if let Some((bias, scale)) = &self.standardize {
            h = h.subtract(bias)?.multiply(scale)?;
        }
        let normed = fast::rms_norm(&h.squeeze(&[0])?, None, eps)?;
        self.projection.forward(&normed)
    }
}

impl ImageEncoder for Gemma4Vision {
    fn image_token(&self) -> u32 {
        self.image_token
    }

    fn placeholders(&self, height: u32, width: u32) -> usize {
        crate::vision::cells(self.unit(), height, width)
    }

    fn check_size(&self, height: u32, width: u32) -> std::result::Result<(), String> {
        crate::vision::check_cells(self.unit(), height, width)
    }

    fn encode(&self, images: &[Array]) -> Result<Array> {
        let rows = images
            .iter()
            .map(|img| self.encode_one(img))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Array> = rows.iter().collect();
        Ok(rmx_mlx::concatenate(&refs, 0)?)
    }
}

/// The vision encoder of the Gemma 4 checkpoint in `dir` alone (mlx-vlm's layout), for checking
/// it against mlx-vlm before the text model takes its rows.
pub fn load_tower(dir: &std::path::Path) -> Result<Gemma4Vision> {
    let raw = crate::config::RawConfig::read(dir)?;
    let mut w = Weights::load(dir)?;
    let text_hidden = raw
        .raw
        .get("text_config")
        .and_then(|t| t.get("hidden_size"))
        .and_then(|v| v.as_u64())
        .ok_or_else(|| ModelError::Config {
            path: raw.path.clone(),
            message: "text_config.hidden_size is missing".into(),
        })? as i32;
    Gemma4Vision::from_checkpoint(&raw, &mut w, text_hidden)
}
