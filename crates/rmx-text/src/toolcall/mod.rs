//! Tool calls in model output, for the formats local models write.
//!
//! Each family was trained on its own syntax ([`ToolCallFormat`]); the parser for a model's
//! format turns its raw output into content and structured calls, as the OpenAI, Anthropic and
//! Ollama APIs return them. Streaming and whole-text parsing share one machine
//! ([`ToolCallParser`]), so they agree on every output however it was split.
//!
//! Small models write imperfect calls, and an agent loses a turn on each call it does not
//! get, so reading is lenient: broken JSON is repaired, a missing closing tag is forgiven.
//! What still cannot be read is returned as content, never dropped.

mod call;
mod format;
mod gemma;
mod gemma4;
mod hermes;
mod ids;
mod lenient_json;
mod llama3;
mod mistral;
mod parser;
mod pycall;
mod qwen3_coder;
pub(crate) mod scan;
mod schema;
mod trigger;

pub use format::ToolCallFormat;
pub use ids::{random_call_id, random_ids, sequential_ids, IdGenerator};
pub use parser::ToolCallParser;
pub use schema::ToolSchemas;

/// What the parser tells as output streams in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolCallEvent {
    /// Text for the user; never holds tool-call markup of a call that was read.
    Content(String),
    /// A call begins; `index` counts calls in this output from 0.
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// A piece of the call's arguments, JSON text; the pieces of one call concatenate to it.
    ToolCallArgsDelta {
        index: usize,
        delta: String,
    },
    ToolCallEnd {
        index: usize,
    },
}

/// A complete call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// JSON text, normally an object.
    pub arguments: String,
}

/// Folds events into the content and calls they describe.
pub fn collect_events<'e>(
    events: impl IntoIterator<Item = &'e ToolCallEvent>,
) -> (String, Vec<ToolCall>) {
    let mut content = String::new();
    let mut calls: Vec<(usize, ToolCall)> = Vec::new();
    for event in events {
        match event {
            ToolCallEvent::Content(text) => content.push_str(text),
            ToolCallEvent::ToolCallStart { index, id, name } => calls.push((
                *index,
                ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: String::new(),
                },
            )),
            ToolCallEvent::ToolCallArgsDelta { index, delta } => {
                if let Some((_, call)) = calls.iter_mut().rev().find(|(i, _)| i == index) {
                    call.arguments.push_str(delta);
                }
            }
            ToolCallEvent::ToolCallEnd { .. } => {}
        }
    }
    (content, calls.into_iter().map(|(_, call)| call).collect())
}

impl ToolCallParser {
    /// The content and calls of a whole output.
    pub fn parse_complete(&mut self, text: &str) -> (String, Vec<ToolCall>) {
        let mut events = self.feed(text);
        events.extend(self.finish());
        collect_events(&events)
    }
}

/// The content and calls of a whole output, with random ids and no tool schemas.
pub fn parse_complete(format: ToolCallFormat, text: &str) -> (String, Vec<ToolCall>) {
    ToolCallParser::new(format).parse_complete(text)
}
