//! The vision towers give mlx-vlm's features (issue #27): tiny random towers made with
//! mlx-vlm's own modules (tests/py/tiny_vlm.py `tower`) on two images of odd sizes through the
//! processor (rmx-vision's here, mlx-vlm's there; equal within 1e-5 in rmx-vision's tests).
//! - Qwen3.5's (Qwen3-VL's VisionModel: 2 blocks, heads padded for the fused attention, a 4x4
//!   position table interpolated up and down): f32 bit for bit; bf16 within 2 of its steps.
//! - Gemma 4's (VisionModel and embed_vision: 2 blocks, the 2-D rope, 2x2 pooling,
//!   standardized): the same bounds.

#![allow(clippy::unwrap_used)]

use std::process::Command;

use rmx_mlx::{Array, Dtype};
use rmx_models::ImageEncoder;
use rmx_vision::{decode, ImageProcessor, Limits};

/// rmx's features and mlx-vlm's, row-major `[rows, width]`, and the rows.
fn features(family: &str, quant: &str) -> (Vec<f32>, Vec<f32>, usize) {
    // Compared with Python's MLX bit for bit: float32 products as its Linux wheel makes them.
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    let dir = rmx_tests::target_tmp(&format!("{family}-tower-{quant}"));
    let _ = std::fs::remove_dir_all(&dir);
    let images = rmx_tests::images::two_pngs(&dir, 12345);
    let model = dir.join("model");
    let status = Command::new(rmx_tests::python())
        .arg(rmx_tests::py("tiny_vlm.py"))
        .args(["tower", "--family", family, "--quant", quant, "--out"])
        .arg(&model)
        .args(&images)
        .status()
        .expect("run tiny_vlm.py");
    assert!(status.success(), "tiny_vlm.py tower failed");
    let want: Vec<f32> = std::fs::read(model.join("features.f32"))
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(model.join("features.json")).unwrap()).unwrap();
    let rows = meta["shape"][0].as_u64().unwrap() as usize;

    let tower: Box<dyn ImageEncoder> = match family {
        "gemma4" => Box::new(rmx_models::vision::gemma4::load_tower(&model).unwrap()),
        _ => Box::new(rmx_models::vision::qwen_vl::load_tower(&model).unwrap()),
    };
    let processor = ImageProcessor::from_json(
        &std::fs::read_to_string(model.join("preprocessor_config.json")).unwrap(),
    )
    .unwrap();
    let mut pixels = Vec::new();
    let mut placeholders = 0;
    for (path, size) in images.iter().zip(meta["sizes"].as_array().unwrap()) {
        let img = decode(&std::fs::read(path).unwrap(), &Limits::default()).unwrap();
        let px = processor.pixel_values(&img);
        // The processor's sizes are mlx-vlm's.
        assert_eq!(
            (px.height as u64, px.width as u64),
            (size[0].as_u64().unwrap(), size[1].as_u64().unwrap())
        );
        tower.check_size(px.height, px.width).unwrap();
        placeholders += tower.placeholders(px.height, px.width);
        pixels.push(Array::from_slice(&px.data, &[3, px.height as i32, px.width as i32]).unwrap());
    }
    assert_eq!(placeholders, rows, "a placeholder per feature row");
    let got = tower
        .encode(&pixels)
        .unwrap()
        .astype(Dtype::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(got.len(), want.len());
    (got, want, rows)
}

fn worst(got: &[f32], want: &[f32]) -> (f32, usize) {
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .enumerate()
        .fold((0f32, 0), |m, (i, d)| if d > m.0 { (d, i) } else { m })
}

fn f32_bit_for_bit(family: &str) {
    let (got, want, rows) = features(family, "f32");
    // 45x61 and 70x20 pixels: 12 and 14 merged (pooled) patches.
    assert_eq!(rows, 26);
    let (d, at) = worst(&got, &want);
    assert!(
        d == 0.0,
        "|rmx - mlx-vlm| = {d} at {at} (rmx {}, mlx-vlm {})",
        got[at],
        want[at]
    );
}

fn bf16_within_two_steps(family: &str) {
    let (got, want, _) = features(family, "bf16");
    let (d, at) = worst(&got, &want);
    // One bf16 step at the value's size, twice (the features are O(1)).
    let step = want[at].abs().max(1.0) / 128.0;
    assert!(
        d <= 2.0 * step,
        "|rmx - mlx-vlm| = {d} at {at} (rmx {}, mlx-vlm {})",
        got[at],
        want[at]
    );
}

#[test]
fn qwen3_5_tower_f32_bit_for_bit() {
    f32_bit_for_bit("qwen3_5");
}

#[test]
fn qwen3_5_tower_bf16() {
    bf16_within_two_steps("qwen3_5");
}

#[test]
fn gemma4_tower_f32_bit_for_bit() {
    f32_bit_for_bit("gemma4");
}

#[test]
fn gemma4_tower_bf16() {
    bf16_within_two_steps("gemma4");
}
