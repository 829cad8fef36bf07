//! What a call body turns into, and the JSON call shapes every format shares.

use super::lenient_json::{parse_prefix, parse_whole, J};

/// A call read from a body, before it gets an id and an index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawCall {
    pub name: String,
    /// JSON text, normally an object.
    pub arguments: String,
}

/// The calls found in one body, and text in it that belongs to no call (kept as content so
/// that nothing the model wrote is lost).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ParsedBody {
    pub calls: Vec<RawCall>,
    pub leftover: String,
}

/// Arguments as JSON text. Models sometimes give them as a JSON *string* holding the object
/// (OpenAI's own wire shape leaking into the output); that string is unwrapped. A string that
/// holds no JSON object is passed on as written: it is what the model meant as arguments.
pub(crate) fn arguments_text(args: Option<&J>) -> String {
    match args {
        None | Some(J::Null) => "{}".to_string(),
        Some(J::Str(s)) if s.trim().is_empty() => "{}".to_string(),
        Some(J::Str(s)) => match parse_whole(s) {
            Some(v @ (J::Obj(_) | J::Arr(_))) => v.to_json(),
            _ => s.clone(),
        },
        Some(v) => v.to_json(),
    }
}

/// A call from a JSON object: `{"name": .., "arguments"|"parameters": ..}`, or OpenAI's
/// `{"type": "function", "function": {..}}`. `require_args` is for JSON that was not inside a
/// tool-call marker: an object with only a `name` is then more likely an answer than a call.
pub(crate) fn call_from_json(v: &J, require_args: bool) -> Option<RawCall> {
    if let Some(inner @ J::Obj(_)) = v.get("function") {
        if inner.get("name").is_some() {
            return call_from_json(inner, require_args);
        }
    }
    let name = v.get("name")?.as_str()?.trim();
    if name.is_empty() {
        return None;
    }
    let args = v.get("arguments").or_else(|| v.get("parameters"));
    if require_args && args.is_none() {
        return None;
    }
    Some(RawCall {
        name: name.to_string(),
        arguments: arguments_text(args),
    })
}

/// Calls from one JSON value: an object, or an array of them (all must be calls).
pub(crate) fn calls_from_value(v: &J, require_args: bool) -> Option<Vec<RawCall>> {
    match v {
        J::Arr(items) if !items.is_empty() => items
            .iter()
            .map(|item| call_from_json(item, require_args))
            .collect(),
        J::Obj(_) => call_from_json(v, require_args).map(|c| vec![c]),
        _ => None,
    }
}

/// Calls from a run of JSON values separated by whitespace, `;` or `,` (Hermes bodies with
/// several objects, Llama 3's `{..}; {..}`). Text after the last call is leftover; None when
/// the first value is not a call.
pub(crate) fn parse_json_calls(src: &str, require_args: bool) -> Option<ParsedBody> {
    let mut calls = Vec::new();
    let mut pos = 0;
    loop {
        let rest = &src[pos..];
        let skipped = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_whitespace() || c == ';' || c == ',')
                .len();
        let at = pos + skipped;
        if !src[at..].starts_with(['{', '[']) {
            break;
        }
        let Some((value, used)) = parse_prefix(&src[at..]) else {
            break;
        };
        let Some(found) = calls_from_value(&value, require_args) else {
            break;
        };
        calls.extend(found);
        pos = at + used;
    }
    if calls.is_empty() {
        return None;
    }
    Some(ParsedBody {
        calls,
        leftover: src[pos..].trim().to_string(),
    })
}
