//! A prompt's tokens when it must fit in a context. Text far longer than the context is counted
//! piece by piece and refused as soon as it has clearly passed the limit, so that a huge
//! request costs what the context's worth of tokens costs, not what its whole text would
//! (issue #20: a 26 MiB prompt took 17 s and 3 GB to tokenize whole, for a model whose context
//! is 512 tokens).
//!
//! The count of the pieces is a lower bound of the whole text's up to a slack per cut: the cuts
//! fall before whitespace, where every tokenizer's pre-tokenizer splits too (byte-level BPE's
//! regex, SentencePiece's metaspace, WordPiece's whitespace split), so the tokens on either side
//! are the same as in the whole text; a cut that finds no whitespace near it splits one word
//! in two, which changes its tokens by a few at most. Only a count past the limit by more than
//! the slack of every cut refuses; anything else is tokenized whole, exactly.

use crate::tokenizer::{Tokenizer, TokenizerError};

#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// `at_least` is a lower bound of the text's tokens, more than `limit`.
    #[error("the text has more than {limit} tokens (at least {at_least})")]
    TooLong { at_least: usize, limit: usize },
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
}

/// Text of up to this many bytes per token of the limit is tokenized whole at once: real text
/// averages about 4 (English prose about 4.5, code about 3, CJK fewer), so such text may well
/// fit, and counting it first would tokenize it twice.
const WHOLE_BYTES_PER_TOKEN: usize = 8;
/// The size of the pieces a longer text is counted in, in bytes.
const PIECE: usize = 64 << 10;
/// How many tokens a cut between two pieces may change their count by.
const CUT_SLACK: usize = 8;

impl Tokenizer {
    /// [`Tokenizer::encode`] of a prompt that must have at most `limit` tokens: text clearly
    /// longer is refused with [`LimitError::TooLong`] after counting little more than `limit`
    /// tokens of it. Any other text comes back whole, exactly as `encode` gives it (the caller
    /// still checks its length: text just past the limit is not refused here).
    pub fn encode_within(
        &self,
        text: &str,
        add_special_tokens: bool,
        limit: usize,
    ) -> Result<Vec<u32>, LimitError> {
        if text.len() > limit.saturating_mul(WHOLE_BYTES_PER_TOKEN).max(PIECE) {
            let at_least = self.count_at_least(text, limit)?;
            if at_least > limit {
                return Err(LimitError::TooLong { at_least, limit });
            }
        }
        Ok(self.encode(text, add_special_tokens)?)
    }

    /// A lower bound of the tokens of `text` (special tokens of the post-processor left out),
    /// counted piece by piece; the count stops once the bound passes `stop_past`.
    pub fn count_at_least(&self, text: &str, stop_past: usize) -> Result<usize, TokenizerError> {
        let (mut counted, mut cuts, mut rest) = (0usize, 0usize, text);
        while !rest.is_empty() {
            let piece = first_piece(rest);
            rest = &rest[piece.len()..];
            counted += self
                .inner()
                .encode_fast(piece, false)
                .map_err(TokenizerError::Encode)?
                .len();
            cuts += usize::from(!rest.is_empty());
            if counted.saturating_sub(cuts * CUT_SLACK) > stop_past {
                break;
            }
        }
        Ok(counted.saturating_sub(cuts * CUT_SLACK))
    }
}

/// The first piece of `text`: at most [`PIECE`] bytes, cut before the last whitespace in its
/// second half, else (one long word) at a character boundary.
fn first_piece(text: &str) -> &str {
    if text.len() <= PIECE {
        return text;
    }
    let mut end = PIECE;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut half = end / 2;
    while !text.is_char_boundary(half) {
        half += 1;
    }
    match text[half..end].rfind(char::is_whitespace) {
        Some(at) => &text[..half + at],
        None => &text[..end],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_end_before_whitespace_or_at_a_character() {
        let words = "ab ".repeat(PIECE);
        let piece = first_piece(&words);
        assert!(piece.len() <= PIECE && piece.len() > PIECE / 2);
        assert!(
            words[piece.len()..].starts_with(' '),
            "cut before the space"
        );
        let cjk = "你".repeat(PIECE);
        let piece = first_piece(&cjk);
        assert!(piece.len() <= PIECE && cjk.is_char_boundary(piece.len()));
        assert_eq!(first_piece("short"), "short");
    }
}
