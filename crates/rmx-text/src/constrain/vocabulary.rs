//! The model's vocabulary as llguidance reads it: every token id's bytes in a [`TokTrie`], and
//! a tokenizer for the bytes a grammar forces ([`TokenizerEnv`]).
//!
//! llguidance's own adapter, `toktrie_hf_tokenizers`, pins `tokenizers` 0.21 while rmx is on
//! 0.22; taking it would build a second copy of the heaviest dependency in the tree (with its
//! C regex library). The rules here are that crate's, on our tokenizer:
//!
//! - a byte-level vocabulary (GPT-2, Qwen, Llama 3) spells each byte as one printable
//!   character; a SentencePiece one spells the space as `▁` and raw bytes as `<0xNN>`;
//! - special tokens are llguidance's marker byte (0xFF, never valid UTF-8) and their name, so
//!   no grammar text can be spelled with them and a Lark grammar can name them (`<|im_end|>`);
//! - added tokens that are not special (Qwen's `<tool_call>`, `<think>`) are their text, so the
//!   literal `<tool_call>` in a grammar is written with the one token the model was taught.
//!
//! Unlike that crate, the ids past the tokenizer up to the width of the model's logits (padded
//! embedding tables) are placeholders that no grammar allows.

use std::sync::Arc;

use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv, INVALID_TOKEN};
use tokenizers::normalizers::{self, NormalizerWrapper};
use tokenizers::pre_tokenizers::metaspace::PrependScheme;
use tokenizers::pre_tokenizers::{self, PreTokenizerWrapper};

use crate::tokenizer::Tokenizer;

/// A vocabulary for llguidance: token bytes in a trie, the EOS ids, and the text tokenizer that
/// spells forced bytes the way the model would.
pub struct Vocabulary {
    trie: TokTrie,
    /// Tokenizes fragments of output. None: greedy over the trie (tests' toy vocabularies).
    fragments: Option<tokenizers::Tokenizer>,
}

impl std::fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocabulary")
            .field("size", &self.trie.vocab_size())
            .field("eos", &self.trie.eos_tokens())
            .finish_non_exhaustive()
    }
}

impl Vocabulary {
    /// The vocabulary of `tokenizer`, `width` ids wide (the model's logits; at least the
    /// tokenizer's size).
    pub fn from_tokenizer(tokenizer: &Tokenizer, width: usize) -> Vocabulary {
        let inner = tokenizer.inner();
        let byte_level = inner
            .get_decoder()
            .and_then(|d| serde_json::to_value(d).ok())
            .is_some_and(|v| mentions_byte_level(&v));
        let to_byte = byte_level.then(unicode_to_byte);
        let spell = |text: &str| -> Option<Vec<u8>> {
            match &to_byte {
                Some(map) => text.chars().map(map).collect(),
                None => Some(sentencepiece_bytes(text)),
            }
        };
        let added = inner.get_added_tokens_decoder();
        let n = inner.get_vocab_size(true).max(width);
        let mut words = Vec::with_capacity(n);
        for id in 0..n as u32 {
            let word = match added.get(&id) {
                Some(t) if t.special => special(&t.content),
                // Added tokens go through the byte map like the others (Gemma's `▁▁` is two
                // spaces); where it cannot read one, its text is its bytes.
                Some(t) => spell(&t.content).unwrap_or_else(|| t.content.as_bytes().to_vec()),
                None => match inner.id_to_token(id) {
                    Some(tok) if tokenizer.is_special(id) => special(&tok),
                    Some(tok) => spell(&tok).unwrap_or_else(|| placeholder(id)),
                    None => placeholder(id),
                },
            };
            words.push(if word.is_empty() {
                placeholder(id)
            } else {
                word
            });
        }
        let eos: Vec<u32> = tokenizer
            .eos_token_ids()
            .iter()
            .copied()
            .filter(|&id| (id as usize) < n)
            .collect();
        Vocabulary {
            trie: trie(words, &eos),
            fragments: Some(fragment_tokenizer(inner)),
        }
    }

    /// A vocabulary of explicit pieces (None: a special token), for tests and tokenizers built
    /// elsewhere; forced bytes are spelled greedily, longest piece first.
    pub fn from_pieces(pieces: &[Option<&[u8]>], eos: &[u32]) -> Vocabulary {
        let words = pieces
            .iter()
            .enumerate()
            .map(|(id, p)| match p {
                Some(b) if !b.is_empty() => b.to_vec(),
                _ => placeholder(id as u32),
            })
            .collect();
        Vocabulary {
            trie: trie(words, eos),
            fragments: None,
        }
    }

    /// How many ids it covers (the width of every mask).
    pub fn len(&self) -> usize {
        self.trie.vocab_size()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes id `id` adds to the output; empty for special tokens and placeholders.
    pub fn bytes(&self, id: u32) -> &[u8] {
        if (id as usize) >= self.len() || self.trie.is_special_token(id) {
            return &[];
        }
        self.trie.token(id)
    }

    /// The id whose bytes are exactly `text`, if one is.
    pub fn find(&self, text: &str) -> Option<u32> {
        self.trie.token_id(text.as_bytes())
    }

    pub fn trie(&self) -> &TokTrie {
        &self.trie
    }

    /// For llguidance's parser factory.
    pub fn into_env(self) -> TokEnv {
        Arc::new(self)
    }
}

impl TokenizerEnv for Vocabulary {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        match &self.fragments {
            // A tokenizer that fails on a fragment has no better spelling than the greedy one.
            Some(t) => self.trie.tokenize_with_greedy_fallback(s, |text| {
                match t.encode_fast(text, false) {
                    Ok(e) => e.get_ids().to_vec(),
                    Err(_) => self.trie.greedy_tokenize(text.as_bytes()),
                }
            }),
            None => self.trie.greedy_tokenize(s),
        }
    }

    /// Only a real tokenizer spells forced text canonically; the greedy spelling of a toy
    /// vocabulary is not, so llguidance must not force its tokens.
    fn tokenize_is_canonical(&self) -> bool {
        self.fragments.is_some()
    }
}

fn trie(words: Vec<Vec<u8>>, eos: &[u32]) -> TokTrie {
    let first = eos.first().copied().unwrap_or(INVALID_TOKEN);
    let trie = TokTrie::from(&TokRxInfo::new(words.len() as u32, first), &words);
    if eos.len() > 1 {
        trie.with_eos_tokens(eos)
    } else {
        trie
    }
}

/// A special token's bytes: llguidance's marker, then its name.
fn special(name: &str) -> Vec<u8> {
    let mut b = vec![TokTrie::SPECIAL_TOKEN_MARKER];
    b.extend_from_slice(name.as_bytes());
    b
}

/// An id with no text (padding past the tokenizer, or a piece the byte map cannot read): a
/// special token by number, which no grammar text can spell.
fn placeholder(id: u32) -> Vec<u8> {
    special(&format!("<[{id}]>"))
}

/// The tokenizer for fragments of output: without the SentencePiece normalizer or
/// pre-tokenizer step that puts `▁` before the text's start, which is right for a prompt and
/// wrong for text in the middle of an answer.
fn fragment_tokenizer(inner: &tokenizers::Tokenizer) -> tokenizers::Tokenizer {
    let mut t = inner.clone();
    if let Some(n) = t.get_normalizer().cloned() {
        t.with_normalizer(without_prepend(n));
    }
    if let Some(p) = t.get_pre_tokenizer().cloned() {
        t.with_pre_tokenizer(Some(never_prepend(p)));
    }
    t
}

fn without_prepend(n: NormalizerWrapper) -> Option<NormalizerWrapper> {
    match n {
        NormalizerWrapper::Prepend(_) => None,
        NormalizerWrapper::Sequence(seq) => {
            let kept: Vec<NormalizerWrapper> = seq
                .as_ref()
                .iter()
                .filter_map(|n| without_prepend(n.clone()))
                .collect();
            (!kept.is_empty())
                .then(|| NormalizerWrapper::Sequence(normalizers::Sequence::new(kept)))
        }
        other => Some(other),
    }
}

fn never_prepend(p: PreTokenizerWrapper) -> PreTokenizerWrapper {
    match p {
        PreTokenizerWrapper::Metaspace(mut m) => {
            m.set_prepend_scheme(PrependScheme::Never);
            PreTokenizerWrapper::Metaspace(m)
        }
        PreTokenizerWrapper::Sequence(seq) => {
            PreTokenizerWrapper::Sequence(pre_tokenizers::sequence::Sequence::new(
                seq.as_ref().iter().cloned().map(never_prepend).collect(),
            ))
        }
        other => other,
    }
}

fn mentions_byte_level(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Object(m) => {
            m.get("type").and_then(|t| t.as_str()) == Some("ByteLevel")
                || m.values().any(mentions_byte_level)
        }
        serde_json::Value::Array(a) => a.iter().any(mentions_byte_level),
        _ => false,
    }
}

/// GPT-2's `bytes_to_unicode`, inverted: printable bytes stand for themselves, the others for
/// the characters from U+0100 on, in byte order.
fn unicode_to_byte() -> impl Fn(char) -> Option<u8> {
    let mut table = std::collections::HashMap::with_capacity(256);
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let c = if printable {
            b as u32
        } else {
            next += 1;
            next - 1
        };
        table.insert(char::from_u32(c).unwrap_or('\0'), b);
    }
    move |c| table.get(&c).copied()
}

fn sentencepiece_bytes(token: &str) -> Vec<u8> {
    if let Some(hex) = token
        .strip_prefix("<0x")
        .and_then(|t| t.strip_suffix('>'))
        .filter(|h| h.len() == 2)
    {
        if let Ok(b) = u8::from_str_radix(hex, 16) {
            return vec![b];
        }
    }
    token.replace('\u{2581}', " ").into_bytes()
}
