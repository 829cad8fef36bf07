//! The native surface's errors, in Ollama's shape: `{"error": "..."}` with the status
//! [`ServiceError::status`] picks.

use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::ErrorResponse;

use crate::error::ServiceError;

#[derive(Debug)]
pub struct NativeError(pub ServiceError);

impl From<ServiceError> for NativeError {
    fn from(e: ServiceError) -> Self {
        NativeError(e)
    }
}

impl IntoResponse for NativeError {
    fn into_response(self) -> Response {
        let body = ErrorResponse {
            error: self.0.to_string(),
        };
        (self.0.status(), Json(body)).into_response()
    }
}
