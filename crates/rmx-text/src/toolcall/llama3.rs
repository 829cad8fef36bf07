//! Llama 3.x JSON calls: `{"name": .., "parameters": {..}}`, several separated by `;`, either
//! as the whole reply or after `<|python_tag|>` (which 3.1 also uses for its built-in tools,
//! written as Python: `brave_search.call(query="...")`).

use super::call::{parse_json_calls, ParsedBody};
use super::lenient_json::ValueScan;
use super::pycall::parse_py_calls;
use super::scan::BodyScan;
use super::trigger::{Close, Trigger};

pub(crate) const TRIGGERS: &[Trigger] = &[Trigger {
    open: "<|python_tag|>",
    close: Close::SelfDelimited,
}];

/// Where a run of JSON values separated by `;` ends: at the first thing after a complete value
/// that is neither whitespace, `;` nor another value. None while that cannot be known yet, and
/// for a body that is not JSON (a Python call runs to the end of the reply).
pub(crate) fn json_run_end(body: &str, scan: &mut BodyScan) -> Option<usize> {
    loop {
        if let Some(value) = &mut scan.value {
            let end = value.end(body)?;
            scan.value = None;
            scan.last_end = Some(end);
            scan.pos = end;
        }
        let rest = &body[scan.pos..];
        let at = scan.pos + (rest.len() - rest.trim_start().len());
        match body[at..].chars().next()? {
            '{' | '[' => scan.value = Some(ValueScan::new(body, at)),
            ';' if scan.last_end.is_some() => {
                scan.last_end = Some(at + 1);
                scan.pos = at + 1;
            }
            _ => return scan.last_end,
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
