//! The Responses API (`/v1/responses`). Stateless: `store` is accepted and ignored,
//! `previous_response_id` refused.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::chat::Role;

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct ResponsesRequest {
    pub model: String,
    pub input: ResponsesInput,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Typed loosely: Codex also sends `local_shell`, `web_search`, custom tools; only
    /// `function` tools reach the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ResponsesTool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningOptions>,
    /// vLLM's: the thought is closed for the model after this many tokens (0: at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_token_budget: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<Map<String, Value>>,
    /// rmx's own fields: a quantized KV cache, speculative decoding.
    #[serde(flatten)]
    pub rmx: crate::extensions::RmxFields,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ResponsesInput {
    Text(String),
    Items(Vec<InputItem>),
}

impl Default for ResponsesInput {
    fn default() -> Self {
        ResponsesInput::Text(String::new())
    }
}

/// An input item. A message may come without `type` (the SDKs' "easy input message").
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum InputItem {
    Typed(TypedInputItem),
    Message(InputMessage),
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TypedInputItem {
    Message(InputMessage),
    FunctionCall {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        call_id: String,
        name: String,
        arguments: String,
    },
    FunctionCallOutput {
        call_id: String,
        output: FunctionOutput,
    },
    Reasoning {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(default)]
        summary: Vec<ReasoningText>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Vec<ReasoningText>>,
    },
    /// Codex's shell calls and other tool items this server cannot run; kept out of the
    /// prompt.
    #[serde(other)]
    Other,
}

/// A function call's output: text, or content parts.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum FunctionOutput {
    Text(String),
    Parts(Vec<Value>),
}

impl FunctionOutput {
    pub fn text(&self) -> String {
        match self {
            FunctionOutput::Text(s) => s.clone(),
            FunctionOutput::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct InputMessage {
    pub role: Role,
    pub content: InputContent,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum InputContent {
    Text(String),
    Parts(Vec<InputPart>),
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InputPart {
    InputText {
        text: String,
    },
    OutputText {
        text: String,
    },
    Refusal {
        refusal: String,
    },
    /// An image; the daemon reads an `image_url` data URI (no `file_id`), and fetches an http(s)
    /// URL only where it is allowed to (`RMX_IMAGE_URLS=1`).
    InputImage {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        image_url: Option<String>,
    },
    InputFile {},
}

impl InputContent {
    /// The text of the content, or the type of the first part that is not text.
    pub fn text(&self) -> Result<String, &'static str> {
        match self {
            InputContent::Text(s) => Ok(s.clone()),
            InputContent::Parts(parts) => {
                let mut out = String::new();
                for part in parts {
                    match part {
                        InputPart::InputText { text } | InputPart::OutputText { text } => {
                            out.push_str(text)
                        }
                        InputPart::Refusal { refusal } => out.push_str(refusal),
                        InputPart::InputImage { .. } => return Err("input_image"),
                        InputPart::InputFile {} => return Err("input_file"),
                    }
                }
                Ok(out)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ReasoningText {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponsesTool {
    Function {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parameters: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct ReasoningOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A response object, as returned whole and inside the stream's lifecycle events.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Response {
    pub id: String,
    pub object: String,
    pub created_at: u64,
    /// `in_progress`, `completed`, `incomplete`, `failed`.
    pub status: String,
    pub model: String,
    pub output: Vec<OutputItem>,
    pub usage: Option<ResponsesUsage>,
    pub error: Option<ResponseError>,
    pub incomplete_details: Option<IncompleteDetails>,
    pub parallel_tool_calls: bool,
    pub tool_choice: Value,
    pub tools: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ResponseError {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct IncompleteDetails {
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct ResponsesUsage {
    pub input_tokens: usize,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: usize,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct InputTokensDetails {
    pub cached_tokens: usize,
    /// Tokens written to a cache for later requests: OpenAI's SDK requires the field. rmx's
    /// prefix cache keeps prompts as a side effect, not as a billed write, so it says 0.
    #[serde(default)]
    pub cache_write_tokens: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct OutputTokensDetails {
    pub reasoning_tokens: usize,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    Message {
        id: String,
        status: String,
        role: String,
        content: Vec<OutputContent>,
    },
    Reasoning {
        id: String,
        summary: Vec<ReasoningText>,
        /// The reasoning itself (`reasoning_text` parts), as open-weight models show it.
        content: Vec<ReasoningText>,
    },
    FunctionCall {
        id: String,
        call_id: String,
        name: String,
        arguments: String,
        status: String,
    },
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputContent {
    OutputText {
        text: String,
        annotations: Vec<Value>,
    },
}

/// A streaming event of the Responses API; `type` names it, as in the SSE `event:` line.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type")]
pub enum ResponseStreamEvent {
    #[serde(rename = "response.created")]
    Created {
        sequence_number: u64,
        response: Response,
    },
    #[serde(rename = "response.in_progress")]
    InProgress {
        sequence_number: u64,
        response: Response,
    },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded {
        sequence_number: u64,
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.output_item.done")]
    OutputItemDone {
        sequence_number: u64,
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded {
        sequence_number: u64,
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputContent,
    },
    #[serde(rename = "response.content_part.done")]
    ContentPartDone {
        sequence_number: u64,
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputContent,
    },
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        sequence_number: u64,
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
        /// The tokens' log-probabilities (`include: ["message.output_text.logprobs"]`), which
        /// rmx does not send on Responses: always empty, but the field is required.
        #[serde(default)]
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.output_text.done")]
    OutputTextDone {
        sequence_number: u64,
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
        #[serde(default)]
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.reasoning_text.delta")]
    ReasoningTextDelta {
        sequence_number: u64,
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
    },
    #[serde(rename = "response.reasoning_text.done")]
    ReasoningTextDone {
        sequence_number: u64,
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta {
        sequence_number: u64,
        item_id: String,
        output_index: usize,
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone {
        sequence_number: u64,
        item_id: String,
        output_index: usize,
        arguments: String,
    },
    #[serde(rename = "response.completed")]
    Completed {
        sequence_number: u64,
        response: Response,
    },
    #[serde(rename = "response.incomplete")]
    Incomplete {
        sequence_number: u64,
        response: Response,
    },
    #[serde(rename = "response.failed")]
    Failed {
        sequence_number: u64,
        response: Response,
    },
}

impl ResponseStreamEvent {
    /// The event's name, for the SSE `event:` line.
    pub fn name(&self) -> &'static str {
        match self {
            ResponseStreamEvent::Created { .. } => "response.created",
            ResponseStreamEvent::InProgress { .. } => "response.in_progress",
            ResponseStreamEvent::OutputItemAdded { .. } => "response.output_item.added",
            ResponseStreamEvent::OutputItemDone { .. } => "response.output_item.done",
            ResponseStreamEvent::ContentPartAdded { .. } => "response.content_part.added",
            ResponseStreamEvent::ContentPartDone { .. } => "response.content_part.done",
            ResponseStreamEvent::OutputTextDelta { .. } => "response.output_text.delta",
            ResponseStreamEvent::OutputTextDone { .. } => "response.output_text.done",
            ResponseStreamEvent::ReasoningTextDelta { .. } => "response.reasoning_text.delta",
            ResponseStreamEvent::ReasoningTextDone { .. } => "response.reasoning_text.done",
            ResponseStreamEvent::FunctionCallArgumentsDelta { .. } => {
                "response.function_call_arguments.delta"
            }
            ResponseStreamEvent::FunctionCallArgumentsDone { .. } => {
                "response.function_call_arguments.done"
            }
            ResponseStreamEvent::Completed { .. } => "response.completed",
            ResponseStreamEvent::Incomplete { .. } => "response.incomplete",
            ResponseStreamEvent::Failed { .. } => "response.failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse<T: for<'de> Deserialize<'de>>(v: Value) -> T {
        serde_json::from_value(v).expect("parses")
    }

    #[test]
    fn responses_input_items_as_codex_sends_them() {
        let req: ResponsesRequest = parse(json!({
            "model": "m",
            "instructions": "you are codex",
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "env"}]},
                {"role": "user", "content": "hi"},
                {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}], "encrypted_content": null},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": "{\"cmd\":[\"ls\"]}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
                {"type": "local_shell_call", "call_id": "x", "action": {}}
            ],
            "tools": [
                {"type": "function", "name": "shell", "parameters": {"type": "object"}, "strict": false},
                {"type": "web_search"}
            ],
            "tool_choice": "auto", "stream": true, "store": false,
            "reasoning": {"effort": "medium", "summary": "auto"},
            "include": ["reasoning.encrypted_content"]
        }));
        let ResponsesInput::Items(items) = &req.input else {
            panic!("items")
        };
        assert_eq!(items.len(), 6);
        assert!(matches!(&items[1], InputItem::Message(m) if m.role == Role::User));
        assert!(
            matches!(&items[4], InputItem::Typed(TypedInputItem::FunctionCallOutput { call_id, .. }) if call_id == "call_1")
        );
        assert!(matches!(&items[5], InputItem::Typed(TypedInputItem::Other)));
        assert!(matches!(
            req.tools.as_deref(),
            Some([ResponsesTool::Function { .. }, ResponsesTool::Other])
        ));
    }

    #[test]
    fn stream_event_names_match_their_type_field() {
        let ev = ResponseStreamEvent::OutputTextDelta {
            sequence_number: 3,
            item_id: "msg".into(),
            output_index: 0,
            content_index: 0,
            delta: "hi".into(),
            logprobs: Vec::new(),
        };
        let v = serde_json::to_value(&ev).expect("serializes");
        assert_eq!(v["type"], ev.name());
        assert_eq!(v["delta"], "hi");
    }
}
