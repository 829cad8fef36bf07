//! A JSON schema as grammar parts, for `response_format: json_schema` and Ollama's schema
//! `format`: the common subset of what structured-output schemas say, enforced; the rest left
//! to any JSON value.
//!
//! Enforced: an object's `properties`, every one of them written in the schema's order (so
//! every `required` key is there), with fixed `, ` and `: ` between them; property types
//! `string`, `number`, `integer`, `boolean`, `null`, `array` (items not checked) and `object`
//! (recursively); `enum` and `const`. Not enforced (any JSON value there): `anyOf`/`oneOf`,
//! `$ref`, type lists, array `items`, string formats and patterns, numeric ranges.

use serde_json::Value;

use super::grammar::Part;
use super::json::Top;

/// Grammars stay this deep, and within the part index's range.
const MAX_NESTING: usize = 8;
const MAX_PARTS: usize = 255;

/// The parts for a top-level object of this schema; a schema that says nothing this module
/// can enforce (or is too big for it) is any JSON object.
pub(crate) fn object_parts(schema: &Value) -> Vec<Part> {
    let mut parts = Vec::new();
    if has_properties(schema) {
        value(schema, &mut parts, 0);
    }
    if parts.is_empty() || parts.len() > MAX_PARTS {
        return vec![Part::Json(Top::Object)];
    }
    parts
}

fn has_properties(schema: &Value) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty())
        && schema.get("type").is_none_or(|t| t == "object")
}

fn literal(out: &mut Vec<Part>, text: &str) {
    if let Some(Part::Literal(last)) = out.last_mut() {
        last.extend_from_slice(text.as_bytes());
    } else {
        out.push(Part::Literal(text.as_bytes().to_vec()));
    }
}

fn value(schema: &Value, out: &mut Vec<Part>, depth: usize) {
    if let Some(c) = schema.get("const") {
        return literal(out, &c.to_string());
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let mut alts: Vec<Vec<u8>> = values.iter().map(|v| v.to_string().into_bytes()).collect();
        alts.sort();
        alts.dedup();
        // A `OneOf` must know where each alternative ends: none may begin another.
        let prefix_free = alts.windows(2).all(|w| !w[1].starts_with(&w[0]));
        if prefix_free && !alts.is_empty() {
            out.push(Part::OneOf(alts));
        } else {
            out.push(Part::Json(Top::Any));
        }
        return;
    }
    if has_properties(schema) && depth < MAX_NESTING {
        let props = schema["properties"].as_object().into_iter().flatten();
        literal(out, "{");
        for (i, (key, sub)) in props.enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            literal(out, &format!("{sep}{}: ", Value::String(key.clone())));
            value(sub, out, depth + 1);
        }
        return literal(out, "}");
    }
    let top = match schema.get("type").and_then(Value::as_str) {
        Some("object") => Top::Object,
        Some("array") => Top::Array,
        Some("string") => Top::String,
        Some("number") => Top::Number,
        Some("integer") => Top::Integer,
        Some("boolean") => {
            out.push(Part::OneOf(vec![b"false".to_vec(), b"true".to_vec()]));
            return;
        }
        Some("null") => return literal(out, "null"),
        _ => Top::Any,
    };
    out.push(Part::Json(top));
}
