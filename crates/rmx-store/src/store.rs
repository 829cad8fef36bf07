//! The entry point: one `Store` per process, built from the environment. Its operations are
//! in the files named after them (`pull.rs`, `list.rs`, `info.rs`), each an `impl Store`
//! above this one.

use std::path::PathBuf;

use crate::aliases::{self, Alias, AliasRegistry, ModelHints};
use crate::cache::HubCache;
use crate::config::StoreConfig;
use crate::error::StoreError;
use crate::families::Families;
use crate::resolve::{resolve, ModelRef};

#[derive(Debug, Clone)]
pub struct Store {
    config: StoreConfig,
    cache: HubCache,
    families: Families,
}

impl Store {
    /// A store that judges no family (see [`with_families`](Self::with_families)).
    pub fn new(config: StoreConfig) -> Self {
        let cache = HubCache::new(config.hub_cache.clone());
        Store {
            config,
            cache,
            families: Families::unknown(),
        }
    }

    /// The families the engine loads: `pull` then refuses others before any weight is
    /// fetched, and `info` / `list` mark stored models of others.
    pub fn with_families(mut self, families: Families) -> Self {
        self.families = families;
        self
    }

    pub fn families(&self) -> &Families {
        &self.families
    }

    /// See [`StoreConfig::from_env`] for the variables read.
    pub fn from_env() -> Result<Self, StoreError> {
        Ok(Store::new(StoreConfig::from_env()?))
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    pub fn cache(&self) -> &HubCache {
        &self.cache
    }

    /// Built-in plus user aliases, read fresh (another process may have edited the file).
    pub fn aliases(&self) -> Result<AliasRegistry, StoreError> {
        AliasRegistry::load(&self.config.rmx_home)
    }

    pub fn user_aliases_path(&self) -> PathBuf {
        aliases::user_aliases_path(&self.config.rmx_home)
    }

    /// Add or replace a user alias. `target` is a repo id or an absolute model directory.
    pub fn add_alias(
        &self,
        name: &str,
        target: &str,
        hints: ModelHints,
    ) -> Result<Alias, StoreError> {
        aliases::add_user_alias(&self.user_aliases_path(), name, target, hints)
    }

    pub fn remove_alias(&self, name: &str) -> Result<(), StoreError> {
        aliases::remove_user_alias(&self.user_aliases_path(), name)
    }

    /// Every alias in effect, sorted by name.
    pub fn list_aliases(&self) -> Result<Vec<Alias>, StoreError> {
        Ok(self.aliases()?.all().into_iter().cloned().collect())
    }

    pub fn resolve(&self, name: &str) -> Result<ModelRef, StoreError> {
        resolve(name, &self.aliases()?)
    }
}
