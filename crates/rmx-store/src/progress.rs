//! What a pull reports while it runs. The library only emits these; the CLI (or the daemon,
//! streaming them to a client) decides how to draw them. The events are rmx-api's, since the
//! daemon sends them over the wire as they are.

pub use rmx_api::pull::{PlannedFile, PullEvent};

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
