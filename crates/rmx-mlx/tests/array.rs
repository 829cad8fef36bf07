//! Creation, read-back and element types.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design
mod common;

use common::*;
use rmx_mlx::{bf16, f16, Array, Dtype};

#[test]
fn roundtrip_every_host_type() {
    let f = [1.5f32, -2.0, 3.25, 0.0];
    assert_eq!(
        Array::from_slice(&f, &[2, 2])
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        f
    );
    let i = [1i32, -7, 1 << 30, 0];
    assert_eq!(
        Array::from_slice(&i, &[4])
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        i
    );
    let u = [1u32, 7, u32::MAX, 0];
    assert_eq!(
        Array::from_slice(&u, &[4])
            .unwrap()
            .to_vec::<u32>()
            .unwrap(),
        u
    );
    let b = [0u8, 255, 17];
    assert_eq!(
        Array::from_slice(&b, &[3]).unwrap().to_vec::<u8>().unwrap(),
        b
    );
    let h: Vec<f16> = f.iter().map(|&x| f16::from_f32(x)).collect();
    let a = Array::from_slice(&h, &[4]).unwrap();
    assert_eq!(a.dtype(), Dtype::F16);
    assert_eq!(a.to_vec::<f16>().unwrap(), h);
    let bf: Vec<bf16> = f.iter().map(|&x| bf16::from_f32(x)).collect();
    let a = Array::from_slice(&bf, &[4]).unwrap();
    assert_eq!(a.dtype(), Dtype::Bf16);
    assert_eq!(a.to_vec::<bf16>().unwrap(), bf);
    // Reading back converts the element type.
    assert_eq!(a.to_vec::<f32>().unwrap(), f);
}

#[test]
fn shape_size_and_scalars() {
    let a = Array::zeros(&[2, 3, 4], Dtype::Bf16).unwrap();
    assert_eq!(a.shape(), vec![2, 3, 4]);
    assert_eq!(a.size(), 24);
    assert_eq!(a.nbytes(), 48);
    assert_eq!(a.dim(-1), 4);
    assert_eq!(Array::scalar(3.5f32).unwrap().item::<f32>().unwrap(), 3.5);
    assert!(Array::from_slice(&[1.0f32, 2.0], &[3]).is_err());
    assert!(a.item::<f32>().is_err());
    let r = Array::arange(0.0, 5.0, 1.0, Dtype::I32).unwrap();
    assert_eq!(r.to_vec::<i32>().unwrap(), vec![0, 1, 2, 3, 4]);
    let full = Array::full(&[2], 7.0, Dtype::F32).unwrap();
    assert_eq!(vals(&full), vec![7.0, 7.0]);
}

#[test]
fn weak_scalars_keep_the_array_dtype() {
    // Python MLX: bf16_array * 0.5 stays bf16. Parity with mlx-lm depends on it.
    let a = Array::ones(&[3], Dtype::Bf16).unwrap();
    assert_eq!(a.multiply_scalar(0.5).unwrap().dtype(), Dtype::Bf16);
    let i = Array::arange(0.0, 3.0, 1.0, Dtype::I32).unwrap();
    assert_eq!(i.add_scalar(1.0).unwrap().dtype(), Dtype::I32);
    assert_eq!(i.multiply_scalar(0.5).unwrap().dtype(), Dtype::F32);
}

#[test]
fn display_prints_values() {
    let a = arr(&[1.0, 2.0], &[2]);
    let s = format!("{a}");
    assert!(s.contains('1') && s.contains('2'), "{s}");
    assert_eq!(format!("{a:?}"), "Array(shape=[2], dtype=F32)");
}
