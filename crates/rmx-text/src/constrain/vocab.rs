//! The bytes each token id adds to the output, for the constraint to check.
//!
//! Decoding one id at a time is lossy where it matters: a byte-level BPE piece that holds half
//! a UTF-8 character decodes to U+FFFD. So the bytes come from the vocabulary itself: a
//! byte-level vocabulary (GPT-2, Qwen, Llama 3) spells each byte as one printable character,
//! and a SentencePiece one spells the space as `▁` and raw bytes as `<0xNN>`. Added tokens
//! that are not special (Qwen's `<tool_call>`) are their text; special tokens add nothing the
//! constraint can read and are left out.

use super::trie::Trie;
use crate::tokenizer::Tokenizer;

/// Token id → bytes, and the ids grouped by first byte.
#[derive(Debug)]
pub struct TokenBytes {
    bytes: Vec<Option<Box<[u8]>>>,
    by_first: Vec<Vec<u32>>,
    trie: Trie,
    /// Ids whose bytes are whole characters with no `"`, `\\` or control byte: inside a JSON
    /// string they are text and change nothing, so they need no walk there.
    string_plain: Vec<u32>,
    /// The other ids with bytes.
    string_other: Vec<u32>,
}

impl TokenBytes {
    pub fn from_tokenizer(tokenizer: &Tokenizer) -> TokenBytes {
        let inner = tokenizer.inner();
        let byte_level = inner
            .get_decoder()
            .and_then(|d| serde_json::to_value(d).ok())
            .is_some_and(|v| mentions_byte_level(&v));
        let to_byte = byte_level.then(unicode_to_byte);
        let added = inner.get_added_tokens_decoder();
        let n = inner.get_vocab_size(true);
        let mut bytes = Vec::with_capacity(n);
        for id in 0..n as u32 {
            // Added tokens go through the decoder like the others (Gemma's `▁▁` is two
            // spaces); where the byte map cannot read one, its text is its bytes.
            let piece = match added.get(&id) {
                Some(t) if t.special || t.content.is_empty() => None,
                Some(t) => Some(match &to_byte {
                    Some(map) => t
                        .content
                        .chars()
                        .map(map)
                        .collect::<Option<Vec<u8>>>()
                        .unwrap_or_else(|| t.content.as_bytes().to_vec()),
                    None => sentencepiece_bytes(&t.content),
                }),
                None if tokenizer.is_special(id) => None,
                None => inner.id_to_token(id).and_then(|tok| match &to_byte {
                    Some(map) => tok.chars().map(map).collect::<Option<Vec<u8>>>(),
                    None => Some(sentencepiece_bytes(&tok)),
                }),
            };
            bytes.push(piece.filter(|b| !b.is_empty()).map(Vec::into_boxed_slice));
        }
        TokenBytes::from_pieces(bytes)
    }

    /// From explicit pieces (tests, and tokenizers built elsewhere).
    pub fn from_pieces(bytes: Vec<Option<Box<[u8]>>>) -> TokenBytes {
        let mut by_first = vec![Vec::new(); 256];
        for (id, b) in bytes.iter().enumerate() {
            if let Some(first) = b.as_ref().and_then(|b| b.first()) {
                by_first[*first as usize].push(id as u32);
            }
        }
        let trie = Trie::new(&bytes);
        let (mut string_plain, mut string_other) = (Vec::new(), Vec::new());
        for (id, b) in bytes.iter().enumerate() {
            let Some(b) = b else { continue };
            let plain = std::str::from_utf8(b).is_ok()
                && b.iter().all(|&c| c >= 0x20 && c != b'"' && c != b'\\');
            if plain {
                string_plain.push(id as u32);
            } else {
                string_other.push(id as u32);
            }
        }
        TokenBytes {
            bytes,
            by_first,
            trie,
            string_plain,
            string_other,
        }
    }

    /// How many ids the table covers.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn get(&self, id: u32) -> Option<&[u8]> {
        self.bytes.get(id as usize).and_then(|b| b.as_deref())
    }

    /// The ids whose bytes start with `b`.
    pub fn starting_with(&self, b: u8) -> &[u32] {
        &self.by_first[b as usize]
    }

    pub(crate) fn trie(&self) -> &Trie {
        &self.trie
    }

    /// `(plain, other)`: see the fields.
    pub(crate) fn string_split(&self) -> (&[u32], &[u32]) {
        (&self.string_plain, &self.string_other)
    }

    /// The id whose bytes are exactly `text`, if one is.
    pub fn find(&self, text: &str) -> Option<u32> {
        let first = *text.as_bytes().first()?;
        self.starting_with(first)
            .iter()
            .copied()
            .find(|&id| self.get(id) == Some(text.as_bytes()))
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
