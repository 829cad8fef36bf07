//! Chat Completions (`/v1/chat/completions`): the request, its messages and tools, the answer
//! and the streamed chunks.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{StopSequences, StreamOptions, StructuredOutputs, Usage};

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct ChatCompletionRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopSequences>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Not OpenAI's, but vLLM's and llama.cpp's, and clients send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_p: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition_penalty: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    /// Template variables (`enable_thinking`, ...), as vLLM takes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<Map<String, Value>>,
    /// `none`/`minimal` turn thinking off; `low`, `medium` and `high` also cap the thought
    /// (rmx-server's thinking.rs); the template sees the value too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// vLLM's: the thought is closed for the model after this many tokens (0: at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_token_budget: Option<u32>,
    /// vLLM's constraint on the answer: a JSON schema, a regex, a choice or a Lark grammar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_outputs: Option<StructuredOutputs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// rmx's own fields: a quantized KV cache, speculative decoding.
    #[serde(flatten)]
    pub rmx: crate::extensions::RmxFields,
}

impl ChatCompletionRequest {
    /// `max_completion_tokens` replaced `max_tokens`; the newer one wins.
    pub fn max_output_tokens(&self) -> Option<u32> {
        self.max_completion_tokens.or(self.max_tokens)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    /// The newer name of `system` for reasoning models.
    Developer,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ChatMessage {
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<MessageContent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The reasoning of an earlier assistant turn (vLLM, DeepSeek); `reasoning` is accepted
    /// as the other name clients use.
    #[serde(default, alias = "reasoning", skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

impl ChatMessage {
    pub fn new(role: Role, text: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role,
            content: Some(MessageContent::Text(text.into())),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            reasoning_content: None,
        }
    }
}

/// A message's content: a string, or parts.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text {
        text: String,
    },
    /// An image; the daemon reads `{"url": "data:image/...;base64,..."}`, and fetches an
    /// http(s) URL only where it is allowed to (`RMX_IMAGE_URLS=1`).
    ImageUrl {
        image_url: Value,
    },
    /// Read so the error can say what is unsupported, rather than "unknown variant".
    InputAudio {
        input_audio: Value,
    },
    File {
        file: Value,
    },
}

impl MessageContent {
    /// The text of the content, parts joined; the first part that is not text is returned
    /// as the error (its type name).
    pub fn text(&self) -> Result<String, &'static str> {
        match self {
            MessageContent::Text(s) => Ok(s.clone()),
            MessageContent::Parts(parts) => {
                let mut out = String::new();
                for part in parts {
                    match part {
                        ContentPart::Text { text } => out.push_str(text),
                        ContentPart::ImageUrl { .. } => return Err("image_url"),
                        ContentPart::InputAudio { .. } => return Err("input_audio"),
                        ContentPart::File { .. } => return Err("file"),
                    }
                }
                Ok(out)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Tool {
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionDefinition,
}

fn function_type() -> String {
    "function".to_string()
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct FunctionDefinition {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `tool_choice`: `"auto"`, `"none"`, `"required"`, or a named function.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ToolChoice {
    Mode(ToolChoiceMode),
    Named(NamedToolChoice),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoiceMode {
    Auto,
    None,
    Required,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct NamedToolChoice {
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: NamedFunction,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct NamedFunction {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: Value },
}

/// A call in an assistant message (request) or a whole answer (response).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text.
    pub arguments: String,
}

// ---------------------------------------------------------------------------------------------
// Chat Completions: response

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ChatCompletion {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChatChoice>,
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_fingerprint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ChatChoice {
    pub index: u32,
    pub message: AssistantMessage,
    pub logprobs: Option<ChoiceLogprobs>,
    pub finish_reason: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct AssistantMessage {
    pub role: String,
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct ChoiceLogprobs {
    pub content: Vec<LogprobContent>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct LogprobContent {
    pub token: String,
    pub logprob: f32,
    pub bytes: Option<Vec<u8>>,
    pub top_logprobs: Vec<TopLogprob>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct TopLogprob {
    pub token: String,
    pub logprob: f32,
    pub bytes: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ChatCompletionChunk {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChunkChoice>,
    /// Only on the last chunk, with `stream_options.include_usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: ChunkDelta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<ChoiceLogprobs>,
    pub finish_reason: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct ChunkDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ToolCallDelta {
    pub index: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub function: FunctionCallDelta,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct FunctionCallDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse<T: for<'de> Deserialize<'de>>(v: Value) -> T {
        serde_json::from_value(v).expect("parses")
    }

    #[test]
    fn chat_request_takes_string_and_part_content_and_tool_messages() {
        let req: ChatCompletionRequest = parse(json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": null, "reasoning_content": "hmm",
                 "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"}
            ],
            "stop": "x", "max_completion_tokens": 5, "max_tokens": 9,
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "response_format": {"type": "json_object"},
            "unknown_field": true
        }));
        assert_eq!(req.messages.len(), 4);
        assert_eq!(
            req.messages[1].content.as_ref().map(|c| c.text()),
            Some(Ok("ab".into()))
        );
        assert_eq!(req.messages[2].reasoning_content.as_deref(), Some("hmm"));
        assert_eq!(
            req.stop.clone().map(StopSequences::into_vec),
            Some(vec!["x".to_string()])
        );
        assert_eq!(req.max_output_tokens(), Some(5));
        assert!(
            matches!(req.tool_choice, Some(ToolChoice::Named(ref n)) if n.function.name == "f")
        );
        assert_eq!(req.response_format, Some(ResponseFormat::JsonObject));
        let req: ChatCompletionRequest = parse(
            json!({"model": "m", "messages": [], "tool_choice": "required", "stop": ["a", "b"]}),
        );
        assert_eq!(
            req.tool_choice,
            Some(ToolChoice::Mode(ToolChoiceMode::Required))
        );
    }

    #[test]
    fn image_parts_are_read_so_they_can_be_refused() {
        let req: ChatCompletionRequest = parse(json!({"model": "m", "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:"}}]}]}));
        assert_eq!(
            req.messages[0].content.as_ref().map(|c| c.text()),
            Some(Err("image_url"))
        );
    }

    #[test]
    fn chunk_omits_absent_fields() {
        let chunk = ChatCompletionChunk {
            id: "x".into(),
            object: "chat.completion.chunk".into(),
            created: 1,
            model: "m".into(),
            choices: vec![ChunkChoice {
                index: 0,
                delta: ChunkDelta {
                    content: Some("hi".into()),
                    ..ChunkDelta::default()
                },
                logprobs: None,
                finish_reason: None,
            }],
            usage: None,
        };
        assert_eq!(
            serde_json::to_value(&chunk).expect("serializes"),
            json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": null}]})
        );
    }
}
