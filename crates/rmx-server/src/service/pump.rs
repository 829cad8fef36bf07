//! Engine events to the surface: each token's text through the reasoning, tool-call or harmony
//! parser into [`ServiceEvent`]s, and one final event.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmx_engine::Event;
use rmx_text::harmony::{HarmonyEvent, HarmonyParser};
use rmx_text::reasoning::{ReasoningEvent, ReasoningParser};
use rmx_text::toolcall::{ToolCallEvent, ToolCallParser};
use tokio::sync::{mpsc, watch};

use super::{Final, FinishReason, ServiceEvent, Timings, TokenLogprob, Usage};
use crate::lifecycle::Lease;
use crate::metrics::Metrics;

/// Carries engine events to the client through the parsers; holds the model's lease until the
/// answer ends, so keep-alive counts from the end of the reply.
pub(super) struct Pump {
    pub(super) tx: mpsc::UnboundedSender<ServiceEvent>,
    pub(super) reasoning: ReasoningParser,
    pub(super) tools: Option<ToolCallParser>,
    pub(super) harmony: Option<HarmonyParser>,
    pub(super) calls: usize,
    /// Tokens that began or ended inside the reasoning block.
    pub(super) reasoning_tokens: usize,
    pub(super) load_duration: Duration,
    pub(super) started: Instant,
    /// From `started` to the first generated token, once it came.
    pub(super) first_token: Option<Duration>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) lease: Lease,
}

impl Pump {
    pub(super) async fn run(
        mut self,
        mut engine_rx: mpsc::UnboundedReceiver<Event>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let event = tokio::select! {
                ev = engine_rx.recv() => ev,
                // The client went away: dropping `engine_rx` cancels the generation.
                _ = self.tx.closed() => return,
                _ = shutdown.wait_for(|s| *s) => {
                    drop(engine_rx);
                    let (usage, timings) = (Usage::default(), Timings::default());
                    self.finish(FinishReason::Cancelled, None, usage, timings);
                    return;
                }
            };
            match event {
                Some(Event::Token { id, text, logprob }) => {
                    self.first_token
                        .get_or_insert_with(|| self.started.elapsed());
                    if let Some(lp) = logprob {
                        let tok = self
                            .lease
                            .loaded()
                            .ok()
                            .map(|l| l.engine.tokenizer().clone());
                        let decode = |id: u32| {
                            tok.as_ref()
                                .and_then(|t| t.decode(&[id], false).ok())
                                .unwrap_or_default()
                        };
                        let ev = TokenLogprob {
                            id,
                            token: decode(id),
                            logprob: lp.logprob,
                            top: lp.top.iter().map(|&(i, p)| (i, decode(i), p)).collect(),
                        };
                        let _ = self.tx.send(ServiceEvent::Logprob(ev));
                    }
                    let before = self.in_reasoning();
                    self.text(&text);
                    if before || self.in_reasoning() {
                        self.reasoning_tokens += 1;
                    }
                }
                Some(Event::Done {
                    finish,
                    stop_sequence,
                    text,
                    usage,
                    timings,
                }) => {
                    self.text(&text);
                    let finish = match finish {
                        rmx_engine::FinishReason::Stop => FinishReason::Stop,
                        rmx_engine::FinishReason::Length => FinishReason::Length,
                    };
                    self.finish(finish, stop_sequence, usage, timings);
                    return;
                }
                Some(Event::Error(e)) => {
                    let _ = self.tx.send(ServiceEvent::Error(e));
                    return;
                }
                None => {
                    let _ = self.tx.send(ServiceEvent::Error(
                        "the engine stopped before the answer ended".into(),
                    ));
                    return;
                }
            }
        }
    }

    fn in_reasoning(&self) -> bool {
        match &self.harmony {
            Some(h) => h.in_reasoning(),
            None => self.reasoning.in_reasoning(),
        }
    }

    fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if let Some(h) = self.harmony.as_mut() {
            let events = h.feed(text);
            self.harmony_events(events);
            return;
        }
        let events = self.reasoning.feed(text);
        self.reasoning_events(events);
    }

    fn harmony_events(&mut self, events: Vec<HarmonyEvent>) {
        for e in events {
            match e {
                HarmonyEvent::Reasoning(t) => {
                    let _ = self.tx.send(ServiceEvent::Reasoning(t));
                }
                HarmonyEvent::Output(e) => self.tool_events(vec![e]),
            }
        }
    }

    fn reasoning_events(&mut self, events: Vec<ReasoningEvent>) {
        for e in events {
            match e {
                ReasoningEvent::Reasoning(t) => {
                    let _ = self.tx.send(ServiceEvent::Reasoning(t));
                }
                ReasoningEvent::Content(t) => match self.tools.as_mut() {
                    Some(p) => {
                        let evs = p.feed(&t);
                        self.tool_events(evs);
                    }
                    None => {
                        let _ = self.tx.send(ServiceEvent::Content(t));
                    }
                },
            }
        }
    }

    fn tool_events(&mut self, events: Vec<ToolCallEvent>) {
        for e in events {
            let ev = match e {
                ToolCallEvent::Content(t) => ServiceEvent::Content(t),
                ToolCallEvent::ToolCallStart { index, id, name } => {
                    self.calls += 1;
                    ServiceEvent::ToolCallStart { index, id, name }
                }
                ToolCallEvent::ToolCallArgsDelta { index, delta } => {
                    ServiceEvent::ToolCallArgs { index, delta }
                }
                ToolCallEvent::ToolCallEnd { index } => ServiceEvent::ToolCallEnd { index },
            };
            let _ = self.tx.send(ev);
        }
    }

    fn finish(
        &mut self,
        finish: FinishReason,
        stop_sequence: Option<String>,
        usage: Usage,
        timings: Timings,
    ) {
        let mut end = self.reasoning.finish();
        self.reasoning_events(end.events);
        if let Some(h) = self.harmony.as_mut() {
            let (events, in_reasoning) = h.finish();
            end.ended_in_reasoning = in_reasoning;
            self.harmony_events(events);
        }
        if let Some(p) = self.tools.as_mut() {
            let evs = p.finish();
            self.tool_events(evs);
        }
        self.metrics.answer(
            usage.prompt_tokens,
            usage.completion_tokens,
            self.first_token,
            timings.decode,
        );
        let finish = if self.calls > 0 && finish == FinishReason::Stop {
            FinishReason::ToolCalls
        } else {
            finish
        };
        let _ = self.tx.send(ServiceEvent::Done(Final {
            finish,
            usage,
            timings,
            load_duration: self.load_duration,
            total_duration: self.started.elapsed(),
            ended_in_reasoning: end.ended_in_reasoning,
            stop_sequence,
            reasoning_tokens: self.reasoning_tokens,
        }));
    }
}
