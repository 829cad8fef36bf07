//! The Anthropic surface: `POST /v1/messages` and `/v1/messages/count_tokens`, also without
//! the `/v1` prefix for clients whose base URL already ends in it (Claude Code joins
//! `ANTHROPIC_BASE_URL` and `/v1/messages`; some setups point it at `.../v1`).
//!
//! A translation into the service core and back, like the OpenAI surface; streaming goes
//! through the same SSE driver, errors through [`AnthropicError`].

pub mod error;
pub mod messages;
pub mod stream;

use std::sync::Arc;

use axum::routing::post;
use axum::Router;

pub use error::AnthropicError;

use crate::service::Service;

pub fn routes() -> Router<Arc<Service>> {
    Router::new()
        .route("/v1/messages", post(messages::handler))
        .route("/messages", post(messages::handler))
        .route("/v1/messages/count_tokens", post(messages::count_tokens))
        .route("/messages/count_tokens", post(messages::count_tokens))
}

#[cfg(test)]
mod tests;
