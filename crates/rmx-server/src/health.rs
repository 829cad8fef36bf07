//! `GET /health`: liveness for scripts, supervisors and load balancers (vLLM, SGLang and
//! llama.cpp's server answer the same path). 200 for as long as the daemon serves, with its
//! version and each model it holds: loading or loaded, and the requests on it.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::service::Service;

pub fn routes() -> Router<Arc<Service>> {
    Router::new().route("/health", get(health))
}

async fn health(State(svc): State<Arc<Service>>) -> Json<Value> {
    let models: Vec<Value> = svc
        .running()
        .into_iter()
        .map(|r| {
            json!({
                "name": r.name,
                "state": if r.loaded { "loaded" } else { "loading" },
                "active": r.active,
                "running": r.running,
                "waiting": r.waiting,
            })
        })
        .collect();
    Json(json!({
        "status": "ok",
        "version": rmx_api::VERSION,
        "models": models,
    }))
}
