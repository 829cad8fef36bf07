//! What the service core answers with: a [`ServiceStream`] of [`ServiceEvent`]s, ending in
//! exactly one `Done` or `Error`, or the whole answer collected into a [`Completion`].

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use futures_util::Stream;
use tokio::sync::mpsc;

use super::{ServiceError, Timings, Usage};
use crate::error::CUT_OFF;

/// Why an answer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// EOS or a stop string.
    Stop,
    /// `max_tokens` reached (or the context is full).
    Length,
    /// The answer holds tool calls.
    ToolCalls,
    /// The daemon is shutting down; the text so far is all there is.
    Cancelled,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Cancelled => "cancelled",
        }
    }
}

/// The chosen token's logprob and the alternatives, with their text.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub id: u32,
    pub token: String,
    pub logprob: f32,
    /// (id, text, logprob), most likely first.
    pub top: Vec<(u32, String, f32)>,
}

/// The last event of a successful answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Final {
    pub finish: FinishReason,
    /// Prompt, completion and cached (prefix-cache) tokens.
    pub usage: Usage,
    pub timings: Timings,
    /// Time spent loading the model for this request (zero when it was loaded already).
    pub load_duration: Duration,
    /// From the call to [`Service::generate`] to the end.
    pub total_duration: Duration,
    /// The output stopped inside the reasoning block (length limit while thinking).
    pub ended_in_reasoning: bool,
    /// The request's stop string that ended the answer (finish is then `Stop`, or `ToolCalls`
    /// when calls came before it); only Anthropic's API names it.
    pub stop_sequence: Option<String>,
    /// Generated tokens inside `<think>...</think>` (the tags included).
    pub reasoning_tokens: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ServiceEvent {
    Content(String),
    Reasoning(String),
    /// A tool call begins; `index` counts calls from 0.
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// A piece of the call's JSON arguments; the pieces concatenate to the arguments.
    ToolCallArgs {
        index: usize,
        delta: String,
    },
    ToolCallEnd {
        index: usize,
    },
    /// Sent before the text of the token it describes (only when `logprobs` was asked).
    Logprob(TokenLogprob),
    Done(Final),
    /// The generation failed after it started; nothing follows.
    Error(String),
}

/// The events of one answer, plus what is known before the first one.
pub struct ServiceStream {
    rx: mpsc::UnboundedReceiver<ServiceEvent>,
    /// The model name as the request gave it.
    pub model: String,
    pub prompt_tokens: usize,
    pub created: SystemTime,
    /// See [`ServiceStream::cancel_as_done`].
    cancel_as_done: bool,
}

impl ServiceStream {
    pub(super) fn new(
        rx: mpsc::UnboundedReceiver<ServiceEvent>,
        model: String,
        prompt_tokens: usize,
        created: SystemTime,
    ) -> ServiceStream {
        ServiceStream {
            rx,
            model,
            prompt_tokens,
            created,
            cancel_as_done: false,
        }
    }

    /// A shutdown ends this answer with `Done` and [`FinishReason::Cancelled`] rather than an
    /// [`ServiceEvent::Error`]: for a surface that says "cancelled" in its own words (Ollama's
    /// `done_reason`). The others have no such finish, and a normal one (`stop`, `end_turn`)
    /// would pass a cut-off answer off as whole.
    pub fn cancel_as_done(mut self) -> ServiceStream {
        self.cancel_as_done = true;
        self
    }

    fn cut_off(&self, ev: ServiceEvent) -> ServiceEvent {
        match ev {
            ServiceEvent::Done(f)
                if f.finish == FinishReason::Cancelled && !self.cancel_as_done =>
            {
                ServiceEvent::Error(CUT_OFF.to_string())
            }
            ev => ev,
        }
    }

    pub async fn next_event(&mut self) -> Option<ServiceEvent> {
        let ev = self.rx.recv().await?;
        Some(self.cut_off(ev))
    }

    /// Reads the whole answer (for `stream: false`). One cut off by the shutdown is
    /// [`ServiceError::ShuttingDown`] (unless [`ServiceStream::cancel_as_done`]).
    pub async fn collect_all(mut self) -> Result<Completion, ServiceError> {
        let mut c = Completion::default();
        while let Some(ev) = self.rx.recv().await {
            match ev {
                ServiceEvent::Done(f)
                    if f.finish == FinishReason::Cancelled && !self.cancel_as_done =>
                {
                    return Err(ServiceError::ShuttingDown);
                }
                ServiceEvent::Content(t) => c.content.push_str(&t),
                ServiceEvent::Reasoning(t) => c.reasoning.push_str(&t),
                ServiceEvent::ToolCallStart { id, name, .. } => c.tool_calls.push(CollectedCall {
                    id,
                    name,
                    arguments: String::new(),
                }),
                ServiceEvent::ToolCallArgs { delta, .. } => {
                    if let Some(call) = c.tool_calls.last_mut() {
                        call.arguments.push_str(&delta);
                    }
                }
                ServiceEvent::ToolCallEnd { .. } => {}
                ServiceEvent::Logprob(l) => c.logprobs.push(l),
                ServiceEvent::Done(f) => {
                    c.done = Some(f);
                    return Ok(c);
                }
                ServiceEvent::Error(e) => return Err(ServiceError::failed(e)),
            }
        }
        Err(ServiceError::Internal(
            "the answer ended without a final event".into(),
        ))
    }
}

impl Stream for ServiceStream {
    type Item = ServiceEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ServiceEvent>> {
        let ev = std::task::ready!(self.rx.poll_recv(cx));
        Poll::Ready(ev.map(|ev| self.cut_off(ev)))
    }
}

/// A whole answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<CollectedCall>,
    pub logprobs: Vec<TokenLogprob>,
    /// Always Some when returned by [`ServiceStream::collect_all`].
    pub done: Option<Final>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CollectedCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}
