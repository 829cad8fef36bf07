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
    /// Its kinds of decoder layer and how a decode step runs each, in layer order
    /// ("20× attention + moe (MLX ops)"); empty while loading.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<String>,
    /// What it answers: "chat" or "embedding"; absent while it loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
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
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub model: String,
}

/// `/api/show`: rmx-store's description of the model (`info`) plus what the daemon knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShowResponse {
    pub model: String,
    #[serde(default)]
    pub info: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(default)]
    pub capabilities: Vec<String>,
    pub loaded: bool,
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
