//! Parameter types from the request's tool definitions.
//!
//! Qwen3-Coder writes every parameter value as bare text, so `5` could be the number or the
//! string "5". Only the tool's JSON schema can tell, which is why the parser takes the tools.

use std::collections::HashMap;

use serde_json::Value;

use super::lenient_json::{parse_whole, J};

/// Declared JSON-schema types per tool and parameter.
#[derive(Debug, Clone, Default)]
pub struct ToolSchemas {
    types: HashMap<String, HashMap<String, Vec<String>>>,
}

impl ToolSchemas {
    /// Reads tool definitions as requests carry them: OpenAI's
    /// `{"type": "function", "function": {"name", "parameters"}}`, a bare
    /// `{"name", "parameters"}`, or Anthropic's `{"name", "input_schema"}`. Entries of other
    /// shapes are skipped: a tool without a schema just gets string parameters.
    pub fn from_tools(tools: &[Value]) -> Self {
        let mut types = HashMap::new();
        for tool in tools {
            let def = tool.get("function").unwrap_or(tool);
            let Some(name) = def.get("name").and_then(Value::as_str) else {
                continue;
            };
            let schema = def.get("parameters").or_else(|| def.get("input_schema"));
            let Some(props) = schema
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object)
            else {
                continue;
            };
            let params = props
                .iter()
                .map(|(p, s)| (p.clone(), declared_types(s)))
                .collect();
            types.insert(name.to_string(), params);
        }
        ToolSchemas { types }
    }

    fn types_of(&self, tool: &str, param: &str) -> &[String] {
        self.types
            .get(tool)
            .and_then(|params| params.get(param))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The value of `param` of `tool`, written as bare text: a string unless the schema
    /// declares a non-string type and the text reads as a value (JSON, or Python literals such
    /// as `True`). With no schema for it, it stays a string.
    pub(crate) fn typed_value(&self, tool: &str, param: &str, text: &str) -> J {
        let types = self.types_of(tool, param);
        if !types.iter().any(|t| t != "string") {
            return J::Str(text.to_string());
        }
        match parse_whole(text) {
            Some(v) if fits(&v, types) => v,
            _ => J::Str(text.to_string()),
        }
    }
}

/// `"type": "integer"`, `"type": ["string", "null"]`, or the types under `anyOf`/`oneOf`.
fn declared_types(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match schema.get("type") {
        Some(Value::String(t)) => out.push(t.clone()),
        Some(Value::Array(ts)) => out.extend(ts.iter().filter_map(Value::as_str).map(String::from)),
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = schema.get(key) {
            for alt in alts {
                out.extend(declared_types(alt));
            }
        }
    }
    out
}

/// Whether a value read from text is of one of the declared types; when it is not (the
/// schema says integer, the text says `"abc"`) the text is kept as a string.
fn fits(v: &J, types: &[String]) -> bool {
    types.iter().any(|t| {
        matches!(
            (t.as_str(), v),
            ("integer" | "number", J::Num(_))
                | ("boolean", J::Bool(_))
                | ("object", J::Obj(_))
                | ("array", J::Arr(_))
                | ("null", J::Null)
                | ("string", J::Str(_))
        )
    })
}
