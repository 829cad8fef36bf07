//! Dequantization of ggml block formats to f32.
//!
//! Layouts and arithmetic follow gguf-py's `gguf/quants.py` (which mirrors ggml-quants.c); the
//! operations are done in the same order in f32 so results match it bit for bit.

use half::f16;

use crate::ggml_type::{GgmlType, QK_K};

/// Dequantizes `bytes` (a whole number of blocks of `ty`). `None` if `ty` is not supported.
pub fn dequantize(ty: GgmlType, bytes: &[u8]) -> Option<Vec<f32>> {
    let (block, block_bytes) = ty.block_layout()?;
    let blocks = bytes.chunks_exact(block_bytes);
    let mut out = Vec::with_capacity(bytes.len() / block_bytes * block);
    match ty {
        GgmlType::F32 => out.extend(blocks.map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        GgmlType::F16 => out.extend(blocks.map(|b| f16_at(b, 0))),
        GgmlType::Bf16 => out.extend(
            blocks.map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16)),
        ),
        GgmlType::Q4_0 => blocks.for_each(|b| q4_0(b, &mut out)),
        GgmlType::Q4_1 => blocks.for_each(|b| q4_1(b, &mut out)),
        GgmlType::Q5_0 => blocks.for_each(|b| q5_0(b, &mut out)),
        GgmlType::Q5_1 => blocks.for_each(|b| q5_1(b, &mut out)),
        GgmlType::Q8_0 => blocks.for_each(|b| q8_0(b, &mut out)),
        GgmlType::Q4K => blocks.for_each(|b| q4_k(b, &mut out)),
        GgmlType::Q5K => blocks.for_each(|b| q5_k(b, &mut out)),
        GgmlType::Q6K => blocks.for_each(|b| q6_k(b, &mut out)),
        GgmlType::Q2K | GgmlType::Q3K | GgmlType::Other(_) => return None,
    }
    Some(out)
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The 4-bit value of element `i` of a 32-element block: low nibbles hold 0..16, high 16..32.
fn nibble(qs: &[u8], i: usize) -> u8 {
    if i < 16 {
        qs[i] & 0x0F
    } else {
        qs[i - 16] >> 4
    }
}

/// The fifth bit of element `i`, from the block's little-endian u32 `qh`.
fn fifth_bit(qh: u32, i: usize) -> u8 {
    ((qh >> i) & 1) as u8
}

fn q4_0(b: &[u8], out: &mut Vec<f32>) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    out.extend((0..32).map(|i| d * f32::from(nibble(qs, i) as i8 - 8)));
}

fn q4_1(b: &[u8], out: &mut Vec<f32>) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qs = &b[4..20];
    out.extend((0..32).map(|i| d * f32::from(nibble(qs, i)) + m));
}

fn q5_0(b: &[u8], out: &mut Vec<f32>) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    out.extend((0..32).map(|i| {
        let q = (nibble(qs, i) | (fifth_bit(qh, i) << 4)) as i8 - 16;
        d * f32::from(q)
    }));
}

fn q5_1(b: &[u8], out: &mut Vec<f32>) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    out.extend((0..32).map(|i| d * f32::from(nibble(qs, i) | (fifth_bit(qh, i) << 4)) + m));
}

fn q8_0(b: &[u8], out: &mut Vec<f32>) {
    let d = f16_at(b, 0);
    out.extend(b[2..34].iter().map(|&q| f32::from(q as i8) * d));
}

/// The eight 6-bit (scale, min) pairs packed into 12 bytes, shared by Q4_K and Q5_K.
fn k_scale_min(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 0x3F;
        mn[j] = s[j + 4] & 0x3F;
        sc[j + 4] = (s[j + 8] & 0x0F) | ((s[j] >> 2) & 0x30);
        mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30);
    }
    (sc, mn)
}

/// Q4_K: 8 sub-blocks of 32; sub-block `j` reads nibble `j % 2` of bytes `32 * (j / 2)..`.
fn q4_k(b: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (sc, mn) = k_scale_min(&b[4..16]);
    let qs = &b[16..16 + QK_K / 2];
    for j in 0..8 {
        let scale = d * f32::from(sc[j]);
        let min = dmin * f32::from(mn[j]);
        let bytes = &qs[32 * (j / 2)..32 * (j / 2) + 32];
        let shift = 4 * (j % 2);
        out.extend(
            bytes
                .iter()
                .map(|&q| scale * f32::from((q >> shift) & 0x0F) - min),
        );
    }
}

/// Q5_K: Q4_K's layout plus a fifth bit per element: bit `j` of `qh[l]` for sub-block `j`.
fn q5_k(b: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (sc, mn) = k_scale_min(&b[4..16]);
    let qh = &b[16..16 + QK_K / 8];
    let qs = &b[16 + QK_K / 8..16 + QK_K / 8 + QK_K / 2];
    for j in 0..8 {
        let scale = d * f32::from(sc[j]);
        let min = dmin * f32::from(mn[j]);
        let bytes = &qs[32 * (j / 2)..32 * (j / 2) + 32];
        let shift = 4 * (j % 2);
        out.extend(bytes.iter().zip(qh).map(|(&q, &h)| {
            let q = ((q >> shift) & 0x0F) | (((h >> j) & 1) << 4);
            scale * f32::from(q) - min
        }));
    }
}

/// Q6_K: two halves of 128; within a half, element `r` takes nibble `r / 64` of `ql[r % 64]`
/// and bits `2 * (r / 32)` of `qh[r % 32]`; one int8 scale per 16 elements.
fn q6_k(b: &[u8], out: &mut Vec<f32>) {
    let ql = &b[..QK_K / 2];
    let qh = &b[QK_K / 2..QK_K / 2 + QK_K / 4];
    let scales = &b[QK_K / 2 + QK_K / 4..QK_K / 2 + QK_K / 4 + QK_K / 16];
    let d = f16_at(b, QK_K / 2 + QK_K / 4 + QK_K / 16);
    for p in 0..QK_K {
        let (half, r) = (p / 128, p % 128);
        let lo = (ql[half * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
        let hi = (qh[half * 32 + r % 32] >> (2 * (r / 32))) & 0x03;
        let q = (lo | (hi << 4)) as i8 - 32;
        out.push(d * f32::from(scales[p / 16] as i8) * f32::from(q));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q8_0_block() {
        let mut b = vec![0u8; 34];
        b[..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        b[2] = 4;
        b[3] = (-6i8) as u8;
        let v = dequantize(GgmlType::Q8_0, &b).unwrap_or_default();
        assert_eq!(&v[..3], &[2.0, -3.0, 0.0]);
    }

    #[test]
    fn q4_0_nibble_order() {
        let mut b = vec![0u8; 18];
        b[..2].copy_from_slice(&f16::from_f32(1.0).to_le_bytes());
        b[2] = 0xA9; // element 0 = 9 - 8, element 16 = 10 - 8
        let v = dequantize(GgmlType::Q4_0, &b).unwrap_or_default();
        assert_eq!((v[0], v[16], v[1]), (1.0, 2.0, -8.0));
    }

    #[test]
    fn unsupported_type_is_none() {
        assert!(dequantize(GgmlType::Q2K, &[0u8; 84]).is_none());
    }
}
