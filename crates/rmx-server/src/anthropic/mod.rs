//! The Anthropic surface: `POST /v1/messages` and `/v1/messages/count_tokens`, also without
//! the `/v1` prefix for clients whose base URL already ends in it (Claude Code joins
//! `ANTHROPIC_BASE_URL` and `/v1/messages`; some setups point it at `.../v1`).
//!
//! A translation into the service core and back, like the OpenAI surface; streaming goes
//! through the same SSE driver, errors through [`AnthropicError`]. What the whole answer
//! and the stream both say (the stop reason, usage) is here.

pub mod error;
pub mod messages;
pub mod stream;

use std::sync::Arc;

use axum::routing::post;
use axum::Router;
use rmx_api::anthropic::{StopReason, Usage};

pub use error::AnthropicError;

use crate::service::{Final, FinishReason, Service};

pub fn routes() -> Router<Arc<Service>> {
    Router::new()
        .route("/v1/messages", post(messages::handler))
        .route("/messages", post(messages::handler))
        .route("/v1/messages/count_tokens", post(messages::count_tokens))
        .route("/messages/count_tokens", post(messages::count_tokens))
}

/// Anthropic's `stop_reason` and `stop_sequence`: the latter is set only when one of the
/// request's `stop_sequences` ended the answer.
pub fn stop_reason(f: &Final) -> (StopReason, Option<String>) {
    match (f.finish, &f.stop_sequence) {
        (FinishReason::Stop, Some(s)) => (StopReason::StopSequence, Some(s.clone())),
        (FinishReason::Stop | FinishReason::Cancelled, _) => (StopReason::EndTurn, None),
        (FinishReason::Length, _) => (StopReason::MaxTokens, None),
        (FinishReason::ToolCalls, _) => (StopReason::ToolUse, None),
    }
}

pub fn usage(u: &rmx_engine::Usage) -> Usage {
    Usage {
        // Anthropic counts cached tokens apart from the rest of the input.
        input_tokens: u.prompt_tokens.saturating_sub(u.cached_tokens),
        output_tokens: u.completion_tokens,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: u.cached_tokens,
    }
}

#[cfg(test)]
mod tests;
