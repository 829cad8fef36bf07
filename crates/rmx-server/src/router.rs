//! The HTTP surfaces, assembled into one axum `Router` served on both the TCP port and the Unix
//! socket. Each surface is a module with `routes() -> Router<Arc<Service>>` that translates
//! its wire format into the [`Service`](crate::service::Service) core; add a surface by
//! merging its routes below (the OpenAI and Anthropic surfaces live in `src/openai/` and
//! `src/anthropic/`).

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::Router;

use crate::service::Service;

/// Requests larger than this are refused with 413: long chats with tool results fit, runaway
/// uploads do not.
pub const BODY_LIMIT: usize = 32 * 1024 * 1024;

pub fn router(service: Arc<Service>) -> Router {
    Router::new()
        .merge(crate::native::routes())
        .merge(crate::openai::routes())
        .merge(crate::anthropic::routes())
        .merge(crate::openapi::routes())
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(service)
}
