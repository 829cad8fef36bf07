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
