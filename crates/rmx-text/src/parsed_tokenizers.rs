//! The last few `tokenizer.json` files this process parsed, kept by content.
//!
//! Parsing is the slow part of loading a model's text side: a 262K-token vocabulary with its
//! merges (Gemma's 33 MB file) takes seconds, where cloning the parsed tokenizer takes about a
//! tenth of a second. Loading the same model again (after the daemon unloaded it) or another
//! quantization of it (the same tokenizer file) therefore clones instead of parsing.
//!
//! Entries are keyed by the file's bytes, compared whole, so a changed file is parsed anew and
//! two folders with equal files share one entry. The cache is bounded in entries and in the
//! bytes of their files (a parsed tokenizer holds a few times its file's size), and the least
//! recently used entry goes first.

use std::sync::{Arc, Mutex};

/// At most this many tokenizers are kept.
const MAX_ENTRIES: usize = 4;
/// And their files together at most this many bytes (two 262K-token vocabularies' worth).
const MAX_BYTES: usize = 80 << 20;

struct Entry {
    bytes: Arc<[u8]>,
    parsed: tokenizers::Tokenizer,
}

/// Most recently used last.
static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// The tokenizer `bytes` (a `tokenizer.json`'s content) describes: a clone of an earlier parse
/// of equal bytes, or a new parse, kept for the next time.
pub(crate) fn parse(bytes: Vec<u8>) -> Result<tokenizers::Tokenizer, tokenizers::Error> {
    if let Some(hit) = lookup(&bytes) {
        return Ok(hit);
    }
    // Parsed outside the lock: another model's load must not wait for this one.
    let parsed: tokenizers::Tokenizer = std::str::from_utf8(&bytes)?.parse()?;
    if bytes.len() <= MAX_BYTES {
        insert(bytes.into(), parsed.clone());
    }
    Ok(parsed)
}

fn lookup(bytes: &[u8]) -> Option<tokenizers::Tokenizer> {
    // A panic while holding the lock leaves at worst an entry missing or stale in order.
    let mut entries = ENTRIES.lock().unwrap_or_else(|p| p.into_inner());
    let at = entries.iter().position(|e| *e.bytes == *bytes)?;
    let entry = entries.remove(at);
    let parsed = entry.parsed.clone();
    entries.push(entry);
    Some(parsed)
}

fn insert(bytes: Arc<[u8]>, parsed: tokenizers::Tokenizer) {
    let mut entries = ENTRIES.lock().unwrap_or_else(|p| p.into_inner());
    // Two loads of one new file in parallel both parse it; keep one entry.
    if entries.iter().any(|e| e.bytes == bytes) {
        return;
    }
    entries.push(Entry { bytes, parsed });
    while entries.len() > MAX_ENTRIES
        || entries.iter().map(|e| e.bytes.len()).sum::<usize>() > MAX_BYTES
    {
        entries.remove(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(word: &str) -> Vec<u8> {
        format!(
            r#"{{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],
            "normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":null,
            "model":{{"type":"WordLevel","vocab":{{"{word}":0,"[UNK]":1}},"unk_token":"[UNK]"}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn equal_bytes_give_the_same_tokenizer_and_other_bytes_their_own() {
        let a = parse(tiny("alpha")).unwrap();
        let again = parse(tiny("alpha")).unwrap();
        let b = parse(tiny("beta")).unwrap();
        assert_eq!(a.token_to_id("alpha"), Some(0));
        assert_eq!(again.token_to_id("alpha"), Some(0));
        assert_eq!(b.token_to_id("alpha"), None);
        assert_eq!(b.token_to_id("beta"), Some(0));
    }

    #[test]
    fn bytes_that_are_not_a_tokenizer_are_an_error_every_time() {
        for _ in 0..2 {
            assert!(parse(b"{\"model\": 1}".to_vec()).is_err());
            assert!(parse(vec![0xff, 0xfe]).is_err());
        }
    }
}
