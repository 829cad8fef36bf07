//! `GET /health`: liveness for scripts, supervisors and load balancers (vLLM, SGLang and
//! llama.cpp's server answer the same path). 200 for as long as the daemon serves, with its
//! version and each model it holds: loading or loaded, the requests on it, and over how many
//! processes it is split (under `rmx launch`).

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
            let mut m = json!({
                "name": r.name,
                "state": if r.loaded { "loaded" } else { "loading" },
                "active": r.active,
                "running": r.running,
                "waiting": r.waiting,
            });
            // A model split over `rmx launch`'s ranks: a supervisor sees over how many.
            if let Some(s) = r.split {
                m["split"] = json!({"ranks": s.ranks, "mode": s.mode, "backend": s.backend});
            }
            m
        })
        .collect();
    Json(json!({
        "status": "ok",
        "version": rmx_api::VERSION,
        "models": models,
    }))
}
