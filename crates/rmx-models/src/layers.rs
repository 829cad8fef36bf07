//! Building blocks shared by the families: linear and embedding layers (dense or quantized),
//! RMS norm and activations. Each mirrors the mlx.nn layer mlx-lm uses, op for op, because
//! greedy parity needs bit-identical logits.

use rmx_mlx::distributed::Group;
use rmx_mlx::quant::{self, QuantMode, QuantSpec, Quantized};
use rmx_mlx::{addmm, concatenate, fast, Array};

use crate::config::QuantConfig;
use crate::error::{ModelError, Result};
use crate::fastpath::{self, Epilogue};
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
    /// A row-parallel layer of a tensor-parallel model (tensor_parallel.rs): `part` holds this
    /// rank's input columns, the ranks' partial products are summed over `group`, and the bias
    /// is added once, after the sum.
    Reduced {
        part: Box<Linear>,
        group: Group,
        bias: Option<Array>,
    },
}

pub(crate) fn quantized_parts(
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

pub(crate) fn spec_for(w: &Weights, q: &QuantConfig, path: &str) -> Result<Option<QuantSpec>> {
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
    /// A bias-free quantized layer's weights and spec, as the layer kernel reads them; `None`
    /// for any other layer.
    pub(crate) fn bias_free_quant(&self) -> Option<(&Quantized, QuantSpec)> {
        match self.quant()? {
            (part, None) => Some(part),
            _ => None,
        }
    }

    /// A quantized layer's weights, spec and linear bias, as the layer kernel reads them; `None`
    /// for a dense layer.
    pub(crate) fn quant(&self) -> Option<((&Quantized, QuantSpec), Option<&Array>)> {
        match self {
            Linear::Quant { q, spec, bias } => Some(((q, *spec), bias.as_ref())),
            _ => None,
        }
    }

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
                let y = quant_product(x, q, *spec)?;
                match bias {
                    Some(b) => y.add(b)?,
                    None => y,
                }
            }
            Linear::Reduced { part, group, bias } => {
                let y = group.all_sum(&part.forward(x)?)?;
                match bias {
                    Some(b) => y.add(b)?,
                    None => y,
                }
            }
        })
    }

    /// One layer out of several that read the same input (`[q; k; v]`, `[gate; up]`), so a
    /// token runs one product instead of several — on the CUDA fast path only, and only for
    /// quantized layers of one quantization, all with a linear bias or none (otherwise the
    /// parts come back as they were): measured on the H100, fusing dense bf16 layers made
    /// Llama-3-8B slower (decode 164 -> 160, prefill@2K 30.4K -> 28.2K tok/s), since cuBLAS
    /// already reads them at bandwidth. Each output row is the same product and the same bias
    /// as before. The result is evaluated now so the parts' memory goes at once.
    pub fn fuse<const N: usize>(
        parts: [Linear; N],
    ) -> Result<std::result::Result<Linear, [Linear; N]>> {
        let mut quants = Vec::with_capacity(N);
        for p in &parts {
            match p.quant() {
                Some(q) => quants.push(q),
                None => return Ok(Err(parts)),
            }
        }
        let Some(&((first, spec), first_bias)) = quants.first() else {
            return Ok(Err(parts));
        };
        let alike = quants.iter().all(|((q, s), b)| {
            *s == spec
                && q.biases.is_some() == first.biases.is_some()
                && b.is_some() == first_bias.is_some()
        });
        if N < 2 || !alike || !fastpath::fast_path().kernels {
            return Ok(Err(parts));
        }
        let qs: Vec<&Quantized> = quants.iter().map(|((q, _), _)| *q).collect();
        let q = fuse_quantized(&qs)?;
        let bias = match first_bias {
            Some(_) => {
                let bs: Vec<&Array> = quants.iter().filter_map(|(_, b)| *b).collect();
                Some(rmx_mlx::concatenate(&bs, 0)?)
            }
            None => None,
        };
        let mut all = vec![&q.weight, &q.scales];
        all.extend(q.biases.as_ref());
        all.extend(bias.as_ref());
        rmx_mlx::eval(&all)?;
        Ok(Ok(Linear::Quant { q, spec, bias }))
    }

    /// This layer's product through one of rmx's kernels, when one applies (a bias-free
    /// quantized layer on the fast path); `None` means "use MLX's ops".
    fn kernel_product(
        &self,
        x: &Array,
        e: Epilogue,
        norm: Option<&RmsNorm>,
    ) -> Result<Option<Array>> {
        match self {
            Linear::Quant {
                q,
                spec,
                bias: None,
            } => fastpath::qgemv(x, q, *spec, e, norm.map(|n| n.parts())),
            _ => Ok(None),
        }
    }

    /// `rms_norm(x) W^T`: on the fast path the kernel norms the row it reads.
    pub fn forward_prenorm(&self, x: &Array, norm: &RmsNorm) -> Result<Array> {
        match self.kernel_product(x, Epilogue::Plain, Some(norm))? {
            Some(y) => Ok(y),
            None => self.forward(&norm.forward(x)?),
        }
    }

    /// `res + x W^T`: on the fast path one kernel adds the residual stream as it writes (one
    /// cuBLAS call with beta = 1 for a dense layer's prefill).
    pub fn forward_residual(&self, x: &Array, res: &Array) -> Result<Array> {
        if let Some(y) = self.kernel_product(x, Epilogue::Residual(res), None)? {
            return Ok(y);
        }
        let fp = fastpath::fast_path();
        match self {
            Linear::Dense {
                weight_t,
                bias: None,
            } if fp.kernels
                && res.dtype() == x.dtype()
                && (fastpath::rows(x) > 1 || fp.decode_addmm) =>
            {
                return Ok(addmm(res, x, weight_t, 1.0, 1.0)?);
            }
            // A long prefill's dequantized product adds the residual inside cuBLAS too.
            Linear::Quant {
                q,
                spec,
                bias: None,
            } if res.dtype() == x.dtype() => {
                if let Some(y) = dequant_prefill_product(x, q, *spec, Some(res))? {
                    return Ok(y);
                }
            }
            _ => {}
        }
        Ok(res.add(&self.forward(x)?)?)
    }

    /// `silu(x G^T) * (x U^T)` for a fused `[gate; up]` layer of `2 * hidden` outputs, of
    /// `rms_norm(x)` when `norm` is given.
    pub fn forward_swiglu(&self, x: &Array, hidden: i32, norm: Option<&RmsNorm>) -> Result<Array> {
        if let Some(y) = self.kernel_product(x, Epilogue::SwiGlu, norm)? {
            return Ok(y);
        }
        let both = match norm {
            Some(n) => self.forward(&n.forward(x)?)?,
            None => self.forward(x)?,
        };
        if let Some(y) = fastpath::swiglu(&both, None)? {
            return Ok(y);
        }
        let parts = both.split_at(&[hidden], -1)?;
        swiglu(&parts[0], &parts[1])
    }
}

fn fuse_quantized(qs: &[&Quantized]) -> rmx_mlx::Result<Quantized> {
    let cat = |f: &dyn Fn(&Quantized) -> &Array| {
        concatenate(&qs.iter().map(|q| f(q)).collect::<Vec<_>>(), 0)
    };
    Ok(Quantized {
        weight: cat(&|q| &q.weight)?,
        scales: cat(&|q| &q.scales)?,
        biases: match qs[0].biases {
            Some(_) => Some(cat(&|q| q.biases.as_ref().expect("checked by fuse"))?),
            None => None,
        },
    })
}

/// `x @ dequantize(W)^T`, by rmx's GEMV kernel, a dense GEMM on the dequantized weight for long
/// prefills, or MLX's quantized matmul — see fastpath/gemv.rs for when each runs.
fn quant_product(x: &Array, q: &Quantized, spec: QuantSpec) -> Result<Array> {
    if let Some(y) = fastpath::qgemv(x, q, spec, Epilogue::Plain, None)? {
        return Ok(y);
    }
    if let Some(y) = dequant_prefill_product(x, q, spec, None)? {
        return Ok(y);
    }
    Ok(quant::quantized_matmul(x, q, spec, true)?)
}

/// `x @ dequantize(W)^T`, plus `res` inside the same cuBLAS call, when a long prefill should
/// dequantize (fastpath::dequant_prefill); `None` otherwise.
fn dequant_prefill_product(
    x: &Array,
    q: &Quantized,
    spec: QuantSpec,
    res: Option<&Array>,
) -> Result<Option<Array>> {
    if !fastpath::dequant_prefill(x, q.weight.dim(0)) {
        return Ok(None);
    }
    let w_t = quant::dequantize(q, spec, None)?.transpose(&[])?;
    Ok(Some(match res {
        Some(r) => addmm(r, x, &w_t, 1.0, 1.0)?,
        None => x.matmul(&w_t)?,
    }))
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
                if let (QuantMode::Affine, Some(b)) = (spec.mode, &q.biases) {
                    let fused = fastpath::embed_rows(
                        ids,
                        &q.weight,
                        &q.scales,
                        b,
                        spec.bits,
                        spec.group_size,
                    )?;
                    if let Some(y) = fused {
                        return Ok(y);
                    }
                }
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
            Embedding::Quant { q, spec } => quant_product(x, q, *spec)?,
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

    /// The weight (with Gemma's 1 already added) and epsilon, for fused kernels.
    pub fn parts(&self) -> (&Array, f32) {
        (&self.weight, self.eps)
    }
}

/// `x * sigmoid(x)`.
/// mlx.nn's `LayerNorm` with its weight and bias (`{path}.weight`, `{path}.bias`).
pub struct LayerNorm {
    weight: Array,
    bias: Array,
    eps: f32,
}

impl LayerNorm {
    pub fn load(w: &mut Weights, path: &str, dim: i32, eps: f32) -> Result<LayerNorm> {
        Ok(LayerNorm {
            weight: w.take(&format!("{path}.weight"), &[dim])?,
            bias: w.take(&format!("{path}.bias"), &[dim])?,
            eps,
        })
    }

    pub fn forward(&self, x: &Array) -> Result<Array> {
        Ok(fast::layer_norm(
            x,
            Some(&self.weight),
            Some(&self.bias),
            self.eps,
        )?)
    }
}

pub fn silu(x: &Array) -> Result<Array> {
    Ok(x.multiply(&x.sigmoid()?)?)
}

/// `silu(gate) * up` (one kernel on the CUDA fast path).
pub fn swiglu(gate: &Array, up: &Array) -> Result<Array> {
    if let Some(y) = fastpath::swiglu(gate, Some(up))? {
        return Ok(y);
    }
    Ok(silu(gate)?.multiply(up)?)
}

/// mlx.nn's `gelu` (exact): `x * (1 + erf(x / sqrt(2))) / 2`, its operations in its order.
pub fn gelu(x: &Array) -> Result<Array> {
    let e = x
        .divide_scalar(std::f64::consts::SQRT_2)?
        .erf()?
        .add_scalar(1.0)?;
    Ok(x.multiply(&e)?.divide_scalar(2.0)?)
}

/// mlx.nn's `gelu_approx`: `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`.
pub fn gelu_approx(x: &Array) -> Result<Array> {
    let inner = x
        .add(&x.power_scalar(3.0)?.multiply_scalar(0.044715)?)?
        .multiply_scalar((2.0 / std::f64::consts::PI).sqrt())?;
    let t = inner.tanh()?.add_scalar(1.0)?;
    Ok(x.multiply_scalar(0.5)?.multiply(&t)?)
}
