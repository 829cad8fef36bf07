//! Writing an answer as it streams: the answer on stdout, reasoning dimmed on a terminal (or
//! hidden), stats on stderr, so `rmx run ... > file` captures only the answer.

use std::io::{IsTerminal, Write};

use rmx_api::DoneStats;

pub struct StreamPrinter {
    show_reasoning: bool,
    dim: bool,
    in_dim: bool,
    wrote: bool,
}

impl StreamPrinter {
    pub fn new(show_reasoning: bool) -> StreamPrinter {
        StreamPrinter {
            show_reasoning,
            dim: std::io::stdout().is_terminal(),
            in_dim: false,
            wrote: false,
        }
    }

    pub fn reasoning(&mut self, text: &str) -> std::io::Result<()> {
        if !self.show_reasoning || text.is_empty() {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        if self.dim && !self.in_dim {
            write!(out, "\x1b[2m")?;
            self.in_dim = true;
        }
        write!(out, "{text}")?;
        self.wrote = true;
        out.flush()
    }

    pub fn content(&mut self, text: &str) -> std::io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        if self.in_dim {
            write!(out, "\x1b[0m")?;
            self.in_dim = false;
        }
        write!(out, "{text}")?;
        self.wrote = true;
        out.flush()
    }

    /// Ends the answer: resets the color and ends the line.
    pub fn finish(&mut self) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        if self.in_dim {
            write!(out, "\x1b[0m")?;
            self.in_dim = false;
        }
        writeln!(out)?;
        out.flush()
    }
}

/// `--verbose`: the speeds of one answer, on stderr.
pub fn print_stats(stats: &DoneStats) {
    eprintln!(
        "prompt: {} tokens, {:.1} tok/s | answer: {} tokens, {:.1} tok/s | load {:.0} ms | total {:.0} ms",
        stats.prompt_eval_count,
        stats.prompt_eval_rate(),
        stats.eval_count,
        stats.eval_rate(),
        stats.load_duration as f64 / 1e6,
        stats.total_duration as f64 / 1e6
    );
    if let (Some(drafted), Some(accepted)) = (stats.draft_tokens, stats.accepted_draft_tokens) {
        let rate = 100.0 * accepted as f64 / drafted.max(1) as f64;
        eprintln!("speculative: {accepted} of {drafted} guessed tokens accepted ({rate:.0}%)");
    }
    if let Some(off) = &stats.speculation_off {
        eprintln!("{off}");
    }
}
