//! `POST /v1/responses`, stateless: the input items become chat messages for the core (here),
//! and its events become the Responses stream Codex CLI reads ([`stream`]). The whole
//! (non-streamed) answer is the stream's last response object, so both paths agree by
//! construction.

mod stream;

pub use stream::ResponsesStream;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response as HttpResponse};
use axum::Json;
use rmx_api::openai::{
    InputContent, InputItem, InputPart, ResponsesInput, ResponsesRequest, ResponsesTool, Role,
    TypedInputItem,
};
use serde_json::{json, Value};

use super::chat::add_system;
use super::error::OpenAiError;
use super::structured::{responses_format, TextFormat};
use super::{json_instruction, template_kwargs, thinking_budget, unix_time, Knobs};
use crate::service::{
    self, strict_tool_specs, tool_specs, InternalRequest, PromptInput, Service, ServiceEvent,
    Shape, TemplateMessage, TemplateToolCall,
};
use crate::wire::arguments_value;
use crate::wire::body::{parse, BodyError};
use crate::wire::sse;

pub async fn handler(
    State(service): State<Arc<Service>>,
    body: Result<Bytes, BytesRejection>,
) -> HttpResponse {
    match run(service, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn run(
    service: Arc<Service>,
    body: Result<Bytes, BytesRejection>,
) -> Result<HttpResponse, OpenAiError> {
    let body = body.map_err(BodyError::from)?;
    let mut req: ResponsesRequest = parse(&body)?;
    if let Some(fetcher) = service.image_urls() {
        fetch_images(fetcher, &mut req).await?;
    }
    let internal = to_internal(&req)?;
    let mut answer = service.generate(internal).await?;
    let stream = ResponsesStream::new(&req, unix_time(answer.created));
    if req.stream.unwrap_or(false) {
        return Ok(sse::response(answer, stream));
    }
    let mut stream = stream;
    while let Some(ev) = answer.next_event().await {
        let last = matches!(ev, ServiceEvent::Done(_) | ServiceEvent::Error(_));
        stream.events(ev);
        if last {
            break;
        }
    }
    let response = stream.response.clone();
    if response.status == "failed" {
        let message = response.error.map(|e| e.message).unwrap_or_default();
        return Err(OpenAiError::Service(crate::ServiceError::failed(message)));
    }
    Ok(Json(response).into_response())
}

/// The core's request: `instructions` and the input items as chat messages.
pub fn to_internal(req: &ResponsesRequest) -> Result<InternalRequest, OpenAiError> {
    if req.previous_response_id.is_some() {
        return Err(OpenAiError::invalid(
            "previous_response_id",
            "this server is stateless: send the whole conversation in `input` instead of `previous_response_id`",
        ));
    }
    if req.max_output_tokens == Some(0) {
        return Err(OpenAiError::invalid(
            "max_output_tokens",
            "`max_output_tokens` must be at least 1",
        ));
    }
    let sampling = Knobs {
        temperature: req.temperature,
        top_p: req.top_p,
        seed: req.seed,
        ..Knobs::default()
    }
    .sampling()?;
    let mut messages = input_messages(req)?;
    let format = responses_format(req.text.as_ref())?;
    match format {
        TextFormat::JsonObject => add_system(&mut messages, &json_instruction(None)),
        TextFormat::JsonSchema(schema) => {
            add_system(&mut messages, &json_instruction(Some(schema)))
        }
        TextFormat::Text => {}
    }
    let choice = req.tool_choice.as_ref();
    let named = choice.and_then(|c| c.get("name")).and_then(Value::as_str);
    let tools: Vec<Value> = match choice.and_then(Value::as_str) {
        Some("none") => Vec::new(),
        _ => req
            .tools
            .iter()
            .flatten()
            .filter_map(|t| match t {
                ResponsesTool::Function {
                    name,
                    description,
                    parameters,
                    strict,
                } if named.is_none_or(|n| n == name.as_str()) => {
                    let mut function = json!({
                        "name": name,
                        "description": description.clone().unwrap_or_default(),
                        "parameters": parameters.clone().unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                    });
                    if let Some(strict) = strict {
                        function["strict"] = Value::Bool(*strict);
                    }
                    Some(json!({"type": "function", "function": function}))
                }
                _ => None,
            })
            .collect(),
    };
    if let (Some(n), true) = (named, tools.is_empty()) {
        return Err(OpenAiError::invalid(
            "tool_choice",
            format!("`tool_choice` names `{n}`, which is not in `tools`"),
        ));
    }
    // `required` and a named function are enforced (one call, constrained); so is a JSON
    // text format, as one JSON object.
    let forced = named.is_some() || choice.and_then(Value::as_str) == Some("required");
    let shape = if forced {
        if tools.is_empty() {
            return Err(OpenAiError::invalid(
                "tool_choice",
                "`tool_choice` asks for a tool call but `tools` has no function tool",
            ));
        }
        Some(Shape::ToolCall {
            tools: tool_specs(&tools),
        })
    } else {
        match format {
            TextFormat::JsonObject => Some(Shape::JsonObject),
            TextFormat::JsonSchema(schema) => Some(Shape::JsonSchema(schema.clone())),
            // `strict` tools under `tool_choice` `auto`: their calls' arguments are enforced.
            TextFormat::Text => {
                strict_tool_specs(&tools).map(|tools| Shape::ToolCallsInText { tools })
            }
        }
    };
    let effort = req.reasoning.as_ref().and_then(|r| r.effort.as_deref());
    let (kwargs, think) = template_kwargs(req.chat_template_kwargs.as_ref(), effort);
    Ok(InternalRequest {
        model: req.model.clone(),
        prompt: PromptInput::Chat {
            messages,
            tools: (!tools.is_empty()).then_some(Value::Array(tools)),
            template_kwargs: kwargs,
        },
        sampling,
        max_tokens: req.max_output_tokens.map(|n| n as usize),
        stop: Vec::new(),
        logprobs: None,
        keep_alive: None,
        think,
        thinking_budget: thinking_budget(req.thinking_token_budget, effort),
        shape,
        kv_quant: super::kv_quant(&req.rmx)?,
        speculative: super::speculative(&req.rmx)?,
    })
}

/// Where the daemon fetches image URLs (`RMX_IMAGE_URLS=1`): each http(s) `input_image`
/// replaced by the image it names, as a data URI; a URL that cannot be had is the request's 400.
async fn fetch_images(
    fetcher: &service::ImageFetcher,
    req: &mut ResponsesRequest,
) -> Result<(), OpenAiError> {
    let ResponsesInput::Items(items) = &mut req.input else {
        return Ok(());
    };
    for (i, item) in items.iter_mut().enumerate() {
        let m = match item {
            InputItem::Message(m) | InputItem::Typed(TypedInputItem::Message(m)) => m,
            _ => continue,
        };
        let InputContent::Parts(parts) = &mut m.content else {
            continue;
        };
        for (j, part) in parts.iter_mut().enumerate() {
            let InputPart::InputImage {
                image_url: Some(url),
            } = part
            else {
                continue;
            };
            if !service::is_web_url(url) {
                continue;
            }
            let bytes = fetcher.fetch(url).await.map_err(|e| {
                OpenAiError::invalid(&format!("input[{i}].content[{j}].image_url"), e)
            })?;
            *url = service::data_uri(&bytes);
        }
    }
    Ok(())
}

/// A message item's content as parts: text, and `input_image` images as `image_url` data URIs
/// (http(s) URLs are fetched before, by `fetch_images`, where the daemon allows it); files are
/// refused.
fn input_parts(i: usize, content: &InputContent) -> Result<Vec<service::ContentPart>, OpenAiError> {
    let parts = match content {
        InputContent::Text(s) => return Ok(vec![service::ContentPart::Text(s.clone())]),
        InputContent::Parts(parts) => parts,
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let param = format!("input[{i}].content[{j}]");
        out.push(match part {
            InputPart::InputText { text } | InputPart::OutputText { text } => {
                service::ContentPart::Text(text.clone())
            }
            InputPart::Refusal { refusal } => service::ContentPart::Text(refusal.clone()),
            InputPart::InputImage { image_url } => {
                let url = image_url.as_deref().ok_or_else(|| {
                    OpenAiError::invalid(
                        &param,
                        "input_image needs an `image_url` (a data URI; file_id is not supported)",
                    )
                })?;
                let bytes = service::image_url_bytes(url)
                    .map_err(|e| OpenAiError::invalid(&format!("{param}.image_url"), e))?;
                service::ContentPart::Image(Arc::new(bytes))
            }
            InputPart::InputFile {} => {
                return Err(OpenAiError::invalid(
                    &param,
                    "content of type `input_file` is not supported by this server (text and \
                     input_image only)",
                ))
            }
        });
    }
    Ok(out)
}

/// Input items → chat messages. Consecutive function calls join one assistant turn, and
/// reasoning items go on the assistant turn that follows them, as chat templates expect.
pub fn input_messages(req: &ResponsesRequest) -> Result<Vec<TemplateMessage>, OpenAiError> {
    let mut out: Vec<TemplateMessage> = Vec::new();
    if let Some(instr) = req.instructions.as_ref().filter(|i| !i.is_empty()) {
        out.push(TemplateMessage::new(service::Role::System, instr.clone()));
    }
    let items = match &req.input {
        ResponsesInput::Text(t) => {
            out.push(TemplateMessage::new(service::Role::User, t.clone()));
            return Ok(out);
        }
        ResponsesInput::Items(items) => items,
    };
    let mut reasoning: Option<String> = None;
    for (i, item) in items.iter().enumerate() {
        let item = match item {
            InputItem::Message(m) => TypedInputItem::Message(m.clone()),
            InputItem::Typed(t) => t.clone(),
        };
        match item {
            TypedInputItem::Message(m) => {
                let parts = input_parts(i, &m.content)?;
                let role = match m.role {
                    Role::Developer | Role::System => service::Role::System,
                    Role::Assistant => service::Role::Assistant,
                    Role::Tool => service::Role::Tool,
                    Role::User => service::Role::User,
                };
                let msg = TemplateMessage::with_parts(role.clone(), parts);
                let text = msg.content.clone();
                // Codex sends several developer/system items; templates take one system
                // message, first.
                if role == service::Role::System && msg.parts.is_empty() {
                    if let Some(first) = out.first_mut().filter(|f| f.role == service::Role::System)
                    {
                        first.content = format!("{}\n\n{text}", first.content);
                        continue;
                    }
                    out.insert(0, msg);
                    continue;
                }
                let mut msg = msg;
                if msg.role == service::Role::Assistant {
                    msg.reasoning_content = reasoning.take();
                }
                out.push(msg);
            }
            TypedInputItem::FunctionCall {
                call_id,
                name,
                arguments,
                ..
            } => {
                let call =
                    TemplateToolCall::function(Some(call_id), name, arguments_value(&arguments));
                match out.last_mut().filter(|m| {
                    m.role == service::Role::Assistant
                        && (!m.tool_calls.is_empty() || !m.content.is_empty())
                }) {
                    Some(last) => last.tool_calls.push(call),
                    None => {
                        let mut msg = TemplateMessage::new(service::Role::Assistant, "");
                        msg.reasoning_content = reasoning.take();
                        msg.tool_calls.push(call);
                        out.push(msg);
                    }
                }
            }
            TypedInputItem::FunctionCallOutput { call_id, output } => {
                let mut msg = TemplateMessage::new(service::Role::Tool, output.text());
                msg.tool_call_id = Some(call_id);
                out.push(msg);
            }
            TypedInputItem::Reasoning {
                summary, content, ..
            } => {
                let text: String = content
                    .unwrap_or_default()
                    .iter()
                    .chain(summary.iter())
                    .map(|t| t.text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                if !text.is_empty() {
                    reasoning = Some(text);
                }
            }
            TypedInputItem::Other => {}
        }
    }
    Ok(out)
}
