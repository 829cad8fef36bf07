//! Attention computed by explicit products, as mlx-lm's `quantized_scaled_dot_product_attention`
//! (models/base.py) computes it: queries scaled first, scores by a product with the keys
//! (transposed), the mask applied as `where(mask, scores, finfo.min)` (or added when it is not
//! boolean), a precise softmax, and the values by a product untransposed. Grouped-query heads
//! share a kv head through a broadcast axis, not copies.
//!
//! Two users: a quantized KV cache (the products are `quantized_matmul`, the same ops in the
//! same order as mlx-lm, so the logits match its bit for bit on one backend), and a plain cache
//! on CUDA ([`product_sdpa`]): a few queries, or any number of them beside attention sinks. With
//! sinks the softmax gets each head's sink logit as a first column, dropped after, as MLX's own
//! fallback for `scaled_dot_product_attention` does.

use rmx_mlx::quant::{quantized_matmul, Quantized};
use rmx_mlx::{concatenate, r#where, Array, Dtype};

use crate::cache::{causal_mask, AttnMask, KvQuant};
use crate::error::{ModelError, Result};

/// The most queries [`product_sdpa`] takes without sinks: a speculative verify step (up to 16
/// guesses and the last token) or a short prompt chunk.
pub(crate) const FEW_QUERIES: i32 = 17;

/// Scores one product may hold (heads x queries x keys): past it the queries go in blocks, so a
/// long prompt with sinks never holds its whole score matrix (2^27 bf16 scores: 256 MB, and the
/// precise softmax's float32 copy twice that).
const SCORES_MAX: i64 = 1 << 27;

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
        None,
    )
}

/// `queries` `[B, heads, L, D]` against plain keys and values `[B, kv_heads, T, D]`, with
/// each head's sink logit where the model has them (`sinks`, `[heads]`): `[B, heads, L, D]`.
/// On CUDA, MLX builds its fused attention for more than one query anew for every shape it
/// meets: ~50 ms a new key length for Llama-3-8B (an H100, scripts/bench/shape_churn.py), and
/// with GPT-OSS's sinks and window masks a first request of a new prompt length sat 60-100 s
/// in host work (an H200, session 31). A speculative verify step or a prompt after a cached
/// prefix meets a new shape every time; these products take any shape at no such cost.
pub(crate) fn product_sdpa(
    queries: &Array,
    keys: &Array,
    values: &Array,
    scale: f32,
    mask: &AttnMask,
    sinks: Option<&Array>,
) -> Result<Array> {
    product_sdpa_blocks(queries, keys, values, scale, mask, sinks, SCORES_MAX)
}

/// [`product_sdpa`] with the queries in blocks of at most `max_scores` scores each.
fn product_sdpa_blocks(
    queries: &Array,
    keys: &Array,
    values: &Array,
    scale: f32,
    mask: &AttnMask,
    sinks: Option<&Array>,
    max_scores: i64,
) -> Result<Array> {
    let (heads, l, t) = (queries.dim(1), queries.dim(2), keys.dim(-2));
    let per_query = i64::from(heads) * i64::from(t) * i64::from(queries.dim(0));
    let block = (max_scores / per_query.max(1)).clamp(1, i64::from(l)) as i32;
    if block >= l {
        return plain_products(queries, keys, values, scale, mask, sinks);
    }
    // The mask whole (causal: the last l of t positions), then each block's rows of it.
    let whole = match mask {
        AttnMask::Causal => AttnMask::Array(causal_mask(l, t - l, None)?),
        m => m.clone(),
    };
    let mut outs = Vec::new();
    for a in (0..l).step_by(block as usize) {
        let b = (a + block).min(l);
        let q = queries.slice_axis(2, a, b)?;
        let rows = match &whole {
            AttnMask::None => AttnMask::None,
            AttnMask::Array(m) if m.ndim() >= 2 && m.dim(-2) == l => {
                AttnMask::Array(m.slice_axis(-2, a, b)?)
            }
            other => other.clone(),
        };
        outs.push(plain_products(&q, keys, values, scale, &rows, sinks)?);
    }
    Ok(concatenate(&outs.iter().collect::<Vec<_>>(), 2)?)
}

fn plain_products(
    queries: &Array,
    keys: &Array,
    values: &Array,
    scale: f32,
    mask: &AttnMask,
    sinks: Option<&Array>,
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
        sinks,
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
    sinks: Option<&Array>,
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
    if let Some(sinks) = sinks {
        // [heads] -> [1, heads, 1, 1] (or [1, kv_heads, repeats, 1, 1]), in the scores' type.
        let sinks = sinks.astype(scores.dtype())?;
        let sinks = match grouped {
            true => sinks.reshape(&[1, kv_heads, repeats, 1, 1])?,
            false => sinks.reshape(&[1, heads, 1, 1])?,
        };
        let mut column = scores.shape();
        *column.last_mut().expect("scores have axes") = 1;
        scores = concatenate(&[&sinks.broadcast_to(&column)?, &scores], -1)?;
    }
    let mut scores = scores.softmax(&[-1], true)?;
    if sinks.is_some() {
        scores = scores.slice_axis(-1, 1, scores.dim(-1))?;
    }
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
    /// grouped and plain heads, a causal mask over a longer cache, a boolean mask and none, with
    /// and without sinks, whole and with the queries in blocks (a small score budget).
    #[test]
    fn products_attend_as_the_fused_kernel_does() -> Result<()> {
        let fill =
            |n: i32, k: f32| -> Vec<f32> { (0..n).map(|i| (i as f32 * k).sin() * 0.7).collect() };
        for (heads, kv_heads, l, t) in [(4, 2, 3, 11), (4, 4, 7, 7), (8, 2, 17, 40), (2, 1, 2, 5)] {
            let d = 32;
            let q = Array::from_slice(&fill(heads * l * d, 0.37), &[1, heads, l, d])?;
            let k = Array::from_slice(&fill(kv_heads * t * d, 0.11), &[1, kv_heads, t, d])?;
            let v = Array::from_slice(&fill(kv_heads * t * d, 0.23), &[1, kv_heads, t, d])?;
            let sinks = Array::from_slice(&fill(heads, 1.3), &[heads])?;
            let window = causal_mask(l, t - l, Some(4))?;
            for mask in [AttnMask::Causal, AttnMask::Array(window), AttnMask::None] {
                for sink in [None, Some(&sinks)] {
                    let want = rmx_mlx::fast::scaled_dot_product_attention(
                        &q,
                        &k,
                        &v,
                        0.3,
                        mask.as_fast(),
                        sink,
                    )?
                    .to_vec::<f32>()?;
                    // Whole, then two queries' scores at a time (blocks of 2, the last shorter).
                    for max in [SCORES_MAX, 2 * i64::from(heads * t)] {
                        let got = product_sdpa_blocks(&q, &k, &v, 0.3, &mask, sink, max)?
                            .to_vec::<f32>()?;
                        assert_eq!(got.len(), want.len());
                        for (g, w) in got.iter().zip(&want) {
                            assert!(
                                (g - w).abs() < 1e-5,
                                "{heads}/{kv_heads} {l}x{t} sinks {}: {g} vs {w}",
                                sink.is_some()
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// A sink takes its share of each row's softmax: with a sink far above every score the
    /// output goes to zero, and with one far below it is the attention without sinks.
    #[test]
    fn a_sink_takes_its_share_of_the_softmax() -> Result<()> {
        let (heads, l, t, d) = (2, 3, 5, 8);
        let fill = |n: i32, k: f32| -> Vec<f32> { (0..n).map(|i| (i as f32 * k).cos()).collect() };
        let q = Array::from_slice(&fill(heads * l * d, 0.3), &[1, heads, l, d])?;
        let kv = Array::from_slice(&fill(heads * t * d, 0.7), &[1, heads, t, d])?;
        let plain = product_sdpa(&q, &kv, &kv, 0.5, &AttnMask::Causal, None)?.to_vec::<f32>()?;
        let low = Array::from_slice(&[-60.0f32, -60.0], &[heads])?;
        let high = Array::from_slice(&[60.0f32, 60.0], &[heads])?;
        let with_low =
            product_sdpa(&q, &kv, &kv, 0.5, &AttnMask::Causal, Some(&low))?.to_vec::<f32>()?;
        let with_high =
            product_sdpa(&q, &kv, &kv, 0.5, &AttnMask::Causal, Some(&high))?.to_vec::<f32>()?;
        for ((p, lo), hi) in plain.iter().zip(&with_low).zip(&with_high) {
            assert!((p - lo).abs() < 1e-6, "{p} vs {lo}");
            assert!(hi.abs() < 1e-6, "{hi}");
        }
        Ok(())
    }
}
