//! `POST /api/generate`: one prompt, completed; streamed as ndjson unless `stream: false`.
//!
//! A request with neither a prompt nor a system message only loads the model, or with
//! `keep_alive: 0` unloads it (what `rmx stop` sends): the answer is one final chunk with
//! `done_reason` "load", "unload", or "not_loaded" when there was nothing to unload.

use serde::{Deserialize, Serialize};

use crate::keep_alive::KeepAlive;
use crate::options::Options;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerateRequest {
    pub model: String,
    #[serde(default)]
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Send the prompt as-is, without the chat template.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub raw: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think: Option<crate::options::Think>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<KeepAlive>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Options>,
    /// `"json"`: the answer is constrained to one JSON object; a JSON schema: to a value valid
    /// against it (`docs/api.md` lists what is enforced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<serde_json::Value>,
    /// Base64 images (PNG, JPEG, WebP, GIF) for vision models.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
}

/// One ndjson line of the answer. The last one has `done: true` and the statistics.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerateResponse {
    pub model: String,
    pub created_at: String,
    #[serde(default)]
    pub response: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    pub done: bool,
    #[serde(flatten)]
    pub stats: Option<DoneStats>,
}

/// What the final chunk adds. Durations are nanoseconds, as Ollama reports them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DoneStats {
    /// "stop", "length", "tool_calls", "cancelled" (the daemon shut down), "load", "unload".
    pub done_reason: String,
    #[serde(default)]
    pub total_duration: u64,
    #[serde(default)]
    pub load_duration: u64,
    #[serde(default)]
    pub prompt_eval_count: usize,
    #[serde(default)]
    pub prompt_eval_duration: u64,
    #[serde(default)]
    pub eval_count: usize,
    #[serde(default)]
    pub eval_duration: u64,
    /// rmx's own, when the request speculated: tokens guessed, and how many the model agreed
    /// with (each agreed guess is a token that cost no forward pass of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_draft_tokens: Option<usize>,
    /// rmx's own: why a request that asked to speculate did not (the model's cache cannot be
    /// rolled back, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation_off: Option<String>,
}

impl DoneStats {
    /// Generated tokens per second after the first token (which ends the prefill).
    pub fn eval_rate(&self) -> f64 {
        self.eval_count.saturating_sub(1) as f64 / (self.eval_duration as f64 / 1e9).max(1e-9)
    }

    pub fn prompt_eval_rate(&self) -> f64 {
        self.prompt_eval_count as f64 / (self.prompt_eval_duration as f64 / 1e9).max(1e-9)
    }
}
