//! The rmx daemon.
//!
//! - [`service`]: the core every API surface goes through (model names, lifecycle, prompt
//!   building, output parsing). Start reading there.
//! - [`router`]: the HTTP surfaces assembled into one axum `Router`; [`path_errors`]: errors
//!   in the shape of the API a path belongs to, also for requests no handler takes.
//! - `native`: the `/api/...` routes (Ollama-shaped) the CLI uses.
//! - [`openai`], [`anthropic`]: the `/v1/...` compatibility surfaces (translations into the
//!   service core); [`wire`]: the request bodies and SSE both share; [`openapi`]:
//!   `/openapi.json`.
//! - `sampling`: the ranges sampling values are held to, on every surface; `speculation`: the
//!   speculation fields, read the same way on every surface.
//! - [`security`]: API key, CORS and rate-limit layers for the TCP listener; `origin`: the
//!   `Origin` and `Host` checks before them.
//! - [`metrics`]: `GET /metrics` for Prometheus.
//! - [`listener`]: whether a request came over the Unix socket or TCP, for what only the
//!   socket may do (name any model folder).
//! - [`share`]: `rmx share`'s front door, forwarding one model's routes to the daemon.
//! - [`daemon`]: serving the router on TCP and on the Unix socket, the one-daemon lock, and
//!   graceful shutdown.
//!
//! Never names MLX types; the engine does.

pub mod anthropic;
pub mod daemon;
pub mod error;
mod health;
mod kv_options;
mod lifecycle;
pub mod listener;
pub mod metrics;
mod native;
pub mod openai;
pub mod openapi;
mod origin;
pub mod path_errors;
mod rerank;
pub mod router;
mod sampling;
pub mod security;
pub mod service;
pub mod share;
pub mod speculation;
pub mod wire;

pub use error::ServiceError;
pub use lifecycle::group::{GroupServing, Split};
pub use router::router;
pub use service::{Service, ServiceConfig};

/// What `rmx ps` shows under PROCESSOR: the GPU when MLX runs on Metal or CUDA.
pub(crate) fn processor() -> &'static str {
    match rmx_mlx::backend() {
        rmx_mlx::Backend::Cpu => "cpu",
        _ => "gpu",
    }
}
