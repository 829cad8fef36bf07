//! `POST /api/generate`: a prompt completed, through the chat template unless `raw`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::{DoneStats, GenerateRequest, GenerateResponse};

use super::{
    image_parts, kv_quant, ndjson, now_rfc3339, parse, sampling, shape, speculative, stats,
    thinking, NativeError,
};
use crate::error::ServiceError;
use crate::service::{InternalRequest, PromptInput, Role, Service, ServiceEvent, TemplateMessage};

pub async fn generate(
    State(svc): State<Arc<Service>>,
    body: Bytes,
) -> Result<Response, NativeError> {
    let req: GenerateRequest = parse(&body)?;
    if req.raw && !req.images.is_empty() {
        return Err(NativeError(ServiceError::BadRequest(
            "images: a raw prompt takes no images (the chat template places them); send the \
             request without `raw`"
                .into(),
        )));
    }
    if req.prompt.is_empty() && req.system.is_none() {
        return load_or_unload(&svc, req).await;
    }
    let (sampling, max_tokens, stop) = sampling(req.options.as_ref())?;
    let thinks = thinking(req.think.as_ref(), req.options.as_ref())?;
    let prompt = if req.raw {
        PromptInput::Raw(req.prompt.clone())
    } else {
        let mut messages = Vec::new();
        if let Some(s) = &req.system {
            messages.push(TemplateMessage::new(Role::System, s.clone()));
        }
        messages.push(TemplateMessage::with_parts(
            Role::User,
            image_parts("images", &req.images, &req.prompt)?,
        ));
        PromptInput::Chat {
            messages,
            tools: None,
            template_kwargs: thinks.template_kwargs.clone(),
        }
    };
    let internal = InternalRequest {
        model: req.model.clone(),
        prompt,
        sampling,
        max_tokens,
        stop,
        logprobs: None,
        keep_alive: req.keep_alive,
        think: thinks.think,
        thinking_budget: thinks.budget,
        shape: shape(req.format.as_ref())?,
        kv_quant: kv_quant(req.options.as_ref())?,
        speculative: speculative(req.options.as_ref())?,
    };
    // Ollama's `done_reason` says "cancelled" when the daemon shuts down mid-answer.
    let mut stream = svc.generate(internal).await?.cancel_as_done();
    let hide_reasoning = thinks.think == Some(false);
    let model = req.model;
    let chunk = move |response: String, thinking: Option<String>, stats: Option<DoneStats>| {
        GenerateResponse {
            model: model.clone(),
            created_at: now_rfc3339(),
            response,
            thinking,
            done: stats.is_some(),
            stats,
        }
    };
    if req.stream == Some(false) {
        let c = stream.collect_all().await?;
        let done = c.done.as_ref().map(stats).unwrap_or_default();
        let thinking = (!hide_reasoning && !c.reasoning.is_empty()).then_some(c.reasoning);
        return Ok(Json(chunk(c.content, thinking, Some(done))).into_response());
    }
    let (lines, rx) = ndjson::channel();
    tokio::spawn(async move {
        while let Some(ev) = stream.next_event().await {
            let ok = match ev {
                ServiceEvent::Content(t) => lines.send(&chunk(t, None, None)),
                ServiceEvent::Reasoning(t) if !hide_reasoning => {
                    lines.send(&chunk(String::new(), Some(t), None))
                }
                ServiceEvent::Done(f) => {
                    lines.send(&chunk(String::new(), None, Some(stats(&f))));
                    return;
                }
                ServiceEvent::Error(e) => {
                    lines.send(&rmx_api::ErrorResponse { error: e });
                    return;
                }
                _ => true,
            };
            if !ok {
                return;
            }
        }
    });
    Ok(ndjson::response(rx))
}

/// No prompt: load the model, or with `keep_alive: 0` unload it (`rmx stop`). Unloading a
/// model that is not loaded answers `done_reason: "not_loaded"`, so `rmx stop` can say so.
async fn load_or_unload(svc: &Service, req: GenerateRequest) -> Result<Response, NativeError> {
    let (reason, load) = if req.keep_alive.is_some_and(|k| k.is_zero()) {
        match svc.unload(&req.model)? {
            true => ("unload", 0),
            false => ("not_loaded", 0),
        }
    } else {
        let took = svc.load(&req.model, req.keep_alive).await?;
        ("load", took.as_nanos() as u64)
    };
    Ok(Json(GenerateResponse {
        model: req.model,
        created_at: now_rfc3339(),
        response: String::new(),
        thinking: None,
        done: true,
        stats: Some(DoneStats {
            done_reason: reason.to_string(),
            load_duration: load,
            ..DoneStats::default()
        }),
    })
    .into_response())
}
