//! Tiny random llama / qwen2 / qwen3 models, written as GGUF the way llama.cpp's converter
//! does (tensor names, metadata, llama's Q/K permutation, real tokenizers as `tokenizer.ggml.*`),
//! converted back by rmx-gguf: mlx-lm must give the same logits as on the original weights, and
//! the rebuilt tokenizer the same ids as the real one.
#![allow(clippy::unwrap_used)]

mod common;

use common::{fixtures, run_python, script};
use rmx_gguf::{convert, NoProgress, Quant};
use serde_json::Value;

fn round_trip(arch: &str, tokenizer: &str) {
    let dir = tempfile::tempdir().unwrap();
    let tok_dir = fixtures().join("npm").join(tokenizer).join("models");
    run_python(&[
        script("make_tiny_gguf.py").as_os_str(),
        arch.as_ref(),
        tok_dir.as_os_str(),
        dir.path().as_os_str(),
    ]);
    let ours = dir.path().join("converted");
    let summary = convert(
        &dir.path().join("model.gguf"),
        &ours,
        Quant::Bf16,
        &mut NoProgress,
    )
    .unwrap();
    assert_eq!(summary.model_type, arch);

    let out = run_python(&[
        script("compare_models.py").as_os_str(),
        ours.as_os_str(),
        dir.path().join("reference").as_os_str(),
    ]);
    let result: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(result["max_logit_diff"], 0.0, "{arch}: {result}");
    assert_eq!(result["tokens_equal"], true, "{arch}: {result}");
}

#[test]
fn llama_round_trip_with_llama3_tokenizer() {
    round_trip("llama", "tokenizer-llama3_1");
}

#[test]
fn qwen2_round_trip_with_qwen_tokenizer() {
    round_trip("qwen2", "tokenizer-qwen3");
}

#[test]
fn qwen3_round_trip_with_qwen_tokenizer() {
    round_trip("qwen3", "tokenizer-qwen3");
}
