//! MLX's affine quantization (`mx.quantize(w, group_size, bits)`, mode "affine"), reproduced so
//! that `mlx-lm` reads our packed weights as if it had quantized them itself.
//!
//! Per group of `group_size` values along the last axis: a scale and a bias (stored as bf16)
//! with `w ≈ scale * q + bias`, `q` in `0..2^bits`, and `32 / bits` values of `q` packed into
//! each little-endian u32, the first value in the lowest bits. The scale is chosen so that the
//! group's larger-magnitude edge is represented exactly, as MLX does.

use half::bf16;

/// MLX's default group size, which mlx-lm's convert uses too.
pub const GROUP_SIZE: usize = 64;

/// An affine-quantized matrix in MLX's layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantized {
    /// `rows × (cols * bits / 32)` words.
    pub packed: Vec<u32>,
    /// `rows × (cols / group_size)`.
    pub scales: Vec<bf16>,
    pub biases: Vec<bf16>,
}

/// Quantizes `w`, whose last axis has length `cols`, to `bits` (4 or 8) per value.
///
/// The caller guarantees `cols % group_size == 0` and `w.len() % cols == 0`; groups never
/// straddle rows then, so `w` is treated as one flat run of groups.
pub fn affine_quantize(w: &[f32], group_size: usize, bits: u32) -> Quantized {
    let per_word = (32 / bits) as usize;
    let n_bins = ((1u32 << bits) - 1) as f32;
    let groups = w.len() / group_size;
    let mut out = Quantized {
        packed: Vec::with_capacity(w.len() / per_word),
        scales: Vec::with_capacity(groups),
        biases: Vec::with_capacity(groups),
    };
    for group in w.chunks_exact(group_size) {
        let (w_min, w_max) = group
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        // Anchor the quantization grid on whichever edge has the larger magnitude, so that
        // value round-trips exactly (a negative scale when the edge is the maximum).
        let min_is_edge = w_min.abs() > w_max.abs();
        let mut scale = ((w_max - w_min) / n_bins).max(1e-7);
        if !min_is_edge {
            scale = -scale;
        }
        let edge = if min_is_edge { w_min } else { w_max };
        let q0 = (edge / scale).round_ties_even();
        let bias = if q0 == 0.0 {
            0.0
        } else {
            scale = edge / q0;
            edge
        };
        for word in group.chunks_exact(per_word) {
            let mut packed = 0u32;
            for (k, &x) in word.iter().enumerate() {
                let q = ((x - bias) / scale).round_ties_even().clamp(0.0, n_bins) as u32;
                packed |= q << (k as u32 * bits);
            }
            out.packed.push(packed);
        }
        out.scales.push(bf16::from_f32(scale));
        out.biases.push(bf16::from_f32(bias));
    }
    out
}

/// The inverse, for tests and for checking what a quantized file holds.
pub fn affine_dequantize(q: &Quantized, group_size: usize, bits: u32) -> Vec<f32> {
    let per_word = (32 / bits) as usize;
    let mask = (1u32 << bits) - 1;
    let words_per_group = group_size / per_word;
    let mut out = Vec::with_capacity(q.packed.len() * per_word);
    for (g, words) in q.packed.chunks_exact(words_per_group).enumerate() {
        let (scale, bias) = (q.scales[g].to_f32(), q.biases[g].to_f32());
        for &word in words {
            for k in 0..per_word {
                out.push(scale * ((word >> (k as u32 * bits)) & mask) as f32 + bias);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_close() {
        let w: Vec<f32> = (0..256)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 100.0)
            .collect();
        for bits in [4, 8] {
            let q = affine_quantize(&w, GROUP_SIZE, bits);
            assert_eq!(q.packed.len(), 256 * bits as usize / 32);
            assert_eq!(q.scales.len(), 4);
            let back = affine_dequantize(&q, GROUP_SIZE, bits);
            let step = 1.0 / ((1u32 << bits) - 1) as f32;
            for (a, b) in w.iter().zip(&back) {
                assert!((a - b).abs() <= step * 1.1, "{a} vs {b} at {bits} bits");
            }
        }
    }

    #[test]
    fn constant_group_is_exact() {
        let w = vec![0.25f32; 64];
        let q = affine_quantize(&w, GROUP_SIZE, 4);
        assert!(affine_dequantize(&q, GROUP_SIZE, 4)
            .iter()
            .all(|&x| x == 0.25));
    }
}
