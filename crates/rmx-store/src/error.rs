//! One error type for the crate. Every variant names what it was working on (a path, a URL, a
//! repo), because "No such file or directory" alone never tells a user which file.

use std::io;
use std::path::PathBuf;

use crate::disk::human_bytes;
use serde::ser::{Serialize, SerializeStruct, Serializer};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("failed to {action} `{}`", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("neither RMX_HOME nor HOME is set; set RMX_HOME to a folder rmx can write to")]
    NoHome,
    #[error(
        "unknown model `{name}`: not an alias, a Hugging Face repo id (owner/name) or a local model directory{}",
        suggestion_text(suggestions)
    )]
    UnknownModel {
        name: String,
        suggestions: Vec<String>,
    },
    #[error("`{}` is not a model directory (it has no config.json)", path.display())]
    NotAModelDir { path: PathBuf },
    #[error("invalid repo id `{id}`: expected `owner/name` of letters, digits, `-`, `_`, `.`")]
    InvalidRepoId { id: String },
    #[error("invalid alias name `{name}`: {reason}")]
    InvalidAliasName { name: String, reason: &'static str },
    #[error("`{name}` is a built-in alias; it cannot be removed (a user alias of the same name overrides it)")]
    BuiltinAlias { name: String },
    #[error("there is no user alias `{name}` in `{}`", path.display())]
    NoSuchUserAlias { name: String, path: PathBuf },
    #[error("failed to parse `{}`", path.display())]
    Toml {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("failed to parse `{}`", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("model `{repo}` was not found on {endpoint} (check the name; gated or private repos need HF_TOKEN)")]
    RepoNotFound { repo: String, endpoint: String },
    #[error("file `{file}` of `{repo}` was not found on {endpoint}")]
    FileNotFound {
        repo: String,
        file: String,
        endpoint: String,
    },
    #[error("`{repo}` has no config.json: it is not a model rmx can run")]
    NoConfig { repo: String },
    #[error("`{repo}` has no .safetensors weights: rmx runs MLX/safetensors models (try an mlx-community conversion)")]
    NoWeights { repo: String },
    /// Found from config.json before any weight was asked for.
    #[error(
        "`{repo}` was not pulled: its {unsupported}. Nothing was downloaded; pick a model of a \
         supported family (`rmx models` lists the built-in names), or check whether a newer rmx \
         supports `{}`", unsupported.family()
    )]
    UnsupportedFamily {
        repo: String,
        unsupported: Unsupported,
    },
    #[error("{url} is larger than {} and cannot be a config.json", human_bytes(*limit))]
    ConfigTooLarge { url: String, limit: u64 },
    #[error("request to {url} failed")]
    Http {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered HTTP {status}")]
    HttpStatus { url: String, status: u16 },
    #[error("{url}: header `{header}` is missing or invalid")]
    BadHeader { url: String, header: &'static str },
    #[error("{url} returned a response rmx cannot read")]
    BadResponse {
        url: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{url} returned an unsafe file name `{name}`")]
    UnsafeName { url: String, name: String },
    #[error("download of `{file}` ended early: {got} of {expected} bytes (run the pull again to resume)")]
    Truncated {
        file: String,
        got: u64,
        expected: u64,
    },
    #[error("size mismatch for `{file}`: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        file: String,
        expected: u64,
        actual: u64,
    },
    #[error("checksum mismatch for `{file}`: expected sha256 {expected}, got {actual}")]
    ChecksumMismatch {
        file: String,
        expected: String,
        actual: String,
    },
    #[error(
        "not enough disk space in `{}`: the download needs {} more, {} is free",
        path.display(), human_bytes(*needed), human_bytes(*available)
    )]
    NotEnoughSpace {
        path: PathBuf,
        needed: u64,
        available: u64,
    },
    #[error("another download of `{file}` is running (lock `{}`)", path.display())]
    Locked { file: String, path: PathBuf },
    #[error("`{name}` ({repo}) is not in the store at `{}`; run `rmx pull {name}`", cache.display())]
    NotInStore {
        name: String,
        repo: String,
        cache: PathBuf,
    },
    #[error("`{}` is a local model directory, not a model in the store (rmx neither downloads into nor deletes it)", path.display())]
    LocalModel { path: PathBuf },
    #[error("invalid safetensors file `{}`: {reason}", path.display())]
    Safetensors { path: PathBuf, reason: String },
    #[error("a download task failed to run")]
    Task(#[source] tokio::task::JoinError),
}

fn suggestion_text(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", suggestions.join(", "))
    }
}

/// Attach a path and an action to an `io::Error`.
pub(crate) trait IoContext<T> {
    fn at(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T, StoreError>;
}

impl StoreError {
    /// The error and its causes, one line ("request to ... failed: connection refused"): what
    /// progress events and the daemon's error lines carry.
    pub fn with_causes(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(inner) = source {
            text.push_str(": ");
            text.push_str(&inner.to_string());
            source = inner.source();
        }
        text
    }
}

impl<T> IoContext<T> for Result<T, io::Error> {
    fn at(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Io {
            action,
            path: path.into(),
            source,
        })
    }
}

/// A model whose family this rmx cannot load: what `rmx info` and `rmx ls` show (also in
/// `--json`, as `family`, `supported` and the sentence as `reason`), what `rmx pull` refuses
/// and the daemon answers with a 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("family `{family}` is not supported by this rmx; supported: {}", supported.join(", "))]
pub struct Unsupported {
    family: String,
    supported: Vec<String>,
}

impl Unsupported {
    pub fn new<S: Into<String>>(
        family: impl Into<String>,
        supported: impl IntoIterator<Item = S>,
    ) -> Self {
        Unsupported {
            family: family.into(),
            supported: supported.into_iter().map(Into::into).collect(),
        }
    }

    pub fn family(&self) -> &str {
        &self.family
    }

    pub fn supported(&self) -> &[String] {
        &self.supported
    }
}

impl Serialize for Unsupported {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("Unsupported", 3)?;
        out.serialize_field("family", &self.family)?;
        out.serialize_field("supported", &self.supported)?;
        out.serialize_field("reason", &self.to_string())?;
        out.end()
    }
}
