//! A request into the model's tokens: the chat template rendered (off the async workers, with
//! a time limit), or a raw prompt encoded; and the parsers its answer goes through (reasoning,
//! tool calls, harmony) and the constraint that keeps it in a requested [`Shape`].

use std::sync::Arc;
use std::time::Duration;

use rmx_engine::{ChatPrompt, Compiled, Constraint, ConstraintError, Engine, EngineError, Think};
use rmx_store::{ModelHints, ToolParser};
use rmx_text::harmony::HarmonyParser;
use rmx_text::reasoning::{ReasoningConfig, ReasoningParser};
use rmx_text::template::{Limit, TemplateError};
use rmx_text::toolcall::{ToolCallFormat, ToolCallParser};
use serde_json::Value;

use super::prompt_tokens::prompt_tokens;
use super::thinking::ThoughtTags;
use super::{
    InternalRequest, PromptInput, ServiceError, Shape, TemplateMessage, FORCED_TOOL_CALL,
    MAX_IMAGES_PER_REQUEST,
};

/// How long a render may take before the request is answered with
/// [`ServiceError::TemplateLimit`]. Fuel (`rmx_text::template::limits`) ends a runaway template
/// well before this on any machine; the clock is for what fuel does not count (a filter over
/// a huge value), and the render thread still stops at its fuel after the answer is sent.
const RENDER_TIMEOUT: Duration = Duration::from_secs(30);

/// [`build_prompt`] on tokio's blocking pool: a template is the model repo's code, and its
/// render (and the tokenizing after it) must not hold up the async workers that serve every
/// other request.
pub(super) async fn render_off_workers(
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

pub(super) struct BuiltPrompt {
    pub(super) tokens: Vec<u32>,
    pub(super) reasoning: ReasoningParser,
    pub(super) tools: Option<ToolCallParser>,
    /// The model writes OpenAI's harmony format (GPT-OSS): this parser replaces the other two,
    /// and the engine emits special tokens' text, which carries harmony's markers.
    pub(super) harmony: Option<HarmonyParser>,
    /// The engine emits special tokens' text: the markers the parsers read are special tokens
    /// in some tokenizers (harmony's, Gemma 4's `<|tool_call>` and `<|channel>`).
    pub(super) keep_special: bool,
    pub(super) constraint: Option<Compiled>,
    /// The chat's images, decoded and preprocessed, in the order of their placeholders.
    pub(super) images: Vec<rmx_vision::PixelValues>,
    /// How the model's thought is marked, where the engine can close it (a thinking budget).
    pub(super) thought: Option<ThoughtTags>,
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
            tokens: prompt_tokens(engine, text, true)?,
            reasoning: ReasoningParser::disabled(),
            tools: None,
            harmony: None,
            keep_special: false,
            constraint: constraint(engine, req.shape.as_ref(), None, Think::No)?,
            images: Vec::new(),
            thought: None,
        }),
        PromptInput::Chat {
            messages,
            tools,
            template_kwargs,
        } => {
            let (image_input, images) = chat_images(engine, &req.model, messages)?;
            if !engine.has_chat_template() {
                if !images.is_empty() {
                    return Err(ServiceError::BadRequest(format!(
                        "the model `{}` has no chat template to place images in; send text",
                        req.model
                    )));
                }
                // A base model has no chat format: complete the messages' text as it stands.
                let text: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
                return Ok(BuiltPrompt {
                    tokens: prompt_tokens(engine, &text.join("\n\n"), true)?,
                    reasoning: ReasoningParser::disabled(),
                    tools: None,
                    harmony: None,
                    keep_special: false,
                    constraint: constraint(engine, req.shape.as_ref(), None, Think::No)?,
                    images: Vec::new(),
                    thought: None,
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
            let messages = messages
                .iter()
                .map(TemplateMessage::template_value)
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array)
                .map_err(|e| ServiceError::Internal(format!("the chat as template input: {e}")))?;
            let chat = ChatPrompt {
                messages,
                tools: tools.clone(),
                add_generation_prompt: true,
                kwargs,
            };
            let context = engine.info().context_length.map(|c| c as usize);
            let rendered = engine.render_chat(&chat).map_err(|e| match (e, context) {
                // Past 16 MiB of output, some 4M tokens of real text: it is the prompt, not
                // the template, that is too long for the model's context.
                (
                    rmx_engine::EngineError::Template(TemplateError::Limit(Limit::Output)),
                    Some(context),
                ) => ServiceError::PromptTooLong {
                    prompt: None,
                    context,
                },
                (rmx_engine::EngineError::Template(TemplateError::Limit(limit)), _) => {
                    ServiceError::TemplateLimit {
                        name: req.model.clone(),
                        limit: limit.to_string(),
                    }
                }
                (other, _) => other.into(),
            })?;
            let tokens = match &image_input {
                // Each image's marker in the rendered chat widened into its placeholders.
                Some(input) if !images.is_empty() => {
                    let sizes: Vec<(u32, u32)> =
                        images.iter().map(|p| (p.height, p.width)).collect();
                    let text = input.prompt.expand(&rendered, &sizes).map_err(|e| {
                        ServiceError::BadRequest(format!(
                            "the images do not fit the model's chat template: {e}"
                        ))
                    })?;
                    prompt_tokens(engine, &text, false)?
                }
                _ => prompt_tokens(engine, &rendered, false)?,
            };
            let harmony = template.contains("<|channel|>")
                || hints.as_ref().is_some_and(|h| {
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
                    constraint: constraint(engine, req.shape.as_ref(), None, Think::No)?,
                    images,
                    // Harmony's analysis channel is not closed for the model yet: its effort
                    // goes to the template (`reasoning_effort`), which is how GPT-OSS budgets.
                    thought: None,
                });
            }
            let thinks = template.contains("<think>")
                || hints
                    .as_ref()
                    .is_some_and(|h| h.reasoning_parser == rmx_store::ReasoningParser::Think);
            let inside = rendered.trim_end().ends_with("<think>");
            // Gemma 4 thinks in a channel, `<|channel>thought ... <channel|>`. A constrained
            // answer then starts at once (the constraint knows `<think>` only).
            let channel = template.contains(CHANNEL_START) && template.contains(CHANNEL_END);
            let (reasoning, think, thought) = if channel {
                let start_tag = format!("{CHANNEL_START}thought");
                let starts_inside = rendered.trim_end().ends_with(&start_tag);
                let tags = ThoughtTags::channel(&start_tag, CHANNEL_END, starts_inside);
                let config = ReasoningConfig {
                    starts_in_reasoning: starts_inside,
                    start_tag,
                    end_tag: CHANNEL_END.to_string(),
                    enabled: true,
                };
                (ReasoningParser::new(config), Think::No, Some(tags))
            } else if thinks {
                let think = if inside {
                    Think::Inside
                } else {
                    Think::MayOpen
                };
                let tags = ThoughtTags::think(inside);
                (ReasoningParser::think_tags(inside), think, Some(tags))
            } else {
                (ReasoningParser::disabled(), Think::No, None)
            };
            // The alias's format, else the one the template shows, else (no alias) the one
            // the model's family writes: many templates render tool calls without markers
            // (Llama 3.1's bare JSON) or show none at all.
            let family = || {
                let guess = ModelHints::guess(Some(&engine.info().model_type));
                tool_format(guess.tool_parser).filter(|_| hints.is_none())
            };
            let format = hints
                .as_ref()
                .and_then(|h| tool_format(h.tool_parser))
                .or_else(|| ToolCallFormat::detect_from_template(&template))
                .or_else(family);
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
                constraint: constraint(engine, req.shape.as_ref(), format, think)?,
                images,
                thought,
            })
        }
    }
}

/// The chat's images checked and preprocessed (on this blocking thread: decoding is CPU work),
/// with how the model takes them; refused when there are too many, the model reads text only,
/// or an image is not one it can read (unknown format, truncated, too large by its header).
fn chat_images(
    engine: &Engine,
    model: &str,
    messages: &[TemplateMessage],
) -> Result<(Option<rmx_engine::ImageInput>, Vec<rmx_vision::PixelValues>), ServiceError> {
    let bytes: Vec<_> = messages.iter().flat_map(|m| m.images()).collect();
    if bytes.is_empty() {
        return Ok((None, Vec::new()));
    }
    if bytes.len() > MAX_IMAGES_PER_REQUEST {
        return Err(ServiceError::BadRequest(format!(
            "the request has {} images, over the limit of {MAX_IMAGES_PER_REQUEST} per request; \
             send fewer images",
            bytes.len()
        )));
    }
    let input = engine.image_input()?.ok_or_else(|| {
        ServiceError::BadRequest(format!(
            "the model `{model}` takes no images (it reads text only); send text, or use a \
             vision model (Gemma 3 or Mistral Small 3.1/3.2 with its vision tower)"
        ))
    })?;
    let pixels = bytes
        .iter()
        .enumerate()
        .map(|(i, b)| {
            input.prepare(b).map_err(|e| {
                ServiceError::BadRequest(format!("image {} of the request: {e}", i + 1))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((Some(input), pixels))
}

/// The engine's constraint for a requested shape, compiled; a tool call needs a format that
/// can be forced, else the request is refused rather than answered unconstrained, and so is a
/// schema llguidance cannot enforce.
fn constraint(
    engine: &Engine,
    shape: Option<&Shape>,
    format: Option<ToolCallFormat>,
    think: Think,
) -> Result<Option<Compiled>, ServiceError> {
    let c = match shape {
        None => return Ok(None),
        Some(Shape::JsonObject) => Constraint::json_object(),
        Some(Shape::JsonSchema(s)) => Constraint::json_schema(s.clone()),
        Some(Shape::ToolCall { tools }) => {
            let format = format.ok_or_else(|| {
                ServiceError::BadRequest(format!(
                    "{FORCED_TOOL_CALL} is not supported for this model: its chat template shows \
                     no tool-call format; use `tool_choice` `auto`"
                ))
            })?;
            Constraint::tool_call(format, tools.clone())
        }
        Some(Shape::ToolCallsInText { tools }) => match format {
            Some(f @ ToolCallFormat::Hermes) => Constraint::tool_calls_in_text(f, tools.clone()),
            // `strict` is a promise only where a call opens with a marker the grammar can
            // wait for; elsewhere the answer is free, as without `strict`.
            _ => return Ok(None),
        },
        Some(Shape::Regex(rx)) => Constraint::regex(rx.clone()),
        Some(Shape::Choice(choices)) => Constraint::choice(choices.clone()),
        Some(Shape::Grammar(lark)) => Constraint::lark(lark.clone()),
    };
    let what = match shape {
        Some(Shape::ToolCall { .. }) => FORCED_TOOL_CALL,
        Some(Shape::ToolCallsInText { .. }) => "the strict tools' arguments",
        Some(Shape::Regex(_) | Shape::Choice(_) | Shape::Grammar(_)) => "`structured_outputs`",
        _ => "the response format",
    };
    match engine.constrain(&c.with_think(think)) {
        Ok(compiled) => Ok(Some(compiled)),
        Err(EngineError::Constraint(e @ ConstraintError::UnsupportedFormat(_))) => {
            Err(ServiceError::BadRequest(format!(
                "{what} cannot be enforced for this model: {e}; use `tool_choice` `auto`"
            )))
        }
        Err(EngineError::Constraint(e)) if e.is_invalid_request() => Err(ServiceError::BadRequest(
            format!("{what} cannot be enforced: {e}"),
        )),
        Err(e) => Err(e.into()),
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
