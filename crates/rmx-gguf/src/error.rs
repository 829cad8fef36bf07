//! One error type for the crate; every variant names the file or tensor it is about, because a
//! bare "unexpected end of file" from a 5 GB import is useless.

use std::path::PathBuf;

/// What went wrong while reading a GGUF file or writing the converted model.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("cannot read {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a GGUF file (magic {magic:?})")]
    BadMagic { path: PathBuf, magic: [u8; 4] },
    #[error("{path}: GGUF version {version} is not supported (only 2 and 3)")]
    UnsupportedVersion { path: PathBuf, version: u32 },
    #[error("{path}: malformed GGUF header: {detail}")]
    Malformed { path: PathBuf, detail: String },
    #[error("{path}: tensor `{tensor}` has type {ggml_type}, which cannot be dequantized")]
    UnsupportedTensorType {
        path: PathBuf,
        tensor: String,
        ggml_type: String,
    },
    #[error("{path}: no tensor named `{tensor}`")]
    MissingTensor { path: PathBuf, tensor: String },
    #[error("{path}: tensor `{tensor}`: {detail}")]
    BadTensor {
        path: PathBuf,
        tensor: String,
        detail: String,
    },
    #[error("{path}: metadata key `{key}` is missing or has the wrong type (want {want})")]
    Metadata {
        path: PathBuf,
        key: String,
        want: &'static str,
    },
    /// A size or id in the metadata that contradicts the tensors or no model could have.
    #[error(
        "{path}: metadata `{key}` = {value} cannot be right ({why}); the file is damaged or was \
         written wrong, so the model would not load"
    )]
    Implausible {
        path: PathBuf,
        key: String,
        value: u64,
        why: String,
    },
    #[error("{path}: architecture `{arch}` is not supported (llama, qwen2, qwen3, gemma3 are)")]
    UnsupportedArchitecture { path: PathBuf, arch: String },
    #[error("{path}: tokenizer model `{model}` is not supported (gpt2 and llama are)")]
    UnsupportedTokenizer { path: PathBuf, model: String },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode {path} as JSON")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

pub type Result<T, E = GgufError> = std::result::Result<T, E>;
