//! Service events → Anthropic's streaming events, in the order its SDKs require:
//! `message_start`, then for each block `content_block_start`, its deltas and
//! `content_block_stop` (one block open at a time), then `message_delta` with the stop reason
//! and usage, then `message_stop`. `ping` goes out after `message_start` and while the model is
//! silent (a long prefill), as Anthropic's API does.

use axum::response::sse::Event;
use rmx_api::anthropic::{
    BlockDelta, ContentBlock, DeltaUsage, ErrorBody, MessageDelta, MessagesResponse, Role,
    StreamEvent, Usage,
};
use serde_json::{Map, Value};

use super::{stop_reason, usage};
use crate::service::ServiceEvent;
use crate::wire::sse::{named_event, Translator};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Open {
    None,
    Thinking,
    Text,
    /// A tool_use block, with the service's call index.
    Tool(usize),
}

pub struct MessageStream {
    id: String,
    model: String,
    prompt_tokens: usize,
    /// Index of the next block.
    next: usize,
    open: Open,
}

impl MessageStream {
    pub fn new(id: String, model: String, prompt_tokens: usize) -> MessageStream {
        MessageStream {
            id,
            model,
            prompt_tokens,
            next: 0,
            open: Open::None,
        }
    }

    pub fn start_events(&mut self) -> Vec<StreamEvent> {
        let message = MessagesResponse {
            id: self.id.clone(),
            kind: "message".into(),
            role: Role::Assistant,
            content: Vec::new(),
            model: self.model.clone(),
            stop_reason: None,
            stop_sequence: None,
            usage: Usage {
                input_tokens: self.prompt_tokens,
                output_tokens: 0,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 0,
            },
        };
        vec![StreamEvent::MessageStart { message }, StreamEvent::Ping]
    }

    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        if self.open == Open::None {
            return;
        }
        let index = self.next - 1;
        if self.open == Open::Thinking {
            // Clients send thinking blocks back with their signature; there is none to check
            // here, but the SDKs expect the delta before the block ends.
            out.push(StreamEvent::ContentBlockDelta {
                index,
                delta: BlockDelta::SignatureDelta {
                    signature: String::new(),
                },
            });
        }
        out.push(StreamEvent::ContentBlockStop { index });
        self.open = Open::None;
    }

    fn open_block(&mut self, open: Open, block: ContentBlock, out: &mut Vec<StreamEvent>) -> usize {
        self.close(out);
        let index = self.next;
        self.next += 1;
        self.open = open;
        out.push(StreamEvent::ContentBlockStart {
            index,
            content_block: block,
        });
        index
    }

    pub fn events(&mut self, event: ServiceEvent) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        match event {
            ServiceEvent::Reasoning(t) => {
                let index = if self.open == Open::Thinking {
                    self.next - 1
                } else {
                    let block = ContentBlock::Thinking {
                        thinking: String::new(),
                        signature: String::new(),
                    };
                    self.open_block(Open::Thinking, block, &mut out)
                };
                out.push(StreamEvent::ContentBlockDelta {
                    index,
                    delta: BlockDelta::ThinkingDelta { thinking: t },
                });
            }
            ServiceEvent::Content(t) => {
                let index = if self.open == Open::Text {
                    self.next - 1
                } else {
                    self.open_block(
                        Open::Text,
                        ContentBlock::Text {
                            text: String::new(),
                        },
                        &mut out,
                    )
                };
                out.push(StreamEvent::ContentBlockDelta {
                    index,
                    delta: BlockDelta::TextDelta { text: t },
                });
            }
            ServiceEvent::ToolCallStart { index, id, name } => {
                let block = ContentBlock::ToolUse {
                    id,
                    name,
                    input: Value::Object(Map::new()),
                };
                self.open_block(Open::Tool(index), block, &mut out);
            }
            ServiceEvent::ToolCallArgs { index, delta } => {
                if self.open == Open::Tool(index) {
                    out.push(StreamEvent::ContentBlockDelta {
                        index: self.next - 1,
                        delta: BlockDelta::InputJsonDelta {
                            partial_json: delta,
                        },
                    });
                }
            }
            ServiceEvent::ToolCallEnd { index } => {
                if self.open == Open::Tool(index) {
                    self.close(&mut out);
                }
            }
            ServiceEvent::Logprob(_) => {}
            ServiceEvent::Done(f) => {
                self.close(&mut out);
                let u = usage(&f.usage);
                let (stop, stop_sequence) = stop_reason(&f);
                out.push(StreamEvent::MessageDelta {
                    delta: MessageDelta {
                        stop_reason: Some(stop),
                        stop_sequence,
                    },
                    usage: DeltaUsage {
                        output_tokens: u.output_tokens,
                        input_tokens: Some(u.input_tokens),
                        cache_read_input_tokens: Some(u.cache_read_input_tokens),
                    },
                });
                out.push(StreamEvent::MessageStop);
            }
            ServiceEvent::Error(message) => {
                out.push(StreamEvent::Error {
                    error: ErrorBody {
                        kind: "api_error".into(),
                        message,
                    },
                });
            }
        }
        out
    }
}

fn sse_event(e: &StreamEvent) -> Event {
    named_event(e.name(), e)
}

impl Translator for MessageStream {
    fn start(&mut self) -> Vec<Event> {
        self.start_events().iter().map(sse_event).collect()
    }

    fn event(&mut self, event: ServiceEvent) -> Vec<Event> {
        self.events(event).iter().map(sse_event).collect()
    }

    fn idle(&mut self) -> Vec<Event> {
        vec![sse_event(&StreamEvent::Ping)]
    }
}
