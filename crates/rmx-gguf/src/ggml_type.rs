//! ggml's tensor element types: their ids as GGUF stores them, and the block layout that tells
//! how many bytes a run of elements takes.

use std::fmt;

/// A tensor's element type, by ggml's numbering (`ggml.h`'s `enum ggml_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Bf16,
    /// Any id this crate does not know the layout of; kept so such files still open.
    Other(u32),
}

/// Elements per super-block of the K-quants.
pub const QK_K: usize = 256;

impl GgmlType {
    pub fn from_id(id: u32) -> Self {
        match id {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            10 => Self::Q2K,
            11 => Self::Q3K,
            12 => Self::Q4K,
            13 => Self::Q5K,
            14 => Self::Q6K,
            30 => Self::Bf16,
            other => Self::Other(other),
        }
    }

    pub fn id(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q2K => 10,
            Self::Q3K => 11,
            Self::Q4K => 12,
            Self::Q5K => 13,
            Self::Q6K => 14,
            Self::Bf16 => 30,
            Self::Other(id) => id,
        }
    }

    /// `(elements per block, bytes per block)`, as in gguf-py's `GGML_QUANT_SIZES`; `None` for
    /// types whose layout is unknown here.
    pub fn block_layout(self) -> Option<(usize, usize)> {
        Some(match self {
            Self::F32 => (1, 4),
            Self::F16 | Self::Bf16 => (1, 2),
            Self::Q4_0 => (32, 2 + 16),
            Self::Q4_1 => (32, 2 + 2 + 16),
            Self::Q5_0 => (32, 2 + 4 + 16),
            Self::Q5_1 => (32, 2 + 2 + 4 + 16),
            Self::Q8_0 => (32, 2 + 32),
            Self::Q2K => (QK_K, 2 + 2 + QK_K / 16 + QK_K / 4),
            Self::Q3K => (QK_K, 2 + QK_K / 4 + QK_K / 8 + 12),
            Self::Q4K => (QK_K, 2 + 2 + QK_K / 2 + 12),
            Self::Q5K => (QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12),
            Self::Q6K => (QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16),
            Self::Other(_) => return None,
        })
    }

    /// Bytes taken by `n_elements` elements, or `None` if the layout is unknown or the count is
    /// not a whole number of blocks.
    pub fn byte_size(self, n_elements: u64) -> Option<u64> {
        let (block, bytes) = self.block_layout()?;
        let block = block as u64;
        if !n_elements.is_multiple_of(block) {
            return None;
        }
        (n_elements / block).checked_mul(bytes as u64)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::F32 => f.write_str("F32"),
            Self::F16 => f.write_str("F16"),
            Self::Q4_0 => f.write_str("Q4_0"),
            Self::Q4_1 => f.write_str("Q4_1"),
            Self::Q5_0 => f.write_str("Q5_0"),
            Self::Q5_1 => f.write_str("Q5_1"),
            Self::Q8_0 => f.write_str("Q8_0"),
            Self::Q2K => f.write_str("Q2_K"),
            Self::Q3K => f.write_str("Q3_K"),
            Self::Q4K => f.write_str("Q4_K"),
            Self::Q5K => f.write_str("Q5_K"),
            Self::Q6K => f.write_str("Q6_K"),
            Self::Bf16 => f.write_str("BF16"),
            Self::Other(id) => write!(f, "ggml type {id}"),
        }
    }
}
