//! The streaming tool-call parser: text deltas in, content and call events out.
//!
//! Text that might still become a call marker (`<tool_` before `call>` arrives) is held back,
//! so content never shows markup. A call's text is held until it is complete, then read as a
//! whole; that is what makes the result the same however the text was split. A call's
//! arguments therefore arrive in one delta at the call's end, which OpenAI clients accept.
//!
//! Whitespace that only pads calls (the `\n` before `<tool_call>`, the newlines between calls
//! or after the last) is dropped, so a reply that is only calls has empty content, and text
//! around a call reads as one paragraph break.

use std::mem;

use serde_json::Value;

use super::format::ToolCallFormat;
use super::ids::{random_ids, IdGenerator};
use super::scan::{find_first, partial_marker_len, trailing_ws_start, BodyScan};
use super::schema::ToolSchemas;
use super::trigger::Close;
use super::ToolCallEvent;

/// Separates tool calls from content in a model's output, one delta at a time.
pub struct ToolCallParser {
    format: ToolCallFormat,
    tools: ToolSchemas,
    ids: IdGenerator,
    mode: Mode,
    /// Received text not yet dealt with.
    pending: String,
    /// Nothing has been shown since the last call, so whitespace now may be only a gap.
    after_call: bool,
    /// Some content has been shown: whitespace after a call then separates it from more.
    shown_content: bool,
    next_index: usize,
}

enum Mode {
    /// Only whitespace so far, in a format whose calls may be bare JSON at the start.
    Start,
    Content,
    /// Inside a call: `trigger` indexes the format's triggers, None is bare JSON. `gap` is
    /// the whitespace before it, given back if the call turns out unreadable.
    Call {
        trigger: Option<usize>,
        body: String,
        gap: String,
        scan: BodyScan,
    },
}

impl std::fmt::Debug for ToolCallParser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCallParser")
            .field("format", &self.format)
            .field("pending", &self.pending)
            .field("next_index", &self.next_index)
            .finish_non_exhaustive()
    }
}

impl ToolCallParser {
    /// A parser with random call ids and no tool schemas.
    pub fn new(format: ToolCallFormat) -> Self {
        ToolCallParser {
            format,
            tools: ToolSchemas::default(),
            ids: random_ids(),
            mode: if format.bare_json_at_start() {
                Mode::Start
            } else {
                Mode::Content
            },
            pending: String::new(),
            after_call: false,
            shown_content: false,
            next_index: 0,
        }
    }

    /// The request's tool definitions (OpenAI or Anthropic shape), for typing Qwen3-Coder's
    /// text parameter values.
    pub fn with_tools(mut self, tools: &[Value]) -> Self {
        self.tools = ToolSchemas::from_tools(tools);
        self
    }

    pub fn with_schemas(mut self, tools: ToolSchemas) -> Self {
        self.tools = tools;
        self
    }

    /// Replaces the id generator, e.g. with [`super::sequential_ids`] in tests.
    pub fn with_id_generator(mut self, ids: IdGenerator) -> Self {
        self.ids = ids;
        self
    }

    pub fn format(&self) -> ToolCallFormat {
        self.format
    }

    /// Takes the next piece of output text; returns what can be told now.
    pub fn feed(&mut self, delta: &str) -> Vec<ToolCallEvent> {
        let mut out = Vec::new();
        self.pending.push_str(delta);
        self.pump(false, &mut out);
        out
    }

    /// Ends the output: held text is released, and a call left open (no closing tag, JSON
    /// cut short) is read as far as it goes; what cannot be read becomes content. The parser
    /// is then ready for a new output.
    pub fn finish(&mut self) -> Vec<ToolCallEvent> {
        let mut out = Vec::new();
        self.pump(true, &mut out);
        self.mode = if self.format.bare_json_at_start() {
            Mode::Start
        } else {
            Mode::Content
        };
        self.after_call = false;
        self.shown_content = false;
        self.next_index = 0;
        out
    }

    fn pump(&mut self, eof: bool, out: &mut Vec<ToolCallEvent>) {
        let triggers = self.format.triggers();
        loop {
            match &mut self.mode {
                Mode::Start => {
                    let t = self.pending.trim_start();
                    if t.starts_with(['{', '[']) {
                        let body = mem::take(&mut self.pending);
                        self.mode = Mode::Call {
                            trigger: None,
                            body,
                            gap: String::new(),
                            scan: BodyScan::default(),
                        };
                    } else if t.is_empty() && !eof {
                        return;
                    } else {
                        self.mode = Mode::Content;
                    }
                }
                Mode::Content => {
                    let opens = triggers.iter().map(|t| t.open);
                    if let Some((pos, t)) = find_first(&self.pending, opens) {
                        let body = self.pending[pos + triggers[t].open.len()..].to_string();
                        self.pending.truncate(pos);
                        let mut before = mem::take(&mut self.pending);
                        let gap = before.split_off(trailing_ws_start(&before));
                        self.emit_content(&before, out);
                        self.mode = Mode::Call {
                            trigger: Some(t),
                            body,
                            gap,
                            scan: BodyScan::default(),
                        };
                        continue;
                    }
                    if eof {
                        let rest = mem::take(&mut self.pending);
                        self.emit_content(&rest, out);
                        return;
                    }
                    let hold = partial_marker_len(&self.pending, triggers.iter().map(|t| t.open));
                    let keep = trailing_ws_start(&self.pending[..self.pending.len() - hold]);
                    let ready: String = self.pending.drain(..keep).collect();
                    self.emit_content(&ready, out);
                    return;
                }
                Mode::Call {
                    trigger,
                    body,
                    gap,
                    scan,
                } => {
                    body.push_str(&self.pending);
                    self.pending.clear();
                    let trigger = *trigger;
                    let body = mem::take(body);
                    let gap = mem::take(gap);
                    let mut scan = mem::take(scan);
                    match self.split_call(trigger, &body, &mut scan, eof) {
                        Split::Wait => {
                            self.mode = Mode::Call {
                                trigger,
                                body,
                                gap,
                                scan,
                            };
                            return;
                        }
                        Split::NotACall => {
                            self.pending = body;
                            self.mode = Mode::Content;
                        }
                        Split::Done { inner, raw, rest } => {
                            self.complete(trigger, &body[inner], &format!("{gap}{raw}"), out);
                            self.pending = body[rest..].to_string();
                            self.mode = Mode::Content;
                            if eof && self.pending.is_empty() {
                                return;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Where the call in `body` ends, if that is known yet.
    fn split_call(
        &self,
        trigger: Option<usize>,
        body: &str,
        scan: &mut BodyScan,
        eof: bool,
    ) -> Split {
        let Some(t) = trigger else {
            if !bare_json_may_be_call(body) {
                return Split::NotACall;
            }
            return match self.format.body_end(body, scan) {
                Some(end) => Split::done(0..end, body[..end].to_string(), end),
                None if eof => Split::done(0..body.len(), body.to_string(), body.len()),
                None => Split::Wait,
            };
        };
        let trigger = self.format.triggers()[t];
        let open = trigger.open;
        match trigger.close {
            Close::Tag(close) => {
                let (close_at, reopen_at) = if body.trim_start().starts_with('{') {
                    // A JSON body: tags inside its strings are argument text.
                    match scan.tags.find(body, &[close, open]) {
                        Some((at, 0)) => (Some(at), None),
                        Some((at, _)) => (None, Some(at)),
                        None => (None, None),
                    }
                } else {
                    let from = scan.search_from(body, open.len().max(close.len()));
                    let find = |marker: &str| body[from..].find(marker).map(|i| from + i);
                    let close_at = find(close);
                    (
                        close_at,
                        find(open).filter(|&r| close_at.is_none_or(|c| r < c)),
                    )
                };
                // A new call opening before this one closed: the closing tag was forgotten.
                if let Some(r) = reopen_at {
                    return Split::done(0..r, format!("{open}{}", &body[..r]), r);
                }
                if let Some(c) = close_at {
                    let raw = format!("{open}{}{close}", &body[..c]);
                    return Split::done(0..c, raw, c + close.len());
                }
                if eof {
                    // Cut off inside the closing tag: its start is not call text.
                    let inner = body.len() - partial_marker_len(body, [close]);
                    return Split::done(0..inner, format!("{open}{body}"), body.len());
                }
                scan.pos = body.len();
                Split::Wait
            }
            Close::SelfDelimited => match self.format.body_end(body, scan) {
                Some(end) => Split::done(0..end, format!("{open}{}", &body[..end]), end),
                None if eof => Split::done(0..body.len(), format!("{open}{body}"), body.len()),
                None => Split::Wait,
            },
        }
    }

    /// Emits the calls in `inner`, or, when it holds none, `raw` (the call's text as written)
    /// as content: what cannot be read is shown, never dropped.
    fn complete(
        &mut self,
        trigger: Option<usize>,
        inner: &str,
        raw: &str,
        out: &mut Vec<ToolCallEvent>,
    ) {
        let Some(parsed) = self.format.parse_body(trigger, inner, &self.tools) else {
            self.emit_content(raw, out);
            return;
        };
        for call in parsed.calls {
            let index = self.next_index;
            self.next_index += 1;
            out.push(ToolCallEvent::ToolCallStart {
                index,
                id: (self.ids)(),
                name: call.name,
            });
            out.push(ToolCallEvent::ToolCallArgsDelta {
                index,
                delta: call.arguments,
            });
            out.push(ToolCallEvent::ToolCallEnd { index });
        }
        self.after_call = true;
        self.emit_content(&parsed.leftover, out);
    }

    /// Shows `text`, minus whitespace that only separates calls from each other, from the
    /// start of the reply, or from its end.
    fn emit_content(&mut self, text: &str, out: &mut Vec<ToolCallEvent>) {
        let text = match (self.after_call, self.shown_content) {
            // Text around calls is passed on with no trailing whitespace except at the end
            // of the output, so whitespace-only text after a call is the end's padding.
            (true, _) if text.trim().is_empty() => "",
            (true, false) => text.trim_start(),
            _ => text,
        };
        if text.is_empty() {
            return;
        }
        self.after_call = false;
        self.shown_content = true;
        match out.last_mut() {
            Some(ToolCallEvent::Content(last)) => last.push_str(text),
            _ => out.push(ToolCallEvent::Content(text.to_string())),
        }
    }
}

/// How far a call's text goes, as byte ranges of its body.
enum Split {
    /// Its end has not arrived yet.
    Wait,
    /// Bare JSON that is not shaped like a call: it is content after all.
    NotACall,
    /// `inner` is the call's text, `raw` all of it as written (markers too), `rest` where the
    /// text after it starts.
    Done {
        inner: std::ops::Range<usize>,
        raw: String,
        rest: usize,
    },
}

impl Split {
    fn done(inner: std::ops::Range<usize>, raw: String, rest: usize) -> Split {
        Split::Done { inner, raw, rest }
    }
}

/// Whether JSON opening a reply can still be a call: it must start like one. This lets a reply
/// that merely starts with `{` or `[` stream as content without waiting for its end.
fn bare_json_may_be_call(body: &str) -> bool {
    const OPENINGS: [&str; 10] = [
        "{\"name\"",
        "{'name'",
        "{name:",
        "{\"function\"",
        "{\"type\"",
        "[{\"name\"",
        "[{'name'",
        "[{name:",
        "[{\"function\"",
        "[{\"type\"",
    ];
    let compact: String = body
        .chars()
        .filter(|c| !c.is_whitespace())
        .take(16)
        .collect();
    OPENINGS
        .iter()
        .any(|o| o.starts_with(&compact) || compact.starts_with(o))
}
