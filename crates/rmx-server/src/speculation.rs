//! rmx's speculation fields (`speculative`, `draft_tokens`), read the same way on every surface:
//! the native options, OpenAI's chat, completions and Responses bodies, Anthropic's messages.
//! Each surface turns a refusal into a 400 in its own error shape naming [`BadSpeculation::param`].

use rmx_engine::speculative::{DEFAULT_DRAFT_TOKENS, DEFAULT_MTP_TOKENS, MAX_DRAFT_TOKENS};
#[cfg(doc)]
use rmx_engine::Speculation;

/// A speculation field the request got wrong; `param` is the field's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadSpeculation {
    pub param: &'static str,
    pub message: String,
}

/// How a request (or the daemon, `rmx serve --speculative`) asks to speculate, before a draft
/// model's name is found in the store: the service turns it into the engine's
/// [`Speculation`] for the model that answers (`Service::speculation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// `"prompt-lookup"`.
    PromptLookup { draft_tokens: usize },
    /// `"draft:MODEL"`: a smaller model of the same tokenizer guesses (MODEL as the `model`
    /// field would name it).
    Draft { model: String, draft_tokens: usize },
    /// `"mtp"`: the model's own multi-token-prediction head guesses (checkpoints that keep
    /// `mtp.*`: the Hub's Qwen3.5, Qwen3.6 and Qwen3-Next, and `rmx import` of them).
    Mtp { draft_tokens: usize },
}

impl Spec {
    pub fn draft_tokens(&self) -> usize {
        match self {
            Spec::PromptLookup { draft_tokens }
            | Spec::Draft { draft_tokens, .. }
            | Spec::Mtp { draft_tokens } => *draft_tokens,
        }
    }
}

/// What a request says of speculation: a method, or `"off"`, which turns a daemon default
/// (`rmx serve --speculative`) off for that request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    On(Spec),
    Off,
}

impl Asked {
    /// How an answer speculates: as the request says, else as the daemon's `default`.
    pub fn over(asked: Option<Asked>, default: Option<&Spec>) -> Option<Spec> {
        match asked {
            Some(Asked::On(s)) => Some(s),
            Some(Asked::Off) => None,
            None => default.cloned(),
        }
    }
}

/// What `speculative` takes, for refusals and `--help`.
pub const METHODS: &str = "\"prompt-lookup\", \"draft:MODEL\", \"mtp\" or \"off\"";

/// How a request speculates: `None` without `speculative` (the daemon's default then applies);
/// `draft_tokens` without a method (or with "off"), an unknown method, a draft without a name
/// or a count outside 1..=[`MAX_DRAFT_TOKENS`], a refusal that says what is allowed.
pub fn parse(
    method: Option<&str>,
    draft_tokens: Option<usize>,
) -> Result<Option<Asked>, BadSpeculation> {
    let method = match method {
        // A count alone would be ignored silently, which hides a typo in `speculative`.
        None | Some("off") if draft_tokens.is_some() => {
            return Err(BadSpeculation {
                param: "draft_tokens",
                message: "`draft_tokens` needs speculative (\"prompt-lookup\", \"draft:MODEL\" \
                          or \"mtp\")"
                    .into(),
            })
        }
        None => return Ok(None),
        Some("off") => return Ok(Some(Asked::Off)),
        Some(m) => m,
    };
    let default = match method {
        "mtp" => DEFAULT_MTP_TOKENS,
        _ => DEFAULT_DRAFT_TOKENS,
    };
    let k = draft_tokens.unwrap_or(default);
    let spec = match method.split_once(':') {
        None if method == "prompt-lookup" => Spec::PromptLookup { draft_tokens: k },
        None if method == "mtp" => Spec::Mtp { draft_tokens: k },
        Some(("draft", model)) if !model.trim().is_empty() => Spec::Draft {
            model: model.trim().to_string(),
            draft_tokens: k,
        },
        Some(("draft", _)) => {
            return Err(BadSpeculation {
                param: "speculative",
                message: "`speculative` \"draft:MODEL\" needs the draft model's name after \
                          the colon, e.g. \"draft:qwen3-0.6b\""
                    .into(),
            })
        }
        _ => {
            return Err(BadSpeculation {
                param: "speculative",
                message: format!("unknown `speculative` method {method:?}: expected {METHODS}"),
            })
        }
    };
    rmx_engine::speculative::check_draft_tokens(k).map_err(|_| BadSpeculation {
        param: "draft_tokens",
        message: format!("`draft_tokens` must be between 1 and {MAX_DRAFT_TOKENS}, got {k}"),
    })?;
    Ok(Some(Asked::On(spec)))
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
        let lookup = Spec::PromptLookup { draft_tokens: 4 };
        assert_eq!(parse(Some("off"), None), Ok(Some(Asked::Off)));
        assert_eq!(Asked::over(Some(Asked::Off), Some(&lookup)), None);
        assert_eq!(Asked::over(None, Some(&lookup)), Some(lookup));
        assert_eq!(refusal(Some("off"), Some(4)).param, "draft_tokens");
        for k in [0, 17] {
            let e = refusal(Some("prompt-lookup"), Some(k));
            assert_eq!(e.param, "draft_tokens");
            assert!(e.message.contains("between 1 and 16"), "{e}");
        }
        assert_eq!(tokens("mtp", None), Some(DEFAULT_MTP_TOKENS));
        assert_eq!(tokens("mtp", Some(2)), Some(2));
        assert_eq!(refusal(Some("mtp"), Some(17)).param, "draft_tokens");
        let e = refusal(Some("medusa"), None);
        assert_eq!(e.param, "speculative");
        assert!(e.message.contains(METHODS), "{e}");
        // A draft names its model; its count is checked as prompt lookup's.
        assert_eq!(
            parse(Some("draft:qwen3-0.6b"), Some(3)),
            Ok(Some(Asked::On(Spec::Draft {
                model: "qwen3-0.6b".into(),
                draft_tokens: 3
            })))
        );
        assert_eq!(tokens("draft:m", None), Some(DEFAULT_DRAFT_TOKENS));
        assert_eq!(refusal(Some("draft:"), None).param, "speculative");
        assert_eq!(refusal(Some("draft: "), None).param, "speculative");
        assert_eq!(refusal(Some("draft:m"), Some(17)).param, "draft_tokens");
        assert_eq!(refusal(Some("prompt-lookup:x"), None).param, "speculative");
        let e = refusal(None, Some(4));
        assert_eq!(e.param, "draft_tokens");
        assert!(e.message.contains("needs speculative"), "{e}");
    }
}
