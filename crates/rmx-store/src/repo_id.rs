//! Hugging Face repo ids. They become folder names (`models--owner--name`) and URL paths, so
//! only the characters the Hub itself allows get through.

use std::fmt;

use serde::Serialize;

use crate::error::StoreError;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct RepoId(String);

impl RepoId {
    pub fn parse(id: &str) -> Result<Self, StoreError> {
        let invalid = || StoreError::InvalidRepoId { id: id.to_string() };
        let (owner, name) = id.split_once('/').ok_or_else(invalid)?;
        let part_ok = |p: &str| {
            !p.is_empty()
                && p.len() <= 96
                && !p.starts_with(['.', '-'])
                && !p.contains("--")
                && !p.contains("..")
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        if part_ok(owner) && part_ok(name) {
            Ok(RepoId(id.to_string()))
        } else {
            Err(invalid())
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `models--owner--name`, huggingface_hub's folder for this repo (named by hf-hub).
    pub fn folder_name(&self) -> String {
        hf_hub::Repo::model(self.0.clone()).folder_name()
    }

    /// The inverse of [`folder_name`](Self::folder_name) (hf-hub has none); `None` for
    /// datasets, spaces and anything else in the cache.
    pub fn from_folder_name(folder: &str) -> Option<Self> {
        let rest = folder.strip_prefix("models--")?;
        let (owner, name) = rest.split_once("--")?;
        RepoId::parse(&format!("{owner}/{name}")).ok()
    }
}

impl fmt::Display for RepoId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_hub_ids_and_rejects_paths() {
        for ok in ["mlx-community/Qwen3-0.6B-4bit", "a/b", "org_1/x.y-z"] {
            assert!(RepoId::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "noslash", "a/b/c", "../x", "a/..", "a/", "/b", "a b/c", "a--b/c", "a/.git",
        ] {
            assert!(RepoId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn folder_name_round_trips() -> Result<(), StoreError> {
        let id = RepoId::parse("mlx-community/Llama-3.2-3B-Instruct-4bit")?;
        assert_eq!(
            id.folder_name(),
            "models--mlx-community--Llama-3.2-3B-Instruct-4bit"
        );
        assert_eq!(RepoId::from_folder_name(&id.folder_name()), Some(id));
        assert_eq!(RepoId::from_folder_name("datasets--a--b"), None);
        Ok(())
    }
}
