//! Hugging Face chat templates, rendered the way transformers renders them.
//!
//! Templates are Jinja written against Python: transformers renders them with jinja2
//! (`trim_blocks`, `lstrip_blocks`, loop controls) and its own `tojson`, `raise_exception` and
//! `strftime_now`, and the values they print are Python objects. Parity means matching all of
//! that byte for byte, so this module gives minijinja Python's ways where they differ: how
//! `None`, `True` and containers print, `json.dumps` for `tojson`, and the string methods
//! that `minijinja-contrib`'s pycompat leaves out. `tests/template_parity.rs` holds the proof.

use std::fmt::Write as _;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, ErrorKind, State};
use serde_json::{Map, Value as Json};

pub mod limits;
mod python;

pub use limits::Limit;

/// Marks errors that a template raised on purpose, to tell them from engine errors.
const RAISED: &str = "rmx-raise-exception: ";
const NAME: &str = "chat_template";

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("the chat template does not parse")]
    Syntax(#[source] minijinja::Error),
    /// The template called `raise_exception(message)`: the conversation is one it refuses.
    #[error("the chat template refused the conversation: {0}")]
    Raised(String),
    #[error("the chat template failed to render")]
    Render(#[source] minijinja::Error),
    /// The template ran into one of the bounds in [`limits`]: it loops, nests or grows past
    /// what any real chat format needs.
    #[error("the chat template exceeded the limit of {0}")]
    Limit(Limit),
    #[error("messages must be a JSON list of objects, got {0}")]
    Messages(&'static str),
}

/// What a template sees, as transformers' `apply_chat_template(conversation, tools=...,
/// documents=..., add_generation_prompt=..., **kwargs)` passes it.
#[derive(Debug, Clone)]
pub struct RenderInput<'a> {
    /// OpenAI-shaped messages: a JSON list of objects.
    pub messages: &'a Json,
    pub tools: Option<&'a Json>,
    pub documents: Option<&'a Json>,
    pub add_generation_prompt: bool,
    /// Named special tokens (`bos_token`, ...), usually [`crate::tokenizer::Tokenizer::special_tokens`].
    pub special_tokens: Map<String, Json>,
    /// Everything else the template reads (`enable_thinking`, `reasoning_effort`, ...);
    /// these win over `special_tokens` of the same name, as in transformers.
    pub kwargs: Map<String, Json>,
}

impl<'a> RenderInput<'a> {
    pub fn new(messages: &'a Json) -> Self {
        Self {
            messages,
            tools: None,
            documents: None,
            add_generation_prompt: false,
            special_tokens: Map::new(),
            kwargs: Map::new(),
        }
    }

    pub fn with_special_tokens<'k>(
        mut self,
        tokens: impl IntoIterator<Item = (&'k String, &'k String)>,
    ) -> Self {
        for (name, token) in tokens {
            self.special_tokens
                .insert(name.clone(), Json::String(token.clone()));
        }
        self
    }
}

/// A parsed chat template, ready to render many conversations.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
}

impl ChatTemplate {
    pub fn new(source: impl Into<String>) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(TemplateError::Syntax)?;
        env.set_syntax(syntax.clone());
        env.set_fuel(Some(limits::FUEL));
        env.set_recursion_limit(limits::RECURSION);
        env.add_function(limits::GUARD, limits::guard);
        env.add_filter("indent", limits::indent);
        env.set_formatter(python::format_output);
        env.set_unknown_method_callback(|state, value, method, args| {
            match python::extra_method(value, method, args) {
                Some(result) => result,
                None => {
                    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
                }
            }
        });
        env.add_filter("tojson", tojson);
        env.add_filter("string", |value: &Value| Value::from(python::to_str(value)));
        env.add_function(
            "raise_exception",
            |message: String| -> Result<Value, Error> {
                Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("{RAISED}{message}"),
                ))
            },
        );
        env.add_function("strftime_now", strftime_now);
        let source = limits::guard_assignments(&source.into(), syntax);
        env.add_template_owned(NAME, source)
            .map_err(TemplateError::Syntax)?;
        Ok(Self { env })
    }

    pub fn render(&self, input: &RenderInput<'_>) -> Result<String, TemplateError> {
        let messages = prepare_messages(input.messages)?;
        let mut context = input.special_tokens.clone();
        for (name, value) in &input.kwargs {
            context.insert(name.clone(), value.clone());
        }
        context.insert("messages".into(), messages);
        context.insert("tools".into(), input.tools.cloned().unwrap_or(Json::Null));
        context.insert(
            "documents".into(),
            input.documents.cloned().unwrap_or(Json::Null),
        );
        context.insert(
            "add_generation_prompt".into(),
            Json::Bool(input.add_generation_prompt),
        );
        let template = self.env.get_template(NAME).map_err(TemplateError::Render)?;
        let mut out = limits::CappedOutput {
            bytes: Vec::new(),
            over: false,
        };
        let rendered = template.render_captured_to(to_value(&Json::Object(context)), &mut out);
        if out.over {
            return Err(TemplateError::Limit(Limit::Output));
        }
        rendered.map_err(|err| {
            if let Some(limit) = limits::limit_of(&err) {
                return TemplateError::Limit(limit);
            }
            match raised_message(&err) {
                Some(message) => TemplateError::Raised(message),
                None => TemplateError::Render(err),
            }
        })?;
        // The formatter and filters only ever write `str`s.
        String::from_utf8(out.bytes).map_err(|_| {
            TemplateError::Render(Error::new(
                ErrorKind::BadSerialization,
                "the rendered prompt is not UTF-8",
            ))
        })
    }
}

/// What transformers does to messages before rendering: it drops keys whose value is None
/// (OpenAI clients send `"content": null` beside tool calls), and copies the reasoning under
/// every name templates read it by (`reasoning_content`, and `thinking` for gpt-oss).
fn prepare_messages(messages: &Json) -> Result<Json, TemplateError> {
    let list = messages
        .as_array()
        .ok_or(TemplateError::Messages(json_kind(messages)))?;
    let mut prepared = Vec::with_capacity(list.len());
    for message in list {
        let object = message
            .as_object()
            .ok_or(TemplateError::Messages("a list with a non-object in it"))?;
        let mut message: Map<String, Json> = object
            .iter()
            .filter(|(_, value)| !value.is_null())
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let reasoning = ["reasoning_content", "thinking", "reasoning"]
            .iter()
            .find_map(|key| message.get(*key))
            .cloned();
        if let Some(reasoning) = reasoning {
            // Python: {"thinking": r, **message, "reasoning_content": r}
            let mut aliased = Map::new();
            aliased.insert("thinking".into(), reasoning.clone());
            for (key, value) in message {
                aliased.insert(key, value);
            }
            aliased.insert("reasoning_content".into(), reasoning);
            message = aliased;
        }
        prepared.push(Json::Object(message));
    }
    Ok(Json::Array(prepared))
}

/// JSON into template values, keeping object key order (tool schemas print in it).
pub(crate) fn to_value(json: &Json) -> Value {
    match json {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Value::from(i),
            (None, Some(u), _) => Value::from(u),
            (None, None, Some(f)) => Value::from(f),
            (None, None, None) => Value::from(n.to_string()),
        },
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(items) => items.iter().map(to_value).collect(),
        Json::Object(map) => Value::from_pairs(
            map.iter()
                .map(|(key, value)| (Value::from(key.as_str()), to_value(value))),
        ),
    }
}

fn json_kind(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

fn raised_message(err: &Error) -> Option<String> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(err) = current {
        if let Some(jinja) = err.downcast_ref::<Error>() {
            if let Some(message) = jinja.detail().and_then(|d| d.strip_prefix(RAISED)) {
                return Some(message.to_string());
            }
        }
        current = err.source();
    }
    None
}

/// transformers' `tojson`: `json.dumps(x, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)`, output not HTML-escaped. minijinja takes at most three of those by
/// position; templates pass them by name anyway.
fn tojson(
    value: &Value,
    ensure_ascii: Option<Value>,
    indent: Option<Value>,
    separators: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let named = |name: &str, positional: Option<Value>| -> Result<Option<Value>, Error> {
        let value = match kwargs.get::<Option<Value>>(name)? {
            Some(value) => Some(value),
            None => positional,
        };
        Ok(value.filter(|v| !v.is_none() && !v.is_undefined()))
    };
    let ensure_ascii = named("ensure_ascii", ensure_ascii)?;
    let indent = named("indent", indent)?;
    let separators = named("separators", separators)?;
    let sort_keys = named("sort_keys", None)?;
    kwargs.assert_all_used()?;
    let options = python::JsonOptions::new(
        ensure_ascii.is_some_and(|v| v.is_true()),
        indent,
        separators,
        sort_keys.is_some_and(|v| v.is_true()),
    )?;
    let mut out = String::new();
    python::json_dumps(value, &options, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

fn strftime_now(_state: &State, format: String) -> Result<Value, Error> {
    use chrono::format::{Item, StrftimeItems};
    let items: Vec<Item<'_>> = StrftimeItems::new(&format).collect();
    if items.iter().any(|item| matches!(item, Item::Error)) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now: unsupported format {format:?}"),
        ));
    }
    let mut out = String::new();
    write!(
        out,
        "{}",
        chrono::Local::now().format_with_items(items.into_iter())
    )
    .map_err(|_| Error::new(ErrorKind::InvalidOperation, "strftime_now failed"))?;
    Ok(Value::from(out))
}

#[cfg(test)]
mod tests;
