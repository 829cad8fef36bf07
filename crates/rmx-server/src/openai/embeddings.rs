//! `POST /v1/embeddings`: vectors for a string, strings, token ids or lists of token ids, as
//! JSON numbers or base64 (`encoding_format`), cut to `dimensions` where asked. OpenAI never
//! truncates an input: one longer than the model takes is a 400 naming it.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::openai::{
    Embedding, EmbeddingInput, EmbeddingRequest, EmbeddingResponse, EmbeddingUsage,
    EmbeddingVector, EncodingFormat,
};

use super::error::OpenAiError;
use crate::service::{EmbedInput, EmbedRequest, PromptChoice, Service};
use crate::wire::body::{parse, BodyError};

pub async fn handler(
    State(service): State<Arc<Service>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match run(service, body).await {
        Ok(r) => Json(r).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn run(
    service: Arc<Service>,
    body: Result<Bytes, BytesRejection>,
) -> Result<EmbeddingResponse, OpenAiError> {
    let body = body.map_err(BodyError::from)?;
    let req: EmbeddingRequest = parse(&body)?;
    if req.input.is_empty() {
        return Err(OpenAiError::invalid(
            "input",
            "`input` is empty: send a string or a non-empty array",
        ));
    }
    if req.dimensions == Some(0) {
        return Err(OpenAiError::invalid(
            "dimensions",
            "`dimensions` must be at least 1",
        ));
    }
    let inputs = match req.input {
        EmbeddingInput::Text(t) => vec![EmbedInput::Text(t)],
        EmbeddingInput::Texts(v) => v.into_iter().map(EmbedInput::Text).collect(),
        EmbeddingInput::Tokens(ids) => vec![EmbedInput::Tokens(ids)],
        EmbeddingInput::TokenLists(v) => v.into_iter().map(EmbedInput::Tokens).collect(),
    };
    let prompt = match (req.prompt_name.clone(), req.input_type.as_deref()) {
        (Some(name), _) => PromptChoice::Named(name),
        (None, None) => PromptChoice::Default,
        (None, Some(t)) => match t {
            "query" | "search_query" | "retrieval.query" => PromptChoice::IfPresent("query".into()),
            "document" | "search_document" | "passage" | "retrieval.passage" => {
                PromptChoice::IfPresent("document".into())
            }
            other => {
                return Err(OpenAiError::invalid(
                    "input_type",
                    format!("`input_type` {other:?}: use \"query\" or \"document\""),
                ))
            }
        },
    };
    let answer = service
        .embed(EmbedRequest {
            model: req.model.clone(),
            inputs,
            truncate: false,
            truncate_switch: false,
            dimensions: req.dimensions,
            keep_alive: None,
            prompt,
        })
        .await?;
    let base64 = req.encoding_format == Some(EncodingFormat::Base64);
    let data = answer
        .vectors
        .into_iter()
        .enumerate()
        .map(|(index, v)| Embedding {
            object: "embedding".into(),
            index,
            embedding: if base64 {
                EmbeddingVector::base64(&v)
            } else {
                EmbeddingVector::Float(v)
            },
        })
        .collect();
    Ok(EmbeddingResponse {
        object: "list".into(),
        data,
        model: req.model,
        usage: EmbeddingUsage {
            prompt_tokens: answer.prompt_tokens,
            total_tokens: answer.prompt_tokens,
        },
    })
}
