//! Gemma: no trained format, so calls follow the prompt's teaching, in one of two styles
//! Google documents: Python calls in a ```` ```tool_code ```` fence, or a bare
//! `{"name": .., "parameters": {..}}` reply (read like Llama 3's, see [`super::llama3`]).

use super::call::{parse_json_calls, ParsedBody};
use super::pycall::parse_py_calls;
use super::trigger::{Close, Trigger};

pub(crate) const TRIGGERS: &[Trigger] = &[
    Trigger {
        open: "```tool_code",
        close: Close::Tag("```"),
    },
    Trigger {
        open: "```tool_call",
        close: Close::Tag("```"),
    },
];

/// The inside of a fence: Python calls, or JSON calls when the model mixed the styles.
pub(crate) fn parse_fence(body: &str) -> Option<ParsedBody> {
    let trimmed = body.trim();
    if trimmed.starts_with('{') {
        return parse_json_calls(trimmed, false);
    }
    parse_py_calls(trimmed)
        .map(|calls| ParsedBody {
            calls,
            leftover: String::new(),
        })
        .or_else(|| parse_json_calls(trimmed, false))
}
