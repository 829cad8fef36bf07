//! `POST /api/pull`: a model downloaded into the daemon's store (the Hugging Face cache of the
//! environment the daemon started in), its progress streamed as Ollama's ndjson lines. The Hub
//! token is the request's `hf_token` when it has one (the CLI sends its shell's), else the
//! daemon's `HF_TOKEN`, else the token file as it is at the time of the pull.
//!
//! The pull runs in a task that owns the download: when the client hangs up, the task finds
//! the body gone (at its next line or heartbeat, even while a transfer stalls), and dropping
//! the download leaves its `.incomplete` files for the next pull to resume. Pulls of one repo
//! take turns, so a pull started right after a cancelled one waits for it to let go of the
//! blobs instead of failing on their locks. A daemon shutting down ends its pulls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::{ErrorResponse, PullEvent, PullRequest, PullResponse};
use rmx_store::{ModelRef, Reporter, StoreError};

use super::ndjson::{self, Lines};
use super::parse;
use crate::service::Service;

/// At most one progress line per file this often (the store reports every 64 KiB).
const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// How often the task checks that the client is still there. After this long without a line
/// the last one also goes out again: hyper notices a client that closed its end, but only a
/// write finds one that vanished (a dropped network).
const HEARTBEAT: Duration = Duration::from_millis(500);

pub async fn pull(State(svc): State<Arc<Service>>, body: Bytes) -> Response {
    let req: PullRequest = match parse(&body) {
        Ok(req) => req,
        Err(e) => return e.into_response(),
    };
    let Some(name) = req.model_name().map(str::to_string) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "missing `model`: name the model to pull (an alias from `rmx models` or a Hugging Face repo id owner/name)".into(),
        );
    };
    // Names that can never be pulled are refused with a status before anything streams. Over
    // TCP a folder gets one answer whatever it holds (`crate::listener`).
    let tcp = crate::listener::current() == crate::listener::Listener::Tcp;
    let repo = match svc.store().resolve(&name) {
        Ok(ModelRef::Hub { repo, .. }) => repo.to_string(),
        Ok(ModelRef::Local { alias: None, .. }) | Err(StoreError::NotAModelDir { .. }) if tcp => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("`{name}` is not a model that can be pulled: name an alias from `rmx models` or a Hugging Face repo id owner/name"),
            );
        }
        Ok(ModelRef::Local { path, .. }) => {
            let (status, message) = pull_error(StoreError::LocalModel { path });
            return refuse(status, message);
        }
        Err(e) => {
            let (status, message) = pull_error(e);
            return refuse(status, message);
        }
    };
    let lock = svc.pull_locks().of(&repo);
    let mut shutdown = svc.shutdown_signal();
    let token = req.hf_token.map(|t| t.0).filter(|t| !t.trim().is_empty());
    if req.stream == Some(false) {
        let download = async {
            let _turn = lock.lock().await;
            svc.store()
                .pull_with_token(&name, token, &rmx_store::NoProgress)
                .await
        };
        return tokio::select! {
            result = download => match result {
                Ok(_) => Json(PullResponse::status("success")).into_response(),
                Err(e) => {
                    let (status, message) = pull_error(e);
                    refuse(status, message)
                }
            },
            _ = shutdown.wait_for(|s| *s) => refuse(StatusCode::SERVICE_UNAVAILABLE, stopped(&name)),
        };
    }
    let (lines, rx) = ndjson::channel();
    let progress = ProgressLines::new(lines);
    progress.send(PullResponse::status("pulling manifest"));
    tokio::spawn(async move {
        let download = async {
            let _turn = lock.lock().await;
            svc.store().pull_with_token(&name, token, &progress).await
        };
        tokio::pin!(download);
        let mut beat = tokio::time::interval(HEARTBEAT);
        loop {
            tokio::select! {
                result = &mut download => {
                    if let Err(e) = result {
                        progress.error(pull_error(e).1);
                    }
                    return;
                }
                _ = shutdown.wait_for(|s| *s) => {
                    progress.error(stopped(&name));
                    return;
                }
                _ = beat.tick() => {
                    if !progress.heartbeat() {
                        // The client hung up: dropping the download stops it.
                        return;
                    }
                }
            }
        }
    });
    ndjson::response(rx)
}

fn stopped(name: &str) -> String {
    format!("the daemon is shutting down; what arrived of `{name}` stays, run `rmx pull {name}` again to resume")
}

fn refuse(status: StatusCode, error: String) -> Response {
    (status, Json(ErrorResponse { error })).into_response()
}

/// Store errors with the status a client can act on and, for names, what to do instead.
fn pull_error(e: StoreError) -> (StatusCode, String) {
    let status = match &e {
        StoreError::UnknownModel { .. } => {
            // After "did you mean a, b?" a new sentence; else a clause.
            let text = e.to_string();
            let joint = if text.ends_with('?') { " " } else { "; " };
            return (
                StatusCode::NOT_FOUND,
                format!("{text}{joint}`rmx models` lists the names rmx knows"),
            );
        }
        StoreError::RepoNotFound { .. } | StoreError::FileNotFound { .. } => StatusCode::NOT_FOUND,
        StoreError::InvalidRepoId { .. }
        | StoreError::LocalModel { .. }
        | StoreError::NotAModelDir { .. }
        | StoreError::NoConfig { .. }
        | StoreError::NoWeights { .. }
        | StoreError::UnsupportedFamily { .. } => StatusCode::BAD_REQUEST,
        StoreError::NotEnoughSpace { .. } => StatusCode::INSUFFICIENT_STORAGE,
        StoreError::Locked { .. } => StatusCode::CONFLICT,
        StoreError::Http { .. }
        | StoreError::HttpStatus { .. }
        | StoreError::BadHeader { .. }
        | StoreError::BadResponse { .. }
        | StoreError::UnsafeName { .. }
        | StoreError::ConfigTooLarge { .. }
        | StoreError::Truncated { .. }
        | StoreError::SizeMismatch { .. }
        | StoreError::ChecksumMismatch { .. } => StatusCode::BAD_GATEWAY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, e.with_causes())
}

/// Turns the store's events into lines: Ollama's statuses with the event as `detail`.
struct ProgressLines {
    lines: Lines,
    state: Mutex<LineState>,
}

struct LineState {
    /// When each digest's last progress line went out.
    progress_at: HashMap<String, Instant>,
    last: Option<PullResponse>,
    last_at: Instant,
    gone: bool,
}

impl ProgressLines {
    fn new(lines: Lines) -> ProgressLines {
        ProgressLines {
            lines,
            state: Mutex::new(LineState {
                progress_at: HashMap::new(),
                last: None,
                last_at: Instant::now(),
                gone: false,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, LineState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, line: PullResponse) {
        let mut s = self.state();
        if !self.lines.send(&line) {
            s.gone = true;
        }
        s.last_at = Instant::now();
        s.last = Some(line);
    }

    fn error(&self, error: String) {
        let _ = self.lines.send(&ErrorResponse { error });
    }

    /// Repeats the last line (without its event, which happened once) after a silence;
    /// false once the client is gone.
    fn heartbeat(&self) -> bool {
        let mut s = self.state();
        if !s.gone && s.last_at.elapsed() >= HEARTBEAT {
            if let Some(last) = &s.last {
                let again = PullResponse {
                    detail: None,
                    ..last.clone()
                };
                if !self.lines.send(&again) {
                    s.gone = true;
                }
                s.last_at = Instant::now();
            }
        }
        !s.gone && !self.lines.is_closed()
    }

    /// A progress line is due: the file's first, its last, or the first after a pause.
    fn progress_due(&self, digest: &str, done: u64, size: u64) -> bool {
        let mut s = self.state();
        let now = Instant::now();
        let due = done >= size
            || s.progress_at
                .get(digest)
                .is_none_or(|t| now.duration_since(*t) >= PROGRESS_EVERY);
        if due {
            s.progress_at.insert(digest.to_string(), now);
        }
        due
    }
}

impl Reporter for ProgressLines {
    fn report(&self, event: &PullEvent) {
        let detail = event.clone();
        match event {
            PullEvent::Resolved { files, .. } => {
                self.send(PullResponse::status("pulling manifest").with_detail(detail));
                for f in files {
                    self.send(PullResponse::file(&f.digest, f.size, f.present));
                }
            }
            PullEvent::Verifying { digest, .. } => self.send(PullResponse {
                digest: Some(digest.clone()),
                ..PullResponse::status("verifying sha256 digest").with_detail(detail)
            }),
            PullEvent::FileStarted {
                digest,
                size,
                offset,
                ..
            } => self.send(PullResponse::file(digest, *size, *offset).with_detail(detail)),
            PullEvent::Progress {
                digest,
                file_done,
                file_size,
                ..
            } => {
                if self.progress_due(digest, *file_done, *file_size) {
                    self.send(
                        PullResponse::file(digest, *file_size, *file_done).with_detail(detail),
                    );
                }
            }
            PullEvent::Retrying {
                digest,
                attempt,
                error,
                ..
            } => self.send(
                PullResponse::status(format!(
                    "retrying {} (attempt {attempt}): {error}",
                    rmx_api::pull::short_digest(digest)
                ))
                .with_detail(detail),
            ),
            PullEvent::FileDone { digest, size, .. } => {
                self.send(PullResponse::file(digest, *size, *size).with_detail(detail))
            }
            PullEvent::Writing { .. } => {
                // Every file was checked against its digest before this event.
                self.send(PullResponse::status("verifying sha256 digest"));
                self.send(PullResponse::status("writing manifest").with_detail(detail));
            }
            PullEvent::Finished { .. } => {
                self.send(PullResponse::status("success").with_detail(detail))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(done: u64) -> PullEvent {
        PullEvent::Progress {
            file: "model.safetensors".into(),
            digest: "sha256:ab".into(),
            file_done: done,
            file_size: 1000,
            done,
            total: 1000,
        }
    }

    #[test]
    fn progress_lines_are_rate_limited_but_the_last_always_goes_out() {
        let (lines, mut rx) = ndjson::channel();
        let p = ProgressLines::new(lines);
        p.report(&progress(100));
        // As if the last line had just gone out, however slow this machine is.
        let later = Instant::now() + Duration::from_secs(3600);
        p.state().progress_at.insert("sha256:ab".into(), later);
        for done in (200..1000).step_by(100) {
            p.report(&progress(done));
        }
        p.report(&progress(1000));
        let mut got = Vec::new();
        while let Ok(b) = rx.try_recv() {
            let line: PullResponse = serde_json::from_slice(&b).expect("a line");
            got.push(line.completed);
        }
        assert_eq!(got, [Some(100), Some(1000)]);
    }

    #[test]
    fn a_heartbeat_repeats_the_last_line_without_its_event_and_sees_a_hang_up() {
        let (lines, mut rx) = ndjson::channel();
        let p = ProgressLines::new(lines);
        p.report(&progress(100));
        p.state().last_at = Instant::now() - HEARTBEAT;
        assert!(p.heartbeat());
        let first: PullResponse =
            serde_json::from_slice(&rx.try_recv().expect("line")).expect("json");
        let again: PullResponse =
            serde_json::from_slice(&rx.try_recv().expect("line")).expect("json");
        assert!(first.detail.is_some());
        assert_eq!(
            again,
            PullResponse {
                detail: None,
                ..first
            }
        );
        drop(rx);
        assert!(!p.heartbeat());
    }

    #[test]
    fn store_errors_get_statuses_a_client_can_act_on() {
        let status = |e| pull_error(e).0;
        assert_eq!(
            status(StoreError::RepoNotFound {
                repo: "a/b".into(),
                endpoint: "https://huggingface.co".into()
            }),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            status(StoreError::InvalidRepoId { id: "a/b/c".into() }),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status(StoreError::UnsupportedFamily {
                repo: "a/b".into(),
                unsupported: rmx_store::Unsupported::new("gemma3n", ["llama"]),
            }),
            StatusCode::BAD_REQUEST
        );
        let unknown = pull_error(StoreError::UnknownModel {
            name: "qwen".into(),
            suggestions: vec!["qwen3-0.6b-4bit".into()],
        });
        assert_eq!(unknown.0, StatusCode::NOT_FOUND);
        let text = unknown.1;
        assert!(
            text.contains("did you mean qwen3-0.6b-4bit") && text.contains("rmx models"),
            "{text}"
        );
    }
}
