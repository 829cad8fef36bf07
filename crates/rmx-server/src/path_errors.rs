//! Errors in the shape of the API a path belongs to ([`reject`]), for what answers before or
//! instead of a surface's handler: the security layers, `rmx share`'s door, and the requests no
//! handler takes. axum answers those itself, empty or in plain text: a path nothing serves
//! (404), a method the path does not take (405), a body over the size limit (413). Clients
//! parse errors as JSON, so [`not_found`] and [`json_errors`] give them a body that says what
//! is wrong.

use axum::body::to_bytes;
use axum::extract::Request;
use axum::http::{header, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Which API a path belongs to: Anthropic's messages routes, Ollama's `/api/...`, else OpenAI's
/// (its `/v1/...` and anything unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Surface {
    OpenAi,
    Anthropic,
    Ollama,
}

fn surface(path: &str) -> Surface {
    if path.starts_with("/v1/messages") || path.starts_with("/messages") {
        Surface::Anthropic
    } else if path == "/api" || path.starts_with("/api/") {
        Surface::Ollama
    } else {
        Surface::OpenAi
    }
}

/// An error in the shape of the API the path belongs to.
pub fn reject(path: &str, status: StatusCode, message: &str) -> Response {
    shaped(path, status, message, None)
}

/// `code`: OpenAI's machine-readable `code` (the other shapes have none).
fn shaped(path: &str, status: StatusCode, message: &str, code: Option<&str>) -> Response {
    match surface(path) {
        Surface::Anthropic => crate::anthropic::error::error_response(status, message),
        Surface::OpenAi => crate::openai::error::error_response(status, message, code),
        Surface::Ollama => {
            (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
        }
    }
}

/// The router's fallback: nothing is served at this path.
pub async fn not_found(method: Method, uri: Uri) -> Response {
    let path = uri.path();
    shaped(
        path,
        StatusCode::NOT_FOUND,
        &format!("no route for {method} {path}; /openapi.json lists the routes this server has"),
        Some("unknown_route"),
    )
}

/// Middleware around every route: an error whose body is not JSON (axum's own answers) is
/// answered again in the path's API shape. A 405 keeps its `Allow` header and names the
/// methods the path takes.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let allow = resp.headers().get(header::ALLOW).cloned();
    let (message, code) = match status {
        StatusCode::METHOD_NOT_ALLOWED => {
            let takes = allow
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .unwrap_or("other methods")
                .replace(',', ", ");
            (
                format!("{path} does not take {method}; it takes {takes}"),
                Some("method_not_allowed"),
            )
        }
        StatusCode::PAYLOAD_TOO_LARGE => (
            format!(
                "the request body is larger than {} bytes",
                crate::wire::body::BODY_LIMIT
            ),
            Some("request_too_large"),
        ),
        _ => {
            // axum's plain-text rejections say what failed; keep their words.
            let text = to_bytes(resp.into_body(), 64 * 1024)
                .await
                .map(|b| String::from_utf8_lossy(&b).trim().to_string())
                .unwrap_or_default();
            let message = if text.is_empty() {
                status.canonical_reason().unwrap_or("error").to_string()
            } else {
                text
            };
            (message, None)
        }
    };
    let mut out = shaped(&path, status, &message, code);
    if let Some(allow) = allow {
        out.headers_mut().insert(header::ALLOW, allow);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_path_has_its_apis_shape() {
        assert_eq!(surface("/v1/chat/completions"), Surface::OpenAi);
        assert_eq!(surface("/v1/messages/count_tokens"), Surface::Anthropic);
        assert_eq!(surface("/messages"), Surface::Anthropic);
        assert_eq!(surface("/api/chat"), Surface::Ollama);
        assert_eq!(surface("/apiary"), Surface::OpenAi);
        assert_eq!(surface("/nothing"), Surface::OpenAi);
    }
}
