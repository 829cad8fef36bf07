//! The shapes of constrained output: a sequence of fixed text, one name out of a list, and JSON
//! objects. That is enough for JSON mode and for a tool call in markup around a JSON object;
//! anything richer would want a real grammar engine.

use super::json::{JsonState, Top};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// Exactly these bytes.
    Literal(Vec<u8>),
    /// One of these byte strings; none is a prefix of another, and they are sorted, so the
    /// ones that share a prefix sit together.
    OneOf(Vec<Vec<u8>>),
    /// One JSON value of this kind (leading whitespace allowed).
    Json(Top),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grammar {
    parts: Vec<Part>,
    /// The shortest text each part and all after it need, by part.
    min_from: Vec<usize>,
}

/// Where in the grammar the output is; `Copy`, so candidates are tried on copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum GState {
    /// `at` bytes of literal `part` are written.
    Literal {
        part: u8,
        at: u16,
    },
    /// `at` bytes of a `OneOf` are written, matching alternative `alt` (the first that does).
    OneOf {
        part: u8,
        alt: u16,
        at: u16,
    },
    Json {
        part: u8,
        json: JsonState,
    },
    Done,
}

impl Grammar {
    pub(crate) fn new(parts: Vec<Part>) -> Grammar {
        let mut min_from = vec![0; parts.len() + 1];
        for (i, p) in parts.iter().enumerate().rev() {
            let own = match p {
                Part::Literal(l) => l.len(),
                Part::OneOf(alts) => alts.iter().map(Vec::len).min().unwrap_or(0),
                Part::Json(top) => JsonState::of(*top).min_close(),
            };
            min_from[i] = own + min_from[i + 1];
        }
        Grammar { parts, min_from }
    }

    pub(crate) fn start(&self) -> GState {
        self.enter(0)
    }

    fn enter(&self, part: usize) -> GState {
        let p = part as u8;
        match self.parts.get(part) {
            None => GState::Done,
            Some(Part::Literal(_)) => GState::Literal { part: p, at: 0 },
            Some(Part::OneOf(_)) => GState::OneOf {
                part: p,
                alt: 0,
                at: 0,
            },
            Some(Part::Json(top)) => GState::Json {
                part: p,
                json: JsonState::of(*top),
            },
        }
    }

    pub(crate) fn step(&self, s: GState, b: u8) -> Option<GState> {
        match s {
            GState::Done => None,
            GState::Literal { part, at } => {
                let Part::Literal(lit) = &self.parts[part as usize] else {
                    return None;
                };
                if lit.get(at as usize) != Some(&b) {
                    return None;
                }
                let at = at + 1;
                Some(if at as usize == lit.len() {
                    self.enter(part as usize + 1)
                } else {
                    GState::Literal { part, at }
                })
            }
            GState::OneOf { part, alt, at } => {
                let Part::OneOf(alts) = &self.parts[part as usize] else {
                    return None;
                };
                let n = at as usize;
                let head = &alts[alt as usize][..n];
                let j = alts[alt as usize..]
                    .iter()
                    .take_while(|a| a.len() >= n && &a[..n] == head)
                    .position(|a| a.get(n) == Some(&b))?
                    + alt as usize;
                Some(if alts[j].len() == n + 1 {
                    self.enter(part as usize + 1)
                } else {
                    GState::OneOf {
                        part,
                        alt: j as u16,
                        at: at + 1,
                    }
                })
            }
            GState::Json { part, mut json } => {
                if json.push(b).is_err() {
                    // A number ends at the first byte that is not its own: that byte is the
                    // next part's.
                    return if json.can_end() {
                        self.step(self.enter(part as usize + 1), b)
                    } else {
                        None
                    };
                }
                Some(if json.is_complete() {
                    self.enter(part as usize + 1)
                } else {
                    GState::Json { part, json }
                })
            }
        }
    }

    /// The length of the shortest text that completes the grammar from `s`.
    pub(crate) fn min_rest(&self, s: GState) -> usize {
        match s {
            GState::Done => 0,
            GState::Literal { part, at } => {
                let p = part as usize;
                self.min_from[p] - at as usize
            }
            GState::OneOf { part, alt, at } => {
                let p = part as usize;
                let Part::OneOf(alts) = &self.parts[p] else {
                    return 0;
                };
                let n = at as usize;
                let head = &alts[alt as usize][..n];
                let own = alts[alt as usize..]
                    .iter()
                    .take_while(|a| a.len() >= n && &a[..n] == head)
                    .map(|a| a.len() - n)
                    .min()
                    .unwrap_or(0);
                own + self.min_from[p + 1]
            }
            GState::Json { part, json } => json.min_close() + self.min_from[part as usize + 1],
        }
    }
}
