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

/// What a request says of speculation: a method, or `"off"`, which turns a daemon default
/// (`rmx serve --speculative`) off for that request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    On(Speculation),
    Off,
}

impl Asked {
    /// How an answer speculates: as the request says, else as the daemon's `default`.
    pub fn over(asked: Option<Asked>, default: Option<Speculation>) -> Option<Speculation> {
        match asked {
            Some(Asked::On(s)) => Some(s),
            Some(Asked::Off) => None,
            None => default,
        }
    }
}

/// How a request speculates: `None` without `speculative` (the daemon's default then applies);
/// `draft_tokens` without a method (or with "off"), an unknown method or a count outside
/// 1..=[`MAX_DRAFT_TOKENS`], a refusal that says what is allowed.
pub fn parse(
    method: Option<&str>,
    draft_tokens: Option<usize>,
) -> Result<Option<Asked>, BadSpeculation> {
    match method {
        // A count alone would be ignored silently, which hides a typo in `speculative`.
        None | Some("off") if draft_tokens.is_some() => Err(BadSpeculation {
            param: "draft_tokens",
            message: "`draft_tokens` needs speculative (\"prompt-lookup\")".into(),
        }),
        None => Ok(None),
        Some("off") => Ok(Some(Asked::Off)),
        Some("prompt-lookup") => {
            let k = draft_tokens.unwrap_or(DEFAULT_DRAFT_TOKENS);
            Speculation::prompt_lookup(k)
                .map(|s| Some(Asked::On(s)))
                .map_err(|_| BadSpeculation {
                    param: "draft_tokens",
                    message: format!(
                        "`draft_tokens` must be between 1 and {MAX_DRAFT_TOKENS}, got {k}"
                    ),
                })
        }
        Some(other) => Err(BadSpeculation {
            param: "speculative",
            message: format!(
                "unknown `speculative` method {other:?}: expected \"prompt-lookup\" or \"off\""
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(method: Option<&str>, k: Option<usize>) -> BadSpeculation {
        parse(method, k).expect_err("refused")
    }

    fn tokens(method: &str, k: Option<usize>) -> Option<usize> {
        match parse(Some(method), k) {
            Ok(Some(Asked::On(s))) => Some(s.draft_tokens()),
            _ => None,
        }
    }

    #[test]
    fn fields_are_checked_and_defaulted() {
        assert_eq!(parse(None, None), Ok(None));
        assert_eq!(tokens("prompt-lookup", None), Some(DEFAULT_DRAFT_TOKENS));
        assert_eq!(tokens("prompt-lookup", Some(16)), Some(16));
        // "off" turns a daemon default off; with a count it is refused as a count alone is.
        let lookup = Speculation::prompt_lookup(4).ok();
        assert_eq!(parse(Some("off"), None), Ok(Some(Asked::Off)));
        assert_eq!(Asked::over(Some(Asked::Off), lookup), None);
        assert_eq!(Asked::over(None, lookup), lookup);
        assert_eq!(refusal(Some("off"), Some(4)).param, "draft_tokens");
        for k in [0, 17] {
            let e = refusal(Some("prompt-lookup"), Some(k));
            assert_eq!(e.param, "draft_tokens");
            assert!(e.message.contains("between 1 and 16"), "{e}");
        }
        let e = refusal(Some("medusa"), None);
        assert_eq!(e.param, "speculative");
        assert!(
            e.message.contains("expected \"prompt-lookup\" or \"off\""),
            "{e}"
        );
        let e = refusal(None, Some(4));
        assert_eq!(e.param, "draft_tokens");
        assert!(e.message.contains("needs speculative"), "{e}");
    }
}
