//! Python call syntax: `get_weather(city="Paris", days=3)`.
//!
//! Gemma writes calls this way inside ```` ```tool_code ```` fences, and Llama 3.1 writes its
//! built-in tools as `brave_search.call(query="...")`. Arguments must be keyword arguments:
//! positional ones cannot be named without guessing, so such a call is not read.

use super::call::RawCall;
use super::lenient_json::{Cursor, J};

/// Calls separated by newlines, `;` or `,`, optionally in a list `[a(..), b(..)]`; None unless
/// the whole text is calls.
pub(crate) fn parse_py_calls(src: &str) -> Option<Vec<RawCall>> {
    let trimmed = src.trim();
    let inner = match trimmed.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        Some(inner) => inner,
        None => trimmed,
    };
    let mut c = Cursor::new(inner);
    let mut calls = Vec::new();
    loop {
        while c
            .peek()
            .is_some_and(|ch| ch.is_whitespace() || ch == ';' || ch == ',')
        {
            c.bump();
        }
        if c.at_end() {
            break;
        }
        calls.extend(call(&mut c)?);
    }
    (!calls.is_empty()).then_some(calls)
}

/// One call; `print(f(..))`, which Gemma copies from its prompt examples, yields `f`.
fn call(c: &mut Cursor) -> Option<Vec<RawCall>> {
    let path = c.ident(true)?;
    c.skip_ws();
    if !c.eat('(') {
        return None;
    }
    if path == "print" {
        c.skip_ws();
        let mut inner = Vec::new();
        while !c.eat(')') {
            inner.extend(call(c)?);
            c.skip_ws();
            c.eat(',');
            c.skip_ws();
        }
        return Some(inner);
    }
    let mut args = Vec::new();
    loop {
        c.skip_ws();
        if c.eat(')') {
            break;
        }
        let key = c.ident(false)?.to_string();
        c.skip_ws();
        if !c.eat('=') {
            return None;
        }
        let value = c.value().ok()?;
        args.push((key, value));
        c.skip_ws();
        if c.eat(',') {
            continue;
        }
        if c.eat(')') {
            break;
        }
        return None;
    }
    Some(vec![RawCall {
        name: tool_name(path).to_string(),
        arguments: J::Obj(args).to_json(),
    }])
}

/// `brave_search.call` is the tool `brave_search`; `default_api.get_weather` (a namespace
/// some prompts teach) is `get_weather`.
fn tool_name(path: &str) -> &str {
    let path = path.strip_suffix(".call").unwrap_or(path);
    path.rsplit('.').next().unwrap_or(path)
}
