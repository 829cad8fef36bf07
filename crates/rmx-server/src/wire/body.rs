//! Request bodies for the compatibility surfaces: JSON read with the path of the field that
//! failed (`messages[2].content`), so a 400 names the field instead of "invalid JSON", and a
//! body over the limit answered with 413 in the surface's own error shape.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

/// The largest request body any route takes; larger ones are refused with 413. Agents resend
/// the whole conversation with its tool results every turn, so this is generous (runaway
/// uploads do not fit); the context length is the real limit.
pub const BODY_LIMIT: usize = 32 * 1024 * 1024;

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BodyError {
    #[error("the request body is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("the request body is not valid JSON: {message}")]
    Syntax { message: String },
    /// Well-formed JSON of the wrong shape; `field` is the path to the value at fault.
    #[error("{}", shape_message(field, message))]
    Shape {
        field: Option<String>,
        message: String,
    },
    #[error("reading the request body failed: {0}")]
    Read(String),
}

fn shape_message(field: &Option<String>, message: &str) -> String {
    match field {
        Some(f) => format!("invalid value for `{f}`: {message}"),
        None => format!("invalid request body: {message}"),
    }
}

impl BodyError {
    pub fn status(&self) -> StatusCode {
        match self {
            BodyError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The field at fault, for OpenAI's `param`.
    pub fn field(&self) -> Option<&str> {
        match self {
            BodyError::Shape { field, .. } => field.as_deref(),
            _ => None,
        }
    }
}

impl From<BytesRejection> for BodyError {
    fn from(r: BytesRejection) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            BodyError::TooLarge { limit: BODY_LIMIT }
        } else {
            BodyError::Read(r.body_text())
        }
    }
}

/// Parses a body, naming the failing field on a type error.
pub fn parse<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, BodyError> {
    if bytes.len() > BODY_LIMIT {
        return Err(BodyError::TooLarge { limit: BODY_LIMIT });
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            BodyError::Syntax {
                message: inner.to_string(),
            }
        } else {
            // serde names a missing field in the message but the path ends at its parent.
            let message = strip_position(&inner.to_string());
            let field = match missing_field(&message) {
                Some(name) if path == "." => Some(name.to_string()),
                Some(name) => Some(format!("{path}.{name}")),
                None if path == "." => None,
                None => Some(path),
            };
            BodyError::Shape { field, message }
        }
    })?;
    Ok(value)
}

/// serde_json appends " at line 1 column 42"; the field path says more.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

fn missing_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split('`').next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[allow(dead_code)]
    #[derive(Debug, Deserialize)]
    struct Req {
        model: String,
        messages: Vec<Msg>,
    }

    #[allow(dead_code)]
    #[derive(Debug, Deserialize)]
    struct Msg {
        role: String,
        content: String,
    }

    fn err(body: &str) -> BodyError {
        match parse::<Req>(&Bytes::from(body.to_string())) {
            Ok(r) => panic!("parsed {r:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn wrong_type_names_the_field() {
        let e = err(r#"{"model": "m", "messages": [{"role": "user", "content": 3}]}"#);
        assert_eq!(e.field(), Some("messages[0].content"), "{e}");
        assert!(e.to_string().contains("messages[0].content"), "{e}");
    }

    #[test]
    fn missing_field_names_the_field() {
        assert_eq!(err(r#"{"messages": []}"#).field(), Some("model"));
        let e = err(r#"{"model": "m", "messages": [{"role": "user"}]}"#);
        assert_eq!(e.field(), Some("messages[0].content"), "{e}");
    }

    #[test]
    fn syntax_errors_are_400_without_a_field() {
        let e = err(r#"{"model": "#);
        assert!(matches!(e, BodyError::Syntax { .. }), "{e:?}");
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    }
}
