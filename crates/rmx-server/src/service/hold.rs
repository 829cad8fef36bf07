//! What the requests that are not generations (embeddings, reranking) share: the model
//! resolved, loaded and held for the request, checked to do that kind of work; and the engine's
//! one answer awaited against the daemon's shutdown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmx_api::KeepAlive;
use rmx_engine::ModelKind;
use tokio::sync::oneshot;

use super::{Service, ServiceError};
use crate::lifecycle::{Lease, Loaded};

/// A model held for one request: dropping it lets keep-alive and eviction have the model again.
pub(super) struct Held {
    /// Never read: held for its drop.
    _lease: Lease,
    pub loaded: Arc<Loaded>,
    /// How long this request waited for the model to load (zero when it was loaded already).
    pub load_duration: Duration,
}

impl Service {
    /// `model` loaded (keep-alive as asked, else the daemon's) and held, refused with a 400
    /// that says what it does when it is not of `kind`. `started`: when the request came.
    pub(super) async fn hold(
        &self,
        model: &str,
        keep_alive: Option<KeepAlive>,
        kind: ModelKind,
        started: Instant,
    ) -> Result<Held, ServiceError> {
        if self.is_shutting_down() {
            return Err(ServiceError::ShuttingDown);
        }
        let resolved = self.resolve(model)?;
        let keep_alive = keep_alive.unwrap_or(self.default_keep_alive);
        let lease = self.models.acquire(resolved, keep_alive).await?;
        let loaded = lease.loaded()?.clone();
        if loaded.engine.kind() != kind {
            return Err(ServiceError::WrongKind {
                name: model.to_string(),
                kind: loaded.engine.kind(),
            });
        }
        let load_duration = if started.elapsed() >= loaded.load_duration {
            loaded.load_duration
        } else {
            Duration::ZERO
        };
        Ok(Held {
            _lease: lease,
            loaded,
            load_duration,
        })
    }

    /// The engine's answer, or [`ServiceError::ShuttingDown`] when the daemon stops first (the
    /// engine then goes away with the request).
    pub(super) async fn engine_answer<T>(
        &self,
        answer: oneshot::Receiver<Result<T, String>>,
    ) -> Result<T, ServiceError> {
        let mut shutdown = self.shutdown.subscribe();
        tokio::select! {
            v = answer => match v {
                Ok(v) => v.map_err(ServiceError::Internal),
                Err(_) if self.is_shutting_down() => Err(ServiceError::ShuttingDown),
                Err(_) => Err(ServiceError::Internal("the model's engine thread stopped".into())),
            },
            _ = shutdown.wait_for(|down| *down) => Err(ServiceError::ShuttingDown),
        }
    }
}
