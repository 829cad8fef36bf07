//! One sequence's constraint, advanced token by token: the mask of allowed ids, the id chosen,
//! and the completion forced when the tokens left would not hold it otherwise.

use std::collections::VecDeque;

use llguidance::toktrie::SimpleVob;
use llguidance::TokenParser;

use std::sync::Arc;

use super::{finish, guarded, Compiled, ConstraintError, Think};

/// Free tokens stop this many tokens before the completion would no longer fit: one free token
/// can lengthen the completion (opening a string, an object, a key whose name is forced), and
/// this is the room for it. A sequence that sees the completion grow more between two looks
/// widens its own margin (`ConstraintState::margin`), up to `MAX_MARGIN`.
const SAFETY: usize = 8;
const MAX_MARGIN: usize = 64;

/// Failed searches for a completion before a sequence stops looking (each can cost a fraction
/// of a second in a grammar the search does not suit).
const MAX_MISSES: u8 = 2;

/// One sequence's constraint.
pub struct ConstraintState {
    parser: TokenParser,
    tables: Arc<finish::Tables>,
    /// Where a thought may open: the shape alone, followed while the output can still be the
    /// shape with no thought (the completion is looked for there, not in a thought).
    shape_only: Option<TokenParser>,
    think: Think,
    /// The output's bytes so far (a special token as llguidance spells it), to tell whether a
    /// thought is still open.
    out: Vec<u8>,
    /// Tokens forced to finish the output within the tokens left, next first.
    plan: VecDeque<u32>,
    /// Tokens the last completion found took (None: not looked for yet), and steps since.
    need: Option<usize>,
    since: usize,
    /// Tokens kept between the completion and the end: SAFETY, or the most the completion
    /// grew between two looks.
    margin: usize,
    /// Searches that found no completion: after a few, the grammar is taken to be one the
    /// search does not suit, and the output may end at `max_tokens` unfinished.
    misses: u8,
    complete: bool,
}

impl std::fmt::Debug for ConstraintState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConstraintState")
            .field("think", &self.think)
            .field("out", &String::from_utf8_lossy(&self.out))
            .field("plan", &self.plan)
            .field("need", &self.need)
            .field("margin", &self.margin)
            .field("misses", &self.misses)
            .field("since", &self.since)
            .field("complete", &self.complete)
            .finish_non_exhaustive()
    }
}

impl ConstraintState {
    pub fn new(c: &Compiled) -> ConstraintState {
        ConstraintState {
            parser: c.parser.clone(),
            tables: c.tables.clone(),
            shape_only: c.shape_only.clone(),
            think: c.think,
            out: Vec::new(),
            plan: VecDeque::new(),
            need: None,
            since: 0,
            margin: SAFETY,
            misses: 0,
            complete: false,
        }
    }

    /// The output has its whole shape: the generation should end here.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// How many ids a mask covers.
    pub fn width(&self) -> usize {
        self.parser.token_env.tok_trie().vocab_size()
    }

    /// The ids that may come next, with `left` tokens left to generate counting this one.
    pub fn mask(&mut self, left: usize) -> Result<Mask, ConstraintError> {
        if self.plan.is_empty() && self.due(left) {
            self.look_ahead(left);
        }
        if let Some(&next) = self.plan.front() {
            return Ok(Mask::One(next));
        }
        guarded(|| self.parser.compute_mask())
            .map(Mask::Set)
            .map_err(stuck)
    }

    /// Advances by the chosen id (one the last mask allowed).
    pub fn accept(&mut self, id: u32) -> Result<(), ConstraintError> {
        if self.plan.front() == Some(&id) {
            self.plan.pop_front();
        } else {
            self.plan.clear();
        }
        let parser = &mut self.parser;
        let stopped = guarded(|| {
            let backtrack = parser.consume_token(id)?;
            anyhow::ensure!(backtrack == 0, "the grammar asked to take back tokens");
            parser.check_stop()
        })
        .map_err(stuck)?;
        if let Some(shape) = self.shape_only.as_mut() {
            let follows =
                guarded(|| Ok(shape.validate_token(id)? && shape.consume_token(id)? == 0));
            if !follows.unwrap_or(false) {
                self.shape_only = None;
            }
        }
        let trie = self.parser.token_env.tok_trie();
        self.out.extend_from_slice(trie.token(id));
        self.complete = stopped;
        self.since += 1;
        Ok(())
    }

    /// Whether to look for a completion now: at the first step, then more often as the
    /// tokens left come down to what the last one needed.
    fn due(&self, left: usize) -> bool {
        if self.misses >= MAX_MISSES {
            return false;
        }
        // Before the first look the completion is taken to be short: an answer with many
        // tokens left is first looked at a quarter of the way in (each look costs a search).
        let need = self.need.unwrap_or(0);
        self.since >= left.saturating_sub(need + self.margin) / 4
    }

    /// Finds a completion and forces it if it only just fits in `left`.
    fn look_ahead(&mut self, left: usize) {
        let plan = match self.completion() {
            Ok(plan) => plan,
            // Mid-character in a thought: the next token completes it; look again then.
            Err(Miss::NotNow) => return,
            Err(Miss::NotFound) => {
                // Nothing to force; look again a while later.
                self.since = 0;
                self.need = Some(0);
                self.misses += 1;
                return;
            }
        };
        self.since = 0;
        if let Some(before) = self.need.filter(|&n| n > 0) {
            let grew = plan.len().saturating_sub(before);
            self.margin = self.margin.max(grew + 2).min(MAX_MARGIN);
        }
        self.need = Some(plan.len());
        if plan.len() + self.margin >= left {
            self.plan = plan.into();
        }
    }

    /// Tokens that finish the output from here: the close of an open thought, then bytes the
    /// grammar may end after, spelled greedily in the vocabulary's longest pieces.
    fn completion(&self) -> Result<Vec<u32>, Miss> {
        let trie = self.parser.token_env.tok_trie();
        let mut tokens = Vec::new();
        let mut from = self.shape_only.as_ref().unwrap_or(&self.parser).clone();
        if let Some(close) = self.thought_close().filter(|_| self.shape_only.is_none()) {
            // Within a thought every byte is text, and the search's closing-first order would
            // write text forever: the thought's close comes first, as itself. It cannot follow
            // half a UTF-8 character (the thought is text), which the next token completes.
            let close_ids = match trie.get_special_token("</think>") {
                Some(id) => vec![id],
                None => trie.greedy_tokenize(&close),
            };
            for &id in &close_ids {
                let fits = guarded(|| from.validate_token(id)).unwrap_or(false);
                if !fits || guarded(|| from.consume_token(id)).is_err() {
                    return Err(Miss::NotNow);
                }
            }
            tokens.extend(close_ids);
        }
        let parser = &from.parser;
        let tables = &self.tables;
        let bytes = guarded(|| Ok(finish::completion(parser, tables)))
            .ok()
            .flatten()
            .ok_or(Miss::NotFound)?;
        tokens.extend(trie.greedy_tokenize(&bytes));
        // Any spelling of bytes the grammar accepts is accepted, but a vocabulary with holes
        // can lose a byte to greedy spelling: check the whole plan before relying on it.
        let mut check = self.parser.clone();
        let valid = guarded(|| check.validate_tokens_raw(&tokens)).unwrap_or(0);
        if valid == tokens.len() {
            Ok(tokens)
        } else {
            Err(Miss::NotFound)
        }
    }

    /// The bytes that close the thought the output is in, if it is in one.
    fn thought_close(&self) -> Option<Vec<u8>> {
        const OPEN: &[u8] = b"<think>";
        const CLOSE: &[u8] = b"</think>";
        let closed = |text: &[u8]| text.windows(CLOSE.len()).any(|w| w == CLOSE);
        match self.think {
            Think::No => None,
            Think::Inside => (!closed(&self.out)).then(|| CLOSE.to_vec()),
            Think::MayOpen => {
                // A special `<think>` is the marker byte and the name.
                let out = self.out.strip_prefix(&[0xFF]).unwrap_or(&self.out);
                if out.len() < OPEN.len() && OPEN.starts_with(out) && !out.is_empty() {
                    let mut rest = OPEN[out.len()..].to_vec();
                    rest.extend_from_slice(CLOSE);
                    Some(rest)
                } else if out.starts_with(OPEN) && !closed(&out[OPEN.len()..]) {
                    Some(CLOSE.to_vec())
                } else {
                    None
                }
            }
        }
    }
}

/// Why no completion came back.
enum Miss {
    /// Not from this state (half a character in a thought); the next one will do.
    NotNow,
    /// The search found none.
    NotFound,
}

/// The ids allowed next.
#[derive(Debug)]
pub enum Mask {
    /// Only this one (a forced completion, or a forced token of the grammar).
    One(u32),
    Set(SimpleVob),
}

impl Mask {
    /// Writes the mask over `out` (its length is the width that matters: ids past the mask's
    /// are never allowed).
    pub fn fill(&self, out: &mut [bool]) {
        out.fill(false);
        match self {
            Mask::One(id) => {
                if let Some(slot) = out.get_mut(*id as usize) {
                    *slot = true;
                }
            }
            Mask::Set(set) => {
                // Whole words at once where they are all set or all clear: inside a string
                // nearly every id is allowed, between values nearly none, and this runs for
                // 150K ids every step.
                for (chunk, &word) in out.chunks_mut(32).zip(set.as_slice()) {
                    match word {
                        0 => {}
                        u32::MAX => chunk.fill(true),
                        mut bits => {
                            while bits != 0 {
                                let bit = bits.trailing_zeros() as usize;
                                if let Some(slot) = chunk.get_mut(bit) {
                                    *slot = true;
                                }
                                bits &= bits - 1;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Writes the mask over `out` as bits, 32 ids a word (id `i` is bit `i % 32` of word
    /// `i / 32`), as llguidance keeps it; ids past `out` are never allowed.
    pub fn fill_words(&self, out: &mut [u32]) {
        out.fill(0);
        match self {
            Mask::One(id) => {
                if let Some(w) = out.get_mut(*id as usize / 32) {
                    *w = 1 << (id % 32);
                }
            }
            Mask::Set(set) => {
                let words = set.as_slice();
                let n = words.len().min(out.len());
                out[..n].copy_from_slice(&words[..n]);
            }
        }
    }

    /// Whether `id` is allowed.
    pub fn allows(&self, id: u32) -> bool {
        match self {
            Mask::One(one) => *one == id,
            Mask::Set(set) => (id as usize) < set.len() && set.is_allowed(id),
        }
    }

    /// The allowed ids, in order.
    pub fn ids(&self) -> Vec<u32> {
        match self {
            Mask::One(id) => vec![*id],
            Mask::Set(set) => set.to_list(),
        }
    }
}

fn stuck(e: anyhow::Error) -> ConstraintError {
    ConstraintError::Stuck(e.to_string())
}
