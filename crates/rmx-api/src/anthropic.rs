//! Anthropic's Messages API wire format, as the `anthropic` SDKs and Claude Code send and read
//! it: content blocks (text, thinking, tool_use, tool_result), tools, and the streaming events.
//!
//! Unknown fields (`cache_control`, `metadata`, `citations`, ...) are ignored: Claude Code sends
//! them on every request, and they change nothing for a local model.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------------
// Request

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct MessagesRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub max_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemPrompt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// rmx's own fields: a quantized KV cache, speculative decoding.
    #[serde(flatten)]
    pub rmx: crate::extensions::RmxFields,
}

/// `POST /v1/messages/count_tokens`: a messages request without `max_tokens`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct CountTokensRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemPrompt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
}

impl From<CountTokensRequest> for MessagesRequest {
    fn from(r: CountTokensRequest) -> Self {
        MessagesRequest {
            model: r.model,
            messages: r.messages,
            max_tokens: 1,
            system: r.system,
            stop_sequences: None,
            stream: None,
            temperature: None,
            top_p: None,
            top_k: None,
            tools: r.tools,
            tool_choice: r.tool_choice,
            thinking: r.thinking,
            metadata: None,
            rmx: Default::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub struct CountTokensResponse {
    pub input_tokens: usize,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum SystemPrompt {
    Text(String),
    Blocks(Vec<SystemBlock>),
}

impl SystemPrompt {
    pub fn text(&self) -> String {
        match self {
            SystemPrompt::Text(s) => s.clone(),
            SystemPrompt::Blocks(blocks) => blocks
                .iter()
                .map(|b| b.text.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct SystemBlock {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Message {
    pub role: Role,
    pub content: MessageContent,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

impl MessageContent {
    pub fn blocks(&self) -> Vec<ContentBlock> {
        match self {
            MessageContent::Text(s) => vec![ContentBlock::Text { text: s.clone() }],
            MessageContent::Blocks(b) => b.clone(),
        }
    }
}

/// A content block, in a request or a response.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<ToolResultContent>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
    },
    /// An image; the daemon reads a `{"type": "base64", "media_type", "data"}` source, and
    /// fetches a `url` source only where it is allowed to (`RMX_IMAGE_URLS=1`).
    Image {
        source: Value,
    },
    /// Read so the error can name what is unsupported.
    Document {
        source: Value,
    },
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    Text(String),
    Blocks(Vec<Value>),
}

impl ToolResultContent {
    pub fn text(&self) -> String {
        match self {
            ToolResultContent::Text(s) => s.clone(),
            ToolResultContent::Blocks(blocks) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// A tool: client tools carry `input_schema`; Anthropic's server tools (`web_search_...`)
/// carry a `type` and no schema, and are not given to the model.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolChoice {
    Auto {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    Any {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    Tool {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    None,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Thinking {
    Enabled {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget_tokens: Option<u32>,
    },
    Disabled,
    /// Newer clients let the model decide.
    Adaptive,
}

// ---------------------------------------------------------------------------------------------
// Response

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    StopSequence,
    ToolUse,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct Usage {
    pub input_tokens: usize,
    pub output_tokens: usize,
    #[serde(default)]
    pub cache_creation_input_tokens: usize,
    #[serde(default)]
    pub cache_read_input_tokens: usize,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct MessagesResponse {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub role: Role,
    pub content: Vec<ContentBlock>,
    pub model: String,
    pub stop_reason: Option<StopReason>,
    pub stop_sequence: Option<String>,
    pub usage: Usage,
}

/// The streaming events, in the order Anthropic sends them: `message_start`, then per block
/// `content_block_start`, deltas, `content_block_stop`, then `message_delta`, `message_stop`;
/// `ping` may come anywhere.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    MessageStart {
        message: MessagesResponse,
    },
    ContentBlockStart {
        index: usize,
        content_block: ContentBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta,
        usage: DeltaUsage,
    },
    MessageStop,
    Ping,
    Error {
        error: ErrorBody,
    },
}

impl StreamEvent {
    /// The event's name, for the SSE `event:` line.
    pub fn name(&self) -> &'static str {
        match self {
            StreamEvent::MessageStart { .. } => "message_start",
            StreamEvent::ContentBlockStart { .. } => "content_block_start",
            StreamEvent::ContentBlockDelta { .. } => "content_block_delta",
            StreamEvent::ContentBlockStop { .. } => "content_block_stop",
            StreamEvent::MessageDelta { .. } => "message_delta",
            StreamEvent::MessageStop => "message_stop",
            StreamEvent::Ping => "ping",
            StreamEvent::Error { .. } => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockDelta {
    TextDelta { text: String },
    ThinkingDelta { thinking: String },
    SignatureDelta { signature: String },
    InputJsonDelta { partial_json: String },
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct MessageDelta {
    pub stop_reason: Option<StopReason>,
    pub stop_sequence: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct DeltaUsage {
    pub output_tokens: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<usize>,
}

// ---------------------------------------------------------------------------------------------
// Errors

/// `{"type": "error", "error": {...}}`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ErrorResponse {
    #[serde(rename = "type")]
    pub kind: String,
    pub error: ErrorBody,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ErrorBody {
    /// `invalid_request_error`, `authentication_error`, `not_found_error`,
    /// `request_too_large`, `rate_limit_error`, `api_error`, `overloaded_error`.
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

/// Parses a JSON object out of tool-call argument text; what is not an object is wrapped, so
/// that `input` is always an object as Anthropic's clients expect.
pub fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => Value::Object(map),
        Ok(other) => {
            let mut map = Map::new();
            map.insert("value".to_string(), other);
            Value::Object(map)
        }
        Err(_) if arguments.trim().is_empty() => Value::Object(Map::new()),
        Err(_) => {
            let mut map = Map::new();
            map.insert(
                "arguments".to_string(),
                Value::String(arguments.to_string()),
            );
            Value::Object(map)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_as_claude_code_sends_it() {
        let req: MessagesRequest = serde_json::from_value(json!({
            "model": "m", "max_tokens": 32000, "stream": true,
            "system": [{"type": "text", "text": "You are Claude Code", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a.txt"}]}]}
            ],
            "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}},
                      {"type": "web_search_20250305", "name": "web_search"}],
            "tool_choice": {"type": "auto"},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "metadata": {"user_id": "u"}
        }))
        .expect("parses");
        assert_eq!(
            req.system.as_ref().map(SystemPrompt::text).as_deref(),
            Some("You are Claude Code")
        );
        let blocks = req.messages[2].content.blocks();
        assert!(
            matches!(&blocks[0], ContentBlock::ToolResult { content: Some(c), .. } if c.text() == "a.txt")
        );
        assert_eq!(
            req.thinking,
            Some(Thinking::Enabled {
                budget_tokens: Some(1024)
            })
        );
    }

    #[test]
    fn events_serialize_with_their_names() {
        let ev = StreamEvent::ContentBlockDelta {
            index: 0,
            delta: BlockDelta::TextDelta { text: "x".into() },
        };
        let v = serde_json::to_value(&ev).expect("serializes");
        assert_eq!(
            v,
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}})
        );
        assert_eq!(
            serde_json::to_value(StreamEvent::MessageStop).expect("serializes"),
            json!({"type": "message_stop"})
        );
    }

    #[test]
    fn tool_input_is_always_an_object() {
        assert_eq!(tool_input("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(tool_input(""), json!({}));
        assert_eq!(tool_input("[1]"), json!({"value": [1]}));
        assert_eq!(tool_input("{oops"), json!({"arguments": "{oops"}));
    }
}
