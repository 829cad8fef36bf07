//! Reasoning split from content: real-looking outputs, streamed cut at every boundary.

use rmx_text::reasoning::{ReasoningConfig, ReasoningEvent, ReasoningParser};

#[derive(Debug, PartialEq)]
struct Split {
    reasoning: String,
    content: String,
    ended_in_reasoning: bool,
}

fn run(config: &ReasoningConfig, pieces: &[&str]) -> Split {
    let mut p = ReasoningParser::new(config.clone());
    let mut events = Vec::new();
    for piece in pieces {
        events.extend(p.feed(piece));
    }
    let end = p.finish();
    events.extend(end.events);
    let mut out = Split {
        reasoning: String::new(),
        content: String::new(),
        ended_in_reasoning: end.ended_in_reasoning,
    };
    let mut seen_content = false;
    for e in events {
        match e {
            ReasoningEvent::Reasoning(t) => {
                assert!(!seen_content, "reasoning after content in {pieces:?}");
                assert!(!t.is_empty(), "empty reasoning event");
                out.reasoning.push_str(&t);
            }
            ReasoningEvent::Content(t) => {
                assert!(!t.is_empty(), "empty content event");
                seen_content = true;
                out.content.push_str(&t);
            }
        }
    }
    out
}

/// Parses `text` whole, cut at every char boundary, and char by char; all must agree with
/// the expectation.
fn check(
    config: &ReasoningConfig,
    text: &str,
    reasoning: &str,
    content: &str,
    ended_in_reasoning: bool,
) {
    let want = Split {
        reasoning: reasoning.to_string(),
        content: content.to_string(),
        ended_in_reasoning,
    };
    assert_eq!(run(config, &[text]), want, "whole {text:?}");
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    for &b in &bounds {
        assert_eq!(
            run(config, &[&text[..b], &text[b..]]),
            want,
            "split at {b} of {text:?}"
        );
    }
    let chars: Vec<&str> = bounds.windows(2).map(|w| &text[w[0]..w[1]]).collect();
    assert_eq!(run(config, &chars), want, "char by char {text:?}");
}

fn think(starts_in_reasoning: bool) -> ReasoningConfig {
    ReasoningConfig {
        starts_in_reasoning,
        ..ReasoningConfig::default()
    }
}

#[test]
fn qwen3_thinking_output() {
    check(
        &think(false),
        "<think>\nThe user wants the weather in Paris. I should call get_weather — it's café time.\n</think>\n\nIt is sunny in Paris. ☀️",
        "The user wants the weather in Paris. I should call get_weather — it's café time.",
        "It is sunny in Paris. ☀️",
        false,
    );
}

#[test]
fn empty_think_block_gives_no_reasoning() {
    check(
        &think(false),
        "<think>\n\n</think>\n\nHello!",
        "",
        "Hello!",
        false,
    );
}

#[test]
fn starts_in_reasoning_as_deepseek_r1_and_new_qwen3_templates_do() {
    check(
        &think(true),
        "Okay, 2 + 2: add them.\nThat is 4.\n</think>\n\nThe answer is **4**.",
        "Okay, 2 + 2: add them.\nThat is 4.",
        "The answer is **4**.",
        false,
    );
}

#[test]
fn starts_in_reasoning_tolerates_the_model_repeating_the_start_tag() {
    check(
        &think(true),
        "<think>\nHmm.\n</think>\n\nYes.",
        "Hmm.",
        "Yes.",
        false,
    );
}

#[test]
fn unterminated_reasoning_is_reported() {
    check(
        &think(false),
        "<think>\nLet me count: 1, 2, 3, ",
        "Let me count: 1, 2, 3,",
        "",
        true,
    );
    check(
        &think(true),
        "Let me count: 1, 2",
        "Let me count: 1, 2",
        "",
        true,
    );
    // Cut inside the end tag: still inside the reasoning.
    check(
        &think(true),
        "Nearly done.\n</thi",
        "Nearly done.\n</thi",
        "",
        true,
    );
}

#[test]
fn no_reasoning_block_is_all_content() {
    check(
        &think(false),
        "Paris is the capital of France.",
        "",
        "Paris is the capital of France.",
        false,
    );
    check(
        &think(false),
        "<this> is not a tag",
        "",
        "<this> is not a tag",
        false,
    );
    check(&think(false), "<thi", "", "<thi", false);
}

#[test]
fn think_tag_after_the_answer_began_is_content() {
    check(
        &think(false),
        "Tags like <think>this</think> are markup.",
        "",
        "Tags like <think>this</think> are markup.",
        false,
    );
    // Only one block: a second one is the model writing about tags.
    check(
        &think(false),
        "<think>a</think>b<think>c</think>",
        "a",
        "b<think>c</think>",
        false,
    );
}

#[test]
fn thinking_off_passes_everything_as_content() {
    let config = ReasoningConfig {
        enabled: false,
        ..ReasoningConfig::default()
    };
    check(
        &config,
        "<think>\nhidden?\n</think>\n\nNo.",
        "",
        "<think>\nhidden?\n</think>\n\nNo.",
        false,
    );
    let mut p = ReasoningParser::disabled();
    assert_eq!(
        p.feed("<think>x"),
        vec![ReasoningEvent::Content("<think>x".into())]
    );
    assert!(!p.finish().ended_in_reasoning);
}

#[test]
fn configurable_tags() {
    let config = ReasoningConfig {
        start_tag: "[THINK]".into(),
        end_tag: "[/THINK]".into(),
        starts_in_reasoning: false,
        enabled: true,
    };
    check(
        &config,
        "[THINK]Short plan.[/THINK]Answer.",
        "Short plan.",
        "Answer.",
        false,
    );
    check(&config, "<think>x</think>", "", "<think>x</think>", false);
}

#[test]
fn in_reasoning_follows_the_stream() {
    let mut p = ReasoningParser::think_tags(false);
    assert!(!p.in_reasoning());
    assert_eq!(p.feed("<th"), vec![]);
    assert_eq!(
        p.feed("ink>\nPlan"),
        vec![ReasoningEvent::Reasoning("Plan".into())]
    );
    assert!(p.in_reasoning());
    // The start of the end tag is held back, not shown as reasoning.
    assert_eq!(
        p.feed(" more</th"),
        vec![ReasoningEvent::Reasoning(" more".into())]
    );
    assert_eq!(
        p.feed("ink>\n\nDone"),
        vec![ReasoningEvent::Content("Done".into())]
    );
    assert!(!p.in_reasoning());
    let end = p.finish();
    assert!(end.events.is_empty());
    assert!(!end.ended_in_reasoning);
}

#[test]
fn parser_is_reusable_after_finish() {
    let mut p = ReasoningParser::think_tags(true);
    p.feed("a</think>b");
    p.finish();
    assert!(p.in_reasoning(), "a new output starts in reasoning again");
    assert_eq!(
        p.feed("c</think>d"),
        vec![
            ReasoningEvent::Reasoning("c".into()),
            ReasoningEvent::Content("d".into())
        ]
    );
}
