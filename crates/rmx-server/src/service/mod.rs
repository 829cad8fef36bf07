//! The service core: the ONE path every API surface takes into the models.
//!
//! Each surface (native `/api`, OpenAI `/v1`, Anthropic `/v1/messages`, ...) only translates:
//! its request into an [`InternalRequest`], then the [`ServiceStream`] of [`ServiceEvent`]s
//! into its own wire format, and [`ServiceError`] into its own status codes and error shape
//! ([`ServiceError::status`] is the shared default). How to build on it:
//!
//! ```ignore
//! async fn handler(State(svc): State<Arc<Service>>, Json(body): Json<MyRequest>) -> Response {
//!     let req = InternalRequest {
//!         model: body.model,
//!         prompt: PromptInput::Chat { messages, tools, template_kwargs },
//!         sampling: SamplingParams { temperature, top_p, seed, ..Default::default() },
//!         max_tokens: body.max_tokens,
//!         stop: body.stop,
//!         ..InternalRequest::default()
//!     };
//!     let stream = match svc.generate(req).await { Ok(s) => s, Err(e) => return my_error(e) };
//!     // streaming: map each ServiceEvent to an SSE event (futures_util::StreamExt::map);
//!     // whole answer: `stream.collect_all().await` -> Completion.
//! }
//! ```
//!
//! What the core does for every surface, so none of them does it again:
//! - resolves the model name through rmx-store (alias, repo id, local folder) and loads the
//!   model on first use, with keep-alive, LRU eviction and the memory budget (`lifecycle`);
//! - renders chat messages with the model's template (OpenAI-shaped `messages`, `tools`,
//!   template kwargs; `think` sets `enable_thinking`), or encodes a raw prompt;
//! - splits the output into reasoning (when the template knows `<think>`), content and tool
//!   calls (when the request has tools; the format from the alias hints, else detected from
//!   the template);
//! - enforces a requested [`Shape`] (JSON mode, a forced tool call) by constrained decoding
//!   on the engine, refusing with a 400 what it cannot enforce (`docs/api.md`);
//! - ends every stream with exactly one [`ServiceEvent::Done`] or [`ServiceEvent::Error`],
//!   also when the daemon shuts down: an `Error` (a whole answer: [`ServiceError::ShuttingDown`]),
//!   or `Done` with [`FinishReason::Cancelled`] for a surface whose format has a word for
//!   it ([`ServiceStream::cancel_as_done`]).
//!
//! Dropping the stream cancels the generation and frees its cache.
//! Reasoning is always reported as [`ServiceEvent::Reasoning`], also with `think: Some(false)`
//! (a model may think anyway); a surface that must hide it drops those events.
//!
//! Its files: `request` (what a surface asks), `message` (its chat, as templates read it),
//! `events` (what it gets back), `config` (how the daemon is set up), `prompt` (a request into
//! the model's tokens and the parsers for its answer), `pump` (engine events through those
//! parsers to the surface), `pull_locks` (pulls of one repo take turns), `embed` (vectors from
//! an embedding model: [`Service::embed`]); this file is the front end that ties them together.
//!
//! A model does one kind of work: an embedding model asked to generate, or a language model
//! asked for embeddings, is [`ServiceError::WrongKind`] (a 400 in each API's shape).

mod config;
mod embed;
mod events;
mod folders;
mod hold;
mod image_data;
mod image_fetch;
mod message;
mod prompt;
mod prompt_tokens;
mod pull_locks;
mod pump;
mod request;
mod rerank;
pub mod thinking;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use rmx_api::KeepAlive;
use rmx_engine::{GenerateRequest, ModelKind};
use rmx_store::{Families, ModelRef, Store};
use tokio::sync::{mpsc, watch};

pub use crate::error::{ServiceError, CUT_OFF};
use crate::lifecycle::{Models, Resolved};
pub use config::ServiceConfig;
pub use embed::{normalize, EmbedInput, EmbedRequest, Embeddings, PromptChoice};
pub use events::{
    CollectedCall, Completion, Final, FinishReason, ServiceEvent, ServiceStream, TokenLogprob,
};
pub use folders::ModelRoots;
pub use image_data::{decode_base64, encode_base64, image_url_bytes};
pub use image_fetch::{data_uri, is_web_url, ImageFetcher, MAX_FETCH_BYTES};
pub use message::{CalledFunction, ContentPart, Role, TemplateMessage, TemplateToolCall};
pub(crate) use pull_locks::PullLocks;
pub use request::{
    strict_tool_specs, tool_specs, InternalRequest, PromptInput, Shape, FORCED_TOOL_CALL,
    MAX_IMAGES_PER_REQUEST,
};
pub use rerank::{RerankRequest, Reranked};
pub use rmx_engine::{SamplingParams, Timings, Usage};

use prompt::render_off_workers;
use pump::Pump;

pub struct Service {
    store: Store,
    models: Arc<Models>,
    default_keep_alive: KeepAlive,
    shutdown: watch::Sender<bool>,
    pulls: PullLocks,
    model_roots: ModelRoots,
    metrics: Arc<crate::metrics::Metrics>,
    kv_quant: Option<rmx_engine::KvQuant>,
    speculative: Option<crate::speculation::Spec>,
    image_urls: Option<ImageFetcher>,
}

impl Service {
    pub fn new(config: ServiceConfig) -> Arc<Service> {
        let prefix_dir = config.store.config().rmx_home.join("prefixes");
        let models = Models::new(
            config.max_loaded_models,
            config.memory_budget,
            Some(prefix_dir),
        );
        Service::with_models(config, models)
    }

    /// A daemon under `rmx launch` (rank 0): every model it loads is split over `group`'s
    /// ranks, one model at a time.
    pub fn in_group(
        config: ServiceConfig,
        group: Arc<crate::lifecycle::group::GroupServing>,
    ) -> Arc<Service> {
        let prefix_dir = config.store.config().rmx_home.join("prefixes");
        let models = Models::in_group(config.memory_budget, Some(prefix_dir), group);
        Service::with_models(config, models)
    }

    fn with_models(config: ServiceConfig, models: Arc<Models>) -> Arc<Service> {
        Arc::new(Service {
            // The daemon is what loads models: its store judges families by its engine.
            store: config.store.with_families(
                Families::new(rmx_engine::supported_model_types())
                    .with_architectures(rmx_engine::supported_architectures()),
            ),
            models,
            default_keep_alive: config.default_keep_alive,
            shutdown: watch::channel(false).0,
            pulls: Default::default(),
            model_roots: config.model_roots,
            metrics: Default::default(),
            kv_quant: config.kv_quant,
            speculative: config.speculative,
            image_urls: config.image_urls,
        })
    }

    /// The fetcher of image URLs, where this daemon fetches them (`RMX_IMAGE_URLS=1`).
    pub fn image_urls(&self) -> Option<&ImageFetcher> {
        self.image_urls.as_ref()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub(crate) fn models(&self) -> &Arc<Models> {
        &self.models
    }

    pub(crate) fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.metrics
    }

    pub fn default_keep_alive(&self) -> KeepAlive {
        self.default_keep_alive
    }

    /// Ends every running answer with `Done(Cancelled)` and refuses new ones.
    pub fn shutdown(&self) {
        self.shutdown.send_replace(true);
        self.models.unload_all();
    }

    /// Turns true when the daemon starts shutting down (work that is not an answer, like a
    /// pull, stops on it).
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    pub(crate) fn pull_locks(&self) -> &PullLocks {
        &self.pulls
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// From a name to a model folder, with the errors a user can act on. Over TCP, a folder
    /// named by path must be one the user registered or allowed (`folders.rs`); any other is
    /// answered as a name that resolves to nothing, the same 404 in the same words.
    pub fn resolve(&self, name: &str) -> Result<Resolved, ServiceError> {
        let unknown = |reason: String| ServiceError::UnknownModel {
            name: name.to_string(),
            available: self.available_names(),
            reason,
        };
        let model = self
            .store
            .resolve(name)
            .map_err(|e| unknown(e.to_string()))?;
        let hints = model.hints();
        let path = match model {
            ModelRef::Local {
                path, alias: None, ..
            } if crate::listener::current() == crate::listener::Listener::Tcp => {
                let path = std::fs::canonicalize(&path).unwrap_or(path);
                if !self.model_roots.allow(&self.store, &path) {
                    return Err(unknown("a folder TCP clients may not name".into()));
                }
                path
            }
            ModelRef::Local { path, .. } => path,
            ModelRef::Hub { repo, .. } => match self.store.cache().current_snapshot(&repo) {
                Ok(Some((_, dir))) => dir,
                _ => {
                    return Err(ServiceError::NotDownloaded {
                        name: name.to_string(),
                    })
                }
            },
        };
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        Ok(Resolved {
            name: name.to_string(),
            path,
            hints,
        })
    }

    /// Stored models' names: the Hugging Face cache's, then the folders user aliases name. Not
    /// the names loaded models were asked by: those may be folders other clients named, which
    /// are nobody else's business.
    pub fn available_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .store
            .list()
            .map(|l| l.into_iter().map(|m| m.name).collect())
            .unwrap_or_default();
        if let Ok(local) = self.store.local_models() {
            names.extend(local.into_iter().map(|m| m.name));
        }
        names.sort();
        names.dedup();
        names
    }

    /// The loaded models this request may see (`/api/ps`, `/v1/models`, `/health`): over TCP,
    /// those loaded under a name it could use itself, not a folder another client named.
    pub(crate) fn running(&self) -> Vec<crate::lifecycle::RunningInfo> {
        let all = self.models.running();
        if crate::listener::current() == crate::listener::Listener::Socket {
            return all;
        }
        all.into_iter()
            .filter(|r| self.resolve(&r.name).is_ok())
            .collect()
    }

    /// Loads a model without generating (keeps it per `keep_alive`).
    pub async fn load(
        &self,
        model: &str,
        keep_alive: Option<KeepAlive>,
    ) -> Result<Duration, ServiceError> {
        if self.is_shutting_down() {
            return Err(ServiceError::ShuttingDown);
        }
        let resolved = self.resolve(model)?;
        let lease = self
            .models
            .acquire(resolved, keep_alive.unwrap_or(self.default_keep_alive))
            .await?;
        Ok(lease.loaded()?.load_duration)
    }

    /// Unloads a model (after its running requests). Returns whether it was loaded.
    pub fn unload(&self, model: &str) -> Result<bool, ServiceError> {
        let resolved = self.resolve(model)?;
        Ok(self.models.unload(&resolved.path))
    }

    /// How many prompt tokens the request would take (loads the model: the tokenizer and the
    /// template come with it).
    pub async fn count_tokens(&self, req: InternalRequest) -> Result<usize, ServiceError> {
        if self.is_shutting_down() {
            return Err(ServiceError::ShuttingDown);
        }
        let resolved = self.resolve(&req.model)?;
        let hints = resolved.hints.clone();
        let keep_alive = req.keep_alive.unwrap_or(self.default_keep_alive);
        let lease = self.models.acquire(resolved, keep_alive).await?;
        let loaded = lease.loaded()?.clone();
        generates(&loaded, &req.model)?;
        Ok(render_off_workers(loaded, hints, req).await?.tokens.len())
    }

    /// Starts an answer. Errors before the first token (unknown model, bad input, prompt too
    /// long, over budget) come back here; later ones as [`ServiceEvent::Error`].
    pub async fn generate(&self, req: InternalRequest) -> Result<ServiceStream, ServiceError> {
        let started = Instant::now();
        if self.is_shutting_down() {
            return Err(ServiceError::ShuttingDown);
        }
        let resolved = self.resolve(&req.model)?;
        let hints = resolved.hints.clone();
        let alias_kv = alias_kv_quant(hints.as_ref())?;
        let alias_spec = alias_speculation(hints.as_ref())?;
        let keep_alive = req.keep_alive.unwrap_or(self.default_keep_alive);
        let lease = self.models.acquire(resolved, keep_alive).await?;
        let loaded = lease.loaded()?.clone();
        // Before the template: an embedding model may have none, and its refusal should say
        // what the model is, not that a template is missing.
        generates(&loaded, &req.model)?;
        let load_duration = if started.elapsed() >= loaded.load_duration {
            loaded.load_duration
        } else {
            Duration::ZERO
        };
        let built = render_off_workers(loaded.clone(), hints, req.clone()).await?;
        let engine = &loaded.engine;
        let prompt_tokens = built.tokens.len();
        let context = engine.info().context_length.map(|c| c as usize);
        let max_tokens = token_limit(req.max_tokens, prompt_tokens, context);
        let mut greq = GenerateRequest::new(built.tokens, max_tokens);
        greq.sampling = req.sampling.clone();
        greq.stop = req.stop.clone();
        greq.top_logprobs = req.logprobs;
        greq.constraint = built.constraint;
        greq.keep_special_tokens = built.keep_special;
        // The request's own, else the alias's, else the daemon's (`rmx serve --kv-bits`).
        greq.kv_quant = req.kv_quant.or(alias_kv).or(self.kv_quant);
        // The request's own (a method, or "off"), else the alias's, else the daemon's (`rmx
        // serve --speculative`). The answer is the one it would be without, so a default
        // changes only the speed.
        let default = alias_spec.as_ref().or(self.speculative.as_ref());
        let asked_here = matches!(req.speculative, Some(crate::speculation::Asked::On(_)));
        let asked = crate::speculation::Asked::over(req.speculative.clone(), default);
        greq.speculative = match asked {
            // A default "mtp" speculates with the models that have the head; the request's own
            // is refused by one without (the engine says why).
            Some(crate::speculation::Spec::Mtp { .. })
                if !asked_here && engine.info().mtp_layers == 0 =>
            {
                None
            }
            Some(spec) => Some(self.speculation(&loaded, spec).await?),
            None => None,
        };
        greq.images = built.images;
        // A budget for a model that does not think (or thinks in harmony's channels) has
        // nothing to close.
        greq.thought_budget = match (req.thinking_budget, &built.thought) {
            (Some(n), Some(tags)) => Some(tags.budget(engine, n)?),
            _ => None,
        };
        let engine_rx = engine.generate(greq)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let pump = Pump {
            tx,
            reasoning: built.reasoning,
            tools: built.tools,
            harmony: built.harmony,
            calls: 0,
            reasoning_tokens: 0,
            load_duration,
            started,
            first_token: None,
            metrics: self.metrics.clone(),
            lease,
        };
        tokio::spawn(pump.run(engine_rx, self.shutdown.subscribe()));
        Ok(ServiceStream::new(
            rx,
            req.model,
            prompt_tokens,
            SystemTime::now(),
        ))
    }
}

impl Service {
    /// The engine's form of `spec` for the model `loaded`: a draft model's name is found as a
    /// request's `model` would be, and the draft is checked and loaded beside the model
    /// ([`rmx_engine::Engine::use_draft`], off the async workers: the first use loads it).
    /// A draft that cannot guess for this model is a 400 that says why.
    async fn speculation(
        &self,
        loaded: &Arc<crate::lifecycle::Loaded>,
        spec: crate::speculation::Spec,
    ) -> Result<rmx_engine::Speculation, ServiceError> {
        use crate::speculation::Spec;
        let bad = |e: String| ServiceError::BadRequest(format!("speculative: {e}"));
        match spec {
            Spec::PromptLookup { draft_tokens } => {
                rmx_engine::Speculation::prompt_lookup(draft_tokens).map_err(|e| bad(e.to_string()))
            }
            Spec::Mtp { draft_tokens } => {
                rmx_engine::Speculation::mtp(draft_tokens).map_err(|e| bad(e.to_string()))
            }
            Spec::Draft {
                model,
                draft_tokens,
            } => {
                let dir = self
                    .resolve(&model)
                    .map_err(|e| bad(format!("the draft model: {e}")))?
                    .path;
                let speculation = rmx_engine::Speculation::draft(dir.clone(), draft_tokens)
                    .map_err(|e| bad(e.to_string()))?;
                let loaded = loaded.clone();
                tokio::task::spawn_blocking(move || loaded.engine.use_draft(&dir))
                    .await
                    .map_err(|e| ServiceError::Internal(format!("loading the draft model: {e}")))?
                    .map_err(|e| bad(format!("draft model `{model}`: {e}")))?;
                Ok(speculation)
            }
        }
    }
}

/// An alias's KV-cache hint (`rmx alias add --kv-bits`, or a hand-edited aliases.toml), held
/// to what MLX can store.
fn alias_kv_quant(
    hints: Option<&rmx_store::ModelHints>,
) -> Result<Option<rmx_engine::KvQuant>, ServiceError> {
    let Some((hints, bits)) = hints.and_then(|h| Some((h, h.kv_bits?))) else {
        return Ok(None);
    };
    let group = hints
        .kv_group_size
        .unwrap_or(rmx_engine::KvQuant::DEFAULT_GROUP_SIZE);
    rmx_engine::KvQuant::new(bits, group, hints.kv_quant_start.unwrap_or(0))
        .map(Some)
        .map_err(|e| ServiceError::BadRequest(format!("the model's alias: {e}")))
}

/// An alias's speculation hint (`rmx alias add --speculative`), read as a request's fields.
fn alias_speculation(
    hints: Option<&rmx_store::ModelHints>,
) -> Result<Option<crate::speculation::Spec>, ServiceError> {
    let Some(h) = hints.filter(|h| h.speculative.is_some()) else {
        return Ok(None);
    };
    let k = h.draft_tokens.map(usize::from);
    match crate::speculation::parse(h.speculative.as_deref(), k) {
        Ok(Some(crate::speculation::Asked::On(spec))) => Ok(Some(spec)),
        Ok(_) => Ok(None),
        Err(e) => Err(ServiceError::BadRequest(format!("the model's alias: {e}"))),
    }
}

/// A language model passes; an embedding model is refused, naming what it does.
fn generates(loaded: &crate::lifecycle::Loaded, name: &str) -> Result<(), ServiceError> {
    match loaded.engine.kind() {
        ModelKind::Chat => Ok(()),
        kind => Err(ServiceError::WrongKind {
            name: name.to_string(),
            kind,
        }),
    }
}

/// How many tokens the engine may generate: what the request asked for (None: all there is
/// room for), never past the model's context, so that prompt + answer fit in it. Every surface's
/// limit (`max_tokens`, `max_completion_tokens`, `max_output_tokens`, Ollama's `num_predict`,
/// whose -1 and -2 arrive as None) passes here; the engine itself stops only at the number it
/// is given. At least one token: a prompt that fills the context exactly still gets its first
/// token (computed from the prompt; it never enters the cache).
fn token_limit(asked: Option<usize>, prompt: usize, context: Option<usize>) -> usize {
    match context {
        Some(ctx) => {
            let room = ctx.saturating_sub(prompt).max(1);
            asked.map_or(room, |n| n.min(room))
        }
        // No context length in the config: the request's word, or a bound on a runaway.
        None => asked.unwrap_or(4096),
    }
}
