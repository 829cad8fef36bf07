//! The quantized full-attention cache (mlx-lm's `QuantizedKVCache`): keys and values stored as
//! MLX's affine quantization along the head axis (packed `u32` words, a scale and a bias per
//! group), grown by whole steps as the plain cache is, and read by attention through
//! `quantized_matmul` without being dequantized (attention.rs `quantized_sdpa`).
//!
//! Only full-attention caches are quantized: mlx-lm's `RotatingKVCache.to_quantized` raises
//! "NYI" and recurrent states have no `to_quantized`, so sliding windows and recurrent layers
//! stay as they are ([`quantize_caches`] passes them by).

use rmx_mlx::quant::{quantize, QuantSpec, Quantized};
use rmx_mlx::{concatenate, Array, Dtype};

use crate::error::{ModelError, Result};

use super::buffer::{seq_slice, write_at, STEP};
use super::mask::AttnMask;
use super::{KvCache, LayerCache};

/// How a request's KV cache is quantized: mlx-lm's `kv_bits`, `kv_group_size` and
/// `quantized_kv_start`. Serialized only between the ranks of a group (mirror.rs), after the
/// lead has checked it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KvQuant {
    pub bits: i32,
    pub group_size: i32,
    /// A layer's cache is quantized after the first forward that leaves it holding at least
    /// this many positions (mlx-lm's `maybe_quantize_kv_cache`, run after every model call).
    pub start: i32,
}

impl KvQuant {
    pub const BITS: [i32; 2] = [4, 8];
    pub const GROUP_SIZES: [i32; 3] = [32, 64, 128];
    pub const DEFAULT_GROUP_SIZE: i32 = 64;

    /// Checked settings: bits 4 or 8, group size 32, 64 or 128 (what mlx-lm's CLI offers and
    /// MLX's affine kernels take), a start of 0 or more.
    pub fn new(bits: i32, group_size: i32, start: i32) -> Result<KvQuant> {
        if !Self::BITS.contains(&bits) {
            return Err(ModelError::KvQuant(format!(
                "kv bits must be 4 or 8, not {bits}"
            )));
        }
        if !Self::GROUP_SIZES.contains(&group_size) {
            return Err(ModelError::KvQuant(format!(
                "kv group size must be 32, 64 or 128, not {group_size}"
            )));
        }
        if start < 0 {
            return Err(ModelError::KvQuant(format!(
                "kv quantization start must be 0 or more, not {start}"
            )));
        }
        Ok(KvQuant {
            bits,
            group_size,
            start,
        })
    }

    /// MLX quantizes along the last axis in whole groups: a head size the group size does not
    /// divide cannot be stored (mlx-lm fails there too, with MLX's own message).
    fn check_heads(&self, a: &Array) -> Result<()> {
        let d = a.dim(-1);
        if !Self::GROUP_SIZES.iter().any(|g| d % g == 0) {
            return Err(ModelError::KvQuant(format!(
                "this model's attention heads have {d} dimensions, which no kv group size \
                 (32, 64, 128) divides; run it without --kv-bits"
            )));
        }
        if d % self.group_size != 0 {
            return Err(ModelError::KvQuant(format!(
                "this model's attention heads have {d} dimensions, which kv group size {} \
                 does not divide; pick a --kv-group-size of 32, 64 or 128 that does",
                self.group_size
            )));
        }
        Ok(())
    }

    pub fn spec(&self) -> QuantSpec {
        QuantSpec::affine(self.group_size, self.bits)
    }

    /// Bytes one stored element takes, over the plain cache's `dtype_bytes`: `bits / 8` for the
    /// packed value, plus a scale and a bias in the model's dtype per `group_size` elements.
    pub fn ratio(&self, dtype_bytes: usize) -> f64 {
        let per_element =
            self.bits as f64 / 8.0 + 2.0 * dtype_bytes as f64 / self.group_size as f64;
        per_element / dtype_bytes as f64
    }
}

pub struct QuantizedKvCache {
    pub(crate) keys: Option<Quantized>,
    pub(crate) values: Option<Quantized>,
    pub offset: i32,
    pub(crate) quant: KvQuant,
}

/// A quantized array's parts, in mlx-lm's tuple order.
fn parts(q: &Quantized) -> Vec<&Array> {
    std::iter::once(&q.weight)
        .chain(std::iter::once(&q.scales))
        .chain(q.biases.iter())
        .collect()
}

fn map(q: &Quantized, f: impl Fn(&Array) -> Result<Array>) -> Result<Quantized> {
    Ok(Quantized {
        weight: f(&q.weight)?,
        scales: f(&q.scales)?,
        biases: q.biases.as_ref().map(f).transpose()?,
    })
}

impl QuantizedKvCache {
    pub fn new(quant: KvQuant) -> QuantizedKvCache {
        QuantizedKvCache {
            keys: None,
            values: None,
            offset: 0,
            quant,
        }
    }

    /// mlx-lm's `KVCache.to_quantized`: the whole buffers quantized (zeroed tail included),
    /// the capacity and offset kept.
    pub fn from_full(c: &KvCache, quant: KvQuant) -> Result<QuantizedKvCache> {
        let q = |a: &Option<Array>| -> Result<Option<Quantized>> {
            Ok(match a {
                Some(a) => {
                    quant.check_heads(a)?;
                    Some(quantize(a, quant.spec())?)
                }
                None => None,
            })
        };
        Ok(QuantizedKvCache {
            keys: q(&c.keys)?,
            values: q(&c.values)?,
            offset: c.offset,
            quant,
        })
    }

    pub fn quant(&self) -> KvQuant {
        self.quant
    }

    pub fn capacity(&self) -> i32 {
        self.keys.as_ref().map_or(0, |k| k.weight.dim(2))
    }

    /// The bytes a plain cache of the same positions (and capacity) would take: each packed
    /// `u32` word holds `32 / bits` elements, stored plain in the scales' dtype (the model's).
    pub fn plain_nbytes(&self) -> usize {
        let per_word = (32 / self.quant.bits) as usize;
        self.keys
            .iter()
            .chain(self.values.iter())
            .map(|q| q.weight.size() * per_word * q.scales.dtype().size())
            .sum()
    }

    /// Quantizes `k` and `v` (`[B, kv_heads, n, dim]`), stores them after what is held, and
    /// returns every position's keys and values, quantized.
    pub fn update_and_fetch(&mut self, k: &Array, v: &Array) -> Result<(Quantized, Quantized)> {
        self.quant.check_heads(k)?;
        self.quant.check_heads(v)?;
        let spec = self.quant.spec();
        let kq = quantize(k, spec)?;
        let vq = quantize(v, spec)?;
        self.append(&kq, &vq, k.dtype())
    }

    /// Stores already-quantized positions: mlx-lm's `update_and_fetch` after its `quantize`.
    fn append(
        &mut self,
        kq: &Quantized,
        vq: &Quantized,
        dtype: Dtype,
    ) -> Result<(Quantized, Quantized)> {
        let prev = self.offset;
        let n = kq.weight.dim(2);
        if self.keys.is_none() || prev + n > self.capacity() {
            let new_steps = (STEP + n - 1) / STEP * STEP;
            let s = kq.weight.shape();
            let (b, heads) = (s[0], s[1]);
            let zeros = |last: i32, dt: Dtype| Array::zeros(&[b, heads, new_steps, last], dt);
            let fresh = |like: &Quantized| -> Result<Quantized> {
                Ok(Quantized {
                    weight: zeros(like.weight.dim(3), Dtype::U32)?,
                    scales: zeros(like.scales.dim(3), dtype)?,
                    biases: match &like.biases {
                        Some(b) => Some(zeros(b.dim(3), dtype)?),
                        None => None,
                    },
                })
            };
            let grow = |x: &Array| -> Result<Array> {
                let x = if prev % STEP != 0 {
                    seq_slice(x, 0, prev)?
                } else {
                    x.clone()
                };
                let tail = zeros(x.dim(3), x.dtype())?;
                Ok(concatenate(&[&x, &tail], 2)?)
            };
            let (keys, values) = match (self.keys.take(), self.values.take()) {
                (Some(k), Some(v)) => (map(&k, grow)?, map(&v, grow)?),
                _ => (fresh(kq)?, fresh(vq)?),
            };
            self.keys = Some(keys);
            self.values = Some(values);
        }
        self.offset += n;
        let write = |dst: &Quantized, src: &Quantized| -> Result<Quantized> {
            Ok(Quantized {
                weight: write_at(&dst.weight, &src.weight, prev)?,
                scales: write_at(&dst.scales, &src.scales, prev)?,
                biases: match (&dst.biases, &src.biases) {
                    (Some(d), Some(s)) => Some(write_at(d, s, prev)?),
                    _ => None,
                },
            })
        };
        let (Some(keys), Some(values)) = (self.keys.take(), self.values.take()) else {
            unreachable!("allocated above")
        };
        self.keys = Some(write(&keys, kq)?);
        self.values = Some(write(&values, vq)?);
        self.keys_and_values()
    }

    /// Every held position's keys and values (the buffers cut at the offset).
    fn keys_and_values(&self) -> Result<(Quantized, Quantized)> {
        let (Some(k), Some(v)) = (&self.keys, &self.values) else {
            unreachable!("keys_and_values on an empty cache")
        };
        let cut = |x: &Array| -> Result<Array> {
            if self.offset == x.dim(2) {
                Ok(x.clone())
            } else {
                seq_slice(x, 0, self.offset)
            }
        };
        Ok((map(k, cut)?, map(v, cut)?))
    }

    /// The plain cache's mask: "causal" for several queries, none for one.
    pub fn mask(&self, n: i32) -> AttnMask {
        if n == 1 {
            AttnMask::None
        } else {
            AttnMask::Causal
        }
    }

    pub fn state(&self) -> Vec<&Array> {
        self.keys
            .iter()
            .chain(self.values.iter())
            .flat_map(parts)
            .collect()
    }

    pub(crate) fn keys_mut(&mut self) -> Option<&mut Array> {
        self.keys.as_mut().map(|k| &mut k.weight)
    }

    /// A copy with buffers of its own (see `LayerCache::snapshot`).
    pub fn snapshot(&self) -> Result<QuantizedKvCache> {
        let copy = |q: &Option<Quantized>| -> Result<Option<Quantized>> {
            q.as_ref().map(|q| map(q, |a| Ok(a.owned()?))).transpose()
        };
        Ok(QuantizedKvCache {
            keys: copy(&self.keys)?,
            values: copy(&self.values)?,
            offset: self.offset,
            quant: self.quant,
        })
    }

    /// A cache of the first `len` positions, stored as a first chunk of that many would be:
    /// quantization groups run along the head axis, so each position's stored words do not
    /// depend on the others.
    pub fn truncated(&self, len: i32) -> Result<Option<QuantizedKvCache>> {
        let (Some(k), Some(v)) = (&self.keys, &self.values) else {
            return Ok(None);
        };
        if len <= 0 || len > self.offset {
            return Ok(None);
        }
        let cut = |x: &Array| seq_slice(x, 0, len);
        let mut out = QuantizedKvCache::new(self.quant);
        out.append(&map(k, cut)?, &map(v, cut)?, k.scales.dtype())?;
        Ok(Some(out))
    }
}

/// mlx-lm's `maybe_quantize_kv_cache`, run after each forward: every full-attention cache that
/// holds at least `q.start` positions becomes a quantized one. Sliding windows, recurrent
/// states and batches are left as they are (mlx-lm quantizes only `KVCache`; batches of
/// quantized caches are not formed, see `batch_cache::batches`).
pub fn quantize_caches(cache: &mut [LayerCache], q: &KvQuant) -> Result<()> {
    for c in cache.iter_mut() {
        if let LayerCache::Full(kv) = c {
            if kv.offset >= q.start {
                *c = LayerCache::Quantized(QuantizedKvCache::from_full(kv, *q)?);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: i32, dim: i32, dtype: Dtype) -> Array {
        let data: Vec<f32> = (0..2 * n * dim).map(|i| (i as f32 * 0.013).sin()).collect();
        Array::from_slice(&data, &[1, 2, n, dim])
            .unwrap()
            .astype(dtype)
            .unwrap()
    }

    #[test]
    fn settings_out_of_range_are_refused_with_what_is_allowed() {
        for (bits, group, start) in [
            (3, 64, 0),
            (16, 64, 0),
            (8, 16, 0),
            (4, 256, 0),
            (8, 64, -1),
        ] {
            let e = KvQuant::new(bits, group, start).unwrap_err().to_string();
            assert!(
                e.contains("4 or 8") || e.contains("32, 64 or 128") || e.contains("0 or more"),
                "{e}"
            );
        }
        assert!(KvQuant::new(4, 32, 7).is_ok());
        // Heads of 48 (the tiny Llama's) are no whole number of groups of 32 (or 64, 128).
        let k = rows(3, 48, Dtype::F32);
        let mut c = QuantizedKvCache::new(KvQuant::new(8, 32, 0).unwrap());
        let Err(e) = c.update_and_fetch(&k, &k) else {
            panic!("heads of 48 stored in groups of 32")
        };
        let e = e.to_string();
        assert!(
            e.contains("48 dimensions") && e.contains("without --kv-bits"),
            "{e}"
        );
        // Heads of 32 take groups of 32, not 64.
        let k = rows(3, 32, Dtype::F32);
        let mut c = QuantizedKvCache::new(KvQuant::new(8, 64, 0).unwrap());
        let Err(e) = c.update_and_fetch(&k, &k) else {
            panic!("heads of 32 stored in groups of 64")
        };
        let e = e.to_string();
        assert!(
            e.contains("32 dimensions") && e.contains("--kv-group-size"),
            "{e}"
        );
    }

    /// Bytes per cached position against the plain cache's, measured on the arrays held, equal
    /// the ratio the format gives: `bits / 8` per element plus a scale and a bias of the
    /// model's dtype per group.
    #[test]
    fn memory_per_position_drops_by_the_formats_ratio() {
        for dtype in [Dtype::F32, Dtype::Bf16] {
            for (bits, group) in [(8, 64), (4, 64), (4, 32), (8, 128)] {
                let q = KvQuant::new(bits, group, 0).unwrap();
                // 300 positions: both caches hold two steps of 256.
                let k = rows(300, 128, dtype);
                let mut plain = LayerCache::Full(KvCache::default());
                plain.update_and_fetch(&k, &k).unwrap();
                let mut quant = LayerCache::Quantized(QuantizedKvCache::new(q));
                let LayerCache::Quantized(qc) = &mut quant else {
                    unreachable!()
                };
                qc.update_and_fetch(&k, &k).unwrap();
                assert_eq!(qc.capacity(), 512);
                assert_eq!(qc.plain_nbytes(), plain.nbytes());
                let ratio = quant.nbytes() as f64 / plain.nbytes() as f64;
                let want = q.ratio(dtype.size());
                assert!(
                    (ratio - want).abs() < 1e-12,
                    "{dtype:?} {bits}/{group}: {ratio} vs {want}"
                );
            }
        }
        // bf16, 8-bit, groups of 64: 1 + 4/64 bytes per element where 2 were.
        assert_eq!(KvQuant::new(8, 64, 0).unwrap().ratio(2), 0.53125);
    }

    /// A cache grown chunk by chunk holds what one quantize of all positions gives (groups run
    /// along the head axis), and its growth keeps earlier positions.
    #[test]
    fn chunks_and_decode_steps_store_what_quantizing_everything_at_once_stores() {
        let q = KvQuant::new(4, 32, 0).unwrap();
        let all = rows(260, 64, Dtype::F32);
        let mut c = QuantizedKvCache::new(q);
        c.update_and_fetch(
            &all.slice_axis(2, 0, 250).unwrap(),
            &all.slice_axis(2, 0, 250).unwrap(),
        )
        .unwrap();
        let mut last = None;
        for p in 250..260 {
            let one = all.slice_axis(2, p, p + 1).unwrap();
            last = Some(c.update_and_fetch(&one, &one).unwrap());
        }
        let (k, _) = last.unwrap();
        assert_eq!((c.offset, c.capacity()), (260, 512));
        let want = quantize(&all, q.spec()).unwrap();
        assert_eq!(
            k.weight.to_vec::<u32>().unwrap(),
            want.weight.to_vec::<u32>().unwrap()
        );
        assert_eq!(
            k.scales.to_vec::<f32>().unwrap(),
            want.scales.to_vec::<f32>().unwrap()
        );
        let cut = c.truncated(100).unwrap().unwrap();
        assert_eq!((cut.offset, cut.capacity()), (100, 256));
        let head = quantize(&all.slice_axis(2, 0, 100).unwrap(), q.spec()).unwrap();
        let kept = cut
            .keys
            .as_ref()
            .unwrap()
            .weight
            .slice_axis(2, 0, 100)
            .unwrap();
        assert_eq!(
            kept.to_vec::<u32>().unwrap(),
            head.weight.to_vec::<u32>().unwrap()
        );
    }

    /// mlx-lm's `maybe_quantize_kv_cache`: full caches that reached the start convert, keeping
    /// offset and capacity; windows and shorter caches stay.
    #[test]
    fn caches_convert_once_they_reach_the_start() {
        let q = KvQuant::new(8, 64, 10).unwrap();
        let k = rows(12, 64, Dtype::F32);
        let mut short = KvCache::default();
        short
            .update_and_fetch(
                &k.slice_axis(2, 0, 9).unwrap(),
                &k.slice_axis(2, 0, 9).unwrap(),
            )
            .unwrap();
        let mut long = KvCache::default();
        long.update_and_fetch(&k, &k).unwrap();
        let mut cache = vec![
            LayerCache::Full(short),
            LayerCache::Full(long),
            LayerCache::Rotating(super::super::RotatingKvCache::new(4)),
        ];
        quantize_caches(&mut cache, &q).unwrap();
        assert!(matches!(cache[0], LayerCache::Full(_)));
        let LayerCache::Quantized(c) = &cache[1] else {
            panic!("12 positions reach a start of 10")
        };
        assert_eq!((c.offset, c.capacity()), (12, 256));
        assert!(matches!(cache[2], LayerCache::Rotating(_)));
    }
}
