//! The sliding-window cache (mlx-lm's `RotatingKVCache` with keep = 0).

use rmx_mlx::{concatenate, Array};

use crate::error::Result;

use super::buffer::{seq_slice, write_at, zeros_like_steps, STEP};
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
