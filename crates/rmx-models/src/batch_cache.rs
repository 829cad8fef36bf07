//! Several sequences' caches as one, so a decode step runs over all of them in one forward:
//! mlx-lm's `BatchKVCache` layout. Key/value rows are left-padded to a common length (row `b`
//! holds its positions in columns `pad[b]..idx`), the mask hides the padding, and rope reads
//! each row's own position. Recurrent (DeltaNet) states need no padding: they stack on the
//! batch axis.
//!
//! Sequences are prefilled alone and merged in once they decode; finished ones are dropped by
//! [`keep`], and one row can be taken back out as a solo cache (for the prefix cache) by
//! [`row`]. Sliding-window caches do not batch: a model that has them decodes its sequences
//! one by one.

use rmx_mlx::{concatenate, Array, Dtype};

use crate::cache::{seq_slice, write_at, AttnMask, KvCache, LayerCache, RecurrentCache, STEP};
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
    fn from_solo(c: KvCache) -> Result<BatchKvCache> {
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
        let cols = self.idx + n;
        let mut m = Vec::with_capacity(self.pads.len() * (n * cols) as usize);
        for pad in &self.pads {
            for l in 0..n {
                let q = self.idx + l;
                m.extend((0..cols).map(|r| (r >= *pad || r == q) && r <= q));
            }
        }
        let b = self.pads.len() as i32;
        Ok(AttnMask::Array(Array::from_slice(&m, &[b, 1, n, cols])?))
    }

    pub fn state(&self) -> Vec<&Array> {
        self.keys.iter().chain(self.values.iter()).collect()
    }

    /// One batch of all of `parts`' rows, in order: each part left-padded to the longest.
    fn merge(parts: Vec<BatchKvCache>) -> Result<BatchKvCache> {
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
    fn keep(&mut self, rows: &[usize]) -> Result<()> {
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
    fn row(&self, r: usize, len: i32) -> Result<Option<KvCache>> {
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

fn index(rows: &[usize]) -> Result<Array> {
    let r: Vec<i32> = rows.iter().map(|&r| r as i32).collect();
    Ok(Array::from_slice(&r, &[r.len() as i32])?)
}

/// Whether a sequence's cache can join a batch: full attention and recurrent layers only.
pub fn batches(cache: &[LayerCache]) -> bool {
    cache.iter().all(|c| {
        matches!(
            c,
            LayerCache::Full(_) | LayerCache::Batch(_) | LayerCache::Recurrent(_)
        )
    })
}

/// One cache holding every row of `parts` (solo caches or batches, layer for layer alike), in
/// order.
pub fn merge(mut parts: Vec<Vec<LayerCache>>) -> Result<Vec<LayerCache>> {
    if parts.len() == 1 {
        // One sequence keeps its own cache, so it decodes on the solo fast path.
        return Ok(parts.pop().unwrap_or_default());
    }
    let layers = parts.first().map_or(0, Vec::len);
    if parts.iter().any(|p| p.len() != layers) {
        return Err(ModelError::Batch("caches of different models".into()));
    }
    let mut columns: Vec<Vec<LayerCache>> = (0..layers).map(|_| Vec::new()).collect();
    for part in parts {
        for (col, c) in columns.iter_mut().zip(part) {
            col.push(c);
        }
    }
    columns.into_iter().map(merge_layer).collect()
}

fn merge_layer(col: Vec<LayerCache>) -> Result<LayerCache> {
    if col.iter().all(|c| matches!(c, LayerCache::Recurrent(_))) {
        let mut conv = Vec::new();
        let mut state = Vec::new();
        let mut offset = 0;
        for c in col {
            let LayerCache::Recurrent(c) = c else {
                unreachable!("checked above")
            };
            let (Some(cv), Some(st)) = (c.conv, c.state) else {
                return Err(ModelError::Batch(
                    "a recurrent layer has read nothing yet".into(),
                ));
            };
            conv.push(cv);
            state.push(st);
            offset = offset.max(c.offset);
        }
        let cat = |v: &[Array]| concatenate(&v.iter().collect::<Vec<_>>(), 0);
        return Ok(LayerCache::Recurrent(RecurrentCache {
            conv: Some(cat(&conv)?),
            state: Some(cat(&state)?),
            offset,
        }));
    }
    let parts = col
        .into_iter()
        .map(|c| match c {
            LayerCache::Full(kv) => BatchKvCache::from_solo(kv),
            LayerCache::Batch(b) => Ok(b),
            LayerCache::Rotating(_) | LayerCache::Recurrent(_) => {
                Err(ModelError::Batch("a sliding-window or mixed layer".into()))
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(LayerCache::Batch(BatchKvCache::merge(parts)?))
}

/// Keeps only `rows` of a batch, in that order.
pub fn keep(cache: &mut [LayerCache], rows: &[usize]) -> Result<()> {
    for c in cache.iter_mut() {
        match c {
            LayerCache::Batch(b) => b.keep(rows)?,
            LayerCache::Recurrent(r) => {
                let idx = index(rows)?;
                let take = |a: &Option<Array>| -> Result<Option<Array>> {
                    Ok(match a {
                        Some(a) => Some(a.take(&idx, 0)?),
                        None => None,
                    })
                };
                r.conv = take(&r.conv)?;
                r.state = take(&r.state)?;
            }
            LayerCache::Full(_) | LayerCache::Rotating(_) => {
                return Err(ModelError::Batch("keep: not a batch".into()))
            }
        }
    }
    Ok(())
}

/// Row `r` of a batch as a solo cache of its first `len` positions, with buffers of its own:
/// what the sequence alone would have left. `None` when a layer cannot give that (a recurrent
/// state holds exactly what its row has read, so `len` must be all of it).
pub fn row(cache: &[LayerCache], r: usize, len: i32) -> Result<Option<Vec<LayerCache>>> {
    let mut out = Vec::with_capacity(cache.len());
    for c in cache {
        match c {
            LayerCache::Batch(b) => match b.row(r, len)? {
                Some(kv) if kv.offset == len => out.push(LayerCache::Full(kv)),
                _ => return Ok(None),
            },
            LayerCache::Recurrent(rc) => {
                let one = |a: &Option<Array>| -> Result<Option<Array>> {
                    Ok(match a {
                        Some(a) => Some(a.slice_axis(0, r as i32, r as i32 + 1)?.copy()?),
                        None => None,
                    })
                };
                out.push(LayerCache::Recurrent(RecurrentCache {
                    conv: one(&rc.conv)?,
                    state: one(&rc.state)?,
                    offset: len,
                }));
            }
            LayerCache::Full(_) | LayerCache::Rotating(_) => {
                return Err(ModelError::Batch("row: not a batch".into()))
            }
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A solo cache of `n` positions where position p holds `base + p` in every element.
    fn solo(n: i32, base: f32) -> LayerCache {
        let data: Vec<f32> = (0..2)
            .flat_map(|_| (0..n).flat_map(move |p| [base + p as f32; 4]))
            .collect();
        let k = Array::from_slice(&data, &[1, 2, n, 4]).unwrap();
        let mut c = KvCache::default();
        c.update_and_fetch(&k, &k).unwrap();
        LayerCache::Full(c)
    }

    fn values(c: &LayerCache) -> Vec<f32> {
        let LayerCache::Full(kv) = c else {
            panic!("a solo cache")
        };
        let k = kv.keys.as_ref().unwrap();
        seq_slice(k, 0, kv.offset).unwrap().to_vec::<f32>().unwrap()
    }

    #[test]
    fn rows_of_different_lengths_merge_left_padded_and_come_back_out_whole() {
        let (a, b) = (solo(3, 100.0), solo(5, 200.0));
        let (want_a, want_b) = (values(&a), values(&b));
        let mut batch = merge(vec![vec![a], vec![b]]).unwrap();
        let LayerCache::Batch(bc) = &batch[0] else {
            panic!("two rows make a batch")
        };
        assert_eq!((bc.rows(), bc.offset()), (2, 5));
        assert_eq!(bc.positions().to_vec::<i32>().unwrap(), vec![3, 5]);
        // One query each: row 0 must not see its two padding columns.
        let AttnMask::Array(m) = bc.mask(1).unwrap() else {
            panic!("padding needs a mask")
        };
        assert_eq!(m.shape(), vec![2, 1, 1, 6]);
        let m = m.to_vec::<bool>().unwrap();
        assert_eq!(&m[..6], &[false, false, true, true, true, true]);
        assert!(m[6..].iter().all(|v| *v));

        let rows = |batch: &[LayerCache], r, len| {
            let mut out = row(batch, r, len).unwrap().expect("the row's whole length");
            values(&out.remove(0))
        };
        assert_eq!(rows(&batch, 0, 3), want_a);
        assert_eq!(rows(&batch, 1, 5), want_b);
        // A row's cache is exactly what it has read: any other length is refused.
        assert!(row(&batch, 0, 4).unwrap().is_none());

        // A step writes one position to each row; then row 1 leaves and row 0 keeps its own.
        let one = Array::from_slice(&[7.0f32; 16], &[2, 2, 1, 4]).unwrap();
        batch[0].update_and_fetch(&one, &one).unwrap();
        keep(&mut batch, &[0]).unwrap();
        let LayerCache::Batch(bc) = &batch[0] else {
            panic!("still a batch layout")
        };
        // The shared padding is cut: row 0 starts at column 0 again.
        assert_eq!((bc.rows(), bc.offset()), (1, 4));
        assert_eq!(bc.positions().to_vec::<i32>().unwrap(), vec![4]);
        let mut after = want_a.clone();
        // Position 3 of each of the two heads: the rows are [head, position, 4].
        after.splice(12..12, [7.0; 4]);
        after.extend([7.0; 4]);
        assert_eq!(rows(&batch, 0, 4), after);
    }

    #[test]
    fn recurrent_states_stack_and_split_by_row() {
        let state = |v: f32| {
            LayerCache::Recurrent(RecurrentCache {
                conv: Some(Array::from_slice(&[v; 6], &[1, 3, 2]).unwrap()),
                state: Some(Array::from_slice(&[v; 4], &[1, 1, 2, 2]).unwrap()),
                offset: 0,
            })
        };
        let mut batch = merge(vec![vec![state(1.0)], vec![state(2.0)], vec![state(3.0)]]).unwrap();
        keep(&mut batch, &[2, 0]).unwrap();
        let out = row(&batch, 0, 9).unwrap().unwrap();
        let LayerCache::Recurrent(r) = &out[0] else {
            panic!("recurrent")
        };
        assert_eq!(r.offset, 9);
        assert_eq!(
            r.conv.as_ref().unwrap().to_vec::<f32>().unwrap(),
            vec![3.0; 6]
        );
        assert_eq!(r.state.as_ref().unwrap().shape(), vec![1, 1, 2, 2]);
    }
}
