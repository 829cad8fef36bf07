//! `POST /api/embed` and the older `POST /api/embeddings`, shaped like Ollama's.
//!
//! As in Ollama: `/api/embed` cuts long inputs unless `truncate: false` and answers unit-length
//! vectors (normalized again after `dimensions` cuts them); `/api/embeddings` answers the
//! model's vector as it is. A request with no input (`""`, `[]` or none) loads the model and
//! answers no vectors, the way clients warm a model up.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use rmx_api::{EmbedRequest, EmbedResponse, EmbeddingsRequest, EmbeddingsResponse};

use super::{parse, NativeError};
use crate::service::{normalize, EmbedInput, PromptChoice, Service};

pub async fn embed(
    State(svc): State<Arc<Service>>,
    body: Bytes,
) -> Result<Json<EmbedResponse>, NativeError> {
    let req: EmbedRequest = parse(&body)?;
    let inputs = match req.input {
        None => Vec::new(),
        Some(rmx_api::embed::EmbedInput::One(s)) if s.is_empty() => Vec::new(),
        Some(input) => input.into_vec(),
    };
    if inputs.is_empty() {
        let took = svc.load_embedder(&req.model, req.keep_alive).await?;
        return Ok(Json(EmbedResponse {
            model: req.model,
            embeddings: Vec::new(),
            total_duration: took.as_nanos() as u64,
            load_duration: took.as_nanos() as u64,
            prompt_eval_count: 0,
        }));
    }
    let mut answer = svc
        .embed(crate::service::EmbedRequest {
            model: req.model.clone(),
            inputs: inputs.into_iter().map(EmbedInput::Text).collect(),
            truncate: req.truncate.unwrap_or(true),
            truncate_switch: true,
            dimensions: req.dimensions,
            keep_alive: req.keep_alive,
            prompt: PromptChoice::Default,
        })
        .await?;
    answer.vectors.iter_mut().for_each(|v| normalize(v));
    Ok(Json(EmbedResponse {
        model: req.model,
        embeddings: answer.vectors,
        total_duration: answer.total_duration.as_nanos() as u64,
        load_duration: answer.load_duration.as_nanos() as u64,
        prompt_eval_count: answer.prompt_tokens,
    }))
}

pub async fn embeddings(
    State(svc): State<Arc<Service>>,
    body: Bytes,
) -> Result<Json<EmbeddingsResponse>, NativeError> {
    let req: EmbeddingsRequest = parse(&body)?;
    if req.prompt.is_empty() {
        svc.load_embedder(&req.model, req.keep_alive).await?;
        return Ok(Json(EmbeddingsResponse {
            embedding: Vec::new(),
        }));
    }
    let answer = svc
        .embed(crate::service::EmbedRequest {
            model: req.model,
            inputs: vec![EmbedInput::Text(req.prompt)],
            // This route has no switch for it: cut a long prompt rather than refuse it.
            truncate: true,
            truncate_switch: false,
            dimensions: None,
            keep_alive: req.keep_alive,
            prompt: PromptChoice::Default,
        })
        .await?;
    Ok(Json(EmbeddingsResponse {
        embedding: answer.vectors.into_iter().next().unwrap_or_default(),
    }))
}
