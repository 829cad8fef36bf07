//! The sliding-window cache (mlx-lm's `RotatingKVCache` with keep = 0).

use rmx_mlx::{concatenate, Array, Dtype};

use crate::error::Result;

use super::buffer::{filled, seq_slice, write_at, STEP};
use super::mask::{causal_mask, AttnMask};

/// A sliding-window cache holding at most `max_size` positions (keep = 0).
pub struct RotatingKvCache {
    pub(super) keys: Option<Array>,
    pub(super) values: Option<Array>,
    pub offset: i32,
    pub(super) max_size: i32,
    pub(super) idx: i32,
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
        let s = k.shape();
        let (keys, values) = self.make_room(s[0], s[1], s[3], k.dtype())?;
        let keys = write_at(&keys, k, self.idx)?;
        let values = write_at(&values, v, self.idx)?;
        self.offset += s[2];
        self.idx += s[2];
        let out = filled(&keys, &values, self.offset)?;
        self.keys = Some(keys);
        self.values = Some(values);
        Ok(out)
    }

    /// The buffers, taken out, ready for one more position at `idx`, as mlx-lm's in-place
    /// update readies them: grown by a step up to `max_size` while the window fills, cut to the
    /// window's last `max_size` positions where a prompt left more (copied: row-contiguous and
    /// this cache's alone, as a kernel that writes in place needs), `idx` wrapped to 0 at the
    /// end of the ring.
    fn make_room(&mut self, b: i32, heads: i32, dim: i32, dtype: Dtype) -> Result<(Array, Array)> {
        let prev = self.offset;
        let cap = self.keys.as_ref().map_or(0, |a| a.dim(2));
        if self.keys.is_none() || (prev >= cap && cap < self.max_size) {
            let new_size = STEP.min(self.max_size - prev);
            let new_k = Array::zeros(&[b, heads, new_size, dim], dtype)?;
            let new_v = Array::zeros(&[b, heads, new_size, dim], dtype)?;
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
        let len = keys.dim(2);
        if len > self.max_size {
            keys = seq_slice(&keys, len - self.max_size, len)?.owned()?;
            values = seq_slice(&values, len - self.max_size, len)?.owned()?;
            self.idx = self.max_size;
        }
        if self.idx == self.max_size {
            self.idx = 0;
        }
        Ok((keys, values))
    }

    /// What a decode step's placement depends on: offset, buffer length, next slot, window.
    pub fn step_state(&self) -> (i32, i32, i32, i32) {
        let len = self.keys.as_ref().map_or(0, |a| a.dim(2));
        (self.offset, len, self.idx, self.max_size)
    }

    /// One decode position for a kernel that writes the new key and value itself, as
    /// `update_in_place` places them: the whole `[1, heads, len, dim]` ring buffers
    /// (`make_room`), the slot to write, which now counts as filled, and how many slots
    /// attention reads.
    pub fn decode_slot(
        &mut self,
        heads: i32,
        dim: i32,
        dtype: Dtype,
    ) -> Result<(Array, Array, i32, i32)> {
        let (keys, values) = self.make_room(1, heads, dim, dtype)?;
        let at = self.idx;
        self.offset += 1;
        self.idx += 1;
        let read = self.offset.min(keys.dim(2));
        self.keys = Some(keys.clone());
        self.values = Some(values.clone());
        Ok((keys, values, at, read))
    }

    /// Drops the positions from `len` on, which the last update wrote (a speculative block's
    /// rejected guesses); false when they cannot be dropped. They can while nothing they
    /// replaced is needed: the buffer is in temporal order — after a multi-token update, which
    /// keeps the window's last `max_size - 1` positions before the block, or before the ring
    /// first wraps. What stays is then what an update with only the kept tokens leaves.
    pub fn cut_back(&mut self, len: i32) -> bool {
        let drop = self.offset - len;
        if drop == 0 {
            return true;
        }
        let (Some(k), Some(v)) = (&self.keys, &self.values) else {
            return false;
        };
        let buf = k.dim(2);
        let in_order = self.idx == buf || (self.offset <= buf && self.idx == self.offset);
        if drop < 0 || drop > self.idx || !in_order {
            return false;
        }
        let keep = self.idx - drop;
        if self.idx == buf {
            let (Ok(k), Ok(v)) = (seq_slice(k, 0, keep), seq_slice(v, 0, keep)) else {
                return false;
            };
            self.keys = Some(k);
            self.values = Some(v);
        }
        self.idx = keep;
        self.offset = len;
        true
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` positions of one head, `[1, 1, n, 2]`, numbered from `from`.
    fn kv(from: i32, n: i32) -> Array {
        let v: Vec<f32> = (from..from + n)
            .flat_map(|p| [p as f32, -p as f32])
            .collect();
        Array::from_slice(&v, &[1, 1, n, 2]).unwrap()
    }

    /// The positions a cache holds, in the buffer's order.
    fn held(c: &RotatingKvCache) -> Vec<f32> {
        let k = c.keys.as_ref().unwrap();
        let v = k.to_vec::<f32>().unwrap();
        v.chunks(2).map(|p| p[0]).collect()
    }

    /// A block of 5 cut back by 3 leaves what a block of the 2 kept tokens leaves, before the
    /// ring wraps and after, and the next tokens go on from there alike.
    #[test]
    fn a_cut_block_leaves_what_the_shorter_block_would() {
        for before in [3, 10, 21] {
            let mut cut = RotatingKvCache::new(8);
            let mut short = RotatingKvCache::new(8);
            for p in 0..before {
                cut.update_and_fetch(&kv(p, 1), &kv(p, 1)).unwrap();
                short.update_and_fetch(&kv(p, 1), &kv(p, 1)).unwrap();
            }
            cut.update_and_fetch(&kv(before, 5), &kv(before, 5))
                .unwrap();
            assert!(cut.cut_back(before + 2));
            short
                .update_and_fetch(&kv(before, 2), &kv(before, 2))
                .unwrap();
            assert_eq!((cut.offset, cut.idx), (short.offset, short.idx), "{before}");
            assert_eq!(held(&cut), held(&short), "{before}");
            for p in before + 2..before + 12 {
                let (a, _) = cut.update_and_fetch(&kv(p, 1), &kv(p, 1)).unwrap();
                let (b, _) = short.update_and_fetch(&kv(p, 1), &kv(p, 1)).unwrap();
                assert_eq!(
                    a.to_vec::<f32>().unwrap(),
                    b.to_vec::<f32>().unwrap(),
                    "{p}"
                );
            }
        }
    }

    /// Single-token steps before the ring wraps can be cut; once a step has overwritten a
    /// position that is still in the window, it cannot.
    #[test]
    fn only_positions_that_replaced_nothing_needed_are_dropped() {
        let mut c = RotatingKvCache::new(8);
        for p in 0..5 {
            c.update_and_fetch(&kv(p, 1), &kv(p, 1)).unwrap();
        }
        assert!(c.cut_back(3));
        let (k, _) = c.update_and_fetch(&kv(3, 1), &kv(3, 1)).unwrap();
        assert_eq!(k.dim(2), 4);
        for p in 4..20 {
            c.update_and_fetch(&kv(p, 1), &kv(p, 1)).unwrap();
        }
        // 20 positions in a ring of 8: the last write went mid-ring over one still needed.
        assert!(!c.cut_back(18));
        assert_eq!(c.offset, 20);
    }

    /// A kernel's decode step (`decode_slot`, then the new key written at its slot) leaves the
    /// ring as `update_and_fetch` does, and attends as many slots, after a prompt longer than
    /// the window and after single steps from empty, through growth and wraps.
    #[test]
    fn decode_slots_place_positions_as_update_in_place_does() {
        for prompt in [0, 1, 3, 11] {
            let (mut a, mut b) = (RotatingKvCache::new(8), RotatingKvCache::new(8));
            if prompt > 0 {
                a.update_and_fetch(&kv(0, prompt), &kv(0, prompt)).unwrap();
                b.update_and_fetch(&kv(0, prompt), &kv(0, prompt)).unwrap();
            }
            for p in prompt..prompt + 20 {
                let (ka, _) = a.update_and_fetch(&kv(p, 1), &kv(p, 1)).unwrap();
                let (kb, vb, at, read) = b.decode_slot(1, 2, Dtype::F32).unwrap();
                let kb = write_at(&kb, &kv(p, 1), at).unwrap();
                let vb = write_at(&vb, &kv(p, 1), at).unwrap();
                b.keys = Some(kb);
                b.values = Some(vb);
                assert_eq!((a.offset, a.idx), (b.offset, b.idx), "{prompt} {p}");
                assert_eq!(held(&a), held(&b), "{prompt} {p}");
                assert_eq!(ka.dim(2), read, "{prompt} {p}");
            }
        }
    }
}
