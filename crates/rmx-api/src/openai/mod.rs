//! OpenAI's wire format: Chat Completions, Completions, Embeddings, Models and the Responses
//! API, as the `openai` SDKs, Cursor, Codex CLI and Aider send and read them. One file per
//! endpoint, as in the daemon's `openai/` handlers; this file holds what they share (`stop`,
//! usage, errors).
//!
//! Requests are lenient where clients differ (unknown fields are ignored, `stop` may be a
//! string or a list, content may be a string or parts) and strict where a wrong value would
//! silently change the answer (a wrong type is an error naming the field). Responses skip
//! fields that are `None` so that what goes out is what OpenAI sends.

mod chat;
mod completions;
mod embeddings;
mod models;
mod responses;

pub use chat::*;
pub use completions::*;
pub use embeddings::*;
pub use models::*;
pub use responses::*;

use serde::{Deserialize, Serialize};

/// `stop`: one string or several.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum StopSequences {
    One(String),
    Many(Vec<String>),
}

impl StopSequences {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            StopSequences::One(s) => vec![s],
            StopSequences::Many(v) => v,
        }
    }
}

/// vLLM's `structured_outputs` (chat and completions): the answer is constrained to exactly
/// one of these. Not OpenAI's; vLLM's clients and SGLang-style tools send it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct StructuredOutputs {
    /// A JSON schema (an object, or a string holding one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<serde_json::Value>,
    /// A regular expression the whole answer matches (Rust `regex` syntax).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// The answer is exactly one of these strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<Vec<String>>,
    /// A grammar in llguidance's Lark dialect (`%json {...}` embeds a schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
    /// `true`: one JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_object: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct PromptTokensDetails {
    pub cached_tokens: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct CompletionTokensDetails {
    pub reasoning_tokens: usize,
    /// OpenAI's count for Predicted Outputs, here rmx's `speculative`: guessed tokens the
    /// model agreed with. Only on an answer that speculated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_prediction_tokens: Option<usize>,
    /// Guessed tokens the model refused (checked, then dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_prediction_tokens: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub total_tokens: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

/// `{"error": {...}}`, the body of every error response.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ErrorResponse {
    pub error: ErrorBody,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ErrorBody {
    pub message: String,
    /// `invalid_request_error`, `not_found_error`, `authentication_error`,
    /// `rate_limit_error`, `server_error`.
    #[serde(rename = "type")]
    pub kind: String,
    pub param: Option<String>,
    pub code: Option<String>,
}
