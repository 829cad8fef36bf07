//! The client for the daemon's HTTP API, over its Unix socket or TCP: what the CLI uses, and
//! anything else in Rust that wants to talk to a running daemon.
//!
//! One HTTP/1.1 connection per call: the socket is local and a connect costs microseconds,
//! which keeps the client free of pooling state.

use std::marker::PhantomData;
use std::path::PathBuf;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::{
    ChatRequest, ChatResponse, ErrorResponse, GenerateRequest, GenerateResponse, KeepAlive,
    ModelRequest, PsResponse, PullRequest, PullResponse, ShowResponse, TagsResponse,
    VersionResponse,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    /// `host:port`.
    Tcp(String),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "{}", p.display()),
            Endpoint::Tcp(a) => write!(f, "http://{a}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to the rmx daemon at {endpoint}: {source}")]
    Connect {
        endpoint: Endpoint,
        #[source]
        source: std::io::Error,
    },
    #[error("talking to the rmx daemon: {0}")]
    Http(#[from] hyper::Error),
    /// The daemon answered with an error (its `{"error": ...}` message).
    #[error("{message}")]
    Api { status: u16, message: String },
    #[error("the daemon sent a response rmx cannot read: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("building the request: {0}")]
    Request(#[from] hyper::http::Error),
}

impl ClientError {
    /// Nothing listens there: no daemon, or a stale socket left by one that died.
    pub fn is_not_running(&self) -> bool {
        matches!(self, ClientError::Connect { source, .. }
            if matches!(source.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused))
    }

    /// The connection broke mid-answer (the daemon died while answering).
    pub fn is_disconnect(&self) -> bool {
        matches!(self, ClientError::Http(e) if e.is_incomplete_message() || e.is_closed() || e.is_canceled())
            || matches!(self, ClientError::Http(_))
    }
}

#[derive(Debug, Clone)]
pub struct Client {
    endpoint: Endpoint,
}

impl Client {
    pub fn new(endpoint: Endpoint) -> Client {
        Client { endpoint }
    }

    pub fn unix(path: impl Into<PathBuf>) -> Client {
        Client::new(Endpoint::Unix(path.into()))
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub async fn version(&self) -> Result<VersionResponse, ClientError> {
        self.json(Method::GET, "/api/version", None::<&()>).await
    }

    pub async fn ps(&self) -> Result<PsResponse, ClientError> {
        self.json(Method::GET, "/api/ps", None::<&()>).await
    }

    pub async fn tags(&self) -> Result<TagsResponse, ClientError> {
        self.json(Method::GET, "/api/tags", None::<&()>).await
    }

    pub async fn show(&self, model: &str) -> Result<ShowResponse, ClientError> {
        let req = ModelRequest {
            model: model.into(),
        };
        self.json(Method::POST, "/api/show", Some(&req)).await
    }

    pub async fn delete(&self, model: &str) -> Result<serde_json::Value, ClientError> {
        let req = ModelRequest {
            model: model.into(),
        };
        self.json(Method::DELETE, "/api/delete", Some(&req)).await
    }

    /// Unloads a model (after the requests running on it).
    pub async fn stop(&self, model: &str) -> Result<GenerateResponse, ClientError> {
        let req = GenerateRequest {
            model: model.into(),
            keep_alive: Some(KeepAlive::For(std::time::Duration::ZERO)),
            stream: Some(false),
            ..GenerateRequest::default()
        };
        self.json(Method::POST, "/api/generate", Some(&req)).await
    }

    /// Loads a model without generating.
    pub async fn load(
        &self,
        model: &str,
        keep_alive: Option<KeepAlive>,
    ) -> Result<GenerateResponse, ClientError> {
        let req = GenerateRequest {
            model: model.into(),
            keep_alive,
            stream: Some(false),
            ..GenerateRequest::default()
        };
        self.json(Method::POST, "/api/generate", Some(&req)).await
    }

    /// Streams the answer; dropping the stream hangs up, which cancels the generation.
    pub async fn generate(
        &self,
        req: &GenerateRequest,
    ) -> Result<Ndjson<GenerateResponse>, ClientError> {
        let mut req = req.clone();
        req.stream = Some(true);
        let body = self.send(Method::POST, "/api/generate", Some(&req)).await?;
        Ok(Ndjson::new(body))
    }

    pub async fn chat(&self, req: &ChatRequest) -> Result<Ndjson<ChatResponse>, ClientError> {
        let mut req = req.clone();
        req.stream = Some(true);
        let body = self.send(Method::POST, "/api/chat", Some(&req)).await?;
        Ok(Ndjson::new(body))
    }

    /// Vectors for the request's inputs, through the daemon's OpenAI route (`/v1/embeddings`).
    pub async fn embeddings(
        &self,
        req: &crate::openai::EmbeddingRequest,
    ) -> Result<crate::openai::EmbeddingResponse, ClientError> {
        self.json(Method::POST, "/v1/embeddings", Some(req)).await
    }

    /// Pulls a model into the daemon's store, streaming its progress; dropping the stream hangs
    /// up, which stops the download (what arrived stays for the next pull to resume).
    pub async fn pull(&self, model: &str) -> Result<Ndjson<PullResponse>, ClientError> {
        self.pull_with_token(model, None).await
    }

    /// As [`pull`](Self::pull), asking the daemon to send `hf_token` to the Hub instead of its
    /// own.
    pub async fn pull_with_token(
        &self,
        model: &str,
        hf_token: Option<String>,
    ) -> Result<Ndjson<PullResponse>, ClientError> {
        let mut req = PullRequest::new(model);
        req.stream = Some(true);
        req.hf_token = hf_token.map(crate::pull::Secret);
        let body = self.send(Method::POST, "/api/pull", Some(&req)).await?;
        Ok(Ndjson::new(body))
    }

    async fn json<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let incoming = self.send(method, path, body).await?;
        let bytes = incoming.collect().await?.to_bytes();
        Ok(serde_json::from_slice(&bytes)?)
    }

    /// Sends one request; a non-2xx answer becomes [`ClientError::Api`] with its message.
    async fn send<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Incoming, ClientError> {
        let bytes = match body {
            Some(b) => Bytes::from(serde_json::to_vec(b)?),
            None => Bytes::new(),
        };
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, "localhost")
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(bytes))?;
        let connect_err = |source| ClientError::Connect {
            endpoint: self.endpoint.clone(),
            source,
        };
        let resp = match &self.endpoint {
            Endpoint::Unix(path) => {
                let s = tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(connect_err)?;
                request(s, req).await?
            }
            Endpoint::Tcp(addr) => {
                let s = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(connect_err)?;
                request(s, req).await?
            }
        };
        let status = resp.status();
        if status.is_success() {
            return Ok(resp.into_body());
        }
        let bytes = resp.into_body().collect().await?.to_bytes();
        Err(api_error(status, &bytes))
    }
}

async fn request<S>(
    stream: S,
    req: Request<Full<Bytes>>,
) -> Result<hyper::Response<Incoming>, ClientError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        // Errors surface on the response body; nothing to add here.
        let _ = conn.await;
    });
    Ok(sender.send_request(req).await?)
}

/// The message of an error answer: Ollama's `{"error": "..."}`, or the OpenAI routes'
/// `{"error": {"message": "..."}}`.
fn api_error(status: StatusCode, body: &[u8]) -> ClientError {
    let openai = || -> Option<String> {
        let v: serde_json::Value = serde_json::from_slice(body).ok()?;
        Some(v["error"]["message"].as_str()?.to_string())
    };
    let message = serde_json::from_slice::<ErrorResponse>(body)
        .map(|e| e.error)
        .ok()
        .or_else(openai)
        .unwrap_or_else(|| {
            let text = String::from_utf8_lossy(body).trim().to_string();
            if text.is_empty() {
                format!("the daemon answered HTTP {status}")
            } else {
                text
            }
        });
    ClientError::Api {
        status: status.as_u16(),
        message,
    }
}

/// A stream of ndjson lines; an `{"error": ...}` line becomes [`ClientError::Api`].
pub struct Ndjson<T> {
    body: Incoming,
    buf: Vec<u8>,
    _t: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> Ndjson<T> {
    fn new(body: Incoming) -> Self {
        Ndjson {
            body,
            buf: Vec::new(),
            _t: PhantomData,
        }
    }

    /// The next line; None at the end of the answer.
    pub async fn next(&mut self) -> Option<Result<T, ClientError>> {
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                if line.iter().all(|b| b.is_ascii_whitespace()) {
                    continue;
                }
                return Some(parse_line(&line));
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => return Some(Err(e.into())),
                None if self.buf.iter().all(|b| b.is_ascii_whitespace()) => return None,
                None => {
                    let line = std::mem::take(&mut self.buf);
                    return Some(parse_line(&line));
                }
            }
        }
    }
}

fn parse_line<T: DeserializeOwned>(line: &[u8]) -> Result<T, ClientError> {
    let value: serde_json::Value = serde_json::from_slice(line)?;
    if let Some(e) = value.get("error").and_then(|e| e.as_str()) {
        return Err(ClientError::Api {
            status: 500,
            message: e.to_string(),
        });
    }
    Ok(serde_json::from_value(value)?)
}
