//! Finding markers in text that arrives in pieces.

use super::lenient_json::ValueScan;

/// The earliest occurrence of any of `markers` in `text`: (position, marker index). At equal
/// positions the longer marker wins.
pub(crate) fn find_first<'m>(
    text: &str,
    markers: impl IntoIterator<Item = &'m str>,
) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize, usize)> = None;
    for (i, m) in markers.into_iter().enumerate() {
        if m.is_empty() {
            continue;
        }
        if let Some(pos) = text.find(m) {
            let better = match best {
                None => true,
                Some((bp, _, bl)) => pos < bp || (pos == bp && m.len() > bl),
            };
            if better {
                best = Some((pos, i, m.len()));
            }
        }
    }
    best.map(|(pos, i, _)| (pos, i))
}

/// The length of the longest end of `text` that is the start of some marker (but not a whole
/// one): that much must be held back, since the next piece may complete the marker.
pub(crate) fn partial_marker_len<'m>(
    text: &str,
    markers: impl IntoIterator<Item = &'m str>,
) -> usize {
    let mut longest = 0;
    for m in markers {
        let max = m.len().saturating_sub(1).min(text.len());
        for len in (longest + 1..=max).rev() {
            let start = text.len() - len;
            if text.is_char_boundary(start) && m.as_bytes().starts_with(&text.as_bytes()[start..]) {
                longest = len;
                break;
            }
        }
    }
    longest
}

/// Where the whitespace at the end of `text` starts.
pub(crate) fn trailing_ws_start(text: &str) -> usize {
    text.trim_end().len()
}

/// How far the text of a call being received has been looked at, kept between deltas so that
/// each delta costs time in proportion to itself, not to the call so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct BodyScan {
    /// Where to go on looking from.
    pub pos: usize,
    /// The end of the last complete JSON value of a run (Llama 3's `{..}; {..}`).
    pub last_end: Option<usize>,
    /// The value being read, if its start has been seen.
    pub value: Option<ValueScan>,
    /// Where a JSON body's markers outside its strings have been looked for.
    pub tags: TagScan,
}

/// A search for a call's closing (or a new call's opening) tag in a JSON body that does not
/// stop at tags inside JSON strings: an argument may well hold the text `</tool_call>`. Double
/// quotes start and end strings (with backslash escapes); a raw newline also ends one, since
/// JSON strings cannot hold one, so a model's unterminated string does not hide the real tag
/// on the next line. Once the top-level value has closed, quotes no longer count.
#[derive(Debug, Clone, Default)]
pub(crate) struct TagScan {
    pos: usize,
    in_string: bool,
    escaped: bool,
    depth: usize,
    closed: bool,
}

impl TagScan {
    /// The first of `markers` in `body` outside strings: (position, marker index). Resumes
    /// where the last call stopped, so each delta is looked at once.
    pub fn find(&mut self, body: &str, markers: &[&str]) -> Option<(usize, usize)> {
        let b = body.as_bytes();
        while self.pos < b.len() {
            let c = b[self.pos];
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if c == b'\\' {
                    self.escaped = true;
                } else if c == b'"' || c == b'\n' {
                    self.in_string = false;
                }
            } else {
                let rest = &b[self.pos..];
                for (i, m) in markers.iter().enumerate() {
                    if rest.starts_with(m.as_bytes()) {
                        return Some((self.pos, i));
                    }
                    if !m.is_empty() && m.as_bytes().starts_with(rest) {
                        // The end may be the start of a marker: look again with more text.
                        return None;
                    }
                }
                match c {
                    b'"' if !self.closed => self.in_string = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        self.depth = self.depth.saturating_sub(1);
                        self.closed |= self.depth == 0;
                    }
                    _ => {}
                }
            }
            self.pos += 1;
        }
        None
    }
}

impl BodyScan {
    /// Where a search for markers of up to `longest` bytes must restart in `text` so that
    /// none straddling the old end is missed; bytes before it were searched already.
    pub fn search_from(&self, text: &str, longest: usize) -> usize {
        let mut from = self.pos.saturating_sub(longest).min(text.len());
        while !text.is_char_boundary(from) {
            from -= 1;
        }
        from
    }
}
