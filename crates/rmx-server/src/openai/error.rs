//! The OpenAI surface's one error type: every failure leaves as
//! `{"error": {"message", "type", "param", "code"}}` with the status OpenAI uses.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::openai::{ErrorBody, ErrorResponse};

use crate::error::ServiceError;
use crate::wire::body::BodyError;

#[derive(Debug, thiserror::Error)]
pub enum OpenAiError {
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error(transparent)]
    Body(#[from] BodyError),
    /// A well-formed request this server cannot do (`n > 1`, images, ...); `param` names the
    /// field.
    #[error("{message}")]
    Invalid {
        message: String,
        param: Option<String>,
    },
    #[error("no model `{0}`")]
    NotFound(String),
}

impl OpenAiError {
    pub fn invalid(param: &str, message: impl Into<String>) -> OpenAiError {
        OpenAiError::Invalid {
            message: message.into(),
            param: Some(param.to_string()),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            OpenAiError::Service(e) => e.status(),
            OpenAiError::Body(e) => e.status(),
            OpenAiError::Invalid { .. } => StatusCode::BAD_REQUEST,
            OpenAiError::NotFound(_) => StatusCode::NOT_FOUND,
        }
    }

    pub fn body(&self) -> ErrorBody {
        let status = self.status();
        let (param, code) = match self {
            OpenAiError::Service(
                ServiceError::UnknownModel { .. } | ServiceError::NotDownloaded { .. },
            ) => (Some("model".to_string()), Some("model_not_found")),
            OpenAiError::NotFound(_) => (Some("model".to_string()), Some("model_not_found")),
            OpenAiError::Service(ServiceError::UnsupportedFamily { .. }) => {
                (Some("model".to_string()), Some("model_not_supported"))
            }
            OpenAiError::Service(ServiceError::BrokenModel { .. }) => {
                (Some("model".to_string()), Some("model_load_failed"))
            }
            OpenAiError::Service(ServiceError::TemplateLimit { .. }) => (
                Some("model".to_string()),
                Some("chat_template_limit_exceeded"),
            ),
            OpenAiError::Service(ServiceError::PromptTooLong { .. }) => (
                Some("messages".to_string()),
                Some("context_length_exceeded"),
            ),
            OpenAiError::Service(ServiceError::InputTooLong { .. }) => {
                (Some("input".to_string()), Some("context_length_exceeded"))
            }
            OpenAiError::Service(ServiceError::WrongKind { .. }) => {
                (Some("model".to_string()), Some("model_kind_mismatch"))
            }
            OpenAiError::Service(ServiceError::Dimensions { .. }) => {
                (Some("dimensions".to_string()), None)
            }
            OpenAiError::Body(e @ BodyError::Shape { .. }) => (e.field().map(str::to_string), None),
            OpenAiError::Body(BodyError::TooLarge { .. }) => (None, Some("request_too_large")),
            OpenAiError::Invalid { param, .. } => (param.clone(), None),
            _ => (None, None),
        };
        ErrorBody {
            message: self.to_string(),
            kind: error_type(status).to_string(),
            param,
            code: code.map(str::to_string),
        }
    }
}

/// OpenAI's `type` for a status.
pub fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 404 | 405 | 413 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        429 => "rate_limit_error",
        503 => "service_unavailable",
        _ => "server_error",
    }
}

/// A response in OpenAI's error shape, for the layers (API key, rate limit) that answer
/// before any handler runs.
pub fn error_response(status: StatusCode, message: &str, code: Option<&str>) -> Response {
    let body = ErrorResponse {
        error: ErrorBody {
            message: message.to_string(),
            kind: error_type(status).to_string(),
            param: None,
            code: code.map(str::to_string),
        },
    };
    (status, Json(body)).into_response()
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut resp = (status, Json(ErrorResponse { error: self.body() })).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        resp
    }
}
