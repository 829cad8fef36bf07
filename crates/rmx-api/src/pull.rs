//! `/api/pull`: what a pull reports while it runs, and the ndjson lines the daemon streams.
//!
//! rmx-store emits [`PullEvent`]s; the CLI draws them whether the pull runs in its own process
//! or in the daemon. On the wire each line has Ollama's fields (`status`, `digest`, `total`,
//! `completed`), so Ollama's clients can follow a pull, and the event it came from in `detail`,
//! so rmx's CLI draws exactly what it would draw for a pull of its own.

use serde::{Deserialize, Serialize};

/// One file of a pull, as planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedFile {
    pub file: String,
    /// `sha256:<hex>` for LFS files (the checksum the pull verifies), `git-sha1:<hex>` for
    /// small files (their git blob id, which the Hub sends as their etag).
    pub digest: String,
    pub size: u64,
    /// Bytes already on disk: a verified blob counts fully, a partial download by its length.
    pub present: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum PullEvent {
    /// The repo exists and its files are known; nothing has been written yet.
    Resolved {
        repo: String,
        commit: String,
        files: Vec<PlannedFile>,
        /// Sum of all file sizes (a blob shared by two files counts once).
        total: u64,
        /// Bytes already on disk before this pull; `total - present` is what will travel.
        present: u64,
    },
    /// An existing blob is being re-hashed before it is trusted.
    Verifying {
        file: String,
        digest: String,
        size: u64,
    },
    /// A transfer starts (or resumes, when `offset > 0`).
    FileStarted {
        file: String,
        digest: String,
        size: u64,
        offset: u64,
    },
    /// Bytes arrived. `done`/`total` cover the whole pull, so a reporter can show rate and ETA
    /// from them alone.
    Progress {
        file: String,
        digest: String,
        file_done: u64,
        file_size: u64,
        done: u64,
        total: u64,
    },
    /// A transfer failed and will be resumed (lost connection) or restarted (bad checksum).
    Retrying {
        file: String,
        digest: String,
        attempt: u32,
        error: String,
    },
    /// The file is complete and verified. `cached` when no byte had to be fetched.
    FileDone {
        file: String,
        digest: String,
        size: u64,
        cached: bool,
    },
    /// Every file is on disk and verified; the snapshot (links and `refs/main`) is written next.
    Writing { repo: String, commit: String },
    /// Every file verified and the snapshot published.
    Finished {
        repo: String,
        commit: String,
        downloaded: u64,
    },
}

/// `POST /api/pull`. Ollama's clients send `model` (older ones `name`) and `insecure`, which
/// means nothing here: the Hub is always reached over the endpoint's own scheme. `hf_token` is
/// rmx's: the CLI sends the token of its own environment, so a daemon started before
/// `HF_TOKEN` was set still pulls gated and private models for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PullRequest {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_token: Option<Secret>,
}

/// A credential inside a request: plain text on the wire, `<redacted>` in logs and debug output.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl PullRequest {
    pub fn new(model: impl Into<String>) -> PullRequest {
        PullRequest {
            model: model.into(),
            ..PullRequest::default()
        }
    }

    /// `model`, else `name`; None when both are missing or blank.
    pub fn model_name(&self) -> Option<&str> {
        [Some(self.model.as_str()), self.name.as_deref()]
            .into_iter()
            .flatten()
            .map(str::trim)
            .find(|n| !n.is_empty())
    }
}

/// One line of a pull's answer, in Ollama's `ProgressResponse` shape plus `detail`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PullResponse {
    /// `pulling manifest`, `pulling <12 hex digits>`, `verifying sha256 digest`,
    /// `writing manifest`, `success`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Bytes of the file named by `digest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Bytes of it on disk so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<u64>,
    /// The store event this line reports (rmx's addition; Ollama's clients ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<PullEvent>,
}

impl PullResponse {
    pub fn status(status: impl Into<String>) -> PullResponse {
        PullResponse {
            status: status.into(),
            ..PullResponse::default()
        }
    }

    /// A per-file line: `pulling <short digest>` with the file's progress, as Ollama sends.
    pub fn file(digest: &str, total: u64, completed: u64) -> PullResponse {
        PullResponse {
            status: format!("pulling {}", short_digest(digest)),
            digest: Some(digest.to_string()),
            total: Some(total),
            completed: Some(completed),
            detail: None,
        }
    }

    pub fn with_detail(mut self, event: PullEvent) -> PullResponse {
        self.detail = Some(event);
        self
    }
}

/// The first 12 hex digits of a digest, as Ollama names a layer in its status lines.
pub fn short_digest(digest: &str) -> &str {
    let hex = digest.rsplit(':').next().unwrap_or(digest);
    hex.get(..12).unwrap_or(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_names_and_short_digests() {
        let req: PullRequest = serde_json::from_str(r#"{"name": "qwen3", "insecure": true}"#)
            .expect("an old-style request");
        assert_eq!(req.model_name(), Some("qwen3"));
        let req: PullRequest =
            serde_json::from_str(r#"{"model": " ", "stream": false}"#).expect("a blank model");
        assert_eq!(req.model_name(), None);
        assert_eq!(short_digest("sha256:0123456789abcdef"), "0123456789ab");
        assert_eq!(short_digest("git-sha1:abc"), "abc");
    }

    #[test]
    fn a_file_line_has_ollamas_fields_and_the_event() {
        let ev = PullEvent::FileDone {
            file: "config.json".into(),
            digest: "git-sha1:00ff".into(),
            size: 3,
            cached: false,
        };
        let line = serde_json::to_value(PullResponse::file("git-sha1:00ff", 3, 3).with_detail(ev))
            .expect("json");
        assert_eq!(
            line,
            serde_json::json!({"status": "pulling 00ff", "digest": "git-sha1:00ff", "total": 3,
                "completed": 3, "detail": {"event": "file_done", "file": "config.json",
                "digest": "git-sha1:00ff", "size": 3, "cached": false}})
        );
    }
}
