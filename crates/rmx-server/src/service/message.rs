//! A chat message as chat templates read it. Hugging Face templates are written for OpenAI's
//! shape (`role`, `content`, `tool_calls` with object arguments, `tool_call_id`), so every
//! surface translates its own turns into [`TemplateMessage`]s, and the core hands them to the
//! template as they serialize: an absent field is absent, never null, since templates test
//! `message.reasoning_content is defined`.

use std::sync::Arc;

use serde::{Serialize, Serializer};
use serde_json::{json, Value};

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
    /// The text (for a message with images, its text parts joined).
    pub content: String,
    /// A message with images: its content in order, text and images. The template then reads
    /// `content` as a list of `{"type": "text", "text"}` and `{"type": "image"}` parts (as
    /// Gemma 3's does); empty for a text-only message.
    #[serde(skip)]
    pub parts: Vec<ContentPart>,
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
            parts: Vec::new(),
            reasoning_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }
}

/// A part of a message with images.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentPart {
    Text(String),
    /// The image file's bytes as the client sent them (PNG, JPEG, WebP or GIF), decoded and
    /// checked by the model's image processor when the prompt is built.
    Image(Arc<Vec<u8>>),
}

impl TemplateMessage {
    /// A message of these parts; `content` is their text joined.
    pub fn with_parts(role: Role, parts: Vec<ContentPart>) -> TemplateMessage {
        let text: String = parts
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text(t) => Some(t.as_str()),
                ContentPart::Image(_) => None,
            })
            .collect();
        let mut m = TemplateMessage::new(role, text);
        if parts.iter().any(|p| matches!(p, ContentPart::Image(_))) {
            m.parts = parts;
        }
        m
    }

    /// The images' bytes, in order.
    pub fn images(&self) -> impl Iterator<Item = &Arc<Vec<u8>>> {
        self.parts.iter().filter_map(|p| match p {
            ContentPart::Image(bytes) => Some(bytes),
            ContentPart::Text(_) => None,
        })
    }

    /// The message as the template reads it: `content` a list of parts where it has images.
    pub fn template_value(&self) -> Result<Value, serde_json::Error> {
        let mut v = serde_json::to_value(self)?;
        if !self.parts.is_empty() {
            let parts: Vec<Value> = self
                .parts
                .iter()
                .map(|p| match p {
                    ContentPart::Text(t) => json!({"type": "text", "text": t}),
                    ContentPart::Image(_) => json!({"type": "image"}),
                })
                .collect();
            v["content"] = Value::Array(parts);
        }
        Ok(v)
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

    #[test]
    fn a_message_with_images_reads_as_parts_in_order() {
        let img = ContentPart::Image(Arc::new(vec![1, 2]));
        let m = TemplateMessage::with_parts(
            Role::User,
            vec![
                ContentPart::Text("a ".into()),
                img.clone(),
                ContentPart::Text("b".into()),
            ],
        );
        assert_eq!(m.content, "a b");
        assert_eq!(m.images().count(), 1);
        assert_eq!(
            m.template_value().ok(),
            Some(
                json!({"role": "user", "content": [{"type": "text", "text": "a "},
                {"type": "image"}, {"type": "text", "text": "b"}]})
            )
        );
        let text = TemplateMessage::with_parts(Role::User, vec![ContentPart::Text("t".into())]);
        assert!(text.parts.is_empty());
        assert_eq!(
            text.template_value().ok(),
            Some(json!({"role": "user", "content": "t"}))
        );
    }
}
