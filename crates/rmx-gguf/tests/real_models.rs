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

/// Greedy completions of `prompt` by each model in `dirs` (which share one tokenizer); the
/// models after the first generate only `later_tokens` tokens, as they are the quantized ones,
/// which MLX's CPU backend runs slowly.
fn generate(dirs: &[&Path], prompt: &str, chat: bool, later_tokens: u32) -> Vec<String> {
    let mut args = vec![script("generate.py").into_os_string(), prompt.into()];
    args.extend(dirs.iter().map(|d| d.as_os_str().to_owned()));
    args.push("--later-max-tokens".into());
    args.push(later_tokens.to_string().into());
    if chat {
        args.push("--chat".into());
    }
    run_python(&args)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn smollm2_answers_paris() {
    let bf16 = converted("RMX_TEST_GGUF_SMOLLM2", Quant::Bf16);
    let q4 = converted("RMX_TEST_GGUF_SMOLLM2", Quant::Q4);
    let config = json(&bf16.join("config.json"));
    assert_eq!(config["model_type"], "llama");
    assert_eq!(config["num_key_value_heads"], 3);
    assert_eq!(config["tie_word_embeddings"], true);
    let tok_config = json(&bf16.join("tokenizer_config.json"));
    assert!(tok_config["chat_template"]
        .as_str()
        .unwrap()
        .contains("<|im_start|>"));
    assert_eq!(tok_config["eos_token"], "<|im_end|>");

    let texts = generate(&[&bf16, &q4], "What is the capital of France?", true, 2);
    eprintln!(
        "SmolLM2 bf16: {:?}\nSmolLM2 4-bit: {:?}",
        texts[0], texts[1]
    );
    assert!(
        texts[0].contains("Paris"),
        "SmolLM2 bf16 said {:?}",
        texts[0]
    );
    // A 135M model quantized twice (Q4_1, then MLX 4-bit) loses its facts; it must still run.
    assert!(!texts[1].trim().is_empty(), "SmolLM2 4-bit said nothing");
}

#[test]
fn gemma3_completes_paris() {
    let bf16 = converted("RMX_TEST_GGUF_GEMMA3", Quant::Bf16);
    let q8 = converted("RMX_TEST_GGUF_GEMMA3", Quant::Q8);
    let config = json(&bf16.join("config.json"));
    assert_eq!(config["model_type"], "gemma3_text");
    assert_eq!(config["sliding_window"], 512);
    assert_eq!(config["query_pre_attn_scalar"], 256);
    assert_eq!(config["rms_norm_eps"], 1e-6);
    assert_eq!(json(&q8.join("config.json"))["quantization"]["bits"], 8);

    let texts = generate(
        &[&bf16, &q8],
        "Q: What is the capital of France?\nA:",
        false,
        8,
    );
    for (what, text) in ["bf16", "8-bit"].iter().zip(&texts) {
        eprintln!("Gemma 3 {what}: {text:?}");
        assert!(
            text.contains("The capital of France is Paris."),
            "Gemma 3 {what} said {text:?}"
        );
    }
}

/// `check_quantized.py`'s summary for a quantized conversion against the bf16 one.
fn check_quantized(var: &'static str, quant: Quant, bits: &str) -> Value {
    let bf16 = converted(var, Quant::Bf16);
    let quantized = converted(var, quant);
    let out = run_python(&[
        script("check_quantized.py").as_os_str(),
        quantized.as_os_str(),
        bf16.as_os_str(),
        bits.as_ref(),
    ]);
    serde_json::from_str(out.trim()).unwrap()
}

/// Our 4-bit packing is MLX's own: quantizing our bf16 output with `mx.quantize` gives the very
/// same words, scales and biases.
#[test]
fn smollm2_4bit_is_exactly_mx_quantize() {
    let summary = check_quantized("RMX_TEST_GGUF_SMOLLM2", Quant::Q4, "4");
    // 30 layers × 7 projections + the embedding; 61 norms stay bf16.
    assert_eq!(summary["quantized"], 211, "{summary}");
    assert_eq!(summary["plain"], 61, "{summary}");
    assert_eq!(summary["mismatches"], serde_json::json!([]), "{summary}");
}

/// `--quant f32` keeps the GGUF's values whole: each tensor rounds to the bf16 conversion's, and
/// the model answers as the bf16 one does.
#[test]
fn smollm2_float32_keeps_the_gguf_values() {
    let bf16 = converted("RMX_TEST_GGUF_SMOLLM2", Quant::Bf16);
    let f32 = converted("RMX_TEST_GGUF_SMOLLM2", Quant::F32);
    let out = run_python(&[
        script("check_float32.py").as_os_str(),
        f32.as_os_str(),
        bf16.as_os_str(),
    ]);
    let summary: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(summary["tensors"], summary["bf16_tensors"], "{summary}");
    assert_eq!(summary["mismatches"], serde_json::json!([]), "{summary}");
    // Q4_1's values (an f16 scale and minimum per 32) mostly need more than bf16's 8 bits.
    assert!(
        summary["finer_than_bf16"].as_u64().unwrap() > 200,
        "{summary}"
    );
    let text = generate(&[&f32], "What is the capital of France?", true, 2).remove(0);
    eprintln!("SmolLM2 f32: {text:?}");
    assert!(text.contains("Paris"), "SmolLM2 f32 said {text:?}");
}

#[test]
fn gemma3_8bit_is_exactly_mx_quantize() {
    let summary = check_quantized("RMX_TEST_GGUF_GEMMA3", Quant::Q8, "8");
    // 18 layers × 7 projections + the embedding; 6 norms per layer + the final one stay bf16.
    assert_eq!(summary["quantized"], 127, "{summary}");
    assert_eq!(summary["plain"], 109, "{summary}");
    assert_eq!(summary["mismatches"], serde_json::json!([]), "{summary}");
}
