//! Shared by the toolcall_* tests: running the parser whole and in pieces.

#![allow(dead_code)]

use rmx_text::toolcall::{
    collect_events, sequential_ids, ToolCall, ToolCallEvent, ToolCallFormat, ToolCallParser,
};
use serde_json::Value;

/// Markers of every format: none may ever reach content of a well-formed output.
pub const MARKUP: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "```tool_code",
    "```tool_call",
];

pub fn parser(format: ToolCallFormat, tools: &[Value]) -> ToolCallParser {
    ToolCallParser::new(format)
        .with_tools(tools)
        .with_id_generator(sequential_ids())
}

/// Feeds `pieces` in order, then finishes; returns all events.
pub fn run_pieces(format: ToolCallFormat, tools: &[Value], pieces: &[&str]) -> Vec<ToolCallEvent> {
    let mut p = parser(format, tools);
    let mut events = Vec::new();
    for piece in pieces {
        events.extend(p.feed(piece));
    }
    events.extend(p.finish());
    events
}

pub fn parse(format: ToolCallFormat, text: &str) -> (String, Vec<ToolCall>) {
    parse_with(format, &[], text)
}

pub fn parse_with(format: ToolCallFormat, tools: &[Value], text: &str) -> (String, Vec<ToolCall>) {
    parser(format, tools).parse_complete(text)
}

/// (name, arguments as a JSON value) of each call, for comparing without caring about
/// argument spacing.
pub fn calls_of(calls: &[ToolCall]) -> Vec<(String, Value)> {
    calls
        .iter()
        .map(|c| {
            let args = serde_json::from_str(&c.arguments).unwrap_or_else(|e| {
                panic!(
                    "arguments of {} are not JSON ({e}): {}",
                    c.name, c.arguments
                )
            });
            (c.name.clone(), args)
        })
        .collect()
}

/// Every way of cutting `text` this test tries: at each char boundary in two, into single
/// chars, into runs of 2..=7 chars, and into uneven runs.
fn splits(text: &str) -> Vec<Vec<&str>> {
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let mut out = Vec::new();
    for &b in &bounds {
        out.push(vec![&text[..b], &text[b..]]);
    }
    for run in 1..=7 {
        let cuts: Vec<usize> = bounds
            .iter()
            .copied()
            .step_by(run)
            .chain([text.len()])
            .collect();
        out.push(pieces_between(text, &cuts));
    }
    // Uneven runs, from a fixed pseudo-random sequence so failures reproduce.
    for seed in 1..=4u64 {
        let mut state = seed;
        let mut cuts = vec![0];
        let mut i = 0;
        while i < bounds.len() {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            i += 1 + (state >> 60) as usize % 9;
            cuts.push(bounds[i.min(bounds.len() - 1)]);
        }
        out.push(pieces_between(text, &cuts));
    }
    out
}

fn pieces_between<'t>(text: &'t str, cuts: &[usize]) -> Vec<&'t str> {
    cuts.windows(2)
        .map(|w| &text[w[0]..w[1]])
        .filter(|s| !s.is_empty())
        .collect()
}

/// Parses `text` whole, then cut every way [`splits`] knows, and checks all agree on content
/// and calls (ids included: they are sequential), and that no content delta holds markup when
/// `clean` (the output is well formed). Returns the whole-text result.
pub fn assert_stream_agrees(
    format: ToolCallFormat,
    tools: &[Value],
    text: &str,
    clean: bool,
) -> (String, Vec<ToolCall>) {
    let whole = collect_events(&run_pieces(format, tools, &[text]));
    for pieces in splits(text) {
        let events = run_pieces(format, tools, &pieces);
        if clean {
            for e in &events {
                if let ToolCallEvent::Content(c) = e {
                    for m in MARKUP {
                        assert!(
                            !c.contains(m),
                            "markup {m:?} in content delta {c:?} from {pieces:?}"
                        );
                    }
                }
            }
        }
        let got = collect_events(&events);
        assert_eq!(
            got, whole,
            "{format:?}: pieces {pieces:?} differ from the whole text"
        );
    }
    whole
}
