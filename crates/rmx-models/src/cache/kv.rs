//! The full-attention cache (mlx-lm's `KVCache`).

use rmx_mlx::{concatenate, Array, Dtype};

use crate::error::Result;

use super::buffer::{filled, seq_slice, write_at, STEP};
use super::mask::AttnMask;

#[derive(Default)]
pub struct KvCache {
    pub(crate) keys: Option<Array>,
    pub(crate) values: Option<Array>,
    pub offset: i32,
    /// The sequence's multimodal positions (Qwen3.5 with images, mrope.rs): attention turns
    /// its heads by them instead of by `offset`.
    pub(crate) mrope: Option<std::rc::Rc<crate::mrope::Plan>>,
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
        let out = filled(&keys, &values, self.offset)?;
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
        let out = filled(&keys, &values, n)?;
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

    /// `n` consecutive positions for a kernel that writes their keys and values itself (a
    /// speculative verify's block through the rows kernel): the whole buffers, as
    /// [`decode_slot`](Self::decode_slot), and the first position to write; all `n` now count
    /// as filled (a refused guess is cut back as any other position is).
    pub fn block_slot(
        &mut self,
        n: i32,
        heads: i32,
        dim: i32,
        dtype: Dtype,
    ) -> Result<(Array, Array, i32)> {
        self.reserve(n, 1, heads, dim, dtype)?;
        let at = self.offset;
        self.offset += n;
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
