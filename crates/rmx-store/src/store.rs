//! The entry point: one `Store` per process, built from the environment.

use std::path::PathBuf;

use crate::aliases::{self, Alias, AliasRegistry, ModelHints};
use crate::cache::HubCache;
use crate::config::StoreConfig;
use crate::error::StoreError;
use crate::families::Families;
use crate::info::ModelInfo;
use crate::list::{ModelEntry, Removed};
use crate::progress::Reporter;
use crate::pull::Pulled;
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

    /// Download a model into the cache (see `pull.rs`). Dropping the future cancels it and
    /// leaves `.incomplete` files that the next pull resumes.
    pub async fn pull(&self, name: &str, reporter: &dyn Reporter) -> Result<Pulled, StoreError> {
        crate::pull::pull(self, name, None, reporter).await
    }

    /// As [`pull`](Self::pull), sending `token` instead of the store's own: the daemon pulls
    /// with the token of the shell that asked, which may have been set after it started.
    pub async fn pull_with_token(
        &self,
        name: &str,
        token: Option<String>,
        reporter: &dyn Reporter,
    ) -> Result<Pulled, StoreError> {
        crate::pull::pull(self, name, token, reporter).await
    }

    pub fn list(&self) -> Result<Vec<ModelEntry>, StoreError> {
        crate::list::list(self)
    }

    pub fn remove(&self, name: &str) -> Result<Removed, StoreError> {
        crate::list::remove(self, name)
    }

    pub fn info(&self, name: &str) -> Result<ModelInfo, StoreError> {
        crate::info::info(self, name)
    }
}
