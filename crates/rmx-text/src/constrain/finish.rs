//! A way to finish the output from where the parser stands: bytes the grammar accepts after
//! which it may end, found by a depth-first search that tries closing bytes first.
//!
//! Where a closing byte would end the lexeme the output is in (`"` in a string, `}` right
//! after `{`), it goes first: the same bytes elsewhere open things.
//!
//! The engine forces these bytes when the tokens left would not hold them otherwise, so an
//! answer under `max_tokens` ends as a whole JSON value (or a whole tool call) rather than cut
//! mid-string. For JSON, closing first (`"`, `}`, `]`) then the smallest values (`0`, `""`)
//! finds a short completion at once; a pattern-constrained string costs a few steps more. A
//! grammar the order does not suit (a Lark grammar whose shortest end is far down the byte
//! order) may exhaust the search's budget: then nothing is forced and the answer ends at
//! `max_tokens` as it would on any other server.

use llguidance::derivre::StateID;
use llguidance::earley::Parser;
use llguidance::toktrie::{Recognizer, TokTrie, INVALID_TOKEN};

/// Bytes that close what is open, where they end a lexeme.
const CLOSERS: &[u8] = b"\"}])";

/// The order bytes are tried in: what closes, then the shortest values, then the rest.
const FIRST: &[u8] = b"\"}]):,0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-._";
/// Whitespace goes last: where it is optional it never helps to end, and it can always go on.
/// So does `<`, which opens markup (`<think>`) where it is optional and closes nothing.
const LAST: &[u8] = b"< \t\r\n";

/// The longest completion looked for, in bytes.
const MAX_BYTES: usize = 2048;
/// Parser states looked at before the search gives up (each costs tens of microseconds, a few
/// hundred in a lexeme as wide as "any text").
const MAX_NODES: usize = 1024;
/// How many real choices (states with more than one byte allowed) a completion may take: a
/// short limit first, so a depth-first walk down a long wrong branch does not spend the whole
/// budget there, then a long one where the short one ran out of depth rather than budget.
/// Bytes the grammar forces (a key's name, a tool call's markup) are not choices.
const CHOICE_LIMITS: [usize; 2] = [32, 256];

/// What a search needs of the vocabulary, worked out once per grammar.
#[derive(Debug)]
pub(crate) struct Tables {
    order: Vec<u8>,
    /// By byte: the token that is that byte alone (INVALID_TOKEN where none is).
    single: Vec<u32>,
}

impl Tables {
    pub(crate) fn new(trie: &TokTrie) -> Tables {
        Tables {
            order: byte_order(),
            single: (0..=255u8)
                .map(|b| trie.token_id(&[b]).unwrap_or(INVALID_TOKEN))
                .collect(),
        }
    }
}

/// Bytes after which the grammar may end, from `parser`'s state (which is left as it was);
/// None where the search finds none within its budget.
pub(crate) fn completion(parser: &Parser, tables: &Tables) -> Option<Vec<u8>> {
    let mut search = Search {
        order: &tables.order,
        single: &tables.single,
        nodes: 0,
        too_deep: false,
        broken: false,
        path: Vec::new(),
        seen: Vec::new(),
    };
    for limit in CHOICE_LIMITS {
        search.nodes = 0;
        search.too_deep = false;
        search.path.clear();
        search.seen.clear();
        // One copy per search: the walk applies bytes to it and takes them back.
        let mut p = parser.clone();
        if search.walk(&mut p, limit) {
            return Some(search.path);
        }
        if !search.too_deep || search.broken {
            break;
        }
    }
    None
}

struct Search<'a> {
    order: &'a [u8],
    single: &'a [u32],
    nodes: usize,
    /// The walk stopped somewhere for want of choices rather than budget.
    too_deep: bool,
    /// Taking bytes back failed (a grammar with `stop=` lexemes cannot): the copy is spent.
    broken: bool,
    path: Vec<u8>,
    /// The lexer states the path has passed through, to prefer bytes that go somewhere new.
    seen: Vec<StateID>,
}

impl Search<'_> {
    /// Walks on from `p`; where that fails, `p` is back where it was.
    fn walk(&mut self, p: &mut Parser, choices: usize) -> bool {
        let (at, seen) = (self.path.len(), self.seen.len());
        if self.walk_from(p, choices) {
            return true;
        }
        self.seen.truncate(seen);
        let applied = self.path.len() - at;
        self.path.truncate(at);
        if applied > 0 && p.rollback(applied).is_err() {
            self.broken = true;
        }
        false
    }

    fn walk_from(&mut self, p: &mut Parser, choices: usize) -> bool {
        loop {
            if self.broken {
                return false;
            }
            // Bytes the parser already holds as forced (a mask computed them) come first:
            // the lexer stands after them, and applying anything else would contradict them.
            let forced = p.currently_forced_bytes().to_vec();
            if !forced.is_empty() {
                if p.apply_token(&forced, INVALID_TOKEN).is_err() {
                    self.broken = true;
                    return false;
                }
                self.path.extend_from_slice(&forced);
                continue;
            }
            if p.is_accepting() {
                return true;
            }
            if self.path.len() >= MAX_BYTES || self.nodes >= MAX_NODES {
                return false;
            }
            self.nodes += 1;
            let next = next_bytes(p);
            self.seen.push(next.here);
            let mut allowed = (0..=255u8).filter(|&b| next.to[b as usize].is_some());
            match (allowed.next(), allowed.next()) {
                (None, _) => return false,
                // One way on: no choice, and no need to keep a way back here.
                (Some(b), None) => {
                    if !self.apply(p, b) {
                        return false;
                    }
                }
                _ => return self.choose(p, &next, choices),
            }
        }
    }

    /// Applies byte `b` (one `next_bytes` allowed) and records it.
    fn apply(&mut self, p: &mut Parser, b: u8) -> bool {
        if p.apply_token(&[b], self.single[b as usize]).is_err() {
            self.broken = true;
            return false;
        }
        self.path.push(b);
        true
    }

    /// Tries the allowed bytes from a state with several: a closing byte that ends the lexeme
    /// first (`"` inside a string, `}` after `{`, `]` after `[`: the same bytes elsewhere open
    /// something, which is why no fixed order is right everywhere); then, in the byte order,
    /// those that take the lexer somewhere the path has not been (out of a loop such as an
    /// email's local part, `a*`, towards its `@`); then the rest.
    fn choose(&mut self, p: &mut Parser, next: &Next, choices: usize) -> bool {
        if choices == 0 {
            self.too_deep = true;
            return false;
        }
        let allowed = |b: u8| next.to[b as usize].is_some();
        let mut closing = None;
        for &b in CLOSERS.iter().filter(|&&b| allowed(b)) {
            if !self.apply(p, b) {
                return false;
            }
            let ends = !p.has_pending_lexeme_bytes();
            self.path.pop();
            if p.rollback(1).is_err() {
                self.broken = true;
                return false;
            }
            if ends {
                closing = Some(b);
                break;
            }
        }
        let new = |b: u8| next.to[b as usize].is_some_and(|s| !self.seen.contains(&s));
        let fresh: Vec<u8> = self.order.iter().copied().filter(|&b| new(b)).collect();
        let stale = self
            .order
            .iter()
            .copied()
            .filter(|&b| allowed(b) && !new(b));
        let order: Vec<u8> = closing.into_iter().chain(fresh).chain(stale).collect();
        let mut tried = [false; 256];
        for b in order {
            if std::mem::replace(&mut tried[b as usize], true) {
                continue;
            }
            if !self.apply(p, b) {
                return false;
            }
            if self.walk(p, choices - 1) {
                return true;
            }
            self.path.pop();
            if self.broken || p.rollback(1).is_err() {
                self.broken = true;
                return false;
            }
            if self.nodes >= MAX_NODES {
                return false;
            }
        }
        false
    }
}

/// Which bytes may come next, and the lexer state each leads to, from one speculative pass.
struct Next {
    here: StateID,
    to: [Option<StateID>; 256],
}

fn next_bytes(p: &mut Parser) -> Next {
    p.with_recognizer(|r| {
        r.trie_started("completion");
        let here = r.lexer_state();
        let mut to = [None; 256];
        for b in 0..=255u8 {
            // The marker byte starts a special token, never text.
            if b != TokTrie::SPECIAL_TOKEN_MARKER && r.try_push_byte(b) {
                to[b as usize] = Some(r.lexer_state());
                r.pop_bytes(1);
            }
        }
        r.trie_finished();
        Next { here, to }
    })
}

fn byte_order() -> Vec<u8> {
    let mut order = FIRST.to_vec();
    order.extend((0..=255u8).filter(|b| {
        !FIRST.contains(b) && !LAST.contains(b) && *b != TokTrie::SPECIAL_TOKEN_MARKER
    }));
    order.extend_from_slice(LAST);
    order
}
