//! What every HTTP compatibility surface (OpenAI's, Anthropic's) reads and writes the same
//! way: request bodies ([`body`]: JSON naming the failing field, the size limit) and
//! server-sent events ([`sse`]). Below the surfaces: nothing here knows which API it speaks.

pub mod body;
pub mod sse;

use serde_json::Value;

/// Tool-call arguments as an object where they parse, else the text as sent.
pub fn arguments_value(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::String(arguments.to_string()),
    }
}
