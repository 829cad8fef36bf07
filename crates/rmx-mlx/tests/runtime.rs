//! Errors, randomness, file I/O, evaluation, compilation, memory, devices and threads.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design
mod common;

use common::*;
use rmx_mlx::{io, random, Array, Backend, Dtype, Error, Kernel, KernelLang};

#[test]
fn cxx_exception_becomes_err_naming_the_op() {
    let a = arr(&[1.0; 6], &[2, 3]);
    let b = arr(&[1.0; 8], &[4, 2]);
    match a.matmul(&b) {
        Err(Error::Mlx { op, message }) => {
            assert_eq!(op, "matmul");
            assert!(!message.is_empty());
        }
        other => panic!("expected an MLX error, got {other:?}"),
    }
    let err = a.reshape(&[7]).unwrap_err().to_string();
    assert!(err.starts_with("MLX reshape:"), "{err}");
    let err = io::load_safetensors(std::path::Path::new("/nonexistent/x.safetensors")).unwrap_err();
    assert!(err.to_string().contains("load_safetensors"), "{err}");
}

#[test]
fn kernel_for_a_missing_backend_is_an_error_not_an_abort() {
    // This machine's runtime has no Metal; building or launching must fail cleanly.
    if rmx_mlx::backend() == Backend::Metal {
        return;
    }
    let x = arr(&[1.0, 2.0], &[2]);
    let result = Kernel::new(
        KernelLang::Metal,
        "double",
        &["x"],
        &["y"],
        "y[0] = x[0] * 2;",
        "",
    )
    .and_then(|k| {
        k.launch(&rmx_mlx::Launch {
            inputs: &[&x],
            output_shapes: &[&[2]],
            output_dtypes: &[Dtype::F32],
            grid: [2, 1, 1],
            threadgroup: [2, 1, 1],
            template: &[],
            init_value: None,
        })
    })
    .and_then(|out| out[0].eval());
    assert!(result.is_err());
}

#[test]
fn random_is_reproducible_per_key() {
    let k = random::key(42).unwrap();
    let a = vals(&random::uniform(0.0, 1.0, &[100], Dtype::F32, Some(&k)).unwrap());
    let b = vals(
        &random::uniform(
            0.0,
            1.0,
            &[100],
            Dtype::F32,
            Some(&random::key(42).unwrap()),
        )
        .unwrap(),
    );
    assert_eq!(a, b);
    assert!(a.iter().all(|v| (0.0..1.0).contains(v)));
    let c = vals(
        &random::uniform(
            0.0,
            1.0,
            &[100],
            Dtype::F32,
            Some(&random::key(43).unwrap()),
        )
        .unwrap(),
    );
    assert_ne!(a, c);
    let keys = random::split(&k, 3).unwrap();
    assert_eq!(keys.shape(), vec![3, 2]);
    let n = vals(&random::normal(&[2000], Dtype::F32, 1.0, 2.0, Some(&k)).unwrap());
    let mean = n.iter().sum::<f32>() / n.len() as f32;
    assert!((mean - 1.0).abs() < 0.2, "{mean}");
}

#[test]
fn categorical_follows_the_distribution() {
    // logits for p = [0.1, 0.0, 0.9]: index 1 never, index 2 about 90%.
    let logits = arr(&[0.1f32.ln(), f32::NEG_INFINITY, 0.9f32.ln()], &[1, 3])
        .broadcast_to(&[4000, 3])
        .unwrap();
    let s = random::categorical(&logits, -1, Some(&random::key(7).unwrap()))
        .unwrap()
        .to_vec::<u32>()
        .unwrap();
    let twos = s.iter().filter(|&&i| i == 2).count() as f32 / s.len() as f32;
    assert!(!s.contains(&1));
    assert!((twos - 0.9).abs() < 0.03, "{twos}");
}

#[test]
fn safetensors_roundtrip_with_metadata() {
    let dir = tempdir();
    let path = dir.join("t.safetensors");
    let a = arr(&[1.0, 2.0, 3.0], &[3]).astype(Dtype::Bf16).unwrap();
    let b = Array::from_slice(&[7u32, 8], &[2]).unwrap();
    io::save_safetensors(&path, &[("a", &a), ("b", &b)], &[("format", "mlx")]).unwrap();
    let t = io::load_safetensors(&path).unwrap();
    let get = |n: &str| &t.tensors.iter().find(|(k, _)| k == n).unwrap().1;
    assert_eq!(get("a").dtype(), Dtype::Bf16);
    assert_eq!(vals(get("a")), vec![1.0, 2.0, 3.0]);
    assert_eq!(get("b").to_vec::<u32>().unwrap(), vec![7, 8]);
    assert_eq!(t.metadata, vec![("format".to_string(), "mlx".to_string())]);
}

/// A minimal GGUF v3 file: one string metadata entry and one F32 tensor.
fn write_gguf(path: &std::path::Path) {
    let mut f = Vec::new();
    let s = |f: &mut Vec<u8>, x: &str| {
        f.extend((x.len() as u64).to_le_bytes());
        f.extend(x.as_bytes());
    };
    f.extend(b"GGUF");
    f.extend(3u32.to_le_bytes());
    f.extend(1u64.to_le_bytes()); // tensors
    f.extend(1u64.to_le_bytes()); // kv
    s(&mut f, "general.name");
    f.extend(8u32.to_le_bytes()); // string
    s(&mut f, "tiny");
    s(&mut f, "w");
    f.extend(2u32.to_le_bytes()); // n_dims
    f.extend(3u64.to_le_bytes()); // ne0 (fastest)
    f.extend(2u64.to_le_bytes()); // ne1
    f.extend(0u32.to_le_bytes()); // F32
    f.extend(0u64.to_le_bytes()); // offset
    while f.len() % 32 != 0 {
        f.push(0);
    }
    for v in [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0] {
        f.extend(v.to_le_bytes());
    }
    std::fs::write(path, f).unwrap();
}

#[test]
fn gguf_loads() {
    let dir = tempdir();
    let path = dir.join("t.gguf");
    write_gguf(&path);
    let t = io::load_gguf(&path).unwrap();
    let (name, w) = &t.tensors[0];
    assert_eq!(name, "w");
    assert_eq!(w.shape(), vec![2, 3]);
    assert_eq!(vals(w), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert!(t
        .metadata
        .contains(&("general.name".to_string(), "tiny".to_string())));
}

#[test]
fn eval_and_async_eval() {
    let a = arr(&[1.0, 2.0], &[2]).multiply_scalar(3.0).unwrap();
    let b = a.add_scalar(1.0).unwrap();
    rmx_mlx::async_eval(&[&a, &b]).unwrap();
    rmx_mlx::eval(&[&b]).unwrap();
    assert_eq!(vals(&b), vec![4.0, 7.0]);
}

#[test]
fn compile_traces_once_and_replays() {
    use std::cell::Cell;
    use std::rc::Rc;
    let traces = Rc::new(Cell::new(0));
    let t = traces.clone();
    let f = rmx_mlx::compile(
        move |x| {
            t.set(t.get() + 1);
            Ok(vec![x[0].multiply_scalar(2.0)?.add(&x[1])?.exp()?])
        },
        false,
    )
    .unwrap();
    let (a, b) = (arr(&[0.0, 1.0], &[2]), arr(&[1.0, -1.0], &[2]));
    let out = f.call(&[&a, &b]).unwrap();
    assert_close(&vals(&out[0]), &[1f32.exp(), 1f32.exp()], 1e-6);
    let out = f.call(&[&b, &a]).unwrap();
    assert_close(&vals(&out[0]), &[2f32.exp(), (-1f32).exp()], 1e-6);
    // MLX (Python too) may retrace once while it settles the cache entry; after that it replays.
    let settled = traces.get();
    for _ in 0..3 {
        f.call(&[&a, &b]).unwrap()[0].eval().unwrap();
    }
    assert_eq!(traces.get(), settled, "same shapes must reuse the trace");
    // An error inside the traced function surfaces as Err.
    let bad = rmx_mlx::compile(|x| Ok(vec![x[0].reshape(&[5])?]), false).unwrap();
    assert!(bad.call(&[&a]).is_err());
}

#[test]
fn memory_counters_move() {
    let before = rmx_mlx::active_memory();
    let a = Array::ones(&[1024, 1024], Dtype::F32).unwrap();
    a.eval().unwrap();
    assert!(
        rmx_mlx::active_memory() >= before + 4 * 1024 * 1024 - 4096
            || rmx_mlx::peak_memory() >= 4 << 20
    );
    assert!(rmx_mlx::peak_memory() >= 4 << 20);
    let prev = rmx_mlx::set_cache_limit(1 << 30);
    rmx_mlx::set_cache_limit(prev);
    rmx_mlx::clear_cache();
}

#[test]
fn backend_and_version() {
    assert_eq!(
        rmx_mlx::backend(),
        Backend::Cpu,
        "this test suite runs on the CPU runtime"
    );
    let pinned = include_str!("../MLX_VERSION").trim();
    assert_eq!(rmx_mlx::mlx_version(), pinned);
    assert_eq!(rmx_mlx::BUILD_MLX_VERSION, pinned);
    let info = rmx_mlx::device_info_json(rmx_mlx::DeviceType::Cpu).unwrap();
    assert!(info.starts_with('{') && info.ends_with('}'), "{info}");
    assert_eq!(rmx_mlx::default_device(), rmx_mlx::DeviceType::Cpu);
}

#[test]
fn threads_each_own_their_arrays() {
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..20 {
                    let x = randn(16 * 16, t * 100 + i);
                    let a = arr(&x, &[16, 16]);
                    let got = vals(&a.matmul(&a).unwrap());
                    assert_close(&got, &host_matmul(&x, &x, 16, 16, 16), 1e-4);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread panicked");
    }
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "rmx-mlx-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}
