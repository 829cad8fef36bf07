//! Several sequences' full caches as one (mlx-lm's `BatchKVCache` layout): key/value rows
//! left-padded to a common length (row `b` holds its positions in columns `pad[b]..idx`), the
//! mask hiding the padding, and each row's own position for rope. The operations on a whole
//! model's list of caches (merge, keep, row) are in batch_cache.rs.

use rmx_mlx::{concatenate, Array, Dtype};

use super::buffer::{seq_slice, write_at, STEP};
use super::kv::KvCache;
use super::mask::AttnMask;
use crate::error::{ModelError, Result};

pub struct BatchKvCache {
    /// `[B, heads, capacity, dim]`.
    keys: Option<Array>,
    values: Option<Array>,
    /// Columns written (the same for every row).
    idx: i32,
    /// Per row: the columns before its first position.
    pads: Vec<i32>,
    /// Per row, `[B]` int32: the position its next token takes (`idx - pad`), for rope.
    positions: Array,
    /// `pads` as a `[B]` int32 array, for the decode kernel (made when first asked for).
    pads_array: Option<Array>,
}

impl BatchKvCache {
    pub(crate) fn from_solo(c: KvCache) -> Result<BatchKvCache> {
        let (keys, values) = match (c.keys, c.values) {
            (Some(k), Some(v)) => (
                Some(seq_slice(&k, 0, c.offset)?),
                Some(seq_slice(&v, 0, c.offset)?),
            ),
            _ => (None, None),
        };
        Self::with(keys, values, c.offset, vec![0])
    }

    fn with(keys: Option<Array>, values: Option<Array>, idx: i32, pads: Vec<i32>) -> Result<Self> {
        let pos: Vec<i32> = pads.iter().map(|p| idx - p).collect();
        Ok(BatchKvCache {
            keys,
            values,
            idx,
            positions: Array::from_slice(&pos, &[pos.len() as i32])?,
            pads,
            pads_array: None,
        })
    }

    /// An empty batch whose rows' prompts are left-padded by `pads`: prefilled together, row b
    /// reads its tokens from column `pads[b]` on (its first position is 0 there).
    pub fn padded(pads: Vec<i32>) -> Result<BatchKvCache> {
        Self::with(None, None, 0, pads)
    }

    pub fn rows(&self) -> usize {
        self.pads.len()
    }

    /// What a decode slot depends on: (columns written, capacity, rows). Caches alike in it
    /// give their next slots alike.
    pub fn slot_state(&self) -> (i32, i32, usize) {
        let cap = self.keys.as_ref().map_or(0, |k| k.dim(2));
        (self.idx, cap, self.rows())
    }

    /// Per row, the columns before its first position.
    pub fn pads(&self) -> &[i32] {
        &self.pads
    }

    /// Columns written: the longest row's length.
    pub fn offset(&self) -> i32 {
        self.idx
    }

    /// Each row's next position, `[B]` int32.
    pub fn positions(&self) -> &Array {
        &self.positions
    }

    /// Makes room for `n` more columns of `[B, heads, n, dim]` keys and values, growing by
    /// whole steps as `KvCache` does. A grown buffer is a new array that only this cache holds.
    fn reserve(&mut self, n: i32, heads: i32, dim: i32, dtype: Dtype) -> Result<()> {
        let prev = self.idx;
        let cap = self.keys.as_ref().map_or(0, |a| a.dim(2));
        if self.keys.is_none() || prev + n > cap {
            let b = self.rows() as i32;
            let steps = (STEP + n - 1) / STEP;
            let new_k = Array::zeros(&[b, heads, steps * STEP, dim], dtype)?;
            let new_v = Array::zeros(&[b, heads, steps * STEP, dim], dtype)?;
            match (self.keys.take(), self.values.take()) {
                (Some(ok), Some(ov)) => {
                    let ok = seq_slice(&ok, 0, prev)?;
                    let ov = seq_slice(&ov, 0, prev)?;
                    self.keys = Some(concatenate(&[&ok, &new_k], 2)?);
                    self.values = Some(concatenate(&[&ov, &new_v], 2)?);
                }
                _ => {
                    self.keys = Some(new_k);
                    self.values = Some(new_v);
                }
            }
        }
        Ok(())
    }

    /// One decode column for a kernel that writes each row's new key and value itself: the
    /// whole `[B, heads, cap, dim]` buffers (row-contiguous, held by this cache alone: a
    /// buffer made by `reserve`, which a merge, a `keep` or a full buffer always leads to), the
    /// column to write, which now counts as filled, and the rows' padding (`[B]` int32).
    pub fn decode_slot(
        &mut self,
        heads: i32,
        dim: i32,
        dtype: Dtype,
    ) -> Result<(Array, Array, i32, Array)> {
        // After a merge or a keep the buffers are cut to the written columns, so the first
        // slot grows them into whole arrays of their own before a kernel writes into them.
        self.reserve(1, heads, dim, dtype)?;
        let col = self.idx;
        self.idx += 1;
        self.positions = self.positions.add_scalar(1.0)?.astype(Dtype::I32)?;
        let pads = match &self.pads_array {
            Some(p) => p.clone(),
            None => {
                let p = Array::from_slice(&self.pads, &[self.pads.len() as i32])?;
                self.pads_array = Some(p.clone());
                p
            }
        };
        match (&self.keys, &self.values) {
            (Some(k), Some(v)) => Ok((k.clone(), v.clone(), col, pads)),
            _ => unreachable!("allocated above"),
        }
    }

    pub fn update_and_fetch(&mut self, k: &Array, v: &Array) -> Result<(Array, Array)> {
        let prev = self.idx;
        let n = k.dim(2);
        let s = k.shape();
        if s[3] != v.dim(3) {
            return Err(ModelError::Batch(
                "keys and values of different widths".into(),
            ));
        }
        self.reserve(n, s[1], s[3], k.dtype())?;
        let (Some(keys), Some(values)) = (self.keys.take(), self.values.take()) else {
            unreachable!("allocated above")
        };
        let keys = write_at(&keys, k, prev)?;
        let values = write_at(&values, v, prev)?;
        self.idx += n;
        self.positions = self.positions.add_scalar(n as f64)?.astype(Dtype::I32)?;
        let out = (
            seq_slice(&keys, 0, self.idx)?,
            seq_slice(&values, 0, self.idx)?,
        );
        self.keys = Some(keys);
        self.values = Some(values);
        Ok(out)
    }

    /// The mask for `n` new queries per row: causal over the written columns, none of a row's
    /// padding. A padding query sees only itself, so its (unused) row stays finite and no NaN
    /// reaches the real rows through its values. No mask when nothing is padded and one query
    /// each.
    pub fn mask(&self, n: i32) -> Result<AttnMask> {
        if n == 1 && self.pads.iter().all(|p| *p == 0) {
            return Ok(AttnMask::None);
        }
        // Column r is visible to query q of row b when it is q's past (r <= q) and the row's own
        // (r >= pad[b]), or q itself (a padding query sees itself, so no softmax row is empty).
        // Built on the device from three small index arrays: a 32 x 512-token prompt batch's
        // mask is 8M entries, which a host loop would fill and upload on every forward.
        let cols = self.idx + n;
        let b = self.pads.len() as i32;
        let q =
            Array::arange(self.idx as f64, cols as f64, 1.0, Dtype::I32)?.reshape(&[1, 1, n, 1])?;
        let r = Array::arange(0.0, cols as f64, 1.0, Dtype::I32)?.reshape(&[1, 1, 1, cols])?;
        let pads = Array::from_slice(&self.pads, &[b, 1, 1, 1])?;
        let own = r.greater_equal(&pads)?.logical_or(&r.equal(&q)?)?;
        Ok(AttnMask::Array(own.logical_and(&r.less_equal(&q)?)?))
    }

    pub fn state(&self) -> Vec<&Array> {
        self.keys.iter().chain(self.values.iter()).collect()
    }

    /// The keys buffer, for [`super::LayerCache::depend_on`].
    pub(super) fn keys_mut(&mut self) -> &mut Option<Array> {
        &mut self.keys
    }

    /// One batch of all of `parts`' rows, in order: each part left-padded to the longest.
    pub(crate) fn merge(parts: Vec<BatchKvCache>) -> Result<BatchKvCache> {
        let idx = parts.iter().map(|p| p.idx).max().unwrap_or(0);
        let like = parts
            .iter()
            .find_map(|p| p.keys.as_ref().zip(p.values.as_ref()))
            .map(|(k, v)| (k.shape(), v.shape(), k.dtype()));
        let Some((ks, vs, dtype)) = like else {
            return Err(ModelError::Batch("no row has read a token yet".into()));
        };
        let mut keys = Vec::with_capacity(parts.len());
        let mut values = Vec::with_capacity(parts.len());
        let mut pads = Vec::new();
        for p in parts {
            let extra = idx - p.idx;
            let b = p.rows() as i32;
            let pad = |a: Option<Array>, s: &[i32]| -> Result<Array> {
                let zeros = Array::zeros(&[b, s[1], extra, s[3]], dtype)?;
                Ok(match a {
                    Some(a) if extra == 0 => seq_slice(&a, 0, p.idx)?,
                    Some(a) => concatenate(&[&zeros, &seq_slice(&a, 0, p.idx)?], 2)?,
                    None => zeros,
                })
            };
            keys.push(pad(p.keys, &ks)?);
            values.push(pad(p.values, &vs)?);
            pads.extend(p.pads.iter().map(|x| x + extra));
        }
        let cat = |v: &[Array]| concatenate(&v.iter().collect::<Vec<_>>(), 0);
        Self::with(Some(cat(&keys)?), Some(cat(&values)?), idx, pads)
    }

    /// Only `rows`, in that order; padding every row shares is cut off.
    pub(crate) fn keep(&mut self, rows: &[usize]) -> Result<()> {
        let idx = index(rows)?;
        let mut pads: Vec<i32> = rows.iter().map(|&r| self.pads[r]).collect();
        let cut = pads.iter().copied().min().unwrap_or(0);
        let (keys, values) = (self.keys.take(), self.values.take());
        let shrink = |a: Option<Array>| -> Result<Option<Array>> {
            Ok(match a {
                Some(a) => Some(seq_slice(&a.take(&idx, 0)?, cut, self.idx)?),
                None => None,
            })
        };
        let (keys, values) = (shrink(keys)?, shrink(values)?);
        pads.iter_mut().for_each(|p| *p -= cut);
        *self = Self::with(keys, values, self.idx - cut, pads)?;
        Ok(())
    }

    /// Row `r`'s first `len` positions as a solo cache with buffers of its own.
    pub(crate) fn row(&self, r: usize, len: i32) -> Result<Option<KvCache>> {
        let start = self.pads[r];
        let len = len.min(self.idx - start);
        let (Some(k), Some(v)) = (&self.keys, &self.values) else {
            return Ok(None);
        };
        if len <= 0 {
            return Ok(None);
        }
        let one = |a: &Array| {
            seq_slice(
                &a.slice_axis(0, r as i32, r as i32 + 1)?,
                start,
                start + len,
            )
        };
        let mut out = KvCache::default();
        out.update_and_fetch(&one(k)?, &one(v)?)?;
        Ok(Some(out))
    }
}

pub(crate) fn index(rows: &[usize]) -> Result<Array> {
    let r: Vec<i32> = rows.iter().map(|&r| r as i32).collect();
    Ok(Array::from_slice(&r, &[r.len() as i32])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The device-built mask equals the rule written out on the host, for a prompt batch
    /// (offset 0, several queries) and a decode step (one query after earlier columns).
    #[test]
    fn the_mask_hides_each_rows_padding_and_the_future() -> Result<()> {
        for (pads, idx, n) in [
            (vec![0, 3, 5], 0, 6),
            (vec![2, 0], 7, 1),
            (vec![1, 1, 0, 4], 4, 3),
        ] {
            let mut c = BatchKvCache::padded(pads.clone())?;
            c.idx = idx;
            let AttnMask::Array(m) = c.mask(n)? else {
                panic!("a padded batch needs a mask array");
            };
            let cols = idx + n;
            assert_eq!(m.shape(), vec![pads.len() as i32, 1, n, cols]);
            let got = m.to_vec::<bool>()?;
            let mut want = Vec::new();
            for pad in &pads {
                for l in 0..n {
                    let q = idx + l;
                    want.extend((0..cols).map(|r| (r >= *pad || r == q) && r <= q));
                }
            }
            assert_eq!(got, want, "pads {pads:?}, offset {idx}, {n} queries");
        }
        Ok(())
    }
}
