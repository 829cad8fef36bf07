//! Broken and unsupported inputs fail with errors that name the file and the problem. These
//! build their GGUF bytes by hand, so they need no Python.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use rmx_gguf::{convert, GgufError, GgufFile, NoProgress, Quant};

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// A GGUF v3 file with `general.architecture` = `arch` and one tensor of ggml type `ty`
/// holding `data`, `n` elements long.
fn gguf_bytes(arch: &str, name: &str, ty: u32, n: u64, data: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes()); // tensors
    b.extend(1u64.to_le_bytes()); // kv pairs
    string(&mut b, "general.architecture");
    b.extend(8u32.to_le_bytes());
    string(&mut b, arch);
    string(&mut b, name);
    b.extend(1u32.to_le_bytes());
    b.extend(n.to_le_bytes());
    b.extend(ty.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    while !b.len().is_multiple_of(32) {
        b.push(0);
    }
    b.extend(data);
    b
}

fn write(dir: &Path, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join("t.gguf");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn reads_a_hand_written_file() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = [1.5f32, -2.0, 0.25, 8.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let path = write(dir.path(), &gguf_bytes("llama", "x.weight", 0, 4, &data));
    let gguf = GgufFile::open(&path).unwrap();
    assert_eq!(gguf.architecture().unwrap(), "llama");
    assert_eq!(gguf.data_offset() % 32, 0);
    assert_eq!(
        gguf.tensor_f32("x.weight").unwrap(),
        vec![1.5, -2.0, 0.25, 8.0]
    );
    let err = gguf.tensor_f32("nope").unwrap_err();
    assert!(matches!(err, GgufError::MissingTensor { .. }), "{err}");
}

#[test]
fn not_a_gguf() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), b"PK\x03\x04 this is a zip");
    let err = GgufFile::open(&path).unwrap_err();
    assert!(matches!(err, GgufError::BadMagic { .. }), "{err}");
    assert!(err.to_string().contains("t.gguf"), "{err}");
}

#[test]
fn truncated_header_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let full = gguf_bytes("llama", "x.weight", 0, 4, &[0u8; 16]);
    let path = write(dir.path(), &full[..40]);
    let err = GgufFile::open(&path).unwrap_err();
    assert!(matches!(err, GgufError::Malformed { .. }), "{err}");

    // Header intact, tensor data cut short: caught at open, naming the tensor.
    let path = write(dir.path(), &full[..full.len() - 4]);
    let err = GgufFile::open(&path).unwrap_err();
    assert!(err.to_string().contains("x.weight"), "{err}");
}

#[test]
fn absurd_lengths_do_not_allocate() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(u64::MAX.to_le_bytes()); // key length
    let err = GgufFile::open(write(dir.path(), &b)).unwrap_err();
    assert!(matches!(err, GgufError::Malformed { .. }), "{err}");
}

#[test]
fn unsupported_version() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = gguf_bytes("llama", "x.weight", 0, 4, &[0u8; 16]);
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    let err = GgufFile::open(write(dir.path(), &b)).unwrap_err();
    assert!(
        matches!(err, GgufError::UnsupportedVersion { version: 1, .. }),
        "{err}"
    );
}

#[test]
fn unsupported_tensor_type_is_named() {
    let dir = tempfile::tempdir().unwrap();
    // Q2_K (ggml type 10): 256 elements in 84 bytes; readable as bytes, not dequantizable.
    let path = write(
        dir.path(),
        &gguf_bytes("llama", "token_embd.weight", 10, 256, &[0u8; 84]),
    );
    let gguf = GgufFile::open(&path).unwrap();
    assert_eq!(gguf.tensor_bytes("token_embd.weight").unwrap().len(), 84);
    let err = gguf.tensor_f32("token_embd.weight").unwrap_err();
    assert!(
        matches!(&err, GgufError::UnsupportedTensorType { tensor, ggml_type, .. } if tensor == "token_embd.weight" && ggml_type == "Q2_K"),
        "{err}"
    );
    // The conversion refuses before writing any weights.
    let out = dir.path().join("out");
    let err = convert(&path, &out, Quant::Bf16, &mut NoProgress).unwrap_err();
    assert!(
        matches!(err, GgufError::UnsupportedTensorType { .. }),
        "{err}"
    );
    assert!(!out.join("model.safetensors").exists());
}

#[test]
fn unsupported_architecture() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        &gguf_bytes("mamba", "x.weight", 0, 4, &[0u8; 16]),
    );
    let err = convert(&path, &dir.path().join("out"), Quant::Bf16, &mut NoProgress).unwrap_err();
    assert!(
        matches!(&err, GgufError::UnsupportedArchitecture { arch, .. } if arch == "mamba"),
        "{err}"
    );
}
