//! Quantization: MLX's affine (and other) modes, packed weights with per-group scales/biases.

use crate::array::{Array, List};
use crate::dtype::Dtype;
use crate::error::{check, invalid, Result};
use crate::ffi::bridge;

/// A weight quantized along its last axis.
pub struct Quantized {
    pub weight: Array,
    pub scales: Array,
    /// Present in "affine" mode.
    pub biases: Option<Array>,
}

/// MLX's quantization modes: `affine` (per-group scale and bias, any of 2-8 bits) and the
/// microscaling float formats, which have one shared power-of-two (`mxfp4`, `mxfp8`) or fp8
/// (`nvfp4`) scale per group and no biases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuantMode {
    Affine,
    Mxfp4,
    Mxfp8,
    Nvfp4,
}

impl QuantMode {
    pub const ALL: [QuantMode; 4] = [
        QuantMode::Affine,
        QuantMode::Mxfp4,
        QuantMode::Mxfp8,
        QuantMode::Nvfp4,
    ];

    /// The name MLX and mlx-lm's configs use.
    pub fn name(self) -> &'static str {
        match self {
            QuantMode::Affine => "affine",
            QuantMode::Mxfp4 => "mxfp4",
            QuantMode::Mxfp8 => "mxfp8",
            QuantMode::Nvfp4 => "nvfp4",
        }
    }

    pub fn parse(name: &str) -> Option<QuantMode> {
        QuantMode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether weights of this mode carry per-group biases.
    pub fn has_biases(self) -> bool {
        self == QuantMode::Affine
    }
}

/// How a tensor is quantized (mlx-lm's config `quantization` section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantSpec {
    pub group_size: i32,
    pub bits: i32,
    pub mode: QuantMode,
}

impl QuantSpec {
    pub fn affine(group_size: i32, bits: i32) -> QuantSpec {
        QuantSpec {
            group_size,
            bits,
            mode: QuantMode::Affine,
        }
    }
}

pub fn quantize(w: &Array, spec: QuantSpec) -> Result<Quantized> {
    let parts = List(check(
        "quantize",
        bridge::quantize(w.inner(), spec.group_size, spec.bits, spec.mode.name()),
    )?)
    .into_vec("quantize")?;
    let mut it = parts.into_iter();
    match (it.next(), it.next(), it.next()) {
        (Some(weight), Some(scales), biases) => Ok(Quantized {
            weight,
            scales,
            biases,
        }),
        _ => invalid("quantize", "MLX returned fewer than two arrays"),
    }
}

pub fn dequantize(q: &Quantized, spec: QuantSpec, dtype: Option<Dtype>) -> Result<Array> {
    let out = dtype.map_or(-1, |d| d.code() as i32);
    // SAFETY: pointer from a live `&Array` or null.
    check("dequantize", unsafe {
        bridge::dequantize(
            q.weight.inner(),
            q.scales.inner(),
            Array::ptr(q.biases.as_ref()),
            spec.group_size,
            spec.bits,
            spec.mode.name(),
            out,
        )
    })
    .map(Array::from_raw)
}

/// `x @ dequantize(w).T` (or without the transpose) without materializing the weight.
pub fn quantized_matmul(
    x: &Array,
    q: &Quantized,
    spec: QuantSpec,
    transpose: bool,
) -> Result<Array> {
    // SAFETY: pointer from a live `&Array` or null.
    check("quantized_matmul", unsafe {
        bridge::quantized_matmul(
            x.inner(),
            q.weight.inner(),
            q.scales.inner(),
            Array::ptr(q.biases.as_ref()),
            transpose,
            spec.group_size,
            spec.bits,
            spec.mode.name(),
        )
    })
    .map(Array::from_raw)
}

/// Quantized matmul against gathered experts.
pub fn gather_qmm(
    x: &Array,
    q: &Quantized,
    spec: QuantSpec,
    lhs: Option<&Array>,
    rhs: Option<&Array>,
    transpose: bool,
    sorted: bool,
) -> Result<Array> {
    // SAFETY: pointers from live `&Array`s or null.
    check("gather_qmm", unsafe {
        bridge::gather_qmm(
            x.inner(),
            q.weight.inner(),
            q.scales.inner(),
            Array::ptr(q.biases.as_ref()),
            Array::ptr(lhs),
            Array::ptr(rhs),
            transpose,
            spec.group_size,
            spec.bits,
            spec.mode.name(),
            sorted,
        )
    })
    .map(Array::from_raw)
}
