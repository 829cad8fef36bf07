//! The engine actor: one thread per loaded model owns the model's arrays and every sequence's
//! cache; callers hold an [`Engine`] handle (cheap, `Send + Sync`) and talk to the thread
//! through channels. Dropping a request's event receiver cancels it; dropping the last handle
//! stops the thread and frees the model.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use rmx_models::{CausalLm, LayerCache, Loaded, ModelInfo, ModelKind};
use rmx_settings::EnvVars;
use rmx_text::constrain::{Compiled, Compiler, Constraint, ConstraintError, Vocabulary};
use rmx_text::template::ChatTemplate;
use rmx_text::tokenizer::Tokenizer;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::batch::Batch;
use crate::embed::{EmbedJob, Vectors};
use crate::error::{EngineError, Result};
use crate::group::{on_every_rank, Agreed};
use crate::load::Load;
use crate::mirror::{Mirror, Role};
use crate::prefix_cache::PrefixCache;
use crate::prefix_disk::PrefixDisk;
use crate::request::{Event, GenerateRequest};
use crate::rerank::RerankJob;
use crate::sequence::{Prefix, Prep, Progress, Sequence, Start, PREFILL_CHUNK};
use crate::speculative::Off;

// A request crosses the channel once, so its size costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Command {
    Generate(GenerateRequest, UnboundedSender<Event>, Instant),
    Embed(EmbedJob),
    Rerank(RerankJob),
    /// Runs on the engine thread with the model (measurements: verify_cost.rs, image_cost.rs).
    Probe(Probe),
    /// Loads the draft model in this folder on the engine thread (draft.rs), if it is not yet.
    Draft(PathBuf, Sender<Result<()>>),
}

/// A closure given the model, or `None` where the model cannot be run alone (a group's ranks
/// run only mirrored turns; an embedding model has no decode step).
pub(crate) type Probe = Box<dyn FnOnce(Option<&dyn CausalLm>) + Send>;

/// Where [`Engine::rerank`]'s scores arrive: one per document, in their order.
pub type Scores = tokio::sync::oneshot::Receiver<std::result::Result<Vec<f32>, String>>;

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
    load: Arc<Load>,
    sentence: SentenceConfig,
    /// Compiles constrained requests' grammars; built on the first one (most engines never
    /// need it, and it indexes the whole vocabulary).
    compiler: OnceLock<std::result::Result<Arc<Compiler>, ConstraintError>>,
}

/// How a sentence-transformers model prepares inputs: `sentence_bert_config.json` (its input
/// limit, lowercasing) and `config_sentence_transformers.json` (its named prompts, such as
/// Qwen3-Embedding's query instruction, and the one used when none is named).
#[derive(Debug, Default, serde::Deserialize)]
struct SentenceConfig {
    max_seq_length: Option<usize>,
    #[serde(default)]
    do_lower_case: bool,
    #[serde(skip)]
    prompts: std::collections::BTreeMap<String, String>,
    #[serde(skip)]
    default_prompt_name: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct SentencePrompts {
    #[serde(default)]
    prompts: std::collections::BTreeMap<String, String>,
    default_prompt_name: Option<String>,
}

impl SentenceConfig {
    /// Absent or unreadable files: no limit of its own, the text as given, no prompts.
    fn read(dir: &Path) -> SentenceConfig {
        fn json<T: serde::de::DeserializeOwned + Default>(path: PathBuf) -> T {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default()
        }
        let mut c: SentenceConfig = json(dir.join("sentence_bert_config.json"));
        let p: SentencePrompts = json(dir.join("config_sentence_transformers.json"));
        c.prompts = p.prompts;
        c.default_prompt_name = p.default_prompt_name;
        c
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("dir", &self.dir).finish()
    }
}

/// How an engine schedules: set from the environment by [`Engine::load`], or by the caller.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// The most sequences one decode step runs (`RMX_MAX_BATCH`); prefilled sequences past it
    /// wait for a row. 1 decodes sequences one at a time, round robin.
    pub max_batch: usize,
    /// Bytes the prefix cache may hold (`RMX_PREFIX_CACHE_MB`); 0 turns it off.
    pub prefix_cache_bytes: usize,
    /// Where hot prefixes are kept across restarts (prefix_disk.rs; the daemon gives
    /// `<rmx home>/prefixes`); `None` keeps them in memory only.
    pub prefix_dir: Option<PathBuf>,
    /// Bytes of prefix files `prefix_dir` may hold (`RMX_PREFIX_DISK_MB`).
    pub prefix_disk_bytes: u64,
}

impl EngineOptions {
    /// `RMX_MAX_BATCH` (at least 1), `RMX_PREFIX_CACHE_MB` and `RMX_PREFIX_DISK_MB`; a value
    /// that is not a number is the default, with a line on stderr (a daemon runs on).
    pub fn from_env() -> EngineOptions {
        fn number<T: std::str::FromStr + std::fmt::Display>(name: &str, default: T) -> T {
            rmx_settings::number(name)
                .unwrap_or_else(|e| {
                    eprintln!("rmx: {e}; using {default}");
                    None
                })
                .unwrap_or(default)
        }
        const MIB: usize = 1024 * 1024;
        EngineOptions {
            max_batch: number(EnvVars::RMX_MAX_BATCH, crate::batch::DEFAULT_MAX_ROWS).max(1),
            prefix_cache_bytes: number(
                EnvVars::RMX_PREFIX_CACHE_MB,
                crate::prefix_cache::DEFAULT_BUDGET_MB,
            ) * MIB,
            prefix_dir: None,
            prefix_disk_bytes: number(
                EnvVars::RMX_PREFIX_DISK_MB,
                crate::prefix_disk::DEFAULT_BUDGET_MB,
            ) * MIB as u64,
        }
    }
}

impl Engine {
    /// Loads the model in `dir` on a new engine thread and returns once it is ready, with
    /// options from the environment.
    pub fn load(dir: &Path) -> Result<Engine> {
        Engine::load_with(dir, EngineOptions::from_env())
    }

    /// [`Engine::load`] with these options.
    pub fn load_with(dir: &Path, options: EngineOptions) -> Result<Engine> {
        Engine::start(dir, options, Role::Alone, rmx_models::load_any)
    }

    /// Loads this rank's share of the model in `dir`, split over `p`'s group (tensor or
    /// pipeline parallel), on a new engine thread. Every rank of the group runs this. Rank 0's
    /// engine takes the requests and leads; the others' follow it turn by turn (mirror.rs),
    /// so their handles take no requests: dropping one waits until rank 0's engine stops.
    pub fn load_parallel(
        dir: &Path,
        options: EngineOptions,
        p: rmx_models::Parallel,
    ) -> Result<Engine> {
        // Every rank compares its load with the others' before answering anything (group.rs),
        // on the engine thread, or here when the load failed before that thread started.
        let group = p.group().clone();
        let role = Role::for_rank(group.clone());
        let agreed = Agreed::default();
        let (g, a, opts) = (group.clone(), agreed.clone(), options.clone());
        let started = Engine::start(dir, options, role, move |d: &Path| {
            let loaded = rmx_models::load_parallel(d, p).map(Loaded::Causal);
            crate::group::agree(&g, loaded, d, &opts, &a)
        });
        if started.is_err() && !agreed.done() {
            crate::group::agree_failed(&group);
        }
        started
    }

    /// Starts the engine thread, which loads the model with `load_model`.
    fn start(
        dir: &Path,
        options: EngineOptions,
        role: Role,
        load_model: impl FnOnce(&Path) -> rmx_models::Result<Loaded> + Send + 'static,
    ) -> Result<Engine> {
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
        let load = Arc::new(Load::default());
        let thread_load = load.clone();
        let name = dir
            .file_name()
            .map_or("model".into(), |n| n.to_string_lossy().to_string());
        let thread = std::thread::Builder::new()
            .name(format!("rmx-engine:{name}"))
            .spawn(move || match load_model(&thread_dir) {
                Ok(Loaded::Causal(model)) if rmx_models::embed::is_reranker(&thread_dir) => {
                    let mut info = model.info().clone();
                    info.kind = ModelKind::Rerank;
                    let _ = ready_tx.send(Ok(info));
                    crate::rerank::serve(model.as_ref(), rx, &thread_load);
                }
                Ok(Loaded::Causal(model)) => {
                    let _ = ready_tx.send(Ok(model.info().clone()));
                    run(
                        model.as_ref(),
                        &thread_tok,
                        rx,
                        &thread_load,
                        options,
                        &thread_dir,
                        role,
                    );
                }
                Ok(Loaded::Embedder(model)) => {
                    let _ = ready_tx.send(Ok(model.info().clone()));
                    crate::embed::serve(model.as_ref(), rx, &thread_load);
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
            load,
            sentence: SentenceConfig::read(dir),
            compiler: OnceLock::new(),
        })
    }

    /// Sequences the engine thread holds now, running or waiting (cancelled ones leave within
    /// one step).
    pub fn active_sequences(&self) -> usize {
        self.running_sequences() + self.waiting_sequences()
    }

    /// Sequences being prefilled or decoded.
    pub fn running_sequences(&self) -> usize {
        self.load.running()
    }

    /// Prefilled sequences waiting for a row in the full batch (`RMX_MAX_BATCH`).
    pub fn waiting_sequences(&self) -> usize {
        self.load.waiting()
    }

    /// Bytes the running sequences' KV caches hold, and what they would hold unquantized
    /// (the same unless requests asked for `--kv-bits`), as of the engine's last step.
    pub fn kv_cache_bytes(&self) -> (usize, usize) {
        self.load.kv()
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Chat (generates text) or embedding (makes vectors).
    pub fn kind(&self) -> ModelKind {
        self.info.kind
    }

    /// The most tokens one embedding input may have: the sentence-transformers
    /// `max_seq_length` where the model has one, else its context.
    pub fn embed_limit(&self) -> Option<usize> {
        let st = self.sentence.max_seq_length;
        let ctx = self.info.context_length.map(|c| c as usize);
        match (st, ctx) {
            (Some(s), Some(c)) => Some(s.min(c)),
            (s, c) => s.or(c),
        }
    }

    /// The prompts an embedding model names in `config_sentence_transformers.json` (name ->
    /// the text put before an input; Qwen3-Embedding's "query" is its retrieval instruction).
    pub fn embed_prompts(&self) -> &std::collections::BTreeMap<String, String> {
        &self.sentence.prompts
    }

    /// The prompt applied when a request names none (`default_prompt_name`), if the model has
    /// one.
    pub fn default_embed_prompt(&self) -> Option<&str> {
        let name = self.sentence.default_prompt_name.as_deref()?;
        self.sentence.prompts.get(name).map(String::as_str)
    }

    /// One embedding input's token ids as sentence-transformers makes them: the text lowercased
    /// first where the model's `sentence_bert_config.json` says `do_lower_case`, special tokens
    /// added, and cut to [`Engine::embed_limit`] when `truncate` allows (else a longer input
    /// comes back whole, for [`Engine::embed`] to refuse). Also whether it was cut.
    pub fn embed_tokens(&self, text: &str, truncate: bool) -> Result<(Vec<u32>, bool)> {
        let lowered;
        let text = if self.sentence.do_lower_case {
            lowered = text.to_lowercase();
            lowered.as_str()
        } else {
            text
        };
        let ids = self
            .tokenizer
            .encode(text, true)
            .map_err(EngineError::Encode)?;
        match self.embed_limit() {
            Some(limit) if truncate && ids.len() > limit => self
                .tokenizer
                .encode_truncated(text, limit)
                .map_err(EngineError::Encode),
            _ => Ok((ids, false)),
        }
    }

    /// How well each of `documents` answers `query` (under `instruction`, the model's default
    /// when `None`), a probability each, in their order; the answer arrives on the returned
    /// receiver, beside the prompt tokens the model reads. A document too long for the prompt
    /// is cut from its end when `truncate` allows, else refused. Tokenizes on the calling
    /// thread.
    pub fn rerank(
        &self,
        query: &str,
        documents: &[String],
        instruction: Option<&str>,
        truncate: bool,
    ) -> Result<(usize, Scores)> {
        if self.info.kind != ModelKind::Rerank {
            return Err(EngineError::NotReranker);
        }
        if documents.is_empty() {
            return Err(EngineError::Invalid("no documents to rerank".into()));
        }
        let (yes, no) = crate::rerank::answer_ids(&self.tokenizer)?;
        let max = self
            .info
            .context_length
            .map_or(crate::rerank::MAX_PROMPT, |c| {
                (c as usize).min(crate::rerank::MAX_PROMPT)
            });
        let instruction = instruction.unwrap_or(crate::rerank::DEFAULT_INSTRUCTION);
        let mut prompts = Vec::with_capacity(documents.len());
        for (i, d) in documents.iter().enumerate() {
            let (ids, cut) = crate::rerank::prompt(&self.tokenizer, instruction, query, d, max)?;
            if cut && !truncate {
                return Err(EngineError::Invalid(format!(
                    "document {i} with the query does not fit the reranker's {max}-token prompt"
                )));
            }
            prompts.push(ids);
        }
        let tokens = prompts.iter().map(Vec::len).sum();
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.tx
            .as_ref()
            .ok_or(EngineError::Stopped)?
            .send(Command::Rerank(RerankJob {
                prompts,
                yes,
                no,
                reply,
            }))
            .map_err(|_| EngineError::Stopped)?;
        Ok((tokens, rx))
    }

    /// Vectors for `inputs` (token ids each), in their order; the answer arrives on the
    /// returned receiver. Dropping it cancels what is not yet computed.
    pub fn embed(
        &self,
        inputs: Vec<Vec<u32>>,
    ) -> Result<tokio::sync::oneshot::Receiver<std::result::Result<Vectors, String>>> {
        if self.info.kind != ModelKind::Embedding {
            return Err(EngineError::NotEmbedding);
        }
        if inputs.iter().any(Vec::is_empty) {
            return Err(EngineError::EmptyPrompt);
        }
        if let Some(limit) = self.embed_limit() {
            if let Some(long) = inputs.iter().find(|t| t.len() > limit) {
                return Err(EngineError::PromptTooLong {
                    prompt: long.len(),
                    context: limit,
                });
            }
        }
        let vocab = self.info.vocab_size as u32;
        if let Some(bad) = inputs.iter().flatten().find(|&&t| t >= vocab) {
            return Err(EngineError::Invalid(format!(
                "token id {bad} is outside the vocabulary ({vocab})"
            )));
        }
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.tx
            .as_ref()
            .ok_or(EngineError::Stopped)?
            .send(Command::Embed(EmbedJob { inputs, reply }))
            .map_err(|_| EngineError::Stopped)?;
        Ok(rx)
    }

    /// Times a plain decode step and verify steps of each of `drafted` tokens over a
    /// `prompt_tokens`-token cache (verify_cost.rs), on the engine thread, which runs nothing
    /// else meanwhile. Not on a model split over ranks.
    pub fn verify_cost(
        &self,
        prompt_tokens: usize,
        drafted: &[usize],
        rounds: usize,
    ) -> Result<Vec<crate::verify_cost::VerifyCost>> {
        let (reply, rx) = std::sync::mpsc::channel();
        let drafted = drafted.to_vec();
        let run = move |model: Option<&dyn CausalLm>| {
            let result = match model {
                Some(m) => crate::verify_cost::measure(m, prompt_tokens, &drafted, rounds),
                None => Err(EngineError::Invalid(
                    "verify steps are timed on a generating model in one process (not an embedding model, not one split over ranks)"
                        .into(),
                )),
            };
            let _ = reply.send(result);
        };
        self.probe(Box::new(run))?;
        rx.recv().map_err(|_| EngineError::Stopped)?
    }

    /// Makes the draft model in `dir` ready to guess for this model's answers
    /// ([`crate::Speculation::Draft`]): its tokenizer must be this model's, and it is loaded on
    /// the engine thread (once; a few seconds for a small model, during which the thread runs
    /// nothing else). A refusal says why: another tokenizer, files that do not load, a draft
    /// with recurrent layers.
    pub fn use_draft(&self, dir: &Path) -> Result<()> {
        let draft = Tokenizer::from_dir(dir).map_err(|source| EngineError::Tokenizer {
            dir: dir.to_path_buf(),
            source,
        })?;
        crate::draft::check_tokenizers(&self.tokenizer, &draft)?;
        let (reply, rx) = mpsc::channel();
        self.tx
            .as_ref()
            .ok_or(EngineError::Stopped)?
            .send(Command::Draft(dir.to_path_buf(), reply))
            .map_err(|_| EngineError::Stopped)?;
        rx.recv().map_err(|_| EngineError::Stopped)?
    }

    /// Runs `run` on the engine thread, with the model, between its turns.
    pub(crate) fn probe(&self, run: Probe) -> Result<()> {
        self.tx
            .as_ref()
            .ok_or(EngineError::Stopped)?
            .send(Command::Probe(run))
            .map_err(|_| EngineError::Stopped)
    }

    pub fn tokenizer(&self) -> &Arc<Tokenizer> {
        &self.tokenizer
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Compiles `c` for this model's vocabulary, on the caller's thread: a large schema takes
    /// milliseconds that the engine thread would take from every running sequence, and a bad
    /// one is refused here ([`ConstraintError::is_invalid_request`]) before anything runs.
    pub fn constrain(&self, c: &Constraint) -> Result<Compiled> {
        let compiler = self.compiler.get_or_init(|| {
            let width = (self.info.vocab_size.max(0) as usize).max(self.tokenizer.vocab_size());
            let vocab = Vocabulary::from_tokenizer(&self.tokenizer, width);
            Compiler::new(vocab).map(Arc::new)
        });
        let compiler = compiler
            .as_ref()
            .map_err(|e| EngineError::Constraint(e.clone()))?;
        Ok(compiler.compile(c)?)
    }

    /// Starts a generation; its events arrive on the returned receiver. Dropping the receiver
    /// cancels the generation and frees its cache.
    pub fn generate(&self, req: GenerateRequest) -> Result<UnboundedReceiver<Event>> {
        if self.info.kind != ModelKind::Chat {
            return Err(EngineError::NotGenerative);
        }
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
        if matches!(req.speculative, Some(crate::Speculation::Mtp { .. }))
            && self.info.mtp_layers == 0
        {
            return Err(EngineError::Invalid(format!(
                "speculative \"mtp\" needs the model's multi-token-prediction head, and {} has \
                 none in its weights (MLX conversions drop `mtp.*`; the Hub's own Qwen3.5, \
                 Qwen3.6 and Qwen3-Next checkpoints keep it, and so does `rmx import` of one); \
                 use \"prompt-lookup\" or \"draft:MODEL\"",
                self.dir.display()
            )));
        }
        // Measured on an H200 (MLX 0.32.4): attention over a quantized cache fails in the
        // first step with "[quantized_matmul] No implementation for problem shape", mlx-lm's
        // generate_step with kv_bits too, so the request is refused before it starts.
        if req.kv_quant.is_some() && rmx_mlx::backend() == rmx_mlx::Backend::Cuda {
            return Err(EngineError::Invalid(
                "a quantized KV cache (kv_bits) does not run on MLX's CUDA backend yet: it has no \
                 quantized attention product for these shapes (mlx-lm fails the same way); leave \
                 out kv_bits on NVIDIA GPUs"
                    .into(),
            ));
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

/// The scheduler loop. Each turn admits new requests, gives sequences that run alone one unit
/// of work (prefill chunks, under a per-turn token budget while the batch decodes), moves
/// prefilled ones into the batch while it has room, and runs one batch step; then it sleeps on
/// the channel when nothing is left.
fn run(
    model: &dyn CausalLm,
    tokenizer: &Arc<Tokenizer>,
    rx: Receiver<Command>,
    load: &Arc<Load>,
    options: EngineOptions,
    dir: &Path,
    role: Role,
) {
    rmx_models::set_model_hidden(model.info().hidden_size);
    // Sequences that run alone: prefilling ones, and ones that never batch.
    let mut solo: Vec<Sequence> = Vec::new();
    // Prefilled, waiting for a row in the batch.
    let mut ready: Vec<Sequence> = Vec::new();
    let mut batch = Batch::default();
    let max_rows = options.max_batch.max(1);
    // What the model's caches can do, read off one empty set of them. A pipeline stage sees
    // only its own layers (a hybrid model's stages differ), and every rank must decide each
    // step alike: in a group the ranks agree on the whole model's answers.
    let kinds = model.make_cache();
    let [batching, trimmable, undoes_blocks] = on_every_rank(
        role.group(),
        [
            model.batches() && max_rows > 1,
            kinds.iter().all(LayerCache::is_trimmable),
            kinds.iter().all(LayerCache::undoes_blocks),
        ],
    );
    let mut prefixes = PrefixCache::new(options.prefix_cache_bytes);
    if let Some(group) = role.group() {
        let layers = model.info().num_layers.max(0) as usize;
        prefixes = prefixes.in_group(group.clone(), layers, trimmable);
    }
    // A group's ranks must find the same prefixes: each rank's disk is its own, so it is off.
    let disk = match (
        &options.prefix_dir,
        prefixes.is_enabled() && !role.in_group(),
    ) {
        (Some(root), true) => PrefixDisk::open(root, dir, options.prefix_disk_bytes),
        _ => None,
    };
    let role_in_group = role.in_group();
    let mut mirror = Mirror::new(role);
    let mut ctx = Admit {
        model,
        tokenizer,
        prefixes: &mut prefixes,
        disk,
        to_save: Vec::new(),
        snapshot_prefill: !trimmable,
        no_speculation: if role_in_group {
            Some(Off::Group)
        } else if !undoes_blocks {
            Some(Off::Cache)
        } else {
            None
        },
        drafts: crate::draft::DraftModels::default(),
        load,
    };
    loop {
        let idle = solo.is_empty() && ready.is_empty() && batch.is_empty();
        if idle {
            ctx.save_hot();
        }
        // This turn's requests: the channel's, or in a group the lead's (mirror.rs).
        let Some(commands) = mirror.turn(&rx, idle) else {
            return;
        };
        for cmd in commands {
            ctx.admit(cmd, &mut solo);
        }
        solo.retain(|s| !s.is_cancelled());
        ready.retain(|s| !s.is_cancelled());
        load.set_waiting(ready.len());
        if batching && trimmable {
            group_prefill(model, &mut solo, &mut ready, &mirror);
        }
        let mut budget = PREFILL_CHUNK;
        let mut i = 0;
        while i < solo.len() {
            if batching && solo[i].batches() {
                let left = solo[i].prefill_left();
                if left > 0 && budget == 0 && !batch.is_empty() {
                    i += 1;
                    continue;
                }
                let t = std::time::Instant::now();
                let prepared = solo[i].prepare(model);
                if crate::trace::on() {
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    eprintln!("rmx-trace: prepare left={left} {ms:.2}ms");
                }
                match prepared {
                    Ok(Prep::Working) => {
                        budget = budget.saturating_sub(left.min(PREFILL_CHUNK));
                        i += 1;
                    }
                    Ok(Prep::Ready) => {
                        let mut s = solo.swap_remove(i);
                        if let Some((tokens, cache)) = s.take_snapshot() {
                            ctx.prefixes.insert(tokens, cache);
                        }
                        ready.push(s);
                    }
                    Ok(Prep::Finished) => ctx.retire(solo.swap_remove(i)),
                    Err(e) => {
                        solo[i].fail(mirror.step_failure(&e));
                        solo.swap_remove(i);
                    }
                }
                continue;
            }
            match solo[i].advance(model) {
                Ok(Progress::Working) => {
                    if let Some((tokens, cache)) = solo[i].take_snapshot() {
                        ctx.prefixes.insert(tokens, cache);
                    }
                    i += 1;
                }
                Ok(Progress::Finished) => ctx.retire(solo.swap_remove(i)),
                Err(e) => {
                    solo[i].fail(mirror.step_failure(&e));
                    solo.swap_remove(i);
                }
            }
        }
        if !ready.is_empty() || !batch.is_empty() {
            let room = max_rows.saturating_sub(batch.live()).min(ready.len());
            let joiners: Vec<Sequence> = ready.drain(..room).collect();
            if let Err(e) = batch.step(model, joiners, ctx.prefixes) {
                batch.fail_all(&mirror.step_failure(&e));
            }
        }
        load.set_waiting(ready.len());
        let caches = solo.iter().chain(&ready).map(Sequence::cache);
        load.set_kv(kv_bytes(caches.chain([batch.cache()])));
        mirror.relay();
        if solo.is_empty() && ready.is_empty() && batch.is_empty() {
            rmx_mlx::clear_cache();
        }
    }
}

/// The bytes of these caches' arrays (capacity included), and unquantized
/// ([`LayerCache::plain_nbytes`]).
fn kv_bytes<'a>(caches: impl Iterator<Item = &'a [LayerCache]>) -> (usize, usize) {
    caches
        .flatten()
        .fold((0, 0), |(b, p), c| (b + c.nbytes(), p + c.plain_nbytes()))
}

/// New prompts that can be prefilled together (group_prefill.rs) leave `solo` for `ready` in
/// one forward; a failed group fails its sequences.
fn group_prefill(
    model: &dyn CausalLm,
    solo: &mut Vec<Sequence>,
    ready: &mut Vec<Sequence>,
    mirror: &Mirror,
) {
    let fresh: Vec<usize> = (0..solo.len())
        .filter(|&i| solo[i].batches() && solo[i].prefills_fresh())
        .collect();
    let lens: Vec<usize> = fresh
        .iter()
        .map(|&i| solo[i].prefill_tokens().len())
        .collect();
    let n = crate::group_prefill::choose(&lens);
    if n == 0 {
        return;
    }
    let mut picked: Vec<usize> = fresh[..n].to_vec();
    picked.sort_unstable_by(|a, b| b.cmp(a));
    let mut group: Vec<Sequence> = picked.into_iter().map(|i| solo.remove(i)).collect();
    group.reverse();
    let t = std::time::Instant::now();
    match crate::group_prefill::prefill(model, &mut group) {
        Ok(()) => {
            if crate::trace::on() {
                let ms = t.elapsed().as_secs_f64() * 1e3;
                eprintln!("rmx-trace: group prefill rows={n} {ms:.2}ms");
            }
            ready.extend(group);
        }
        Err(e) => {
            let message = mirror.step_failure(&e);
            for s in group {
                s.fail(message.clone());
            }
        }
    }
}

/// What the engine thread starts sequences with.
struct Admit<'a> {
    model: &'a dyn CausalLm,
    tokenizer: &'a Arc<Tokenizer>,
    prefixes: &'a mut PrefixCache,
    /// Hot prefixes on disk, for a restarted daemon.
    disk: Option<PrefixDisk>,
    /// Entries served from memory and not on disk yet: written when the engine is idle.
    to_save: Vec<Vec<u32>>,
    /// The model's cache cannot be cut back: sequences copy theirs where the prompt ends.
    snapshot_prefill: bool,
    /// Why requests that ask to speculate do not, on this engine (speculative.rs).
    no_speculation: Option<Off>,
    /// Draft models loaded for speculation (draft.rs).
    drafts: crate::draft::DraftModels,
    load: &'a Arc<Load>,
}

impl Admit<'_> {
    /// The longest cached prefix of `prompt`: from memory, or from disk when a file there
    /// serves more (it then joins the memory cache). A prefix served from memory is hot: it is
    /// written to disk, once.
    fn lookup(&mut self, prompt: &[u32]) -> Option<(usize, Vec<LayerCache>)> {
        if let Some(disk) = self.disk.as_mut() {
            if disk.usable(prompt) > self.prefixes.usable(prompt) {
                if let Some((tokens, cache)) = disk.lookup(self.model, prompt) {
                    self.prefixes.insert(tokens, cache);
                }
            }
        }
        // A stored cache that cannot be copied only costs the prefill it would have saved.
        let hit = self.prefixes.lookup(prompt).ok().flatten();
        if let (Some(disk), Some((tokens, _))) = (self.disk.as_ref(), self.prefixes.last_hit()) {
            if !disk.has(tokens) && !self.to_save.iter().any(|t| t == tokens) {
                self.to_save.push(tokens.to_vec());
            }
        }
        hit
    }

    /// Writes the hot prefixes found since the last time (run when the engine has nothing else
    /// to do, so no request waits for the disk).
    fn save_hot(&mut self) {
        let Some(disk) = self.disk.as_mut() else {
            return;
        };
        for tokens in self.to_save.drain(..) {
            // An agent's next turn extends the prefix it hit, and its entry then replaces that
            // one: the extension holds the hot prefix and is what is written.
            if let Some((kept, cache)) = self.prefixes.entry_holding(&tokens) {
                disk.save(kept, cache);
            }
        }
    }

    /// A finished sequence's cache goes to the prefix cache.
    fn retire(&mut self, done: Sequence) {
        if self.prefixes.is_enabled() {
            // A cache that cannot be evaluated is simply not kept.
            if let Ok(Some((tokens, cache))) = done.into_entry() {
                self.prefixes.insert(tokens, cache);
            }
        }
    }

    fn admit(&mut self, cmd: Command, active: &mut Vec<Sequence>) {
        let (mut req, tx, at) = match cmd {
            Command::Generate(req, tx, at) => (req, tx, at),
            // Engine::embed and Engine::rerank refuse a chat model before anything is sent.
            Command::Embed(job) => {
                let _ = job.reply.send(Err(EngineError::NotEmbedding.to_string()));
                return;
            }
            Command::Rerank(job) => {
                let _ = job.reply.send(Err(EngineError::NotReranker.to_string()));
                return;
            }
            Command::Probe(run) => {
                let alone = self.no_speculation != Some(Off::Group);
                run(alone.then_some(self.model));
                return;
            }
            // An engine that never speculates turns the request's speculation off with its
            // reason (admit below) rather than load a draft it would not use.
            Command::Draft(dir, reply) => {
                let ready = match self.no_speculation {
                    Some(_) => Ok(()),
                    None => self.drafts.get(&dir).map(|_| ()),
                };
                let _ = reply.send(ready);
                return;
            }
        };
        let enabled = self.prefixes.is_enabled();
        // Images that move the positions after them (Qwen3.5): the request plans its whole
        // prompt's positions after any prefix is read (Sequence::start), and a stored prefix
        // was read at the same positions (its tokens name the images), so it may read one.
        let planned = !req.images.is_empty() && self.model.images_move_positions();
        // A stored cache that cannot be copied only costs the prefill it would have saved.
        // A quantized-KV request reads no stored prefix (request.rs `kv_quant`). A request
        // with images is keyed by their pixels (images.rs).
        let cache_key = if req.images.is_empty() {
            None
        } else {
            crate::images::cache_key(self.model, &req.prompt, &req.images)
        };
        let prefix = if enabled && !req.no_prefix_cache && req.kv_quant.is_none() {
            self.lookup(cache_key.as_deref().unwrap_or(&req.prompt))
        } else {
            None
        };
        let off = match (&req.kv_quant, &req.thought_budget) {
            (Some(_), _) => Some(Off::KvQuant),
            (None, Some(_)) => Some(Off::ThoughtBudget),
            (None, None) if planned => Some(Off::Images),
            (None, None) => self.no_speculation,
        };
        let speculation_off = match (&req.speculative, off) {
            (Some(_), Some(off)) => {
                req.speculative = None;
                Some(off)
            }
            _ => None,
        };
        // A draft that cannot be loaded (gone since `use_draft` checked it) fails the answer.
        let draft = match req.speculative.as_ref().and_then(|s| s.draft_model()) {
            Some(dir) => match self.drafts.get(dir) {
                Ok(m) => Some(m),
                Err(e) => {
                    let _ = tx.send(Event::Error(e.to_string()));
                    return;
                }
            },
            None => None,
        };
        let start = Start {
            draft,
            speculation_off,
            submitted: at,
            prefix: prefix.map(|(len, cache)| Prefix { len, cache }),
            snapshot_prefill: enabled && self.snapshot_prefill && req.kv_quant.is_none(),
            busy: self.load.busy(),
            cache_key,
        };
        match Sequence::new(req, tx.clone(), self.model, self.tokenizer, start) {
            Ok(s) => active.push(s),
            Err(e) => {
                let _ = tx.send(Event::Error(e.to_string()));
            }
        }
    }
}
