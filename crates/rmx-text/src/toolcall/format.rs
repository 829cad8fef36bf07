//! Which tool-call format a model writes, and what each one means to the streaming parser.

use super::call::ParsedBody;
use super::scan::BodyScan;
use super::schema::ToolSchemas;
use super::trigger::Trigger;
use super::{gemma, gemma4, hermes, llama3, mistral, qwen3_coder};

/// The tool-call syntax of a model family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolCallFormat {
    /// `<tool_call>{json}</tool_call>`: Qwen2.5, Qwen3, Hermes and many fine-tunes.
    Hermes,
    /// `<tool_call><function=name><parameter=p>value</parameter></function></tool_call>`.
    Qwen3Coder,
    /// `{"name": .., "parameters": {..}}`, maybe after `<|python_tag|>`, `;`-separated.
    Llama3Json,
    /// `[TOOL_CALLS][{..}]` or `[TOOL_CALLS]name[ARGS]{..}`.
    Mistral,
    /// ```` ```tool_code\nf(a=1)\n``` ```` or a bare `{"name": .., "parameters": ..}`.
    Gemma,
    /// `<|tool_call>call:name{key:<|"|>text<|"|>,n:1}<tool_call|>` (Gemma 4).
    Gemma4,
}

impl ToolCallFormat {
    pub const ALL: [ToolCallFormat; 6] = [
        ToolCallFormat::Hermes,
        ToolCallFormat::Qwen3Coder,
        ToolCallFormat::Llama3Json,
        ToolCallFormat::Mistral,
        ToolCallFormat::Gemma,
        ToolCallFormat::Gemma4,
    ];

    /// The format by its name in model configs and on the command line: `hermes`,
    /// `qwen3_coder`, `llama3_json`, `mistral`, `gemma` (the names vLLM uses where it has one;
    /// a few obvious spellings are accepted too).
    pub fn from_name(name: &str) -> Option<Self> {
        let norm = name.trim().to_ascii_lowercase().replace('-', "_");
        Some(match norm.as_str() {
            "hermes" | "qwen" | "qwen2.5" | "qwen3" => ToolCallFormat::Hermes,
            "qwen3_coder" | "qwen3coder" | "qwen3_xml" => ToolCallFormat::Qwen3Coder,
            "llama3_json" | "llama3" | "llama" | "llama3.1" | "llama3.2" => {
                ToolCallFormat::Llama3Json
            }
            "mistral" => ToolCallFormat::Mistral,
            "gemma" | "gemma3" | "gemma2" => ToolCallFormat::Gemma,
            "gemma4" => ToolCallFormat::Gemma4,
            _ => return None,
        })
    }

    /// The canonical name, accepted by [`ToolCallFormat::from_name`].
    pub fn name(self) -> &'static str {
        match self {
            ToolCallFormat::Hermes => "hermes",
            ToolCallFormat::Qwen3Coder => "qwen3_coder",
            ToolCallFormat::Llama3Json => "llama3_json",
            ToolCallFormat::Mistral => "mistral",
            ToolCallFormat::Gemma => "gemma",
            ToolCallFormat::Gemma4 => "gemma4",
        }
    }

    /// The format a chat template teaches, from the markers it prints when it renders tool
    /// calls. Qwen3-Coder's template also contains `<tool_call>`, so its `<function=` is looked
    /// for first. None when the template shows no tool calls at all.
    pub fn detect_from_template(template: &str) -> Option<Self> {
        if template.contains("<|tool_call>") && template.contains("<tool_call|>") {
            Some(ToolCallFormat::Gemma4)
        } else if template.contains("<function=") && template.contains("<parameter=") {
            Some(ToolCallFormat::Qwen3Coder)
        } else if template.contains("<tool_call>") {
            Some(ToolCallFormat::Hermes)
        } else if template.contains("[TOOL_CALLS]") {
            Some(ToolCallFormat::Mistral)
        } else if template.contains("<|python_tag|>") {
            Some(ToolCallFormat::Llama3Json)
        } else if template.contains("tool_code") {
            Some(ToolCallFormat::Gemma)
        } else {
            None
        }
    }

    pub(crate) fn triggers(self) -> &'static [Trigger] {
        match self {
            ToolCallFormat::Hermes => hermes::TRIGGERS,
            ToolCallFormat::Qwen3Coder => qwen3_coder::TRIGGERS,
            ToolCallFormat::Llama3Json => llama3::TRIGGERS,
            ToolCallFormat::Mistral => mistral::TRIGGERS,
            ToolCallFormat::Gemma => gemma::TRIGGERS,
            ToolCallFormat::Gemma4 => gemma4::TRIGGERS,
        }
    }

    /// Whether a reply that opens with JSON may be a call with no marker before it.
    pub(crate) fn bare_json_at_start(self) -> bool {
        matches!(self, ToolCallFormat::Llama3Json | ToolCallFormat::Gemma)
    }

    /// For [`Close::SelfDelimited`] triggers: the length of the call's text in `body`, once
    /// known. `scan` carries the progress made on the earlier, shorter text.
    pub(crate) fn body_end(self, body: &str, scan: &mut BodyScan) -> Option<usize> {
        match self {
            ToolCallFormat::Mistral => mistral::body_end(body, scan),
            _ => llama3::json_run_end(body, scan),
        }
    }

    /// The calls in the text of trigger `trigger` (None: the bare JSON at the start).
    pub(crate) fn parse_body(
        self,
        trigger: Option<usize>,
        body: &str,
        tools: &ToolSchemas,
    ) -> Option<ParsedBody> {
        let Some(trigger) = trigger else {
            return llama3::parse_body(body, true);
        };
        match self {
            ToolCallFormat::Hermes => hermes::parse_block(body, tools),
            ToolCallFormat::Qwen3Coder => qwen3_coder::parse_body(trigger, body, tools),
            ToolCallFormat::Llama3Json => llama3::parse_body(body, false),
            ToolCallFormat::Mistral => mistral::parse_body(body),
            ToolCallFormat::Gemma => gemma::parse_fence(body),
            ToolCallFormat::Gemma4 => gemma4::parse_body(body),
        }
    }
}
