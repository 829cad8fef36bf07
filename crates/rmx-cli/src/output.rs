//! Writing generated text as it streams: answer on stdout, reasoning dimmed (or hidden), stats on
//! stderr so `rmx run ... > file` captures only the answer.

use std::io::{IsTerminal, Write};

use rmx_text::reasoning::{ReasoningEvent, ReasoningParser};

pub struct StreamPrinter {
    reasoning: ReasoningParser,
    show_reasoning: bool,
    dim: bool,
    in_dim: bool,
}

impl StreamPrinter {
    pub fn new(reasoning: ReasoningParser, show_reasoning: bool) -> StreamPrinter {
        StreamPrinter {
            reasoning,
            show_reasoning,
            dim: std::io::stdout().is_terminal(),
            in_dim: false,
        }
    }

    pub fn push(&mut self, delta: &str) -> std::io::Result<()> {
        let events = self.reasoning.feed(delta);
        self.write(events)
    }

    pub fn finish(&mut self) -> std::io::Result<()> {
        let end = self.reasoning.finish();
        self.write(end.events)?;
        let mut out = std::io::stdout().lock();
        if self.in_dim {
            write!(out, "\x1b[0m")?;
        }
        writeln!(out)?;
        out.flush()
    }

    fn write(&mut self, events: Vec<ReasoningEvent>) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        for e in events {
            match e {
                ReasoningEvent::Reasoning(t) if self.show_reasoning => {
                    if self.dim && !self.in_dim {
                        write!(out, "\x1b[2m")?;
                        self.in_dim = true;
                    }
                    write!(out, "{t}")?;
                }
                ReasoningEvent::Reasoning(_) => {}
                ReasoningEvent::Content(t) => {
                    if self.in_dim {
                        write!(out, "\x1b[0m")?;
                        self.in_dim = false;
                    }
                    write!(out, "{t}")?;
                }
            }
        }
        out.flush()
    }
}
