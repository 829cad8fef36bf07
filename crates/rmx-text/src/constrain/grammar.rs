//! A [`Constraint`] as an llguidance grammar: JSON schemas as they are (with rmx's spacing),
//! the tool-call markup around a schema of the allowed calls, and a thought before the output
//! where the model thinks.

use llguidance::api::{GrammarWithLexer, TopLevelGrammar};
use llguidance::toktrie::TokTrie;
use serde_json::{json, Map, Value};

use super::{Constraint, ConstraintError, Output, Think, Tool, ToolMode};
use crate::toolcall::ToolCallFormat;

/// JSON as rmx writes it: no free whitespace (a model cannot pad an answer with newlines until
/// `max_tokens`), and the separators Python's `json.dumps` and the chat templates' `tojson`
/// print, so tool arguments look like the ones the model was trained on.
fn json_options(lenient: bool) -> Value {
    json!({
        "whitespace_flexible": false,
        "item_separator": ", ",
        "key_separator": ": ",
        "lenient": lenient,
    })
}

/// The name under which a user's own Lark grammar is referenced from the wrapper around it.
const USER_GRAMMAR: &str = "user_grammar";

/// The grammar: a `start` rule (the thought, where there is one, then `body`), the `body`
/// rule (the shape), and the rules the body uses.
pub(crate) fn build(c: &Constraint, vocab: &TokTrie) -> Result<TopLevelGrammar, ConstraintError> {
    let mut extra = Vec::new();
    let (body, defs) = match &c.output {
        Output::JsonObject => (json_rule(&json!({"type": "object"}), false)?, String::new()),
        Output::JsonSchema(s) => (json_rule(s, false)?, String::new()),
        Output::Regex(rx) => (
            format!("/{}/", llguidance::regex_to_lark(rx, "")),
            String::new(),
        ),
        Output::Choice(choices) => {
            if choices.is_empty() {
                return Err(ConstraintError::Invalid(
                    "a choice needs at least one string".into(),
                ));
            }
            let alts: Vec<String> = choices.iter().map(|s| lark_string(s)).collect();
            (alts.join(" | "), String::new())
        }
        Output::Lark(grammar) => {
            if c.think == Think::No {
                return Ok(TopLevelGrammar::from_lark(grammar.clone()));
            }
            // The user's grammar has its own `start`: it goes in as a grammar of its own.
            let mut g = GrammarWithLexer::from_lark(grammar.clone());
            g.name = Some(USER_GRAMMAR.into());
            extra.push(g);
            (format!("@{USER_GRAMMAR}"), String::new())
        }
        Output::ToolCall {
            format,
            tools,
            mode,
        } => tool_calls(*format, tools, *mode)?,
    };
    // A textual `</think>` ends the thought at its first occurrence (a lazy match); a special
    // one ends a thought of any text (text cannot spell a special token). Then the whitespace
    // models write before the answer.
    let (thought, thought_def) = if is_special(vocab, "</think>") {
        ("thought </think> /[ \\t\\r\\n]*/", "thought: /(?s:.*)/")
    } else {
        (
            "thought /[ \\t\\r\\n]*/",
            "thought[lazy]: /(?s:.*)<\\/think>/",
        )
    };
    let start = match c.think {
        Think::No => "start: body".to_string(),
        Think::Inside => format!("start: {thought} body\n{thought_def}"),
        Think::MayOpen => format!(
            "start: body | {} {thought} body\n{thought_def}",
            marker("<think>", vocab)
        ),
    };
    let mut grammar = TopLevelGrammar::from_lark(format!("{start}\nbody: {body}\n{defs}"));
    grammar.grammars.extend(extra);
    Ok(grammar)
}

/// A marker as the vocabulary has it: its special token, or its text.
fn marker(text: &str, vocab: &TokTrie) -> String {
    if is_special(vocab, text) {
        text.to_string()
    } else {
        lark_string(text)
    }
}

fn is_special(vocab: &TokTrie, name: &str) -> bool {
    vocab.get_special_token(name).is_some()
}

/// A Lark string literal (Lark reads them as JSON strings).
fn lark_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// `%json {...}` for `schema`, with rmx's JSON options unless the schema sets its own.
/// `lenient`: keywords llguidance cannot enforce are ignored (tools' parameter schemas, written
/// for documentation) rather than refused (a response format, whose caller asked for that
/// exact shape).
fn json_rule(schema: &Value, lenient: bool) -> Result<String, ConstraintError> {
    let mut schema = match schema {
        Value::Object(m) => m.clone(),
        Value::Bool(true) => Map::new(),
        Value::Bool(false) => {
            return Err(ConstraintError::Invalid(
                "the schema `false` accepts nothing".into(),
            ))
        }
        other => {
            return Err(ConstraintError::Invalid(format!(
                "a JSON schema is an object or a boolean, not {other}"
            )))
        }
    };
    schema
        .entry("x-guidance")
        .or_insert_with(|| json_options(lenient));
    Ok(format!("%json {}", Value::Object(schema)))
}

/// The allowed calls in the model's markup. A call is `{"name": ..., "arguments": ...}` (the
/// key the format uses), one alternative per tool with its parameters schema.
fn tool_calls(
    format: ToolCallFormat,
    tools: &[Tool],
    mode: ToolMode,
) -> Result<(String, String), ConstraintError> {
    if tools.is_empty() {
        return Err(ConstraintError::NoTools);
    }
    let (open, args_key, close) = match format {
        ToolCallFormat::Hermes => ("<tool_call>\n", "arguments", "\n</tool_call>"),
        ToolCallFormat::Llama3Json => ("", "parameters", ""),
        other => return Err(ConstraintError::UnsupportedFormat(other)),
    };
    let alts: Vec<Value> = tools.iter().map(|t| call_schema(t, args_key)).collect();
    let schema = match <[Value; 1]>::try_from(alts) {
        Ok([one]) => one,
        Err(alts) => json!({ "anyOf": alts }),
    };
    let json = json_rule(&schema, true)?;
    // The call after its opening marker: the arguments' JSON, then the closing marker.
    let rest = match close {
        "" => json,
        close => format!("{json} {}", lark_string(close)),
    };
    match mode {
        ToolMode::Forced if open.is_empty() => Ok((rest, String::new())),
        ToolMode::Forced => Ok((format!("{} {rest}", lark_string(open)), String::new())),
        // Text, or text with calls in it: a call starts where the text first writes the
        // opening marker (`<tool_call>`, a lazy match), and from there it must be a whole call
        // of an allowed tool; the text after the last call never writes the marker. The
        // marker is what the tool-call parser reads a call by.
        ToolMode::Auto if !open.is_empty() => {
            let marker = open.trim_end();
            let after = lark_string(&open[marker.len()..]);
            let rx = regex_literal(marker);
            Ok((
                "(call_head call)* tail".to_string(),
                format!(
                    "call_head[lazy]: /(?s:.*){rx}/\ncall: {after} {rest}\ntail: TAIL\n\
                     TAIL: /(?s:.*)/ & ~/(?s:.*){rx}(?s:.*)/"
                ),
            ))
        }
        ToolMode::Auto => Err(ConstraintError::Invalid(format!(
            "strict tool arguments with `tool_choice` `auto` need a tool-call format that opens \
             each call with a marker (hermes); `{}` does not",
            format.name()
        ))),
    }
}

/// `{"name": <the tool's name>, <args_key>: <its parameters>}`, nothing else.
fn call_schema(tool: &Tool, args_key: &str) -> Value {
    let params = tool
        .parameters
        .as_ref()
        .map(declared_parameters_only)
        .unwrap_or_else(|| json!({"type": "object"}));
    json!({
        "type": "object",
        "properties": {"name": {"const": tool.name}, args_key: params},
        "required": ["name", args_key],
        "additionalProperties": false,
    })
}

/// A tool takes the parameters it declares: where its schema lists properties and says nothing
/// of others, no others are written (JSON Schema would allow any, and a model's invented
/// argument names are no use to the caller).
fn declared_parameters_only(params: &Value) -> Value {
    let mut p = params.clone();
    if let Some(m) = p.as_object_mut() {
        let open = [
            "additionalProperties",
            "patternProperties",
            "unevaluatedProperties",
        ]
        .iter()
        .any(|k| m.contains_key(*k));
        if m.contains_key("properties") && !open {
            m.insert("additionalProperties".into(), Value::Bool(false));
        }
    }
    p
}

/// `text` as a regex matching it literally, in Lark's `/.../` syntax.
fn regex_literal(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '/' => out.push_str("\\/"),
            c if "\\.+*?()|[]{}^$#&-~".contains(c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}
