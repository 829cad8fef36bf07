//! rmx's speculation fields (`speculative`, `draft_tokens`), read the same way on every surface:
//! the native options, OpenAI's chat, completions and Responses bodies, Anthropic's messages.
//! Each surface turns a refusal into a 400 in its own error shape naming [`BadSpeculation::param`].

use rmx_engine::speculative::{DEFAULT_DRAFT_TOKENS, MAX_DRAFT_TOKENS};
use rmx_engine::Speculation;

/// A speculation field the request got wrong; `param` is the field's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadSpeculation {
    pub param: &'static str,
    pub message: String,
}

/// How a request speculates: `None` without `speculative` (the daemon's default then applies);
/// `draft_tokens` without `speculative`, an unknown method or a count outside
/// 1..=[`MAX_DRAFT_TOKENS`], a refusal that says what is allowed.
pub fn parse(
    method: Option<&str>,
    draft_tokens: Option<usize>,
) -> Result<Option<Speculation>, BadSpeculation> {
    match method {
        // A count alone would be ignored silently, which hides a typo in `speculative`.
        None if draft_tokens.is_some() => Err(BadSpeculation {
            param: "draft_tokens",
            message: "`draft_tokens` needs speculative (\"prompt-lookup\")".into(),
        }),
        None => Ok(None),
        Some("prompt-lookup") => {
            let k = draft_tokens.unwrap_or(DEFAULT_DRAFT_TOKENS);
            Speculation::prompt_lookup(k)
                .map(Some)
                .map_err(|_| BadSpeculation {
                    param: "draft_tokens",
                    message: format!(
                        "`draft_tokens` must be between 1 and {MAX_DRAFT_TOKENS}, got {k}"
                    ),
                })
        }
        Some(other) => Err(BadSpeculation {
            param: "speculative",
            message: format!("unknown `speculative` method {other:?}: expected \"prompt-lookup\""),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(method: Option<&str>, k: Option<usize>) -> BadSpeculation {
        parse(method, k).expect_err("refused")
    }

    #[test]
    fn fields_are_checked_and_defaulted() {
        assert_eq!(parse(None, None), Ok(None));
        assert_eq!(
            parse(Some("prompt-lookup"), None).map(|s| s.map(|s| s.draft_tokens())),
            Ok(Some(DEFAULT_DRAFT_TOKENS))
        );
        assert_eq!(
            parse(Some("prompt-lookup"), Some(16)).map(|s| s.map(|s| s.draft_tokens())),
            Ok(Some(16))
        );
        for k in [0, 17] {
            let e = refusal(Some("prompt-lookup"), Some(k));
            assert_eq!(e.param, "draft_tokens");
            assert!(e.message.contains("between 1 and 16"), "{e}");
        }
        let e = refusal(Some("medusa"), None);
        assert_eq!(e.param, "speculative");
        assert!(e.message.contains("expected \"prompt-lookup\""), "{e}");
        let e = refusal(None, Some(4));
        assert_eq!(e.param, "draft_tokens");
        assert!(e.message.contains("needs speculative"), "{e}");
    }
}
