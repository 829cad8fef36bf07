//! A prompt's text into tokens, refused as soon as it is clearly longer than the model's
//! context (`rmx_text::prompt_limit`): a request just under the body limit is some 6M tokens,
//! and tokenizing all of them took seconds and gigabytes before the engine refused them.

use rmx_engine::Engine;
use rmx_text::prompt_limit::LimitError;

use super::ServiceError;

/// The tokens of `text` (with the post-processor's special tokens where asked: a raw prompt's
/// BOS; a rendered chat has its own).
pub(super) fn prompt_tokens(
    engine: &Engine,
    text: &str,
    add_special_tokens: bool,
) -> Result<Vec<u32>, ServiceError> {
    let tokenizer = engine.tokenizer();
    let tokens = match engine.info().context_length {
        Some(context) => tokenizer.encode_within(text, add_special_tokens, context as usize),
        None => tokenizer
            .encode(text, add_special_tokens)
            .map_err(LimitError::from),
    };
    tokens.map_err(|e| match e {
        LimitError::TooLong { limit, .. } => ServiceError::PromptTooLong {
            prompt: None,
            context: limit,
        },
        LimitError::Tokenizer(e) => {
            ServiceError::BadRequest(format!("tokenizing the prompt failed: {e}"))
        }
    })
}
