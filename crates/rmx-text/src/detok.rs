//! Turning generated token ids into text as they come.
//!
//! Decoding each token alone is wrong twice over: SentencePiece decoders drop the leading
//! space ("▁") of the first token they see, and a character may be split over several tokens
//! (byte-level BPE, or byte-fallback tokens like `<0xE2>`). So, as Hugging Face TGI does, each
//! step decodes a short window — the tokens of the last emitted piece plus the new ones — and
//! emits what the window adds to the decode of its first part. Text that ends in U+FFFD is an
//! unfinished character and waits for the next token. The window only holds tokens since the
//! last emitted piece, so each step costs about the same however long the generation gets.

use std::sync::Arc;

use crate::tokenizer::{Tokenizer, TokenizerError};

const REPLACEMENT: char = '\u{FFFD}';

#[derive(Debug)]
pub struct Detokenizer {
    tokenizer: Arc<Tokenizer>,
    skip_special_tokens: bool,
    /// The tokens of the last emitted piece, then the ones not emitted yet.
    window: Vec<u32>,
    /// Where the not-yet-emitted tokens start in `window`.
    read: usize,
}

impl Detokenizer {
    /// A detokenizer that leaves special tokens (`<|eot_id|>`, ...) out of the text.
    pub fn new(tokenizer: Arc<Tokenizer>) -> Self {
        Self {
            tokenizer,
            skip_special_tokens: true,
            window: Vec::new(),
            read: 0,
        }
    }

    pub fn with_special_tokens(mut self, keep: bool) -> Self {
        self.skip_special_tokens = !keep;
        self
    }

    /// Adds one generated id and returns the text it completes (often empty).
    pub fn push(&mut self, id: u32) -> Result<String, TokenizerError> {
        self.window.push(id);
        let prefix = self.decode(&self.window[..self.read])?;
        let full = self.decode(&self.window)?;
        if full.ends_with(REPLACEMENT) {
            return Ok(String::new());
        }
        match full.strip_prefix(prefix.as_str()) {
            Some(delta) if !delta.is_empty() => {
                let delta = delta.to_string();
                self.window.drain(..self.read);
                self.read = self.window.len();
                Ok(delta)
            }
            // Nothing new yet (a skipped special token), or a decoder that rewrote the
            // window's start: keep the tokens and try again with the next one.
            _ => Ok(String::new()),
        }
    }

    /// Ends the stream: returns what was held back, including an unfinished character as
    /// the tokenizer decodes it (U+FFFD), so that all the pieces add up to the full decode.
    pub fn finish(&mut self) -> Result<String, TokenizerError> {
        let prefix = self.decode(&self.window[..self.read])?;
        let full = self.decode(&self.window)?;
        self.window.clear();
        self.read = 0;
        Ok(match full.strip_prefix(prefix.as_str()) {
            Some(rest) => rest.to_string(),
            None => full,
        })
    }

    fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        if ids.is_empty() {
            return Ok(String::new());
        }
        self.tokenizer.decode(ids, self.skip_special_tokens)
    }
}
