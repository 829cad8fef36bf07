//! A push automaton that knows whether the bytes so far begin one JSON object (RFC 8259, with
//! optional leading whitespace), and whether they are one whole object.
//!
//! It reads bytes, not characters, because byte-level BPE tokens end in the middle of UTF-8
//! sequences: inside strings it checks UTF-8 itself, byte by byte, so a token holding half a
//! character is accepted exactly when some continuation makes the text valid.
//!
//! The state is `Copy` (the container stack is a bit set, one bit per level), so the token
//! constraint can try each candidate token on a copy without allocating.
//!
//! [`JsonState::min_close`] is the length of the shortest text that completes the object; the
//! constraint uses it to finish the object before `max_tokens` runs out.

/// How deep objects and arrays may nest (the bit-set stack holds this many levels).
pub const MAX_DEPTH: u8 = 64;

/// What the next byte must be, outside the string and number details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Pos {
    /// Before the top-level `{`.
    Start,
    /// After `{`: a key or `}`.
    ObjectOpen,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After `:` or `,` in an array: a value.
    Value,
    /// After `[`: a value or `]`.
    ArrayOpen,
    /// After a value: `,` or the container's closing bracket.
    AfterValue,
    /// Inside a string; `key` says what follows its closing quote.
    Str {
        key: bool,
        esc: Esc,
        utf8: Utf8,
    },
    Number(Num),
    /// Inside `true`, `false` or `null`: which one and how many bytes are read.
    Literal {
        word: u8,
        at: u8,
    },
    /// The top-level object is closed.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Esc {
    None,
    /// After `\`.
    Backslash,
    /// Reading the hex digits of `\uXXXX`: how many are left and the value so far; `low` when
    /// this escape must be the low half of a surrogate pair.
    Hex {
        left: u8,
        value: u16,
        low: bool,
    },
    /// After a high surrogate: `\` of the low half must come.
    PairBackslash,
    /// After a high surrogate and `\`: `u` must come.
    PairU,
}

/// UTF-8 continuation bytes still to come, and the range the next one must fall in (RFC 3629
/// table 3-7: this excludes overlong forms and surrogates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Utf8 {
    left: u8,
    lo: u8,
    hi: u8,
}

const UTF8_NONE: Utf8 = Utf8 {
    left: 0,
    lo: 0x80,
    hi: 0xBF,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Num {
    /// After `-`: a digit.
    Minus,
    /// A leading `0`: no more integer digits.
    Zero,
    /// Integer digits, and how many.
    Int(u8),
    /// After `.`: a digit.
    Dot,
    Frac,
    /// After `e`: a sign or a digit.
    Exp,
    /// After `e+`: a digit.
    ExpSign,
    /// Exponent digits, and how many.
    ExpDigits(u8),
}

/// Numbers stay inside f64's range, so every parser reads them back (serde_json refuses
/// `1e999`): at most this many integer digits and two exponent digits.
const MAX_INT_DIGITS: u8 = 64;
const MAX_EXP_DIGITS: u8 = 2;

const WORDS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// Why a byte was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonError {
    /// The byte cannot come here.
    Unexpected,
    /// Containers nest deeper than [`MAX_DEPTH`].
    TooDeep,
}

/// What the top-level value must be. JSON mode wants an object; a schema's parts want a value
/// of the property's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Top {
    Object,
    Array,
    String,
    Number,
    Integer,
    /// Any JSON value.
    Any,
}

/// The automaton. `Default` is the state before any text of one JSON object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JsonState {
    pos: Pos,
    /// Bit i set: level i is an array, else an object.
    stack: u64,
    depth: u8,
    /// The whitespace run between tokens so far: spaces and tabs, plus [`WS_NEWLINE`] once a
    /// line break is in it.
    ws: u8,
    top: Top,
}

/// Between two tokens of JSON: at most one line break and this many spaces or tabs, as
/// llama.cpp's JSON grammar allows. Enough for pretty-printed output, and it keeps a model
/// that likes whitespace (random ones do) from filling its tokens with it.
const MAX_WS_RUN: u8 = 20;
const WS_NEWLINE: u8 = 0x80;

impl Default for JsonState {
    fn default() -> Self {
        JsonState {
            pos: Pos::Start,
            stack: 0,
            depth: 0,
            ws: 0,
            top: Top::Object,
        }
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl JsonState {
    pub fn new() -> Self {
        Self::default()
    }

    /// Before a top-level value of this kind.
    pub fn of(top: Top) -> Self {
        JsonState {
            top,
            ..Self::default()
        }
    }

    /// A top-level number could end here: a number's end is only known from the byte after
    /// it, which belongs to whatever follows the value.
    pub fn can_end(&self) -> bool {
        self.depth == 0
            && matches!(
                self.pos,
                Pos::Number(Num::Zero | Num::Int(_) | Num::Frac | Num::ExpDigits(_))
            )
    }

    /// The top-level object is closed: nothing more may follow.
    pub fn is_complete(&self) -> bool {
        self.pos == Pos::Done
    }

    /// Inside a string with no escape or character under way: text without `"`, `\\` and
    /// control bytes leaves the state as it is.
    pub fn in_plain_string(&self) -> bool {
        matches!(
            self.pos,
            Pos::Str {
                esc: Esc::None,
                utf8: Utf8 { left: 0, .. },
                ..
            }
        )
    }

    /// Open objects and arrays.
    pub fn depth(&self) -> u8 {
        self.depth
    }

    /// Feeds text; on error the state is unchanged and the error names the byte's offset.
    pub fn push_str(&mut self, text: &str) -> Result<(), (usize, JsonError)> {
        self.push_bytes(text.as_bytes())
    }

    pub fn push_bytes(&mut self, bytes: &[u8]) -> Result<(), (usize, JsonError)> {
        let mut s = *self;
        for (i, &b) in bytes.iter().enumerate() {
            s.push(b).map_err(|e| (i, e))?;
        }
        *self = s;
        Ok(())
    }

    /// Feeds one byte; on error the state is left as it was.
    pub fn push(&mut self, b: u8) -> Result<(), JsonError> {
        let next = self.step(b)?;
        *self = next;
        Ok(())
    }

    fn in_array(&self) -> bool {
        self.depth > 0 && self.stack & (1 << (self.depth - 1)) != 0
    }

    fn open(mut self, array: bool) -> Result<JsonState, JsonError> {
        if self.depth >= MAX_DEPTH {
            return Err(JsonError::TooDeep);
        }
        if array {
            self.stack |= 1 << self.depth;
        } else {
            self.stack &= !(1 << self.depth);
        }
        self.depth += 1;
        self.pos = if array {
            Pos::ArrayOpen
        } else {
            Pos::ObjectOpen
        };
        Ok(self)
    }

    /// A scalar value ended: the top-level one is the whole text.
    fn value_done(self) -> JsonState {
        self.with(if self.depth == 0 {
            Pos::Done
        } else {
            Pos::AfterValue
        })
    }

    fn close(mut self) -> JsonState {
        self.depth -= 1;
        self.pos = if self.depth == 0 {
            Pos::Done
        } else {
            Pos::AfterValue
        };
        self
    }

    fn with(mut self, pos: Pos) -> JsonState {
        self.pos = pos;
        self
    }

    fn string(self, key: bool) -> JsonState {
        self.with(Pos::Str {
            key,
            esc: Esc::None,
            utf8: UTF8_NONE,
        })
    }

    /// The start of a value.
    fn value(self, b: u8) -> Result<JsonState, JsonError> {
        Ok(match b {
            b'{' => self.open(false)?,
            b'[' => self.open(true)?,
            b'"' => self.string(false),
            b'-' => self.with(Pos::Number(Num::Minus)),
            b'0' => self.with(Pos::Number(Num::Zero)),
            b'1'..=b'9' => self.with(Pos::Number(Num::Int(1))),
            b't' => self.with(Pos::Literal { word: 0, at: 1 }),
            b'f' => self.with(Pos::Literal { word: 1, at: 1 }),
            b'n' => self.with(Pos::Literal { word: 2, at: 1 }),
            _ => return Err(JsonError::Unexpected),
        })
    }

    /// After a value: `,`, a closing bracket that matches, or whitespace.
    fn after_value(self, b: u8) -> Result<JsonState, JsonError> {
        match b {
            _ if is_ws(b) => Ok(self.with(Pos::AfterValue)),
            b',' if self.in_array() => Ok(self.with(Pos::Value)),
            b',' => Ok(self.with(Pos::Key)),
            b']' if self.in_array() => Ok(self.close()),
            b'}' if !self.in_array() => Ok(self.close()),
            _ => Err(JsonError::Unexpected),
        }
    }

    fn step(self, b: u8) -> Result<JsonState, JsonError> {
        let mut next = self.step_pos(b)?;
        next.ws = 0;
        if is_ws(b) && !matches!(self.pos, Pos::Str { .. }) {
            let newline = matches!(b, b'\n' | b'\r');
            if newline && self.ws & WS_NEWLINE != 0 {
                return Err(JsonError::Unexpected);
            }
            if !newline && self.ws & !WS_NEWLINE >= MAX_WS_RUN {
                return Err(JsonError::Unexpected);
            }
            next.ws = if newline {
                self.ws | WS_NEWLINE
            } else {
                self.ws + 1
            };
        }
        Ok(next)
    }

    fn step_pos(self, b: u8) -> Result<JsonState, JsonError> {
        use JsonError::Unexpected;
        match self.pos {
            Pos::Start => match (self.top, b) {
                _ if is_ws(b) => Ok(self),
                (Top::Object, b'{')
                | (Top::Array, b'[')
                | (Top::String, b'"')
                | (Top::Number | Top::Integer, b'-' | b'0'..=b'9')
                | (Top::Any, _) => self.value(b),
                _ => Err(Unexpected),
            },
            Pos::ObjectOpen => match b {
                _ if is_ws(b) => Ok(self),
                b'"' => Ok(self.string(true)),
                b'}' => Ok(self.close()),
                _ => Err(Unexpected),
            },
            Pos::Key => match b {
                _ if is_ws(b) => Ok(self),
                b'"' => Ok(self.string(true)),
                _ => Err(Unexpected),
            },
            Pos::Colon => match b {
                _ if is_ws(b) => Ok(self),
                b':' => Ok(self.with(Pos::Value)),
                _ => Err(Unexpected),
            },
            Pos::Value => match b {
                _ if is_ws(b) => Ok(self),
                _ => self.value(b),
            },
            Pos::ArrayOpen => match b {
                _ if is_ws(b) => Ok(self),
                b']' => Ok(self.close()),
                _ => self.value(b),
            },
            Pos::AfterValue => self.after_value(b),
            Pos::Str { key, esc, utf8 } => self.string_byte(key, esc, utf8, b),
            Pos::Number(n) => self.number_byte(n, b),
            Pos::Literal { word, at } => {
                let w = WORDS[word as usize];
                if w[at as usize] != b {
                    return Err(Unexpected);
                }
                if at as usize + 1 == w.len() {
                    Ok(self.value_done())
                } else {
                    Ok(self.with(Pos::Literal { word, at: at + 1 }))
                }
            }
            Pos::Done => Err(Unexpected),
        }
    }

    fn string_byte(self, key: bool, esc: Esc, utf8: Utf8, b: u8) -> Result<JsonState, JsonError> {
        use JsonError::Unexpected;
        let at = |esc: Esc, utf8: Utf8| Ok(self.with(Pos::Str { key, esc, utf8 }));
        if utf8.left > 0 {
            if !(utf8.lo..=utf8.hi).contains(&b) {
                return Err(Unexpected);
            }
            return at(
                esc,
                Utf8 {
                    left: utf8.left - 1,
                    ..UTF8_NONE
                },
            );
        }
        match esc {
            Esc::None => match b {
                b'"' if key => Ok(self.with(Pos::Colon)),
                b'"' => Ok(self.value_done()),
                b'\\' => at(Esc::Backslash, utf8),
                0x00..=0x1F => Err(Unexpected),
                0x20..=0x7F => Ok(self),
                0xC2..=0xDF => at(esc, lead(1, 0x80, 0xBF)),
                0xE0 => at(esc, lead(2, 0xA0, 0xBF)),
                0xED => at(esc, lead(2, 0x80, 0x9F)),
                0xE1..=0xEF => at(esc, lead(2, 0x80, 0xBF)),
                0xF0 => at(esc, lead(3, 0x90, 0xBF)),
                0xF1..=0xF3 => at(esc, lead(3, 0x80, 0xBF)),
                0xF4 => at(esc, lead(3, 0x80, 0x8F)),
                _ => Err(Unexpected),
            },
            Esc::Backslash => match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => at(Esc::None, utf8),
                b'u' => at(
                    Esc::Hex {
                        left: 4,
                        value: 0,
                        low: false,
                    },
                    utf8,
                ),
                _ => Err(Unexpected),
            },
            Esc::PairBackslash if b == b'\\' => at(Esc::PairU, utf8),
            Esc::PairU if b == b'u' => at(
                Esc::Hex {
                    left: 4,
                    value: 0,
                    low: true,
                },
                utf8,
            ),
            Esc::PairBackslash | Esc::PairU => Err(Unexpected),
            Esc::Hex { left, value, low } => {
                let digit = (b as char).to_digit(16).ok_or(Unexpected)? as u16;
                let value = value << 4 | digit;
                let left = left - 1;
                // Decide on the surrogate range as soon as the first two digits tell it, so a
                // token that cannot end well is refused where it starts.
                if left == 2 {
                    let top = value;
                    let is_low = (0xDC..=0xDF).contains(&top);
                    if (low && !is_low) || (!low && is_low) {
                        return Err(Unexpected);
                    }
                }
                if left > 0 {
                    return at(Esc::Hex { left, value, low }, utf8);
                }
                if !low && (0xD800..=0xDBFF).contains(&value) {
                    at(Esc::PairBackslash, utf8)
                } else {
                    at(Esc::None, utf8)
                }
            }
        }
    }

    fn number_byte(self, n: Num, b: u8) -> Result<JsonState, JsonError> {
        let num = |n| Ok(self.with(Pos::Number(n)));
        let digit = b.is_ascii_digit();
        let top = self.depth == 0;
        match (n, b) {
            (_, b'.' | b'e' | b'E') if top && self.top == Top::Integer => {
                Err(JsonError::Unexpected)
            }
            (Num::Minus, b'0') => num(Num::Zero),
            (Num::Minus, _) if digit => num(Num::Int(1)),
            (Num::Int(k), _) if digit && k < MAX_INT_DIGITS => num(Num::Int(k + 1)),
            (Num::Zero | Num::Int(_), b'.') => num(Num::Dot),
            (Num::Zero | Num::Int(_) | Num::Frac, b'e' | b'E') => num(Num::Exp),
            (Num::Dot | Num::Frac, _) if digit => num(Num::Frac),
            (Num::Exp, b'+' | b'-') => num(Num::ExpSign),
            (Num::Exp | Num::ExpSign, _) if digit => num(Num::ExpDigits(1)),
            (Num::ExpDigits(k), _) if digit && k < MAX_EXP_DIGITS => num(Num::ExpDigits(k + 1)),
            // A complete number ends at the first byte that is not part of it.
            (Num::Zero | Num::Int(_) | Num::Frac | Num::ExpDigits(_), _) if !digit && !top => {
                self.after_value(b)
            }
            _ => Err(JsonError::Unexpected),
        }
    }

    /// The length of the shortest text that makes this a complete value.
    pub fn min_close(&self) -> usize {
        // What closes the current value (or key), then what a key still needs.
        let (value_rest, key) = match self.pos {
            Pos::Done => return 0,
            Pos::Start => {
                return match self.top {
                    Top::Object | Top::Array | Top::String => 2,
                    Top::Number | Top::Integer | Top::Any => 1,
                }
            }
            Pos::ObjectOpen | Pos::ArrayOpen | Pos::AfterValue => (0, false),
            // `"":0`
            Pos::Key => (4, false),
            // `:0`
            Pos::Colon => (2, false),
            // `0`
            Pos::Value => (1, false),
            Pos::Str { key, esc, utf8 } => {
                let esc_rest = match esc {
                    Esc::None => 0,
                    Esc::Backslash => 1,
                    Esc::Hex { left, value, low } => {
                        let high_pending = !low
                            && left <= 2
                            && (0xD8..=0xDB).contains(&(value >> (4 * (2 - left))));
                        left as usize + if high_pending { 6 } else { 0 }
                    }
                    Esc::PairBackslash => 6,
                    Esc::PairU => 5,
                };
                (utf8.left as usize + esc_rest + 1, key)
            }
            Pos::Number(n) => match n {
                Num::Minus | Num::Dot | Num::Exp | Num::ExpSign => (1, false),
                _ => (0, false),
            },
            Pos::Literal { word, at } => (WORDS[word as usize].len() - at as usize, false),
        };
        value_rest + if key { 2 } else { 0 } + self.depth as usize
    }
}

fn lead(left: u8, lo: u8, hi: u8) -> Utf8 {
    Utf8 { left, lo, hi }
}

#[cfg(test)]
mod tests;
