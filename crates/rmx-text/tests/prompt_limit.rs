//! Issue #20, "Huge bodies": a prompt far past the context is refused after counting about the
//! context's worth of it, and the piecewise count never claims more tokens than the text has
//! (so no prompt that fits is refused), on every tokenizer family of the fixtures and on text
//! that is hard to cut (no whitespace, CJK, whitespace runs, special tokens).

mod common;

use rmx_text::prompt_limit::LimitError;
use rmx_text::tokenizer::Tokenizer;

/// Texts of about `bytes` bytes, each a different kind of hard.
fn texts(bytes: usize) -> Vec<(&'static str, String)> {
    let fill = |unit: &str| unit.repeat(bytes / unit.len() + 1);
    vec![
        (
            "prose and code",
            fill("The quick brown fox, said Ünïcödé, jumps.\n\nfn main() { x += 1; }\t// 😀\n"),
        ),
        ("one long word", fill("abcdefghij")),
        ("CJK without spaces", fill("你好世界日本語한국어")),
        ("whitespace runs", fill("a    \n\n\n    b\t\t ")),
        (
            "special tokens",
            fill("<|im_start|>user\nhi<|im_end|> </s><s> "),
        ),
    ]
}

#[test]
fn the_piecewise_count_is_a_lower_bound_close_to_the_count() {
    for package in common::TOKENIZERS {
        let tokenizer = Tokenizer::from_dir(common::tokenizer_dir(package)).expect("load");
        for (kind, text) in texts(150_000) {
            let exact = tokenizer.encode(&text, false).expect("encode").len();
            let bound = tokenizer.count_at_least(&text, usize::MAX).expect("count");
            assert!(bound <= exact, "{package}, {kind}: {bound} > {exact}");
            assert!(
                bound * 10 >= exact * 9,
                "{package}, {kind}: {bound} is far below {exact}"
            );
        }
    }
}

#[test]
fn a_text_far_past_the_limit_is_refused_and_one_that_fits_is_encoded_whole() {
    for package in common::TOKENIZERS {
        let tokenizer = Tokenizer::from_dir(common::tokenizer_dir(package)).expect("load");
        for (kind, text) in texts(1 << 20) {
            match tokenizer.encode_within(&text, true, 512) {
                Err(LimitError::TooLong { at_least, limit }) => {
                    assert_eq!(limit, 512);
                    // Counted until past the limit, not to the end.
                    assert!(
                        at_least > 512 && at_least < 512 * 300,
                        "{package}, {kind}: {at_least}"
                    );
                }
                other => panic!("{package}, {kind}: {other:?}"),
            }
        }
        // Exactly at the limit, a text long for its tokens (whitespace runs) still fits.
        for (kind, text) in texts(100_000) {
            let exact = tokenizer.encode(&text, true).expect("encode");
            let within = tokenizer
                .encode_within(&text, true, exact.len())
                .unwrap_or_else(|e| panic!("{package}, {kind}: {e}"));
            assert_eq!(within, exact, "{package}, {kind}");
        }
    }
}
