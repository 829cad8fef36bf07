//! A forgiving JSON reader for what models write as tool-call arguments.
//!
//! Small models get JSON almost right: a trailing comma, single quotes, an unquoted key,
//! Python's `True`/`None`, or braces left open because generation stopped. Refusing those
//! would turn a usable call into chat text, so this reader accepts them. On valid JSON it reads
//! exactly what `serde_json` reads.
//!
//! It builds its own [`J`] tree instead of `serde_json::Value` so that argument keys keep the
//! model's order and numbers keep their text, whatever features `serde_json` is built with.

/// A JSON value as read: objects keep key order, numbers keep their (normalised) text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    /// The field `key` of an object; the last one wins, as in `serde_json`.
    pub(crate) fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(fields) => fields.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            J::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Compact JSON text.
    pub(crate) fn to_json(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Num(n) => out.push_str(n),
            J::Str(s) => write_str(s, out),
            J::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            J::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(k, out);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

fn write_str(s: &str, out: &mut String) {
    // serde_json's string escaping cannot fail for a &str.
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

/// Reads one value at the start of `src` (after whitespace); returns it and the bytes used.
/// Containers still open at the end of `src` are closed.
pub(crate) fn parse_prefix(src: &str) -> Option<(J, usize)> {
    let mut c = Cursor::new(src);
    let v = c.value().ok()?;
    Some((v, c.pos))
}

/// Reads `src` as exactly one value, surrounded by nothing but whitespace.
pub(crate) fn parse_whole(src: &str) -> Option<J> {
    let (v, used) = parse_prefix(src)?;
    src[used..].trim().is_empty().then_some(v)
}

/// Why reading a value stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fail {
    /// The text ran out inside a scalar (`tru`, `-`): the caller drops the partial value.
    Eof,
    /// Something that is not a value.
    Bad,
}

/// A position in text being read; shared with the Python-call reader, whose argument values
/// are this same grammar (Python literals are a superset of what we accept here).
pub(crate) struct Cursor<'a> {
    pub(crate) src: &'a str,
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Cursor { src, pos: 0 }
    }

    pub(crate) fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    pub(crate) fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.src.len()
    }

    pub(crate) fn bump(&mut self) -> Option<char> {
        let ch = self.peek()?;
        self.pos += ch.len_utf8();
        Some(ch)
    }

    pub(crate) fn eat(&mut self, ch: char) -> bool {
        if self.peek() == Some(ch) {
            self.pos += ch.len_utf8();
            true
        } else {
            false
        }
    }

    pub(crate) fn skip_ws(&mut self) {
        while let Some(ch) = self.peek() {
            if ch.is_whitespace() {
                self.pos += ch.len_utf8();
            } else {
                break;
            }
        }
    }

    /// An identifier (`[A-Za-z_$][A-Za-z0-9_$-]*`, dots allowed when `dots`), or None.
    pub(crate) fn ident(&mut self, dots: bool) -> Option<&'a str> {
        let start = self.pos;
        match self.peek() {
            Some(ch) if ch.is_alphabetic() || ch == '_' || ch == '$' => {}
            _ => return None,
        }
        while let Some(ch) = self.peek() {
            if ch.is_alphanumeric() || ch == '_' || ch == '$' || ch == '-' || (dots && ch == '.') {
                self.pos += ch.len_utf8();
            } else {
                break;
            }
        }
        Some(&self.src[start..self.pos])
    }

    pub(crate) fn value(&mut self) -> Result<J, Fail> {
        self.skip_ws();
        match self.peek() {
            None => Err(Fail::Eof),
            Some('{') => {
                self.pos += 1;
                self.object()
            }
            Some('[') => {
                self.pos += 1;
                self.array(']')
            }
            // Python tuples, as in `f(size=(3, 4))`.
            Some('(') => {
                self.pos += 1;
                self.array(')')
            }
            Some(q @ ('"' | '\'')) => self.string(q).map(J::Str),
            Some(ch) if ch == '-' || ch == '+' || ch == '.' || ch.is_ascii_digit() => self.number(),
            Some(ch) if ch.is_alphabetic() => self.literal(),
            Some(_) => Err(Fail::Bad),
        }
    }

    fn literal(&mut self) -> Result<J, Fail> {
        let start = self.pos;
        let word = self.ident(false).ok_or(Fail::Bad)?;
        let v = match word {
            "true" | "True" => J::Bool(true),
            "false" | "False" => J::Bool(false),
            "null" | "None" => J::Null,
            w if self.at_end()
                && ["true", "True", "false", "False", "null", "None"]
                    .iter()
                    .any(|lit| lit.starts_with(w)) =>
            {
                return Err(Fail::Eof)
            }
            _ => {
                self.pos = start;
                return Err(Fail::Bad);
            }
        };
        Ok(v)
    }

    fn number(&mut self) -> Result<J, Fail> {
        let start = self.pos;
        while let Some(ch) = self.peek() {
            if ch.is_ascii_digit() || matches!(ch, '-' | '+' | '.' | 'e' | 'E') {
                self.pos += 1;
            } else {
                break;
            }
        }
        let raw = &self.src[start..self.pos];
        let mut text = raw.strip_prefix('+').unwrap_or(raw).to_string();
        // `.5` and `5.` are fine in Python and JavaScript, not in JSON.
        if let Some(rest) = text.strip_prefix("-.") {
            text = format!("-0.{rest}");
        } else if let Some(rest) = text.strip_prefix('.') {
            text = format!("0.{rest}");
        }
        if text.ends_with('.') {
            text.push('0');
        }
        match serde_json::from_str::<serde_json::Number>(&text) {
            Ok(_) => Ok(J::Num(text)),
            Err(_) if self.at_end() => Err(Fail::Eof),
            Err(_) => {
                self.pos = start;
                Err(Fail::Bad)
            }
        }
    }

    /// A quoted string; the opening quote is next. An unterminated string ends at end of text.
    pub(crate) fn string(&mut self, quote: char) -> Result<String, Fail> {
        self.pos += quote.len_utf8();
        // Python triple quotes: the opening quote is followed by two more.
        let q2: String = [quote, quote].iter().collect();
        let triple = self.rest().starts_with(&q2);
        if triple {
            self.pos += 2 * quote.len_utf8();
        }
        let mut out = String::new();
        loop {
            let Some(ch) = self.bump() else {
                return Ok(out);
            };
            if ch == quote {
                if !triple {
                    return Ok(out);
                }
                if self.rest().starts_with(&q2) {
                    self.pos += 2 * quote.len_utf8();
                    return Ok(out);
                }
                out.push(ch);
                continue;
            }
            if ch != '\\' {
                out.push(ch);
                continue;
            }
            let Some(esc) = self.bump() else {
                return Ok(out);
            };
            match esc {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'u' => out.push(self.unicode_escape()),
                other => out.push(other),
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.rest().get(..4)?;
        let v = u32::from_str_radix(digits, 16).ok()?;
        self.pos += 4;
        Some(v)
    }

    fn unicode_escape(&mut self) -> char {
        let Some(hi) = self.hex4() else {
            return '\u{fffd}';
        };
        if (0xD800..0xDC00).contains(&hi) && self.rest().starts_with("\\u") {
            let save = self.pos;
            self.pos += 2;
            if let Some(lo) = self.hex4() {
                if (0xDC00..0xE000).contains(&lo) {
                    let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    return char::from_u32(c).unwrap_or('\u{fffd}');
                }
            }
            self.pos = save;
        }
        char::from_u32(hi).unwrap_or('\u{fffd}')
    }

    /// An object key: quoted, or a bare identifier; then `:`. None (position restored) if the
    /// text here is not a key, so the caller can close the object instead.
    fn key(&mut self) -> Option<String> {
        let save = self.pos;
        let key = match self.peek() {
            Some(q @ ('"' | '\'')) => self.string(q).ok(),
            _ => self.ident(false).map(str::to_string),
        };
        self.skip_ws();
        match key {
            Some(k) if self.eat(':') => Some(k),
            // Text ran out after the key: the caller closes the object without it.
            Some(_) if self.at_end() => None,
            _ => {
                self.pos = save;
                None
            }
        }
    }

    fn object(&mut self) -> Result<J, Fail> {
        let mut fields: Vec<(String, J)> = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Ok(J::Obj(fields)),
                Some('}') => {
                    self.pos += 1;
                    return Ok(J::Obj(fields));
                }
                // Leading, doubled and trailing commas.
                Some(',') => {
                    self.pos += 1;
                    continue;
                }
                _ => {}
            }
            let Some(key) = self.key() else {
                // Not a key: the model left the brace open and went on; close it here.
                return Ok(J::Obj(fields));
            };
            match self.value() {
                Ok(v) => fields.push((key, v)),
                Err(_) if self.at_end() => return Ok(J::Obj(fields)),
                Err(e) => return Err(e),
            }
        }
    }

    fn array(&mut self, close: char) -> Result<J, Fail> {
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Ok(J::Arr(items)),
                Some(ch) if ch == close => {
                    self.pos += 1;
                    return Ok(J::Arr(items));
                }
                Some(',') => {
                    self.pos += 1;
                    continue;
                }
                _ => {}
            }
            let save = self.pos;
            match self.value() {
                Ok(v) => items.push(v),
                Err(_) if self.at_end() => return Ok(J::Arr(items)),
                Err(_) if !items.is_empty() => {
                    self.pos = save;
                    return Ok(J::Arr(items));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Finds where the bracketed value (or string) starting at `start` ends, counting brackets
/// outside strings, without parsing it: the end of a call that has no closing tag (Mistral,
/// Llama 3). The text only grows while a call streams in, so the scan resumes where it
/// stopped instead of starting over on every delta.
#[derive(Debug, Clone)]
pub(crate) struct ValueScan {
    pos: usize,
    depth: usize,
    /// The quote of the string the scan is in.
    quote: Option<u8>,
    /// The value is a string: it ends at its closing quote.
    string: bool,
}

impl ValueScan {
    pub(crate) fn new(src: &str, start: usize) -> Self {
        let first = src.as_bytes().get(start).copied();
        let string = matches!(first, Some(b'"' | b'\''));
        ValueScan {
            pos: if string { start + 1 } else { start },
            depth: 0,
            quote: if string { first } else { None },
            string,
        }
    }

    /// The end of the value in `src` (which extends the text of earlier calls), once known.
    pub(crate) fn end(&mut self, src: &str) -> Option<usize> {
        let bytes = src.as_bytes();
        while self.pos < bytes.len() {
            let b = bytes[self.pos];
            match self.quote {
                Some(q) => {
                    if b == b'\\' {
                        if self.pos + 1 >= bytes.len() {
                            // The escaped character has not arrived: look again next time.
                            return None;
                        }
                        self.pos += 1;
                    } else if b == q {
                        self.quote = None;
                        if self.string {
                            return Some(self.pos + 1);
                        }
                    }
                }
                None => match b {
                    b'"' | b'\'' => self.quote = Some(b),
                    b'{' | b'[' | b'(' => self.depth += 1,
                    b'}' | b']' | b')' => {
                        self.depth = self.depth.saturating_sub(1);
                        if self.depth == 0 {
                            return Some(self.pos + 1);
                        }
                    }
                    _ => {}
                },
            }
            self.pos += 1;
        }
        None
    }
}
