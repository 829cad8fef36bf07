//! Reranking through the service core: the model resolved and held like a generation's, the
//! judging prompts built off the async workers, one score per document in the request's order.

use std::time::{Duration, Instant};

use rmx_api::KeepAlive;
use rmx_engine::ModelKind;

use super::{Service, ServiceError};

/// A rerank request, whatever API shape it came in.
#[derive(Debug, Clone)]
pub struct RerankRequest {
    /// Alias, `owner/name` repo id, or model folder.
    pub model: String,
    pub query: String,
    /// At least one.
    pub documents: Vec<String>,
    /// The task instruction the reranker judges under; `None`: the model's default.
    pub instruction: Option<String>,
    /// Cut a document that does not fit the model's prompt (on by default in every rerank API);
    /// false refuses it.
    pub truncate: bool,
    pub keep_alive: Option<KeepAlive>,
}

/// Each document's score, in the request's order.
#[derive(Debug, Clone)]
pub struct Reranked {
    pub scores: Vec<f32>,
    /// The tokens the model read, all prompts together.
    pub prompt_tokens: usize,
    pub load_duration: Duration,
    pub total_duration: Duration,
}

impl Service {
    /// Scores for the request's documents. Dropping the future (the client hung up) cancels
    /// what is not computed yet.
    pub async fn rerank(&self, req: RerankRequest) -> Result<Reranked, ServiceError> {
        let started = Instant::now();
        if req.documents.is_empty() {
            return Err(ServiceError::BadRequest(
                "`documents` is empty: send at least one document to rank".into(),
            ));
        }
        let held = self
            .hold(&req.model, req.keep_alive, ModelKind::Rerank, started)
            .await?;
        let (loaded, load_duration) = (held.loaded.clone(), held.load_duration);
        let engine_side = loaded.clone();
        let (tokens, answer) = tokio::task::spawn_blocking(move || {
            engine_side.engine.rerank(
                &req.query,
                &req.documents,
                req.instruction.as_deref(),
                req.truncate,
            )
        })
        .await
        .map_err(|e| ServiceError::Internal(format!("building the prompts failed: {e}")))??;
        let scores = self.engine_answer(answer).await?;
        drop(held);
        Ok(Reranked {
            scores,
            prompt_tokens: tokens,
            load_duration,
            total_duration: started.elapsed(),
        })
    }
}
