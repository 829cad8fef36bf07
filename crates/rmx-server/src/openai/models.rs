//! `GET /v1/models` and `GET /v1/models/{id}`: the stored models and the loaded ones, by the
//! names requests can use.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::openai::{Model, ModelList};

use super::error::OpenAiError;
use super::unix_time;
use crate::service::Service;

fn model(id: String, created: u64) -> Model {
    Model {
        id,
        object: "model".into(),
        created,
        owned_by: "rmx".into(),
    }
}

pub fn list_models(service: &Service) -> Vec<Model> {
    let mut data: Vec<Model> = service
        .store()
        .list()
        .map(|l| l.into_iter().map(|m| model(m.name, m.modified)).collect())
        .unwrap_or_default();
    let now = unix_time(std::time::SystemTime::now());
    for r in service.models().running() {
        if !data.iter().any(|m| m.id == r.name) {
            data.push(model(r.name, now));
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
        Ok(_) => Json(model(id, unix_time(std::time::SystemTime::now()))).into_response(),
        Err(e) => OpenAiError::from(e).into_response(),
    }
}
