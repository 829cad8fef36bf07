//! A daemon whose models are split over the ranks `rmx launch` started (docs/distributed.md):
//! every model it loads is loaded through rank 0's [`GroupLead`], one model at a time over the
//! whole group.
//!
//! The group's control words (`Load`) and a running engine's turns cross the same MLX group,
//! so they must never interleave: a load waits until the previous model's engine has stopped
//! on rank 0 (and with it on every rank). The loaded model holds the group's *turn* — a guard
//! dropped after its engine, which joins its thread — and the next load takes it.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmx_engine::group::GroupLead;
use rmx_engine::{Engine, EngineError, EngineOptions, ParallelMode};
use tokio::sync::OwnedMutexGuard;

use crate::error::ServiceError;

/// How long a load waits for the previous model to finish its answers and stop.
const PREVIOUS_STOPS: Duration = Duration::from_secs(30);

/// How a served model is split: what `/api/ps` and `rmx ps` show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub ranks: usize,
    /// "tensor" or "pipeline".
    pub mode: &'static str,
    /// MLX's backend: "ring", "nccl".
    pub backend: String,
}

/// Rank 0's lead of the group its daemon serves with.
pub struct GroupServing {
    lead: Arc<Mutex<GroupLead>>,
    mode: ParallelMode,
    split: Split,
    turn: Arc<tokio::sync::Mutex<()>>,
}

/// Held by a loaded model after its engine (see the module's docs).
pub type GroupTurn = OwnedMutexGuard<()>;

impl GroupServing {
    pub fn new(lead: GroupLead, mode: ParallelMode) -> Arc<GroupServing> {
        let split = Split {
            ranks: usize::try_from(lead.size()).unwrap_or(0),
            mode: mode.name(),
            backend: lead.backend().name().to_string(),
        };
        Arc::new(GroupServing {
            lead: Arc::new(Mutex::new(lead)),
            mode,
            split,
            turn: Arc::default(),
        })
    }

    pub fn split(&self) -> &Split {
        &self.split
    }

    /// Loads `path` split over the group, once the previous model has stopped on every rank.
    /// The disk prefix cache is off: each rank's disk is its own (mirror.rs).
    pub async fn load(
        &self,
        path: &Path,
        options: EngineOptions,
    ) -> Result<Result<(Engine, GroupTurn), EngineError>, ServiceError> {
        let turn = tokio::time::timeout(PREVIOUS_STOPS, self.turn.clone().lock_owned())
            .await
            .map_err(|_| {
                ServiceError::Busy(format!(
                    "the model before this one still runs on the group of {} ranks after {} s; \
                     a group serves one model at a time: try again when its answers end",
                    self.split.ranks,
                    PREVIOUS_STOPS.as_secs()
                ))
            })?;
        let (lead, mode, path) = (self.lead.clone(), self.mode, path.to_path_buf());
        let options = EngineOptions {
            prefix_dir: None,
            ..options
        };
        let loaded = tokio::task::spawn_blocking(move || {
            let lead = lead.lock().unwrap_or_else(|p| p.into_inner());
            lead.load(&path, mode, options)
        })
        .await
        .map_err(|e| ServiceError::Internal(format!("load task failed: {e}")))?;
        Ok(loaded.map(|engine| (engine, turn)))
    }
}
