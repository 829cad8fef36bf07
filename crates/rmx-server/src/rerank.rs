//! `POST /v1/rerank` (also `/rerank` and `/v2/rerank`): the shape Jina's and Cohere's rerank
//! APIs share, which their clients, LangChain's and LlamaIndex's rerankers, Open WebUI and
//! Continue send — `query`, `documents` (strings, or objects with `text`), `top_n`,
//! `return_documents` — answered with the documents ranked by `relevance_score`, best first.
//! Errors are in OpenAI's shape, like the rest of `/v1`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::openai::error::OpenAiError;
use crate::service::{RerankRequest, Service};
use crate::wire::body::{parse, BodyError};

pub fn routes() -> Router<Arc<Service>> {
    Router::new()
        .route("/v1/rerank", post(handler))
        .route("/rerank", post(handler))
        .route("/v2/rerank", post(handler))
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Document {
    Text(String),
    /// Cohere's and Jina's `{"text": ...}` objects.
    Object {
        text: String,
    },
}

#[derive(Debug, Deserialize)]
struct RerankBody {
    model: String,
    query: String,
    documents: Vec<Document>,
    /// Only the best N (all when absent).
    top_n: Option<usize>,
    /// Echo each document's text in its result (default true, as Jina's API does).
    return_documents: Option<bool>,
    /// rmx's addition: the task instruction a reranker like Qwen3-Reranker judges under.
    instruction: Option<String>,
    /// Cut documents that do not fit the model's prompt (default true); false refuses them.
    truncate: Option<bool>,
}

async fn handler(
    State(service): State<Arc<Service>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match run(service, body).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn run(
    service: Arc<Service>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Value, OpenAiError> {
    let body = body.map_err(BodyError::from)?;
    let req: RerankBody = parse(&body)?;
    if req.documents.is_empty() {
        return Err(OpenAiError::invalid(
            "documents",
            "`documents` is empty: send at least one document to rank",
        ));
    }
    if req.top_n == Some(0) {
        return Err(OpenAiError::invalid("top_n", "`top_n` must be at least 1"));
    }
    let texts: Vec<String> = req
        .documents
        .into_iter()
        .map(|d| match d {
            Document::Text(t) | Document::Object { text: t } => t,
        })
        .collect();
    let answer = service
        .rerank(RerankRequest {
            model: req.model.clone(),
            query: req.query,
            documents: texts.clone(),
            instruction: req.instruction,
            truncate: req.truncate.unwrap_or(true),
            keep_alive: None,
        })
        .await?;
    let mut order: Vec<usize> = (0..answer.scores.len()).collect();
    // Best first; equal scores keep the documents' order.
    order.sort_by(|&a, &b| {
        answer.scores[b]
            .total_cmp(&answer.scores[a])
            .then(a.cmp(&b))
    });
    order.truncate(req.top_n.unwrap_or(usize::MAX));
    let echo = req.return_documents.unwrap_or(true);
    let results: Vec<Value> = order
        .into_iter()
        .map(|i| {
            let mut r = json!({"index": i, "relevance_score": answer.scores[i]});
            if echo {
                r["document"] = json!({"text": texts[i]});
            }
            r
        })
        .collect();
    Ok(json!({
        "id": crate::openai::new_id("rerank"),
        "model": req.model,
        "results": results,
        "usage": {"prompt_tokens": answer.prompt_tokens, "total_tokens": answer.prompt_tokens},
    }))
}
