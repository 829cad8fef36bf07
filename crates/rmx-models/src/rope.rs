//! Rotary position embeddings as mlx-lm's `initialize_rope` builds them.

use rmx_mlx::fast::{self, Rope as FastRope};
use rmx_mlx::{concatenate, r#where, Array, Dtype};
use serde_json::Value;

use crate::error::{ModelError, Result};

pub struct Rope {
    dims: i32,
    traditional: bool,
    base: Option<f32>,
    scale: f32,
    freqs: Option<Array>,
    /// YaRN's `mscale` and longrope's scale: the rotated part of the input is multiplied by it
    /// before the rotation (mlx-lm's `x.at[..., :dims].multiply(s)`).
    input_scale: Option<f64>,
    /// Dynamic NTK: the base grows with the context past `max_position_embeddings`.
    dynamic: Option<Dynamic>,
}

#[derive(Clone, Copy)]
struct Dynamic {
    base: f64,
    max_positions: f64,
    factor: f64,
}

/// The rope types rmx reads from `rope_scaling.rope_type` (or `type`), as mlx-lm's
/// `initialize_rope` names them.
pub const ROPE_TYPES: &[&str] = &[
    "default",
    "mrope",
    "linear",
    "llama3",
    "yarn",
    "deepseek_yarn",
    "telechat3-yarn",
    "longrope",
    "dynamic",
    "proportional",
];

/// `1 / base^(arange(0, dim, 2) / dim)` in float32, op for op as the Python side writes it
/// (mlx-vlm's vision ropes, `compute_inv_freq` of its mRoPE): `[dim / 2]`. MLX's rope kernel
/// takes another route to the same table ([`Rope::inv_freq`]), which rounds differently.
pub(crate) fn python_inv_freq(dim: i32, base: f64) -> Result<Array> {
    let exps = Array::arange(0.0, dim as f64, 2.0, Dtype::F32)?.divide_scalar(dim as f64)?;
    Ok(Array::scalar_as(base, Dtype::F32)?
        .power(&exps)?
        .reciprocal()?)
}

fn config_error(message: String) -> ModelError {
    // The family's loader knows the file; registry::load puts its path in.
    ModelError::Config {
        path: "config.json".into(),
        message,
    }
}

impl Rope {
    pub fn standard(dims: i32, base: f32, traditional: bool, scale: f32) -> Rope {
        Rope {
            dims,
            traditional,
            base: Some(base),
            scale,
            freqs: None,
            input_scale: None,
            dynamic: None,
        }
    }

    /// No rotation at all: SmolLM3's NoPE layers (every fourth), which see positions only
    /// through the causal mask. `dims` 0 also keeps the fused kernels, which rotate, away.
    pub fn none() -> Rope {
        Rope::standard(0, 10000.0, false, 1.0)
    }

    fn with_freqs(dims: i32, traditional: bool, freqs: Array) -> Rope {
        Rope {
            dims,
            traditional,
            base: None,
            scale: 1.0,
            freqs: Some(freqs),
            input_scale: None,
            dynamic: None,
        }
    }

    /// From a config's `rope_scaling` as mlx-lm's `initialize_rope` reads it. `max_positions`
    /// is the config's `max_position_embeddings` (longrope and dynamic scaling read it).
    pub fn from_config(
        dims: i32,
        base: f32,
        traditional: bool,
        scaling: Option<&Value>,
        max_positions: Option<i32>,
    ) -> Result<Rope> {
        let scaling = scaling.filter(|s| !s.is_null());
        let kind = scaling
            .and_then(|s| s.get("type").or_else(|| s.get("rope_type")))
            .and_then(|v| v.as_str())
            .unwrap_or("default");
        let opt = |k: &str| scaling.and_then(|s| s.get(k)).and_then(|v| v.as_f64());
        let num = |k: &str, d: f64| opt(k).unwrap_or(d);
        let need = |k: &str| {
            opt(k).ok_or_else(|| {
                config_error(format!(
                    "rope_scaling.{k} is required for rope type {kind:?}"
                ))
            })
        };
        match kind {
            // mlx-lm reads a text model's multimodal rope (Qwen3.5's mrope) as the plain one.
            "default" | "mrope" => Ok(Rope::standard(dims, base, traditional, 1.0)),
            "linear" => Ok(Rope::standard(
                dims,
                base,
                traditional,
                (1.0 / need("factor")?) as f32,
            )),
            "llama3" => Ok(Rope::with_freqs(
                dims,
                traditional,
                llama3_freqs(
                    dims,
                    base,
                    need("factor")?,
                    num("low_freq_factor", 1.0),
                    num("high_freq_factor", 4.0),
                    num("original_max_position_embeddings", 8192.0),
                )?,
            )),
            "yarn" | "deepseek_yarn" | "telechat3-yarn" => {
                let y = Yarn {
                    dims,
                    base: base as f64,
                    factor: need("factor")?,
                    original_max_positions: num("original_max_position_embeddings", 4096.0),
                    beta_fast: num("beta_fast", 32.0),
                    beta_slow: num("beta_slow", 1.0),
                    mscale: num("mscale", 1.0),
                    mscale_all_dim: num("mscale_all_dim", 0.0),
                };
                let mut r = Rope::with_freqs(dims, traditional, y.freqs()?);
                let m = y.mscale();
                r.input_scale = (m != 1.0).then_some(m);
                Ok(r)
            }
            "longrope" => {
                let orig = need("original_max_position_embeddings")?;
                let max = max_positions.map_or(131072.0, f64::from);
                let long = scaling.and_then(|s| s.get("long_factor")).ok_or_else(|| {
                    config_error(
                        "rope_scaling.long_factor is required for rope type \"longrope\"".into(),
                    )
                })?;
                let factors: Vec<f32> = match long {
                    Value::Array(a) => a
                        .iter()
                        .filter_map(|v| v.as_f64())
                        .map(|v| v as f32)
                        .collect(),
                    v => vec![v.as_f64().unwrap_or(1.0) as f32],
                };
                if factors.len() != 1 && factors.len() != (dims / 2) as usize {
                    return Err(config_error(format!(
                        "rope_scaling.long_factor has {} entries; the rotated dimensions need {}",
                        factors.len(),
                        dims / 2
                    )));
                }
                let factor = max / orig;
                let scale = match opt("long_mscale") {
                    Some(s) if s != 0.0 => s,
                    _ if factor <= 1.0 => 1.0,
                    _ => (1.0 + factor.ln() / orig.ln()).sqrt(),
                };
                let long = Array::from_slice(&factors, &[factors.len() as i32])?;
                let freqs = long.multiply(&plain_freqs(dims, base)?)?;
                let mut r = Rope::with_freqs(dims, false, freqs);
                r.input_scale = Some(scale);
                Ok(r)
            }
            "dynamic" => {
                let mut r = Rope::standard(dims, base, traditional, 1.0);
                r.dynamic = Some(Dynamic {
                    base: base as f64,
                    max_positions: max_positions.ok_or_else(|| {
                        config_error(
                            "max_position_embeddings is required for rope type \"dynamic\"".into(),
                        )
                    })? as f64,
                    factor: need("factor")?,
                });
                Ok(r)
            }
            // Gemma 4's full-attention layers: the whole head goes through the kernel, the
            // first `partial_rotary_factor` of it with frequencies of exponent i / dims (not
            // i / rotated), the rest with infinite ones, which leave it as it is.
            "proportional" => {
                let rotated = (f64::from(dims) * num("partial_rotary_factor", 1.0)) as i32;
                if rotated > dims || rotated < 0 {
                    return Err(config_error(format!(
                        "partial_rotary_factor makes {rotated} rotated dimensions of {dims}"
                    )));
                }
                let exponents = Array::arange(0.0, f64::from(rotated), 2.0, Dtype::F32)?
                    .divide_scalar(f64::from(dims))?;
                let freqs = Array::scalar(base)?
                    .power(&exponents)?
                    .multiply_scalar(num("factor", 1.0))?;
                let rest = Array::full(&[(dims - rotated) / 2], f64::INFINITY, Dtype::F32)?;
                let freqs = concatenate(&[&freqs, &rest], 0)?;
                Ok(Rope::with_freqs(dims, traditional, freqs))
            }
            other => Err(config_error(format!(
                "rope_scaling.rope_type {other:?} is not supported (rmx knows: {})",
                ROPE_TYPES.join(", ")
            ))),
        }
    }

    /// The rotated dimensions and whether pairs are adjacent (`traditional`) or half apart.
    pub fn layout(&self) -> (i32, bool) {
        (self.dims, self.traditional)
    }

    /// `[dims / 2]` float32 inverse frequencies with the scale folded in, as MLX's rope kernel
    /// computes them (`exp2(-i / (dims/2) * log2(base))`, or `1 / freqs[i]`), for fused kernels;
    /// `None` for ropes that are more than a frequency table (an input scale, a base that
    /// depends on the context), which the fused kernels do not implement.
    pub fn inv_freq(&self) -> Result<Option<Array>> {
        if self.input_scale.is_some() {
            return Ok(None);
        }
        self.scaled_inv_freq()
    }

    /// The rotated part's input scale (YaRN's `mscale`, longrope's), which the layer kernel
    /// applies before its rotation.
    pub fn input_scale(&self) -> Option<f64> {
        self.input_scale
    }

    /// `inv_freq` for a kernel that also applies `input_scale` (the one-launch layer kernel).
    pub fn scaled_inv_freq(&self) -> Result<Option<Array>> {
        if self.dims == 0 || self.dynamic.is_some() {
            return Ok(None);
        }
        let half = self.dims / 2;
        Ok(Some(match (&self.freqs, self.base) {
            (Some(f), _) => Array::scalar(self.scale)?.divide(f)?,
            (None, Some(base)) => {
                let log2 = (base as f64).log2();
                let v: Vec<f32> = (0..half)
                    .map(|i| {
                        let d = i as f32 / half as f32;
                        self.scale * (-(d as f64) * log2).exp2() as f32
                    })
                    .collect();
                Array::from_slice(&v, &[half])?
            }
            (None, None) => unreachable!("a rope has a base or frequencies"),
        }))
    }

    /// Whether rows at different positions can be rotated in one call: not with a dynamic
    /// NTK base, which depends on the position itself.
    pub fn rotates_rows(&self) -> bool {
        self.dynamic.is_none()
    }

    /// `x` `[B, heads, L, dim]` with row `b` starting at `positions[b]` (`[B]` int32).
    pub fn forward_rows(&self, x: &Array, positions: &Array) -> Result<Array> {
        if self.dims == 0 {
            return Ok(x.clone());
        }
        if !self.rotates_rows() {
            return Err(ModelError::Batch("a dynamic NTK rope".into()));
        }
        let scaled;
        let x = match self.input_scale {
            Some(s) => {
                scaled = scale_rotated(x, self.dims, s)?;
                &scaled
            }
            None => x,
        };
        let p = FastRope {
            dims: self.dims,
            traditional: self.traditional,
            base: self.base,
            scale: self.scale,
            freqs: self.freqs.as_ref(),
        };
        Ok(fast::rope_offsets(x, p, positions)?)
    }

    pub fn forward(&self, x: &Array, offset: i32) -> Result<Array> {
        if self.dims == 0 {
            return Ok(x.clone());
        }
        let scaled;
        let x = match self.input_scale {
            Some(s) => {
                scaled = scale_rotated(x, self.dims, s)?;
                &scaled
            }
            None => x,
        };
        let base = match self.dynamic {
            // mlx-lm's DynamicNTKScalingRoPE, in Python floats, then float32 for the kernel.
            Some(d) => {
                let seq = ((x.dim(-2) + offset) as f64).max(d.max_positions);
                let dims = self.dims as f64;
                Some(
                    (d.base
                        * ((d.factor * seq / d.max_positions) - (d.factor - 1.0))
                            .powf(dims / (dims - 2.0))) as f32,
                )
            }
            None => self.base,
        };
        let p = FastRope {
            dims: self.dims,
            traditional: self.traditional,
            base,
            scale: self.scale,
            freqs: self.freqs.as_ref(),
        };
        Ok(fast::rope(x, p, offset)?)
    }
}

/// `x` with its first `dims` features multiplied by `s` (a Python float, so rounded to `x`'s
/// dtype as MLX does).
fn scale_rotated(x: &Array, dims: i32, s: f64) -> Result<Array> {
    let last = x.dim(-1);
    if dims >= last {
        return Ok(x.multiply_scalar(s)?);
    }
    let parts = x.split_at(&[dims], -1)?;
    Ok(concatenate(
        &[&parts[0].multiply_scalar(s)?, &parts[1]],
        -1,
    )?)
}

/// `base ** (arange(0, dims, 2, float32) / dims)`, the unscaled wavelengths / 2pi.
fn plain_freqs(dims: i32, base: f32) -> Result<Array> {
    let exponents = Array::arange(0.0, dims as f64, 2.0, Dtype::F32)?.divide_scalar(dims as f64)?;
    Ok(Array::scalar(base)?.power(&exponents)?)
}

/// mlx-lm's `YarnRoPE` settings.
struct Yarn {
    dims: i32,
    base: f64,
    factor: f64,
    original_max_positions: f64,
    beta_fast: f64,
    beta_slow: f64,
    mscale: f64,
    mscale_all_dim: f64,
}

impl Yarn {
    fn correction_dim(&self, rotations: f64) -> f64 {
        (self.dims as f64
            * (self.original_max_positions / (rotations * 2.0 * std::f64::consts::PI)).ln())
            / (2.0 * self.base.ln())
    }

    fn get_mscale(&self, m: f64) -> f64 {
        if self.factor <= 1.0 {
            1.0
        } else {
            0.1 * m * self.factor.ln() + 1.0
        }
    }

    /// The input scale: `get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)`.
    fn mscale(&self) -> f64 {
        self.get_mscale(self.mscale) / self.get_mscale(self.mscale_all_dim)
    }

    /// The frequency table, with the same float32 ops in the same order as mlx-lm.
    fn freqs(&self) -> Result<Array> {
        let low = self.correction_dim(self.beta_fast).floor().max(0.0);
        let high = self
            .correction_dim(self.beta_slow)
            .ceil()
            .min((self.dims - 1) as f64);
        let high = if low == high { high + 0.001 } else { high };
        let freq_extra = plain_freqs(self.dims, self.base as f32)?;
        let freq_inter = freq_extra.multiply_scalar(self.factor)?;
        let ramp = Array::arange(0.0, (self.dims / 2) as f64, 1.0, Dtype::F32)?
            .subtract_scalar(low)?
            .divide_scalar(high - low)?
            .maximum_scalar(0.0)?
            .minimum_scalar(1.0)?;
        let mask = Array::scalar(1.0f32)?.subtract(&ramp)?;
        let inv_mask = Array::scalar(1.0f32)?.subtract(&mask)?;
        let num = freq_inter.multiply(&freq_extra)?;
        let den = freq_inter
            .multiply(&mask)?
            .add(&freq_extra.multiply(&inv_mask)?)?;
        Ok(num.divide(&den)?)
    }
}

/// Llama 3.1's frequency table, computed with the same MLX ops in the same order as mlx-lm's
/// `Llama3RoPE` so the float32 values are identical.
fn llama3_freqs(
    dims: i32,
    base: f32,
    factor: f64,
    low: f64,
    high: f64,
    old_ctx: f64,
) -> Result<Array> {
    let low_wavelen = old_ctx / low;
    let high_wavelen = old_ctx / high;
    let exponents =
        Array::arange(0.0, dims as f64, 2.0, Dtype::I32)?.divide(&Array::scalar(dims)?)?;
    let freqs = Array::scalar(base)?.power(&exponents)?;
    let wavelens = freqs.multiply_scalar(2.0 * std::f64::consts::PI)?;
    let freqs = r#where(
        &wavelens.greater_scalar(low_wavelen)?,
        &freqs.multiply_scalar(factor)?,
        &freqs,
    )?;
    let is_medium = wavelens
        .greater_scalar(high_wavelen)?
        .logical_and(&wavelens.less_scalar(low_wavelen)?)?;
    let smooth = Array::scalar(old_ctx as f32)?
        .divide(&wavelens)?
        .subtract_scalar(low)?
        .divide_scalar(high - low)?;
    let denom = Array::scalar(1.0f32)?
        .subtract(&smooth)?
        .divide_scalar(factor)?
        .add(&smooth)?;
    let smooth_freqs = freqs.divide(&denom)?;
    Ok(r#where(&is_medium, &smooth_freqs, &freqs)?)
}
