//! The Responses stream: service events become `response.created`, output items added and
//! done (reasoning, message, function_call), text and argument deltas, and a closing
//! `response.completed`, `response.incomplete` or `response.failed`, while the response
//! object is built as they go, so the non-streamed answer is the stream's last object.

use axum::response::sse::Event;
use rmx_api::openai::{
    IncompleteDetails, InputTokensDetails, OutputContent, OutputItem, OutputTokensDetails,
    ReasoningText, Response, ResponseError, ResponseStreamEvent as E, ResponsesRequest,
    ResponsesTool, ResponsesUsage,
};
use serde_json::{json, Value};

use super::super::new_id;
use crate::service::{FinishReason, ServiceEvent};
use crate::wire::sse::{named_event, Translator};

/// What is open in the output right now.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Open {
    None,
    Reasoning(usize),
    Message(usize),
    Call(usize),
}

/// Service events → Responses stream events, building the response object as it goes.
pub struct ResponsesStream {
    pub response: Response,
    seq: u64,
    open: Open,
    /// The service's call index → output index.
    calls: Vec<(usize, usize)>,
}

impl ResponsesStream {
    pub fn new(req: &ResponsesRequest, created_at: u64) -> ResponsesStream {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .flatten()
            .filter(|t| matches!(t, ResponsesTool::Function { .. }))
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect();
        ResponsesStream {
            response: Response {
                id: new_id("resp"),
                object: "response".into(),
                created_at,
                status: "in_progress".into(),
                model: req.model.clone(),
                output: Vec::new(),
                usage: None,
                error: None,
                incomplete_details: None,
                parallel_tool_calls: req.parallel_tool_calls.unwrap_or(true),
                tool_choice: req.tool_choice.clone().unwrap_or_else(|| json!("auto")),
                tools,
            },
            seq: 0,
            open: Open::None,
            calls: Vec::new(),
        }
    }

    fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        s
    }

    pub fn start_events(&mut self) -> Vec<E> {
        let created = E::Created {
            sequence_number: self.next_seq(),
            response: self.response.clone(),
        };
        let in_progress = E::InProgress {
            sequence_number: self.next_seq(),
            response: self.response.clone(),
        };
        vec![created, in_progress]
    }

    fn item_id(&self, index: usize) -> String {
        match &self.response.output[index] {
            OutputItem::Message { id, .. }
            | OutputItem::Reasoning { id, .. }
            | OutputItem::FunctionCall { id, .. } => id.clone(),
        }
    }

    fn add_item(&mut self, item: OutputItem, out: &mut Vec<E>) -> usize {
        let index = self.response.output.len();
        self.response.output.push(item.clone());
        out.push(E::OutputItemAdded {
            sequence_number: self.next_seq(),
            output_index: index,
            item,
        });
        index
    }

    /// Closes the open item with its `.done` events.
    fn close(&mut self, out: &mut Vec<E>) {
        let open = std::mem::replace(&mut self.open, Open::None);
        let index = match open {
            Open::None => return,
            Open::Reasoning(i) | Open::Message(i) | Open::Call(i) => i,
        };
        let item_id = self.item_id(index);
        match &mut self.response.output[index] {
            OutputItem::Reasoning { content, .. } => {
                let text = content.first().map(|c| c.text.clone()).unwrap_or_default();
                let seq = self.next_seq();
                out.push(E::ReasoningTextDone {
                    sequence_number: seq,
                    item_id,
                    output_index: index,
                    content_index: 0,
                    text,
                });
            }
            OutputItem::Message {
                content, status, ..
            } => {
                *status = "completed".into();
                let part = content
                    .first()
                    .cloned()
                    .unwrap_or(OutputContent::OutputText {
                        text: String::new(),
                        annotations: Vec::new(),
                    });
                let OutputContent::OutputText { text, .. } = &part;
                let text = text.clone();
                let s1 = self.next_seq();
                let s2 = self.next_seq();
                out.push(E::OutputTextDone {
                    sequence_number: s1,
                    item_id: item_id.clone(),
                    output_index: index,
                    content_index: 0,
                    text,
                    logprobs: Vec::new(),
                });
                out.push(E::ContentPartDone {
                    sequence_number: s2,
                    item_id,
                    output_index: index,
                    content_index: 0,
                    part,
                });
            }
            OutputItem::FunctionCall {
                arguments, status, ..
            } => {
                *status = "completed".into();
                if arguments.is_empty() {
                    *arguments = "{}".into();
                }
                let arguments = arguments.clone();
                let seq = self.next_seq();
                out.push(E::FunctionCallArgumentsDone {
                    sequence_number: seq,
                    item_id,
                    output_index: index,
                    arguments,
                });
            }
        }
        let item = self.response.output[index].clone();
        let seq = self.next_seq();
        out.push(E::OutputItemDone {
            sequence_number: seq,
            output_index: index,
            item,
        });
    }

    /// The stream events for one service event.
    pub fn events(&mut self, event: ServiceEvent) -> Vec<E> {
        let mut out = Vec::new();
        match event {
            ServiceEvent::Reasoning(t) => {
                let index = match self.open {
                    Open::Reasoning(i) => i,
                    _ => {
                        self.close(&mut out);
                        let item = OutputItem::Reasoning {
                            id: new_id("rs"),
                            summary: Vec::new(),
                            content: Vec::new(),
                        };
                        let i = self.add_item(item, &mut out);
                        self.open = Open::Reasoning(i);
                        i
                    }
                };
                if let OutputItem::Reasoning { content, .. } = &mut self.response.output[index] {
                    match content.first_mut() {
                        Some(c) => c.text.push_str(&t),
                        None => content.push(ReasoningText {
                            kind: "reasoning_text".into(),
                            text: t.clone(),
                        }),
                    }
                }
                let seq = self.next_seq();
                out.push(E::ReasoningTextDelta {
                    sequence_number: seq,
                    item_id: self.item_id(index),
                    output_index: index,
                    content_index: 0,
                    delta: t,
                });
            }
            ServiceEvent::Content(t) => {
                let index = match self.open {
                    Open::Message(i) => i,
                    _ => {
                        self.close(&mut out);
                        let item = OutputItem::Message {
                            id: new_id("msg"),
                            status: "in_progress".into(),
                            role: "assistant".into(),
                            content: Vec::new(),
                        };
                        let i = self.add_item(item, &mut out);
                        let part = OutputContent::OutputText {
                            text: String::new(),
                            annotations: Vec::new(),
                        };
                        if let OutputItem::Message { content, .. } = &mut self.response.output[i] {
                            content.push(part.clone());
                        }
                        let seq = self.next_seq();
                        out.push(E::ContentPartAdded {
                            sequence_number: seq,
                            item_id: self.item_id(i),
                            output_index: i,
                            content_index: 0,
                            part,
                        });
                        self.open = Open::Message(i);
                        i
                    }
                };
                if let OutputItem::Message { content, .. } = &mut self.response.output[index] {
                    if let Some(OutputContent::OutputText { text, .. }) = content.first_mut() {
                        text.push_str(&t);
                    }
                }
                let seq = self.next_seq();
                out.push(E::OutputTextDelta {
                    sequence_number: seq,
                    item_id: self.item_id(index),
                    output_index: index,
                    content_index: 0,
                    delta: t,
                    logprobs: Vec::new(),
                });
            }
            ServiceEvent::ToolCallStart { index, id, name } => {
                self.close(&mut out);
                let item = OutputItem::FunctionCall {
                    id: new_id("fc"),
                    call_id: id,
                    name,
                    arguments: String::new(),
                    status: "in_progress".into(),
                };
                let i = self.add_item(item, &mut out);
                self.calls.push((index, i));
                self.open = Open::Call(i);
            }
            ServiceEvent::ToolCallArgs { index, delta } => {
                if let Some(&(_, i)) = self.calls.iter().rev().find(|(c, _)| *c == index) {
                    if let OutputItem::FunctionCall { arguments, .. } = &mut self.response.output[i]
                    {
                        arguments.push_str(&delta);
                    }
                    let seq = self.next_seq();
                    out.push(E::FunctionCallArgumentsDelta {
                        sequence_number: seq,
                        item_id: self.item_id(i),
                        output_index: i,
                        delta,
                    });
                }
            }
            ServiceEvent::ToolCallEnd { .. } => {
                if matches!(self.open, Open::Call(_)) {
                    self.close(&mut out);
                }
            }
            ServiceEvent::Logprob(_) => {}
            ServiceEvent::Done(f) => {
                self.close(&mut out);
                let u = f.usage;
                self.response.usage = Some(ResponsesUsage {
                    input_tokens: u.prompt_tokens,
                    input_tokens_details: InputTokensDetails {
                        cached_tokens: u.cached_tokens,
                        cache_write_tokens: 0,
                    },
                    output_tokens: u.completion_tokens,
                    output_tokens_details: OutputTokensDetails {
                        reasoning_tokens: f.reasoning_tokens,
                    },
                    total_tokens: u.prompt_tokens + u.completion_tokens,
                });
                let seq = self.next_seq();
                if f.finish == FinishReason::Length {
                    self.response.status = "incomplete".into();
                    self.response.incomplete_details = Some(IncompleteDetails {
                        reason: "max_output_tokens".into(),
                    });
                    out.push(E::Incomplete {
                        sequence_number: seq,
                        response: self.response.clone(),
                    });
                } else {
                    self.response.status = "completed".into();
                    out.push(E::Completed {
                        sequence_number: seq,
                        response: self.response.clone(),
                    });
                }
            }
            ServiceEvent::Error(message) => {
                self.close(&mut out);
                self.response.status = "failed".into();
                self.response.error = Some(ResponseError {
                    code: "server_error".into(),
                    message,
                });
                let seq = self.next_seq();
                out.push(E::Failed {
                    sequence_number: seq,
                    response: self.response.clone(),
                });
            }
        }
        out
    }
}

fn sse_event(e: &E) -> Event {
    named_event(e.name(), e)
}

impl Translator for ResponsesStream {
    fn start(&mut self) -> Vec<Event> {
        self.start_events().iter().map(sse_event).collect()
    }

    fn event(&mut self, event: ServiceEvent) -> Vec<Event> {
        self.events(event).iter().map(sse_event).collect()
    }

    fn idle(&mut self) -> Vec<Event> {
        vec![Event::default().comment("keep-alive")]
    }
}
