//! `rmx share`'s front door: a TCP listener that lets other people use one model of this
//! machine's daemon, forwarding their requests to the daemon's Unix socket.
//!
//! The models live in the daemon, so sharing is a thin proxy rather than a second server:
//! the daemon keeps serving the CLI while the door is open, and closing the door (ending the
//! process) is all it takes to stop sharing. The API key, CORS and rate limit are the
//! [`security`](crate::security) layers, put around [`router`] by the caller.
//!
//! Only the inference routes and read-only listings pass, and a request naming a model must
//! name the shared one: the key lets people use a model, not delete or load the others, nor
//! see which others this machine has (listings are filtered to the shared model).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, UnixStream};

use crate::security::reject;
use crate::wire::body::BODY_LIMIT;

struct Door {
    socket: PathBuf,
    model: String,
}

/// Forwards the allowed routes for `model` to the daemon listening on `socket`.
pub fn router(socket: PathBuf, model: String) -> Router {
    Router::new()
        .fallback(forward)
        .with_state(Arc::new(Door { socket, model }))
}

/// Serves until the future is dropped; the caller ends sharing by dropping it (and the
/// process), which closes the port and any connection still open.
pub async fn serve(listener: TcpListener, app: Router) -> std::io::Result<()> {
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
}

/// The routes a shared model answers: generation in every API shape, and listings.
pub fn allowed(method: &Method, path: &str) -> bool {
    const POST: &[&str] = &[
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/responses",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/messages",
        "/messages/count_tokens",
        "/api/chat",
        "/api/generate",
        "/api/show",
    ];
    const GET: &[&str] = &["/v1/models", "/api/tags", "/api/version"];
    match *method {
        Method::POST => POST.contains(&path),
        Method::GET => GET.contains(&path) || path.starts_with("/v1/models/"),
        _ => false,
    }
}

/// The `model` a JSON body names, if any; None too for bodies that are not JSON objects
/// (the daemon rejects those in its own words).
fn named_model(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v.get("model")?.as_str().map(str::to_string)
}

async fn forward(State(door): State<Arc<Door>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    if !allowed(req.method(), &path) {
        return reject(
            &path,
            StatusCode::FORBIDDEN,
            &format!(
                "{} {path} is not shared: this server shares `{}` for generation only",
                req.method(),
                door.model
            ),
        );
    }
    let (mut parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(b) => b,
        Err(_) => {
            return reject(
                &path,
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the request body is over {BODY_LIMIT} bytes or broke off"),
            )
        }
    };
    let named = match path.strip_prefix("/v1/models/") {
        Some(id) => Some(id.to_string()),
        None => named_model(&bytes),
    };
    if let Some(m) = named.filter(|m| *m != door.model) {
        return reject(
            &path,
            StatusCode::NOT_FOUND,
            &format!(
                "model `{m}` is not shared here; this server shares `{}`",
                door.model
            ),
        );
    }
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or(path.clone(), |pq| pq.as_str().to_string());
    parts.uri = match path_and_query.parse() {
        Ok(u) => u,
        Err(_) => {
            return reject(
                &path,
                StatusCode::BAD_REQUEST,
                "the request path is invalid",
            )
        }
    };
    // The key was for this door; the daemon's socket needs none and should not log it.
    parts.headers.remove(header::AUTHORIZATION);
    parts.headers.remove("x-api-key");
    parts
        .headers
        .insert(header::HOST, HeaderValue::from_static("localhost"));
    let upstream = Request::from_parts(parts, Body::from(bytes));
    match send(&door.socket, upstream).await {
        Ok(resp) if matches!(path.as_str(), "/v1/models" | "/api/tags") => {
            only_shared(resp, &door.model).await
        }
        Ok(resp) => resp,
        Err(e) => reject(
            &path,
            StatusCode::BAD_GATEWAY,
            &format!("the rmx daemon behind this share does not answer: {e}"),
        ),
    }
}

/// A model listing cut down to the shared model: OpenAI's `data[].id`, Ollama's
/// `models[].name`. A body that is not JSON becomes `null` rather than passing through.
async fn only_shared(resp: Response, model: &str) -> Response {
    let (mut parts, body) = resp.into_parts();
    if !parts.status.is_success() {
        return Response::from_parts(parts, body);
    }
    let mut v: serde_json::Value = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(b) => serde_json::from_slice(&b).unwrap_or_default(),
        Err(_) => serde_json::Value::Null,
    };
    for (list, key) in [("data", "id"), ("models", "name")] {
        if let Some(items) = v.get_mut(list).and_then(|l| l.as_array_mut()) {
            items.retain(|m| m.get(key).and_then(|n| n.as_str()) == Some(model));
        }
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::TRANSFER_ENCODING);
    Response::from_parts(parts, Body::from(v.to_string()))
}

/// One connection per request, streamed both ways: dropping the response (the client hung
/// up) closes the connection, and the daemon cancels the generation.
async fn send(socket: &std::path::Path, req: Request) -> Result<Response, String> {
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|e| format!("connecting to {}: {e}", socket.display()))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    Ok(resp.map(Body::new).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_generation_and_listings_pass() {
        assert!(allowed(&Method::POST, "/v1/chat/completions"));
        assert!(allowed(&Method::POST, "/v1/responses"));
        assert!(allowed(&Method::POST, "/api/chat"));
        assert!(allowed(&Method::GET, "/v1/models"));
        assert!(allowed(&Method::GET, "/v1/models/qwen3"));
        assert!(!allowed(&Method::GET, "/api/ps"));
        assert!(!allowed(&Method::DELETE, "/api/delete"));
        assert!(!allowed(&Method::GET, "/v1/chat/completions"));
        assert!(!allowed(&Method::POST, "/api/pull"));
    }

    #[test]
    fn the_model_comes_from_json_bodies_only() {
        assert_eq!(named_model(br#"{"model":"a","x":1}"#), Some("a".into()));
        assert_eq!(named_model(br#"{"messages":[]}"#), None);
        assert_eq!(named_model(b"not json"), None);
        assert_eq!(named_model(b""), None);
    }
}
