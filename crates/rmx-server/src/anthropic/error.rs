//! The Anthropic surface's one error type: `{"type": "error", "error": {"type", "message"}}`
//! with Anthropic's statuses (413 `request_too_large`, 529-style overload as 503 here).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::anthropic::{ErrorBody, ErrorResponse};

use crate::error::ServiceError;
use crate::wire::body::BodyError;

#[derive(Debug, thiserror::Error)]
pub enum AnthropicError {
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error(transparent)]
    Body(#[from] BodyError),
    /// A well-formed request this server cannot do (images, ...).
    #[error("{0}")]
    Invalid(String),
}

impl AnthropicError {
    pub fn status(&self) -> StatusCode {
        match self {
            AnthropicError::Service(e) => e.status(),
            AnthropicError::Body(e) => e.status(),
            AnthropicError::Invalid(_) => StatusCode::BAD_REQUEST,
        }
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            kind: error_type(self.status()).to_string(),
            message: self.to_string(),
        }
    }
}

/// Anthropic's error `type` for a status.
pub fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 405 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

/// A response in Anthropic's error shape, for the layers that answer before any handler.
pub fn error_response(status: StatusCode, message: &str) -> Response {
    let body = ErrorResponse {
        kind: "error".to_string(),
        error: ErrorBody {
            kind: error_type(status).to_string(),
            message: message.to_string(),
        },
    };
    (status, Json(body)).into_response()
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = ErrorResponse {
            kind: "error".to_string(),
            error: self.body(),
        };
        (status, Json(body)).into_response()
    }
}
