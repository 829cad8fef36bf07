//! Affine quantization checked against a host dequantizer of MLX's packing (values packed
//! least-significant bits first into u32 words; w = scale * q + bias per group).
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design
mod common;

use common::*;
use rmx_mlx::quant::{self, QuantSpec};
use rmx_mlx::{gather_mm, Array, Dtype};

fn host_dequant(
    words: &[u32],
    scales: &[f32],
    biases: &[f32],
    rows: usize,
    cols: usize,
    spec: QuantSpec,
) -> Vec<f32> {
    let bits = spec.bits as usize;
    let per_word = 32 / bits;
    let mask = (1u32 << bits) - 1;
    let words_per_row = cols / per_word;
    let groups_per_row = cols / spec.group_size as usize;
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            let w = words[r * words_per_row + c / per_word];
            let q = (w >> (bits * (c % per_word))) & mask;
            let g = r * groups_per_row + c / spec.group_size as usize;
            out[r * cols + c] = scales[g] * q as f32 + biases[g];
        }
    }
    out
}

fn check_spec(spec: QuantSpec) {
    let (rows, cols) = (8usize, 256usize);
    let w = randn(rows * cols, 11 + spec.bits as u64);
    let q = quant::quantize(&arr(&w, &[rows as i32, cols as i32]), spec).unwrap();
    assert_eq!(q.weight.dtype(), Dtype::U32);
    assert_eq!(
        q.weight.shape(),
        vec![rows as i32, (cols * spec.bits as usize / 32) as i32]
    );
    assert_eq!(
        q.scales.shape(),
        vec![rows as i32, cols as i32 / spec.group_size]
    );
    let words = q.weight.to_vec::<u32>().unwrap();
    let scales = vals(&q.scales);
    let biases = vals(q.biases.as_ref().expect("affine has biases"));
    let host = host_dequant(&words, &scales, &biases, rows, cols, spec);
    // MLX's own dequantize agrees with the documented packing exactly.
    let deq = vals(&quant::dequantize(&q, spec, None).unwrap());
    assert_close(&deq, &host, 1e-6);
    // And each value is within one step (its group's scale) of the original: MLX nudges the
    // scale so that zero is representable, so half a step is not guaranteed.
    for (i, (a, b)) in host.iter().zip(&w).enumerate() {
        let step = scales[i / spec.group_size as usize].abs();
        assert!(
            (a - b).abs() <= step * 1.001 + 1e-6,
            "{a} vs {b} (step {step})"
        );
    }
    // quantized_matmul == x @ dequant(w).T
    let x = randn(3 * cols, 5);
    let got = quant::quantized_matmul(&arr(&x, &[3, cols as i32]), &q, spec, true).unwrap();
    let want = host_matmul(&x, &host_transpose(&host, rows, cols), 3, cols, rows);
    assert_close(&vals(&got), &want, 1e-4);
}

#[test]
fn four_bit_group_64() {
    check_spec(QuantSpec::affine(64, 4));
}

#[test]
fn eight_bit_group_64() {
    check_spec(QuantSpec::affine(64, 8));
}

#[test]
fn four_bit_group_32_and_two_bit_group_128() {
    check_spec(QuantSpec::affine(32, 4));
    check_spec(QuantSpec::affine(128, 2));
}

#[test]
fn odd_bit_widths_roundtrip_through_mlx() {
    // 3/5/6 bits pack across word boundaries; check MLX's own roundtrip and matmul agree.
    for bits in [3, 5, 6] {
        let spec = QuantSpec::affine(64, bits);
        let w = randn(4 * 128, bits as u64);
        let q = quant::quantize(&arr(&w, &[4, 128]), spec).unwrap();
        let deq = vals(&quant::dequantize(&q, spec, None).unwrap());
        let scales = vals(&q.scales);
        for (i, (a, b)) in deq.iter().zip(&w).enumerate() {
            let step = scales[i / 64].abs();
            assert!(
                (a - b).abs() <= step * 1.001 + 1e-6,
                "bits {bits}: {a} vs {b}"
            );
        }
        let x = randn(128, 9);
        let got = quant::quantized_matmul(&arr(&x, &[1, 128]), &q, spec, true).unwrap();
        let want = host_matmul(&x, &host_transpose(&deq, 4, 128), 1, 128, 4);
        assert_close(&vals(&got), &want, 1e-4);
    }
}

#[test]
fn bf16_dequantize_dtype() {
    let spec = QuantSpec::affine(64, 4);
    let w = arr(&randn(2 * 64, 3), &[2, 64])
        .astype(Dtype::Bf16)
        .unwrap();
    let q = quant::quantize(&w, spec).unwrap();
    assert_eq!(q.scales.dtype(), Dtype::Bf16);
    assert_eq!(
        quant::dequantize(&q, spec, Some(Dtype::F32))
            .unwrap()
            .dtype(),
        Dtype::F32
    );
}

#[test]
fn gather_qmm_picks_experts() {
    let spec = QuantSpec::affine(64, 4);
    let (experts, out, inn) = (3, 4, 128);
    let w = randn(experts * out * inn, 21);
    let q = quant::quantize(&arr(&w, &[experts as i32, out as i32, inn as i32]), spec).unwrap();
    let x = randn(2 * inn, 22);
    let xa = arr(&x, &[2, 1, inn as i32]);
    let rhs = Array::from_slice(&[2u32, 0], &[2]).unwrap();
    let got = quant::gather_qmm(&xa, &q, spec, None, Some(&rhs), true, false).unwrap();
    assert_eq!(got.shape(), vec![2, 1, out as i32]);
    let deq = vals(&quant::dequantize(&q, spec, None).unwrap());
    let mut want = vec![];
    for (row, e) in [(0usize, 2usize), (1, 0)] {
        let we = &deq[e * out * inn..(e + 1) * out * inn];
        want.extend(host_matmul(
            &x[row * inn..(row + 1) * inn],
            &host_transpose(we, out, inn),
            1,
            inn,
            out,
        ));
    }
    assert_close(&vals(&got), &want, 1e-4);
}

#[test]
fn gather_mm_picks_matrices() {
    let b = randn(3 * 4 * 2, 31);
    let a = randn(2 * 4, 32);
    let rhs = Array::from_slice(&[1u32, 2], &[2]).unwrap();
    let got = gather_mm(
        &arr(&a, &[2, 1, 4]),
        &arr(&b, &[3, 4, 2]),
        None,
        Some(&rhs),
        false,
    )
    .unwrap();
    let mut want = host_matmul(&a[..4], &b[8..16], 1, 4, 2);
    want.extend(host_matmul(&a[4..], &b[16..24], 1, 4, 2));
    assert_close(&vals(&got), &want, 1e-5);
}

#[test]
fn microscaling_modes_have_no_biases_and_their_products_match_their_dequantized_weights() {
    use rmx_mlx::quant::QuantMode;
    for (mode, group, bits) in [
        (QuantMode::Mxfp4, 32, 4),
        (QuantMode::Mxfp8, 32, 8),
        (QuantMode::Nvfp4, 16, 4),
    ] {
        let spec = QuantSpec {
            group_size: group,
            bits,
            mode,
        };
        let (rows, cols) = (8, 128);
        let w = randn(rows * cols, 31 + bits as u64);
        let q = quant::quantize(&arr(&w, &[rows as i32, cols as i32]), spec).unwrap();
        assert!(q.biases.is_none(), "{mode:?}");
        assert_eq!(q.scales.shape(), vec![rows as i32, cols as i32 / group]);
        let deq = vals(&quant::dequantize(&q, spec, None).unwrap());
        // A 4-bit float keeps about one significant bit of the largest values in its group.
        let err = deq
            .iter()
            .zip(&w)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(err < 1.5, "{mode:?}: max error {err}");
        let x = randn(2 * cols, 41);
        let got = quant::quantized_matmul(&arr(&x, &[2, cols as i32]), &q, spec, true).unwrap();
        let want = host_matmul(&x, &host_transpose(&deq, rows, cols), 2, cols, rows);
        assert_close(&vals(&got), &want, 1e-3);
    }
}
