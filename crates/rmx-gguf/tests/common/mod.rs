//! Helpers shared by the integration tests: the reference Python, fixture paths, raw f32 files.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The reference tooling's python. Tests that need it fail (never skip) without it.
pub fn python() -> PathBuf {
    match std::env::var_os("RMX_TEST_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => panic!(
            "RMX_TEST_PYTHON is not set: run `. scripts/test-env.sh` (and `. scripts/fetch-gguf.sh` \
             for the real-model tests) before `cargo test -p rmx-gguf`"
        ),
    }
}

/// A real GGUF model from `scripts/fetch-gguf.sh`: `RMX_TEST_GGUF_SMOLLM2` / `RMX_TEST_GGUF_GEMMA3`.
pub fn real_gguf(var: &str) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{var} is not set: run `. scripts/test-env.sh && . scripts/fetch-gguf.sh` first")
    });
    assert!(
        path.is_file(),
        "{var}={} does not exist; rerun scripts/fetch-gguf.sh",
        path.display()
    );
    path
}

pub fn fixtures() -> PathBuf {
    PathBuf::from(std::env::var_os("RMX_TEST_FIXTURES").unwrap_or_else(|| {
        panic!("RMX_TEST_FIXTURES is not set: run `. scripts/test-env.sh` first")
    }))
}

/// A script from `tests/py/`.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(name)
}

/// Runs the reference python with `args`, panicking with its output if it fails; returns stdout.
pub fn run_python<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let out = Command::new(python())
        .args(args)
        .env("TOKENIZERS_PARALLELISM", "false")
        .output()
        .expect("cannot start RMX_TEST_PYTHON");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "python {:?} failed:\n{stdout}\n{}",
        args.iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

pub fn read_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Bitwise equality, reporting the first difference.
pub fn assert_same_f32(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!(
            "{what}: element {i} is {} but gguf-py says {}",
            got[i], want[i]
        );
    }
}
