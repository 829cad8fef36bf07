//! Pulls of one repo take turns: a pull started right after a cancelled one waits for it to let
//! go of the blobs instead of failing on their locks. The service holds the locks, so that
//! every surface that pulls (`native::pull`) shares them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One lock per repo.
#[derive(Debug, Default)]
pub(crate) struct PullLocks(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl PullLocks {
    pub(crate) fn of(&self, repo: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(repo.to_string()).or_default().clone()
    }
}
