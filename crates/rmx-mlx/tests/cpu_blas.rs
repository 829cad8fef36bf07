//! rmx's float32 products on Linux's CPU (cpp/cpu_blas.cc): MLX's calls reach them; an element's
//! bits never depend on the other rows or columns of its product, nor on zero terms after its
//! sum (keys a mask hides), for weight products (B transposed), attention's scores @ V (B as it
//! is), transposed inputs and addmm; and they agree with the runtime's own BLAS to float32
//! rounding. One test: the choice of BLAS is the whole process's.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design
mod common;

use common::randn;
use rmx_mlx::{addmm, concatenate, cpu_blas, cpu_blas_calls, set_cpu_blas, Array, CpuBlas};

fn mat(rows: usize, cols: usize, seed: u64) -> Array {
    Array::from_slice(&randn(rows * cols, seed), &[rows as i32, cols as i32]).unwrap()
}

fn bits(a: &Array) -> Vec<Vec<u32>> {
    let n = a.dim(1) as usize;
    let v = a.contiguous().unwrap().to_vec::<f32>().unwrap();
    v.chunks(n)
        .map(|r| r.iter().map(|x| x.to_bits()).collect())
        .collect()
}

/// How MLX is handed B: the transpose of a [n, k] weight (BLAS's transposed B), or a [k, n]
/// array as it is; `extra` more terms of random values after the first k.
fn b_of(k: usize, n: usize, weight_like: bool, seed: u64, extra: usize) -> Array {
    if weight_like {
        let w = mat(n, k, seed);
        let w = if extra > 0 {
            concatenate(&[&w, &mat(n, extra, 99)], 1).unwrap()
        } else {
            w
        };
        w.transpose(&[1, 0]).unwrap()
    } else {
        let b = mat(k, n, seed);
        if extra > 0 {
            concatenate(&[&b, &mat(extra, n, 99)], 0).unwrap()
        } else {
            b
        }
    }
}

/// `x[..m] @ b` for every m: each row the bits of that row alone; `b`'s first columns alone
/// the bits of those columns; `x` and `b` lengthened by 5 zero terms the same bits.
/// `transposed_a` hands MLX x as the transpose of a [k, m] array; `with_c` goes through addmm.
fn check(n: usize, k: usize, weight_like: bool, transposed_a: bool, with_c: bool) {
    let what = format!(
        "[{k} -> {n}] weight_like={weight_like} transposed_a={transposed_a} addmm={with_c}"
    );
    let max_m = 12;
    let b = b_of(k, n, weight_like, 7 + n as u64, 0);
    let x = if transposed_a {
        mat(k, max_m, 3).transpose(&[1, 0]).unwrap()
    } else {
        mat(max_m, k, 3)
    };
    let c = mat(max_m, n, 11);
    let product = |x: &Array, b: &Array, rows: (usize, usize), cols: usize| {
        let (r0, r1) = (rows.0 as i32, rows.1 as i32);
        let xs = x.slice_axis(0, r0, r1).unwrap();
        let bs = b.slice_axis(1, 0, cols as i32).unwrap();
        let y = if with_c {
            let cs = c
                .slice_axis(0, r0, r1)
                .unwrap()
                .slice_axis(1, 0, cols as i32)
                .unwrap();
            addmm(&cs, &xs, &bs, 1.0, 1.0).unwrap()
        } else {
            xs.matmul(&bs).unwrap()
        };
        bits(&y)
    };
    let alone: Vec<_> = (0..max_m)
        .map(|r| product(&x, &b, (r, r + 1), n).remove(0))
        .collect();
    for m in 2..=max_m {
        for (r, row) in product(&x, &b, (0, m), n).iter().enumerate() {
            assert!(
                row == &alone[r],
                "{what}: row {r} of {m} differs from the row alone"
            );
        }
    }
    let cols = n / 2 + 3;
    for (r, row) in product(&x, &b, (0, 4), cols).iter().enumerate() {
        assert!(
            row[..] == alone[r][..cols],
            "{what}: the first {cols} of {n} columns alone differ"
        );
    }
    // Zero terms after the sum: x gains 5 zero columns, b 5 more terms (0 x anything).
    let xz = concatenate(
        &[&x, &Array::zeros(&[max_m as i32, 5], x.dtype()).unwrap()],
        1,
    )
    .unwrap();
    let bz = b_of(k, n, weight_like, 7 + n as u64, 5);
    for (r, row) in product(&xz, &bz, (0, 4), n).iter().enumerate() {
        assert!(
            row == &alone[r],
            "{what}: row {r} changes with 5 zero terms after its sum"
        );
    }
}

#[test]
fn float32_products_stay_row_stable_and_agree_with_the_mlx_blas() {
    set_cpu_blas(CpuBlas::Rmx);
    assert_eq!(cpu_blas(), CpuBlas::Rmx);
    let before = cpu_blas_calls();
    mat(3, 16, 1)
        .matmul(&mat(16, 5, 2))
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(
        cpu_blas_calls() > before,
        "MLX's float32 matmul did not reach rmx's cblas_sgemm (the executable does not export it)"
    );

    // Tiny test models' shapes, real ones (SmolLM2-135M's), a real vocabulary, lengths off the
    // 8-wide steps; attention's q k^T is weight-like (keys as rows), scores @ V is not.
    for (n, k) in [
        (64, 64),
        (256, 64),
        (96, 37),
        (1536, 576),
        (151_936, 64),
        (18, 64),
    ] {
        check(n, k, true, false, false);
    }
    for (n, k) in [(64, 18), (64, 130), (1536, 576), (9, 40)] {
        check(n, k, false, false, false);
    }
    check(256, 64, true, true, false);
    check(256, 64, true, false, true);
    check(64, 40, false, true, true);

    // The same products on the runtime's BLAS: equal to float32 rounding, yet other sums (the
    // reference BLAS adds along k one term at a time), so not the same calls.
    for weight_like in [true, false] {
        let x = mat(9, 576, 5);
        let b = b_of(576, 1536, weight_like, 6, 0);
        let ours = x.matmul(&b).unwrap().to_vec::<f32>().unwrap();
        set_cpu_blas(CpuBlas::Mlx);
        assert_eq!(cpu_blas(), CpuBlas::Mlx);
        let reference = x.matmul(&b).unwrap().to_vec::<f32>().unwrap();
        set_cpu_blas(CpuBlas::Rmx);
        let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
        let worst = ours
            .iter()
            .zip(&reference)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            worst <= 1e-5 * scale,
            "weight_like={weight_like}: rmx's and the runtime's BLAS differ by {worst} (largest {scale})"
        );
        if weight_like {
            assert!(ours != reference, "both runs took the same BLAS");
        }
    }
}
