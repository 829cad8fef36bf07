//! vLLM's `structured_outputs` extension (chat and completions) as a [`Shape`]: a JSON schema,
//! a regular expression, a choice of strings, a Lark grammar, or JSON mode, exactly one.

use rmx_api::openai::StructuredOutputs;
use serde_json::Value;

use super::error::OpenAiError;
use crate::service::Shape;

const PARAM: &str = "structured_outputs";

pub fn shape(so: &StructuredOutputs) -> Result<Shape, OpenAiError> {
    let mut shapes = Vec::new();
    if let Some(schema) = &so.json {
        shapes.push(Shape::JsonSchema(match schema {
            // vLLM takes the schema as JSON text too.
            Value::String(text) => serde_json::from_str(text).map_err(|e| {
                OpenAiError::invalid(PARAM, format!("`structured_outputs.json` is not JSON: {e}"))
            })?,
            other => other.clone(),
        }));
    }
    if let Some(rx) = &so.regex {
        shapes.push(Shape::Regex(rx.clone()));
    }
    if let Some(choice) = &so.choice {
        shapes.push(Shape::Choice(choice.clone()));
    }
    if let Some(grammar) = &so.grammar {
        shapes.push(Shape::Grammar(grammar.clone()));
    }
    if so.json_object == Some(true) {
        shapes.push(Shape::JsonObject);
    }
    match <[Shape; 1]>::try_from(shapes) {
        Ok([one]) => Ok(one),
        Err(shapes) => Err(OpenAiError::invalid(
            PARAM,
            format!(
                "`structured_outputs` needs exactly one of `json`, `regex`, `choice`, `grammar` \
                 or `json_object`, got {}",
                shapes.len()
            ),
        )),
    }
}

/// What a text format asks for (chat's `response_format`, Responses' `text.format`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TextFormat<'a> {
    Text,
    JsonObject,
    JsonSchema(&'a Value),
}

/// Chat's `response_format.json_schema`: `{name, schema, strict}` as OpenAI documents it (a
/// bare schema in its place is taken too, as several clients send one). Anything but an
/// object is refused: taken as a schema, the string `"x"` constrained nothing.
pub fn chat_schema(json_schema: &Value) -> Result<&Value, OpenAiError> {
    const PARAM: &str = "response_format.json_schema";
    let schema = match json_schema {
        Value::Object(o) => o.get("schema").unwrap_or(json_schema),
        other => {
            return Err(OpenAiError::invalid(
                PARAM,
                format!("`response_format.json_schema` must be an object {{\"name\", \"schema\"}}, not {other}"),
            ))
        }
    };
    checked_schema(schema, "response_format.json_schema.schema")
}

/// Responses' `text.format`, checked: `{"type": "text" | "json_object" | "json_schema", ...}`
/// with a schema object for the last; no `text` or no `format` is plain text.
pub fn responses_format(text: Option<&Value>) -> Result<TextFormat<'_>, OpenAiError> {
    let Some(text) = text else {
        return Ok(TextFormat::Text);
    };
    if !text.is_object() {
        return Err(OpenAiError::invalid(
            "text",
            format!(
                "`text` must be an object like {{\"format\": {{\"type\": \"text\"}}}}, not {text}"
            ),
        ));
    }
    let Some(format) = text.get("format") else {
        return Ok(TextFormat::Text);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(TextFormat::Text),
        Some("json_object") => Ok(TextFormat::JsonObject),
        Some("json_schema") => {
            let schema = format.get("schema").ok_or_else(|| {
                OpenAiError::invalid(
                    "text.format.schema",
                    "`text.format` of type `json_schema` needs a `schema`",
                )
            })?;
            checked_schema(schema, "text.format.schema").map(TextFormat::JsonSchema)
        }
        other => Err(OpenAiError::invalid(
            "text.format.type",
            format!(
                "`text.format.type` must be one of `text`, `json_object`, `json_schema`, not {}",
                other.map_or_else(
                    || format
                        .get("type")
                        .map_or("nothing".into(), Value::to_string),
                    |t| format!("`{t}`")
                )
            ),
        )),
    }
}

/// A JSON Schema is an object or a boolean.
fn checked_schema<'a>(schema: &'a Value, param: &str) -> Result<&'a Value, OpenAiError> {
    if schema.is_object() || schema.is_boolean() {
        Ok(schema)
    } else {
        Err(OpenAiError::invalid(
            param,
            format!("`{param}` must be a JSON Schema (an object), not {schema}"),
        ))
    }
}

#[cfg(test)]
mod format_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_formats_outside_the_documented_ones_are_refused() {
        let text = json!({"format": {"type": "bogus"}});
        let e = responses_format(Some(&text)).unwrap_err().to_string();
        assert!(e.contains("`bogus`"), "{e}");
        for bad in [
            json!("x"),
            json!({"format": {"type": "json_schema"}}),
            json!({"format": {"type": "json_schema", "schema": "x"}}),
            json!({"format": {}}),
        ] {
            assert!(responses_format(Some(&bad)).is_err(), "{bad}");
        }
        let schema = json!({"type": "object"});
        let good = json!({"format": {"type": "json_schema", "name": "n", "schema": schema}});
        assert_eq!(
            responses_format(Some(&good)).unwrap(),
            TextFormat::JsonSchema(&schema)
        );
        assert_eq!(
            responses_format(Some(&json!({"format": {"type": "text"}}))).unwrap(),
            TextFormat::Text
        );
        assert_eq!(
            responses_format(Some(&json!({}))).unwrap(),
            TextFormat::Text
        );
        assert_eq!(responses_format(None).unwrap(), TextFormat::Text);
    }

    #[test]
    fn a_chat_json_schema_is_an_object() {
        assert!(chat_schema(&json!("x")).is_err());
        assert!(chat_schema(&json!({"name": "n", "schema": 3})).is_err());
        let schema = json!({"type": "object"});
        assert_eq!(
            chat_schema(&json!({"name": "n", "schema": schema})).unwrap(),
            &schema
        );
        // A bare schema in place of {name, schema}.
        assert_eq!(chat_schema(&schema).unwrap(), &schema);
    }
}
