//! Ollama's embedding routes: `POST /api/embed` (one input or several, vectors normalized) and
//! the older `POST /api/embeddings` (one prompt). Either without an input only loads the model.

use serde::{Deserialize, Serialize};

use crate::keep_alive::KeepAlive;

/// `input`: one text or several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EmbedInput {
    One(String),
    Many(Vec<String>),
}

impl EmbedInput {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            EmbedInput::One(s) => vec![s],
            EmbedInput::Many(v) => v,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbedRequest {
    pub model: String,
    /// None, `""` or `[]`: load the model and answer with no vectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<EmbedInput>,
    /// Cut inputs longer than the model takes (the default); false refuses them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncate: Option<bool>,
    /// Keep each vector's first N values (then normalized again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<KeepAlive>,
    /// Accepted and not read: no sampling option changes an embedding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbedResponse {
    pub model: String,
    /// One unit-length vector per input, in order.
    pub embeddings: Vec<Vec<f32>>,
    /// Nanoseconds, as Ollama counts them.
    #[serde(default)]
    pub total_duration: u64,
    #[serde(default)]
    pub load_duration: u64,
    /// The tokens the model read, all inputs together.
    #[serde(default)]
    pub prompt_eval_count: usize,
}

/// `POST /api/embeddings`, the route Ollama had first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingsRequest {
    pub model: String,
    /// Empty: load the model and answer with an empty vector.
    #[serde(default)]
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<KeepAlive>,
    /// Accepted and not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingsResponse {
    /// The model's vector as it computes it (not normalized again, unlike `/api/embed`).
    pub embedding: Vec<f32>,
}
