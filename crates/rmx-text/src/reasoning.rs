//! Reasoning (`<think>…</think>`) apart from the answer, over a stream of text deltas.
//!
//! Thinking models open their output with a reasoning block. Some templates (DeepSeek-R1,
//! newer Qwen3) print the opening `<think>` in the prompt, so the output starts inside the
//! reasoning with only `</think>` to see: [`ReasoningConfig::starts_in_reasoning`].
//!
//! Only a block at the very start is reasoning: after it, or once the answer has begun, a
//! `<think>` is text the model is writing about, and stays content. Whitespace that only pads
//! the tags is dropped, as the chat templates drop it when they print the history.

use std::mem;

use crate::toolcall::scan::partial_marker_len;

/// How a model marks its reasoning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasoningConfig {
    pub start_tag: String,
    pub end_tag: String,
    /// The prompt already opened the block: the output begins as reasoning.
    pub starts_in_reasoning: bool,
    /// False when thinking is off: all output is content, tags and all.
    pub enabled: bool,
}

impl Default for ReasoningConfig {
    fn default() -> Self {
        ReasoningConfig {
            start_tag: "<think>".to_string(),
            end_tag: "</think>".to_string(),
            starts_in_reasoning: false,
            enabled: true,
        }
    }
}

/// A piece of output, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReasoningEvent {
    Reasoning(String),
    Content(String),
}

/// What [`ReasoningParser::finish`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReasoningEnd {
    /// The text that was still held back.
    pub events: Vec<ReasoningEvent>,
    /// The output stopped before the reasoning was closed (the length limit hit while the
    /// model was thinking): the API can say so, and still return what came.
    pub ended_in_reasoning: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace yet; a start tag here opens reasoning.
    Start,
    /// In reasoning; `fresh` while none of it has been shown (leading whitespace, or a start
    /// tag the model repeated after the prompt's, is dropped).
    Reasoning { fresh: bool },
    /// In the answer; `fresh` while none of it has been shown.
    Content { fresh: bool },
}

/// Splits output into reasoning and content, one delta at a time.
#[derive(Debug, Clone)]
pub struct ReasoningParser {
    config: ReasoningConfig,
    state: State,
    pending: String,
}

impl ReasoningParser {
    pub fn new(config: ReasoningConfig) -> Self {
        let state = Self::initial_state(&config);
        ReasoningParser {
            config,
            state,
            pending: String::new(),
        }
    }

    /// `<think>`/`</think>`.
    pub fn think_tags(starts_in_reasoning: bool) -> Self {
        Self::new(ReasoningConfig {
            starts_in_reasoning,
            ..ReasoningConfig::default()
        })
    }

    /// Thinking off: everything is content.
    pub fn disabled() -> Self {
        Self::new(ReasoningConfig {
            enabled: false,
            ..ReasoningConfig::default()
        })
    }

    fn initial_state(config: &ReasoningConfig) -> State {
        if !config.enabled {
            State::Content { fresh: false }
        } else if config.starts_in_reasoning {
            State::Reasoning { fresh: true }
        } else {
            State::Start
        }
    }

    /// Whether text now arriving is reasoning.
    pub fn in_reasoning(&self) -> bool {
        matches!(self.state, State::Reasoning { .. })
    }

    pub fn feed(&mut self, delta: &str) -> Vec<ReasoningEvent> {
        let mut out = Vec::new();
        self.pending.push_str(delta);
        self.pump(false, &mut out);
        out
    }

    /// Ends the output and releases held text; the parser is then ready for a new output.
    pub fn finish(&mut self) -> ReasoningEnd {
        let mut events = Vec::new();
        self.pump(true, &mut events);
        let ended_in_reasoning = self.in_reasoning();
        self.state = Self::initial_state(&self.config);
        ReasoningEnd {
            events,
            ended_in_reasoning,
        }
    }

    fn pump(&mut self, eof: bool, out: &mut Vec<ReasoningEvent>) {
        loop {
            match self.state {
                State::Start => {
                    let t = self.pending.trim_start();
                    if let Some(rest) = t.strip_prefix(self.config.start_tag.as_str()) {
                        self.pending = rest.to_string();
                        self.state = State::Reasoning { fresh: true };
                    } else if self.config.start_tag.starts_with(t) && !eof {
                        // Whitespace, or the start of the tag: wait.
                        return;
                    } else {
                        self.state = State::Content { fresh: true };
                    }
                }
                State::Reasoning { fresh } => {
                    if fresh {
                        let t = self.pending.trim_start();
                        if t.is_empty() && !eof {
                            return;
                        }
                        if self.config.starts_in_reasoning {
                            if let Some(rest) = t.strip_prefix(self.config.start_tag.as_str()) {
                                // The model repeated the prompt's start tag.
                                self.pending = rest.to_string();
                                continue;
                            }
                            if self.config.start_tag.starts_with(t) && !eof {
                                return;
                            }
                        }
                        self.pending = t.to_string();
                        self.state = State::Reasoning { fresh: false };
                        continue;
                    }
                    if let Some(pos) = self.pending.find(self.config.end_tag.as_str()) {
                        let rest = self.pending.split_off(pos + self.config.end_tag.len());
                        self.pending.truncate(pos);
                        push(
                            out,
                            ReasoningEvent::Reasoning(self.pending.trim_end().into()),
                        );
                        self.pending = rest;
                        self.state = State::Content { fresh: true };
                        continue;
                    }
                    if eof {
                        let text = mem::take(&mut self.pending);
                        push(out, ReasoningEvent::Reasoning(text.trim_end().into()));
                        return;
                    }
                    let hold = partial_marker_len(&self.pending, [self.config.end_tag.as_str()]);
                    let keep = self.pending[..self.pending.len() - hold].trim_end().len();
                    let ready: String = self.pending.drain(..keep).collect();
                    push(out, ReasoningEvent::Reasoning(ready));
                    return;
                }
                State::Content { fresh } => {
                    if fresh {
                        let t = self.pending.trim_start();
                        if t.is_empty() {
                            self.pending.clear();
                            return;
                        }
                        self.pending = t.to_string();
                        self.state = State::Content { fresh: false };
                    }
                    let text = mem::take(&mut self.pending);
                    push(out, ReasoningEvent::Content(text));
                    return;
                }
            }
        }
    }
}

/// Appends, merging with a previous piece of the same kind; empty pieces are skipped.
fn push(out: &mut Vec<ReasoningEvent>, event: ReasoningEvent) {
    match (out.last_mut(), event) {
        (_, ReasoningEvent::Reasoning(t) | ReasoningEvent::Content(t)) if t.is_empty() => {}
        (Some(ReasoningEvent::Reasoning(last)), ReasoningEvent::Reasoning(t)) => last.push_str(&t),
        (Some(ReasoningEvent::Content(last)), ReasoningEvent::Content(t)) => last.push_str(&t),
        (_, event) => out.push(event),
    }
}
