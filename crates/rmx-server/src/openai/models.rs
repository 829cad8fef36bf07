//! `GET /v1/models` and `GET /v1/models/{id}`: the stored models and the loaded ones, by the
//! names requests can use.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::openai::{Model, ModelList};

use super::error::OpenAiError;
use super::unix_time;
use crate::native::loaded_kind;
use crate::service::Service;

fn model(id: String, created: u64, kind: Option<String>) -> Model {
    Model {
        id,
        object: "model".into(),
        created,
        owned_by: "rmx".into(),
        kind,
    }
}

pub fn list_models(service: &Service) -> Vec<Model> {
    let mut data: Vec<Model> = service
        .store()
        .list()
        .map(|l| {
            l.into_iter()
                .map(|m| {
                    let kind = loaded_kind(service, &m.name);
                    model(m.name, m.modified, kind)
                })
                .collect()
        })
        .unwrap_or_default();
    // The folders user aliases name, imported models among them, as `rmx ls` lists them.
    for info in service.store().local_models().unwrap_or_default() {
        let kind = loaded_kind(service, &info.name);
        let modified = std::fs::metadata(&info.path)
            .and_then(|m| m.modified())
            .map(unix_time)
            .unwrap_or(0);
        data.push(model(info.name, modified, kind));
    }
    let now = unix_time(std::time::SystemTime::now());
    for r in service.running() {
        if !data.iter().any(|m| m.id == r.name) {
            let kind = r.kind.map(|k| k.name().to_string());
            data.push(model(r.name, now, kind));
        }
    }
    data.sort_by(|a, b| a.id.cmp(&b.id));
    data
}

pub async fn list(State(service): State<Arc<Service>>) -> Json<ModelList> {
    Json(ModelList {
        object: "list".into(),
        data: list_models(&service),
    })
}

pub async fn get(State(service): State<Arc<Service>>, Path(id): Path<String>) -> Response {
    if let Some(m) = list_models(&service).into_iter().find(|m| m.id == id) {
        return Json(m).into_response();
    }
    // A repo id or folder that resolves is a model too, listed or not.
    match service.resolve(&id) {
        Ok(r) => {
            let kind = service.models().kind(&r.path).map(|k| k.name().to_string());
            Json(model(id, unix_time(std::time::SystemTime::now()), kind)).into_response()
        }
        Err(e) => OpenAiError::from(e).into_response(),
    }
}
