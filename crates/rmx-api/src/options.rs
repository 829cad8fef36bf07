//! Sampling and length options of `/api/generate` and `/api/chat`, under Ollama's names.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Options {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_p: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_penalty: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Most tokens to generate; negative or absent: until the context is full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_predict: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// rmx's own fields: a quantized KV cache, speculative decoding.
    #[serde(flatten)]
    pub rmx: crate::extensions::RmxFields,
    /// rmx's own: close the model's thought after this many tokens (0: at once), so the
    /// answer starts; a thinking model only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<usize>,
}

/// Ollama's `think`: on or off, or an effort level (`"low"`, `"medium"`, `"high"`), which
/// turns thinking on, goes to the template as `reasoning_effort` and caps the thought.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Think {
    On(bool),
    Level(String),
}

impl Think {
    /// The levels Ollama takes.
    pub const LEVELS: [&'static str; 3] = ["low", "medium", "high"];

    pub fn enabled(&self) -> bool {
        match self {
            Think::On(on) => *on,
            Think::Level(_) => true,
        }
    }

    pub fn level(&self) -> Option<&str> {
        match self {
            Think::On(_) => None,
            Think::Level(l) => Some(l),
        }
    }
}
