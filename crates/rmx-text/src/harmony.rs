//! OpenAI's harmony format (GPT-OSS) read from a stream of output text: the `analysis` channel
//! is reasoning, `final` (and `commentary` addressed to nobody) is the answer, and a message
//! addressed `to=functions.NAME` is a call of tool NAME whose body is its JSON arguments.
//!
//! The prompt ends in `<|start|>assistant`, so the output opens with the rest of a message
//! header (`<|channel|>analysis<|message|>`); messages end in `<|end|>` (another follows, after
//! `<|start|>` and its header), `<|call|>` or `<|return|>`. The recipient may stand before the
//! channel or after it (`assistant to=functions.f<|channel|>commentary json` and
//! `<|channel|>commentary to=functions.f <|constrain|>json` both occur). The markers are
//! special tokens, so the engine must emit special tokens' text for this parser to see them.
//!
//! Output that is not harmony at all (no header at the start) is all answer, never dropped.

use std::mem;

use crate::toolcall::scan::{find_first, partial_marker_len};
use crate::toolcall::{random_ids, IdGenerator, ToolCallEvent};

const MESSAGE: &str = "<|message|>";
const START: &str = "<|start|>";
const CHANNEL: &str = "<|channel|>";
const CONSTRAIN: &str = "<|constrain|>";
/// What ends a message's body.
const ENDS: [&str; 4] = ["<|end|>", "<|call|>", "<|return|>", START];
/// A header longer than this without `<|message|>` is not a header: it is read as text.
const MAX_HEADER: usize = 512;

/// A piece of output, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HarmonyEvent {
    Reasoning(String),
    /// Answer text and tool calls, as the tool-call parsers report them.
    Output(ToolCallEvent),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Body {
    Reasoning,
    Content,
    /// A tool call's arguments, held until the message ends.
    Call {
        index: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Reading a header: the first one right after the prompt's `<|start|>assistant`
    /// (`after_start` false), later ones after a `<|start|>`, where the role comes first.
    Header {
        after_start: bool,
    },
    Body(Body),
    /// After a message ended: whitespace, then `<|start|>` and the next header.
    Between,
}

/// Splits harmony output into reasoning, answer and tool calls, one delta at a time.
pub struct HarmonyParser {
    state: State,
    pending: String,
    ids: IdGenerator,
    next_index: usize,
    /// Any answer text has been shown (leading whitespace of the answer is dropped).
    shown_content: bool,
}

impl std::fmt::Debug for HarmonyParser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarmonyParser")
            .field("state", &self.state)
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl Default for HarmonyParser {
    fn default() -> Self {
        Self::new()
    }
}

/// (channel, recipient) of a header such as `assistant to=functions.f<|channel|>commentary json`.
fn read_header(header: &str) -> (Option<String>, Option<String>) {
    let word = |s: &str| -> String {
        s.trim_start()
            .split(|c: char| c.is_whitespace() || c == '<')
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let channel = header
        .find(CHANNEL)
        .map(|i| word(&header[i + CHANNEL.len()..]));
    let recipient = header.find("to=").map(|i| word(&header[i + 3..]));
    (
        channel.filter(|c| !c.is_empty()),
        recipient.filter(|r| !r.is_empty()),
    )
}

/// Whether `text` (the start of the output or of a header) can still turn out to be a header.
fn may_be_header(text: &str) -> bool {
    let t = text.trim_start();
    t.is_empty()
        || [CHANNEL, CONSTRAIN, MESSAGE, " to=", "to="]
            .iter()
            .any(|m| t.starts_with(m) || m.starts_with(t))
}

impl HarmonyParser {
    pub fn new() -> Self {
        HarmonyParser {
            state: State::Header { after_start: false },
            pending: String::new(),
            ids: random_ids(),
            next_index: 0,
            shown_content: false,
        }
    }

    /// Replaces the id generator, e.g. with [`crate::toolcall::sequential_ids`] in tests.
    pub fn with_id_generator(mut self, ids: IdGenerator) -> Self {
        self.ids = ids;
        self
    }

    /// Whether text now arriving is reasoning.
    pub fn in_reasoning(&self) -> bool {
        self.state == State::Body(Body::Reasoning)
    }

    pub fn feed(&mut self, delta: &str) -> Vec<HarmonyEvent> {
        let mut out = Vec::new();
        self.pending.push_str(delta);
        self.pump(false, &mut out);
        out
    }

    /// Ends the output and releases held text (a call cut short is still a call); returns
    /// whether the output stopped inside reasoning. The parser is then ready for a new output.
    pub fn finish(&mut self) -> (Vec<HarmonyEvent>, bool) {
        let mut out = Vec::new();
        self.pump(true, &mut out);
        let ended_in_reasoning = self.in_reasoning();
        let first = State::Header { after_start: false };
        if let State::Body(body) = mem::replace(&mut self.state, first) {
            self.end_body(&body, &mut out);
        }
        self.pending.clear();
        self.shown_content = false;
        (out, ended_in_reasoning)
    }

    fn content(&mut self, text: &str, out: &mut Vec<HarmonyEvent>) {
        let text = if self.shown_content {
            text
        } else {
            text.trim_start()
        };
        if text.is_empty() {
            return;
        }
        self.shown_content = true;
        match out.last_mut() {
            Some(HarmonyEvent::Output(ToolCallEvent::Content(last))) => last.push_str(text),
            _ => out.push(HarmonyEvent::Output(ToolCallEvent::Content(
                text.to_string(),
            ))),
        }
    }

    fn reasoning(text: &str, out: &mut Vec<HarmonyEvent>) {
        if text.is_empty() {
            return;
        }
        match out.last_mut() {
            Some(HarmonyEvent::Reasoning(last)) => last.push_str(text),
            _ => out.push(HarmonyEvent::Reasoning(text.to_string())),
        }
    }

    /// Closes a message's body: a call's held arguments go out with its end.
    fn end_body(&mut self, body: &Body, out: &mut Vec<HarmonyEvent>) {
        if let Body::Call { index } = *body {
            let args = mem::take(&mut self.pending);
            let args = args.trim();
            let delta = if args.is_empty() { "{}" } else { args };
            out.push(HarmonyEvent::Output(ToolCallEvent::ToolCallArgsDelta {
                index,
                delta: delta.to_string(),
            }));
            out.push(HarmonyEvent::Output(ToolCallEvent::ToolCallEnd { index }));
        }
    }

    /// The body a header opens; a call is announced at once.
    fn open(&mut self, header: &str, out: &mut Vec<HarmonyEvent>) -> Body {
        let (channel, recipient) = read_header(header);
        if let Some(to) = recipient {
            let name = to.strip_prefix("functions.").unwrap_or(&to).to_string();
            let index = self.next_index;
            self.next_index += 1;
            out.push(HarmonyEvent::Output(ToolCallEvent::ToolCallStart {
                index,
                id: (self.ids)(),
                name,
            }));
            return Body::Call { index };
        }
        match channel.as_deref() {
            Some("analysis") => Body::Reasoning,
            _ => Body::Content,
        }
    }

    fn pump(&mut self, eof: bool, out: &mut Vec<HarmonyEvent>) {
        loop {
            match self.state.clone() {
                State::Header { after_start } => {
                    if let Some(pos) = self.pending.find(MESSAGE) {
                        let rest = self.pending.split_off(pos + MESSAGE.len());
                        let header = mem::replace(&mut self.pending, rest);
                        let body = self.open(&header[..pos], out);
                        self.state = State::Body(body);
                        continue;
                    }
                    let looks = after_start
                        || self.pending.contains(CHANNEL)
                        || may_be_header(&self.pending);
                    if looks && !eof && self.pending.len() <= MAX_HEADER {
                        return;
                    }
                    // Not harmony: the text is the answer.
                    self.state = State::Body(Body::Content);
                }
                State::Between => {
                    let t = self.pending.trim_start();
                    if let Some(rest) = t.strip_prefix(START) {
                        self.pending = rest.to_string();
                        self.state = State::Header { after_start: true };
                        continue;
                    }
                    if t.is_empty() || (START.starts_with(t) && !eof) {
                        if eof {
                            self.pending.clear();
                        }
                        return;
                    }
                    // Text between messages that is not a message: the answer.
                    self.state = State::Body(Body::Content);
                }
                State::Body(body) => {
                    if let Some((pos, which)) = find_first(&self.pending, ENDS) {
                        let rest = self.pending[pos..].to_string();
                        self.pending.truncate(pos);
                        self.emit(&body, out);
                        self.end_body(&body, out);
                        // `<|start|>` is kept: Between reads it.
                        self.pending = if ENDS[which] == START {
                            rest
                        } else {
                            rest[ENDS[which].len()..].to_string()
                        };
                        self.state = State::Between;
                        continue;
                    }
                    if eof {
                        self.emit(&body, out);
                        return;
                    }
                    if !matches!(body, Body::Call { .. }) {
                        let hold = partial_marker_len(&self.pending, ENDS);
                        let rest = self.pending.split_off(self.pending.len() - hold);
                        self.emit(&body, out);
                        self.pending = rest;
                    }
                    return;
                }
            }
        }
    }

    /// Sends what `pending` holds of a reasoning or answer body (a call's stays held).
    fn emit(&mut self, body: &Body, out: &mut Vec<HarmonyEvent>) {
        match body {
            Body::Reasoning => Self::reasoning(&mem::take(&mut self.pending), out),
            Body::Content => {
                let text = mem::take(&mut self.pending);
                self.content(&text, out);
            }
            Body::Call { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolcall::sequential_ids;

    fn parse_in_pieces(text: &str, size: usize) -> (Vec<HarmonyEvent>, bool) {
        let mut p = HarmonyParser::new().with_id_generator(sequential_ids());
        let mut events = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(size) {
            events.extend(p.feed(&piece.iter().collect::<String>()));
        }
        let (end, in_reasoning) = p.finish();
        events.extend(end);
        (events, in_reasoning)
    }

    /// (reasoning, content, calls as (name, arguments)) folded from the events.
    fn fold(events: &[HarmonyEvent]) -> (String, String, Vec<(String, String)>) {
        let (mut reasoning, mut content, mut calls) = (String::new(), String::new(), vec![]);
        for e in events {
            match e {
                HarmonyEvent::Reasoning(t) => reasoning.push_str(t),
                HarmonyEvent::Output(ToolCallEvent::Content(t)) => content.push_str(t),
                HarmonyEvent::Output(ToolCallEvent::ToolCallStart { name, .. }) => {
                    calls.push((name.clone(), String::new()))
                }
                HarmonyEvent::Output(ToolCallEvent::ToolCallArgsDelta { delta, .. }) => {
                    calls.last_mut().expect("a call").1.push_str(delta)
                }
                HarmonyEvent::Output(ToolCallEvent::ToolCallEnd { .. }) => {}
            }
        }
        (reasoning, content, calls)
    }

    /// The same result however the text is split.
    fn parse(text: &str) -> (String, String, Vec<(String, String)>, bool) {
        let (whole, r) = parse_in_pieces(text, usize::MAX / 2);
        let want = fold(&whole);
        for size in [1, 2, 3, 5, 7, 11] {
            let (events, r2) = parse_in_pieces(text, size);
            assert_eq!(fold(&events), want, "split every {size} chars");
            assert_eq!(r2, r);
        }
        (want.0, want.1, want.2, r)
    }

    #[test]
    fn analysis_is_reasoning_and_final_is_the_answer() {
        let out = "<|channel|>analysis<|message|>The user greets me.<|end|>\
                   <|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>";
        let (reasoning, content, calls, in_r) = parse(out);
        assert_eq!(reasoning, "The user greets me.");
        assert_eq!(content, "Hello! How can I help?");
        assert!(calls.is_empty());
        assert!(!in_r);
    }

    #[test]
    fn a_commentary_message_to_a_function_is_a_call_in_either_header_order() {
        for out in [
            "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>\
             commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
            "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant to=functions.get_weather\
             <|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>",
        ] {
            let (reasoning, content, calls, _) = parse(out);
            assert_eq!(reasoning, "Need weather.");
            assert_eq!(content, "");
            assert_eq!(
                calls,
                vec![("get_weather".to_string(), "{\"city\": \"Paris\"}".to_string())]
            );
        }
    }

    #[test]
    fn two_calls_get_their_own_indices_and_ids() {
        let out = "<|channel|>commentary to=functions.a<|message|>{}<|call|>\
                   <|start|>assistant<|channel|>commentary to=functions.b<|message|><|call|>";
        let (events, _) = parse_in_pieces(out, 4);
        let starts: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                HarmonyEvent::Output(ToolCallEvent::ToolCallStart { index, id, name }) => {
                    Some((*index, id.clone(), name.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            starts,
            vec![
                (0, "call_0".to_string(), "a".to_string()),
                (1, "call_1".to_string(), "b".to_string())
            ]
        );
        // An empty body is an empty argument object.
        assert_eq!(fold(&events).2[1].1, "{}");
    }

    #[test]
    fn commentary_to_nobody_is_answer_text() {
        let out = "<|channel|>commentary<|message|>Let me check.<|end|>\
                   <|start|>assistant<|channel|>final<|message|> Done.<|return|>";
        let (_, content, calls, _) = parse(out);
        assert_eq!(content, "Let me check. Done.");
        assert!(calls.is_empty());
    }

    #[test]
    fn output_cut_short_in_analysis_says_so_and_keeps_the_text() {
        let (reasoning, content, _, in_r) = parse("<|channel|>analysis<|message|>Thinking ab");
        assert_eq!(reasoning, "Thinking ab");
        assert_eq!(content, "");
        assert!(in_r);
    }

    #[test]
    fn a_call_cut_short_is_still_a_call_with_what_came() {
        let (_, _, calls, _) =
            parse("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"x\": 1");
        assert_eq!(calls, vec![("f".to_string(), "{\"x\": 1".to_string())]);
    }

    #[test]
    fn text_that_is_not_harmony_is_all_answer() {
        for text in [
            "Plain text, no header.",
            "  <b>bold</b> and <|weird",
            "to be or not",
        ] {
            let (reasoning, content, calls, _) = parse(text);
            assert_eq!(reasoning, "");
            assert_eq!(content, text.trim_start());
            assert!(calls.is_empty());
        }
    }

    #[test]
    fn a_partial_end_marker_is_held_back_not_shown() {
        let mut p = HarmonyParser::new();
        let mut ev = p.feed("<|channel|>final<|message|>Hi<|re");
        assert_eq!(fold(&ev).1, "Hi");
        ev = p.feed("turn|>");
        assert!(ev.is_empty(), "{ev:?}");
        // And `<|` that is not a marker is shown once it cannot be one.
        ev = p.finish().0;
        assert!(ev.is_empty(), "{ev:?}");
    }
}
