//! mlx::core::fast kernels against host formulas.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design
mod common;

use common::*;
use rmx_mlx::fast::{self, Mask, Rope};
use rmx_mlx::Array;

#[test]
fn rms_norm_matches_formula() {
    let x = randn(2 * 8, 1);
    let w = randn(8, 2);
    let got = fast::rms_norm(&arr(&x, &[2, 8]), Some(&arr(&w, &[8])), 1e-5).unwrap();
    let want: Vec<f32> = x
        .chunks(8)
        .flat_map(|r| {
            let ms = r.iter().map(|v| v * v).sum::<f32>() / 8.0;
            let inv = 1.0 / (ms + 1e-5).sqrt();
            r.iter()
                .zip(&w)
                .map(move |(v, g)| v * inv * g)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_close(&vals(&got), &want, 1e-5);
}

#[test]
fn layer_norm_matches_formula() {
    let x = randn(3 * 6, 3);
    let (w, b) = (randn(6, 4), randn(6, 5));
    let got = fast::layer_norm(
        &arr(&x, &[3, 6]),
        Some(&arr(&w, &[6])),
        Some(&arr(&b, &[6])),
        1e-5,
    )
    .unwrap();
    let want: Vec<f32> = x
        .chunks(6)
        .flat_map(|r| {
            let m = r.iter().sum::<f32>() / 6.0;
            let var = r.iter().map(|v| (v - m) * (v - m)).sum::<f32>() / 6.0;
            let inv = 1.0 / (var + 1e-5).sqrt();
            (0..6).map(move |i| (r[i] - m) * inv).collect::<Vec<_>>()
        })
        .enumerate()
        .map(|(i, v)| v * w[i % 6] + b[i % 6])
        .collect();
    assert_close(&vals(&got), &want, 1e-5);
}

/// Host rope over `[seq, dims]` at positions offset.. .
fn host_rope(
    x: &[f32],
    seq: usize,
    d: usize,
    base: f32,
    scale: f32,
    offset: usize,
    traditional: bool,
) -> Vec<f32> {
    let half = d / 2;
    let mut out = x.to_vec();
    for t in 0..seq {
        let pos = (offset + t) as f32 * scale;
        for i in 0..half {
            let theta = pos * base.powf(-((2 * i) as f32) / d as f32);
            let (s, c) = theta.sin_cos();
            let (a, b) = if traditional {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + half)
            };
            let (xa, xb) = (x[t * d + a], x[t * d + b]);
            out[t * d + a] = xa * c - xb * s;
            out[t * d + b] = xb * c + xa * s;
        }
    }
    out
}

#[test]
fn rope_with_offset_both_layouts() {
    let (seq, d) = (3, 8);
    let x = randn(seq * d, 7);
    for traditional in [false, true] {
        let p = Rope {
            dims: d as i32,
            traditional,
            base: Some(10000.0),
            scale: 0.5,
            freqs: None,
        };
        let got = fast::rope(&arr(&x, &[1, 1, seq as i32, d as i32]), p, 5).unwrap();
        let want = host_rope(&x, seq, d, 10000.0, 0.5, 5, traditional);
        assert_close(&vals(&got), &want, 1e-4);
    }
}

#[test]
fn rope_with_per_sequence_offsets() {
    let (seq, d) = (2, 4);
    let x = randn(2 * seq * d, 8);
    let p = Rope {
        dims: d as i32,
        traditional: false,
        base: Some(500.0),
        scale: 1.0,
        freqs: None,
    };
    let offsets = Array::from_slice(&[3i32, 10], &[2]).unwrap();
    let got =
        vals(&fast::rope_offsets(&arr(&x, &[2, 1, seq as i32, d as i32]), p, &offsets).unwrap());
    let mut want = host_rope(&x[..seq * d], seq, d, 500.0, 1.0, 3, false);
    want.extend(host_rope(&x[seq * d..], seq, d, 500.0, 1.0, 10, false));
    assert_close(&got, &want, 1e-4);
}

#[test]
fn rope_with_custom_frequencies() {
    let (seq, d) = (2, 4);
    let x = randn(seq * d, 9);
    // freqs are inverse frequencies' reciprocals per MLX: theta = pos / freqs[i].
    let freqs = arr(&[1.0, 100.0], &[2]);
    let p = Rope {
        dims: d as i32,
        traditional: false,
        base: None,
        scale: 1.0,
        freqs: Some(&freqs),
    };
    let got = vals(&fast::rope(&arr(&x, &[1, 1, seq as i32, d as i32]), p, 2).unwrap());
    let mut want = x.clone();
    for t in 0..seq {
        for i in 0..2 {
            let theta = (2 + t) as f32 / [1.0f32, 100.0][i];
            let (s, c) = theta.sin_cos();
            let (xa, xb) = (x[t * d + i], x[t * d + i + 2]);
            want[t * d + i] = xa * c - xb * s;
            want[t * d + i + 2] = xb * c + xa * s;
        }
    }
    assert_close(&got, &want, 1e-4);
}

/// Host attention for q `[Hq, L, D]`, k/v `[Hkv, S, D]`, with a boolean mask and optional sinks.
fn host_attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    (hq, hkv, l, s, d): (usize, usize, usize, usize, usize),
    scale: f32,
    allowed: &dyn Fn(usize, usize) -> bool,
    sinks: Option<&[f32]>,
) -> Vec<f32> {
    let mut out = vec![0.0; hq * l * d];
    for h in 0..hq {
        let kh = h / (hq / hkv);
        for i in 0..l {
            let mut logits: Vec<f32> = (0..s)
                .map(|j| {
                    if !allowed(i, j) {
                        return f32::NEG_INFINITY;
                    }
                    (0..d)
                        .map(|e| q[(h * l + i) * d + e] * k[(kh * s + j) * d + e])
                        .sum::<f32>()
                        * scale
                })
                .collect();
            let sink = sinks.map(|s| s[h]);
            let m = logits
                .iter()
                .copied()
                .chain(sink)
                .fold(f32::NEG_INFINITY, f32::max);
            logits.iter_mut().for_each(|x| *x = (*x - m).exp());
            let denom: f32 = logits.iter().sum::<f32>() + sink.map_or(0.0, |s| (s - m).exp());
            for e in 0..d {
                out[(h * l + i) * d + e] = (0..s)
                    .map(|j| logits[j] * v[(kh * s + j) * d + e])
                    .sum::<f32>()
                    / denom;
            }
        }
    }
    out
}

#[test]
fn causal_grouped_query_attention() {
    let (hq, hkv, d) = (4, 2, 8);
    for (l, s) in [(5, 5), (2, 6)] {
        let q = randn(hq * l * d, 40 + l as u64);
        let k = randn(hkv * s * d, 41);
        let v = randn(hkv * s * d, 42);
        let scale = 1.0 / (d as f32).sqrt();
        let shape = |h: usize, n: usize| [1, h as i32, n as i32, d as i32];
        let got = fast::scaled_dot_product_attention(
            &arr(&q, &shape(hq, l)),
            &arr(&k, &shape(hkv, s)),
            &arr(&v, &shape(hkv, s)),
            scale,
            Mask::Causal,
            None,
        )
        .unwrap();
        // Causal with fewer queries than keys aligns the queries to the end.
        let want = host_attention(
            &q,
            &k,
            &v,
            (hq, hkv, l, s, d),
            scale,
            &|i, j| j <= i + s - l,
            None,
        );
        assert_close(&vals(&got), &want, 1e-4);
    }
}

#[test]
fn attention_with_explicit_mask_and_sinks() {
    let (hq, hkv, l, s, d) = (2, 1, 3, 4, 4);
    let q = randn(hq * l * d, 50);
    let k = randn(hkv * s * d, 51);
    let v = randn(hkv * s * d, 52);
    let allowed = |i: usize, j: usize| (i + j) % 3 != 1;
    let mask: Vec<bool> = (0..l * s).map(|x| allowed(x / s, x % s)).collect();
    let mask = Array::from_slice(&mask, &[1, 1, l as i32, s as i32]).unwrap();
    let sinks = [0.5f32, -1.0];
    let shape = |h: usize, n: usize| [1, h as i32, n as i32, d as i32];
    let (qa, ka, va) = (
        arr(&q, &shape(hq, l)),
        arr(&k, &shape(hkv, s)),
        arr(&v, &shape(hkv, s)),
    );
    let got =
        fast::scaled_dot_product_attention(&qa, &ka, &va, 0.7, Mask::Array(&mask), None).unwrap();
    let want = host_attention(&q, &k, &v, (hq, hkv, l, s, d), 0.7, &allowed, None);
    assert_close(&vals(&got), &want, 1e-4);
    let sinks_arr = arr(&sinks, &[2]);
    let got = fast::scaled_dot_product_attention(
        &qa,
        &ka,
        &va,
        0.7,
        Mask::Array(&mask),
        Some(&sinks_arr),
    )
    .unwrap();
    let want = host_attention(&q, &k, &v, (hq, hkv, l, s, d), 0.7, &allowed, Some(&sinks));
    assert_close(&vals(&got), &want, 1e-4);
}

#[test]
fn gated_delta_update_matches_the_recurrence() {
    // q,k: [B,T,H,Dk]; v: [B,T,H,Dv]; g, beta: [B,T,H]; state: [B,H,Dv,Dk].
    let (t_len, h, dk, dv) = (3, 2, 4, 3);
    let q = randn(t_len * h * dk, 60);
    let k = randn(t_len * h * dk, 61);
    let v = randn(t_len * h * dv, 62);
    let g: Vec<f32> = randn(t_len * h, 63).iter().map(|x| 0.5 + 0.4 * x).collect();
    let beta: Vec<f32> = randn(t_len * h, 64).iter().map(|x| 0.5 + 0.5 * x).collect();
    let (y, state) = fast::gated_delta_update(
        &arr(&q, &[1, t_len as i32, h as i32, dk as i32]),
        &arr(&k, &[1, t_len as i32, h as i32, dk as i32]),
        &arr(&v, &[1, t_len as i32, h as i32, dv as i32]),
        &arr(&g, &[1, t_len as i32, h as i32]),
        &arr(&beta, &[1, t_len as i32, h as i32]),
        None,
        None,
    )
    .unwrap();
    let mut s = vec![0.0f32; h * dv * dk];
    let mut want_y = vec![0.0f32; t_len * h * dv];
    for t in 0..t_len {
        for hh in 0..h {
            let st = &mut s[hh * dv * dk..(hh + 1) * dv * dk];
            let kt = &k[(t * h + hh) * dk..][..dk];
            let qt = &q[(t * h + hh) * dk..][..dk];
            let vt = &v[(t * h + hh) * dv..][..dv];
            st.iter_mut().for_each(|x| *x *= g[t * h + hh]);
            for i in 0..dv {
                let kv: f32 = (0..dk).map(|j| st[i * dk + j] * kt[j]).sum();
                let delta = (vt[i] - kv) * beta[t * h + hh];
                for j in 0..dk {
                    st[i * dk + j] += kt[j] * delta;
                }
                want_y[(t * h + hh) * dv + i] = (0..dk).map(|j| st[i * dk + j] * qt[j]).sum();
            }
        }
    }
    assert_close(&vals(&y), &want_y, 1e-4);
    assert_close(&vals(&state), &s, 1e-4);
}
