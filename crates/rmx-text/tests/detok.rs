//! The streaming detokenizer against whole-sequence decoding, on real tokenizers: the pieces
//! must add up to `decode(all ids)` exactly, and no piece may carry half a character.

mod common;

use std::sync::Arc;

use rmx_text::detok::Detokenizer;
use rmx_text::tokenizer::Tokenizer;

const TEXTS: [&str; 5] = [
    " The quick brown fox, it's 3.14 — “quoted” …\n\n  indented\tline",
    "Emoji 😀🦀👩‍👩‍👧🇫🇷 then CJK 你好，世界。日本語のテキスト 한국어",
    "Rare glyphs 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꙮ ⟨x⟩ and combining é ñ",
    "def f(x):\n    return x ** 2  # square\n",
    "   leading spaces and trailing   ",
];

fn stream(detok: &mut Detokenizer, ids: &[u32]) -> Vec<String> {
    let mut pieces: Vec<String> = ids
        .iter()
        .map(|id| {
            detok
                .push(*id)
                .unwrap_or_else(|err| panic!("push {id}: {err}"))
        })
        .collect();
    pieces.push(detok.finish().expect("finish"));
    pieces
}

#[test]
fn streamed_pieces_add_up_to_the_full_decode() {
    for package in common::TOKENIZERS {
        let tokenizer = Arc::new(
            Tokenizer::from_dir(common::tokenizer_dir(package))
                .unwrap_or_else(|err| panic!("{package}: {err}")),
        );
        for text in TEXTS {
            for add_special_tokens in [false, true] {
                let mut ids = tokenizer.encode(text, add_special_tokens).expect("encode");
                // An end-of-turn token mid-stream, as a model may emit one.
                if let Some(eos) = tokenizer.eos_token_ids().iter().next() {
                    ids.insert(ids.len() / 2, *eos);
                }
                let want = tokenizer.decode(&ids, true).expect("decode");
                let mut detok = Detokenizer::new(tokenizer.clone());
                let pieces = stream(&mut detok, &ids);
                assert_eq!(pieces.concat(), want, "{package}: {text:?}");
                for piece in &pieces {
                    assert!(
                        !piece.contains('\u{FFFD}'),
                        "{package}: half a character in {piece:?}"
                    );
                }
                // Most tokens must come out as they arrive, not all at the end.
                let late = pieces.last().map_or(0, String::len);
                assert!(
                    late * 2 <= want.len().max(1),
                    "{package}: {late} bytes held to the end"
                );
            }
        }
    }
}

#[test]
fn byte_fallback_tokens_are_held_until_the_character_is_whole() {
    let tokenizer =
        Arc::new(Tokenizer::from_dir(common::tokenizer_dir("llama2")).expect("llama2 tokenizer"));
    let ids = tokenizer.encode("crab 🦀!", false).expect("encode");
    let bytes: Vec<usize> = ids
        .iter()
        .enumerate()
        .filter(|(_, id)| {
            tokenizer
                .id_to_token(**id)
                .is_some_and(|token| token.starts_with("<0x"))
        })
        .map(|(at, _)| at)
        .collect();
    assert_eq!(
        bytes.len(),
        4,
        "🦀 is four byte-fallback tokens in llama2: {ids:?}"
    );
    let mut detok = Detokenizer::new(tokenizer.clone());
    let pieces = stream(&mut detok, &ids);
    for at in &bytes[..3] {
        assert_eq!(pieces[*at], "", "byte token {at} must wait");
    }
    assert_eq!(pieces[bytes[3]], "🦀");
    assert_eq!(pieces.concat(), "crab 🦀!");
}

#[test]
fn special_tokens_show_only_when_asked() {
    let tokenizer =
        Arc::new(Tokenizer::from_dir(common::tokenizer_dir("qwen3")).expect("qwen3 tokenizer"));
    let ids = tokenizer
        .encode("<think>\nhm</think>\n\nHi<|im_end|>", false)
        .expect("encode");
    let skipped = stream(&mut Detokenizer::new(tokenizer.clone()), &ids).concat();
    assert_eq!(skipped, tokenizer.decode(&ids, true).expect("decode"));
    assert!(!skipped.contains("<|im_end|>"));
    let kept = stream(
        &mut Detokenizer::new(tokenizer.clone()).with_special_tokens(true),
        &ids,
    )
    .concat();
    assert_eq!(kept, "<think>\nhm</think>\n\nHi<|im_end|>");
}

#[test]
fn a_long_stream_keeps_matching() {
    let tokenizer =
        Arc::new(Tokenizer::from_dir(common::tokenizer_dir("gemma3")).expect("gemma3 tokenizer"));
    let text = TEXTS.concat().repeat(20);
    let ids = tokenizer.encode(&text, false).expect("encode");
    let mut detok = Detokenizer::new(tokenizer.clone());
    assert_eq!(stream(&mut detok, &ids).concat(), text);
}
