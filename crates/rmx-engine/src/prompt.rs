//! Turning what a user typed into prompt tokens, the way mlx-lm does: chat messages go through
//! the model's template and are encoded without adding special tokens (the template has them);
//! raw text is encoded with them (a BOS where the tokenizer adds one).

use serde_json::{Map, Value};

use crate::engine::Engine;
use crate::error::{EngineError, Result};
use rmx_text::template::RenderInput;

/// A chat to render: OpenAI-shaped messages plus template options.
#[derive(Debug, Clone, Default)]
pub struct ChatPrompt {
    pub messages: Value,
    pub tools: Option<Value>,
    pub add_generation_prompt: bool,
    /// Template variables such as `enable_thinking`.
    pub kwargs: Map<String, Value>,
}

impl Engine {
    pub fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }

    /// Renders the chat with the model's template.
    pub fn render_chat(&self, chat: &ChatPrompt) -> Result<String> {
        let template = self
            .template
            .as_ref()
            .ok_or_else(|| EngineError::NoTemplate(self.dir.clone()))?;
        let mut input =
            RenderInput::new(&chat.messages).with_special_tokens(self.tokenizer.special_tokens());
        input.tools = chat.tools.as_ref();
        input.add_generation_prompt = chat.add_generation_prompt;
        input.kwargs = chat.kwargs.clone();
        Ok(template.render(&input)?)
    }

    /// Prompt tokens for a chat.
    pub fn chat_tokens(&self, chat: &ChatPrompt) -> Result<Vec<u32>> {
        let text = self.render_chat(chat)?;
        self.tokenizer
            .encode(&text, false)
            .map_err(EngineError::Encode)
    }

    /// Prompt tokens for raw text.
    pub fn raw_tokens(&self, text: &str) -> Result<Vec<u32>> {
        self.tokenizer
            .encode(text, true)
            .map_err(EngineError::Encode)
    }
}
