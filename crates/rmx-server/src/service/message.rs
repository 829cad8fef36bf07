//! A chat message as chat templates read it. Hugging Face templates are written for OpenAI's
//! shape (`role`, `content`, `tool_calls` with object arguments, `tool_call_id`), so every
//! surface translates its own turns into [`TemplateMessage`]s, and the core hands them to the
//! template as they serialize: an absent field is absent, never null, since templates test
//! `message.reasoning_content is defined`.

use serde::{Serialize, Serializer};
use serde_json::Value;

/// Who speaks. Roles the templates know are variants; any other a client sends (Ollama passes
/// roles through) is kept as given, for the template to accept or refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
    Other(String),
}

impl Role {
    pub fn parse(role: &str) -> Role {
        match role {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => Role::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Other(r) => r,
        }
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemplateMessage {
    pub role: Role,
    /// The text (surfaces refuse content they cannot turn into text, like images).
    pub content: String,
    /// The turn's thinking, under the name Qwen's and DeepSeek's templates read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// The calls an assistant turn made.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<TemplateToolCall>,
    /// A `tool` message: the call it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// A `tool` message: the tool that answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl TemplateMessage {
    pub fn new(role: Role, content: impl Into<String>) -> TemplateMessage {
        TemplateMessage {
            role,
            content: content.into(),
            reasoning_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }
}

/// A call in an assistant turn: `{"id", "type": "function", "function": {"name", "arguments"}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemplateToolCall {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type")]
    kind: &'static str,
    pub function: CalledFunction,
}

impl TemplateToolCall {
    /// `arguments` as an object: templates `tojson` them, and a string would be quoted twice.
    pub fn function(
        id: Option<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> TemplateToolCall {
        TemplateToolCall {
            id,
            kind: "function",
            function: CalledFunction {
                name: name.into(),
                arguments,
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalledFunction {
    pub name: String,
    pub arguments: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_as_templates_read_it_absent_fields_absent() {
        let mut m = TemplateMessage::new(Role::Assistant, "");
        m.tool_calls.push(TemplateToolCall::function(
            Some("c1".into()),
            "f",
            json!({"a": 1}),
        ));
        assert_eq!(
            serde_json::to_value(&m).ok(),
            Some(json!({"role": "assistant", "content": "",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}))
        );
        let other = TemplateMessage::new(Role::parse("ipython"), "x");
        assert_eq!(
            serde_json::to_value(&other).ok(),
            Some(json!({"role": "ipython", "content": "x"}))
        );
    }
}
