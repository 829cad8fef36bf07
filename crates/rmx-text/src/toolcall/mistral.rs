//! Mistral: `[TOOL_CALLS]` followed by a JSON array of calls (v0.3 models:
//! `[TOOL_CALLS] [{"name": .., "arguments": {..}}]`), or by `name[ARGS]{..}` (newer models,
//! one `[TOOL_CALLS]` per call, sometimes with `[CALL_ID]id` before `[ARGS]`).

use super::call::{arguments_text, parse_json_calls, ParsedBody, RawCall};
use super::lenient_json::{parse_prefix, ValueScan};
use super::scan::BodyScan;
use super::trigger::{Close, Trigger};

const ARGS: &str = "[ARGS]";
const CALL_ID: &str = "[CALL_ID]";

pub(crate) const TRIGGERS: &[Trigger] = &[Trigger {
    open: "[TOOL_CALLS]",
    close: Close::SelfDelimited,
}];

/// Characters of a tool name, and of the `[CALL_ID]..`/`[ARGS]` markers that follow it.
fn name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '[' | ']')
}

/// Where the call after `[TOOL_CALLS]` ends: at the end of its JSON. A name that runs into
/// something no name holds ends the body there, so that it is kept as text.
pub(crate) fn body_end(body: &str, scan: &mut BodyScan) -> Option<usize> {
    if let Some(value) = &mut scan.value {
        return value.end(body);
    }
    let mut value_end = |body: &str, at: usize| {
        let value = scan.value.insert(ValueScan::new(body, at));
        value.end(body)
    };
    let at = body.len() - body.trim_start().len();
    let first = body[at..].chars().next()?;
    if first == '[' && !body[at..].starts_with(ARGS) && !ARGS.starts_with(&body[at..]) {
        // A JSON array of calls (a lone `[` could still become `[ARGS]`: the name path waits).
        return value_end(body, at);
    }
    if first == '{' {
        return value_end(body, at);
    }
    // `[ARGS]` counts only after a run of name characters: one further on belongs to a later
    // call (streamed, the body would have ended at the first character no name holds).
    let bad = body[at..].find(|c: char| !name_char(c)).map(|i| at + i);
    let args_at = match body[at..].find(ARGS).map(|i| at + i) {
        Some(i) if bad.is_none_or(|b| i < b) => i + ARGS.len(),
        _ => {
            // No `[ARGS]` yet: wait while this can still be a name, accept `name{..}`.
            let bad = bad?;
            if body[bad..].starts_with('{') && bad > at {
                return value_end(body, bad);
            }
            return Some(bad);
        }
    };
    let v = args_at + (body[args_at..].len() - body[args_at..].trim_start().len());
    match body[v..].chars().next()? {
        '{' | '[' | '"' | '\'' => value_end(body, v),
        _ => Some(v),
    }
}

pub(crate) fn parse_body(body: &str) -> Option<ParsedBody> {
    let trimmed = body.trim_start();
    if trimmed.starts_with(['[', '{']) && !trimmed.starts_with(ARGS) {
        return parse_json_calls(trimmed, false);
    }
    let (name_part, args_text) = match trimmed.find(ARGS) {
        Some(i) => (&trimmed[..i], &trimmed[i + ARGS.len()..]),
        None => {
            let i = trimmed.find('{')?;
            (&trimmed[..i], &trimmed[i..])
        }
    };
    let name = match name_part.find(CALL_ID) {
        Some(i) => &name_part[..i],
        None => name_part,
    };
    if name.is_empty() || !name.chars().all(|c| name_char(c) && c != '[' && c != ']') {
        return None;
    }
    let (args, used) = match parse_prefix(args_text) {
        Some((v, used)) => (arguments_text(Some(&v)), used),
        // Cut off right after `[ARGS]`: the call is still worth returning.
        None if args_text.trim().is_empty() => ("{}".to_string(), args_text.len()),
        None => return None,
    };
    Some(ParsedBody {
        calls: vec![RawCall {
            name: name.to_string(),
            arguments: args,
        }],
        leftover: args_text[used..].trim().to_string(),
    })
}
