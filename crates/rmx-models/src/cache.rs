//! Per-sequence key/value caches, ported from mlx-lm's `KVCache` and `RotatingKVCache`
//! (step-wise preallocation, the rotating buffer's order, its masks) because the order in which
//! attention sums its keys decides the low bits of the logits.

use rmx_mlx::{concatenate, Array, Dtype};

pub use crate::batch_cache::BatchKvCache;
use crate::error::{ModelError, Result};

pub(crate) const STEP: i32 = 256;

/// The mask an attention call uses, as mlx-lm passes it to `scaled_dot_product_attention`.
pub enum AttnMask {
    None,
    Causal,
    Array(Array),
}

impl AttnMask {
    pub fn as_fast(&self) -> rmx_mlx::fast::Mask<'_> {
        match self {
            AttnMask::None => rmx_mlx::fast::Mask::None,
            AttnMask::Causal => rmx_mlx::fast::Mask::Causal,
            AttnMask::Array(a) => rmx_mlx::fast::Mask::Array(a),
        }
    }
}

/// mlx-lm's `create_causal_mask`: query rows at `offset..offset+n` against keys `0..offset+n`.
pub fn causal_mask(n: i32, offset: i32, window: Option<i32>) -> Result<Array> {
    let cols = offset + n;
    let mut m = Vec::with_capacity((n * cols) as usize);
    for i in 0..n {
        let l = offset + i;
        for r in 0..cols {
            m.push(l >= r && window.is_none_or(|w| l < r + w));
        }
    }
    Ok(Array::from_slice(&m, &[n, cols])?)
}

pub(crate) fn seq_slice(a: &Array, start: i32, stop: i32) -> Result<Array> {
    Ok(a.slice_axis(2, start, stop)?)
}

pub(crate) fn write_at(dst: &Array, src: &Array, at: i32) -> Result<Array> {
    let s = src.shape();
    let start = [0, 0, at, 0];
    let stop = [s[0], s[1], at + s[2], s[3]];
    Ok(dst.slice_update(src, &start, &stop, &[1, 1, 1, 1])?)
}

fn zeros_like_steps(like: &Array, len: i32) -> Result<Array> {
    let s = like.shape();
    Ok(Array::zeros(&[s[0], s[1], len, s[3]], like.dtype())?)
}

#[derive(Default)]
pub struct KvCache {
    pub(crate) keys: Option<Array>,
    pub(crate) values: Option<Array>,
    pub offset: i32,
}

impl KvCache {
    /// Positions the buffers hold before they next grow (0 before the first).
    pub fn capacity(&self) -> i32 {
        self.keys.as_ref().map_or(0, |a| a.dim(2))
    }

    /// Makes room for `n` more positions, growing by whole steps of `[b, heads, STEP, dim]` as
    /// mlx-lm does.
    fn reserve(&mut self, n: i32, b: i32, heads: i32, dim: i32, dtype: Dtype) -> Result<()> {
        let prev = self.offset;
        let cap = self.capacity();
        if self.keys.is_some() && prev + n <= cap {
            return Ok(());
        }
        let steps = (STEP + n - 1) / STEP;
        let new_k = Array::zeros(&[b, heads, steps * STEP, dim], dtype)?;
        let new_v = Array::zeros(&[b, heads, steps * STEP, dim], dtype)?;
        match (self.keys.take(), self.values.take()) {
            (Some(mut ok), Some(mut ov)) => {
                if prev % STEP != 0 {
                    ok = seq_slice(&ok, 0, prev)?;
                    ov = seq_slice(&ov, 0, prev)?;
                }
                self.keys = Some(concatenate(&[&ok, &new_k], 2)?);
                self.values = Some(concatenate(&[&ov, &new_v], 2)?);
            }
            _ => {
                self.keys = Some(new_k);
                self.values = Some(new_v);
            }
        }
        Ok(())
    }

    pub fn update_and_fetch(&mut self, k: &Array, v: &Array) -> Result<(Array, Array)> {
        let prev = self.offset;
        let n = k.dim(2);
        let s = k.shape();
        self.reserve(n, s[0], s[1], s[3], k.dtype())?;
        self.offset += n;
        let (keys, values) = (self.keys.take(), self.values.take());
        let (Some(keys), Some(values)) = (keys, values) else {
            unreachable!("allocated above")
        };
        let keys = write_at(&keys, k, prev)?;
        let values = write_at(&values, v, prev)?;
        let out = if self.offset < keys.dim(2) {
            (
                seq_slice(&keys, 0, self.offset)?,
                seq_slice(&values, 0, self.offset)?,
            )
        } else {
            (keys.clone(), values.clone())
        };
        self.keys = Some(keys);
        self.values = Some(values);
        Ok(out)
    }

    /// The capacity a fresh cache takes for a first chunk of `n` positions: whole steps, as
    /// `reserve` allocates.
    pub fn first_capacity(n: i32) -> i32 {
        (n + STEP - 1) / STEP * STEP
    }

    /// Takes `[1, heads, first_capacity(n), dim]` buffers that a kernel filled with this empty
    /// cache's first `n` positions (and zeroed past them, as `reserve` would have) as its own,
    /// and returns what `update_and_fetch` would.
    pub fn adopt(&mut self, keys: Array, values: Array, n: i32) -> Result<(Array, Array)> {
        assert!(
            self.keys.is_none() && keys.dim(2) == Self::first_capacity(n),
            "adopt: an empty cache and whole steps"
        );
        self.offset = n;
        let out = if n < keys.dim(2) {
            (seq_slice(&keys, 0, n)?, seq_slice(&values, 0, n)?)
        } else {
            (keys.clone(), values.clone())
        };
        self.keys = Some(keys);
        self.values = Some(values);
        Ok(out)
    }

    /// One decode position for a kernel that writes the new key and value itself: the whole
    /// `[1, heads, cap, dim]` buffers (row-contiguous: made by `zeros`, `concatenate` or
    /// `slice_update`, and owned by this cache alone, so writing into them in place is seen by
    /// nobody else) and the position to write, which now counts as filled.
    pub fn decode_slot(
        &mut self,
        heads: i32,
        dim: i32,
        dtype: Dtype,
    ) -> Result<(Array, Array, i32)> {
        self.reserve(1, 1, heads, dim, dtype)?;
        let at = self.offset;
        self.offset += 1;
        match (&self.keys, &self.values) {
            (Some(k), Some(v)) => Ok((k.clone(), v.clone(), at)),
            _ => unreachable!("allocated above"),
        }
    }

    /// mlx-lm's `KVCache.make_mask` (no window): "causal" for several queries, none for one.
    pub fn mask(&self, n: i32) -> AttnMask {
        if n == 1 {
            AttnMask::None
        } else {
            AttnMask::Causal
        }
    }

    pub fn state(&self) -> Vec<&Array> {
        self.keys.iter().chain(self.values.iter()).collect()
    }
}

/// A sliding-window cache holding at most `max_size` positions (keep = 0).
pub struct RotatingKvCache {
    keys: Option<Array>,
    values: Option<Array>,
    pub offset: i32,
    max_size: i32,
    idx: i32,
}

impl RotatingKvCache {
    pub fn new(max_size: i32) -> RotatingKvCache {
        RotatingKvCache {
            keys: None,
            values: None,
            offset: 0,
            max_size,
            idx: 0,
        }
    }

    fn temporal_order(&self, v: &Array) -> Result<Array> {
        let len = v.dim(2);
        if self.idx == len {
            Ok(v.clone())
        } else if self.idx < self.offset {
            Ok(concatenate(
                &[&seq_slice(v, self.idx, len)?, &seq_slice(v, 0, self.idx)?],
                2,
            )?)
        } else {
            seq_slice(v, 0, self.idx)
        }
    }

    fn trim(trim_size: i32, v: &Array, append: Option<&Array>) -> Result<Array> {
        let len = v.dim(2);
        let kept = if trim_size > 0 {
            seq_slice(v, trim_size, len)?
        } else {
            v.clone()
        };
        Ok(match append {
            Some(a) => concatenate(&[&kept, a], 2)?,
            None => kept,
        })
    }

    fn update_concat(&mut self, k: &Array, v: &Array) -> Result<(Array, Array)> {
        match (self.keys.take(), self.values.take()) {
            (Some(ok), Some(ov)) => {
                let ok = self.temporal_order(&ok)?;
                let ov = self.temporal_order(&ov)?;
                self.idx = ok.dim(2);
                let trim_size = self.idx - self.max_size + 1;
                self.keys = Some(Self::trim(trim_size, &ok, Some(k))?);
                self.values = Some(Self::trim(trim_size, &ov, Some(v))?);
            }
            _ => {
                self.keys = Some(k.clone());
                self.values = Some(v.clone());
            }
        }
        self.offset += k.dim(2);
        let keys = self.keys.clone().unwrap_or_else(|| k.clone());
        let values = self.values.clone().unwrap_or_else(|| v.clone());
        self.idx = keys.dim(2);
        Ok((keys, values))
    }

    fn update_in_place(&mut self, k: &Array, v: &Array) -> Result<(Array, Array)> {
        let s = k.dim(2);
        let prev = self.offset;
        let cap = self.keys.as_ref().map_or(0, |a| a.dim(2));
        if self.keys.is_none() || (prev >= cap && cap < self.max_size) {
            let new_size = STEP.min(self.max_size - prev);
            let new_k = zeros_like_steps(k, new_size)?;
            let new_v = zeros_like_steps(v, new_size)?;
            match (self.keys.take(), self.values.take()) {
                (Some(ok), Some(ov)) => {
                    self.keys = Some(concatenate(&[&ok, &new_k], 2)?);
                    self.values = Some(concatenate(&[&ov, &new_v], 2)?);
                }
                _ => {
                    self.keys = Some(new_k);
                    self.values = Some(new_v);
                }
            }
            self.idx = prev;
        }
        let (Some(mut keys), Some(mut values)) = (self.keys.take(), self.values.take()) else {
            unreachable!("allocated above")
        };
        let trim_size = keys.dim(2) - self.max_size;
        if trim_size > 0 {
            keys = Self::trim(trim_size, &keys, None)?;
            values = Self::trim(trim_size, &values, None)?;
            self.idx = self.max_size;
        }
        if self.idx == self.max_size {
            self.idx = 0;
        }
        keys = write_at(&keys, k, self.idx)?;
        values = write_at(&values, v, self.idx)?;
        self.offset += s;
        self.idx += s;
        let out = if self.offset < keys.dim(2) {
            (
                seq_slice(&keys, 0, self.offset)?,
                seq_slice(&values, 0, self.offset)?,
            )
        } else {
            (keys.clone(), values.clone())
        };
        self.keys = Some(keys);
        self.values = Some(values);
        Ok(out)
    }

    pub fn update_and_fetch(&mut self, k: &Array, v: &Array) -> Result<(Array, Array)> {
        if k.dim(2) == 1 {
            self.update_in_place(k, v)
        } else {
            self.update_concat(k, v)
        }
    }

    /// mlx-lm's `RotatingKVCache.make_mask` for `n` new queries.
    pub fn mask(&self, n: i32, window: Option<i32>) -> Result<AttnMask> {
        if n > 1 {
            let window = window.unwrap_or(self.max_size);
            let offset = (self.max_size - 1).min(self.offset);
            if offset + n > window {
                return Ok(AttnMask::Array(causal_mask(n, offset, Some(window))?));
            }
            return Ok(AttnMask::Causal);
        }
        let Some(window) = window else {
            return Ok(AttnMask::None);
        };
        if self.offset >= window && self.max_size > window {
            let idx = if self.idx >= self.max_size {
                0
            } else {
                self.idx
            };
            let size = if self.offset < self.max_size {
                self.offset + 1
            } else {
                self.max_size
            };
            // arange(size) >= size - window, rolled by idx + 1.
            let base: Vec<bool> = (0..size).map(|i| i >= size - window).collect();
            let shift = ((idx + 1) % size) as usize;
            let mut rolled = vec![false; size as usize];
            for (i, b) in base.iter().enumerate() {
                rolled[(i + shift) % size as usize] = *b;
            }
            return Ok(AttnMask::Array(Array::from_slice(&rolled, &[size])?));
        }
        Ok(AttnMask::None)
    }

    pub fn state(&self) -> Vec<&Array> {
        self.keys.iter().chain(self.values.iter()).collect()
    }
}

/// A linear-attention (Gated DeltaNet) layer's state, mlx-lm's `ArraysCache(size=2)`: the
/// last `kernel - 1` inputs of its causal convolution `[B, kernel - 1, channels]` and the
/// recurrent state `[B, heads, value dim, key dim]` (float32). Unlike a KV cache it cannot be
/// cut back to an earlier position, only replaced by a copy taken there.
#[derive(Default)]
pub struct RecurrentCache {
    pub conv: Option<Array>,
    pub state: Option<Array>,
    /// Positions seen.
    pub offset: i32,
}

impl RecurrentCache {
    /// A fresh cache: no inputs seen, a zero state (made at the first chunk, in its dtype).
    pub fn new() -> RecurrentCache {
        RecurrentCache::default()
    }

    pub fn state(&self) -> Vec<&Array> {
        self.conv.iter().chain(self.state.iter()).collect()
    }
}

/// One layer's cache.
pub enum LayerCache {
    Full(KvCache),
    Rotating(RotatingKvCache),
    Recurrent(RecurrentCache),
    /// Several sequences' full caches decoded together (batch_cache.rs).
    Batch(BatchKvCache),
}

impl LayerCache {
    /// Positions read (a batch's: its longest row's).
    pub fn offset(&self) -> i32 {
        match self {
            LayerCache::Full(c) => c.offset,
            LayerCache::Rotating(c) => c.offset,
            LayerCache::Recurrent(c) => c.offset,
            LayerCache::Batch(c) => c.offset(),
        }
    }

    /// Each row's next position, `[B]` int32, when the rows differ (a batch); `None` when
    /// every row is at [`LayerCache::offset`].
    pub fn row_positions(&self) -> Option<&Array> {
        match self {
            LayerCache::Batch(c) => Some(c.positions()),
            _ => None,
        }
    }

    pub fn update_and_fetch(&mut self, k: &Array, v: &Array) -> Result<(Array, Array)> {
        match self {
            LayerCache::Full(c) => c.update_and_fetch(k, v),
            LayerCache::Rotating(c) => c.update_and_fetch(k, v),
            LayerCache::Batch(c) => c.update_and_fetch(k, v),
            LayerCache::Recurrent(_) => {
                unreachable!("an attention layer got a recurrent cache (make_cache's bug)")
            }
        }
    }

    /// The mask for `n` new queries (`window` for sliding-attention layers).
    pub fn mask(&self, n: i32, window: Option<i32>) -> Result<AttnMask> {
        match self {
            LayerCache::Full(c) => match window {
                Some(w) => Ok(AttnMask::Array(causal_mask(n, c.offset, Some(w))?)),
                None => Ok(c.mask(n)),
            },
            LayerCache::Rotating(c) => c.mask(n, window),
            // Sliding windows never batch (batch_cache::batches).
            LayerCache::Batch(c) => c.mask(n),
            // mlx-lm's create_ssm_mask: no padding at batch 1, so no mask.
            LayerCache::Recurrent(_) => Ok(AttnMask::None),
        }
    }

    /// The arrays to evaluate so the cache holds values, not graphs.
    pub fn state(&self) -> Vec<&Array> {
        match self {
            LayerCache::Full(c) => c.state(),
            LayerCache::Rotating(c) => c.state(),
            LayerCache::Recurrent(c) => c.state(),
            LayerCache::Batch(c) => c.state(),
        }
    }

    /// Bytes held by this layer's keys and values.
    pub fn nbytes(&self) -> usize {
        self.state().iter().map(|a| a.nbytes()).sum()
    }

    /// Whether the cache can be cut back to any earlier position (a full KV cache can; a
    /// rotating window may have overwritten it, a recurrent state has folded it in).
    pub fn is_trimmable(&self) -> bool {
        matches!(self, LayerCache::Full(_))
    }

    /// A copy that owns its own buffers: the fast path's decode kernels write into a KV
    /// cache's buffers in place, so a stored cache and a live one never share them.
    pub fn snapshot(&self) -> Result<LayerCache> {
        let copy = |a: &Option<Array>| -> Result<Option<Array>> {
            Ok(match a {
                Some(a) => Some(a.copy()?),
                None => None,
            })
        };
        Ok(match self {
            LayerCache::Full(c) => LayerCache::Full(KvCache {
                keys: copy(&c.keys)?,
                values: copy(&c.values)?,
                offset: c.offset,
            }),
            LayerCache::Rotating(c) => LayerCache::Rotating(RotatingKvCache {
                keys: copy(&c.keys)?,
                values: copy(&c.values)?,
                offset: c.offset,
                max_size: c.max_size,
                idx: c.idx,
            }),
            LayerCache::Recurrent(c) => LayerCache::Recurrent(RecurrentCache {
                conv: copy(&c.conv)?,
                state: copy(&c.state)?,
                offset: c.offset,
            }),
            LayerCache::Batch(_) => {
                return Err(ModelError::Batch(
                    "a batch is copied row by row (batch_cache::row)".into(),
                ))
            }
        })
    }

    /// The arrays this cache is made of, named, to save it: `k` and `v` (the positions read)
    /// or `conv` and `state`. `None` for a sliding window or a batch (never saved) or an empty
    /// cache.
    pub fn saved_parts(&self) -> Result<Option<Vec<(&'static str, Array)>>> {
        Ok(match self {
            LayerCache::Full(c) => match (&c.keys, &c.values) {
                (Some(k), Some(v)) if c.offset > 0 => Some(vec![
                    ("k", seq_slice(k, 0, c.offset)?),
                    ("v", seq_slice(v, 0, c.offset)?),
                ]),
                _ => None,
            },
            LayerCache::Recurrent(c) => match (&c.conv, &c.state) {
                (Some(conv), Some(state)) => {
                    Some(vec![("conv", conv.clone()), ("state", state.clone())])
                }
                _ => None,
            },
            LayerCache::Rotating(_) | LayerCache::Batch(_) => None,
        })
    }

    /// A cache of `like`'s kind made from [`LayerCache::saved_parts`], having read `offset`
    /// positions; `None` when the parts do not fit it (another model's file).
    pub fn from_saved(
        like: &LayerCache,
        mut part: impl FnMut(&str) -> Option<Array>,
        offset: i32,
    ) -> Result<Option<LayerCache>> {
        Ok(match like {
            LayerCache::Full(_) => {
                let (Some(k), Some(v)) = (part("k"), part("v")) else {
                    return Ok(None);
                };
                if k.ndim() != 4 || k.dim(0) != 1 || k.dim(2) != offset || v.dim(2) != offset {
                    return Ok(None);
                }
                let mut c = KvCache::default();
                c.update_and_fetch(&k, &v)?;
                Some(LayerCache::Full(c))
            }
            LayerCache::Recurrent(_) => {
                let (Some(conv), Some(state)) = (part("conv"), part("state")) else {
                    return Ok(None);
                };
                if conv.ndim() != 3 || state.ndim() != 4 || conv.dim(0) != 1 || state.dim(0) != 1 {
                    return Ok(None);
                }
                Some(LayerCache::Recurrent(RecurrentCache {
                    conv: Some(conv),
                    state: Some(state),
                    offset,
                }))
            }
            LayerCache::Rotating(_) | LayerCache::Batch(_) => None,
        })
    }

    /// A cache of the first `len` positions of this one, with buffers of its own: what
    /// prefilling those positions in one chunk would have left. `None` when this cache cannot
    /// give it (`len` past its end, or an earlier position of a cache that cannot be cut).
    pub fn truncated(&self, len: i32) -> Result<Option<LayerCache>> {
        if len <= 0 || len > self.offset() {
            return Ok(None);
        }
        if len == self.offset() && !self.is_trimmable() {
            return self.snapshot().map(Some);
        }
        let LayerCache::Full(c) = self else {
            return Ok(None);
        };
        let (Some(k), Some(v)) = (&c.keys, &c.values) else {
            return Ok(None);
        };
        let mut out = KvCache::default();
        out.update_and_fetch(&seq_slice(k, 0, len)?, &seq_slice(v, 0, len)?)?;
        Ok(Some(LayerCache::Full(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_slots_follow_the_prompt_and_grow_by_whole_steps_keeping_what_was_written() {
        let mut c = KvCache::default();
        let k = Array::from_slice(&[1.0f32; 2 * 3 * 4], &[1, 2, 3, 4]).unwrap();
        c.update_and_fetch(&k, &k).unwrap();
        let (keys, values, at) = c.decode_slot(2, 4, Dtype::F32).unwrap();
        assert_eq!((at, c.offset), (3, 4));
        assert_eq!(keys.shape(), vec![1, 2, 256, 4]);
        assert_eq!(values.shape(), vec![1, 2, 256, 4]);
        let mut last = at;
        while c.offset < 256 {
            last = c.decode_slot(2, 4, Dtype::F32).unwrap().2;
        }
        assert_eq!(last, 255);
        let (keys, _, at) = c.decode_slot(2, 4, Dtype::F32).unwrap();
        assert_eq!(at, 256);
        assert_eq!(keys.shape(), vec![1, 2, 512, 4]);
        // The prompt's keys survive the growth; the new step is zeros.
        let head = keys.slice_axis(2, 0, 3).unwrap().to_vec::<f32>().unwrap();
        assert!(head.iter().all(|v| *v == 1.0));
        let tail = keys.slice_axis(2, 3, 512).unwrap().to_vec::<f32>().unwrap();
        assert!(tail.iter().all(|v| *v == 0.0));
    }

    #[test]
    fn a_truncated_kv_cache_is_a_fresh_prefill_of_the_prefix_and_shares_no_buffer() {
        let data: Vec<f32> = (0..2 * 10 * 4).map(|i| i as f32).collect();
        let k = Array::from_slice(&data, &[1, 2, 10, 4]).unwrap();
        let mut full = LayerCache::Full(KvCache::default());
        full.update_and_fetch(&k, &k).unwrap();
        let Some(LayerCache::Full(mut cut)) = full.truncated(6).unwrap() else {
            panic!("a full cache cuts back")
        };
        let mut fresh = KvCache::default();
        let head = k.slice_axis(2, 0, 6).unwrap();
        let (want, _) = fresh.update_and_fetch(&head, &head).unwrap();
        assert_eq!(
            (cut.offset, cut.capacity()),
            (fresh.offset, fresh.capacity())
        );
        let one = Array::from_slice(&[7.0f32; 8], &[1, 2, 1, 4]).unwrap();
        let (got, _) = cut.update_and_fetch(&one, &one).unwrap();
        let (want7, _) = fresh.update_and_fetch(&one, &one).unwrap();
        assert_eq!(got.to_vec::<f32>().unwrap(), want7.to_vec::<f32>().unwrap());
        assert_eq!(want.shape(), vec![1, 2, 6, 4]);
        // The original still holds its 10 positions, untouched by the write at 6.
        let LayerCache::Full(orig) = &full else {
            unreachable!()
        };
        let kept = orig.keys.as_ref().unwrap().slice_axis(2, 0, 10).unwrap();
        assert_eq!(kept.to_vec::<f32>().unwrap(), data);
        assert!(full.truncated(11).unwrap().is_none());
        assert!(full.truncated(0).unwrap().is_none());
    }

    #[test]
    fn a_recurrent_state_is_given_back_only_whole() {
        let conv = Array::from_slice(&[1.0f32; 6], &[1, 3, 2]).unwrap();
        let c = LayerCache::Recurrent(RecurrentCache {
            conv: Some(conv.clone()),
            state: Some(conv),
            offset: 5,
        });
        assert!(c.truncated(4).unwrap().is_none());
        let Some(LayerCache::Recurrent(s)) = c.truncated(5).unwrap() else {
            panic!("the whole state comes back")
        };
        assert_eq!(s.offset, 5);
        assert_eq!(s.conv.unwrap().to_vec::<f32>().unwrap(), vec![1.0; 6]);
    }

    #[test]
    fn an_adopted_first_chunk_is_the_same_cache_as_one_written_by_update_and_fetch() {
        // 300 positions of [1, 2, n, 4]: position p holds p + 1 in every element.
        let rows = |from: i32, n: i32| {
            let data: Vec<f32> = (0..2)
                .flat_map(|_| (from..from + n).flat_map(|p| [(p + 1) as f32; 4]))
                .collect();
            Array::from_slice(&data, &[1, 2, n, 4]).unwrap()
        };
        let first = rows(0, 300);
        let cap = KvCache::first_capacity(300);
        assert_eq!(cap, 512);
        // The kernel's buffers: the chunk, then zeros up to whole steps.
        let pad = Array::zeros(&[1, 2, cap - 300, 4], Dtype::F32).unwrap();
        let buf = concatenate(&[&first, &pad], 2).unwrap();

        let mut written = KvCache::default();
        let mut adopted = KvCache::default();
        let (wk, _) = written.update_and_fetch(&first, &first).unwrap();
        let (ak, av) = adopted.adopt(buf.clone(), buf, 300).unwrap();
        assert_eq!(ak.shape(), vec![1, 2, 300, 4]);
        assert_eq!(ak.to_vec::<f32>().unwrap(), wk.to_vec::<f32>().unwrap());
        assert_eq!(av.to_vec::<f32>().unwrap(), wk.to_vec::<f32>().unwrap());
        assert_eq!(
            (adopted.offset, adopted.capacity()),
            (written.offset, written.capacity())
        );

        // The next chunk (past the capacity) and a decode slot land alike in both.
        let next = rows(300, 250);
        let (wk, _) = written.update_and_fetch(&next, &next).unwrap();
        let (ak, _) = adopted.update_and_fetch(&next, &next).unwrap();
        assert_eq!(ak.to_vec::<f32>().unwrap(), wk.to_vec::<f32>().unwrap());
        let (wk, _, wat) = written.decode_slot(2, 4, Dtype::F32).unwrap();
        let (ak, _, aat) = adopted.decode_slot(2, 4, Dtype::F32).unwrap();
        assert_eq!((aat, ak.shape()), (wat, wk.shape()));
        assert_eq!(ak.to_vec::<f32>().unwrap(), wk.to_vec::<f32>().unwrap());
    }
}
