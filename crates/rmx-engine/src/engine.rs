//! The engine actor: one thread per loaded model owns the model's arrays and every sequence's
//! cache; callers hold an [`Engine`] handle (cheap, `Send + Sync`) and talk to the thread
//! through channels. Dropping a request's event receiver cancels it; dropping the last handle
//! stops the thread and frees the model.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;

use rmx_models::{CausalLm, LayerCache, ModelInfo};
use rmx_text::constrain::TokenBytes;
use rmx_text::template::ChatTemplate;
use rmx_text::tokenizer::Tokenizer;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::error::{EngineError, Result};
use crate::prefix_cache::PrefixCache;
use crate::request::{Event, GenerateRequest};
use crate::sequence::{Prefix, Progress, Sequence, Start};

enum Command {
    Generate(GenerateRequest, UnboundedSender<Event>, Instant),
}

/// A handle to a loaded model's engine thread.
pub struct Engine {
    /// `None` only while dropping: closing the channel is what stops the thread.
    tx: Option<Sender<Command>>,
    /// Joined on drop, so the model's arrays are freed before the handle is gone (a process
    /// that exits while an engine thread still frees MLX arrays races MLX's static teardown).
    thread: Option<std::thread::JoinHandle<()>>,
    pub(crate) dir: PathBuf,
    pub(crate) tokenizer: Arc<Tokenizer>,
    pub(crate) template: Option<ChatTemplate>,
    info: ModelInfo,
    active: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("dir", &self.dir).finish()
    }
}

impl Engine {
    /// Loads the model in `dir` on a new engine thread and returns once it is ready.
    pub fn load(dir: &Path) -> Result<Engine> {
        let tokenizer =
            Arc::new(
                Tokenizer::from_dir(dir).map_err(|source| EngineError::Tokenizer {
                    dir: dir.to_path_buf(),
                    source,
                })?,
            );
        let template = match tokenizer.chat_template() {
            Some(src) => Some(ChatTemplate::new(src)?),
            None => None,
        };
        let (tx, rx) = mpsc::channel::<Command>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<ModelInfo>>();
        let thread_dir = dir.to_path_buf();
        let thread_tok = tokenizer.clone();
        let active = Arc::new(AtomicUsize::new(0));
        let thread_active = active.clone();
        let name = dir
            .file_name()
            .map_or("model".into(), |n| n.to_string_lossy().to_string());
        let thread = std::thread::Builder::new()
            .name(format!("rmx-engine:{name}"))
            .spawn(move || match rmx_models::load(&thread_dir) {
                Ok(model) => {
                    let _ = ready_tx.send(Ok(model.info().clone()));
                    run(model.as_ref(), &thread_tok, rx, &thread_active);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.into()));
                }
            })
            .map_err(|e| EngineError::Invalid(format!("cannot start the engine thread: {e}")))?;
        let info = match ready_rx.recv() {
            Ok(Ok(info)) => info,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = thread.join();
                return Err(EngineError::Stopped);
            }
        };
        Ok(Engine {
            tx: Some(tx),
            thread: Some(thread),
            dir: dir.to_path_buf(),
            tokenizer,
            template,
            info,
            active,
        })
    }

    /// Sequences the engine thread is working on now (cancelled ones leave within one step).
    pub fn active_sequences(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    pub fn tokenizer(&self) -> &Arc<Tokenizer> {
        &self.tokenizer
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts a generation; its events arrive on the returned receiver. Dropping the receiver
    /// cancels the generation and frees its cache.
    pub fn generate(&self, req: GenerateRequest) -> Result<UnboundedReceiver<Event>> {
        if req.prompt.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        if let Some(ctx) = self.info.context_length {
            if req.prompt.len() > ctx as usize {
                return Err(EngineError::PromptTooLong {
                    prompt: req.prompt.len(),
                    context: ctx as usize,
                });
            }
        }
        let vocab = self.info.vocab_size as u32;
        if let Some(bad) = req.prompt.iter().find(|&&t| t >= vocab) {
            return Err(EngineError::Invalid(format!(
                "token id {bad} is outside the vocabulary ({vocab})"
            )));
        }
        let (tx, rx) = unbounded_channel();
        self.tx
            .as_ref()
            .ok_or(EngineError::Stopped)?
            .send(Command::Generate(req, tx, Instant::now()))
            .map_err(|_| EngineError::Stopped)?;
        Ok(rx)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The scheduler loop: admit new requests, then give every live sequence one unit of work,
/// round robin, until none is left; then sleep on the channel.
fn run(
    model: &dyn CausalLm,
    tokenizer: &Arc<Tokenizer>,
    rx: Receiver<Command>,
    count: &AtomicUsize,
) {
    let mut active: Vec<Sequence> = Vec::new();
    // Built on the first constrained request: most engines never need it.
    let mut vocab: Option<Arc<TokenBytes>> = None;
    let mut prefixes = PrefixCache::new(crate::prefix_cache::budget_from_env());
    let trimmable = model.make_cache().iter().all(LayerCache::is_trimmable);
    let mut ctx = Admit {
        model,
        tokenizer,
        vocab: &mut vocab,
        prefixes: &mut prefixes,
        snapshot_prefill: !trimmable,
    };
    loop {
        let next = if active.is_empty() {
            match rx.recv() {
                Ok(c) => Some(c),
                Err(_) => return,
            }
        } else {
            rx.try_recv().ok()
        };
        if let Some(cmd) = next {
            ctx.admit(cmd, &mut active);
            while let Ok(cmd) = rx.try_recv() {
                ctx.admit(cmd, &mut active);
            }
        }
        active.retain(|s| !s.is_cancelled());
        count.store(active.len(), Ordering::Relaxed);
        let mut i = 0;
        while i < active.len() {
            match active[i].advance(model) {
                Ok(Progress::Working) => {
                    if let Some((tokens, cache)) = active[i].take_snapshot() {
                        ctx.prefixes.insert(tokens, cache);
                    }
                    i += 1;
                }
                Ok(Progress::Finished) => {
                    let done = active.swap_remove(i);
                    if ctx.prefixes.is_enabled() {
                        // A cache that cannot be evaluated is simply not kept.
                        if let Ok(Some((tokens, cache))) = done.into_entry() {
                            ctx.prefixes.insert(tokens, cache);
                        }
                    }
                }
                Err(e) => {
                    active[i].fail(e.to_string());
                    active.swap_remove(i);
                }
            }
        }
        count.store(active.len(), Ordering::Relaxed);
        if active.is_empty() {
            rmx_mlx::clear_cache();
        }
    }
}

/// What the engine thread starts sequences with.
struct Admit<'a> {
    model: &'a dyn CausalLm,
    tokenizer: &'a Arc<Tokenizer>,
    vocab: &'a mut Option<Arc<TokenBytes>>,
    prefixes: &'a mut PrefixCache,
    /// The model's cache cannot be cut back: sequences copy theirs where the prompt ends.
    snapshot_prefill: bool,
}

impl Admit<'_> {
    fn admit(&mut self, cmd: Command, active: &mut Vec<Sequence>) {
        let Command::Generate(req, tx, at) = cmd;
        let bytes = req.constraint.as_ref().map(|_| {
            self.vocab
                .get_or_insert_with(|| Arc::new(TokenBytes::from_tokenizer(self.tokenizer)))
                .clone()
        });
        let enabled = self.prefixes.is_enabled();
        // A stored cache that cannot be copied only costs the prefill it would have saved.
        let prefix = if enabled && !req.no_prefix_cache {
            self.prefixes.lookup(&req.prompt).ok().flatten()
        } else {
            None
        };
        let start = Start {
            submitted: at,
            prefix: prefix.map(|(len, cache)| Prefix { len, cache }),
            snapshot_prefill: enabled && self.snapshot_prefill,
        };
        match Sequence::new(req, tx.clone(), self.model, self.tokenizer, bytes, start) {
            Ok(s) => active.push(s),
            Err(e) => {
                let _ = tx.send(Event::Error(e.to_string()));
            }
        }
    }
}
