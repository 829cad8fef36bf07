//! Drawing long-running store work: pulls ([`PullEvent`]s, whether they come from the store in
//! this process or from the daemon's ndjson stream) and GGUF imports.
//!
//! On a terminal: a total bar (bytes, rate, ETA) above one bar per file in flight, on stderr.
//! Otherwise (a pipe, a log file, a test): plain lines on stdout, one per file and a summary,
//! with at most one progress line every few seconds, so logs stay short and readable.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rmx_store::{human_bytes, PullEvent, Reporter};

/// Bars only when a person is watching both streams; anything else gets plain lines.
pub fn interactive() -> bool {
    std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

/// How often plain mode reports a file still in flight.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

fn style(template: &str) -> ProgressStyle {
    // The templates are constants of this file; a typo is a bug caught by any interactive run.
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("━━╌")
}

fn total_style() -> ProgressStyle {
    style(
        "{msg:<28!} {bar:30.cyan/blue} {bytes:>10}/{total_bytes:<10} {bytes_per_sec:>11} {eta:>4}",
    )
}

fn file_style() -> ProgressStyle {
    style("  {msg:<26!} {bar:30.green/white} {bytes:>10}/{total_bytes:<10}")
}

/// What a pull looks like so far, kept for the summary and the Ctrl-C message.
#[derive(Default)]
struct PullState {
    repo: String,
    total: u64,
    done: u64,
    present: u64,
    started: Option<Instant>,
    /// Plain mode: when each file last printed a line.
    last_line: HashMap<String, Instant>,
    /// Interactive mode: one bar per file in flight.
    bars: HashMap<String, ProgressBar>,
}

pub struct PullProgress {
    multi: Option<MultiProgress>,
    total_bar: Option<ProgressBar>,
    state: Mutex<PullState>,
}

impl PullProgress {
    pub fn new() -> PullProgress {
        PullProgress::with_bars(interactive())
    }

    pub fn with_bars(bars: bool) -> PullProgress {
        let (multi, total_bar) = if bars {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let bar = multi.add(ProgressBar::new_spinner());
            bar.set_style(total_style());
            bar.set_message("resolving");
            bar.enable_steady_tick(Duration::from_millis(120));
            (Some(multi), Some(bar))
        } else {
            (None, None)
        };
        PullProgress {
            multi,
            total_bar,
            state: Mutex::new(PullState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PullState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes on disk so far and the pull's total (0 before the repo is resolved).
    pub fn done_total(&self) -> (u64, u64) {
        let s = self.state();
        (s.done, s.total)
    }

    /// A line above the bars (or a plain line).
    fn say(&self, line: &str) {
        match &self.multi {
            Some(multi) => {
                let _ = multi.println(line);
            }
            None => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
        }
    }

    /// Stop drawing and leave what was drawn (interrupt, error).
    pub fn abandon(&self) {
        let mut s = self.state();
        for (_, bar) in s.bars.drain() {
            bar.abandon();
        }
        if let Some(bar) = &self.total_bar {
            bar.abandon();
        }
    }

    fn on_event(&self, event: &PullEvent) {
        match event {
            PullEvent::Resolved {
                repo,
                commit,
                files,
                total,
                present,
            } => {
                {
                    let mut s = self.state();
                    s.repo.clone_from(repo);
                    s.total = *total;
                    s.done = *present;
                    s.present = *present;
                    s.started = Some(Instant::now());
                }
                let short = commit.get(..7).unwrap_or(commit);
                let mut line = format!(
                    "pulling {repo} ({short}): {} files, {}",
                    files.len(),
                    human_bytes(*total)
                );
                if *present > 0 {
                    line.push_str(&format!(", {} already here", human_bytes(*present)));
                }
                self.say(&line);
                if let Some(bar) = &self.total_bar {
                    bar.set_length(*total);
                    bar.set_position(*present);
                    bar.reset_eta();
                    bar.set_message(format!("pulling {repo}"));
                }
            }
            PullEvent::Verifying { file, size, .. } => {
                if self.multi.is_none() {
                    self.say(&format!("  {file}: verifying {}", human_bytes(*size)));
                }
            }
            PullEvent::FileStarted {
                file, size, offset, ..
            } => {
                if let Some(multi) = &self.multi {
                    let bar = multi.add(ProgressBar::new(*size));
                    bar.set_style(file_style());
                    bar.set_message(file.clone());
                    bar.set_position(*offset);
                    bar.reset_eta();
                    self.state().bars.insert(file.clone(), bar);
                } else if *offset > 0 {
                    self.say(&format!(
                        "  {file}: resuming at {} of {}",
                        human_bytes(*offset),
                        human_bytes(*size)
                    ));
                }
                self.state().last_line.insert(file.clone(), Instant::now());
            }
            PullEvent::Progress {
                file,
                file_done,
                file_size,
                done,
                ..
            } => {
                let mut s = self.state();
                s.done = *done;
                if let Some(bar) = &self.total_bar {
                    bar.set_position(*done);
                }
                if let Some(bar) = s.bars.get(file) {
                    bar.set_position(*file_done);
                } else if self.multi.is_none() {
                    let now = Instant::now();
                    let due = s
                        .last_line
                        .get(file)
                        .is_none_or(|t| now.duration_since(*t) >= PLAIN_EVERY);
                    if due && file_done < file_size {
                        s.last_line.insert(file.clone(), now);
                        let rate = rate(*done - s.present.min(*done), s.started);
                        drop(s);
                        self.say(&format!(
                            "  {file}: {} of {} ({}%){rate}",
                            human_bytes(*file_done),
                            human_bytes(*file_size),
                            file_done * 100 / (*file_size).max(1)
                        ));
                    }
                }
            }
            PullEvent::Retrying {
                file,
                attempt,
                error,
                ..
            } => {
                self.say(&format!(
                    "  {file}: retrying (attempt {attempt}) after: {error}"
                ));
            }
            PullEvent::FileDone {
                file, size, cached, ..
            } => {
                let bar = self.state().bars.remove(file);
                if let Some(bar) = bar {
                    bar.finish_and_clear();
                }
                let how = if *cached { "already here" } else { "done" };
                self.say(&format!("  {file:<32} {:>10}  {how}", human_bytes(*size)));
            }
            PullEvent::Writing { .. } => {
                if let Some(bar) = &self.total_bar {
                    bar.set_message("writing the snapshot");
                }
            }
            PullEvent::Finished {
                repo, downloaded, ..
            } => {
                if let Some(bar) = &self.total_bar {
                    bar.finish_and_clear();
                }
                let started = self.state().started;
                let line = if *downloaded == 0 {
                    format!("{repo} is up to date")
                } else {
                    format!(
                        "pulled {repo}: {} downloaded{}",
                        human_bytes(*downloaded),
                        rate(*downloaded, started)
                    )
                };
                self.say(&line);
            }
        }
    }
}

impl Default for PullProgress {
    fn default() -> Self {
        PullProgress::new()
    }
}

impl Reporter for PullProgress {
    fn report(&self, event: &PullEvent) {
        self.on_event(event);
    }
}

/// ` in 2.1s (35.2 MB/s)`, or nothing before the clock started.
fn rate(bytes: u64, started: Option<Instant>) -> String {
    let Some(started) = started else {
        return String::new();
    };
    let secs = started.elapsed().as_secs_f64();
    if secs <= 0.0 {
        return String::new();
    }
    format!(
        " in {secs:.1}s ({}/s)",
        human_bytes((bytes as f64 / secs) as u64)
    )
}

/// Drawing a GGUF conversion: one bar over the GGUF bytes read, the current tensor as message.
pub struct ImportProgress {
    bar: Option<ProgressBar>,
    /// Plain mode: the next quarter to report.
    next_quarter: u64,
    total: u64,
}

impl ImportProgress {
    pub fn new() -> ImportProgress {
        ImportProgress::with_bar(interactive())
    }

    pub fn with_bar(bar: bool) -> ImportProgress {
        let bar = bar.then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            bar.set_style(style(
                "{msg:<32!} {bar:30.cyan/blue} {bytes:>10}/{total_bytes:<10} {bytes_per_sec:>11} {eta:>4}",
            ));
            bar
        });
        ImportProgress {
            bar,
            next_quarter: 1,
            total: 0,
        }
    }

    pub fn abandon(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
    }

    fn say(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => println!("{line}"),
        }
    }
}

impl ImportProgress {
    /// A conversion of `bytes` of `what` begins (events not from rmx-gguf's converter).
    pub fn start(&mut self, what: &str, bytes: u64) {
        self.total = bytes;
        self.say(&format!(
            "converting the {what}: {} of weights",
            human_bytes(bytes)
        ));
        if let Some(bar) = &self.bar {
            bar.set_length(bytes);
        }
    }

    /// Tensor `index` (from 1) of `total` written, about `bytes` read so far.
    pub fn tensor(&mut self, index: usize, total: usize, name: &str, bytes: u64) {
        use rmx_gguf::Reporter;
        self.report(rmx_gguf::Progress::Tensor {
            index,
            total,
            name,
            bytes,
        });
    }
}

impl Default for ImportProgress {
    fn default() -> Self {
        ImportProgress::new()
    }
}

impl rmx_gguf::Reporter for ImportProgress {
    fn report(&mut self, progress: rmx_gguf::Progress<'_>) {
        use rmx_gguf::Progress;
        match progress {
            Progress::Started {
                architecture,
                tensors,
                bytes,
            } => {
                self.total = bytes;
                self.say(&format!(
                    "converting {architecture}: {tensors} tensors, {} of GGUF data",
                    human_bytes(bytes)
                ));
                if let Some(bar) = &self.bar {
                    bar.set_length(bytes);
                    bar.set_message("tokenizer");
                }
            }
            Progress::WroteTokenizer => {
                if self.bar.is_none() {
                    self.say("  wrote config.json and the tokenizer files");
                }
            }
            Progress::Tensor {
                index,
                total,
                name,
                bytes,
            } => {
                if let Some(bar) = &self.bar {
                    bar.set_position(bytes);
                    bar.set_message(name.to_string());
                } else {
                    // Quarters by tensor count: the same lines on every run, whatever the clock.
                    let total = total as u64;
                    while self.next_quarter <= 4 && index as u64 * 4 >= self.next_quarter * total {
                        self.say(&format!(
                            "  {}% ({index}/{total} tensors)",
                            self.next_quarter * 25
                        ));
                        self.next_quarter += 1;
                    }
                }
            }
            Progress::Finished { bytes_written } => {
                if let Some(bar) = &self.bar {
                    bar.finish_and_clear();
                }
                self.say(&format!(
                    "  wrote {} of weights",
                    human_bytes(bytes_written)
                ));
            }
        }
    }
}
