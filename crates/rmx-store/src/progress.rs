//! What a pull reports while it runs. The library only emits these; the CLI (or the daemon,
//! streaming them to a client) decides how to draw them.

use serde::Serialize;

/// One file of a pull, as planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedFile {
    pub file: String,
    pub size: u64,
    /// Bytes already on disk: a verified blob counts fully, a partial download by its length.
    pub present: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum PullEvent {
    /// The repo exists and its files are known; nothing has been written yet.
    Resolved {
        repo: String,
        commit: String,
        files: Vec<PlannedFile>,
        /// Sum of all file sizes.
        total: u64,
        /// Bytes already on disk before this pull; `total - present` is what will travel.
        present: u64,
    },
    /// An existing blob is being re-hashed before it is trusted.
    Verifying { file: String, size: u64 },
    /// A transfer starts (or resumes, when `offset > 0`).
    FileStarted {
        file: String,
        size: u64,
        offset: u64,
    },
    /// Bytes arrived. `done`/`total` cover the whole pull, so a reporter can show rate and ETA
    /// from them alone.
    Progress {
        file: String,
        file_done: u64,
        file_size: u64,
        done: u64,
        total: u64,
    },
    /// A transfer failed and will be resumed (lost connection) or restarted (bad checksum).
    Retrying {
        file: String,
        attempt: u32,
        error: String,
    },
    /// The file is complete and verified. `cached` when no byte had to be fetched.
    FileDone {
        file: String,
        size: u64,
        cached: bool,
    },
    /// Every file verified and the snapshot published.
    Finished {
        repo: String,
        commit: String,
        downloaded: u64,
    },
}

/// Receives pull events. Called from the task running the pull; keep it quick.
pub trait Reporter: Send + Sync {
    fn report(&self, event: &PullEvent);
}

impl<F: Fn(&PullEvent) + Send + Sync> Reporter for F {
    fn report(&self, event: &PullEvent) {
        self(event)
    }
}

/// A reporter that ignores everything (scripts, tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Reporter for NoProgress {
    fn report(&self, _event: &PullEvent) {}
}
