//! Gemma 4: `<|tool_call>call:name{key:value,...}<tool_call|>`, as its chat template teaches
//! and mlx-lm's `gemma4` tool parser reads: keys are bare, strings are delimited by `<|"|>`
//! (so braces and quotes inside them are plain text), other values are JSON. A block may hold
//! several calls.

use super::call::{ParsedBody, RawCall};
use super::lenient_json::parse_whole;
use super::trigger::{Close, Trigger};

pub(crate) const TRIGGERS: &[Trigger] = &[Trigger {
    open: "<|tool_call>",
    close: Close::Tag("<tool_call|>"),
}];

/// Gemma 4's string delimiter.
const QUOTE: &str = "<|\"|>";

/// The calls in a block's text; None when it holds none.
pub(crate) fn parse_body(body: &str) -> Option<ParsedBody> {
    let mut calls = Vec::new();
    let mut leftover = String::new();
    let mut rest = body;
    while let Some(at) = rest.find("call:") {
        leftover.push_str(&rest[..at]);
        let after = &rest[at + "call:".len()..];
        let name_len = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '.'))
            .unwrap_or(after.len());
        let (name, args) = after.split_at(name_len);
        let Some(end) = args.starts_with('{').then(|| balanced_end(args)).flatten() else {
            leftover.push_str(&rest[at..]);
            rest = "";
            break;
        };
        let json = args_to_json(&args[..end]);
        match parse_whole(&json) {
            Some(v) if !name.is_empty() => calls.push(RawCall {
                name: name.to_string(),
                arguments: v.to_json(),
            }),
            _ => leftover.push_str(&rest[at..at + "call:".len() + name_len + end]),
        }
        rest = &args[end..];
    }
    leftover.push_str(rest);
    if calls.is_empty() {
        return None;
    }
    Some(ParsedBody {
        calls,
        leftover: leftover.trim().to_string(),
    })
}

/// The length of the `{...}` group `s` starts with, braces inside `<|"|>` strings ignored;
/// None when it does not close.
fn balanced_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        if let Some(inner) = rest.strip_prefix(QUOTE) {
            i += 2 * QUOTE.len() + inner.find(QUOTE)?;
            continue;
        }
        let c = rest.chars().next()?;
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += c.len_utf8();
    }
    None
}

/// `{key:<|"|>text<|"|>,n:3}` as JSON: strings quoted and escaped, bare keys (after `{` or
/// `,`) quoted; everything else as written.
fn args_to_json(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    let mut i = 0;
    let mut after_open = false;
    while i < s.len() {
        let rest = &s[i..];
        if let Some(inner) = rest.strip_prefix(QUOTE) {
            let len = inner.find(QUOTE).unwrap_or(inner.len());
            out.push_str(&serde_json::Value::from(&inner[..len]).to_string());
            i += QUOTE.len() + len + QUOTE.len().min(inner.len() - len);
            after_open = false;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if after_open && (c.is_alphanumeric() || c == '_') {
            let key_len = rest
                .find(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
                .unwrap_or(rest.len());
            if rest[key_len..].starts_with(':') {
                out.push('"');
                out.push_str(&rest[..key_len]);
                out.push_str("\":");
                i += key_len + 1;
                after_open = false;
                continue;
            }
        }
        out.push(c);
        if matches!(c, '{' | ',') {
            after_open = true;
        } else if !c.is_whitespace() {
            after_open = false;
        }
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(body: &str) -> (String, String) {
        let p = parse_body(body).expect("a call");
        assert_eq!(p.calls.len(), 1, "{p:?}");
        (p.calls[0].name.clone(), p.calls[0].arguments.clone())
    }

    #[test]
    fn strings_keys_and_json_values() {
        let (name, args) =
            one(r#"call:get_weather{city:<|"|>Paris, "FR" {x}<|"|>,days:3,metric:true}"#);
        assert_eq!(name, "get_weather");
        let v: serde_json::Value = serde_json::from_str(&args).unwrap();
        assert_eq!(v["city"], "Paris, \"FR\" {x}");
        assert_eq!(v["days"], 3);
        assert_eq!(v["metric"], true);
    }

    #[test]
    fn nested_objects_and_lists() {
        let (_, args) = one(r#"call:plan{steps:[<|"|>a<|"|>,<|"|>b<|"|>],opts:{deep:{n:1}}}"#);
        let v: serde_json::Value = serde_json::from_str(&args).unwrap();
        assert_eq!(v["steps"], serde_json::json!(["a", "b"]));
        assert_eq!(v["opts"]["deep"]["n"], 1);
    }

    #[test]
    fn empty_arguments_and_several_calls() {
        let p = parse_body("call:pwd{}call:ls{path:<|\"|>/tmp<|\"|>}").unwrap();
        assert_eq!(p.calls.len(), 2);
        assert_eq!(p.calls[0].arguments, "{}");
        assert_eq!(p.calls[1].name, "ls");
    }

    #[test]
    fn text_that_is_no_call_is_kept() {
        assert!(parse_body("no call here").is_none());
        let p = parse_body("call:f{a:1} trailing").unwrap();
        assert_eq!(p.leftover, "trailing");
        let unclosed = parse_body("call:f{a:1");
        assert!(unclosed.is_none());
    }
}
