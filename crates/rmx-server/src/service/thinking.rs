//! Thinking budgets as the APIs ask for them (Anthropic `thinking.budget_tokens`, OpenAI
//! `reasoning_effort` and vLLM's `thinking_token_budget`, Ollama `think` levels and rmx's
//! `thinking_budget` option), and how a model's thought is closed when its budget runs out
//! (the engine's thought.rs does the closing).

use rmx_engine::{Engine, ThoughtBudget};

use super::ServiceError;

/// The thought's budget for an OpenAI `reasoning_effort` (Responses `reasoning.effort`, an
/// Ollama `think` level) on a model whose template does not take the effort itself: a low
/// effort thinks for at most 1,024 tokens, a medium one 4,096, a high one 16,384. `none` and
/// `minimal` turn thinking off instead; other values set no budget.
pub fn effort_budget(effort: &str) -> Option<usize> {
    match effort {
        "low" => Some(1024),
        "medium" => Some(4096),
        "high" => Some(16_384),
        _ => None,
    }
}

/// How a model marks its thought, for closing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ThoughtTags {
    pub(super) open: String,
    pub(super) close: String,
    /// The rendered prompt ends inside the thought.
    pub(super) starts_inside: bool,
    /// The text fed to the model in place of its own when the budget runs out.
    pub(super) closing: String,
}

impl ThoughtTags {
    /// `<think>…</think>`, closed the way Qwen3's template prints a finished thought.
    pub(super) fn think(starts_inside: bool) -> ThoughtTags {
        ThoughtTags {
            open: "<think>".into(),
            close: "</think>".into(),
            starts_inside,
            closing: "\n</think>\n\n".into(),
        }
    }

    /// A thought channel (Gemma 4's `<|channel>thought … <channel|>`).
    pub(super) fn channel(open: &str, close: &str, starts_inside: bool) -> ThoughtTags {
        ThoughtTags {
            open: open.into(),
            close: close.into(),
            starts_inside,
            closing: close.into(),
        }
    }

    /// The engine's budget of `max_tokens` thought tokens for this model.
    pub(super) fn budget(
        &self,
        engine: &Engine,
        max_tokens: usize,
    ) -> Result<ThoughtBudget, ServiceError> {
        let forced = engine.raw_tokens(&self.closing).map_err(|e| {
            ServiceError::Internal(format!("tokenizing the thought's close failed: {e}"))
        })?;
        Ok(ThoughtBudget {
            max_tokens,
            open: self.open.clone(),
            close: self.close.clone(),
            starts_inside: self.starts_inside,
            forced,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efforts_map_to_budgets_that_grow() {
        let b: Vec<_> = ["low", "medium", "high"]
            .iter()
            .map(|e| effort_budget(e).unwrap())
            .collect();
        assert!(b.windows(2).all(|w| w[0] < w[1]), "{b:?}");
        assert_eq!(effort_budget("none"), None);
        assert_eq!(effort_budget("xhigh"), None);
    }
}
