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
