//! Qwen3-VL's vision transformer as Qwen3.5 / 3.6 carry it (`vision_tower.*`), op for op as
//! mlx-vlm's `models/qwen3_vl/vision.py` runs it, with deepstack off as mlx-vlm's `qwen3_5`
//! has it. An image keeps its own size (the processor's `smart_resize` makes each side a
//! multiple of `patch_size * spatial_merge_size`): its pixels become patches of two identical
//! frames (`temporal_patch_size`) ordered by merge block, a strided 3-D convolution embeds
//! them, a learned position table bilinearly interpolated to the image's grid is added, then
//! pre-norm blocks (LayerNorm, attention with a 2-D rope over each patch's row and column, a
//! tanh-GELU MLP), each image attending to its own patches. The merger LayerNorms each patch and
//! joins each merge block's patches into one row: linear, exact GELU, linear to the text width.

use std::path::Path;

use rmx_mlx::{Array, Dtype};
use serde::Deserialize;

use crate::config::{QuantConfig, RawConfig};
use crate::error::{ModelError, Result};
use crate::layers::{gelu, gelu_approx, Embedding, LayerNorm, Linear};
use crate::vision::ImageEncoder;
use crate::weights::Weights;

/// `vision_config` of a Qwen3.5 checkpoint (mlx-vlm's Qwen3-VL `VisionConfig` defaults).
#[derive(Debug, Clone, Deserialize)]
pub struct VisionConfig {
    #[serde(default = "d_depth")]
    pub depth: i32,
    #[serde(default = "d_hidden")]
    pub hidden_size: i32,
    #[serde(default = "d_intermediate")]
    pub intermediate_size: i32,
    #[serde(default = "d_out_hidden")]
    pub out_hidden_size: i32,
    #[serde(default = "d_heads")]
    pub num_heads: i32,
    #[serde(default = "d_patch")]
    pub patch_size: i32,
    #[serde(default = "d_channels")]
    pub in_channels: i32,
    #[serde(default = "d_merge")]
    pub spatial_merge_size: i32,
    #[serde(default = "d_temporal")]
    pub temporal_patch_size: i32,
    #[serde(default = "d_positions")]
    pub num_position_embeddings: i32,
    #[serde(default)]
    pub deepstack_visual_indexes: Vec<i32>,
}

defaults! {
    d_depth: i32 = 32, d_hidden: i32 = 1280, d_intermediate: i32 = 3420,
    d_out_hidden: i32 = 1536, d_heads: i32 = 16, d_patch: i32 = 14, d_channels: i32 = 3,
    d_merge: i32 = 2, d_temporal: i32 = 2, d_positions: i32 = 2304,
}

/// mlx-vlm builds every LayerNorm of this tower with this eps, whatever the config says.
const NORM_EPS: f32 = 1e-6;

struct Block {
    norm1: LayerNorm,
    qkv: Linear,
    proj: Linear,
    norm2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
}

/// The tower and its merger.
pub struct QwenVision {
    patch_weight: Array,
    patch_bias: Array,
    pos_embed: Embedding,
    /// The position table's side (`sqrt(num_position_embeddings)`).
    side: i32,
    blocks: Vec<Block>,
    merger_norm: LayerNorm,
    merger_fc1: Linear,
    merger_fc2: Linear,
    /// `[head_dim / 4]`: the rope's frequencies, shared by rows and columns.
    inv_freq: Array,
    cfg: VisionConfig,
    image_token: u32,
}

impl QwenVision {
    /// The tower of a checkpoint whose weights `w` holds in mlx-vlm's layout; `image_token`:
    /// the placeholder its rows replace.
    pub(crate) fn load(
        w: &mut Weights,
        q: &QuantConfig,
        cfg: VisionConfig,
        image_token: u32,
        config_path: &Path,
    ) -> Result<QwenVision> {
        let bad = |message: String| ModelError::Config {
            path: config_path.to_path_buf(),
            message,
        };
        let d = cfg.hidden_size;
        let heads = cfg.num_heads;
        if heads <= 0 || d % heads != 0 || (d / heads) % 4 != 0 {
            return Err(bad(format!(
                "vision_config: hidden_size {d} over num_heads {heads} is not a head size that \
                 is a multiple of 4 (the 2-D rope turns quarters of it)"
            )));
        }
        if !cfg.deepstack_visual_indexes.is_empty() {
            return Err(bad(
                "vision_config.deepstack_visual_indexes is set; Qwen3.5's tower has no deepstack \
                 (Qwen3-VL's is not supported)"
                    .into(),
            ));
        }
        let side = (cfg.num_position_embeddings as f64).sqrt() as i32;
        if cfg.patch_size <= 0
            || cfg.spatial_merge_size <= 0
            || cfg.temporal_patch_size <= 0
            || side <= 0
        {
            return Err(bad(
                "vision_config: patch_size, spatial_merge_size, temporal_patch_size and \
                 num_position_embeddings must be positive"
                    .into(),
            ));
        }
        let root = "vision_tower";
        let lin = |w: &mut Weights, name: &str, inp: i32, out: i32| {
            Linear::load(w, q, &format!("{root}.{name}"), inp, out, true)
        };
        let mut blocks = Vec::new();
        for i in 0..cfg.depth {
            let p = format!("blocks.{i}");
            let f = cfg.intermediate_size;
            blocks.push(Block {
                norm1: LayerNorm::load(w, &format!("{root}.{p}.norm1"), d, NORM_EPS)?,
                qkv: lin(w, &format!("{p}.attn.qkv"), d, 3 * d)?,
                proj: lin(w, &format!("{p}.attn.proj"), d, d)?,
                norm2: LayerNorm::load(w, &format!("{root}.{p}.norm2"), d, NORM_EPS)?,
                fc1: lin(w, &format!("{p}.mlp.linear_fc1"), d, f)?,
                fc2: lin(w, &format!("{p}.mlp.linear_fc2"), f, d)?,
            });
        }
        let (t, p, c) = (cfg.temporal_patch_size, cfg.patch_size, cfg.in_channels);
        let m2 = d * cfg.spatial_merge_size * cfg.spatial_merge_size;
        // VisionRotaryEmbedding(head_dim / 2), theta 10,000.
        let inv_freq = crate::rope::python_inv_freq(d / heads / 2, 10000.0)?;
        Ok(QwenVision {
            patch_weight: w.take(&format!("{root}.patch_embed.proj.weight"), &[d, t, p, p, c])?,
            patch_bias: w.take(&format!("{root}.patch_embed.proj.bias"), &[d])?,
            pos_embed: Embedding::load(
                w,
                q,
                &format!("{root}.pos_embed"),
                cfg.num_position_embeddings,
                d,
            )?,
            side,
            blocks,
            merger_norm: LayerNorm::load(w, &format!("{root}.merger.norm"), d, NORM_EPS)?,
            merger_fc1: lin(w, "merger.linear_fc1", m2, m2)?,
            merger_fc2: lin(w, "merger.linear_fc2", m2, cfg.out_hidden_size)?,
            inv_freq,
            cfg,
            image_token,
        })
    }

    /// The patches (rows, columns) of `height` x `width` pixel values, before their merge
    /// (`image_grid_thw`'s last two).
    pub(crate) fn grid(&self, height: u32, width: u32) -> (i32, i32) {
        let p = self.cfg.patch_size as u32;
        ((height / p) as i32, (width / p) as i32)
    }

    /// Patches a merged one spans on each side.
    pub(crate) fn merge(&self) -> i32 {
        self.cfg.spatial_merge_size
    }

    /// Pixels a merged patch spans on each side.
    fn unit(&self) -> u32 {
        (self.cfg.patch_size * self.cfg.spatial_merge_size) as u32
    }

    /// One image's `[3, H, W]` pixels as the processor's patches, `[n, C * T * P * P]` ordered
    /// by merge block (both frames the same image), then the patch embedding: `[n, hidden]`.
    fn embed_patches(&self, img: &Array, dtype: Dtype) -> Result<Array> {
        let (t, p, m, c) = (
            self.cfg.temporal_patch_size,
            self.cfg.patch_size,
            self.cfg.spatial_merge_size,
            self.cfg.in_channels,
        );
        let (gh, gw) = (img.dim(1) / p, img.dim(2) / p);
        let n = gh * gw;
        let x = img
            .expand_dims(&[0])?
            .repeat(t, 0)?
            .reshape(&[t, c, gh / m, m, p, gw / m, m, p])?
            .transpose(&[2, 5, 3, 6, 1, 0, 4, 7])?
            .reshape(&[n, c * t * p * p])?
            .astype(dtype)?;
        // PatchEmbed: [n, C, T, P, P] with the channels last, a conv3d whose stride is its
        // kernel, then the bias.
        let e = x
            .reshape(&[n, c, t, p, p])?
            .transpose(&[0, 2, 3, 4, 1])?
            .conv3d(&self.patch_weight, (t, p, p))?
            .reshape(&[n, self.cfg.hidden_size])?;
        Ok(e.add(&self.patch_bias)?)
    }

    /// The position table bilinearly interpolated to a `gh` x `gw` grid, ordered by merge
    /// block: `fast_pos_embed_interpolate`, its four corners weighted in the table's dtype.
    fn positions(&self, gh: i32, gw: i32) -> Result<Array> {
        let s = self.side;
        let line = |n: i32| -> Result<(Vec<i32>, Vec<i32>, Vec<f32>)> {
            let v = Array::linspace(0.0, (s - 1) as f64, n, Dtype::F32)?.to_vec::<f32>()?;
            let floor: Vec<i32> = v.iter().map(|x| *x as i32).collect();
            let ceil = floor.iter().map(|f| (f + 1).min(s - 1)).collect();
            let frac = v.iter().zip(&floor).map(|(x, f)| x - *f as f32).collect();
            Ok((floor, ceil, frac))
        };
        let (hf, hc, dh) = line(gh)?;
        let (wf, wc, dw) = line(gw)?;
        let n = (gh * gw) as usize;
        let mut idx = vec![0i32; 4 * n];
        let mut wt = vec![0f32; 4 * n];
        for i in 0..gh as usize {
            for j in 0..gw as usize {
                let at = i * gw as usize + j;
                let corners = [
                    (hf[i] * s + wf[j], (1.0 - dh[i]) * (1.0 - dw[j])),
                    (hf[i] * s + wc[j], (1.0 - dh[i]) * dw[j]),
                    (hc[i] * s + wf[j], dh[i] * (1.0 - dw[j])),
                    (hc[i] * s + wc[j], dh[i] * dw[j]),
                ];
                for (k, (ix, w)) in corners.into_iter().enumerate() {
                    idx[k * n + at] = ix;
                    wt[k * n + at] = w;
                }
            }
        }
        let rows = self
            .pos_embed
            .forward(&Array::from_slice(&idx, &[4, n as i32])?)?;
        let weights = Array::from_slice(&wt, &[4, n as i32, 1])?.astype(rows.dtype())?;
        let r = rows.multiply(&weights)?;
        let corner = |k: i32| r.slice_axis(0, k, k + 1);
        let sum = corner(0)?
            .add(&corner(1)?)?
            .add(&corner(2)?)?
            .add(&corner(3)?)?;
        let (d, m) = (self.cfg.hidden_size, self.cfg.spatial_merge_size);
        Ok(sum
            .reshape(&[gh / m, m, gw / m, m, d])?
            .transpose(&[0, 2, 1, 3, 4])?
            .reshape(&[gh * gw, d])?)
    }

    /// `(cos, sin)` `[1, n, 1, head_dim]` float32 of a `gh` x `gw` grid's patches in merge-block
    /// order: the row's frequencies then the column's, twice (`rot_pos_emb`, then the tile in
    /// `apply_rotary_pos_emb_vision`).
    fn rope(&self, gh: i32, gw: i32) -> Result<(Array, Array)> {
        let m = self.cfg.spatial_merge_size;
        let (mut rows, mut cols) = (Vec::new(), Vec::new());
        for br in 0..gh / m {
            for bc in 0..gw / m {
                for ir in 0..m {
                    for ic in 0..m {
                        rows.push((br * m + ir) as f32);
                        cols.push((bc * m + ic) as f32);
                    }
                }
            }
        }
        let n = rows.len() as i32;
        let q = self.inv_freq.dim(0);
        let freqs = |pos: &[f32]| -> Result<Array> {
            Ok(Array::from_slice(pos, &[n, 1])?.multiply(&self.inv_freq.reshape(&[1, q])?)?)
        };
        let half = rmx_mlx::concatenate(&[&freqs(&rows)?, &freqs(&cols)?], -1)?;
        let emb = rmx_mlx::concatenate(&[&half, &half], -1)?.reshape(&[1, n, 1, 4 * q])?;
        Ok((emb.cos()?, emb.sin()?))
    }
}

/// `x * cos + rotate_half(x) * sin` in float32, rounded back to `x`'s dtype, as mlx-vlm's
/// `apply_rotary_pos_emb_vision`.
fn rotate(x: &Array, cos: &Array, sin: &Array) -> Result<Array> {
    let half = x.dim(-1) / 2;
    let (a, b) = (
        x.slice_axis(-1, 0, half)?,
        x.slice_axis(-1, half, 2 * half)?,
    );
    let rotated = rmx_mlx::concatenate(&[&b.negative()?, &a], -1)?;
    Ok(x.multiply(cos)?
        .add(&rotated.multiply(sin)?)?
        .astype(x.dtype())?)
}

impl Block {
    /// `x`: `[n, hidden]`, every image's patches; `lens`: each image's patch count, in order.
    fn forward(
        &self,
        x: &Array,
        cos: &Array,
        sin: &Array,
        lens: &[i32],
        heads: i32,
    ) -> Result<Array> {
        let n = x.dim(0);
        let qkv = self
            .qkv
            .forward(&self.norm1.forward(x)?)?
            .reshape(&[n, 3, heads, -1])?
            .transpose(&[1, 0, 2, 3])?;
        let part = |i: i32| qkv.slice_axis(0, i, i + 1);
        let q = rotate(&part(0)?, cos, sin)?.transpose(&[0, 2, 1, 3])?;
        let k = rotate(&part(1)?, cos, sin)?.transpose(&[0, 2, 1, 3])?;
        let v = part(2)?.transpose(&[0, 2, 1, 3])?;
        let scale = (q.dim(-1) as f64).powf(-0.5) as f32;
        let mut outs = Vec::with_capacity(lens.len());
        let mut start = 0;
        for len in lens {
            let s = |a: &Array| a.slice_axis(2, start, start + len);
            outs.push(crate::vision::fused_sdpa(&s(&q)?, &s(&k)?, &s(&v)?, scale)?);
            start += len;
        }
        let refs: Vec<&Array> = outs.iter().collect();
        let o = rmx_mlx::concatenate(&refs, 2)?
            .transpose(&[0, 2, 1, 3])?
            .reshape(&[n, -1])?;
        let h = x.add(&self.proj.forward(&o)?)?;
        let y = self
            .fc2
            .forward(&gelu_approx(&self.fc1.forward(&self.norm2.forward(&h)?)?)?)?;
        Ok(h.add(&y)?)
    }
}

impl ImageEncoder for QwenVision {
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
        let dtype = self.patch_weight.dtype();
        let p = self.cfg.patch_size;
        let (mut embeds, mut cos, mut sin, mut lens) = (vec![], vec![], vec![], vec![]);
        for img in images {
            let (gh, gw) = (img.dim(1) / p, img.dim(2) / p);
            embeds.push(
                self.embed_patches(img, dtype)?
                    .add(&self.positions(gh, gw)?)?,
            );
            let (c, s) = self.rope(gh, gw)?;
            cos.push(c);
            sin.push(s);
            lens.push(gh * gw);
        }
        let cat = |v: &[Array], axis: i32| -> Result<Array> {
            let refs: Vec<&Array> = v.iter().collect();
            Ok(rmx_mlx::concatenate(&refs, axis)?)
        };
        let (cos, sin) = (cat(&cos, 1)?, cat(&sin, 1)?);
        let mut h = cat(&embeds, 0)?;
        for block in &self.blocks {
            h = block.forward(&h, &cos, &sin, &lens, self.cfg.num_heads)?;
        }
        let m2 = self.cfg.hidden_size * self.cfg.spatial_merge_size * self.cfg.spatial_merge_size;
        let x = self.merger_norm.forward(&h)?.reshape(&[-1, m2])?;
        self.merger_fc2
            .forward(&gelu(&self.merger_fc1.forward(&x)?)?)
    }
}

/// The vision tower of the Qwen3.5 checkpoint in `dir` alone (mlx-vlm's layout), for checking
/// it against mlx-vlm before the text model takes its rows.
pub fn load_tower(dir: &Path) -> Result<QwenVision> {
    let raw = RawConfig::read(dir)?;
    let mut w = Weights::load(dir)?;
    let cfg: VisionConfig = crate::vision::vision_config(&raw)?;
    let image_token = raw
        .raw
        .get("image_token_id")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| ModelError::Config {
            path: raw.path.clone(),
            message: "image_token_id is missing".into(),
        })? as u32;
    QwenVision::load(&mut w, &raw.quant, cfg, image_token, &raw.path)
}
