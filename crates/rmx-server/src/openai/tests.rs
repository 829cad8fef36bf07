//! The OpenAI translation, fed service events directly: a random tiny model never writes a
//! tool call, so this is where tool calls, reasoning, logprobs and finish reasons are pinned.

use std::time::Duration;

use rmx_api::openai::{
    ChatCompletionChunk, ChatCompletionRequest, ChatMessage, OutputContent, OutputItem,
    ResponseStreamEvent as E, ResponsesRequest, Role,
};
use rmx_engine::Tool;
use serde_json::{json, Value};

use super::chat::{self, ChatStream};
use super::responses::{self, ResponsesStream};
use crate::service::{
    CollectedCall, Completion, Final, FinishReason, PromptInput, ServiceEvent, Shape, TokenLogprob,
    Usage,
};

fn done(finish: FinishReason) -> ServiceEvent {
    ServiceEvent::Done(fin(finish))
}

fn fin(finish: FinishReason) -> Final {
    Final {
        finish,
        usage: Usage {
            prompt_tokens: 10,
            completion_tokens: 4,
            cached_tokens: 6,
            ..Default::default()
        },
        timings: Default::default(),
        load_duration: Duration::ZERO,
        total_duration: Duration::ZERO,
        ended_in_reasoning: false,
        stop_sequence: None,
        reasoning_tokens: 0,
    }
}

fn two_calls() -> Vec<ServiceEvent> {
    vec![
        ServiceEvent::Reasoning("let me ".into()),
        ServiceEvent::Reasoning("check".into()),
        ServiceEvent::Content("Sure.".into()),
        ServiceEvent::ToolCallStart {
            index: 0,
            id: "call_a".into(),
            name: "get_weather".into(),
        },
        ServiceEvent::ToolCallArgs {
            index: 0,
            delta: "{\"city\": ".into(),
        },
        ServiceEvent::ToolCallArgs {
            index: 0,
            delta: "\"Paris\"}".into(),
        },
        ServiceEvent::ToolCallEnd { index: 0 },
        ServiceEvent::ToolCallStart {
            index: 1,
            id: "call_b".into(),
            name: "get_time".into(),
        },
        ServiceEvent::ToolCallArgs {
            index: 1,
            delta: "{}".into(),
        },
        ServiceEvent::ToolCallEnd { index: 1 },
        done(FinishReason::ToolCalls),
    ]
}

fn chat_chunks(
    events: Vec<ServiceEvent>,
    include_usage: bool,
    logprobs: bool,
) -> Vec<ChatCompletionChunk> {
    let mut s = ChatStream::new("chatcmpl-1".into(), 1, "m".into(), include_usage, logprobs);
    events
        .into_iter()
        .flat_map(|e| s.chunks(e).expect("no error"))
        .collect()
}

#[test]
fn chat_stream_carries_reasoning_content_and_two_tool_calls() {
    let chunks = chat_chunks(two_calls(), true, false);
    let reasoning: String = chunks
        .iter()
        .filter_map(|c| c.choices.first()?.delta.reasoning_content.clone())
        .collect();
    assert_eq!(reasoning, "let me check");
    let content: String = chunks
        .iter()
        .filter_map(|c| c.choices.first()?.delta.content.clone())
        .collect();
    assert_eq!(content, "Sure.");
    let deltas: Vec<_> = chunks
        .iter()
        .filter_map(|c| c.choices.first()?.delta.tool_calls.clone())
        .flatten()
        .collect();
    // First delta of each call: index, id, type, name; then argument pieces.
    assert_eq!(deltas[0].index, 0);
    assert_eq!(deltas[0].id.as_deref(), Some("call_a"));
    assert_eq!(deltas[0].kind.as_deref(), Some("function"));
    assert_eq!(deltas[0].function.name.as_deref(), Some("get_weather"));
    let args0: String = deltas
        .iter()
        .filter(|d| d.index == 0)
        .filter_map(|d| d.function.arguments.clone())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args0).expect("json"),
        json!({"city": "Paris"})
    );
    let second = deltas.iter().find(|d| d.index == 1).expect("second call");
    assert_eq!(second.id.as_deref(), Some("call_b"));
    // Finish chunk, then the usage chunk with no choices.
    let n = chunks.len();
    assert_eq!(
        chunks[n - 2].choices[0].finish_reason.as_deref(),
        Some("tool_calls")
    );
    assert!(chunks[n - 1].choices.is_empty());
    let usage = chunks[n - 1].usage.clone().expect("usage");
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (10, 4, 14)
    );
    assert_eq!(
        usage.prompt_tokens_details.map(|d| d.cached_tokens),
        Some(6)
    );
    assert!(chunks[..n - 1].iter().all(|c| c.usage.is_none()));
}

#[test]
fn chat_stream_without_include_usage_has_no_usage_chunk() {
    let chunks = chat_chunks(
        vec![
            ServiceEvent::Content("a".into()),
            done(FinishReason::Length),
        ],
        false,
        false,
    );
    assert_eq!(chunks.len(), 2);
    assert_eq!(
        chunks[1].choices[0].finish_reason.as_deref(),
        Some("length")
    );
    assert!(chunks.iter().all(|c| c.usage.is_none()));
}

#[test]
fn chat_stream_logprobs_ride_on_the_text_they_describe() {
    let lp = |tok: &str| {
        ServiceEvent::Logprob(TokenLogprob {
            id: 1,
            token: tok.into(),
            logprob: -0.5,
            top: vec![(1, tok.into(), -0.5), (2, "x".into(), -1.5)],
        })
    };
    let chunks = chat_chunks(
        vec![
            lp("Hel"),
            ServiceEvent::Content("Hel".into()),
            lp("lo"),
            ServiceEvent::Content("lo".into()),
            done(FinishReason::Stop),
        ],
        false,
        true,
    );
    let first = chunks[0].choices[0].logprobs.clone().expect("logprobs");
    assert_eq!(first.content[0].token, "Hel");
    assert_eq!(first.content[0].top_logprobs.len(), 2);
    assert_eq!(first.content[0].bytes.as_deref(), Some("Hel".as_bytes()));
    assert_eq!(
        chunks[1].choices[0]
            .logprobs
            .as_ref()
            .map(|l| l.content[0].token.as_str()),
        Some("lo")
    );
}

#[test]
fn chat_stream_error_is_an_openai_error_chunk() {
    let mut s = ChatStream::new("c".into(), 1, "m".into(), false, false);
    let err = s
        .chunks(ServiceEvent::Error("boom".into()))
        .expect_err("error");
    assert_eq!(err.error.kind, "server_error");
    assert!(err.error.message.contains("boom"));
}

#[test]
fn whole_chat_answer_with_tool_calls_has_null_content() {
    let c = Completion {
        content: String::new(),
        reasoning: "thinking".into(),
        tool_calls: vec![CollectedCall {
            id: "call_a".into(),
            name: "f".into(),
            arguments: "{\"x\":1}".into(),
        }],
        logprobs: Vec::new(),
        done: Some(fin(FinishReason::ToolCalls)),
    };
    let body = serde_json::to_value(chat::completion_body("id".into(), 1, "m".into(), c, false))
        .expect("json");
    assert_eq!(body["choices"][0]["message"]["content"], Value::Null);
    assert_eq!(
        body["choices"][0]["message"]["reasoning_content"],
        "thinking"
    );
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"x\":1}"
    );
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(body["usage"]["prompt_tokens_details"]["cached_tokens"], 6);
}

fn chat_req(v: Value) -> ChatCompletionRequest {
    serde_json::from_value(v).expect("request")
}

fn chat_messages(req: &ChatCompletionRequest) -> Value {
    match chat::to_internal(req).expect("valid").prompt {
        PromptInput::Chat { messages, .. } => serde_json::to_value(messages).expect("json"),
        PromptInput::Raw(_) => panic!("chat"),
    }
}

#[test]
fn chat_request_translation_for_templates() {
    let req = chat_req(json!({
        "model": "m",
        "messages": [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": null, "reasoning_content": "r",
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}
        ],
        "response_format": {"type": "json_object"},
        "temperature": 0, "seed": 7, "max_tokens": 9, "stop": "END",
        "logprobs": true, "top_logprobs": 3,
        "chat_template_kwargs": {"enable_thinking": false}
    }));
    let internal = chat::to_internal(&req).expect("valid");
    assert_eq!(internal.sampling.temperature, 0.0);
    assert_eq!(internal.sampling.seed, Some(7));
    assert_eq!(internal.max_tokens, Some(9));
    assert_eq!(internal.stop, vec!["END".to_string()]);
    assert_eq!(internal.logprobs, Some(3));
    assert_eq!(internal.think, Some(false));
    assert_eq!(internal.shape, Some(Shape::JsonObject));
    let m = chat_messages(&req);
    assert_eq!(m[0]["role"], "system");
    assert!(m[0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("be brief") && s.contains("JSON")));
    assert_eq!(m[1]["content"], "hi");
    // Arguments reach the template as an object; reasoning as reasoning_content.
    assert_eq!(
        m[2]["tool_calls"][0]["function"]["arguments"],
        json!({"a": 1})
    );
    assert_eq!(m[2]["reasoning_content"], "r");
    assert_eq!(m[3]["tool_call_id"], "c1");
}

#[test]
fn tool_choice_modes() {
    let tools = json!([
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "b"}}
    ]);
    let tools_of = |choice: Value| {
        let req = chat_req(
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": tools, "tool_choice": choice}),
        );
        match chat::to_internal(&req).map(|r| r.prompt) {
            Ok(PromptInput::Chat { tools, .. }) => {
                Ok(tools.map(|t| t.as_array().map_or(0, Vec::len)).unwrap_or(0))
            }
            Ok(_) => panic!("chat"),
            Err(e) => Err(e.to_string()),
        }
    };
    assert_eq!(tools_of(json!("auto")), Ok(2));
    assert_eq!(tools_of(json!("required")), Ok(2));
    assert_eq!(tools_of(json!("none")), Ok(0));
    assert_eq!(
        tools_of(json!({"type": "function", "function": {"name": "b"}})),
        Ok(1)
    );
    assert!(
        tools_of(json!({"type": "function", "function": {"name": "zz"}}))
            .is_err_and(|e| e.contains("zz"))
    );
    // `required` and a named function are enforced; a forced call wins over JSON mode.
    let shape_of = |choice: Value| {
        let req = chat_req(
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
                                  "tools": tools, "tool_choice": choice,
                                  "response_format": {"type": "json_object"}}),
        );
        chat::to_internal(&req).expect("valid").shape
    };
    // Each tool goes with its parameters schema (none: any object of arguments).
    let a = Tool::new("a", Some(json!({"type": "object"})));
    let b = Tool::new("b", None);
    let call = |tools: &[&Tool]| {
        Some(Shape::ToolCall {
            tools: tools.iter().map(|&t| t.clone()).collect(),
        })
    };
    assert_eq!(shape_of(json!("required")), call(&[&a, &b]));
    assert_eq!(
        shape_of(json!({"type": "function", "function": {"name": "b"}})),
        call(&[&b])
    );
    assert_eq!(shape_of(json!("auto")), Some(Shape::JsonObject));
    assert_eq!(shape_of(json!("none")), Some(Shape::JsonObject));
}

#[test]
fn chat_request_checks_name_the_param() {
    let param = |v: Value| {
        chat::to_internal(&chat_req(v))
            .expect_err("invalid")
            .body()
            .param
    };
    let msgs = json!([{"role": "user", "content": "x"}]);
    assert_eq!(
        param(json!({"model": "m", "messages": msgs, "temperature": 3})).as_deref(),
        Some("temperature")
    );
    assert_eq!(
        param(json!({"model": "m", "messages": msgs, "n": 2})).as_deref(),
        Some("n")
    );
    assert_eq!(
        param(json!({"model": "m", "messages": []})).as_deref(),
        Some("messages")
    );
    assert_eq!(
        param(json!({"model": "m", "messages": msgs, "top_logprobs": 2})).as_deref(),
        Some("top_logprobs")
    );
    assert_eq!(
        param(json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}))
            .as_deref(),
        Some("messages[0].content[0].image_url")
    );
    let _ = ChatMessage::new(Role::User, "x");
}

fn responses_req(v: Value) -> ResponsesRequest {
    serde_json::from_value(v).expect("request")
}

#[test]
fn responses_input_items_become_chat_turns() {
    let req = responses_req(json!({
        "model": "m",
        "instructions": "you are codex",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "env"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
            {"type": "reasoning", "id": "rs", "summary": [], "content": [{"type": "reasoning_text", "text": "use ls"}]},
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":[\"ls\"]}"},
            {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": "{\"cmd\":[\"pwd\"]}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
            {"type": "function_call_output", "call_id": "c2", "output": "/w"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
        ],
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}, {"type": "web_search"}]
    }));
    let m = serde_json::to_value(responses::input_messages(&req).expect("valid")).expect("json");
    let roles: Vec<&str> = m
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|x| x["role"].as_str())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "assistant"]
    );
    assert_eq!(m[0]["content"], "you are codex\n\nenv");
    assert_eq!(m[2]["reasoning_content"], "use ls");
    assert_eq!(m[2]["tool_calls"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        m[2]["tool_calls"][1]["function"]["arguments"],
        json!({"cmd": ["pwd"]})
    );
    assert_eq!(m[3]["tool_call_id"], "c1");
    let internal = responses::to_internal(&req).expect("valid");
    let PromptInput::Chat { tools, .. } = internal.prompt else {
        panic!("chat")
    };
    assert_eq!(tools.and_then(|t| t.as_array().map(Vec::len)), Some(1));
}

#[test]
fn responses_refuses_previous_response_id() {
    let req = responses_req(json!({"model": "m", "input": "hi", "previous_response_id": "resp_1"}));
    assert_eq!(
        responses::to_internal(&req)
            .expect_err("stateless")
            .body()
            .param
            .as_deref(),
        Some("previous_response_id")
    );
}

fn response_events(events: Vec<ServiceEvent>) -> (Vec<E>, ResponsesStream) {
    let req = responses_req(json!({"model": "m", "input": "hi"}));
    let mut s = ResponsesStream::new(&req, 1);
    let mut out = s.start_events();
    for e in events {
        out.extend(s.events(e));
    }
    (out, s)
}

#[test]
fn responses_stream_event_sequence_with_reasoning_text_and_two_calls() {
    let (events, s) = response_events(two_calls());
    let names: Vec<&str> = events.iter().map(E::name).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added", // reasoning
            "response.reasoning_text.delta",
            "response.reasoning_text.delta",
            "response.reasoning_text.done",
            "response.output_item.done",
            "response.output_item.added", // message
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added", // call a
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.output_item.added", // call b
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    // Sequence numbers count up from 0 with no gaps.
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| {
            serde_json::to_value(e).expect("json")["sequence_number"]
                .as_u64()
                .expect("seq")
        })
        .collect();
    assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>());
    let r = &s.response;
    assert_eq!(r.status, "completed");
    assert_eq!(r.output.len(), 4);
    assert!(
        matches!(&r.output[0], OutputItem::Reasoning { content, .. } if content[0].text == "let me check")
    );
    assert!(matches!(&r.output[1], OutputItem::Message { content, .. }
        if matches!(&content[0], OutputContent::OutputText { text, .. } if text == "Sure.")));
    assert!(
        matches!(&r.output[2], OutputItem::FunctionCall { call_id, arguments, status, .. }
        if call_id == "call_a" && arguments == "{\"city\": \"Paris\"}" && status == "completed")
    );
    let usage = r.usage.clone().expect("usage");
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.total_tokens),
        (10, 4, 14)
    );
    assert_eq!(usage.input_tokens_details.cached_tokens, 6);
}

#[test]
fn responses_stream_length_is_incomplete_and_errors_fail() {
    let (events, s) = response_events(vec![
        ServiceEvent::Content("a".into()),
        done(FinishReason::Length),
    ]);
    assert_eq!(events.last().map(E::name), Some("response.incomplete"));
    assert_eq!(
        s.response.incomplete_details.map(|d| d.reason).as_deref(),
        Some("max_output_tokens")
    );
    let (events, s) = response_events(vec![
        ServiceEvent::Content("a".into()),
        ServiceEvent::Error("boom".into()),
    ]);
    let names: Vec<&str> = events.iter().map(E::name).collect();
    assert_eq!(names.last(), Some(&"response.failed"));
    // The open message item is closed before the failure.
    assert!(names.contains(&"response.output_item.done"));
    assert_eq!(s.response.error.map(|e| e.message).as_deref(), Some("boom"));
}

#[test]
fn an_instruction_added_to_a_system_message_with_images_is_in_its_parts() {
    let mut messages = vec![crate::service::TemplateMessage::with_parts(
        crate::service::Role::System,
        vec![
            crate::service::ContentPart::Image(std::sync::Arc::new(vec![1])),
            crate::service::ContentPart::Text("look".into()),
        ],
    )];
    chat::add_system(&mut messages, "answer in JSON");
    let content = messages[0]
        .template_value()
        .ok()
        .map(|v| v["content"].clone());
    assert_eq!(
        content,
        Some(json!([{"type": "image"}, {"type": "text", "text": "look"},
            {"type": "text", "text": "\n\nanswer in JSON"}]))
    );
    assert_eq!(messages[0].content, "look\n\nanswer in JSON");
}

#[test]
fn an_effort_caps_the_thought_unless_a_budget_is_given() {
    let req = |extra: Value| {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        body.as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        let req: ChatCompletionRequest = serde_json::from_value(body).expect("request");
        chat::to_internal(&req).expect("valid")
    };
    assert_eq!(req(json!({})).thinking_budget, None);
    assert_eq!(
        req(json!({"reasoning_effort": "low"})).thinking_budget,
        Some(1024)
    );
    let both = req(json!({"reasoning_effort": "high", "thinking_token_budget": 7}));
    assert_eq!(both.thinking_budget, Some(7));
    // The template still sees the effort.
    assert!(
        matches!(&both.prompt, crate::service::PromptInput::Chat { template_kwargs, .. }
        if template_kwargs["reasoning_effort"] == "high")
    );
}
