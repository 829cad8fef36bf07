//! Tiny random-weight embedding models (BERT, XLM-R, ModernBERT, Qwen3-Embedding) laid out as
//! their MLX conversions are, and reference vectors computed on them by mlx-embeddings' own
//! model code, through `py/tiny_encoders.py`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::python;

fn script() -> PathBuf {
    crate::py("tiny_encoders.py")
}

fn run(args: &[&str]) {
    let out = Command::new(python())
        .arg(script())
        .args(args)
        .output()
        .expect("run the reference python");
    assert!(
        out.status.success(),
        "tiny_encoders.py {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A tiny embedding model of `family` in form `quant` (f32, bf16, 8bit, 4bit), made on first
/// use and kept under target/test-models keyed by the generator's content.
pub fn encoder(family: &str, quant: &str) -> PathBuf {
    let dir = crate::models::generated_dir(&script(), "enc-", &format!("{family}-{quant}"));
    let lock = crate::models::building(&dir);
    let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
    if !dir.join("config.json").exists() {
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        run(&[
            "make",
            "--family",
            family,
            "--quant",
            quant,
            "--out",
            dir.to_str().unwrap(),
        ]);
    }
    dir
}

/// mlx-embeddings' answer for some inputs: each input's token ids, its vector computed alone,
/// and all of them as one padded batch.
pub struct EncoderReference {
    pub ids: Vec<Vec<u32>>,
    pub single: Vec<Vec<f32>>,
    pub batched: Vec<Vec<f32>>,
}

pub fn reference(model: &Path, inputs: &[&str]) -> EncoderReference {
    let dir = tempfile::tempdir().unwrap();
    let input_file = dir.path().join("inputs.json");
    std::fs::write(&input_file, serde_json::to_vec(inputs).unwrap()).unwrap();
    let out = dir.path().join("out.json");
    run(&[
        "reference",
        "--model",
        model.to_str().unwrap(),
        "--inputs",
        input_file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    let rows = |k: &str| -> Vec<Vec<f64>> { serde_json::from_value(v[k].clone()).unwrap() };
    let f32s = |k: &str| -> Vec<Vec<f32>> {
        rows(k)
            .into_iter()
            .map(|r| r.into_iter().map(|x| x as f32).collect())
            .collect()
    };
    EncoderReference {
        ids: rows("ids")
            .into_iter()
            .map(|r| r.into_iter().map(|x| x as u32).collect())
            .collect(),
        single: f32s("single"),
        batched: f32s("batched"),
    }
}

/// Cosine similarity of two vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    (dot / (na * nb).max(1e-30)) as f32
}
