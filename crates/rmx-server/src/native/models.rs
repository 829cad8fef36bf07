//! `/api/ps`, `/api/tags`, `/api/delete`, `/api/version` (`/api/show` is `show.rs`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use rmx_api::{
    ModelDetails, ModelRequest, ModelSplit, PsResponse, RunningModel, StoredModel, TagsResponse,
    VersionResponse,
};
use rmx_store::StoreError;

use super::{parse, NativeError};
use crate::error::ServiceError;
use crate::service::Service;

pub async fn ps(State(svc): State<Arc<Service>>) -> Json<PsResponse> {
    let processor = crate::processor();
    let models = svc
        .running()
        .into_iter()
        .map(|r| RunningModel {
            details: stored_details(&svc, &r.name),
            model: r.name.clone(),
            name: r.name,
            path: r.path.display().to_string(),
            size: r.size,
            processor: processor.to_string(),
            expires_at: r
                .expires
                .map(|(_, wall)| chrono::DateTime::<chrono::Utc>::from(wall).to_rfc3339()),
            until: if !r.loaded {
                "loading".into()
            } else if r.active > 0 {
                "in use".into()
            } else if r.forever {
                "forever".into()
            } else {
                r.expires
                    .map(|(d, _)| from_now(d))
                    .unwrap_or_else(|| "stopping".into())
            },
            context_length: r.context_length,
            active: r.active,
            running: r.running,
            waiting: r.waiting,
            kv_cache: r.kv_cache.0 as u64,
            kv_cache_unquantized: r.kv_cache.1 as u64,
            layers: r.layers,
            kind: r.kind.map(|k| k.name().to_string()),
            split: r.split.map(|s| ModelSplit {
                ranks: s.ranks,
                mode: s.mode.to_string(),
                backend: s.backend,
            }),
        })
        .collect();
    Json(PsResponse { models })
}

fn from_now(d: Duration) -> String {
    let s = d.as_secs();
    let (n, unit) = match s {
        0..=89 => (s, "second"),
        90..=5399 => ((s + 30) / 60, "minute"),
        _ => ((s + 1800) / 3600, "hour"),
    };
    format!("{n} {unit}{} from now", if n == 1 { "" } else { "s" })
}

/// The models in the Hugging Face cache, then the folders user aliases name (imported models
/// among them): what `rmx ls` lists.
pub async fn tags(State(svc): State<Arc<Service>>) -> Result<Json<TagsResponse>, NativeError> {
    let list = svc.store().list().map_err(store_error)?;
    let local = svc.store().local_models().map_err(store_error)?;
    let mut models: Vec<StoredModel> = list
        .into_iter()
        .map(|m| StoredModel {
            kind: loaded_kind(&svc, &m.name),
            details: stored_details(&svc, &m.name),
            name: m.name,
            model: m.repo.to_string(),
            modified_at: chrono::DateTime::<chrono::Utc>::from_timestamp(m.modified as i64, 0)
                .map(|t| t.to_rfc3339())
                .unwrap_or_default(),
            size: m.size,
            complete: m.status == rmx_store::ModelStatus::Complete,
        })
        .collect();
    models.extend(local.into_iter().map(|info| StoredModel {
        kind: loaded_kind(&svc, &info.name),
        details: Some(super::show::details(&info)),
        model: info.name.clone(),
        modified_at: super::show::modified_at(&info.path).unwrap_or_default(),
        size: info.size,
        complete: info.status == rmx_store::ModelStatus::Complete,
        name: info.name,
    }));
    Ok(Json(TagsResponse { models }))
}

pub async fn delete(
    State(svc): State<Arc<Service>>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, NativeError> {
    let req: ModelRequest = parse(&body)?;
    // Through `resolve` first, so that over TCP a folder it may not name is a 404 like any
    // other unknown name, rather than the store's words about what the folder holds.
    let resolved = svc.resolve(&req.model)?;
    svc.models().unload(&resolved.path);
    // What `rmx rm` removes: a model from the Hub, or an imported one with its alias.
    let removed = svc.store().remove(&req.model).map_err(store_error)?;
    Ok(Json(serde_json::json!({
        "model": req.model,
        "repo": removed.repo.map(|r| r.to_string()),
        "freed": removed.freed,
    })))
}

pub async fn version() -> Json<VersionResponse> {
    Json(VersionResponse {
        version: rmx_api::VERSION.to_string(),
    })
}

/// What the model `name` answers ("chat", "embedding", "rerank"): the loaded engine's word,
/// else its files read as loading them would read them.
pub(crate) fn loaded_kind(svc: &Service, name: &str) -> Option<String> {
    let resolved = svc.resolve(name).ok()?;
    svc.models()
        .kind(&resolved.path)
        .or_else(|| rmx_engine::model_kind(&resolved.path))
        .map(|k| k.name().to_string())
}

/// Ollama's `details` of the model `name`, from its files; None when they cannot tell.
fn stored_details(svc: &Service, name: &str) -> Option<ModelDetails> {
    let info = svc.store().info(name).ok()?;
    Some(super::show::details(&info))
}

pub(crate) fn store_error(e: StoreError) -> NativeError {
    let message = e.to_string();
    NativeError(match e {
        StoreError::UnknownModel { name, .. } => ServiceError::UnknownModel {
            name,
            available: Vec::new(),
            reason: message,
        },
        StoreError::NotInStore { name, .. } => ServiceError::NotDownloaded { name },
        StoreError::LocalModel { .. }
        | StoreError::NotAModelDir { .. }
        | StoreError::InvalidRepoId { .. } => ServiceError::BadRequest(message),
        _ => ServiceError::Internal(message),
    })
}
