//! Building blocks shared by the families: linear and embedding layers (dense or quantized),
//! RMS norm and activations. Each mirrors the mlx.nn layer mlx-lm uses, op for op, because
//! greedy parity needs bit-identical logits.

use rmx_mlx::quant::{self, QuantSpec, Quantized};
use rmx_mlx::{addmm, fast, Array};

use crate::config::QuantConfig;
use crate::error::{ModelError, Result};
use crate::weights::Weights;

pub enum Linear {
    Dense {
        weight_t: Array,
        bias: Option<Array>,
    },
    Quant {
        q: Quantized,
        spec: QuantSpec,
        bias: Option<Array>,
    },
}

fn quantized_parts(
    w: &mut Weights,
    path: &str,
    rows: &[i32],
    cols: i32,
    spec: QuantSpec,
) -> Result<Quantized> {
    if cols % spec.group_size != 0 || (cols * spec.bits) % 32 != 0 {
        return Err(ModelError::Config {
            path: path.into(),
            message: format!(
                "{cols} columns do not fit {}-bit groups of {}",
                spec.bits, spec.group_size
            ),
        });
    }
    let shape = |last: i32| [rows, &[last]].concat();
    Ok(Quantized {
        weight: w.take(&format!("{path}.weight"), &shape(cols * spec.bits / 32))?,
        scales: w.take(&format!("{path}.scales"), &shape(cols / spec.group_size))?,
        biases: w.take_opt(&format!("{path}.biases"), &shape(cols / spec.group_size))?,
    })
}

fn spec_for(w: &Weights, q: &QuantConfig, path: &str) -> Result<Option<QuantSpec>> {
    if !w.has(&format!("{path}.scales")) {
        return Ok(None);
    }
    q.for_module(path)
        .map(Some)
        .ok_or_else(|| ModelError::Config {
            path: path.into(),
            message: format!(
                "{path} is quantized but config.json has no quantization settings for it"
            ),
        })
}

impl Linear {
    /// Loads `path.weight` (`[out, in]`), quantized when `path.scales` exists.
    pub fn load(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        inp: i32,
        out: i32,
        bias: bool,
    ) -> Result<Linear> {
        let b = if bias {
            Some(w.take(&format!("{path}.bias"), &[out])?)
        } else {
            None
        };
        match spec_for(w, q, path)? {
            Some(spec) => Ok(Linear::Quant {
                q: quantized_parts(w, path, &[out], inp, spec)?,
                spec,
                bias: b,
            }),
            None => Ok(Linear::Dense {
                // nn.Linear computes x @ W.T; keep the transposed view once.
                weight_t: w
                    .take(&format!("{path}.weight"), &[out, inp])?
                    .transpose(&[])?,
                bias: b,
            }),
        }
    }

    pub fn forward(&self, x: &Array) -> Result<Array> {
        Ok(match self {
            Linear::Dense {
                weight_t,
                bias: None,
            } => x.matmul(weight_t)?,
            Linear::Dense {
                weight_t,
                bias: Some(b),
            } => addmm(b, x, weight_t, 1.0, 1.0)?,
            Linear::Quant { q, spec, bias } => {
                let y = quant::quantized_matmul(x, q, *spec, true)?;
                match bias {
                    Some(b) => y.add(b)?,
                    None => y,
                }
            }
        })
    }
}

pub enum Embedding {
    Dense { weight: Array, weight_t: Array },
    Quant { q: Quantized, spec: QuantSpec },
}

impl Embedding {
    pub fn load(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        vocab: i32,
        dim: i32,
    ) -> Result<Embedding> {
        match spec_for(w, q, path)? {
            Some(spec) => Ok(Embedding::Quant {
                q: quantized_parts(w, path, &[vocab], dim, spec)?,
                spec,
            }),
            None => {
                let weight = w.take(&format!("{path}.weight"), &[vocab, dim])?;
                let weight_t = weight.transpose(&[])?;
                Ok(Embedding::Dense { weight, weight_t })
            }
        }
    }

    /// Rows for token ids of any shape (`[..., dim]`).
    pub fn forward(&self, ids: &Array) -> Result<Array> {
        Ok(match self {
            Embedding::Dense { weight, .. } => weight.take(ids, 0)?,
            Embedding::Quant { q, spec } => {
                let rows = Quantized {
                    weight: q.weight.take(ids, 0)?,
                    scales: q.scales.take(ids, 0)?,
                    biases: q.biases.as_ref().map(|b| b.take(ids, 0)).transpose()?,
                };
                quant::dequantize(&rows, *spec, None)?
            }
        })
    }

    /// The tied output projection: `x @ E.T`.
    pub fn as_linear(&self, x: &Array) -> Result<Array> {
        Ok(match self {
            Embedding::Dense { weight_t, .. } => x.matmul(weight_t)?,
            Embedding::Quant { q, spec } => quant::quantized_matmul(x, q, *spec, true)?,
        })
    }
}

pub struct RmsNorm {
    weight: Array,
    eps: f32,
}

impl RmsNorm {
    pub fn load(w: &mut Weights, path: &str, dim: i32, eps: f32) -> Result<RmsNorm> {
        Ok(RmsNorm {
            weight: w.take(&format!("{path}.weight"), &[dim])?,
            eps,
        })
    }

    /// Gemma stores `weight - 1`; mlx-lm adds the 1 back (in the weight dtype) on every call,
    /// which gives the same values as adding it once here.
    pub fn load_gemma(w: &mut Weights, path: &str, dim: i32, eps: f32) -> Result<RmsNorm> {
        let mut n = RmsNorm::load(w, path, dim, eps)?;
        n.weight = n.weight.add_scalar(1.0)?;
        Ok(n)
    }

    pub fn forward(&self, x: &Array) -> Result<Array> {
        Ok(fast::rms_norm(x, Some(&self.weight), self.eps)?)
    }
}

/// `x * sigmoid(x)`.
pub fn silu(x: &Array) -> Result<Array> {
    Ok(x.multiply(&x.sigmoid()?)?)
}

/// `silu(gate) * up`.
pub fn swiglu(gate: &Array, up: &Array) -> Result<Array> {
    Ok(silu(gate)?.multiply(up)?)
}

/// mlx.nn's `gelu_approx`: `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`.
pub fn gelu_approx(x: &Array) -> Result<Array> {
    let inner = x
        .add(&x.power_scalar(3.0)?.multiply_scalar(0.044715)?)?
        .multiply_scalar((2.0 / std::f64::consts::PI).sqrt())?;
    let t = inner.tanh()?.add_scalar(1.0)?;
    Ok(x.multiply_scalar(0.5)?.multiply(&t)?)
}
