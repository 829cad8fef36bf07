//! `POST /v1/chat/completions`: OpenAI chat requests into the core, and its events back out as
//! a `chat.completion` or as `chat.completion.chunk` SSE ending in `data: [DONE]`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::openai::{
    AssistantMessage, ChatChoice, ChatCompletion, ChatCompletionChunk, ChatCompletionRequest,
    ChatMessage, ChoiceLogprobs, ChunkChoice, ChunkDelta, ContentPart, ErrorResponse, FunctionCall,
    FunctionCallDelta, LogprobContent, MessageContent, ResponseFormat, Role, ToolCall,
    ToolCallDelta, ToolChoice, ToolChoiceMode, TopLogprob,
};
use serde_json::{json, Value};

use super::error::OpenAiError;
use super::{
    json_instruction, new_id, speculative, structured, template_kwargs, thinking_budget, unix_time,
    usage, Knobs,
};
use crate::service::{
    self, strict_tool_specs, tool_specs, Completion, FinishReason, InternalRequest, PromptInput,
    Service, ServiceEvent, Shape, TemplateMessage, TemplateToolCall, TokenLogprob,
};
use crate::wire::arguments_value;
use crate::wire::body::{parse, BodyError};
use crate::wire::sse::{self, data_event, Translator};

pub async fn handler(
    State(service): State<Arc<Service>>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    match run(service, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn run(
    service: Arc<Service>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response, OpenAiError> {
    let body = body.map_err(BodyError::from)?;
    let mut req: ChatCompletionRequest = parse(&body)?;
    if let Some(fetcher) = service.image_urls() {
        fetch_images(fetcher, &mut req).await?;
    }
    let stream = req.stream.unwrap_or(false);
    let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let want_logprobs = req.logprobs.unwrap_or(false);
    let internal = to_internal(&req)?;
    let answer = service.generate(internal).await?;
    let id = new_id("chatcmpl");
    let created = unix_time(answer.created);
    let model = req.model.clone();
    if stream {
        let translator = ChatStream::new(id, created, model, include_usage, want_logprobs);
        Ok(sse::response(answer, translator))
    } else {
        let completion = answer.collect_all().await?;
        Ok(Json(completion_body(
            id,
            created,
            model,
            completion,
            want_logprobs,
        ))
        .into_response())
    }
}

/// The core's request for an OpenAI chat request; the checks OpenAI makes are made here.
pub fn to_internal(req: &ChatCompletionRequest) -> Result<InternalRequest, OpenAiError> {
    if req.n.is_some_and(|n| n != 1) {
        return Err(OpenAiError::invalid("n", "only `n: 1` is supported"));
    }
    if req.messages.is_empty() {
        return Err(OpenAiError::invalid(
            "messages",
            "`messages` must not be empty",
        ));
    }
    if req.top_logprobs.is_some() && !req.logprobs.unwrap_or(false) {
        return Err(OpenAiError::invalid(
            "top_logprobs",
            "`top_logprobs` needs `logprobs: true`",
        ));
    }
    if let Some(n) = req.top_logprobs.filter(|&n| n > 20) {
        return Err(OpenAiError::invalid(
            "top_logprobs",
            format!("`top_logprobs` must be at most 20, got {n}"),
        ));
    }
    if req.max_output_tokens() == Some(0) {
        let param = if req.max_completion_tokens.is_some() {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        return Err(OpenAiError::invalid(
            param,
            format!("`{param}` must be at least 1"),
        ));
    }
    let sampling = Knobs {
        temperature: req.temperature,
        top_p: req.top_p,
        top_k: req.top_k,
        min_p: req.min_p,
        repetition_penalty: req.repetition_penalty,
        presence_penalty: req.presence_penalty,
        frequency_penalty: req.frequency_penalty,
        seed: req.seed,
    }
    .sampling()?;
    let mut messages = template_messages(&req.messages)?;
    match &req.response_format {
        Some(ResponseFormat::JsonObject) => add_system(&mut messages, &json_instruction(None)),
        Some(ResponseFormat::JsonSchema { json_schema }) => {
            let schema = structured::chat_schema(json_schema)?;
            add_system(&mut messages, &json_instruction(Some(schema)));
        }
        Some(ResponseFormat::Text) | None => {}
    }
    let tools = match &req.tools {
        Some(tools) if !tools.is_empty() => {
            let chosen: Vec<Value> = match &req.tool_choice {
                Some(ToolChoice::Mode(ToolChoiceMode::None)) => Vec::new(),
                Some(ToolChoice::Named(named)) => {
                    let picked: Vec<Value> = tools
                        .iter()
                        .filter(|t| t.function.name == named.function.name)
                        .map(|t| json!({"type": "function", "function": t.function}))
                        .collect();
                    if picked.is_empty() {
                        return Err(OpenAiError::invalid(
                            "tool_choice",
                            format!(
                                "`tool_choice` names `{}`, which is not in `tools`",
                                named.function.name
                            ),
                        ));
                    }
                    picked
                }
                _ => tools
                    .iter()
                    .map(|t| json!({"type": "function", "function": t.function}))
                    .collect(),
            };
            (!chosen.is_empty()).then_some(Value::Array(chosen))
        }
        _ => None,
    };
    if let (Some(ToolChoice::Named(_) | ToolChoice::Mode(ToolChoiceMode::Required)), None) =
        (&req.tool_choice, &tools)
    {
        return Err(OpenAiError::invalid(
            "tool_choice",
            "`tool_choice` asks for a tool call but `tools` is empty",
        ));
    }
    let (kwargs, think) = template_kwargs(
        req.chat_template_kwargs.as_ref(),
        req.reasoning_effort.as_deref(),
    );
    // A forced call wins over JSON mode: the call's arguments are a JSON object anyway. Then
    // vLLM's `structured_outputs`, then `response_format`; with neither, `strict` tools under
    // `tool_choice` `auto` have their calls' arguments enforced.
    let listed = tools.as_ref().and_then(Value::as_array).map(Vec::as_slice);
    let shape = match (&req.tool_choice, listed) {
        (Some(ToolChoice::Named(_) | ToolChoice::Mode(ToolChoiceMode::Required)), Some(t)) => {
            Some(Shape::ToolCall {
                tools: tool_specs(t),
            })
        }
        _ => match (&req.structured_outputs, &req.response_format) {
            (Some(so), _) => Some(structured::shape(so)?),
            (None, Some(ResponseFormat::JsonObject)) => Some(Shape::JsonObject),
            (None, Some(ResponseFormat::JsonSchema { json_schema })) => Some(Shape::JsonSchema(
                structured::chat_schema(json_schema)?.clone(),
            )),
            (None, Some(ResponseFormat::Text) | None) => listed
                .and_then(strict_tool_specs)
                .map(|tools| Shape::ToolCallsInText { tools }),
        },
    };
    Ok(InternalRequest {
        model: req.model.clone(),
        prompt: PromptInput::Chat {
            messages,
            tools,
            template_kwargs: kwargs,
        },
        sampling,
        max_tokens: req.max_output_tokens().map(|n| n as usize),
        stop: req.stop.clone().map(|s| s.into_vec()).unwrap_or_default(),
        logprobs: req
            .logprobs
            .unwrap_or(false)
            .then(|| req.top_logprobs.unwrap_or(0) as usize),
        keep_alive: None,
        thinking_budget: thinking_budget(
            req.thinking_token_budget,
            req.reasoning_effort.as_deref(),
        ),
        think,
        shape,
        kv_quant: super::kv_quant(&req.rmx)?,
        speculative: speculative(&req.rmx)?,
    })
}

/// OpenAI messages as the chat templates read them: text content, `developer` as `system`,
/// tool-call arguments as objects (templates `tojson` them; a string would be quoted twice).
pub fn template_messages(messages: &[ChatMessage]) -> Result<Vec<TemplateMessage>, OpenAiError> {
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let role = match m.role {
            Role::Developer | Role::System => service::Role::System,
            Role::User => service::Role::User,
            Role::Assistant => service::Role::Assistant,
            Role::Tool => service::Role::Tool,
        };
        let mut msg = match &m.content {
            Some(MessageContent::Parts(parts)) => {
                TemplateMessage::with_parts(role, content_parts(i, parts)?)
            }
            Some(c) => TemplateMessage::new(role, c.text().unwrap_or_default()),
            None => TemplateMessage::new(role, String::new()),
        };
        msg.reasoning_content = m.reasoning_content.clone().filter(|r| !r.is_empty());
        msg.tool_calls = m
            .tool_calls
            .iter()
            .flatten()
            .map(|c| {
                TemplateToolCall::function(
                    Some(c.id.clone()),
                    c.function.name.clone(),
                    arguments_value(&c.function.arguments),
                )
            })
            .collect();
        msg.tool_call_id = m.tool_call_id.clone();
        msg.name = m.name.clone();
        out.push(msg);
    }
    Ok(out)
}

/// Where the daemon fetches image URLs (`RMX_IMAGE_URLS=1`): each http(s) `image_url` replaced
/// by the image it names, as a data URI; a URL that cannot be had is the request's 400.
async fn fetch_images(
    fetcher: &service::ImageFetcher,
    req: &mut ChatCompletionRequest,
) -> Result<(), OpenAiError> {
    for (i, m) in req.messages.iter_mut().enumerate() {
        let Some(MessageContent::Parts(parts)) = &mut m.content else {
            continue;
        };
        for (j, part) in parts.iter_mut().enumerate() {
            let ContentPart::ImageUrl { image_url } = part else {
                continue;
            };
            let url = image_url.get("url").unwrap_or(image_url).as_str();
            let Some(url) = url.filter(|u| service::is_web_url(u)) else {
                continue;
            };
            let bytes = fetcher.fetch(url).await.map_err(|e| {
                OpenAiError::invalid(&format!("messages[{i}].content[{j}].image_url"), e)
            })?;
            *image_url = json!({ "url": service::data_uri(&bytes) });
        }
    }
    Ok(())
}

/// A message's parts: text, and `image_url` images as data URIs (http(s) URLs are fetched
/// before, by `fetch_images`, where the daemon allows it); audio and files are refused.
fn content_parts(
    i: usize,
    parts: &[ContentPart],
) -> Result<Vec<service::ContentPart>, OpenAiError> {
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let param = || format!("messages[{i}].content[{j}]");
        match part {
            ContentPart::Text { text } => out.push(service::ContentPart::Text(text.clone())),
            ContentPart::ImageUrl { image_url } => {
                // `{"url": ...}` as OpenAI sends it; a bare string as some clients do.
                let url = image_url
                    .get("url")
                    .unwrap_or(image_url)
                    .as_str()
                    .ok_or_else(|| {
                        OpenAiError::invalid(&param(), "image_url needs a `url` string")
                    })?;
                let bytes = service::image_url_bytes(url)
                    .map_err(|e| OpenAiError::invalid(&format!("{}.image_url", param()), e))?;
                out.push(service::ContentPart::Image(Arc::new(bytes)));
            }
            ContentPart::InputAudio { .. } | ContentPart::File { .. } => {
                let kind = match part {
                    ContentPart::InputAudio { .. } => "input_audio",
                    _ => "file",
                };
                return Err(OpenAiError::invalid(
                    &param(),
                    format!(
                        "content parts of type `{kind}` are not supported by this server \
                         (text and image_url only)"
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// Appends an instruction to the system message, or adds one first.
pub fn add_system(messages: &mut Vec<TemplateMessage>, text: &str) {
    match messages.first_mut() {
        Some(first) if first.role == service::Role::System => {
            let sep = if first.content.is_empty() { "" } else { "\n\n" };
            first.content = format!("{}{sep}{text}", first.content);
            // A system message with images is read as its parts: the instruction goes last.
            if !first.parts.is_empty() {
                first
                    .parts
                    .push(service::ContentPart::Text(format!("{sep}{text}")));
            }
        }
        _ => messages.insert(0, TemplateMessage::new(service::Role::System, text)),
    }
}

pub fn finish_reason(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Stop | FinishReason::Cancelled => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
    }
}

pub fn logprob_content(l: &TokenLogprob) -> LogprobContent {
    LogprobContent {
        token: l.token.clone(),
        logprob: l.logprob,
        bytes: Some(l.token.as_bytes().to_vec()),
        top_logprobs: l
            .top
            .iter()
            .map(|(_, token, logprob)| TopLogprob {
                token: token.clone(),
                logprob: *logprob,
                bytes: Some(token.as_bytes().to_vec()),
            })
            .collect(),
    }
}

/// The whole answer as a `chat.completion`.
pub fn completion_body(
    id: String,
    created: u64,
    model: String,
    c: Completion,
    logprobs: bool,
) -> ChatCompletion {
    let done = c.done.clone().unwrap_or_else(|| crate::service::Final {
        finish: FinishReason::Stop,
        usage: Default::default(),
        timings: Default::default(),
        load_duration: Default::default(),
        total_duration: Default::default(),
        ended_in_reasoning: false,
        stop_sequence: None,
        reasoning_tokens: 0,
    });
    let tool_calls: Vec<ToolCall> = c
        .tool_calls
        .iter()
        .map(|t| ToolCall {
            id: t.id.clone(),
            kind: "function".into(),
            function: FunctionCall {
                name: t.name.clone(),
                arguments: t.arguments.clone(),
            },
        })
        .collect();
    let content = if c.content.is_empty() && !tool_calls.is_empty() {
        None
    } else {
        Some(c.content)
    };
    ChatCompletion {
        id,
        object: "chat.completion".into(),
        created,
        model,
        choices: vec![ChatChoice {
            index: 0,
            message: AssistantMessage {
                role: "assistant".into(),
                content,
                reasoning_content: (!c.reasoning.is_empty()).then_some(c.reasoning),
                tool_calls,
            },
            logprobs: logprobs.then(|| ChoiceLogprobs {
                content: c.logprobs.iter().map(logprob_content).collect(),
            }),
            finish_reason: Some(finish_reason(done.finish).into()),
        }],
        usage: usage(&done.usage, done.reasoning_tokens),
        system_fingerprint: None,
    }
}

/// Service events → `chat.completion.chunk`s. Logprobs arrive before the text of their token
/// and ride on the next chunk that carries text.
pub struct ChatStream {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    logprobs: bool,
    pending_logprobs: Vec<LogprobContent>,
}

impl ChatStream {
    pub fn new(
        id: String,
        created: u64,
        model: String,
        include_usage: bool,
        logprobs: bool,
    ) -> ChatStream {
        ChatStream {
            id,
            created,
            model,
            include_usage,
            logprobs,
            pending_logprobs: Vec::new(),
        }
    }

    fn chunk(
        &self,
        choices: Vec<ChunkChoice>,
        usage: Option<rmx_api::openai::Usage>,
    ) -> ChatCompletionChunk {
        ChatCompletionChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.created,
            model: self.model.clone(),
            choices,
            usage,
        }
    }

    fn delta(&mut self, delta: ChunkDelta, finish: Option<&str>) -> ChatCompletionChunk {
        let logprobs =
            (self.logprobs && !self.pending_logprobs.is_empty()).then(|| ChoiceLogprobs {
                content: std::mem::take(&mut self.pending_logprobs),
            });
        self.chunk(
            vec![ChunkChoice {
                index: 0,
                delta,
                logprobs,
                finish_reason: finish.map(str::to_string),
            }],
            None,
        )
    }

    /// The chunks for one service event (the unit tests read these directly).
    pub fn chunks(
        &mut self,
        event: ServiceEvent,
    ) -> Result<Vec<ChatCompletionChunk>, ErrorResponse> {
        let delta = match event {
            ServiceEvent::Content(t) => ChunkDelta {
                content: Some(t),
                ..ChunkDelta::default()
            },
            ServiceEvent::Reasoning(t) => ChunkDelta {
                reasoning_content: Some(t),
                ..ChunkDelta::default()
            },
            ServiceEvent::ToolCallStart { index, id, name } => ChunkDelta {
                tool_calls: Some(vec![ToolCallDelta {
                    index,
                    id: Some(id),
                    kind: Some("function".into()),
                    function: FunctionCallDelta {
                        name: Some(name),
                        arguments: Some(String::new()),
                    },
                }]),
                ..ChunkDelta::default()
            },
            ServiceEvent::ToolCallArgs { index, delta } => ChunkDelta {
                tool_calls: Some(vec![ToolCallDelta {
                    index,
                    id: None,
                    kind: None,
                    function: FunctionCallDelta {
                        name: None,
                        arguments: Some(delta),
                    },
                }]),
                ..ChunkDelta::default()
            },
            ServiceEvent::ToolCallEnd { .. } => return Ok(Vec::new()),
            ServiceEvent::Logprob(l) => {
                self.pending_logprobs.push(logprob_content(&l));
                return Ok(Vec::new());
            }
            ServiceEvent::Done(f) => {
                let mut out =
                    vec![self.delta(ChunkDelta::default(), Some(finish_reason(f.finish)))];
                if self.include_usage {
                    out.push(self.chunk(Vec::new(), Some(usage(&f.usage, f.reasoning_tokens))));
                }
                return Ok(out);
            }
            ServiceEvent::Error(message) => {
                return Err(
                    OpenAiError::Service(crate::error::ServiceError::Internal(message)).into_body(),
                );
            }
        };
        Ok(vec![self.delta(delta, None)])
    }
}

impl OpenAiError {
    pub fn into_body(self) -> ErrorResponse {
        ErrorResponse { error: self.body() }
    }
}

impl Translator for ChatStream {
    fn start(&mut self) -> Vec<Event> {
        let first = self.delta(
            ChunkDelta {
                role: Some("assistant".into()),
                content: Some(String::new()),
                ..ChunkDelta::default()
            },
            None,
        );
        vec![data_event(&first)]
    }

    fn event(&mut self, event: ServiceEvent) -> Vec<Event> {
        let last = matches!(event, ServiceEvent::Done(_) | ServiceEvent::Error(_));
        let mut out: Vec<Event> = match self.chunks(event) {
            Ok(chunks) => chunks.iter().map(data_event).collect(),
            // The SDKs raise on a chunk with an `error` key.
            Err(err) => vec![data_event(&err)],
        };
        if last {
            out.push(Event::default().data("[DONE]"));
        }
        out
    }

    fn idle(&mut self) -> Vec<Event> {
        vec![Event::default().comment("keep-alive")]
    }
}
