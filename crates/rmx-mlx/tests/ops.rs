//! Elementwise ops, reductions, ordering and shape ops against host arithmetic.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design
mod common;

use common::*;
use rmx_mlx::{concatenate, r#where, stack, Array, Dtype};

#[test]
fn arithmetic_and_comparisons() {
    let x = [1.0f32, -2.0, 3.5, 0.25];
    let y = [2.0f32, 2.0, -1.0, 4.0];
    let (a, b) = (arr(&x, &[4]), arr(&y, &[4]));
    let zip = |f: fn(f32, f32) -> f32| x.iter().zip(&y).map(|(p, q)| f(*p, *q)).collect::<Vec<_>>();
    assert_close(&vals(&a.add(&b).unwrap()), &zip(|p, q| p + q), 0.0);
    assert_close(&vals(&a.subtract(&b).unwrap()), &zip(|p, q| p - q), 0.0);
    assert_close(&vals(&a.multiply(&b).unwrap()), &zip(|p, q| p * q), 0.0);
    assert_close(&vals(&a.divide(&b).unwrap()), &zip(|p, q| p / q), 1e-7);
    assert_close(&vals(&a.maximum(&b).unwrap()), &zip(f32::max), 0.0);
    assert_close(&vals(&a.minimum(&b).unwrap()), &zip(f32::min), 0.0);
    assert_close(
        &vals(&a.abs().unwrap().power(&b).unwrap()),
        &zip(|p, q| p.abs().powf(q)),
        1e-6,
    );
    let cmp = |r: Array| r.to_vec::<bool>().unwrap();
    assert_eq!(cmp(a.less(&b).unwrap()), vec![true, true, false, true]);
    assert_eq!(
        cmp(a.greater_equal(&b).unwrap()),
        vec![false, false, true, false]
    );
    assert_eq!(cmp(a.equal(&a).unwrap()), vec![true; 4]);
    assert_eq!(cmp(a.not_equal(&b).unwrap()), vec![true; 4]);
    assert_eq!(cmp(a.greater(&b).unwrap()), vec![false, false, true, false]);
    assert_eq!(
        cmp(a.less_equal(&b).unwrap()),
        vec![true, true, false, true]
    );
    // Broadcasting against a scalar.
    assert_close(
        &vals(&a.add_scalar(1.0).unwrap()),
        &[2.0, -1.0, 4.5, 1.25],
        0.0,
    );
}

#[test]
fn transcendental_functions() {
    let x = [0.1f32, 0.5, 1.0, 2.0, 3.0];
    let a = arr(&x, &[5]);
    let map = |f: fn(f32) -> f32| x.iter().map(|v| f(*v)).collect::<Vec<_>>();
    assert_close(&vals(&a.exp().unwrap()), &map(f32::exp), 1e-6);
    assert_close(&vals(&a.log().unwrap()), &map(f32::ln), 1e-6);
    assert_close(&vals(&a.rsqrt().unwrap()), &map(|v| 1.0 / v.sqrt()), 1e-6);
    assert_close(&vals(&a.sqrt().unwrap()), &map(f32::sqrt), 1e-6);
    assert_close(
        &vals(&a.sigmoid().unwrap()),
        &map(|v| 1.0 / (1.0 + (-v).exp())),
        1e-6,
    );
    assert_close(&vals(&a.tanh().unwrap()), &map(f32::tanh), 1e-6);
    assert_close(
        &vals(&a.negative().unwrap().erf().unwrap()),
        &map(|v| host_erf(-v)),
        1e-5,
    );
    assert_close(&vals(&a.erf().unwrap()), &map(host_erf), 1e-5);
    assert_close(&vals(&a.square().unwrap()), &map(|v| v * v), 1e-7);
}

#[test]
fn where_selects() {
    let c = Array::from_slice(&[true, false, true], &[3]).unwrap();
    let r = r#where(
        &c,
        &arr(&[1.0, 2.0, 3.0], &[3]),
        &arr(&[-1.0, -2.0, -3.0], &[3]),
    )
    .unwrap();
    assert_eq!(vals(&r), vec![1.0, -2.0, 3.0]);
}

#[test]
fn reductions() {
    let x = [1.0f32, 5.0, -2.0, 4.0, 0.5, 3.0];
    let a = arr(&x, &[2, 3]);
    assert_close(&vals(&a.sum(&[1], false).unwrap()), &[4.0, 7.5], 1e-6);
    assert_close(&vals(&a.sum_all().unwrap()), &[11.5], 1e-6);
    assert_close(
        &vals(&a.mean(&[0], false).unwrap()),
        &[2.5, 2.75, 0.5],
        1e-6,
    );
    assert_eq!(a.max(&[1], true).unwrap().shape(), vec![2, 1]);
    assert_close(&vals(&a.max(&[1], false).unwrap()), &[5.0, 4.0], 0.0);
    assert_close(&vals(&a.min(&[1], false).unwrap()), &[-2.0, 0.5], 0.0);
    assert_eq!(
        a.argmax(1, false).unwrap().to_vec::<u32>().unwrap(),
        vec![1, 0]
    );
    let lse: Vec<f32> = x
        .chunks(3)
        .map(|r| r.iter().map(|v| v.exp()).sum::<f32>().ln())
        .collect();
    assert_close(&vals(&a.logsumexp(&[1], false).unwrap()), &lse, 1e-6);
    let sm: Vec<f32> = x
        .chunks(3)
        .flat_map(|r| {
            let s: f32 = r.iter().map(|v| v.exp()).sum();
            r.iter().map(move |v| v.exp() / s)
        })
        .collect();
    assert_close(&vals(&a.softmax(&[1], true).unwrap()), &sm, 1e-6);
}

#[test]
fn argmax_takes_the_first_of_ties() {
    // mlx-lm's greedy sampling relies on this.
    let a = arr(&[1.0, 3.0, 3.0, 2.0], &[4]);
    assert_eq!(a.argmax(0, false).unwrap().item::<u32>().unwrap(), 1);
}

#[test]
fn ordering_ops() {
    let x = [3.0f32, 1.0, 4.0, 1.5, 9.0, 2.0];
    let a = arr(&x, &[6]);
    assert_eq!(
        vals(&a.sort(0).unwrap()),
        vec![1.0, 1.5, 2.0, 3.0, 4.0, 9.0]
    );
    assert_eq!(
        a.argsort(0).unwrap().to_vec::<u32>().unwrap(),
        vec![1, 3, 5, 0, 2, 4]
    );
    let part = a.argpartition(2, 0).unwrap().to_vec::<u32>().unwrap();
    let kth = x[part[2] as usize];
    assert_eq!(kth, 2.0);
    assert!(part[..2].iter().all(|&i| x[i as usize] <= kth));
    assert!(part[3..].iter().all(|&i| x[i as usize] >= kth));
    let mut top = vals(&a.topk(2, 0).unwrap());
    top.sort_by(|p, q| p.total_cmp(q));
    assert_eq!(top, vec![4.0, 9.0]);
    assert_eq!(
        vals(&a.cumsum(0, false, true).unwrap()),
        vec![3.0, 4.0, 8.0, 9.5, 18.5, 20.5]
    );
    assert_eq!(vals(&a.cumsum(0, true, true).unwrap())[0], 20.5);
    assert_eq!(vals(&a.cumsum(0, false, false).unwrap())[0], 0.0);
}

#[test]
fn shape_ops() {
    let x: Vec<f32> = (0..24).map(|v| v as f32).collect();
    let a = arr(&x, &[2, 3, 4]);
    assert_eq!(a.reshape(&[6, -1]).unwrap().shape(), vec![6, 4]);
    let t = a.transpose(&[2, 0, 1]).unwrap();
    assert_eq!(t.shape(), vec![4, 2, 3]);
    assert_eq!(vals(&t)[..3], [0.0, 4.0, 8.0]);
    assert_eq!(a.swapaxes(0, 2).unwrap().shape(), vec![4, 3, 2]);
    let e = a.expand_dims(&[0, 2]).unwrap();
    assert_eq!(e.shape(), vec![1, 2, 1, 3, 4]);
    assert_eq!(e.squeeze(&[]).unwrap().shape(), vec![2, 3, 4]);
    assert_eq!(e.squeeze(&[0]).unwrap().shape(), vec![2, 1, 3, 4]);
    let m = arr(&[1.0, 2.0], &[2, 1]);
    assert_eq!(
        vals(&m.broadcast_to(&[2, 3]).unwrap()),
        vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    );
    assert_eq!(a.astype(Dtype::Bf16).unwrap().dtype(), Dtype::Bf16);
    assert_eq!(a.flatten().unwrap().shape(), vec![24]);
}

#[test]
fn concatenate_stack_split() {
    let a = arr(&[1.0, 2.0], &[1, 2]);
    let b = arr(&[3.0, 4.0], &[1, 2]);
    let c = concatenate(&[&a, &b], 0).unwrap();
    assert_eq!(c.shape(), vec![2, 2]);
    assert_eq!(vals(&c), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(stack(&[&a, &b], 0).unwrap().shape(), vec![2, 1, 2]);
    let parts = c.split(2, 1).unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!(vals(&parts[1]), vec![2.0, 4.0]);
    let x = arr(&(0..6).map(|v| v as f32).collect::<Vec<_>>(), &[6]);
    let parts = x.split_at(&[1, 4], 0).unwrap();
    assert_eq!(
        parts.iter().map(|p| p.size()).collect::<Vec<_>>(),
        vec![1, 3, 2]
    );
}

#[test]
fn slicing_and_updates() {
    let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let a = arr(&x, &[3, 4]);
    let s = a.slice(&[1, 0], &[3, 4], &[1, 2]).unwrap();
    assert_eq!(vals(&s), vec![4.0, 6.0, 8.0, 10.0]);
    assert_eq!(
        vals(&a.slice_axis(1, 1, 3).unwrap()),
        vec![1.0, 2.0, 5.0, 6.0, 9.0, 10.0]
    );
    let upd = arr(&[-1.0, -2.0], &[1, 2]);
    let u = a.slice_update(&upd, &[2, 1], &[3, 3], &[1, 1]).unwrap();
    assert_eq!(vals(&u)[8..], [8.0, -1.0, -2.0, 11.0]);
    // The original is untouched (functional update).
    assert_eq!(vals(&a)[9], 9.0);
    let start = Array::from_slice(&[1i32], &[1]).unwrap();
    let d = a.slice_dynamic(&start, &[0], &[1, 4]).unwrap();
    assert_eq!(vals(&d), vec![4.0, 5.0, 6.0, 7.0]);
    let row = arr(&[0.5; 4], &[1, 4]);
    let du = a.slice_update_dynamic(&row, &start, &[0]).unwrap();
    assert_eq!(vals(&du)[4..8], [0.5; 4]);
}

#[test]
fn gathers() {
    let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let a = arr(&x, &[3, 4]);
    let idx = Array::from_slice(&[2i32, 0], &[2]).unwrap();
    assert_eq!(
        vals(&a.take(&idx, 0).unwrap()),
        vec![8.0, 9.0, 10.0, 11.0, 0.0, 1.0, 2.0, 3.0]
    );
    assert_eq!(vals(&a.take_flat(&idx).unwrap()), vec![2.0, 0.0]);
    let along = Array::from_slice(&[3i32, 0, 1], &[3, 1]).unwrap();
    assert_eq!(
        vals(&a.take_along_axis(&along, 1).unwrap()),
        vec![3.0, 4.0, 9.0]
    );
    let put = a
        .put_along_axis(&along, &arr(&[-1.0, -1.0, -1.0], &[3, 1]), 1)
        .unwrap();
    assert_eq!(vals(&put)[3], -1.0);
}

#[test]
fn matmul_and_addmm() {
    let (m, k, n) = (3, 5, 4);
    let a = randn(m * k, 1);
    let b = randn(k * n, 2);
    let c = randn(m * n, 3);
    let want = host_matmul(&a, &b, m, k, n);
    let got = arr(&a, &[3, 5]).matmul(&arr(&b, &[5, 4])).unwrap();
    assert_close(&vals(&got), &want, 1e-5);
    let got = rmx_mlx::addmm(
        &arr(&c, &[3, 4]),
        &arr(&a, &[3, 5]),
        &arr(&b, &[5, 4]),
        2.0,
        0.5,
    )
    .unwrap();
    let want: Vec<f32> = want
        .iter()
        .zip(&c)
        .map(|(p, q)| 2.0 * p + 0.5 * q)
        .collect();
    assert_close(&vals(&got), &want, 1e-5);
}

#[test]
fn pad_fills() {
    let a = arr(&[1.0, 2.0], &[2]);
    let p = a
        .pad(&[0], &[1], &[2], &Array::scalar(0.0f32).unwrap())
        .unwrap();
    assert_eq!(vals(&p), vec![0.0, 1.0, 2.0, 0.0, 0.0]);
}
