//! Llama 3.x JSON calls: `{"name": .., "parameters": {..}}`, several separated by `;`, either
//! as the whole reply or after `<|python_tag|>` (which 3.1 also uses for its built-in tools,
//! written as Python: `brave_search.call(query="...")`).

use super::call::{parse_json_calls, ParsedBody};
use super::format::{Close, Trigger};
use super::lenient_json::value_end;
use super::pycall::parse_py_calls;

pub(crate) const TRIGGERS: &[Trigger] = &[Trigger {
    open: "<|python_tag|>",
    close: Close::SelfDelimited,
}];

/// Where a run of JSON values separated by `;` ends: at the first thing after a complete value
/// that is neither whitespace, `;` nor another value. None while that cannot be known yet, and
/// for a body that is not JSON (a Python call runs to the end of the reply).
pub(crate) fn json_run_end(body: &str) -> Option<usize> {
    let mut pos = 0;
    let mut last_end = None;
    loop {
        let at = pos + (body[pos..].len() - body[pos..].trim_start().len());
        let next = body[at..].chars().next()?;
        match next {
            '{' | '[' => {
                let end = value_end(body, at)?;
                last_end = Some(end);
                pos = end;
            }
            ';' if last_end.is_some() => {
                last_end = Some(at + 1);
                pos = at + 1;
            }
            _ => return last_end,
        }
    }
}

/// `bare`: the JSON was not behind `<|python_tag|>`, so an object must look like a call
/// (name and parameters) before it is taken for one.
pub(crate) fn parse_body(body: &str, bare: bool) -> Option<ParsedBody> {
    parse_json_calls(body, bare).or_else(|| {
        if bare {
            return None;
        }
        parse_py_calls(body).map(|calls| ParsedBody {
            calls,
            leftover: String::new(),
        })
    })
}
