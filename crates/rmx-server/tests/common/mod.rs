//! Shared by the tests that drive the real `rmx` binary and its daemon: a tiny random Qwen3
//! (mlx-lm writes it; real Qwen3 tokenizer and chat template) and a throwaway rmx home with
//! its own socket, TCP port and model store.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[path = "../../../rmx-engine/tests/common/mod.rs"]
mod engine_common;

pub mod home;

use std::path::PathBuf;

/// A tiny random-weight Qwen3 in MLX format, built once and cached under target/. Fails with
/// a clear message when RMX_TEST_PYTHON (the venv with mlx-lm) is not set.
pub fn tiny_qwen3() -> PathBuf {
    tiny_model("qwen3", "bf16")
}

/// A tiny random-weight model of a family tiny_models.py knows, in MLX format, cached under
/// target/ like [`tiny_qwen3`].
pub fn tiny_model(family: &str, quant: &str) -> PathBuf {
    // Tests run in parallel threads, and the generator writes through one temp dir per model.
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
    let _ = engine_common::python();
    engine_common::model(family, quant)
}
