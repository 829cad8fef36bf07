//! Hermes: `<tool_call>{"name": .., "arguments": {..}}</tool_call>`, as Qwen2.5 and Qwen3 write
//! it (with newlines inside the tags), one block per call.

use super::call::{parse_json_calls, ParsedBody};
use super::qwen3_coder;
use super::schema::ToolSchemas;
use super::trigger::{Close, Trigger};

pub(crate) const TRIGGERS: &[Trigger] = &[Trigger {
    open: "<tool_call>",
    close: Close::Tag("</tool_call>"),
}];

/// The inside of a `<tool_call>` block. Qwen models fine-tuned on the other Qwen format now
/// and then write its XML inside Hermes tags (and the reverse), so each format reads both.
pub(crate) fn parse_block(body: &str, tools: &ToolSchemas) -> Option<ParsedBody> {
    parse_json_calls(body, false).or_else(|| qwen3_coder::parse_functions(body, tools))
}
