//! Qwen3.5's multimodal rope (mRoPE) for prompts with images, as mlx-vlm's `qwen3_5` computes
//! it: every token has a position on three axes (time, row, column). Text advances all three
//! together; an image's merged patches share the time of its first and take their row and
//! column, so an image of `h x w` merged patches advances the positions by `max(h, w)` while it
//! takes `h * w` tokens. The text after it continues from the largest position plus one, which
//! is `delta` behind (or ahead of) its token index: decoding goes on at `offset + delta`.
//!
//! The rotated part of each head (`head_dim * partial_rotary_factor`) turns frequency `i` by
//! the position on axis `selector[i]`: interleaved, rows on `1, 4, 7, ...` and columns on
//! `2, 5, 8, ...` up to three times their `mrope_section`, time elsewhere. With the same
//! position on every axis this is the plain rope; the angles' cos and sin are rounded to the
//! activations' dtype before they multiply, as mlx-vlm's `Qwen3_5RotaryEmbedding` does.

use rmx_mlx::{concatenate, Array, Dtype};

use crate::error::{ModelError, Result};

/// One prompt's positions: `axes[a][l]` for token `l`, and where decoding continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Positions {
    pub axes: [Vec<i32>; 3],
    /// The next position minus the prompt's length: token `n` (n >= the prompt's length) is
    /// at `n + delta` on every axis.
    pub delta: i32,
}

/// `get_rope_index` for one sequence of `ids` whose images are runs of `image_token`, each
/// right after a `vision_start`; `grids`: each image's patch grid `(rows, cols)` before the
/// `merge` (as `image_grid_thw`), in order. A run must hold its image's merged patches.
pub fn positions(
    ids: &[i32],
    grids: &[(i32, i32)],
    image_token: i32,
    vision_start: i32,
    merge: i32,
) -> Result<Positions> {
    let images = ids
        .windows(2)
        .filter(|w| w[0] == vision_start && w[1] == image_token)
        .count();
    if images != grids.len() {
        return Err(ModelError::Images(format!(
            "{images} images in the prompt (a vision start before image tokens) but {} given",
            grids.len()
        )));
    }
    let mut axes: [Vec<i32>; 3] = Default::default();
    let mut next = 0; // the largest position so far plus one
    let mut st = 0usize;
    let text = |axes: &mut [Vec<i32>; 3], next: &mut i32, len: usize| {
        for i in 0..len as i32 {
            for a in axes.iter_mut() {
                a.push(*next + i);
            }
        }
        *next += len as i32;
    };
    for &(gh, gw) in grids {
        let Some(ed) = ids[st..]
            .iter()
            .position(|&t| t == image_token)
            .map(|p| st + p)
        else {
            return Err(ModelError::Images("fewer image tokens than images".into()));
        };
        text(&mut axes, &mut next, ed - st);
        let (h, w) = (gh / merge, gw / merge);
        let n = (h * w) as usize;
        if ed + n > ids.len() || ids[ed..ed + n].iter().any(|&t| t != image_token) {
            return Err(ModelError::Images(format!(
                "an image of {h}x{w} merged patches needs {n} image tokens in a row"
            )));
        }
        for r in 0..h {
            for c in 0..w {
                axes[0].push(next);
                axes[1].push(next + r);
                axes[2].push(next + c);
            }
        }
        next += h.max(w).max(1);
        st = ed + n;
    }
    text(&mut axes, &mut next, ids.len() - st);
    Ok(Positions {
        axes,
        delta: next - ids.len() as i32,
    })
}

impl Positions {
    /// The positions of tokens `start..start + len`: the prompt's own, then `n + delta` on
    /// every axis.
    pub fn span(&self, start: i32, len: i32) -> [Vec<i32>; 3] {
        let known = self.axes[0].len() as i32;
        std::array::from_fn(|a| {
            (start..start + len)
                .map(|n| match n < known {
                    true => self.axes[a][n as usize],
                    false => n + self.delta,
                })
                .collect()
        })
    }
}

/// A sequence's positions with the rotation that reads them: kept in its attention layers'
/// caches (`LayerCache::mrope`), so every forward of the sequence, prompt chunk or decode step,
/// turns its heads by them rather than by the cache's offset.
pub struct Plan {
    pub rope: std::rc::Rc<MRope>,
    pub positions: Positions,
}

impl Plan {
    /// `x` (`[B, H, L, D]`) of the tokens from `offset` on, turned.
    pub fn rotate(&self, x: &Array, offset: i32) -> Result<Array> {
        let [t, h, w] = self.positions.span(offset, x.dim(2));
        self.rope.rotate(x, [&t, &h, &w])
    }
}

/// The rotation of one attention layer's heads by three-axis positions.
pub struct MRope {
    /// `[rotary / 2]` float32.
    inv_freq: Array,
    /// The axis each frequency takes its position from.
    selector: Vec<usize>,
}

impl MRope {
    /// `rotary`: the turned dimensions of a head; `base`: `rope_theta`; `section`:
    /// `mrope_section` (time, rows, columns), interleaved as Qwen3.5's `mrope_interleaved`.
    pub fn interleaved(rotary: i32, base: f64, section: [i32; 3]) -> Result<MRope> {
        if rotary <= 0 || rotary % 2 != 0 {
            return Err(ModelError::Images(format!(
                "mRoPE over {rotary} dimensions (an even number is needed)"
            )));
        }
        let f = (rotary / 2) as usize;
        let mut selector = vec![0usize; f];
        for (axis, start) in [(1usize, 1usize), (2, 2)] {
            let end = ((section[axis].max(0) * 3) as usize).min(f);
            for s in selector.iter_mut().take(end).skip(start).step_by(3) {
                *s = axis;
            }
        }
        let inv_freq = crate::rope::python_inv_freq(rotary, base)?;
        Ok(MRope { inv_freq, selector })
    }

    /// `x`: `[B, H, L, D]` (queries or keys, after their norm); `axes`: the `L` tokens'
    /// positions. The first `rotary` dimensions turned, the rest kept.
    pub fn rotate(&self, x: &Array, axes: [&[i32]; 3]) -> Result<Array> {
        let l = x.dim(2);
        let f = self.selector.len();
        let pos: Vec<i32> = (0..l as usize)
            .flat_map(|t| self.selector.iter().map(move |&a| axes[a][t]))
            .collect();
        let freqs = Array::from_slice(&pos, &[l, f as i32])?
            .astype(Dtype::F32)?
            .multiply(&self.inv_freq.reshape(&[1, f as i32])?)?;
        let emb = concatenate(&[&freqs, &freqs], -1)?;
        let dtype = x.dtype();
        let (cos, sin) = (emb.cos()?.astype(dtype)?, emb.sin()?.astype(dtype)?);
        let r = 2 * f as i32;
        let rot = x.slice_axis(-1, 0, r)?;
        let pass = x.slice_axis(-1, r, x.dim(-1))?;
        let half = r / 2;
        let turned = concatenate(
            &[
                &rot.slice_axis(-1, half, r)?.negative()?,
                &rot.slice_axis(-1, 0, half)?,
            ],
            -1,
        )?;
        let y = rot
            .multiply(&cos)?
            .add(&turned.multiply(&sin)?)?
            .astype(dtype)?;
        Ok(concatenate(&[&y, &pass], -1)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_alone_counts_up_on_every_axis() {
        let p = positions(&[5, 6, 7], &[], 9, 8, 2).unwrap();
        assert_eq!(p.axes, [vec![0, 1, 2], vec![0, 1, 2], vec![0, 1, 2]]);
        assert_eq!(p.delta, 0);
    }

    #[test]
    fn an_image_takes_its_rows_and_columns_and_the_text_goes_on_after_its_largest() {
        // 4x6 patches merged 2x2: 2 rows of 3.
        let ids = [1, 8, 9, 9, 9, 9, 9, 9, 2, 3];
        let p = positions(&ids, &[(4, 6)], 9, 8, 2).unwrap();
        assert_eq!(p.axes[0], [0, 1, 2, 2, 2, 2, 2, 2, 5, 6]);
        assert_eq!(p.axes[1], [0, 1, 2, 2, 2, 3, 3, 3, 5, 6]);
        assert_eq!(p.axes[2], [0, 1, 2, 3, 4, 2, 3, 4, 5, 6]);
        // Next: 7, the 10th token: 7 - 10.
        assert_eq!(p.delta, -3);
    }

    #[test]
    fn past_the_prompt_every_axis_is_the_index_plus_delta() {
        let ids = [1, 8, 9, 9, 9, 9, 2];
        let p = positions(&ids, &[(4, 4)], 9, 8, 2).unwrap();
        assert_eq!(p.delta, -2);
        // Token 5 is the image's last patch (row 1, column 1), 6 the text after it (at 4),
        // then 7 and 8 past the prompt (at 7 - 2 and 8 - 2).
        let [t, h, w] = p.span(5, 4);
        assert_eq!(t, [2, 4, 5, 6]);
        assert_eq!(h, [3, 4, 5, 6]);
        assert_eq!(w, [3, 4, 5, 6]);
    }

    #[test]
    fn a_run_too_short_for_its_image_is_refused() {
        let e = positions(&[8, 9, 9, 1], &[(4, 4)], 9, 8, 2).unwrap_err();
        assert!(e.to_string().contains("4 image tokens in a row"), "{e}");
        assert!(positions(&[8, 9, 1], &[], 9, 8, 2).is_err());
    }

    #[test]
    fn rows_and_columns_interleave_up_to_their_sections() {
        let m = MRope::interleaved(64, 1e7, [11, 11, 10]).unwrap();
        let s = &m.selector;
        assert_eq!(s.len(), 32);
        assert_eq!((s[0], s[1], s[2], s[3], s[4], s[5]), (0, 1, 2, 0, 1, 2));
        // Columns stop at 3 * 10 = 30; rows run to 31.
        assert_eq!((s[29], s[30], s[31]), (2, 0, 1));
    }
}
