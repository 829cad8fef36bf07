//! End to end: real GGUF models (from scripts/fetch-gguf.sh) converted by rmx-gguf, loaded and
//! run by Python mlx-lm. Each conversion runs once per test binary.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use common::{real_gguf, run_python, script};
use rmx_gguf::{convert, Progress, Quant};
use serde_json::Value;

/// Conversions done so far in this test binary: (model variable, format, directory).
type Converted = Mutex<Vec<(&'static str, Quant, PathBuf)>>;

/// Converts `var`'s model at `quant` into this test binary's scratch folder, once.
fn converted(var: &'static str, quant: Quant) -> PathBuf {
    static DONE: OnceLock<Converted> = OnceLock::new();
    // One lock for all conversions: on two cores, converting two models at once gains nothing.
    let mut done = DONE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, dir)) = done.iter().find(|(v, q, _)| *v == var && *q == quant) {
        return dir.clone();
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("rmx-gguf-{var}-{quant:?}").to_lowercase());
    let _ = std::fs::remove_dir_all(&dir);
    let mut tensors_seen = 0;
    let mut finished = false;
    let mut report = |p: Progress<'_>| match p {
        Progress::Tensor { .. } => tensors_seen += 1,
        Progress::Finished { .. } => finished = true,
        _ => {}
    };
    let summary = convert(&real_gguf(var), &dir, quant, &mut report).unwrap();
    assert_eq!(tensors_seen, summary.tensors);
    assert!(finished);
    done.push((var, quant, dir.clone()));
    dir
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn generate(dir: &Path, prompt: &str, chat: bool) -> String {
    let mut args = vec![
        script("generate.py").into_os_string(),
        dir.as_os_str().to_owned(),
        prompt.into(),
    ];
    if chat {
        args.push("--chat".into());
    }
    run_python(&args)
}

#[test]
fn smollm2_bf16_answers_paris() {
    let dir = converted("RMX_TEST_GGUF_SMOLLM2", Quant::Bf16);
    let config = json(&dir.join("config.json"));
    assert_eq!(config["model_type"], "llama");
    assert_eq!(config["num_key_value_heads"], 3);
    assert_eq!(config["tie_word_embeddings"], true);
    let tok_config = json(&dir.join("tokenizer_config.json"));
    assert!(tok_config["chat_template"]
        .as_str()
        .unwrap()
        .contains("<|im_start|>"));
    assert_eq!(tok_config["eos_token"], "<|im_end|>");

    let text = generate(&dir, "What is the capital of France?", true);
    eprintln!("SmolLM2 bf16: {text:?}");
    assert!(text.contains("Paris"), "SmolLM2 said {text:?}");
}

#[test]
fn gemma3_bf16_completes_paris() {
    let dir = converted("RMX_TEST_GGUF_GEMMA3", Quant::Bf16);
    let config = json(&dir.join("config.json"));
    assert_eq!(config["model_type"], "gemma3_text");
    assert_eq!(config["sliding_window"], 512);
    assert_eq!(config["query_pre_attn_scalar"], 256);
    assert_eq!(config["rms_norm_eps"], 1e-6);

    let text = generate(&dir, "Q: What is the capital of France?\nA:", false);
    eprintln!("Gemma 3 bf16: {text:?}");
    assert!(
        text.contains("The capital of France is Paris."),
        "Gemma 3 said {text:?}"
    );
}

#[test]
fn gemma3_8bit_completes_paris() {
    let dir = converted("RMX_TEST_GGUF_GEMMA3", Quant::Q8);
    let text = generate(&dir, "Q: What is the capital of France?\nA:", false);
    eprintln!("Gemma 3 8-bit: {text:?}");
    assert!(
        text.contains("The capital of France is Paris."),
        "Gemma 3 said {text:?}"
    );
}

/// Our 4-bit packing is MLX's own: quantizing our bf16 output with `mx.quantize` gives the very
/// same words, scales and biases; and mlx-lm loads and runs the result.
#[test]
fn smollm2_4bit_is_exactly_mx_quantize() {
    let bf16 = converted("RMX_TEST_GGUF_SMOLLM2", Quant::Bf16);
    let q4 = converted("RMX_TEST_GGUF_SMOLLM2", Quant::Q4);
    let out = run_python(&[
        script("check_quantized.py").as_os_str(),
        q4.as_os_str(),
        bf16.as_os_str(),
        "4".as_ref(),
    ]);
    let summary: Value = serde_json::from_str(out.trim()).unwrap();
    // 30 layers × 7 projections + the embedding; 61 norms stay bf16.
    assert_eq!(summary["quantized"], 211, "{summary}");
    assert_eq!(summary["plain"], 61, "{summary}");
    assert_eq!(summary["mismatches"], serde_json::json!([]), "{summary}");

    let text = generate(&q4, "What is the capital of France?", true);
    eprintln!("SmolLM2 4-bit: {text:?}");
    assert!(!text.trim().is_empty());
}
