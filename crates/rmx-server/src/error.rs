//! What the service core refuses or fails with. Each API surface maps these to its own status
//! codes and error shape; [`ServiceError::status`] is the mapping they share by default.

use axum::http::StatusCode;
use rmx_engine::ModelKind;
use rmx_store::human_bytes;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The name is no alias, repo id or model folder. `available` lists what is stored and
    /// loaded, for the message and for surfaces that return the list.
    #[error("model `{name}` not found{}", list_text(available))]
    UnknownModel {
        name: String,
        available: Vec<String>,
        /// Why the store refused it, for the message.
        reason: String,
    },
    /// A Hub model that is not downloaded yet.
    #[error("model `{name}` is not downloaded yet; run `rmx pull {name}`")]
    NotDownloaded { name: String },
    #[error("{0}")]
    BadRequest(String),
    /// `prompt`: its tokens, or None when it was counted only until it clearly passed the
    /// context (`rmx_text::prompt_limit`).
    #[error("{}", prompt_text(*prompt, *context))]
    PromptTooLong {
        prompt: Option<usize>,
        context: usize,
    },
    /// The model does the other kind of work: an embedding model asked to chat or complete, a
    /// language model asked for embeddings. `kind` is what the model is; `name` may be empty
    /// when the engine refused before the service knew better.
    #[error("{}", kind_text(name, *kind))]
    WrongKind { name: String, kind: ModelKind },
    /// An embedding input longer than the model takes, in a request that does not allow
    /// cutting it (OpenAI's never does; Ollama's `truncate: false`).
    #[error(
        "input[{index}] has {tokens} tokens but the model takes at most {limit} per input; \
         shorten it{}", if *truncatable { " or send `truncate: true`" } else { "" }
    )]
    InputTooLong {
        index: usize,
        tokens: usize,
        limit: usize,
        /// The API has a switch that would cut it (Ollama's `truncate`), to name in the message.
        truncatable: bool,
    },
    /// `dimensions` outside 1..=the model's vector size (None: not known, the value was 0).
    #[error("{}", dimensions_text(*asked, *size))]
    Dimensions { asked: usize, size: Option<usize> },
    /// The model alone is bigger than the whole memory budget.
    #[error(
        "model `{name}` needs about {} but the memory budget is {} (set RMX_MAX_MEMORY to change it)",
        human_bytes(*size), human_bytes(*budget)
    )]
    TooLarge {
        name: String,
        size: u64,
        budget: u64,
    },
    /// It would fit, but the models in use now leave no room (or no slot); try again later.
    #[error("{0}")]
    Busy(String),
    /// The model's family (config.json `model_type`) is one the engine cannot load.
    #[error(
        "model `{name}` cannot be loaded: its {unsupported}; `rmx models` lists models that run"
    )]
    UnsupportedFamily {
        name: String,
        unsupported: rmx_store::Unsupported,
    },
    /// The model's own files cannot be loaded: a config, weights or tokenizer that is broken
    /// or disagrees with itself. Like an unsupported family, the request names a model this
    /// server cannot serve, and retrying will not change that.
    #[error("model `{name}` cannot be loaded: {message}")]
    BrokenModel { name: String, message: String },
    /// The model's chat template ran past a bound on rendering (steps, nesting, size, time):
    /// it comes with the model repo, so it is the named model that cannot be served.
    #[error("model `{name}`: its chat template exceeded the limit of {limit}")]
    TemplateLimit { name: String, limit: String },
    /// The device ran out of memory while the model loaded (MLX's words, and what to do):
    /// like [`ServiceError::TooLarge`], the model does not fit beside what is loaded.
    #[error("model `{name}` cannot be loaded: {message}")]
    OutOfMemory { name: String, message: String },
    /// Loading failed for the daemon's own reasons (the runtime, the engine thread).
    #[error("loading model `{name}` failed: {message}")]
    Load { name: String, message: String },
    #[error("the daemon is shutting down")]
    ShuttingDown,
    #[error("{0}")]
    Internal(String),
}

fn kind_text(name: &str, kind: ModelKind) -> String {
    let model = if name.is_empty() {
        "this model".to_string()
    } else {
        format!("model `{name}`")
    };
    match kind {
        ModelKind::Embedding => format!(
            "{model} is an embedding model: it makes vectors (/v1/embeddings, /api/embed); it \
             cannot chat, complete, generate or rerank"
        ),
        ModelKind::Chat => format!(
            "{model} generates text (chat and completions); it does not make embeddings or \
             rerank: ask an embedding model (a BERT-family encoder or Qwen3-Embedding) or a \
             reranker (Qwen3-Reranker)"
        ),
        ModelKind::Rerank => format!(
            "{model} is a reranker: it scores documents against a query (/v1/rerank); it cannot \
             chat, complete, generate or make embeddings"
        ),
    }
}

fn prompt_text(prompt: Option<usize>, context: usize) -> String {
    match prompt {
        Some(n) => format!(
            "the prompt has {n} tokens, longer than the model's context of {context} tokens; \
             shorten it"
        ),
        None => format!(
            "the prompt is longer than the model's context of {context} tokens (it was counted \
             only until it passed that); shorten it"
        ),
    }
}

fn dimensions_text(asked: usize, size: Option<usize>) -> String {
    match size {
        Some(size) => format!(
            "`dimensions` is {asked} but the model's vectors have {size} values; ask for 1 to {size}"
        ),
        None => format!("`dimensions` must be at least 1, got {asked}"),
    }
}

fn list_text(available: &[String]) -> String {
    if available.is_empty() {
        "; no models are downloaded yet (rmx pull <name>)".to_string()
    } else {
        format!("; available: {}", available.join(", "))
    }
}

impl ServiceError {
    /// The HTTP status every surface uses unless its API says otherwise: unknown model 404,
    /// bad input 400, over the memory budget 507, busy or shutting down 503.
    ///
    /// A model of a family the engine cannot load is a 400, not a 500 (nothing broke) nor a
    /// 422: the request names a model this server cannot serve, which each API spells as a
    /// 400 (OpenAI and Anthropic `invalid_request_error`, whose documented statuses have no
    /// 422 for Anthropic; Ollama answers "does not support ..." with a 400), so every client
    /// library reads it as "do not retry this request". A model whose files are broken is
    /// answered the same way: it is the named model that cannot be served, not the daemon
    /// that failed (it goes on serving the others); so is a model asked for the kind of work
    /// it does not do (chat from an embedding model, embeddings from a chat model).
    pub fn status(&self) -> StatusCode {
        match self {
            ServiceError::UnknownModel { .. } | ServiceError::NotDownloaded { .. } => {
                StatusCode::NOT_FOUND
            }
            ServiceError::BadRequest(_)
            | ServiceError::PromptTooLong { .. }
            | ServiceError::WrongKind { .. }
            | ServiceError::InputTooLong { .. }
            | ServiceError::Dimensions { .. }
            | ServiceError::UnsupportedFamily { .. }
            | ServiceError::BrokenModel { .. }
            | ServiceError::TemplateLimit { .. } => StatusCode::BAD_REQUEST,
            ServiceError::TooLarge { .. } | ServiceError::OutOfMemory { .. } => {
                StatusCode::INSUFFICIENT_STORAGE
            }
            ServiceError::Busy(_) | ServiceError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            ServiceError::Load { .. } | ServiceError::Internal(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

/// What a stream cut off by the daemon's shutdown ends with, unless its surface asked for
/// `Done(Cancelled)`; [`ServiceError::failed`] knows it again.
pub const CUT_OFF: &str = "the daemon is shutting down; the answer was cut off";

impl ServiceError {
    /// The error for a whole answer whose stream ended with [`ServiceEvent::Error`]
    /// (`message`): the shutdown's cut-off is [`ServiceError::ShuttingDown`] (a 503 to retry
    /// elsewhere or later), anything else a failure of the daemon's.
    ///
    /// [`ServiceEvent::Error`]: crate::service::ServiceEvent::Error
    pub fn failed(message: String) -> ServiceError {
        if message == CUT_OFF {
            ServiceError::ShuttingDown
        } else if message.starts_with(rmx_engine::group::GROUP_LOST) {
            // A split model's ranks lost each other: `rmx launch` restarts the group, so
            // this is a 503 to retry, not the daemon's fault.
            ServiceError::Busy(message)
        } else {
            ServiceError::Internal(message)
        }
    }
}

impl From<rmx_engine::EngineError> for ServiceError {
    fn from(e: rmx_engine::EngineError) -> Self {
        use rmx_engine::EngineError as E;
        match e {
            E::PromptTooLong { prompt, context } => ServiceError::PromptTooLong {
                prompt: Some(prompt),
                context,
            },
            E::EmptyPrompt | E::Invalid(_) | E::NoTemplate(_) | E::Template(_) | E::Encode(_) => {
                ServiceError::BadRequest(e.to_string())
            }
            E::NotGenerative => ServiceError::WrongKind {
                name: String::new(),
                kind: ModelKind::Embedding,
            },
            E::NotEmbedding | E::NotReranker => ServiceError::WrongKind {
                name: String::new(),
                kind: ModelKind::Chat,
            },
            E::Constraint(ref c) if c.is_invalid_request() => {
                ServiceError::BadRequest(e.to_string())
            }
            E::Stopped => ServiceError::Internal("the model's engine thread stopped".into()),
            other => ServiceError::Internal(other.to_string()),
        }
    }
}
