//! Tiny random-weight models written by mlx-lm itself, and mlx-lm's outputs on them, through
//! crates/rmx-models/tests/py/tiny_models.py run with the reference python.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn python() -> String {
    std::env::var("RMX_TEST_PYTHON").unwrap_or_else(|_| {
        panic!(
            "RMX_TEST_PYTHON is not set: these tests compare against mlx-lm. \
             Run scripts/test.sh (or `. scripts/test-env.sh` first)."
        )
    })
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn script() -> PathBuf {
    root().join("crates/rmx-models/tests/py/tiny_models.py")
}

/// Models are cached under target/, keyed by the generator's content, so a changed generator
/// makes new models.
pub fn model(family: &str, quant: &str) -> PathBuf {
    let src = std::fs::read(script()).expect("read tiny_models.py");
    let hash = src.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100000001b3)
    });
    let dir = root().join(format!("target/test-models/{hash:016x}/{family}-{quant}"));
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

pub fn run(args: &[&str]) -> String {
    let out = Command::new(python())
        .arg(script())
        .args(args)
        .output()
        .expect("run the reference python");
    assert!(
        out.status.success(),
        "tiny_models.py {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

pub struct Reference {
    pub prompt_ids: Vec<u32>,
    pub tokens: Vec<u32>,
    /// Step 0 and step 1 log-probabilities, `vocab` each.
    pub logprobs: Vec<Vec<f32>>,
}

/// mlx-lm's greedy output for a prompt (`chat`: through the chat template).
pub fn reference(model: &Path, prompt: &str, chat: bool, max_tokens: usize) -> Reference {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let logits = dir.path().join("logits.f32");
    let mt = max_tokens.to_string();
    let mut args = vec![
        "reference",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        prompt,
        "--max-tokens",
        &mt,
        "--out",
        json.to_str().unwrap(),
        "--logits",
        logits.to_str().unwrap(),
    ];
    if chat {
        args.push("--chat");
    }
    run(&args);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ids = |k: &str| -> Vec<u32> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    let raw = std::fs::read(&logits).unwrap();
    let floats: Vec<f32> = raw
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let vocab = floats.len() / 2;
    Reference {
        prompt_ids: ids("prompt_ids"),
        tokens: ids("tokens"),
        logprobs: vec![floats[..vocab].to_vec(), floats[vocab..].to_vec()],
    }
}
