//! Python's ways with values, where chat templates depend on them and minijinja differs:
//! `str()` and `repr()` of template values, `json.dumps`, and a few `str` methods.

use std::fmt::Write as _;

use minijinja::value::{from_args, Value, ValueKind};
use minijinja::{Error, ErrorKind, Output, State};

/// `{{ value }}` as jinja2 prints it: `None`, `True`, `['a', 1]`, and nothing for undefined.
pub(super) fn format_output(
    out: &mut Output,
    _state: &mut State,
    value: &Value,
) -> Result<(), Error> {
    if value.is_undefined() {
        return Ok(());
    }
    out.write_str(&to_str(value))
        .map_err(|_| Error::new(ErrorKind::WriteFailure, "cannot write template output"))
}

/// Python's `str(value)`.
pub(super) fn to_str(value: &Value) -> String {
    match value.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::String => value.as_str().unwrap_or_default().to_string(),
        _ => repr(value),
    }
}

/// Python's `repr(value)` for the JSON-like values templates get.
pub(super) fn repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(value, &mut out);
    out
}

fn write_repr(value: &Value, out: &mut String) {
    match value.kind() {
        ValueKind::Undefined => {}
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => out.push_str(&number(value, false)),
        ValueKind::String => repr_str(value.as_str().unwrap_or_default(), out),
        ValueKind::Seq | ValueKind::Iterable => {
            let (open, close) = if value.is_tuple() {
                ("(", ")")
            } else {
                ("[", "]")
            };
            out.push_str(open);
            let items: Vec<Value> = value.try_iter().map(Iterator::collect).unwrap_or_default();
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
            }
            if value.is_tuple() && items.len() == 1 {
                out.push(',');
            }
            out.push_str(close);
        }
        ValueKind::Map => {
            out.push('{');
            let keys: Vec<Value> = value.try_iter().map(Iterator::collect).unwrap_or_default();
            for (index, key) in keys.iter().enumerate() {
                if index > 0 {
                    out.push_str(", ");
                }
                write_repr(key, out);
                out.push_str(": ");
                write_repr(&value.get_item(key).unwrap_or_default(), out);
            }
            out.push('}');
        }
        _ => {
            let _ = write!(out, "{value}");
        }
    }
}

fn repr_str(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// A number as Python prints it (`json` spells the non-finite ones its own way).
fn number(value: &Value, json: bool) -> String {
    if value.is_integer() {
        return value.to_string();
    }
    let Ok(f) = f64::try_from(value.clone()) else {
        return value.to_string();
    };
    float_repr(f, json)
}

/// Python's `repr(float)`: shortest round-trip digits, exponent below 1e-4 and from 1e16.
fn float_repr(f: f64, json: bool) -> String {
    if f.is_nan() {
        return if json { "NaN" } else { "nan" }.into();
    }
    if f.is_infinite() {
        return match (json, f > 0.0) {
            (true, true) => "Infinity".into(),
            (true, false) => "-Infinity".into(),
            (false, true) => "inf".into(),
            (false, false) => "-inf".into(),
        };
    }
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..16).contains(&exponent) {
        let plain = format!("{f}");
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

/// `str` methods that templates call and pycompat lacks; `None` hands over to pycompat.
pub(super) fn extra_method(
    value: &Value,
    method: &str,
    args: &[Value],
) -> Option<Result<Value, Error>> {
    let s = value.as_str()?;
    Some(match method {
        "rsplit" => rsplit(s, args),
        "removeprefix" => from_args(args)
            .map(|(prefix,): (&str,)| Value::from(s.strip_prefix(prefix).unwrap_or(s))),
        "removesuffix" => from_args(args)
            .map(|(suffix,): (&str,)| Value::from(s.strip_suffix(suffix).unwrap_or(s))),
        _ => return None,
    })
}

fn rsplit(s: &str, args: &[Value]) -> Result<Value, Error> {
    let (sep, maxsplit): (Option<&str>, Option<i64>) = from_args(args)?;
    let limit = match maxsplit {
        Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        _ => None,
    };
    let mut parts: Vec<&str> = match (sep, limit) {
        (Some(""), _) => {
            return Err(Error::new(ErrorKind::InvalidOperation, "empty separator"));
        }
        (Some(sep), Some(limit)) => s.rsplitn(limit + 1, sep).collect(),
        (Some(sep), None) => s.rsplit(sep).collect(),
        (None, limit) => {
            let mut parts = Vec::new();
            let mut rest = s.trim_end();
            while !rest.is_empty() {
                if limit.is_some_and(|limit| parts.len() == limit) {
                    parts.push(rest.trim_end());
                    break;
                }
                let start = rest.rfind(char::is_whitespace).map_or(0, |at| {
                    at + rest[at..].chars().next().map_or(1, char::len_utf8)
                });
                parts.push(&rest[start..]);
                rest = rest[..start].trim_end();
            }
            parts
        }
    };
    parts.reverse();
    Ok(parts.into_iter().map(Value::from).collect())
}

/// `json.dumps` options as transformers' `tojson` takes them.
pub(super) struct JsonOptions {
    ensure_ascii: bool,
    indent: Option<String>,
    item_separator: String,
    key_separator: String,
    sort_keys: bool,
}

impl JsonOptions {
    pub(super) fn new(
        ensure_ascii: bool,
        indent: Option<Value>,
        separators: Option<Value>,
        sort_keys: bool,
    ) -> Result<Self, Error> {
        let indent = match indent {
            None => None,
            Some(indent) if indent.kind() == ValueKind::String => {
                Some(indent.as_str().unwrap_or_default().to_string())
            }
            Some(indent) => {
                let n = indent.as_i64().ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: indent must be an int or str",
                    )
                })?;
                Some(" ".repeat(usize::try_from(n).unwrap_or(0)))
            }
        };
        // Python: with an indent, items end lines, so no space after the comma.
        let (mut item_separator, mut key_separator) = match indent {
            Some(_) => (",".to_string(), ": ".to_string()),
            None => (", ".to_string(), ": ".to_string()),
        };
        if let Some(separators) = separators {
            let parts: Vec<Value> = separators.try_iter()?.collect();
            match parts.as_slice() {
                [item, key] if item.as_str().is_some() && key.as_str().is_some() => {
                    item_separator = item.as_str().unwrap_or_default().to_string();
                    key_separator = key.as_str().unwrap_or_default().to_string();
                }
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: separators must be two strings",
                    ))
                }
            }
        }
        Ok(Self {
            ensure_ascii,
            indent,
            item_separator,
            key_separator,
            sort_keys,
        })
    }
}

pub(super) fn json_dumps(
    value: &Value,
    options: &JsonOptions,
    level: usize,
    out: &mut String,
) -> Result<(), Error> {
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => out.push_str(&number(value, true)),
        ValueKind::String => json_str(value.as_str().unwrap_or_default(), options, out),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                separate(index, level + 1, options, out);
                json_dumps(item, options, level + 1, out)?;
            }
            close(level, options, out);
            out.push(']');
        }
        ValueKind::Map => {
            let mut entries = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                entries.push((json_key(&key)?, item));
            }
            if entries.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if options.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            out.push('{');
            for (index, (key, item)) in entries.iter().enumerate() {
                separate(index, level + 1, options, out);
                json_str(key, options, out);
                out.push_str(&options.key_separator);
                json_dumps(item, options, level + 1, out)?;
            }
            close(level, options, out);
            out.push('}');
        }
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("Object of type {kind} is not JSON serializable"),
            ))
        }
    }
    Ok(())
}

fn separate(index: usize, level: usize, options: &JsonOptions, out: &mut String) {
    if index > 0 {
        out.push_str(&options.item_separator);
    }
    if let Some(indent) = &options.indent {
        out.push('\n');
        out.push_str(&indent.repeat(level));
    }
}

fn close(level: usize, options: &JsonOptions, out: &mut String) {
    if let Some(indent) = &options.indent {
        out.push('\n');
        out.push_str(&indent.repeat(level));
    }
}

/// Dict keys as `json.dumps` turns them into strings.
fn json_key(key: &Value) -> Result<String, Error> {
    Ok(match key.kind() {
        ValueKind::String => key.as_str().unwrap_or_default().to_string(),
        ValueKind::Number => number(key, true),
        ValueKind::Bool => if key.is_true() { "true" } else { "false" }.to_string(),
        ValueKind::None => "null".to_string(),
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("keys must be str, int, float, bool or None, not {kind}"),
            ))
        }
    })
}

fn json_str(s: &str, options: &JsonOptions, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (options.ensure_ascii && (c as u32) > 0x7e) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_python() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345.6, "123456789012345.6"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.25e-7, "1.25e-07"),
            (-0.0, "-0.0"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f, false), want, "{f}");
        }
        assert_eq!(float_repr(f64::INFINITY, true), "Infinity");
        assert_eq!(float_repr(f64::NAN, false), "nan");
    }

    #[test]
    fn repr_picks_quotes_like_python() {
        let value = crate::template::to_value(&serde_json::json!(
            ["it's", "say \"hi\"", "both ' \"", "tab\t", null, true, 1.5, {"k": [2]}]
        ));
        assert_eq!(
            repr(&value),
            r#"["it's", 'say "hi"', 'both \' "', 'tab\t', None, True, 1.5, {'k': [2]}]"#
        );
    }

    #[test]
    fn rsplit_matches_python() -> Result<(), Error> {
        let split = |s: &str, args: &[Value]| rsplit(s, args).map(|v| repr(&v));
        assert_eq!(split("a,b,c", &[Value::from(",")])?, "['a', 'b', 'c']");
        assert_eq!(
            split("a,b,c", &[Value::from(","), Value::from(1)])?,
            "['a,b', 'c']"
        );
        assert_eq!(split("  a  b c ", &[])?, "['a', 'b', 'c']");
        assert_eq!(
            split("  a  b c ", &[Value::from(()), Value::from(1)])?,
            "['  a  b', 'c']"
        );
        Ok(())
    }
}
