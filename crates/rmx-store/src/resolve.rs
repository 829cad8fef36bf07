//! From what a user typed to a model: an alias, a Hugging Face repo id, or a local directory.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::aliases::{Alias, AliasRegistry, ModelHints};
use crate::error::StoreError;
use crate::repo_id::RepoId;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelRef {
    /// A repo on the Hub, stored in the Hugging Face cache.
    Hub {
        /// What the user typed.
        name: String,
        repo: RepoId,
        alias: Option<Alias>,
    },
    /// A model folder on disk (config.json + safetensors), used in place.
    Local {
        name: String,
        path: PathBuf,
        /// The user alias that names the folder, with its hints.
        alias: Option<Alias>,
    },
}

impl ModelRef {
    pub fn name(&self) -> &str {
        match self {
            ModelRef::Hub { name, .. } | ModelRef::Local { name, .. } => name,
        }
    }

    pub fn hints(&self) -> Option<ModelHints> {
        match self {
            ModelRef::Hub {
                alias: Some(alias), ..
            }
            | ModelRef::Local {
                alias: Some(alias), ..
            } => Some(alias.hints.clone()),
            _ => None,
        }
    }
}

/// Resolution order: an alias (user, then built-in); something that looks like a path
/// (`/`, `./`, `../`, `~/`) or an existing directory; an `owner/name` repo id. Aliases come
/// first so a stray folder named like an alias in the working directory cannot hijack it.
pub fn resolve(name: &str, aliases: &AliasRegistry) -> Result<ModelRef, StoreError> {
    let name = name.trim();
    if let Some(alias) = aliases.get(name) {
        if Path::new(&alias.repo).is_absolute() {
            return local(name, PathBuf::from(&alias.repo), Some(alias.clone()));
        }
        return Ok(ModelRef::Hub {
            name: name.to_string(),
            repo: RepoId::parse(&alias.repo)?,
            alias: Some(alias.clone()),
        });
    }
    let path_like = name.starts_with('/')
        || name.starts_with("./")
        || name.starts_with("../")
        || name.starts_with("~/")
        || name == "."
        || name == "..";
    if path_like || Path::new(name).is_dir() {
        return local(name, expand_home(name), None);
    }
    if let Ok(repo) = RepoId::parse(name) {
        let alias = aliases.for_repo(repo.as_str()).cloned();
        return Ok(ModelRef::Hub {
            name: name.to_string(),
            repo,
            alias,
        });
    }
    Err(StoreError::UnknownModel {
        name: name.to_string(),
        suggestions: aliases.suggest(name),
    })
}

fn local(name: &str, path: PathBuf, alias: Option<Alias>) -> Result<ModelRef, StoreError> {
    if !path.join("config.json").is_file() {
        return Err(StoreError::NotAModelDir { path });
    }
    Ok(ModelRef::Local {
        name: name.to_string(),
        path,
        alias,
    })
}

fn expand_home(name: &str) -> PathBuf {
    match (name.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(name),
    }
}
