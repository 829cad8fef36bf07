//! Qwen3.5's mRoPE equals mlx-vlm's (issue #27): on a prompt with two images, the three-axis
//! positions and the decoding delta of `get_rope_index`, and the queries turned by
//! `Qwen3_5RotaryEmbedding` (partial rotary, interleaved sections), bit for bit in f32 and
//! bf16. Reference: tests/py/tiny_vlm.py `mrope`.

#![allow(clippy::unwrap_used)]

use std::process::Command;

use rmx_mlx::{Array, Dtype};
use rmx_models::mrope::{positions, MRope};

fn floats(path: &std::path::Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn check(dtype: &str) {
    // Compared with Python's MLX bit for bit: float32 products as its Linux wheel makes them.
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    let dir = rmx_tests::target_tmp(&format!("mrope-{dtype}"));
    let _ = std::fs::remove_dir_all(&dir);
    let status = Command::new(rmx_tests::python())
        .arg(rmx_tests::py("tiny_vlm.py"))
        .args(["mrope", "--dtype", dtype, "--out"])
        .arg(&dir)
        .status()
        .expect("run tiny_vlm.py");
    assert!(status.success(), "tiny_vlm.py mrope failed");
    let want: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("mrope.json")).unwrap()).unwrap();
    let ints = |v: &serde_json::Value| -> Vec<i32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap() as i32)
            .collect()
    };
    let ids = ints(&want["ids"]);
    let grids: Vec<(i32, i32)> = want["grids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let g = ints(g);
            (g[0], g[1])
        })
        .collect();
    let image = want["image"].as_i64().unwrap() as i32;
    let start = want["start"].as_i64().unwrap() as i32;
    let p = positions(&ids, &grids, image, start, 2).unwrap();
    for (a, axis) in p.axes.iter().enumerate() {
        assert_eq!(axis, &ints(&want["positions"][a]), "axis {a}");
    }
    assert_eq!(p.delta, want["delta"].as_i64().unwrap() as i32);

    let l = ids.len() as i32;
    let dt = if dtype == "f32" {
        Dtype::F32
    } else {
        Dtype::Bf16
    };
    let q = Array::from_slice(&floats(&dir.join("q.f32")), &[1, 2, l, 32])
        .unwrap()
        .astype(dt)
        .unwrap();
    let rope = MRope::interleaved(16, 1e7, [3, 3, 2]).unwrap();
    let axes = [&p.axes[0][..], &p.axes[1][..], &p.axes[2][..]];
    let got = rope
        .rotate(&q, axes)
        .unwrap()
        .astype(Dtype::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let want = floats(&dir.join("rotated.f32"));
    assert_eq!(got.len(), want.len());
    let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
    assert_eq!(
        differ,
        0,
        "{differ} of {} values differ from mlx-vlm's",
        got.len()
    );
}

#[test]
fn positions_and_rotation_equal_mlx_vlm_f32() {
    check("f32");
}

#[test]
fn positions_and_rotation_equal_mlx_vlm_bf16() {
    check("bf16");
}
