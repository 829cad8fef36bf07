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

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use futures_util::Stream;
use rmx_api::KeepAlive;
use rmx_engine::{ChatPrompt, Constraint, Engine, Event, GenerateRequest, Think};
use rmx_store::{Families, ModelHints, ModelRef, Store, ToolParser};
use rmx_text::harmony::{HarmonyEvent, HarmonyParser};
use rmx_text::reasoning::{ReasoningConfig, ReasoningEvent, ReasoningParser};
use rmx_text::template::TemplateError;
use rmx_text::toolcall::{ToolCallEvent, ToolCallFormat, ToolCallParser};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, watch};

pub use crate::error::ServiceError;
use crate::lifecycle::{Lease, Models, Resolved};
pub use rmx_engine::{SamplingParams, Timings, Usage};

/// What to complete.
#[derive(Debug, Clone)]
pub enum PromptInput {
    /// Rendered with the model's chat template (with the generation prompt added).
    Chat {
        /// OpenAI-shaped messages: `[{"role": "user", "content": "..."}, ...]`.
        messages: Value,
        /// OpenAI-shaped tool definitions (`[{"type": "function", "function": {...}}]`).
        tools: Option<Value>,
        /// Extra template variables (`enable_thinking`, `reasoning_effort`, ...).
        template_kwargs: Map<String, Value>,
    },
    /// Encoded as-is (with the tokenizer's BOS); no template, no reasoning split.
    Raw(String),
}

impl Default for PromptInput {
    fn default() -> Self {
        PromptInput::Raw(String::new())
    }
}

/// One request, whatever API it came from.
#[derive(Debug, Clone, Default)]
pub struct InternalRequest {
    /// Alias, `owner/name` repo id, or model folder.
    pub model: String,
    pub prompt: PromptInput,
    pub sampling: SamplingParams,
    /// None: until the context is full.
    pub max_tokens: Option<usize>,
    /// Strings that end the answer (not included in it).
    pub stop: Vec<String>,
    /// Some(n): report each token's logprob and the n most likely alternatives.
    pub logprobs: Option<usize>,
    /// None: the daemon's default (`RMX_KEEP_ALIVE`, 5 minutes).
    pub keep_alive: Option<KeepAlive>,
    /// Some(b): sets the template's `enable_thinking` (unless `template_kwargs` has it).
    pub think: Option<bool>,
    /// Keep the answer in this shape (constrained decoding).
    pub shape: Option<Shape>,
}

/// What constrained decoding enforces on an answer. The answer may still start with a
/// thought (`<think>...</think>`) where the model's template thinks; the shape follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// One JSON object (JSON mode).
    JsonObject,
    /// One JSON object with the schema's properties, in order, and their types (the subset
    /// `rmx_text::constrain` enforces; `docs/api.md` lists it).
    JsonSchema(Value),
    /// One call, in the model's tool-call markup, of one of these tools (`tool_choice`
    /// `required` or a named tool).
    ToolCall { names: Vec<String> },
}

/// The names of OpenAI-shaped tool definitions, for [`Shape::ToolCall`].
pub fn tool_names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Names the `tool_choice` value a surface sent, for the error when it cannot be forced.
pub const FORCED_TOOL_CALL: &str = "a forced tool call (`tool_choice` `required` or a named tool)";

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

/// What a stream cut off by the daemon's shutdown ends with, unless its surface asked for
/// `Done(Cancelled)`.
pub const CUT_OFF: &str = "the daemon is shutting down; the answer was cut off";

impl ServiceStream {
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

/// How the daemon is set up; [`ServiceConfig::from_env`] reads the `RMX_*` variables.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub store: Store,
    pub default_keep_alive: KeepAlive,
    /// `RMX_MAX_LOADED_MODELS` (default 3).
    pub max_loaded_models: usize,
    /// Bytes of weights loaded models may take (`RMX_MAX_MEMORY`, default 75% of RAM).
    pub memory_budget: u64,
}

impl ServiceConfig {
    pub fn from_env() -> Result<ServiceConfig, ServiceError> {
        let store = Store::from_env().map_err(|e| ServiceError::Internal(e.to_string()))?;
        let max_loaded_models = match std::env::var("RMX_MAX_LOADED_MODELS") {
            Ok(v) if !v.trim().is_empty() => v.trim().parse().map_err(|_| {
                ServiceError::BadRequest(format!("RMX_MAX_LOADED_MODELS=`{v}` is not a number"))
            })?,
            _ => 3,
        };
        let memory_budget = crate::lifecycle::budget::budget_from(
            std::env::var("RMX_MAX_MEMORY").ok().as_deref(),
            crate::lifecycle::budget::system_ram(),
        )
        .map_err(ServiceError::BadRequest)?;
        Ok(ServiceConfig {
            store,
            default_keep_alive: KeepAlive::from_env(),
            max_loaded_models,
            memory_budget,
        })
    }
}

pub struct Service {
    store: Store,
    models: Arc<Models>,
    default_keep_alive: KeepAlive,
    shutdown: watch::Sender<bool>,
    pulls: crate::native::pull::PullLocks,
}

impl Service {
    pub fn new(config: ServiceConfig) -> Arc<Service> {
        let prefix_dir = config.store.config().rmx_home.join("prefixes");
        Arc::new(Service {
            // The daemon is what loads models: its store judges families by its engine.
            store: config.store.with_families(
                Families::new(rmx_engine::supported_model_types())
                    .with_architectures(rmx_engine::supported_architectures()),
            ),
            models: Models::new(
                config.max_loaded_models,
                config.memory_budget,
                Some(prefix_dir),
            ),
            default_keep_alive: config.default_keep_alive,
            shutdown: watch::channel(false).0,
            pulls: Default::default(),
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub(crate) fn models(&self) -> &Arc<Models> {
        &self.models
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

    pub(crate) fn pull_locks(&self) -> &crate::native::pull::PullLocks {
        &self.pulls
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// From a name to a model folder, with the errors a user can act on.
    pub fn resolve(&self, name: &str) -> Result<Resolved, ServiceError> {
        let model = self
            .store
            .resolve(name)
            .map_err(|e| ServiceError::UnknownModel {
                name: name.to_string(),
                available: self.available_names(),
                reason: e.to_string(),
            })?;
        let hints = model.hints();
        let path = match model {
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

    /// Stored models' names and the names loaded models were asked by.
    pub fn available_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .store
            .list()
            .map(|l| l.into_iter().map(|m| m.name).collect())
            .unwrap_or_default();
        names.extend(self.models.running().into_iter().map(|r| r.name));
        names.sort();
        names.dedup();
        names
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
        let hints = resolved.hints;
        let keep_alive = req.keep_alive.unwrap_or(self.default_keep_alive);
        let lease = self.models.acquire(resolved, keep_alive).await?;
        let loaded = lease.loaded()?.clone();
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
        let hints = resolved.hints;
        let keep_alive = req.keep_alive.unwrap_or(self.default_keep_alive);
        let lease = self.models.acquire(resolved, keep_alive).await?;
        let loaded = lease.loaded()?.clone();
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
            lease,
        };
        tokio::spawn(pump.run(engine_rx, self.shutdown.subscribe()));
        Ok(ServiceStream {
            rx,
            model: req.model,
            prompt_tokens,
            created: SystemTime::now(),
            cancel_as_done: false,
        })
    }
}

/// How long a render may take before the request is answered with
/// [`ServiceError::TemplateLimit`]. Fuel (`rmx_text::template::limits`) ends a runaway template
/// well before this on any machine; the clock is for what fuel does not count (a filter over
/// a huge value), and the render thread still stops at its fuel after the answer is sent.
const RENDER_TIMEOUT: Duration = Duration::from_secs(30);

/// [`build_prompt`] on tokio's blocking pool: a template is the model repo's code, and its
/// render (and the tokenizing after it) must not hold up the async workers that serve every
/// other request.
async fn render_off_workers(
    loaded: Arc<crate::lifecycle::Loaded>,
    hints: Option<ModelHints>,
    req: InternalRequest,
) -> Result<BuiltPrompt, ServiceError> {
    let name = req.model.clone();
    let task = tokio::task::spawn_blocking(move || build_prompt(&loaded.engine, hints, &req));
    match tokio::time::timeout(RENDER_TIMEOUT, task).await {
        Ok(Ok(built)) => built,
        Ok(Err(e)) => Err(ServiceError::Internal(format!(
            "rendering the prompt failed: {e}"
        ))),
        Err(_) => Err(ServiceError::TemplateLimit {
            name,
            limit: format!("{} s", RENDER_TIMEOUT.as_secs()),
        }),
    }
}

struct BuiltPrompt {
    tokens: Vec<u32>,
    reasoning: ReasoningParser,
    tools: Option<ToolCallParser>,
    /// The model writes OpenAI's harmony format (GPT-OSS): this parser replaces the other two,
    /// and the engine emits special tokens' text, which carries harmony's markers.
    harmony: Option<HarmonyParser>,
    /// The engine emits special tokens' text: the markers the parsers read are special tokens
    /// in some tokenizers (harmony's, Gemma 4's `<|tool_call>` and `<|channel>`).
    keep_special: bool,
    constraint: Option<Constraint>,
}

/// Gemma 4's channel markers.
const CHANNEL_START: &str = "<|channel>";
const CHANNEL_END: &str = "<channel|>";

/// `hints`: the alias's, when the request named the model by one.
fn build_prompt(
    engine: &Engine,
    hints: Option<ModelHints>,
    req: &InternalRequest,
) -> Result<BuiltPrompt, ServiceError> {
    let template = engine
        .tokenizer()
        .chat_template()
        .unwrap_or_default()
        .to_string();
    match &req.prompt {
        PromptInput::Raw(text) => Ok(BuiltPrompt {
            tokens: engine.raw_tokens(text)?,
            reasoning: ReasoningParser::disabled(),
            tools: None,
            harmony: None,
            keep_special: false,
            constraint: constraint(req.shape.as_ref(), None, Think::No)?,
        }),
        PromptInput::Chat {
            messages,
            tools,
            template_kwargs,
        } => {
            let Some(list) = messages.as_array() else {
                return Err(ServiceError::BadRequest(
                    "`messages` must be an array".into(),
                ));
            };
            if !engine.has_chat_template() {
                // A base model has no chat format: complete the messages' text as it stands.
                let text: Vec<&str> = list.iter().filter_map(|m| m["content"].as_str()).collect();
                return Ok(BuiltPrompt {
                    tokens: engine.raw_tokens(&text.join("\n\n"))?,
                    reasoning: ReasoningParser::disabled(),
                    tools: None,
                    harmony: None,
                    keep_special: false,
                    constraint: constraint(req.shape.as_ref(), None, Think::No)?,
                });
            }
            let mut kwargs = template_kwargs.clone();
            if let Some(think) = req.think {
                kwargs
                    .entry("enable_thinking")
                    .or_insert(Value::Bool(think));
            }
            let tools = tools
                .clone()
                .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()));
            let chat = ChatPrompt {
                messages: messages.clone(),
                tools: tools.clone(),
                add_generation_prompt: true,
                kwargs,
            };
            let rendered = engine.render_chat(&chat).map_err(|e| match e {
                rmx_engine::EngineError::Template(TemplateError::Limit(limit)) => {
                    ServiceError::TemplateLimit {
                        name: req.model.clone(),
                        limit: limit.to_string(),
                    }
                }
                other => other.into(),
            })?;
            let tokens = engine
                .tokenizer()
                .encode(&rendered, false)
                .map_err(|e| ServiceError::BadRequest(format!("tokenizing the prompt: {e}")))?;
            let harmony = template.contains("<|channel|>")
                || hints.is_some_and(|h| {
                    h.tool_parser == ToolParser::Harmony
                        || h.reasoning_parser == rmx_store::ReasoningParser::Harmony
                });
            if harmony {
                return Ok(BuiltPrompt {
                    tokens,
                    reasoning: ReasoningParser::disabled(),
                    tools: None,
                    harmony: Some(HarmonyParser::new()),
                    keep_special: true,
                    constraint: constraint(req.shape.as_ref(), None, Think::No)?,
                });
            }
            let thinks = template.contains("<think>")
                || hints.is_some_and(|h| h.reasoning_parser == rmx_store::ReasoningParser::Think);
            let inside = rendered.trim_end().ends_with("<think>");
            // Gemma 4 thinks in a channel, `<|channel>thought ... <channel|>`. A constrained
            // answer then starts at once (the constraint knows `<think>` only).
            let channel = template.contains(CHANNEL_START) && template.contains(CHANNEL_END);
            let (reasoning, think) = if channel {
                let start_tag = format!("{CHANNEL_START}thought");
                let config = ReasoningConfig {
                    starts_in_reasoning: rendered.trim_end().ends_with(&start_tag),
                    start_tag,
                    end_tag: CHANNEL_END.to_string(),
                    enabled: true,
                };
                (ReasoningParser::new(config), Think::No)
            } else if thinks {
                let think = if inside {
                    Think::Inside
                } else {
                    Think::MayOpen
                };
                (ReasoningParser::think_tags(inside), think)
            } else {
                (ReasoningParser::disabled(), Think::No)
            };
            let format = hints
                .and_then(|h| tool_format(h.tool_parser))
                .or_else(|| ToolCallFormat::detect_from_template(&template));
            let tools = tools.and_then(|t| {
                let list = t.as_array().cloned().unwrap_or_default();
                Some(ToolCallParser::new(format?).with_tools(&list))
            });
            Ok(BuiltPrompt {
                tokens,
                reasoning,
                keep_special: channel || format == Some(ToolCallFormat::Gemma4),
                tools,
                harmony: None,
                constraint: constraint(req.shape.as_ref(), format, think)?,
            })
        }
    }
}

/// The engine's constraint for a requested shape; a tool call needs a format that can be
/// forced, else the request is refused rather than answered unconstrained.
fn constraint(
    shape: Option<&Shape>,
    format: Option<ToolCallFormat>,
    think: Think,
) -> Result<Option<Constraint>, ServiceError> {
    let c = match shape {
        None => return Ok(None),
        Some(Shape::JsonObject) => Constraint::json_object(),
        Some(Shape::JsonSchema(s)) => Constraint::json_schema(s.clone()),
        Some(Shape::ToolCall { names }) => {
            let format = format.ok_or_else(|| {
                ServiceError::BadRequest(format!(
                    "{FORCED_TOOL_CALL} is not supported for this model: its chat template shows \
                     no tool-call format; use `tool_choice` `auto`"
                ))
            })?;
            Constraint::tool_call(format, names.clone()).map_err(|e| {
                ServiceError::BadRequest(format!(
                    "{FORCED_TOOL_CALL} cannot be enforced for this model: {e}; use `tool_choice` `auto`"
                ))
            })?
        }
    };
    Ok(Some(c.with_think(think)))
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

fn tool_format(p: ToolParser) -> Option<ToolCallFormat> {
    match p {
        ToolParser::Hermes => Some(ToolCallFormat::Hermes),
        ToolParser::Qwen3Coder => Some(ToolCallFormat::Qwen3Coder),
        ToolParser::Llama3Json => Some(ToolCallFormat::Llama3Json),
        ToolParser::Mistral => Some(ToolCallFormat::Mistral),
        ToolParser::Gemma => Some(ToolCallFormat::Gemma),
        ToolParser::Gemma4 => Some(ToolCallFormat::Gemma4),
        ToolParser::Harmony | ToolParser::None => None,
    }
}

/// Carries engine events to the client through the parsers; holds the model's lease until the
/// answer ends, so keep-alive counts from the end of the reply.
struct Pump {
    tx: mpsc::UnboundedSender<ServiceEvent>,
    reasoning: ReasoningParser,
    tools: Option<ToolCallParser>,
    harmony: Option<HarmonyParser>,
    calls: usize,
    /// Tokens that began or ended inside the reasoning block.
    reasoning_tokens: usize,
    load_duration: Duration,
    started: Instant,
    lease: Lease,
}

impl Pump {
    async fn run(
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
