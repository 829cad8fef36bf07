//! Whether the engine loads a model's family, judged from config.json alone. The daemon asks
//! before it makes room for a model and loads it: a model it can never run then evicts no
//! other, and is refused for its family rather than for whatever file the load reads first
//! (the tokenizer comes before the weights).

use std::path::Path;

use rmx_models::ModelError;

use crate::error::{EngineError, Result};

/// The config.json `model_type`s this engine loads: the list the store is handed
/// (`rmx_store::Families`) and the one the built-in aliases are checked against.
pub fn supported_model_types() -> Vec<&'static str> {
    rmx_models::supported()
}

/// What the model in `dir` does (chat, embedding, rerank), judged from its files as loading it
/// would judge them, without loading it; `None` when its config.json cannot be read.
pub fn model_kind(dir: &Path) -> Option<rmx_models::ModelKind> {
    rmx_models::embed::kind_of(dir).ok()
}

/// The config.json `architectures` the engine loads when the `model_type` is none of
/// [`supported_model_types`] (the registry falls back to them).
pub fn supported_architectures() -> Vec<&'static str> {
    rmx_models::supported_architectures()
}

/// [`ModelError::Unsupported`] (as `load` would return it) when the config names a family the
/// engine lacks. A config that cannot be read is not judged here: the load reports it.
pub fn check_family(dir: &Path) -> Result<()> {
    match rmx_models::is_supported(dir) {
        Ok(false) => Err(EngineError::Model(ModelError::Unsupported {
            model_type: family_name(dir),
            supported: supported_model_types().join(", "),
        })),
        _ => Ok(()),
    }
}

/// `model_type`, else the `architectures` (what the registry matches on when the type is
/// missing), as `rmx_models::load` names them in the same error.
fn family_name(dir: &Path) -> String {
    let config: serde_json::Value = std::fs::read(dir.join("config.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    match config["model_type"].as_str() {
        Some(t) if !t.is_empty() => t.to_string(),
        _ => config["architectures"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(config: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.json"), config).expect("write");
        dir
    }

    #[test]
    fn an_unknown_family_is_named_with_what_loads() {
        let dir = dir_with(
            r#"{"model_type": "gemma3n", "architectures": ["Gemma3nForConditionalGeneration"]}"#,
        );
        match check_family(dir.path()) {
            Err(EngineError::Model(ModelError::Unsupported {
                model_type,
                supported,
            })) => {
                assert_eq!(model_type, "gemma3n");
                assert!(supported.split(", ").any(|s| s == "llama"), "{supported}");
            }
            other => panic!("{other:?}"),
        }
        let dir = dir_with(r#"{"architectures": ["MambaForCausalLM"]}"#);
        assert!(
            matches!(check_family(dir.path()), Err(EngineError::Model(ModelError::Unsupported { model_type, .. })) if model_type == "MambaForCausalLM")
        );
    }

    #[test]
    fn a_known_family_or_an_unreadable_config_passes() {
        let dir = dir_with(r#"{"model_type": "llama"}"#);
        assert!(check_family(dir.path()).is_ok());
        let dir = dir_with("not json");
        assert!(check_family(dir.path()).is_ok());
        assert!(supported_model_types().contains(&"qwen3"));
    }
}
