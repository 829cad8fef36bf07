//! Where the parity tests find their data and their reference.
//!
//! Both come from `scripts/test-env.sh`: `RMX_TEST_FIXTURES` holds the npm tokenizer
//! packages, `RMX_TEST_PYTHON` a python with transformers. A missing one fails the test, with
//! the command that sets them, rather than letting it pass without checking anything.
#![allow(dead_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The npm tokenizer packages, by the name after `tokenizer-`.
pub const TOKENIZERS: [&str; 6] = [
    "llama3_1",
    "qwen3",
    "gemma3",
    "deepseek_v3",
    "gptoss",
    "llama2",
];

fn env_path(name: &str) -> PathBuf {
    match std::env::var_os(name) {
        Some(value) if !value.is_empty() => PathBuf::from(value),
        _ => panic!(
            "{name} is not set: run the tests through scripts/test.sh \
             (or `. scripts/test-env.sh` first) so the reference data and python are there"
        ),
    }
}

pub fn tokenizer_dir(name: &str) -> PathBuf {
    let dir = env_path("RMX_TEST_FIXTURES")
        .join("npm")
        .join(format!("tokenizer-{name}"))
        .join("models");
    assert!(
        dir.join("tokenizer.json").is_file(),
        "{} has no tokenizer.json: run scripts/test-env.sh to fetch the npm fixtures",
        dir.display()
    );
    dir
}

pub fn data_path(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
}

/// Runs `tests/py/reference.py` on `request` and returns its answer.
pub fn reference(request: &Value) -> Value {
    let python = env_path("RMX_TEST_PYTHON");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/reference.py");
    let mut child = Command::new(&python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {}: {err}", python.display()));
    let input = serde_json::to_vec(request).expect("a JSON value serializes");
    child
        .stdin
        .take()
        .expect("stdin was piped")
        .write_all(&input)
        .expect("the reference script reads its request");
    let output = child.wait_with_output().expect("the reference script runs");
    assert!(
        output.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "{} wrote no JSON ({err}): {}",
            script.display(),
            String::from_utf8_lossy(&output.stdout)
        )
    })
}
