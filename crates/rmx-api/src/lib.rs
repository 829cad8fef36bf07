//! The rmx API: wire types shared by the daemon and the CLI, the client the CLI talks to the
//! daemon with, and where a daemon lives. The daemon's Unix socket and its TCP port speak the
//! same HTTP API (native `/api/...` routes, Ollama-shaped); there is no private protocol.
//!
//! No MLX here: the client side stays light.

pub mod anthropic;
pub mod chat;
pub mod client;
pub mod embed;
pub mod extensions;
pub mod generate;
pub mod home;
pub mod keep_alive;
pub mod models;
pub mod openai;
pub mod options;
pub mod pull;

pub use chat::{ChatRequest, ChatResponse, FunctionCall, Message, ToolCall};
pub use client::{Client, ClientError, Endpoint, Ndjson};
pub use embed::{EmbedRequest, EmbedResponse, EmbeddingsRequest, EmbeddingsResponse};
pub use generate::{DoneStats, GenerateRequest, GenerateResponse};
pub use home::{default_http_addr, rmx_home, DaemonPaths};
pub use keep_alive::KeepAlive;
pub use models::{
    ErrorResponse, ModelDetails, ModelRequest, ModelSplit, PsResponse, RunningModel, ShowResponse,
    StoredModel, TagsResponse, VersionResponse,
};
pub use options::{Options, Think};
pub use pull::{PlannedFile, PullEvent, PullRequest, PullResponse};

/// The version the daemon reports on `/api/version`; the CLI compares it with its own.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
