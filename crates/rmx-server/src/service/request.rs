//! What a surface asks of the service core: one [`InternalRequest`], whatever API it came from.

use rmx_api::KeepAlive;
use rmx_engine::Tool;
use serde_json::{Map, Value};

use super::{SamplingParams, TemplateMessage};

/// The most images one request may carry: each is decoded, preprocessed and run through the
/// model's vision tower before the first token, and takes its placeholders of the context
/// (256 per image for Gemma 3; an image's own grid of patches for Mistral Small 3).
pub const MAX_IMAGES_PER_REQUEST: usize = 8;

/// What to complete.
#[derive(Debug, Clone)]
pub enum PromptInput {
    /// Rendered with the model's chat template (with the generation prompt added).
    Chat {
        messages: Vec<TemplateMessage>,
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
    /// Close the answer's thought after this many tokens (Anthropic `budget_tokens`, an
    /// effort's budget: thinking.rs).
    pub thinking_budget: Option<usize>,
    /// Keep the answer in this shape (constrained decoding).
    pub shape: Option<Shape>,
    /// Store the answer's KV cache quantized (`--kv-bits`); None: the daemon's default.
    pub kv_quant: Option<rmx_engine::KvQuant>,
    /// Guess tokens ahead and check them in one forward (`--speculative`), or not (`"off"`);
    /// None: the daemon's default.
    pub speculative: Option<crate::speculation::Asked>,
}

/// What constrained decoding enforces on an answer. The answer may still start with a
/// thought (`<think>...</think>`) where the model's template thinks; the shape follows it.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// One JSON object (JSON mode).
    JsonObject,
    /// One JSON value valid against this JSON Schema (what llguidance enforces: `docs/api.md`).
    JsonSchema(Value),
    /// One call, in the model's tool-call markup, of one of these tools with arguments valid
    /// against its parameters schema (`tool_choice` `required` or a named tool).
    ToolCall { tools: Vec<Tool> },
    /// Free text in which every call the model writes is a whole call of one of these tools
    /// with valid arguments (`tool_choice` `auto` with `strict` tools; a tool with no schema
    /// takes any object).
    ToolCallsInText { tools: Vec<Tool> },
    /// Text matched whole by this regular expression (vLLM's `structured_outputs.regex`).
    Regex(String),
    /// Exactly one of these strings (`structured_outputs.choice`).
    Choice(Vec<String>),
    /// Text in this Lark grammar, llguidance's dialect (`structured_outputs.grammar`).
    Grammar(String),
}

/// The tools of OpenAI-shaped tool definitions (`[{"type": "function", "function": {...}}]`),
/// with their parameters schemas, for [`Shape::ToolCall`].
pub fn tool_specs(tools: &[Value]) -> Vec<Tool> {
    tools
        .iter()
        .filter_map(|t| {
            let f = &t["function"];
            let name = f["name"].as_str()?;
            Some(Tool::new(
                name,
                f.get("parameters").filter(|p| !p.is_null()).cloned(),
            ))
        })
        .collect()
}

/// [`tool_specs`] for `tool_choice` `auto`: the tools marked `strict` keep their schemas, the
/// others take any object; None when no tool is strict (nothing to enforce).
pub fn strict_tool_specs(tools: &[Value]) -> Option<Vec<Tool>> {
    let strict = |t: &Value| t["function"]["strict"] == Value::Bool(true);
    if !tools.iter().any(strict) {
        return None;
    }
    let mut specs = tool_specs(tools);
    for (spec, t) in specs
        .iter_mut()
        .zip(tools.iter().filter(|t| t["function"]["name"].is_string()))
    {
        if !strict(t) {
            spec.parameters = None;
        }
    }
    Some(specs)
}

/// Names the `tool_choice` value a surface sent, for the error when it cannot be forced.
pub const FORCED_TOOL_CALL: &str = "a forced tool call (`tool_choice` `required` or a named tool)";
