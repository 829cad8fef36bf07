//! Constrained decoding: which token ids may come next so the output keeps a shape, for JSON
//! mode (`response_format: json_object`, Ollama `format: "json"`), JSON schemas (a subset:
//! see `schema`) and forced tool calls (`tool_choice: required` or a named function).
//!
//! A [`Constraint`] is the description a request carries (plain data, `Send`); the engine
//! builds a [`ConstraintState`] from it for each sequence and asks it, each step, for the ids
//! allowed next ([`ConstraintState::allowed`]), then tells it the id it chose
//! ([`ConstraintState::accept`]). Once the shape is complete the generation ends.
//!
//! The allowed set also keeps the output finishable: a token is allowed only if the shortest
//! completion after it still fits in the tokens left, so a model that rambles inside a string
//! is walked to a closed object before `max_tokens` rather than cut off mid-JSON.

mod grammar;
pub mod json;
mod schema;
mod trie;
mod vocab;
mod vocabulary;

use std::collections::HashMap;

use grammar::{GState, Grammar, Part};
use json::Top;

use crate::toolcall::ToolCallFormat;
pub use vocab::TokenBytes;
pub use vocabulary::Vocabulary;

/// What shape the output must take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// One JSON object.
    JsonObject,
    /// One JSON object with the properties and types of this JSON schema, as far as the
    /// `schema` module enforces them (any object where the schema says nothing it can).
    JsonSchema(serde_json::Value),
    /// One tool call in the model's markup, naming one of `names`, with a JSON object of
    /// arguments.
    ToolCall {
        format: ToolCallFormat,
        names: Vec<String>,
    },
}

/// Whether the model may think (in `<think>...</think>`, unconstrained) before the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Think {
    /// The output starts at once.
    #[default]
    No,
    /// The prompt ends inside `<think>`: free text until `</think>`, then the output.
    Inside,
    /// The model may open `<think>` with its first token (the `<think>` token itself).
    MayOpen,
}

/// A request's constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub output: Output,
    pub think: Think,
}

/// A constraint that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    #[error("forcing a tool call is not supported for the `{}` tool-call format (supported: hermes, llama3_json)", .0.name())]
    UnsupportedFormat(ToolCallFormat),
    #[error("forcing a tool call needs at least one tool name")]
    NoNames,
    #[error("no token of the vocabulary can continue the constrained output")]
    Stuck,
}

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &[u8] = b"</think>";

impl Constraint {
    pub fn json_object() -> Constraint {
        Constraint {
            output: Output::JsonObject,
            think: Think::No,
        }
    }

    pub fn json_schema(schema: serde_json::Value) -> Constraint {
        Constraint {
            output: Output::JsonSchema(schema),
            think: Think::No,
        }
    }

    /// A forced call of one of `names`; fails for formats this module cannot force.
    pub fn tool_call(
        format: ToolCallFormat,
        names: Vec<String>,
    ) -> Result<Constraint, ConstraintError> {
        let c = Constraint {
            output: Output::ToolCall { format, names },
            think: Think::No,
        };
        c.grammar()?;
        Ok(c)
    }

    pub fn with_think(mut self, think: Think) -> Constraint {
        self.think = think;
        self
    }

    fn grammar(&self) -> Result<Grammar, ConstraintError> {
        let (format, names) = match &self.output {
            Output::JsonObject => return Ok(Grammar::new(vec![Part::Json(Top::Object)])),
            Output::JsonSchema(s) => return Ok(Grammar::new(schema::object_parts(s))),
            Output::ToolCall { format, names } => (*format, names),
        };
        if names.is_empty() {
            return Err(ConstraintError::NoNames);
        }
        // Each name as JSON string content with its closing quote: no name is then a prefix
        // of another, so the `OneOf` knows where a name ends.
        let mut alts: Vec<Vec<u8>> = names
            .iter()
            .map(|n| {
                let quoted = serde_json::to_string(n).unwrap_or_else(|_| format!("\"{n}\""));
                quoted.as_bytes()[1..].to_vec()
            })
            .collect();
        alts.sort();
        alts.dedup();
        let lit = |s: &str| Part::Literal(s.as_bytes().to_vec());
        // The spellings the models' chat templates teach (and the parsers read back).
        Ok(Grammar::new(match format {
            ToolCallFormat::Hermes => vec![
                lit("<tool_call>\n{\"name\": \""),
                Part::OneOf(alts),
                lit(", \"arguments\": "),
                Part::Json(Top::Object),
                lit("}\n</tool_call>"),
            ],
            ToolCallFormat::Llama3Json => vec![
                lit("{\"name\": \""),
                Part::OneOf(alts),
                lit(", \"parameters\": "),
                Part::Json(Top::Object),
                lit("}"),
            ],
            other => return Err(ConstraintError::UnsupportedFormat(other)),
        }))
    }
}

/// Where the output is: thinking (with how much of `</think>` was just written), or in the
/// shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Thinking { closed: u8 },
    Shape(GState),
}

/// The tokens that keep the shape from one phase, and the shortest completion after each.
///
/// Inside a string nearly every token fits: those phases keep a dense mask the engine copies
/// as it is. Between values a few hundred do: those keep the ids alone, since a long JSON
/// answer passes through hundreds of such phases and a mask each would be megabytes.
#[derive(Debug)]
enum Candidates {
    Dense {
        /// By id: the shortest completion after it, or `REFUSED`.
        rest: Vec<u32>,
        /// By id: allowed when the tokens left do not bind.
        mask: Vec<bool>,
        shortest: u32,
        longest: u32,
    },
    Sparse {
        /// `(id, shortest completion after it)`.
        ids: Vec<(u32, u32)>,
        len: usize,
        shortest: u32,
    },
}

const REFUSED: u32 = u32::MAX;

/// Phases kept per sequence before the cache starts over.
const MAX_KEPT_PHASES: usize = 512;

impl Candidates {
    fn new(rest: Vec<u32>) -> Candidates {
        let fits = rest.iter().copied().filter(|&r| r != REFUSED);
        let shortest = fits.clone().min().unwrap_or(REFUSED);
        if fits.clone().count() * 16 < rest.len() {
            let ids = (0..rest.len() as u32)
                .zip(rest.iter().copied())
                .filter(|&(_, r)| r != REFUSED)
                .collect();
            return Candidates::Sparse {
                ids,
                len: rest.len(),
                shortest,
            };
        }
        Candidates::Dense {
            mask: rest.iter().map(|&r| r != REFUSED).collect(),
            longest: fits.max().unwrap_or(0),
            shortest,
            rest,
        }
    }

    /// The mask with `left` tokens left; `scratch` holds it when it is built for the call.
    fn within<'a>(
        &'a self,
        left: usize,
        scratch: &'a mut Vec<bool>,
    ) -> Result<&'a [bool], ConstraintError> {
        let (Candidates::Dense { shortest, .. } | Candidates::Sparse { shortest, .. }) = self;
        if *shortest == REFUSED {
            return Err(ConstraintError::Stuck);
        }
        let budget = (left.saturating_sub(1).min(REFUSED as usize - 1) as u32).max(*shortest);
        match self {
            Candidates::Dense {
                rest,
                mask,
                longest,
                ..
            } => {
                if budget >= *longest {
                    // Far from the end (the usual case): no filtering.
                    return Ok(mask);
                }
                scratch.clear();
                scratch.extend(rest.iter().map(|&r| r <= budget));
            }
            Candidates::Sparse { ids, len, .. } => {
                scratch.clear();
                scratch.resize(*len, false);
                for &(id, r) in ids {
                    if r <= budget {
                        scratch[id as usize] = true;
                    }
                }
            }
        }
        Ok(scratch)
    }
}

/// One sequence's constraint, advanced token by token.
#[derive(Debug)]
pub struct ConstraintState {
    cache: HashMap<Phase, Candidates>,
    scratch: Vec<bool>,
    grammar: Grammar,
    phase: Phase,
    /// The `<think>` token, while the model may still open a thought with it.
    think_open: Option<u32>,
}

impl ConstraintState {
    pub fn new(c: &Constraint, vocab: &TokenBytes) -> Result<ConstraintState, ConstraintError> {
        let grammar = c.grammar()?;
        let start = Phase::Shape(grammar.start());
        let (phase, think_open) = match c.think {
            Think::No => (start, None),
            Think::Inside => (Phase::Thinking { closed: 0 }, None),
            Think::MayOpen => (start, vocab.find(THINK_OPEN)),
        };
        Ok(ConstraintState {
            cache: HashMap::new(),
            scratch: Vec::new(),
            grammar,
            phase,
            think_open,
        })
    }

    /// The output has its whole shape: the generation should end here.
    pub fn is_complete(&self) -> bool {
        self.phase == Phase::Shape(GState::Done)
    }

    /// Where the phase goes with `bytes`; None if they break the shape.
    fn walk(&self, mut phase: Phase, bytes: &[u8]) -> Option<Phase> {
        for &b in bytes {
            phase = match phase {
                Phase::Thinking { closed } => {
                    let closed = if THINK_CLOSE[closed as usize] == b {
                        closed + 1
                    } else {
                        u8::from(b == b'<')
                    };
                    if closed as usize == THINK_CLOSE.len() {
                        Phase::Shape(self.grammar.start())
                    } else {
                        Phase::Thinking { closed }
                    }
                }
                Phase::Shape(s) => Phase::Shape(self.grammar.step(s, b)?),
            };
        }
        Some(phase)
    }

    /// The shortest text that completes the output from `phase`.
    fn min_rest(&self, phase: Phase) -> usize {
        match phase {
            Phase::Thinking { closed } => {
                THINK_CLOSE.len() - closed as usize + self.grammar.min_rest(self.grammar.start())
            }
            Phase::Shape(s) => self.grammar.min_rest(s),
        }
    }

    /// Every token that keeps the shape from `phase`, with the shortest completion after it.
    fn candidates(&self, vocab: &TokenBytes, phase: Phase) -> Vec<u32> {
        let mut rest = vec![REFUSED; vocab.len()];
        let mut put = |id: u32, r: usize| rest[id as usize] = r.min(REFUSED as usize - 1) as u32;
        if let Phase::Shape(GState::Json { json, .. }) = phase {
            if json.in_plain_string() {
                // Most of the vocabulary is plain text here: take it as it is, walk the rest.
                let (plain, other) = vocab.string_split();
                let same = self.min_rest(phase);
                for &id in plain {
                    put(id, same);
                }
                for &id in other {
                    if let Some(p) = vocab.get(id).and_then(|b| self.walk(phase, b)) {
                        put(id, self.min_rest(p));
                    }
                }
                return rest;
            }
        }
        vocab.trie().walk(
            phase,
            |p, b| self.walk(p, &[b]),
            |id, p| put(id, self.min_rest(p)),
        );
        rest
    }

    /// The ids that may come next, as a mask by id over the vocabulary, with `left` tokens
    /// left to generate counting this one. Each allowed token leaves a completion short
    /// enough for the tokens after it (one byte per token at worst); where none does, the
    /// ones that leave the shortest are allowed.
    ///
    /// The candidates of a phase are kept: inside a string, say, the phase is the same token
    /// after token, and walking 150K pieces again each step would be most of the cost.
    pub fn allowed_mask(
        &mut self,
        vocab: &TokenBytes,
        left: usize,
    ) -> Result<&[bool], ConstraintError> {
        let phase = self.phase;
        if !self.cache.contains_key(&phase) {
            let mut rest = self.candidates(vocab, phase);
            if let (Some(open), Phase::Shape(s)) = (self.think_open, phase) {
                if s == self.grammar.start() {
                    if let Some(slot) = rest.get_mut(open as usize) {
                        *slot = self.min_rest(Phase::Thinking { closed: 0 }) as u32;
                    }
                }
            }
            if self.cache.len() >= MAX_KEPT_PHASES {
                self.cache.clear();
            }
            self.cache.insert(phase, Candidates::new(rest));
        }
        let c = &self.cache[&phase];
        c.within(left, &mut self.scratch)
    }

    /// [`ConstraintState::allowed_mask`] as a list of ids.
    pub fn allowed(
        &mut self,
        vocab: &TokenBytes,
        left: usize,
    ) -> Result<Vec<u32>, ConstraintError> {
        let mask = self.allowed_mask(vocab, left)?;
        Ok((0..mask.len() as u32)
            .filter(|&i| mask[i as usize])
            .collect())
    }

    /// Advances by the chosen id (one [`ConstraintState::allowed`] returned).
    pub fn accept(&mut self, vocab: &TokenBytes, id: u32) -> Result<(), ConstraintError> {
        let start = Phase::Shape(self.grammar.start());
        if let Some(open) = self.think_open.take() {
            // The start phase's kept candidates let `<think>` in: the shape's start after a
            // thought must not.
            self.cache.remove(&start);
            if open == id && self.phase == start {
                self.phase = Phase::Thinking { closed: 0 };
                return Ok(());
            }
        }
        let bytes = vocab.get(id).ok_or(ConstraintError::Stuck)?;
        self.phase = self.walk(self.phase, bytes).ok_or(ConstraintError::Stuck)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
