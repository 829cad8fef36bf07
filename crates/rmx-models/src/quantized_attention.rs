//! Attention over a quantized KV cache, as mlx-lm's `quantized_scaled_dot_product_attention`
//! (models/base.py) computes it: queries scaled first, scores by `quantized_matmul` against the
//! packed keys (transposed), the mask applied as `where(mask, scores, finfo.min)` (or added when
//! it is not boolean), a precise softmax, and the values by `quantized_matmul` untransposed.
//! Grouped-query heads share a kv head through a broadcast axis, not copies. The same ops in
//! the same order, so the logits match mlx-lm's bit for bit on one backend.

use rmx_mlx::quant::{quantized_matmul, Quantized};
use rmx_mlx::{r#where, Array, Dtype};

use crate::cache::{causal_mask, AttnMask, KvQuant};
use crate::error::{ModelError, Result};

/// `mx.finfo(dtype).min`, the score a masked position gets.
fn finfo_min(dtype: Dtype) -> Result<f64> {
    Ok(match dtype {
        Dtype::F32 => f32::MIN as f64,
        Dtype::F16 => -65504.0,
        // bfloat16's largest finite value: (2 - 2^-7) * 2^127.
        Dtype::Bf16 => -3.3895313892515355e38,
        Dtype::F64 => f64::MIN,
        d => {
            return Err(ModelError::KvQuant(format!(
                "attention scores in {d:?} have no float minimum"
            )))
        }
    })
}

fn expand(q: &Quantized) -> Result<Quantized> {
    let e = |a: &Array| a.expand_dims(&[-3]);
    Ok(Quantized {
        weight: e(&q.weight)?,
        scales: e(&q.scales)?,
        biases: q.biases.as_ref().map(e).transpose()?,
    })
}

/// `queries` `[B, heads, L, D]` against every cached position's keys and values (quantized
/// `[B, kv_heads, T, ·]`): `[B, heads, L, D]`.
pub(crate) fn quantized_sdpa(
    queries: &Array,
    keys: &Quantized,
    values: &Quantized,
    scale: f32,
    mask: &AttnMask,
    quant: &KvQuant,
) -> Result<Array> {
    let s = queries.shape();
    let (b, heads, l, d) = (s[0], s[1], s[2], s[3]);
    let kv_heads = keys.weight.dim(-3);
    let repeats = heads / kv_heads;
    let mut q = queries.multiply_scalar(scale as f64)?;
    let grouped;
    let (keys, values) = if repeats > 1 {
        q = q.reshape(&[b, kv_heads, repeats, l, d])?;
        grouped = (expand(keys)?, expand(values)?);
        (&grouped.0, &grouped.1)
    } else {
        (keys, values)
    };
    let spec = quant.spec();
    let mut scores = quantized_matmul(&q, keys, spec, true)?;
    let made;
    let mask = match mask {
        AttnMask::None => None,
        AttnMask::Causal => {
            // mlx-lm turns "causal" into `arange(kL - qL, kL)[:, None] >= arange(kL)`: the last
            // qL of kL positions, which is `causal_mask` at offset kL - qL.
            let (ql, kl) = (scores.dim(-2), scores.dim(-1));
            made = causal_mask(ql, kl - ql, None)?;
            Some(&made)
        }
        AttnMask::Array(m) => Some(m),
    };
    if let Some(m) = mask {
        let expanded;
        let m = if repeats > 1 && m.ndim() > 3 {
            expanded = m.expand_dims(&[-3])?;
            &expanded
        } else {
            m
        };
        scores = if m.dtype() == Dtype::Bool {
            let min = Array::scalar_as(finfo_min(scores.dtype())?, scores.dtype())?;
            r#where(m, &scores, &min)?
        } else {
            scores.add(m)?
        };
    }
    let scores = scores.softmax(&[-1], true)?;
    let out = quantized_matmul(&scores, values, spec, false)?;
    Ok(if repeats > 1 {
        out.reshape(&[b, heads, l, d])?
    } else {
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::QuantizedKvCache;
    use rmx_mlx::quant::dequantize;

    /// Against dequantized keys and values through plain ops: the same attention, up to the
    /// order of float sums.
    #[test]
    fn grouped_heads_attend_to_their_own_dequantized_keys() -> Result<()> {
        let (heads, kv_heads, l, d) = (4, 2, 3, 64);
        let fill =
            |n: usize, k: f32| -> Vec<f32> { (0..n).map(|i| (i as f32 * k).sin() * 0.5).collect() };
        let q = Array::from_slice(&fill((heads * l * d) as usize, 0.37), &[1, heads, l, d])?;
        let kv = Array::from_slice(
            &fill((kv_heads * l * d) as usize, 0.11),
            &[1, kv_heads, l, d],
        )?;
        let quant = KvQuant::new(8, 64, 0)?;
        let mut cache = QuantizedKvCache::new(quant);
        let (kq, vq) = cache.update_and_fetch(&kv, &kv)?;
        let got = quantized_sdpa(&q, &kq, &vq, 0.125, &AttnMask::Causal, &quant)?;

        let k = dequantize(&kq, quant.spec(), None)?.repeat(heads / kv_heads, 1)?;
        let v = dequantize(&vq, quant.spec(), None)?.repeat(heads / kv_heads, 1)?;
        let scores = q.multiply_scalar(0.125)?.matmul(&k.swapaxes(-1, -2)?)?;
        let keep = causal_mask(l, 0, None)?;
        let scores = r#where(&keep, &scores, &Array::scalar_as(-1e30, Dtype::F32)?)?;
        let want = scores.softmax(&[-1], true)?.matmul(&v)?;
        let (got, want) = (got.to_vec::<f32>()?, want.to_vec::<f32>()?);
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-5, "{g} vs {w}");
        }
        Ok(())
    }
}
