//! `POST /v1/responses`, stateless: the input items become chat messages for the core, and
//! its events become the Responses stream Codex CLI reads — `response.created`, output items
//! added and done (reasoning, message, function_call), text and argument deltas, and
//! `response.completed` with usage, `response.incomplete` at the length limit, or
//! `response.failed`. The whole (non-streamed) answer is the stream's last response object,
//! so both paths agree by construction.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response as HttpResponse};
use axum::Json;
use rmx_api::openai::{
    IncompleteDetails, InputItem, InputTokensDetails, OutputContent, OutputItem,
    OutputTokensDetails, ReasoningText, Response, ResponseError, ResponseStreamEvent as E,
    ResponsesInput, ResponsesRequest, ResponsesTool, ResponsesUsage, Role, TypedInputItem,
};
use serde_json::{json, Map, Value};

use super::chat::add_system;
use super::error::OpenAiError;
use super::{json_instruction, new_id, template_kwargs, unix_time, Knobs};
use crate::service::{
    tool_names, FinishReason, InternalRequest, PromptInput, Service, ServiceEvent, Shape,
};
use crate::wire::arguments_value;
use crate::wire::body::{parse, BodyError};
use crate::wire::sse::{self, named_event, Translator};

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
    let req: ResponsesRequest = parse(&body)?;
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
    if let Some(format) = req.text.as_ref().and_then(|t| t.get("format")) {
        match format.get("type").and_then(Value::as_str) {
            Some("json_object") => add_system(&mut messages, &json_instruction(None)),
            Some("json_schema") => {
                add_system(&mut messages, &json_instruction(format.get("schema")))
            }
            _ => {}
        }
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
                    ..
                } if named.is_none_or(|n| n == name.as_str()) => Some(json!({"type": "function", "function": {
                    "name": name,
                    "description": description.clone().unwrap_or_default(),
                    "parameters": parameters.clone().unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                }})),
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
            names: tool_names(&tools),
        })
    } else {
        let format = req.text.as_ref().and_then(|t| t.get("format"));
        match format.and_then(|f| f.get("type")).and_then(Value::as_str) {
            Some("json_object") => Some(Shape::JsonObject),
            Some("json_schema") => Some(Shape::JsonSchema(
                format
                    .and_then(|f| f.get("schema"))
                    .cloned()
                    .unwrap_or(Value::Null),
            )),
            _ => None,
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
        shape,
    })
}

/// Input items → chat messages. Consecutive function calls join one assistant turn, and
/// reasoning items go on the assistant turn that follows them, as chat templates expect.
pub fn input_messages(req: &ResponsesRequest) -> Result<Value, OpenAiError> {
    let mut out: Vec<Map<String, Value>> = Vec::new();
    if let Some(instr) = req.instructions.as_ref().filter(|i| !i.is_empty()) {
        out.push(message("system", instr));
    }
    let items = match &req.input {
        ResponsesInput::Text(t) => {
            out.push(message("user", t));
            return Ok(Value::Array(out.into_iter().map(Value::Object).collect()));
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
                let text = m.content.text().map_err(|kind| {
                    OpenAiError::invalid(
                        &format!("input[{i}].content"),
                        format!(
                            "content of type `{kind}` is not supported by this server (text only)"
                        ),
                    )
                })?;
                let role = match m.role {
                    Role::Developer | Role::System => "system",
                    Role::Assistant => "assistant",
                    Role::Tool => "tool",
                    Role::User => "user",
                };
                // Codex sends several developer/system items; templates take one system
                // message, first.
                if role == "system" {
                    if let Some(first) = out
                        .first_mut()
                        .filter(|f| f.get("role") == Some(&json!("system")))
                    {
                        let old = first
                            .get("content")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        first.insert("content".into(), Value::String(format!("{old}\n\n{text}")));
                        continue;
                    }
                    out.insert(0, message("system", &text));
                    continue;
                }
                let mut msg = message(role, &text);
                if role == "assistant" {
                    if let Some(r) = reasoning.take() {
                        msg.insert("reasoning_content".into(), Value::String(r));
                    }
                }
                out.push(msg);
            }
            TypedInputItem::FunctionCall {
                call_id,
                name,
                arguments,
                ..
            } => {
                let call = json!({"id": call_id, "type": "function",
                                  "function": {"name": name, "arguments": arguments_value(&arguments)}});
                let joins = out.last().is_some_and(|m| {
                    m.get("role") == Some(&json!("assistant"))
                        && (m.contains_key("tool_calls") || m.get("content") != Some(&json!("")))
                });
                if joins {
                    if let Some(last) = out.last_mut() {
                        match last.get_mut("tool_calls").and_then(Value::as_array_mut) {
                            Some(calls) => calls.push(call),
                            None => {
                                last.insert("tool_calls".into(), Value::Array(vec![call]));
                            }
                        }
                    }
                } else {
                    let mut msg = message("assistant", "");
                    if let Some(r) = reasoning.take() {
                        msg.insert("reasoning_content".into(), Value::String(r));
                    }
                    msg.insert("tool_calls".into(), Value::Array(vec![call]));
                    out.push(msg);
                }
            }
            TypedInputItem::FunctionCallOutput { call_id, output } => {
                let mut msg = message("tool", &output.text());
                msg.insert("tool_call_id".into(), Value::String(call_id));
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
    Ok(Value::Array(out.into_iter().map(Value::Object).collect()))
}

fn message(role: &str, content: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("role".into(), Value::String(role.into()));
    m.insert("content".into(), Value::String(content.into()));
    m
}

/// What is open in the output right now.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Open {
    None,
    Reasoning(usize),
    Message(usize),
    Call(usize),
}

/// Service events → Responses stream events, building the response object as it goes.
pub struct ResponsesStream {
    pub response: Response,
    seq: u64,
    open: Open,
    /// The service's call index → output index.
    calls: Vec<(usize, usize)>,
}

impl ResponsesStream {
    pub fn new(req: &ResponsesRequest, created_at: u64) -> ResponsesStream {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .flatten()
            .filter(|t| matches!(t, ResponsesTool::Function { .. }))
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect();
        ResponsesStream {
            response: Response {
                id: new_id("resp"),
                object: "response".into(),
                created_at,
                status: "in_progress".into(),
                model: req.model.clone(),
                output: Vec::new(),
                usage: None,
                error: None,
                incomplete_details: None,
                parallel_tool_calls: req.parallel_tool_calls.unwrap_or(true),
                tool_choice: req.tool_choice.clone().unwrap_or_else(|| json!("auto")),
                tools,
            },
            seq: 0,
            open: Open::None,
            calls: Vec::new(),
        }
    }

    fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        s
    }

    pub fn start_events(&mut self) -> Vec<E> {
        let created = E::Created {
            sequence_number: self.next_seq(),
            response: self.response.clone(),
        };
        let in_progress = E::InProgress {
            sequence_number: self.next_seq(),
            response: self.response.clone(),
        };
        vec![created, in_progress]
    }

    fn item_id(&self, index: usize) -> String {
        match &self.response.output[index] {
            OutputItem::Message { id, .. }
            | OutputItem::Reasoning { id, .. }
            | OutputItem::FunctionCall { id, .. } => id.clone(),
        }
    }

    fn add_item(&mut self, item: OutputItem, out: &mut Vec<E>) -> usize {
        let index = self.response.output.len();
        self.response.output.push(item.clone());
        out.push(E::OutputItemAdded {
            sequence_number: self.next_seq(),
            output_index: index,
            item,
        });
        index
    }

    /// Closes the open item with its `.done` events.
    fn close(&mut self, out: &mut Vec<E>) {
        let open = std::mem::replace(&mut self.open, Open::None);
        let index = match open {
            Open::None => return,
            Open::Reasoning(i) | Open::Message(i) | Open::Call(i) => i,
        };
        let item_id = self.item_id(index);
        match &mut self.response.output[index] {
            OutputItem::Reasoning { content, .. } => {
                let text = content.first().map(|c| c.text.clone()).unwrap_or_default();
                let seq = self.next_seq();
                out.push(E::ReasoningTextDone {
                    sequence_number: seq,
                    item_id,
                    output_index: index,
                    content_index: 0,
                    text,
                });
            }
            OutputItem::Message {
                content, status, ..
            } => {
                *status = "completed".into();
                let part = content
                    .first()
                    .cloned()
                    .unwrap_or(OutputContent::OutputText {
                        text: String::new(),
                        annotations: Vec::new(),
                    });
                let OutputContent::OutputText { text, .. } = &part;
                let text = text.clone();
                let s1 = self.next_seq();
                let s2 = self.next_seq();
                out.push(E::OutputTextDone {
                    sequence_number: s1,
                    item_id: item_id.clone(),
                    output_index: index,
                    content_index: 0,
                    text,
                });
                out.push(E::ContentPartDone {
                    sequence_number: s2,
                    item_id,
                    output_index: index,
                    content_index: 0,
                    part,
                });
            }
            OutputItem::FunctionCall {
                arguments, status, ..
            } => {
                *status = "completed".into();
                if arguments.is_empty() {
                    *arguments = "{}".into();
                }
                let arguments = arguments.clone();
                let seq = self.next_seq();
                out.push(E::FunctionCallArgumentsDone {
                    sequence_number: seq,
                    item_id,
                    output_index: index,
                    arguments,
                });
            }
        }
        let item = self.response.output[index].clone();
        let seq = self.next_seq();
        out.push(E::OutputItemDone {
            sequence_number: seq,
            output_index: index,
            item,
        });
    }

    /// The stream events for one service event.
    pub fn events(&mut self, event: ServiceEvent) -> Vec<E> {
        let mut out = Vec::new();
        match event {
            ServiceEvent::Reasoning(t) => {
                let index = match self.open {
                    Open::Reasoning(i) => i,
                    _ => {
                        self.close(&mut out);
                        let item = OutputItem::Reasoning {
                            id: new_id("rs"),
                            summary: Vec::new(),
                            content: Vec::new(),
                        };
                        let i = self.add_item(item, &mut out);
                        self.open = Open::Reasoning(i);
                        i
                    }
                };
                if let OutputItem::Reasoning { content, .. } = &mut self.response.output[index] {
                    match content.first_mut() {
                        Some(c) => c.text.push_str(&t),
                        None => content.push(ReasoningText {
                            kind: "reasoning_text".into(),
                            text: t.clone(),
                        }),
                    }
                }
                let seq = self.next_seq();
                out.push(E::ReasoningTextDelta {
                    sequence_number: seq,
                    item_id: self.item_id(index),
                    output_index: index,
                    content_index: 0,
                    delta: t,
                });
            }
            ServiceEvent::Content(t) => {
                let index = match self.open {
                    Open::Message(i) => i,
                    _ => {
                        self.close(&mut out);
                        let item = OutputItem::Message {
                            id: new_id("msg"),
                            status: "in_progress".into(),
                            role: "assistant".into(),
                            content: Vec::new(),
                        };
                        let i = self.add_item(item, &mut out);
                        let part = OutputContent::OutputText {
                            text: String::new(),
                            annotations: Vec::new(),
                        };
                        if let OutputItem::Message { content, .. } = &mut self.response.output[i] {
                            content.push(part.clone());
                        }
                        let seq = self.next_seq();
                        out.push(E::ContentPartAdded {
                            sequence_number: seq,
                            item_id: self.item_id(i),
                            output_index: i,
                            content_index: 0,
                            part,
                        });
                        self.open = Open::Message(i);
                        i
                    }
                };
                if let OutputItem::Message { content, .. } = &mut self.response.output[index] {
                    if let Some(OutputContent::OutputText { text, .. }) = content.first_mut() {
                        text.push_str(&t);
                    }
                }
                let seq = self.next_seq();
                out.push(E::OutputTextDelta {
                    sequence_number: seq,
                    item_id: self.item_id(index),
                    output_index: index,
                    content_index: 0,
                    delta: t,
                });
            }
            ServiceEvent::ToolCallStart { index, id, name } => {
                self.close(&mut out);
                let item = OutputItem::FunctionCall {
                    id: new_id("fc"),
                    call_id: id,
                    name,
                    arguments: String::new(),
                    status: "in_progress".into(),
                };
                let i = self.add_item(item, &mut out);
                self.calls.push((index, i));
                self.open = Open::Call(i);
            }
            ServiceEvent::ToolCallArgs { index, delta } => {
                if let Some(&(_, i)) = self.calls.iter().rev().find(|(c, _)| *c == index) {
                    if let OutputItem::FunctionCall { arguments, .. } = &mut self.response.output[i]
                    {
                        arguments.push_str(&delta);
                    }
                    let seq = self.next_seq();
                    out.push(E::FunctionCallArgumentsDelta {
                        sequence_number: seq,
                        item_id: self.item_id(i),
                        output_index: i,
                        delta,
                    });
                }
            }
            ServiceEvent::ToolCallEnd { .. } => {
                if matches!(self.open, Open::Call(_)) {
                    self.close(&mut out);
                }
            }
            ServiceEvent::Logprob(_) => {}
            ServiceEvent::Done(f) => {
                self.close(&mut out);
                let u = f.usage;
                self.response.usage = Some(ResponsesUsage {
                    input_tokens: u.prompt_tokens,
                    input_tokens_details: InputTokensDetails {
                        cached_tokens: u.cached_tokens,
                    },
                    output_tokens: u.completion_tokens,
                    output_tokens_details: OutputTokensDetails {
                        reasoning_tokens: f.reasoning_tokens,
                    },
                    total_tokens: u.prompt_tokens + u.completion_tokens,
                });
                let seq = self.next_seq();
                if f.finish == FinishReason::Length {
                    self.response.status = "incomplete".into();
                    self.response.incomplete_details = Some(IncompleteDetails {
                        reason: "max_output_tokens".into(),
                    });
                    out.push(E::Incomplete {
                        sequence_number: seq,
                        response: self.response.clone(),
                    });
                } else {
                    self.response.status = "completed".into();
                    out.push(E::Completed {
                        sequence_number: seq,
                        response: self.response.clone(),
                    });
                }
            }
            ServiceEvent::Error(message) => {
                self.close(&mut out);
                self.response.status = "failed".into();
                self.response.error = Some(ResponseError {
                    code: "server_error".into(),
                    message,
                });
                let seq = self.next_seq();
                out.push(E::Failed {
                    sequence_number: seq,
                    response: self.response.clone(),
                });
            }
        }
        out
    }
}

fn sse_event(e: &E) -> Event {
    named_event(e.name(), e)
}

impl Translator for ResponsesStream {
    fn start(&mut self) -> Vec<Event> {
        self.start_events().iter().map(sse_event).collect()
    }

    fn event(&mut self, event: ServiceEvent) -> Vec<Event> {
        self.events(event).iter().map(sse_event).collect()
    }

    fn idle(&mut self) -> Vec<Event> {
        vec![Event::default().comment("keep-alive")]
    }
}
