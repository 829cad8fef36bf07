//! `POST /api/chat`: a conversation answered; tool calls come whole (Ollama sends a call once
//! its arguments are complete, as an object).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::{ChatRequest, ChatResponse, DoneStats, FunctionCall, Message, ToolCall};
use serde_json::Value;

use super::{
    image_parts, kv_quant, ndjson, now_rfc3339, parse, sampling, shape, speculative, stats,
    thinking, NativeError,
};
use crate::error::ServiceError;
use crate::service::{
    InternalRequest, PromptInput, Role, Service, ServiceEvent, TemplateMessage, TemplateToolCall,
};

pub async fn chat(State(svc): State<Arc<Service>>, body: Bytes) -> Result<Response, NativeError> {
    let req: ChatRequest = parse(&body)?;
    check_messages(&req.messages)?;
    let (sampling, max_tokens, stop) = sampling(req.options.as_ref())?;
    let thinks = thinking(req.think.as_ref(), req.options.as_ref())?;
    let internal = InternalRequest {
        model: req.model.clone(),
        prompt: PromptInput::Chat {
            messages: req
                .messages
                .iter()
                .enumerate()
                .map(to_template)
                .collect::<Result<_, _>>()?,
            tools: (!req.tools.is_empty()).then(|| Value::Array(req.tools.clone())),
            template_kwargs: thinks.template_kwargs.clone(),
        },
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
    let chunk = move |message: Message, stats: Option<DoneStats>| ChatResponse {
        model: model.clone(),
        created_at: now_rfc3339(),
        message,
        done: stats.is_some(),
        stats,
    };
    if req.stream == Some(false) {
        let c = stream.collect_all().await?;
        let mut m = Message::new("assistant", c.content);
        m.thinking = (!hide_reasoning && !c.reasoning.is_empty()).then_some(c.reasoning);
        m.tool_calls = c
            .tool_calls
            .iter()
            .map(|t| call(&t.name, &t.arguments))
            .collect();
        let done = c.done.as_ref().map(stats).unwrap_or_default();
        return Ok(Json(chunk(m, Some(done))).into_response());
    }
    let (lines, rx) = ndjson::channel();
    tokio::spawn(async move {
        let mut pending: Option<(String, String)> = None;
        while let Some(ev) = stream.next_event().await {
            let ok = match ev {
                ServiceEvent::Content(t) => lines.send(&chunk(Message::new("assistant", t), None)),
                ServiceEvent::Reasoning(t) if !hide_reasoning => {
                    let mut m = Message::new("assistant", "");
                    m.thinking = Some(t);
                    lines.send(&chunk(m, None))
                }
                ServiceEvent::ToolCallStart { name, .. } => {
                    pending = Some((name, String::new()));
                    true
                }
                ServiceEvent::ToolCallArgs { delta, .. } => {
                    if let Some((_, args)) = pending.as_mut() {
                        args.push_str(&delta);
                    }
                    true
                }
                ServiceEvent::ToolCallEnd { .. } => match pending.take() {
                    Some((name, args)) => {
                        let mut m = Message::new("assistant", "");
                        m.tool_calls = vec![call(&name, &args)];
                        lines.send(&chunk(m, None))
                    }
                    None => true,
                },
                ServiceEvent::Done(f) => {
                    lines.send(&chunk(Message::new("assistant", ""), Some(stats(&f))));
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

/// Ollama's roles: a message this server would otherwise misread (an unknown role reaches the
/// template as-is) is a 400 that says which.
fn check_messages(messages: &[Message]) -> Result<(), NativeError> {
    for (i, m) in messages.iter().enumerate() {
        if let Role::Other(role) = Role::parse(&m.role) {
            return Err(NativeError(ServiceError::BadRequest(format!(
                "messages[{i}].role: unknown role {role:?} (expected system, user, assistant or tool)"
            ))));
        }
    }
    Ok(())
}

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        function: FunctionCall {
            name: name.to_string(),
            arguments: serde_json::from_str(arguments)
                .unwrap_or_else(|_| Value::String(arguments.to_string())),
        },
    }
}

/// A message as chat templates read it (OpenAI-shaped; reasoning as `reasoning_content`, the
/// name Qwen's and DeepSeek's templates use).
/// Its `images` become image parts before its text.
fn to_template((i, m): (usize, &Message)) -> Result<TemplateMessage, NativeError> {
    let role = Role::parse(&m.role);
    let mut t = if m.images.is_empty() {
        TemplateMessage::new(role, m.content.clone())
    } else {
        let field = format!("messages[{i}].images");
        TemplateMessage::with_parts(role, image_parts(&field, &m.images, &m.content)?)
    };
    t.reasoning_content = m.thinking.clone();
    t.tool_calls = m
        .tool_calls
        .iter()
        .map(|c| {
            TemplateToolCall::function(None, c.function.name.clone(), c.function.arguments.clone())
        })
        .collect();
    t.name = m.tool_name.clone();
    Ok(t)
}
