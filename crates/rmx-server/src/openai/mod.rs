//! The OpenAI surface: `/v1/chat/completions`, `/v1/completions`, `/v1/responses`,
//! `/v1/embeddings` and `/v1/models`, each a translation into the service core and back.
//!
//! Only what the wire format needs lives here; prompt building, reasoning and tool-call
//! parsing are the core's. Streaming goes through [`crate::wire::sse`], errors through
//! [`OpenAiError`].

pub mod chat;
pub mod completions;
pub mod embeddings;
pub mod error;
pub mod models;
pub mod responses;
mod structured;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::routing::{get, post};
use axum::Router;
use rmx_engine::Usage as EngineUsage;
use serde_json::{Map, Value};

pub use error::OpenAiError;

use crate::service::{SamplingParams, Service};

pub fn routes() -> Router<Arc<Service>> {
    Router::new()
        .route("/v1/chat/completions", post(chat::handler))
        .route("/v1/completions", post(completions::handler))
        .route("/v1/responses", post(responses::handler))
        .route("/v1/embeddings", post(embeddings::handler))
        .route("/v1/models", get(models::list))
        .route("/v1/models/{*id}", get(models::get))
}

/// Seconds since the Unix epoch.
pub fn unix_time(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A fresh id with OpenAI's prefix for its kind (`chatcmpl`, `cmpl`, `resp`, `msg`, ...).
pub fn new_id(prefix: &str) -> String {
    let call = rmx_text::toolcall::random_call_id();
    format!("{prefix}-{}", call.trim_start_matches("call_"))
}

/// `reasoning_tokens`: the completion tokens generated inside `<think>...</think>`.
pub fn usage(u: &EngineUsage, reasoning_tokens: usize) -> rmx_api::openai::Usage {
    rmx_api::openai::Usage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        total_tokens: u.prompt_tokens + u.completion_tokens,
        prompt_tokens_details: Some(rmx_api::openai::PromptTokensDetails {
            cached_tokens: u.cached_tokens,
        }),
        completion_tokens_details: Some(rmx_api::openai::CompletionTokensDetails {
            reasoning_tokens,
            // Speculation's guesses fill OpenAI's Predicted Outputs counts, the same idea
            // (tokens proposed ahead and checked by the model).
            accepted_prediction_tokens: u.drafts.map(|d| d.accepted),
            rejected_prediction_tokens: u.drafts.map(|d| d.drafted.saturating_sub(d.accepted)),
        }),
    }
}

/// The sampling knobs every OpenAI endpoint shares, checked against OpenAI's ranges
/// ([`crate::sampling`]) so a bad value is a 400 naming it, not a silent clamp.
#[derive(Debug, Default, Clone)]
pub struct Knobs {
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<u32>,
    pub min_p: Option<f32>,
    pub repetition_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub seed: Option<u64>,
}

impl Knobs {
    pub fn sampling(&self) -> Result<SamplingParams, OpenAiError> {
        use crate::sampling::{check, Knob};
        let checks = [
            (Knob::Temperature, "temperature", self.temperature),
            (Knob::TopP, "top_p", self.top_p),
            (Knob::MinP, "min_p", self.min_p),
            (
                Knob::PresencePenalty,
                "presence_penalty",
                self.presence_penalty,
            ),
            (
                Knob::FrequencyPenalty,
                "frequency_penalty",
                self.frequency_penalty,
            ),
            (
                Knob::RepetitionPenalty,
                "repetition_penalty",
                self.repetition_penalty,
            ),
        ];
        for (knob, name, value) in checks {
            check(knob, name, value).map_err(|e| OpenAiError::invalid(name, e.to_string()))?;
        }
        let d = SamplingParams::default();
        Ok(SamplingParams {
            // OpenAI's default is 1; clients that want greedy output send 0.
            temperature: self.temperature.unwrap_or(1.0),
            top_p: self.top_p.unwrap_or(d.top_p),
            top_k: self.top_k.unwrap_or(d.top_k),
            min_p: self.min_p.unwrap_or(d.min_p),
            repetition_penalty: self.repetition_penalty.unwrap_or(d.repetition_penalty),
            presence_penalty: self.presence_penalty.unwrap_or(d.presence_penalty),
            frequency_penalty: self.frequency_penalty.unwrap_or(d.frequency_penalty),
            seed: self.seed,
            ..d
        })
    }
}

/// Template variables from `chat_template_kwargs` and `reasoning_effort`, and whether
/// thinking was turned off.
pub fn template_kwargs(
    kwargs: Option<&Map<String, Value>>,
    reasoning_effort: Option<&str>,
) -> (Map<String, Value>, Option<bool>) {
    let mut out = kwargs.cloned().unwrap_or_default();
    let mut think = None;
    if let Some(effort) = reasoning_effort {
        out.entry("reasoning_effort")
            .or_insert_with(|| Value::String(effort.to_string()));
        if matches!(effort, "none" | "minimal") {
            think = Some(false);
        }
    }
    if let Some(Value::Bool(b)) = out.get("enable_thinking") {
        think = Some(*b);
    }
    (out, think)
}

/// The thought's budget: vLLM's `thinking_token_budget`, else the effort's (thinking.rs).
pub fn thinking_budget(explicit: Option<u32>, effort: Option<&str>) -> Option<usize> {
    explicit
        .map(|n| n as usize)
        .or_else(|| effort.and_then(crate::service::thinking::effort_budget))
}

/// rmx's `kv_bits`, `kv_group_size` and `kv_quant_start` fields ([`crate::kv_options`]); a bad
/// one is a 400 naming it.
pub fn kv_quant(
    f: &rmx_api::extensions::RmxFields,
) -> Result<Option<rmx_engine::KvQuant>, OpenAiError> {
    crate::kv_options::parse(f.kv_bits, f.kv_group_size, f.kv_quant_start)
        .map_err(|e| OpenAiError::invalid(e.param, e.message))
}

/// rmx's `speculative` and `draft_tokens` fields ([`crate::speculation`]); a bad one is a 400
/// naming it.
pub fn speculative(
    f: &rmx_api::extensions::RmxFields,
) -> Result<Option<crate::speculation::Asked>, OpenAiError> {
    crate::speculation::parse(f.speculative.as_deref(), f.draft_tokens)
        .map_err(|e| OpenAiError::invalid(e.param, e.message))
}

/// The instruction that goes with `response_format`: constrained decoding enforces the shape,
/// but a model that is told what is wanted writes better content into it.
pub fn json_instruction(schema: Option<&Value>) -> String {
    match schema {
        Some(s) => format!(
            "Respond only with a JSON object that matches this JSON schema, and nothing else:\n{s}"
        ),
        None => "Respond only with a valid JSON object, and nothing else.".to_string(),
    }
}

#[cfg(test)]
mod tests;
