//! Small host-side references shared by the op tests.
#![allow(dead_code)]

use rmx_mlx::Array;

pub fn arr(data: &[f32], shape: &[i32]) -> Array {
    Array::from_slice(data, shape).expect("from_slice")
}

pub fn vals(a: &Array) -> Vec<f32> {
    a.to_vec::<f32>().expect("to_vec")
}

pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "length differs: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        assert!(
            err <= tol * (1.0 + w.abs()),
            "element {i}: got {g}, want {w} (tol {tol})\n got: {got:?}\nwant: {want:?}"
        );
    }
}

/// Deterministic pseudo-random floats in [-1, 1) (a tiny LCG, so tests need no rand crate).
pub fn randn(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Row-major `[m,k] @ [k,n]`.
pub fn host_matmul(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    out
}

/// `[rows, cols]` transposed.
pub fn host_transpose(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; a.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = a[r * cols + c];
        }
    }
    out
}

/// Abramowitz–Stegun 7.1.26 is too coarse for a 1e-5 check; a series/continued split is not.
pub fn host_erf(x: f32) -> f32 {
    let x = x as f64;
    let t = x.abs();
    let r = if t < 2.5 {
        // Maclaurin series converges fast here.
        let mut sum = 0.0;
        let mut term = t;
        let mut n = 0.0;
        while term.abs() > 1e-17 {
            sum += term / (2.0 * n + 1.0);
            n += 1.0;
            term *= -t * t / n;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc continued fraction (Lentz) for the tail.
        let mut f = t;
        for k in (1..60).rev() {
            f = t + (k as f64 / 2.0) / f;
        }
        1.0 - (-t * t).exp() / (std::f64::consts::PI.sqrt() * f)
    };
    (if x < 0.0 { -r } else { r }) as f32
}
