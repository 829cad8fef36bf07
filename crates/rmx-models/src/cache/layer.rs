//! The cache one layer holds, whichever kind its mixer needs.

use rmx_mlx::Array;

use crate::error::{ModelError, Result};

use super::buffer::seq_slice;
use super::mask::{causal_mask, AttnMask};
use super::{BatchKvCache, KvCache, QuantizedKvCache, RecurrentCache, RotatingKvCache};

/// One layer's cache.
pub enum LayerCache {
    Full(KvCache),
    /// A full-attention cache stored quantized (`--kv-bits`, quantized.rs): attention reads
    /// it through MLX's `quantized_matmul`, never the fast path's kernels.
    Quantized(QuantizedKvCache),
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
            LayerCache::Quantized(c) => c.offset,
            LayerCache::Rotating(c) => c.offset,
            LayerCache::Recurrent(c) => c.offset,
            LayerCache::Batch(c) => c.offset(),
        }
    }

    /// The sequence's multimodal positions, where its prompt's images moved them (mrope.rs).
    pub fn mrope(&self) -> Option<&crate::mrope::Plan> {
        match self {
            LayerCache::Full(c) => c.mrope.as_deref(),
            _ => None,
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
            // The shared attention block reads a quantized cache itself (attention.rs); a
            // family with attention of its own does not yet.
            LayerCache::Quantized(_) => Err(ModelError::KvQuant(
                "this model's attention does not read a quantized KV cache; run it without \
                 --kv-bits"
                    .into(),
            )),
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
            LayerCache::Quantized(c) => match window {
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

    /// [`LayerCache::mask`] for `n > 1` new queries as an array (`[n, keys]`, true where a query
    /// sees a key), the keys being those the next update returns with the new ones last: for a
    /// model that widens it (Gemma 4's image blocks, `mask::with_blocks`).
    pub fn mask_array(&self, n: i32, window: Option<i32>) -> Result<Array> {
        if let AttnMask::Array(a) = self.mask(n, window)? {
            return Ok(a);
        }
        // A causal mask: every earlier key this cache keeps, then the new ones.
        let before = match self {
            LayerCache::Full(c) => c.offset,
            LayerCache::Quantized(c) => c.offset,
            // mlx-lm's concatenating update keeps the last max_size - 1 positions.
            LayerCache::Rotating(c) => c.offset.min(c.max_size - 1),
            LayerCache::Recurrent(_) | LayerCache::Batch(_) => {
                return Err(ModelError::Images(
                    "an image block's mask on a recurrent or batched cache".into(),
                ))
            }
        };
        causal_mask(n, before, None)
    }

    /// The arrays to evaluate so the cache holds values, not graphs.
    pub fn state(&self) -> Vec<&Array> {
        match self {
            LayerCache::Full(c) => c.state(),
            LayerCache::Quantized(c) => c.state(),
            LayerCache::Rotating(c) => c.state(),
            LayerCache::Recurrent(c) => c.state(),
            LayerCache::Batch(c) => c.state(),
        }
    }

    /// Makes evaluating this cache evaluate `x` too (a pipeline stage's hand-over to the next
    /// rank, which a prompt chunk that only fills caches would otherwise never run).
    pub fn depend_on(&mut self, x: &Array) -> Result<()> {
        let slot = match self {
            LayerCache::Full(c) => c.keys.as_mut(),
            LayerCache::Quantized(c) => c.keys_mut(),
            LayerCache::Rotating(c) => c.keys.as_mut(),
            LayerCache::Recurrent(c) => c.state.as_mut(),
            LayerCache::Batch(c) => c.keys_mut().as_mut(),
        };
        if let Some(a) = slot {
            if let Some(d) = rmx_mlx::distributed::depends(&[a], &[x])?.pop() {
                *a = d;
            }
        }
        Ok(())
    }

    /// Bytes held by this layer's keys and values.
    pub fn nbytes(&self) -> usize {
        self.state().iter().map(|a| a.nbytes()).sum()
    }

    /// Bytes this layer's cache would hold unquantized ([`LayerCache::nbytes`] but for a
    /// quantized cache): what `rmx ps` sets the quantized size against.
    pub fn plain_nbytes(&self) -> usize {
        match self {
            LayerCache::Quantized(c) => c.plain_nbytes(),
            c => c.nbytes(),
        }
    }

    /// Whether the cache can be cut back to any earlier position (a full KV cache can; a
    /// rotating window may have overwritten it, a recurrent state has folded it in).
    pub fn is_trimmable(&self) -> bool {
        matches!(self, LayerCache::Full(_) | LayerCache::Quantized(_))
    }

    /// Whether the positions a forward just wrote can be dropped again (a speculative block's
    /// rejected guesses, [`LayerCache::cut_back`]): a full cache's always, a window's as long
    /// as they replaced nothing still needed; a recurrent state has folded them in.
    pub fn cuts_back_blocks(&self) -> bool {
        matches!(self, LayerCache::Full(_) | LayerCache::Rotating(_))
    }

    /// Whether a block's positions can be undone at all: cut back
    /// ([`LayerCache::cuts_back_blocks`]), or, for a recurrent state, put back as it was before
    /// the block and the kept positions read again.
    pub fn undoes_blocks(&self) -> bool {
        self.cuts_back_blocks() || matches!(self, LayerCache::Recurrent(_))
    }

    /// Drops the positions from `len` on, which the last forward wrote; false when this cache
    /// cannot (see [`LayerCache::cuts_back_blocks`]).
    pub fn cut_back(&mut self, len: i32) -> bool {
        match self {
            LayerCache::Full(kv) if kv.offset >= len => {
                kv.offset = len;
                true
            }
            LayerCache::Rotating(r) => r.cut_back(len),
            _ => false,
        }
    }

    /// A copy that owns its own buffers: the fast path's decode kernels write into a KV
    /// cache's buffers in place, so a stored cache and a live one never share them.
    pub fn snapshot(&self) -> Result<LayerCache> {
        let copy = |a: &Option<Array>| -> Result<Option<Array>> {
            Ok(match a {
                Some(a) => Some(a.owned()?),
                None => None,
            })
        };
        Ok(match self {
            LayerCache::Full(c) => LayerCache::Full(KvCache {
                keys: copy(&c.keys)?,
                values: copy(&c.values)?,
                offset: c.offset,
                mrope: c.mrope.clone(),
            }),
            LayerCache::Quantized(c) => LayerCache::Quantized(c.snapshot()?),
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
    /// or `conv` and `state`. `None` for a sliding window, a quantized cache or a batch (never
    /// saved) or an empty cache.
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
            LayerCache::Rotating(_) | LayerCache::Quantized(_) | LayerCache::Batch(_) => None,
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
            LayerCache::Rotating(_) | LayerCache::Quantized(_) | LayerCache::Batch(_) => None,
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
        let c = match self {
            LayerCache::Full(c) => c,
            LayerCache::Quantized(q) => return Ok(q.truncated(len)?.map(LayerCache::Quantized)),
            _ => return Ok(None),
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
    use crate::cache::*;
    use rmx_mlx::{concatenate, Dtype};

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
    fn a_block_slot_takes_its_positions_at_once_and_grows_past_a_step_keeping_what_was_written() {
        let mut c = KvCache::default();
        let k = Array::from_slice(&[1.0f32; 2 * 250 * 4], &[1, 2, 250, 4]).unwrap();
        c.update_and_fetch(&k, &k).unwrap();
        let (keys, _, at) = c.block_slot(4, 2, 4, Dtype::F32).unwrap();
        assert_eq!((at, c.offset), (250, 254));
        assert_eq!(keys.dim(2), 256);
        // Past the buffer: it grows by a whole step after what was written (as `reserve` grows
        // for update_and_fetch), the written positions kept.
        let (keys, values, at) = c.block_slot(7, 2, 4, Dtype::F32).unwrap();
        assert_eq!((at, c.offset), (254, 261));
        assert_eq!(keys.shape(), vec![1, 2, 254 + 256, 4]);
        assert_eq!(values.dim(2), 254 + 256);
        let head = keys.slice_axis(2, 0, 250).unwrap().to_vec::<f32>().unwrap();
        assert!(head.iter().all(|v| *v == 1.0));
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
