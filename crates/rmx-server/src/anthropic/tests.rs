//! The Anthropic translation, fed service events directly: event order, block indices, stop
//! reasons, and the request turned into template messages.

use std::time::Duration;

use rmx_api::anthropic::{BlockDelta, ContentBlock, MessagesRequest, StopReason, StreamEvent};
use serde_json::{json, Value};

use super::messages;
use super::stream::MessageStream;
use crate::service::{
    CollectedCall, Completion, Final, FinishReason, PromptInput, ServiceEvent, Usage,
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

/// A stop string ended the answer.
fn stopped_by(sequence: &str) -> Final {
    Final {
        stop_sequence: Some(sequence.into()),
        ..fin(FinishReason::Stop)
    }
}

fn stream(events: Vec<ServiceEvent>) -> Vec<StreamEvent> {
    let mut s = MessageStream::new("msg_1".into(), "m".into(), 10);
    let mut out = s.start_events();
    for e in events {
        out.extend(s.events(e));
    }
    out
}

#[test]
fn event_order_with_thinking_text_and_two_tool_uses() {
    let events = stream(vec![
        ServiceEvent::Reasoning("hmm".into()),
        ServiceEvent::Content("Sure.".into()),
        ServiceEvent::ToolCallStart {
            index: 0,
            id: "call_a".into(),
            name: "Bash".into(),
        },
        ServiceEvent::ToolCallArgs {
            index: 0,
            delta: "{\"command\":".into(),
        },
        ServiceEvent::ToolCallArgs {
            index: 0,
            delta: "\"ls\"}".into(),
        },
        ServiceEvent::ToolCallEnd { index: 0 },
        ServiceEvent::ToolCallStart {
            index: 1,
            id: "call_b".into(),
            name: "Read".into(),
        },
        ServiceEvent::ToolCallArgs {
            index: 1,
            delta: "{}".into(),
        },
        ServiceEvent::ToolCallEnd { index: 1 },
        done(FinishReason::ToolCalls),
    ]);
    let names: Vec<&str> = events.iter().map(StreamEvent::name).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start", // 0 thinking
            "content_block_delta",
            "content_block_delta", // signature
            "content_block_stop",
            "content_block_start", // 1 text
            "content_block_delta",
            "content_block_stop",
            "content_block_start", // 2 tool_use
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start", // 3 tool_use
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    let starts: Vec<(usize, &ContentBlock)> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => Some((*index, content_block)),
            _ => None,
        })
        .collect();
    assert_eq!(starts.iter().map(|s| s.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert!(matches!(starts[0].1, ContentBlock::Thinking { .. }));
    assert!(
        matches!(starts[2].1, ContentBlock::ToolUse { id, name, input } if id == "call_a" && name == "Bash" && *input == json!({}))
    );
    let json_of_2: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ContentBlockDelta {
                index: 2,
                delta: BlockDelta::InputJsonDelta { partial_json },
            } => Some(partial_json.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&json_of_2).expect("json"),
        json!({"command": "ls"})
    );
    let Some(StreamEvent::MessageDelta { delta, usage }) =
        events.iter().find(|e| e.name() == "message_delta")
    else {
        panic!("message_delta")
    };
    assert_eq!(delta.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(usage.output_tokens, 4);
    assert_eq!(usage.cache_read_input_tokens, Some(6));
    // Each block is stopped before the next starts, with its own index.
    let mut open: Option<usize> = None;
    for e in &events {
        match e {
            StreamEvent::ContentBlockStart { index, .. } => {
                assert_eq!(open, None);
                open = Some(*index);
            }
            StreamEvent::ContentBlockDelta { index, .. } => assert_eq!(open, Some(*index)),
            StreamEvent::ContentBlockStop { index } => {
                assert_eq!(open, Some(*index));
                open = None;
            }
            _ => {}
        }
    }
}

#[test]
fn stop_reasons() {
    let reason = |f| match stream(vec![done(f)])
        .into_iter()
        .find(|e| e.name() == "message_delta")
    {
        Some(StreamEvent::MessageDelta { delta, .. }) => delta.stop_reason,
        _ => None,
    };
    assert_eq!(reason(FinishReason::Stop), Some(StopReason::EndTurn));
    assert_eq!(reason(FinishReason::Length), Some(StopReason::MaxTokens));
    assert_eq!(reason(FinishReason::ToolCalls), Some(StopReason::ToolUse));
}

#[test]
fn a_matched_stop_string_is_stop_sequence_in_the_stream_and_the_message() {
    let events = stream(vec![
        ServiceEvent::Content("one".into()),
        ServiceEvent::Done(stopped_by("\n\nHuman:")),
    ]);
    let delta = events
        .iter()
        .find(|e| e.name() == "message_delta")
        .map(|e| serde_json::to_value(e).expect("json"));
    assert_eq!(
        delta.expect("a message_delta")["delta"],
        json!({"stop_reason": "stop_sequence", "stop_sequence": "\n\nHuman:"})
    );
    let c = Completion {
        content: "one".into(),
        done: Some(stopped_by("END")),
        ..Completion::default()
    };
    let m =
        serde_json::to_value(messages::message_body("msg_1".into(), "m".into(), c)).expect("json");
    assert_eq!(
        (&m["stop_reason"], &m["stop_sequence"]),
        (&json!("stop_sequence"), &json!("END"))
    );
    // EOS leaves stop_sequence null: end_turn.
    let c = Completion {
        done: Some(fin(FinishReason::Stop)),
        ..Completion::default()
    };
    let m =
        serde_json::to_value(messages::message_body("msg_1".into(), "m".into(), c)).expect("json");
    assert_eq!(
        (&m["stop_reason"], &m["stop_sequence"]),
        (&json!("end_turn"), &Value::Null)
    );
}

#[test]
fn errors_mid_stream_are_error_events() {
    let events = stream(vec![
        ServiceEvent::Content("a".into()),
        ServiceEvent::Error("boom".into()),
    ]);
    let last = serde_json::to_value(events.last().expect("event")).expect("json");
    assert_eq!(
        last,
        json!({"type": "error", "error": {"type": "api_error", "message": "boom"}})
    );
}

#[test]
fn whole_message_blocks() {
    let c = Completion {
        content: "Running it.".into(),
        reasoning: "think".into(),
        tool_calls: vec![CollectedCall {
            id: "call_a".into(),
            name: "Bash".into(),
            arguments: "{\"command\":\"ls\"}".into(),
        }],
        logprobs: Vec::new(),
        done: None,
    };
    let m =
        serde_json::to_value(messages::message_body("msg_1".into(), "m".into(), c)).expect("json");
    assert_eq!(m["content"][0]["type"], "thinking");
    assert_eq!(
        m["content"][1],
        json!({"type": "text", "text": "Running it."})
    );
    assert_eq!(m["content"][2]["input"], json!({"command": "ls"}));
}

#[test]
fn request_becomes_template_messages() {
    let req: MessagesRequest = serde_json::from_value(json!({
        "model": "m", "max_tokens": 100,
        "system": [{"type": "text", "text": "sys"}],
        "messages": [
            {"role": "user", "content": "list"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": ""},
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "tu1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu1", "content": "a.txt"},
                {"type": "text", "text": "and now?"}]}
        ],
        "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}},
                  {"type": "web_search_20250305", "name": "web_search"}],
        "stop_sequences": ["\n\nHuman:"],
        "thinking": {"type": "disabled"}
    }))
    .expect("request");
    let internal = messages::to_internal(&req).expect("valid");
    assert_eq!(internal.max_tokens, Some(100));
    assert_eq!(internal.stop, vec!["\n\nHuman:".to_string()]);
    assert_eq!(internal.think, Some(false));
    let PromptInput::Chat {
        messages, tools, ..
    } = internal.prompt
    else {
        panic!("chat")
    };
    let messages = serde_json::to_value(messages).expect("json");
    let roles: Vec<&str> = messages
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
    assert_eq!(messages[2]["reasoning_content"], "t");
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["arguments"],
        json!({"command": "ls"})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "tu1", "content": "a.txt"})
    );
    assert_eq!(
        tools.and_then(|t| t.as_array().map(Vec::len)),
        Some(1),
        "server tools are not given to the model"
    );
}

#[test]
fn base64_images_become_parts_and_url_sources_are_refused_naming_the_block() {
    let req = |source: Value| -> MessagesRequest {
        serde_json::from_value(json!({
            "model": "m", "max_tokens": 5,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "see"},
                {"type": "image", "source": source}, {"type": "text", "text": "this"}]}]
        }))
        .expect("request")
    };
    let ok = messages::template_messages(&req(
        json!({"type": "base64", "media_type": "image/png", "data": "AQID"}),
    ))
    .expect("read");
    assert_eq!(ok[0].content, "see\nthis");
    assert_eq!(
        ok[0].images().map(|b| b.to_vec()).collect::<Vec<_>>(),
        vec![vec![1u8, 2, 3]]
    );
    let url = messages::to_internal(&req(json!({"type": "url", "url": "https://x/a.png"})))
        .expect_err("refused");
    assert!(
        url.to_string().contains("messages.0.content.1.source"),
        "{url}"
    );
    assert!(
        url.to_string().contains("URL fetching is not enabled"),
        "{url}"
    );
    let bad = messages::to_internal(&req(json!({"type": "base64", "data": "not base64!"})))
        .expect_err("refused");
    assert!(bad.to_string().contains("not valid base64"), "{bad}");
}
