//! Issue #20: a GGUF whose metadata holds 0xFFFFFFFF for a size or a token id used to convert
//! and then fail to load (or, for the layer count, build a config of four billion layers);
//! the conversion refuses it before writing anything, naming the key and why.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{fixtures, run_python, script};
use rmx_gguf::{convert, GgufError, NoProgress, Quant};

/// The tiny qwen3 GGUF of make_tiny_gguf.py, written into `dir`.
fn tiny_gguf(dir: &Path) -> PathBuf {
    let tok_dir = fixtures().join("npm/tokenizer-qwen3/models");
    run_python(&[
        script("make_tiny_gguf.py").as_os_str(),
        "qwen3".as_ref(),
        tok_dir.as_os_str(),
        dir.as_os_str(),
    ]);
    dir.join("model.gguf")
}

/// A copy of `gguf` whose 32-bit integer `key` holds 0xFFFFFFFF: GGUF stores a key as its
/// length (u64) and bytes, then the value's type (u32; 4 is UINT32) and the value.
fn with_max_u32(gguf: &Path, key: &str, out: &Path) {
    let mut bytes = std::fs::read(gguf).unwrap();
    let mut needle = (key.len() as u64).to_le_bytes().to_vec();
    needle.extend(key.as_bytes());
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .unwrap_or_else(|| panic!("no key {key}"))
        + needle.len();
    assert_eq!(
        bytes[at..at + 4],
        4u32.to_le_bytes(),
        "{key} is not a UINT32"
    );
    bytes[at + 4..at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(out, bytes).unwrap();
}

#[test]
fn issue_20_sizes_of_0xffffffff_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let gguf = tiny_gguf(dir.path());
    for key in [
        "qwen3.block_count",
        "qwen3.embedding_length",
        "qwen3.feed_forward_length",
        "qwen3.attention.head_count",
        "qwen3.attention.head_count_kv",
        "qwen3.context_length",
        "tokenizer.ggml.eos_token_id",
    ] {
        let broken = dir.path().join(format!("{key}.gguf"));
        with_max_u32(&gguf, key, &broken);
        let out = dir.path().join(format!("{key}-converted"));
        let err = convert(&broken, &out, Quant::Bf16, &mut NoProgress).unwrap_err();
        match &err {
            GgufError::Implausible {
                key: k, value, why, ..
            } => {
                assert_eq!(k, key, "{err}");
                assert_eq!(*value, u64::from(u32::MAX), "{err}");
                assert!(!why.is_empty(), "{err}");
            }
            other => panic!("{key}: {other}"),
        }
        assert!(err.to_string().contains("would not load"), "{err}");
        assert!(!out.exists(), "{key}: something was written");
    }
    // The file as written converts.
    let out = dir.path().join("converted");
    convert(&gguf, &out, Quant::Bf16, &mut NoProgress).unwrap();
}
