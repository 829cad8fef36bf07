//! Rotary position embeddings as mlx-lm's `initialize_rope` builds them.

use rmx_mlx::fast::{self, Rope as FastRope};
use rmx_mlx::{r#where, Array, Dtype};
use serde_json::Value;

use crate::error::{ModelError, Result};

pub struct Rope {
    dims: i32,
    traditional: bool,
    base: Option<f32>,
    scale: f32,
    freqs: Option<Array>,
}

impl Rope {
    pub fn standard(dims: i32, base: f32, traditional: bool, scale: f32) -> Rope {
        Rope {
            dims,
            traditional,
            base: Some(base),
            scale,
            freqs: None,
        }
    }

    /// From a config's `rope_scaling` (`None`, `default`, `linear` or `llama3`).
    pub fn from_config(
        dims: i32,
        base: f32,
        traditional: bool,
        scaling: Option<&Value>,
    ) -> Result<Rope> {
        let kind = scaling
            .and_then(|s| s.get("type").or_else(|| s.get("rope_type")))
            .and_then(|v| v.as_str())
            .unwrap_or("default");
        let num = |k: &str, d: f64| {
            scaling
                .and_then(|s| s.get(k))
                .and_then(|v| v.as_f64())
                .unwrap_or(d)
        };
        match kind {
            "default" => Ok(Rope::standard(dims, base, traditional, 1.0)),
            "linear" => Ok(Rope::standard(
                dims,
                base,
                traditional,
                (1.0 / num("factor", 1.0)) as f32,
            )),
            "llama3" => Ok(Rope {
                dims,
                traditional,
                base: None,
                scale: 1.0,
                freqs: Some(llama3_freqs(
                    dims,
                    base,
                    num("factor", 8.0),
                    num("low_freq_factor", 1.0),
                    num("high_freq_factor", 4.0),
                    num("original_max_position_embeddings", 8192.0),
                )?),
            }),
            other => Err(ModelError::Config {
                path: "config.json".into(),
                message: format!("rope_scaling type {other:?} is not supported yet"),
            }),
        }
    }

    /// The rotated dimensions and whether pairs are adjacent (`traditional`) or half apart.
    pub fn layout(&self) -> (i32, bool) {
        (self.dims, self.traditional)
    }

    /// `[dims / 2]` float32 inverse frequencies with the scale folded in, as MLX's rope kernel
    /// computes them (`exp2(-i / (dims/2) * log2(base))`, or `1 / freqs[i]`), for fused kernels.
    pub fn inv_freq(&self) -> Result<Array> {
        let half = self.dims / 2;
        match (&self.freqs, self.base) {
            (Some(f), _) => Ok(Array::scalar(self.scale)?.divide(f)?),
            (None, Some(base)) => {
                let log2 = (base as f64).log2();
                let v: Vec<f32> = (0..half)
                    .map(|i| {
                        let d = i as f32 / half as f32;
                        self.scale * (-(d as f64) * log2).exp2() as f32
                    })
                    .collect();
                Ok(Array::from_slice(&v, &[half])?)
            }
            (None, None) => unreachable!("a rope has a base or frequencies"),
        }
    }

    pub fn forward(&self, x: &Array, offset: i32) -> Result<Array> {
        let p = FastRope {
            dims: self.dims,
            traditional: self.traditional,
            base: self.base,
            scale: self.scale,
            freqs: self.freqs.as_ref(),
        };
        Ok(fast::rope(x, p, offset)?)
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
