//! Qwen3-Coder: XML-ish calls whose parameter values are bare text,
//!
//! ```text
//! <tool_call>
//! <function=get_weather>
//! <parameter=city>
//! Paris
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! Values become JSON by the tool's schema ([`ToolSchemas::typed_value`]). Missing
//! `</parameter>` / `</function>` tags are tolerated: the next tag or the end closes them.

use super::call::{parse_json_calls, ParsedBody, RawCall};
use super::lenient_json::J;
use super::schema::ToolSchemas;
use super::trigger::{Close, Trigger};

const FUNCTION: &str = "<function=";
const FUNCTION_END: &str = "</function>";
const PARAMETER: &str = "<parameter=";
const PARAMETER_END: &str = "</parameter>";

pub(crate) const TRIGGERS: &[Trigger] = &[
    Trigger {
        open: "<tool_call>",
        close: Close::Tag("</tool_call>"),
    },
    // The model sometimes drops the outer tags and writes the function element alone.
    Trigger {
        open: FUNCTION,
        close: Close::Tag(FUNCTION_END),
    },
];

pub(crate) fn parse_body(trigger: usize, body: &str, tools: &ToolSchemas) -> Option<ParsedBody> {
    if trigger == 1 {
        return parse_functions(&format!("{FUNCTION}{body}{FUNCTION_END}"), tools);
    }
    parse_functions(body, tools).or_else(|| parse_json_calls(body, false))
}

/// Every `<function=..>` element in `body`; text outside them is leftover.
pub(crate) fn parse_functions(body: &str, tools: &ToolSchemas) -> Option<ParsedBody> {
    let mut calls = Vec::new();
    let mut leftover = String::new();
    let mut rest = body;
    while let Some(start) = rest.find(FUNCTION) {
        leftover.push_str(&rest[..start]);
        let after = &rest[start + FUNCTION.len()..];
        let name_end = after
            .find('>')
            .filter(|&i| !after[..i].contains(['<', '\n']));
        let Some(name_end) = name_end.filter(|&i| !after[..i].trim().is_empty()) else {
            // Not a function element after all; keep it as text and look further on.
            leftover.push_str(FUNCTION);
            rest = after;
            continue;
        };
        let name = after[..name_end].trim();
        let inner_all = &after[name_end + 1..];
        let (inner, next) = match first_of(inner_all, &[FUNCTION_END, FUNCTION]) {
            Some((i, FUNCTION_END)) => (&inner_all[..i], &inner_all[i + FUNCTION_END.len()..]),
            Some((i, _)) => (&inner_all[..i], &inner_all[i..]),
            None => (inner_all, ""),
        };
        calls.push(RawCall {
            name: name.to_string(),
            arguments: J::Obj(parameters(name, inner, tools)).to_json(),
        });
        rest = next;
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

fn parameters(tool: &str, inner: &str, tools: &ToolSchemas) -> Vec<(String, J)> {
    let mut params = Vec::new();
    let mut rest = inner;
    while let Some(start) = rest.find(PARAMETER) {
        let after = &rest[start + PARAMETER.len()..];
        let Some(name_end) = after.find('>') else {
            break;
        };
        let name = after[..name_end].trim().to_string();
        let value_all = &after[name_end + 1..];
        let (value, next) = match first_of(value_all, &[PARAMETER_END, PARAMETER]) {
            Some((i, PARAMETER_END)) => (&value_all[..i], &value_all[i + PARAMETER_END.len()..]),
            Some((i, _)) => (&value_all[..i], &value_all[i..]),
            None => (value_all, ""),
        };
        // The template (and so the model) puts the value on its own lines.
        let value = value.strip_prefix('\n').unwrap_or(value);
        let value = value.strip_suffix('\n').unwrap_or(value);
        params.push((name.clone(), tools.typed_value(tool, &name, value)));
        rest = next;
    }
    params
}

/// The earliest of `needles` in `hay`, with its position.
fn first_of<'n>(hay: &str, needles: &[&'n str]) -> Option<(usize, &'n str)> {
    needles
        .iter()
        .filter_map(|n| hay.find(n).map(|i| (i, *n)))
        .min_by_key(|(i, _)| *i)
}
