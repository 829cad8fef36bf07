//! Which model families this rmx loads, so the store can refuse a download, and mark a stored
//! model, that the engine would only fail on.
//!
//! A family is config.json's `model_type`. The list itself belongs to rmx-models, which links
//! MLX; the store must not, so the binary that links both hands the list in
//! ([`Store::with_families`](crate::Store::with_families)). A store that was given none knows
//! nothing and refuses nothing.

use std::sync::Arc;

use crate::error::Unsupported;
use crate::model_config::ModelConfig;

#[derive(Debug, Clone, Default)]
pub struct Families {
    /// `None`: not known (nothing is judged).
    supported: Option<Arc<[String]>>,
    /// `architectures` names the engine also loads by, when a `model_type` is unknown.
    architectures: Arc<[String]>,
}

impl Families {
    /// The `model_type`s the engine loads (`rmx_engine::supported_model_types()`).
    pub fn new<S: Into<String>>(model_types: impl IntoIterator<Item = S>) -> Self {
        Families {
            supported: Some(model_types.into_iter().map(Into::into).collect()),
            architectures: Arc::new([]),
        }
    }

    /// With the `architectures` names the engine falls back to
    /// (`rmx_engine::supported_architectures()`).
    pub fn with_architectures<S: Into<String>>(
        mut self,
        architectures: impl IntoIterator<Item = S>,
    ) -> Self {
        self.architectures = architectures.into_iter().map(Into::into).collect();
        self
    }

    /// A store that does not know what the engine loads (rmx-store's own tests, tools).
    pub fn unknown() -> Self {
        Families::default()
    }

    pub fn is_known(&self) -> bool {
        self.supported.is_some()
    }

    /// [`Families::check`] on a config.json as read.
    pub(crate) fn check_config(&self, config: &ModelConfig) -> Result<(), Unsupported> {
        self.check(config.model_type().as_deref(), &config.architectures())
    }

    /// Judges a config.json as the engine's registry picks a family: by `model_type`, else by
    /// `architectures`. A config with neither is not judged.
    pub fn check(
        &self,
        model_type: Option<&str>,
        architectures: &[String],
    ) -> Result<(), Unsupported> {
        let Some(supported) = &self.supported else {
            return Ok(());
        };
        let family = model_type.filter(|t| !t.is_empty());
        if family.is_some_and(|f| supported.iter().any(|s| s == f))
            || architectures.iter().any(|a| self.architectures.contains(a))
        {
            return Ok(());
        }
        let family = match family {
            Some(f) => f.to_string(),
            None if architectures.is_empty() => return Ok(()),
            None => architectures.join(","),
        };
        Err(Unsupported::new(family, supported.iter()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_outside_the_list_is_refused_naming_both() {
        let families = Families::new(["llama", "qwen3"]);
        assert_eq!(families.check(Some("qwen3"), &[]), Ok(()));
        let err = families.check(Some("gemma3n"), &[]);
        assert_eq!(
            err.as_ref().map_err(ToString::to_string),
            Err(
                "family `gemma3n` is not supported by this rmx; supported: llama, qwen3"
                    .to_string()
            )
        );
        assert_eq!(
            err.map_err(|e| e.family().to_string()),
            Err("gemma3n".into())
        );
    }

    #[test]
    fn nothing_is_judged_without_a_list_or_a_model_type() {
        assert_eq!(Families::unknown().check(Some("gemma3n"), &[]), Ok(()));
        let families = Families::new(["llama"]);
        assert_eq!(families.check(None, &[]), Ok(()));
        assert_eq!(families.check(Some(""), &[]), Ok(()));
    }

    #[test]
    fn an_unknown_model_type_loads_by_a_known_architecture_as_in_the_engine() {
        let families = Families::new(["llama"]).with_architectures(["LlamaForCausalLM"]);
        let llama = ["LlamaForCausalLM".to_string()];
        assert_eq!(families.check(Some("llama_custom"), &llama), Ok(()));
        assert_eq!(families.check(None, &llama), Ok(()));
        let mamba = ["MambaForCausalLM".to_string()];
        let err = families.check(None, &mamba).unwrap_err();
        assert_eq!(err.family(), "MambaForCausalLM");
        assert_eq!(
            families.check(Some("mamba"), &mamba).unwrap_err().family(),
            "mamba"
        );
    }
}
