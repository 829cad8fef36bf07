//! Attention computed by explicit products, as mlx-lm's `quantized_scaled_dot_product_attention`
//! (models/base.py) computes it: queries scaled first, scores by a product with the keys
//! (transposed), the mask applied as `where(mask, scores, finfo.min)` (or added when it is not
//! boolean), a precise softmax, and the values by a product untransposed. Grouped-query heads
//! share a kv head through a broadcast axis, not copies.
//!
//! Two users: a quantized KV cache (the products are `quantized_matmul`, the same ops in the
//! same order as mlx-lm, so the logits match its bit for bit on one backend), and a few queries
//! against a plain cache on CUDA ([`few_query_sdpa`]).

use rmx_mlx::quant::{quantized_matmul, Quantized};
use rmx_mlx::{r#where, Array, Dtype};

use crate::cache::{causal_mask, AttnMask, KvQuant};
use crate::error::{ModelError, Result};

/// The most queries [`few_query_sdpa`] takes: a speculative verify step (up to 16 guesses and
/// the last token) or a short prompt chunk.
pub(crate) const FEW_QUERIES: i32 = 17;

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
    let spec = quant.spec();
    // `x` times the packed `m` (transposed for the keys), with a repeat axis when grouped.
    let product = |x: &Array, m: &Quantized, grouped: bool, transpose: bool| -> Result<Array> {
        let expanded;
        let m = if grouped {
            expanded = expand(m)?;
            &expanded
        } else {
            m
        };
        Ok(quantized_matmul(x, m, spec, transpose)?)
    };
    by_products(
        queries,
        keys.weight.dim(-3),
        scale,
        mask,
        |q, grouped| product(q, keys, grouped, true),
        |p, grouped| product(p, values, grouped, false),
    )
}

/// `queries` `[B, heads, L, D]` (L up to [`FEW_QUERIES`]) against plain keys and values
/// `[B, kv_heads, T, D]`: `[B, heads, L, D]`. On CUDA, MLX builds its fused attention for
/// more than one query anew for every key length it meets (an H100: ~50 ms a new length, 1 ms
/// a known one; scripts/bench/shape_churn.py), and a speculative verify step or a short prompt
/// chunk meets a new length every time; these products take any length at no such cost.
pub(crate) fn few_query_sdpa(
    queries: &Array,
    keys: &Array,
    values: &Array,
    scale: f32,
    mask: &AttnMask,
) -> Result<Array> {
    let grouped_dims = |a: &Array, grouped: bool| {
        if grouped {
            a.expand_dims(&[-3])
        } else {
            Ok(a.clone())
        }
    };
    by_products(
        queries,
        keys.dim(-3),
        scale,
        mask,
        |q, grouped| Ok(q.matmul(&grouped_dims(keys, grouped)?.swapaxes(-1, -2)?)?),
        |p, grouped| Ok(p.matmul(&grouped_dims(values, grouped)?)?),
    )
}

/// The attention of both forms; `scores_of(q, grouped)` and `values_of(p, grouped)` are the
/// two products, `grouped` when the queries carry a kv-head axis and a repeat axis.
fn by_products(
    queries: &Array,
    kv_heads: i32,
    scale: f32,
    mask: &AttnMask,
    scores_of: impl FnOnce(&Array, bool) -> Result<Array>,
    values_of: impl FnOnce(&Array, bool) -> Result<Array>,
) -> Result<Array> {
    let s = queries.shape();
    let (b, heads, l, d) = (s[0], s[1], s[2], s[3]);
    let repeats = heads / kv_heads;
    let grouped = repeats > 1;
    let mut q = queries.multiply_scalar(scale as f64)?;
    if grouped {
        q = q.reshape(&[b, kv_heads, repeats, l, d])?;
    }
    let mut scores = scores_of(&q, grouped)?;
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
        let m = if grouped && m.ndim() > 3 {
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
    let out = values_of(&scores, grouped)?;
    Ok(if grouped {
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

    /// Against MLX's fused attention: the same numbers up to the order of float sums, for
    /// grouped and plain heads, a causal mask over a longer cache, a boolean mask and none.
    #[test]
    fn few_queries_attend_as_the_fused_kernel_does() -> Result<()> {
        let fill =
            |n: i32, k: f32| -> Vec<f32> { (0..n).map(|i| (i as f32 * k).sin() * 0.7).collect() };
        for (heads, kv_heads, l, t) in [(4, 2, 3, 11), (4, 4, 7, 7), (8, 2, 17, 40), (2, 1, 2, 5)] {
            let d = 32;
            let q = Array::from_slice(&fill(heads * l * d, 0.37), &[1, heads, l, d])?;
            let k = Array::from_slice(&fill(kv_heads * t * d, 0.11), &[1, kv_heads, t, d])?;
            let v = Array::from_slice(&fill(kv_heads * t * d, 0.23), &[1, kv_heads, t, d])?;
            let window = causal_mask(l, t - l, Some(4))?;
            for mask in [AttnMask::Causal, AttnMask::Array(window), AttnMask::None] {
                let got = few_query_sdpa(&q, &k, &v, 0.3, &mask)?.to_vec::<f32>()?;
                let want = rmx_mlx::fast::scaled_dot_product_attention(
                    &q,
                    &k,
                    &v,
                    0.3,
                    mask.as_fast(),
                    None,
                )?
                .to_vec::<f32>()?;
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() < 1e-5,
                        "{heads}/{kv_heads} {l}x{t}: {g} vs {w}"
                    );
                }
            }
        }
        Ok(())
    }
}
