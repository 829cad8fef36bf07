//! Anthropic messages into the core's OpenAI-shaped chat, and the whole answer back as a
//! `message` with content blocks.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::anthropic::{
    tool_input, ContentBlock, CountTokensRequest, CountTokensResponse, MessageContent,
    MessagesRequest, MessagesResponse, Role, StopReason, Thinking, ToolChoice, Usage,
};
use serde_json::{json, Map, Value};

use super::error::AnthropicError;
use super::stream::MessageStream;
use super::{stop_reason, usage};
use crate::service::{
    self, tool_specs, Completion, InternalRequest, PromptInput, SamplingParams, Service, Shape,
    TemplateMessage, TemplateToolCall,
};
use crate::wire::body::{parse, BodyError};
use crate::wire::{arguments_value, sse};

pub async fn handler(
    State(service): State<Arc<Service>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match run(service, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn run(
    service: Arc<Service>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AnthropicError> {
    let body = body.map_err(BodyError::from)?;
    let mut req: MessagesRequest = parse(&body)?;
    if let Some(fetcher) = service.image_urls() {
        fetch_images(fetcher, &mut req).await?;
    }
    let internal = to_internal(&req)?;
    let answer = service.generate(internal).await?;
    let id = new_message_id();
    let prompt_tokens = answer.prompt_tokens;
    if req.stream.unwrap_or(false) {
        let stream = MessageStream::new(id, req.model.clone(), prompt_tokens);
        return Ok(sse::response(answer, stream));
    }
    let completion = answer.collect_all().await?;
    Ok(Json(message_body(id, req.model, completion)).into_response())
}

pub async fn count_tokens(
    State(service): State<Arc<Service>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let run = async {
        let body = body.map_err(BodyError::from)?;
        let req: CountTokensRequest = parse(&body)?;
        let internal = to_internal(&MessagesRequest::from(req))?;
        let input_tokens = service.count_tokens(internal).await?;
        Ok::<_, AnthropicError>(Json(CountTokensResponse { input_tokens }).into_response())
    };
    match run.await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

pub fn new_message_id() -> String {
    let call = rmx_text::toolcall::random_call_id();
    format!("msg_{}", call.trim_start_matches("call_"))
}

pub fn to_internal(req: &MessagesRequest) -> Result<InternalRequest, AnthropicError> {
    if req.messages.is_empty() {
        return Err(AnthropicError::Invalid(
            "messages: at least one message is required".into(),
        ));
    }
    if req.max_tokens == 0 {
        return Err(AnthropicError::Invalid(
            "max_tokens: must be at least 1".into(),
        ));
    }
    if let Some(t) = req.temperature.filter(|t| !(0.0..=1.0).contains(t)) {
        return Err(AnthropicError::Invalid(format!(
            "temperature: must be between 0 and 1, got {t}"
        )));
    }
    if let Some(p) = req.top_p.filter(|p| !(0.0..=1.0).contains(p)) {
        return Err(AnthropicError::Invalid(format!(
            "top_p: must be between 0 and 1, got {p}"
        )));
    }
    let messages = template_messages(req)?;
    let tools: Vec<Value> = match &req.tool_choice {
        Some(ToolChoice::None) => Vec::new(),
        choice => {
            let named = match choice {
                Some(ToolChoice::Tool { name, .. }) => Some(name.as_str()),
                _ => None,
            };
            req.tools
                .iter()
                .flatten()
                // Anthropic's server tools (web search, ...) have no schema and never run here.
                .filter(|t| t.input_schema.is_some())
                .filter(|t| named.is_none_or(|n| n == t.name))
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name,
                        "description": t.description.clone().unwrap_or_default(),
                        "parameters": t.input_schema,
                    }})
                })
                .collect()
        }
    };
    if let (Some(ToolChoice::Tool { name, .. }), true) = (&req.tool_choice, tools.is_empty()) {
        return Err(AnthropicError::Invalid(format!(
            "tool_choice: names `{name}`, which is not in `tools`"
        )));
    }
    // `any` and a named tool are enforced: the reply is constrained to one call.
    let shape = match &req.tool_choice {
        Some(ToolChoice::Any { .. } | ToolChoice::Tool { .. }) if tools.is_empty() => {
            return Err(AnthropicError::Invalid(
                "tool_choice: asks for a tool call but `tools` has no tool with an `input_schema`"
                    .into(),
            ))
        }
        Some(ToolChoice::Any { .. } | ToolChoice::Tool { .. }) => Some(Shape::ToolCall {
            tools: tool_specs(&tools),
        }),
        _ => None,
    };
    let think = match req.thinking {
        Some(Thinking::Enabled { .. }) => Some(true),
        Some(Thinking::Disabled) => Some(false),
        Some(Thinking::Adaptive) | None => None,
    };
    // The thought is closed for the model after its budget (the engine's thought.rs); as
    // Anthropic's API does, the budget must leave room for the answer.
    let thinking_budget = match req.thinking {
        Some(Thinking::Enabled {
            budget_tokens: Some(b),
        }) => {
            if b >= req.max_tokens {
                return Err(AnthropicError::Invalid(format!(
                    "`max_tokens` ({}) must be greater than `thinking.budget_tokens` ({b})",
                    req.max_tokens
                )));
            }
            Some(b as usize)
        }
        _ => None,
    };
    let speculative =
        crate::speculation::parse(req.rmx.speculative.as_deref(), req.rmx.draft_tokens)
            .map_err(|e| AnthropicError::Invalid(e.to_string()))?;
    let kv_quant = crate::kv_options::parse(
        req.rmx.kv_bits,
        req.rmx.kv_group_size,
        req.rmx.kv_quant_start,
    )
    .map_err(|e| AnthropicError::Invalid(format!("{}: {e}", e.param)))?;
    let sampling = SamplingParams {
        // Anthropic's default is 1.
        temperature: req.temperature.unwrap_or(1.0),
        top_p: req.top_p.unwrap_or(1.0),
        top_k: req.top_k.unwrap_or(0),
        ..SamplingParams::default()
    };
    Ok(InternalRequest {
        model: req.model.clone(),
        prompt: PromptInput::Chat {
            messages,
            tools: (!tools.is_empty()).then_some(Value::Array(tools)),
            template_kwargs: Map::new(),
        },
        sampling,
        max_tokens: Some(req.max_tokens as usize),
        stop: req.stop_sequences.clone().unwrap_or_default(),
        logprobs: None,
        keep_alive: None,
        think,
        thinking_budget,
        shape,
        kv_quant,
        speculative,
    })
}

/// Anthropic turns → OpenAI-shaped messages: `system` first, `tool_result` blocks as `tool`
/// messages (before the user's text of the same turn, since they answer the turn before),
/// `tool_use` as `tool_calls`, `thinking` as `reasoning_content`.
pub fn template_messages(req: &MessagesRequest) -> Result<Vec<TemplateMessage>, AnthropicError> {
    let mut out = Vec::new();
    if let Some(system) = &req.system {
        let text = system.text();
        if !text.is_empty() {
            out.push(TemplateMessage::new(service::Role::System, text));
        }
    }
    for (i, m) in req.messages.iter().enumerate() {
        let mut text = String::new();
        // The turn's text and images in order, for a turn with images.
        let mut parts = Vec::new();
        let mut reasoning = String::new();
        let mut calls = Vec::new();
        for (j, block) in m.content.blocks().into_iter().enumerate() {
            match block {
                ContentBlock::Text { text: t } => {
                    let sep = if text.is_empty() { "" } else { "\n" };
                    text.push_str(sep);
                    text.push_str(&t);
                    parts.push(service::ContentPart::Text(format!("{sep}{t}")));
                }
                ContentBlock::Image { source } => {
                    let bytes = image_source(&source).map_err(|e| {
                        AnthropicError::Invalid(format!("messages.{i}.content.{j}.source: {e}"))
                    })?;
                    parts.push(service::ContentPart::Image(Arc::new(bytes)));
                }
                ContentBlock::Thinking { thinking, .. } => reasoning.push_str(&thinking),
                ContentBlock::RedactedThinking { .. } => {}
                ContentBlock::ToolUse { id, name, input } => {
                    let arguments = match input {
                        Value::String(s) => arguments_value(&s),
                        v => v,
                    };
                    calls.push(TemplateToolCall::function(Some(id), name, arguments));
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    let mut result = content.map(|c| c.text()).unwrap_or_default();
                    if is_error == Some(true) {
                        result = format!("Error: {result}");
                    }
                    let mut msg = TemplateMessage::new(service::Role::Tool, result);
                    msg.tool_call_id = Some(tool_use_id);
                    out.push(msg);
                }
                ContentBlock::Document { .. } => {
                    return Err(AnthropicError::Invalid(format!(
                        "messages.{i}.content.{j}: document blocks are not supported by this server (text and images only)"
                    )));
                }
            }
        }
        let role = match m.role {
            Role::User => service::Role::User,
            Role::Assistant => service::Role::Assistant,
        };
        let images = parts
            .iter()
            .any(|p| matches!(p, service::ContentPart::Image(_)));
        if role == service::Role::User && text.is_empty() && calls.is_empty() && !images {
            // A turn of only tool results.
            continue;
        }
        let mut msg = TemplateMessage::with_parts(role, parts);
        msg.reasoning_content = Some(reasoning).filter(|r| !r.is_empty());
        msg.tool_calls = calls;
        out.push(msg);
    }
    Ok(out)
}

/// Where the daemon fetches image URLs (`RMX_IMAGE_URLS=1`): each image block's `url` source
/// replaced by a `base64` source of the image it names; a URL that cannot be had is the
/// request's 400.
async fn fetch_images(
    fetcher: &service::ImageFetcher,
    req: &mut MessagesRequest,
) -> Result<(), AnthropicError> {
    for (i, m) in req.messages.iter_mut().enumerate() {
        let MessageContent::Blocks(blocks) = &mut m.content else {
            continue;
        };
        for (j, block) in blocks.iter_mut().enumerate() {
            let ContentBlock::Image { source } = block else {
                continue;
            };
            if source.get("type").and_then(Value::as_str) != Some("url") {
                continue;
            }
            let Some(url) = source.get("url").and_then(Value::as_str) else {
                continue;
            };
            let bytes = fetcher.fetch(url).await.map_err(|e| {
                AnthropicError::Invalid(format!("messages.{i}.content.{j}.source: {e}"))
            })?;
            let data = service::encode_base64(&bytes);
            *source = json!({"type": "base64", "media_type": "image/*", "data": data});
        }
    }
    Ok(())
}

/// An image block's bytes: a `base64` source (a `url` source is fetched before, by
/// `fetch_images`, where the daemon allows it).
fn image_source(source: &Value) -> Result<Vec<u8>, String> {
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let data = source
                .get("data")
                .and_then(Value::as_str)
                .ok_or("a base64 image source needs a `data` string".to_string())?;
            service::decode_base64(data)
        }
        Some("url") => Err(
            "image URLs are not fetched: URL fetching is not enabled on this server \
             (RMX_IMAGE_URLS=1 in the daemon's environment turns it on); send the image as a \
             base64 source"
                .into(),
        ),
        other => Err(format!(
            "image sources of type {other:?} are not supported; send {{\"type\": \"base64\", \
             \"media_type\": \"image/png\", \"data\": ...}}"
        )),
    }
}

/// The whole answer as one message: thinking, then text, then tool_use blocks.
pub fn message_body(id: String, model: String, c: Completion) -> MessagesResponse {
    let mut content = Vec::new();
    if !c.reasoning.is_empty() {
        content.push(ContentBlock::Thinking {
            thinking: c.reasoning,
            signature: String::new(),
        });
    }
    if !c.content.is_empty() || c.tool_calls.is_empty() {
        content.push(ContentBlock::Text { text: c.content });
    }
    for call in c.tool_calls {
        content.push(ContentBlock::ToolUse {
            id: call.id,
            name: call.name,
            input: tool_input(&call.arguments),
        });
    }
    let ((stop, stop_sequence), u) = match &c.done {
        Some(f) => (stop_reason(f), usage(&f.usage)),
        None => ((StopReason::EndTurn, None), Usage::default()),
    };
    MessagesResponse {
        id,
        kind: "message".into(),
        role: Role::Assistant,
        content,
        model,
        stop_reason: Some(stop),
        stop_sequence,
        usage: u,
    }
}
