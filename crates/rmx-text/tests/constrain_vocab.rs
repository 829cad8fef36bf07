//! The constraint on real vocabularies: the bytes llguidance reads for each token are the
//! bytes the tokenizer decodes, walks over a 150K vocabulary give valid JSON, and how long one
//! step's mask takes (printed; run with `--nocapture` to see it).

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Instant;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::TokenizerEnv;
use llguidance::ParserFactory;
use rmx_text::constrain::{Compiler, Constraint, ConstraintState, Tool, Vocabulary};
use rmx_text::tokenizer::Tokenizer;
use rmx_text::toolcall::{parse_complete, ToolCallFormat};

/// Follows a fixed preference among the allowed ids: the longest piece, then the lowest id
/// (long pieces are where the lexer's walk costs most). Returns the text and each step's mask
/// time in microseconds.
fn longest_walk(
    compiler: &Compiler,
    vocab: &Vocabulary,
    c: &Constraint,
    max_tokens: usize,
) -> (String, Vec<f64>) {
    let mut state = ConstraintState::new(&compiler.compile(c).unwrap());
    let mut out = Vec::new();
    let mut micros = Vec::new();
    for step in 0..max_tokens {
        if state.is_complete() {
            break;
        }
        let t = Instant::now();
        let mask = state.mask(max_tokens - step).unwrap();
        micros.push(t.elapsed().as_secs_f64() * 1e6);
        let id = mask
            .ids()
            .into_iter()
            .max_by_key(|&id| (vocab.bytes(id).len(), std::cmp::Reverse(id)))
            .unwrap();
        state.accept(id).unwrap();
        out.extend_from_slice(vocab.bytes(id));
    }
    assert!(state.is_complete(), "{}", String::from_utf8_lossy(&out));
    (String::from_utf8(out).unwrap(), micros)
}

#[test]
fn walks_over_the_qwen3_vocabulary_are_valid_and_timed() {
    let tok = Tokenizer::from_dir(common::tokenizer_dir("qwen3")).unwrap();
    let t = Instant::now();
    let vocab = Vocabulary::from_tokenizer(&tok, tok.vocab_size());
    let compiler = Compiler::new(Vocabulary::from_tokenizer(&tok, tok.vocab_size())).unwrap();
    let build_ms = t.elapsed().as_secs_f64() * 1e3 / 2.0;
    let (text, micros) = longest_walk(&compiler, &vocab, &Constraint::json_object(), 64);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(v.is_object(), "{text}");
    let tools = vec![
        Tool::new(
            "get_weather",
            Some(serde_json::json!({"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]})),
        ),
        Tool::new("get_time", None),
    ];
    let call = Constraint::tool_call(ToolCallFormat::Hermes, tools);
    let (text, more) = longest_walk(&compiler, &vocab, &call, 64);
    let (_, calls) = parse_complete(ToolCallFormat::Hermes, &text);
    assert_eq!(calls.len(), 1, "{text}");
    assert!(["get_weather", "get_time"].contains(&calls[0].name.as_str()));
    let mut all: Vec<f64> = micros.into_iter().chain(more).collect();
    all.sort_by(f64::total_cmp);
    eprintln!(
        "qwen3 ({} ids), this build: vocabulary and compiler built in {build_ms:.0} ms; mask over \
         {} walk steps: median {:.0} us, p90 {:.0} us, max {:.0} us",
        vocab.len(),
        all.len(),
        all[all.len() / 2],
        all[all.len() * 9 / 10],
        all[all.len() - 1]
    );
}

// The vocabulary llguidance reads (`Vocabulary`): the same bytes, specials kept apart, and
// forced text spelled the way the tokenizer spells it in the middle of an answer.

fn vocabulary(name: &str) -> (Tokenizer, Vocabulary) {
    let tok = Tokenizer::from_dir(common::tokenizer_dir(name)).unwrap();
    let width = tok.vocab_size();
    let vocab = Vocabulary::from_tokenizer(&tok, width);
    (tok, vocab)
}

#[test]
fn vocabulary_bytes_are_what_the_tokenizer_decodes() {
    for name in ["qwen3", "llama3_1", "gemma3", "deepseek_v3"] {
        let (tok, vocab) = vocabulary(name);
        assert_eq!(vocab.len(), tok.vocab_size(), "{name}");
        let (mut checked, mut partial, mut empty) = (0, 0, 0);
        for id in 0..vocab.len() as u32 {
            let b = vocab.bytes(id);
            if tok.is_special(id) {
                assert!(b.is_empty(), "{name}: special id {id} has text {b:?}");
                continue;
            }
            if b.is_empty() {
                // The byte 0xFF alone is llguidance's special-token marker (it never occurs
                // in UTF-8 text, so no grammar needs it).
                empty += 1;
                assert!(empty <= 1, "{name}: id {id} has no bytes");
                continue;
            }
            let Ok(text) = std::str::from_utf8(b) else {
                partial += 1;
                continue;
            };
            assert_eq!(text, tok.decode(&[id], false).unwrap(), "{name}: id {id}");
            checked += 1;
        }
        assert!(checked > vocab.len() / 2, "{name}: only {checked} checked");
        // Byte pieces that are half a character are there, not lost to U+FFFD.
        assert!(partial > 0, "{name}: no partial UTF-8 pieces found");
    }
}

#[test]
fn special_tokens_are_named_and_added_text_tokens_are_text() {
    let (tok, vocab) = vocabulary("qwen3");
    let im_end = tok.token_to_id("<|im_end|>").unwrap();
    assert_eq!(vocab.trie().get_special_token("<|im_end|>"), Some(im_end));
    assert!(vocab.bytes(im_end).is_empty());
    // Qwen's `<tool_call>` and `<think>` are added tokens that are not special: a grammar's
    // literal `<tool_call>` is that one token.
    for text in ["<tool_call>", "<think>", "</think>"] {
        assert_eq!(vocab.find(text), tok.token_to_id(text), "{text}");
    }
    // Every EOS id is one llguidance allows where the output may end.
    let eos: Vec<u32> = tok.eos_token_ids().iter().copied().collect();
    assert_eq!(vocab.trie().eos_tokens(), &eos[..]);
}

#[test]
fn forced_text_is_spelled_without_a_leading_space() {
    // llama2 and gemma3 are SentencePiece vocabularies whose tokenizer puts `▁` before a
    // prompt: inside an answer that would add a space to every forced fragment.
    for name in ["llama2", "gemma3", "qwen3", "llama3_1"] {
        let (_, vocab) = vocabulary(name);
        assert!(vocab.tokenize_is_canonical());
        for text in [
            "hello world",
            "{\"name\": \"get_weather\", \"arguments\": {",
            "é😀x",
        ] {
            let ids = vocab.tokenize_bytes(text.as_bytes());
            let bytes: Vec<u8> = ids
                .iter()
                .flat_map(|&id| vocab.bytes(id).to_vec())
                .collect();
            assert_eq!(String::from_utf8_lossy(&bytes), text, "{name}: {ids:?}");
        }
    }
}

#[test]
fn a_padded_vocabulary_never_allows_the_padding() {
    let tok = Tokenizer::from_dir(common::tokenizer_dir("qwen3")).unwrap();
    let width = tok.vocab_size() + 64;
    let vocab = Vocabulary::from_tokenizer(&tok, width);
    assert_eq!(vocab.len(), width);
    let factory = ParserFactory::new_simple(&vocab.into_env()).unwrap();
    let mut parser = factory
        .create_parser(TopLevelGrammar::from_regex("(.|\\n)*"))
        .unwrap();
    parser.start_without_prompt();
    let mask = parser.compute_mask().unwrap();
    assert!(mask.num_set() > tok.vocab_size() / 2);
    for id in tok.vocab_size()..width {
        assert!(!mask.is_allowed(id as u32), "padding id {id} allowed");
    }
}

#[test]
fn a_json_schema_mask_over_the_qwen3_vocabulary_starts_an_object() {
    let (_, vocab) = vocabulary("qwen3");
    let env = vocab.into_env();
    let mut factory = ParserFactory::new_simple(&env).unwrap();
    factory.quiet();
    let schema = serde_json::json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let mut parser = factory
        .create_parser(TopLevelGrammar::from_json_schema(schema))
        .unwrap();
    parser.start_without_prompt();
    let mask = parser.compute_mask().unwrap();
    let trie = env.tok_trie();
    let mut n = 0;
    mask.iter_set_entries(|id| {
        n += 1;
        let b = trie.token(id as u32);
        assert!(b.first().is_some_and(|c| b"{ \n\t\r".contains(c)), "{b:?}");
    });
    assert!(n > 0);
}
