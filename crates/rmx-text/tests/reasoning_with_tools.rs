//! The two parsers chained as the server chains them: reasoning split off first, its content
//! then read for tool calls. Markup inside the reasoning must stay reasoning.

use rmx_text::reasoning::{ReasoningEvent, ReasoningParser};
use rmx_text::toolcall::{
    collect_events, sequential_ids, ToolCall, ToolCallFormat, ToolCallParser,
};

fn run(pieces: &[&str]) -> (String, String, Vec<ToolCall>) {
    let mut reasoning = ReasoningParser::think_tags(false);
    let mut tools = ToolCallParser::new(ToolCallFormat::Hermes).with_id_generator(sequential_ids());
    let mut thought = String::new();
    let mut events = Vec::new();
    let mut route = |evs: Vec<ReasoningEvent>, tools: &mut ToolCallParser, events: &mut Vec<_>| {
        for e in evs {
            match e {
                ReasoningEvent::Reasoning(t) => thought.push_str(&t),
                ReasoningEvent::Content(t) => events.extend(tools.feed(&t)),
            }
        }
    };
    for piece in pieces {
        let evs = reasoning.feed(piece);
        route(evs, &mut tools, &mut events);
    }
    let end = reasoning.finish();
    assert!(!end.ended_in_reasoning);
    route(end.events, &mut tools, &mut events);
    events.extend(tools.finish());
    let (content, calls) = collect_events(&events);
    (thought, content, calls)
}

#[test]
fn qwen3_thinks_then_calls_a_tool() {
    let text = "<think>\nI need the weather. The format is <tool_call>{...}</tool_call>.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let want_thought = "I need the weather. The format is <tool_call>{...}</tool_call>.";
    let whole = run(&[text]);
    assert_eq!(whole.0, want_thought);
    assert_eq!(whole.1, "");
    assert_eq!(whole.2.len(), 1);
    assert_eq!(whole.2[0].name, "get_weather");
    assert_eq!(whole.2[0].arguments, r#"{"city":"Paris"}"#);
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    for &b in &bounds {
        assert_eq!(run(&[&text[..b], &text[b..]]), whole, "split at {b}");
    }
    let chars: Vec<&str> = bounds.windows(2).map(|w| &text[w[0]..w[1]]).collect();
    assert_eq!(run(&chars), whole);
}
