//! The model routes: `/api/ps` (loaded), `/api/tags` (stored), `/api/show`, `/api/delete`,
//! `/api/version`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PsResponse {
    pub models: Vec<RunningModel>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunningModel {
    /// The name it was first asked for by.
    pub name: String,
    pub model: String,
    /// The folder it was loaded from.
    pub path: String,
    /// Bytes of weights (the memory estimate the budget counts).
    pub size: u64,
    /// "cpu", "gpu" (Metal / CUDA).
    pub processor: String,
    /// RFC 3339, or absent while in use / kept forever (see `until`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// What `rmx ps` prints in UNTIL: "4 minutes from now", "forever", "in use", "loading".
    pub until: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u64>,
    /// Requests running on it now.
    #[serde(default)]
    pub active: usize,
    /// Sequences its engine is prefilling or decoding now.
    #[serde(default)]
    pub running: usize,
    /// Prefilled sequences waiting for a row in the engine's full batch (`RMX_MAX_BATCH`).
    #[serde(default)]
    pub waiting: usize,
    /// rmx's own: bytes of the running sequences' KV caches (buffers grow in steps of 256
    /// positions), and what they would take unquantized; they differ when answers store the
    /// cache quantized (`--kv-bits`).
    #[serde(default)]
    pub kv_cache: u64,
    #[serde(default)]
    pub kv_cache_unquantized: u64,
    /// Its kinds of decoder layer and how a decode step runs each, in layer order
    /// ("20× attention + moe (MLX ops)"); empty while loading.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<String>,
    /// What it answers: "chat" or "embedding"; absent while it loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<ModelDetails>,
    /// How the model is split over processes, when the daemon runs under `rmx launch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<ModelSplit>,
}

/// A model spread over the ranks `rmx launch` started (docs/distributed.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelSplit {
    /// How many processes hold a share of it (rank 0 is the daemon).
    pub ranks: usize,
    /// "tensor" (every layer split) or "pipeline" (a range of layers a rank).
    pub mode: String,
    /// MLX's communication backend: "ring" or "nccl".
    pub backend: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TagsResponse {
    pub models: Vec<StoredModel>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredModel {
    pub name: String,
    pub model: String,
    pub modified_at: String,
    pub size: u64,
    #[serde(default)]
    pub complete: bool,
    /// What it answers ("chat", "embedding"), where the daemon knows: while it is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Absent when its files cannot tell (a partial download).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<ModelDetails>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub model: String,
}

/// What a model is, in Ollama's words (its `ModelDetails`): on `/api/show`, and on the entries
/// of `/api/tags` and `/api/ps`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelDetails {
    #[serde(default)]
    pub parent_model: String,
    /// How the weights are stored: "safetensors" (MLX's layout).
    #[serde(default)]
    pub format: String,
    /// config.json's `model_type` ("qwen3", "llama").
    #[serde(default)]
    pub family: String,
    #[serde(default)]
    pub families: Vec<String>,
    /// Ollama's spelling of the parameter count: "8.0B", "135.06M".
    #[serde(default)]
    pub parameter_size: String,
    /// "Q4" (4-bit affine), "MXFP4", "BF16", ...
    #[serde(default)]
    pub quantization_level: String,
}

/// `/api/show`: Ollama's fields (`model_info`, `details`, `template`, `capabilities`, ...), which
/// its clients require, plus rmx-store's description of the model (`info`) and whether the
/// daemon has it loaded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShowResponse {
    pub model: String,
    #[serde(default)]
    pub info: Value,
    /// The chat template (Jinja, as the model repo ships it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(default)]
    pub capabilities: Vec<String>,
    pub loaded: bool,
    /// GGUF-style keys, as Ollama names them: `general.architecture`,
    /// `general.parameter_count`, `<arch>.context_length`, `<arch>.embedding_length`,
    /// `<arch>.block_count`, `<arch>.attention.head_count`, ... Always present (the `ollama`
    /// Python client requires the key).
    #[serde(default)]
    pub model_info: serde_json::Map<String, Value>,
    #[serde(default)]
    pub details: ModelDetails,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_at: Option<String>,
    /// The defaults a request gets, one `name value` per line as a Modelfile writes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<String>,
    /// The model folder's license file, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VersionResponse {
    pub version: String,
}

/// Every error answer, and an error in the middle of a stream (as its last line).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorResponse {
    pub error: String,
}
