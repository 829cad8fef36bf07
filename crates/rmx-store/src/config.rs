//! Where the store lives and which Hub it talks to, read from the same environment variables
//! `huggingface_hub` reads, so rmx, mlx-lm and `hf download` share one cache.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::disk::{available_space, FreeSpaceFn};
use crate::error::StoreError;

pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

#[derive(Clone)]
pub struct StoreConfig {
    /// The Hugging Face hub cache: the folder holding `models--owner--name`.
    pub hub_cache: PathBuf,
    /// rmx's own folder (user aliases).
    pub rmx_home: PathBuf,
    /// Base URL of the Hub, without a trailing slash.
    pub endpoint: String,
    pub token: Option<String>,
    /// Files transferred at once.
    pub concurrency: usize,
    /// How often one file is retried (resuming) after a lost connection or a bad checksum.
    pub retries: u32,
    pub free_space: FreeSpaceFn,
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("hub_cache", &self.hub_cache)
            .field("rmx_home", &self.rmx_home)
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("concurrency", &self.concurrency)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

impl StoreConfig {
    /// Paths and endpoint given explicitly; token unset, real free-space probe.
    pub fn new(hub_cache: PathBuf, rmx_home: PathBuf, endpoint: impl Into<String>) -> Self {
        StoreConfig {
            hub_cache,
            rmx_home,
            endpoint: endpoint.into().trim_end_matches('/').to_string(),
            token: None,
            concurrency: 4,
            retries: 3,
            free_space: Arc::new(available_space),
        }
    }

    /// `HF_HUB_CACHE` (or the older `HUGGINGFACE_HUB_CACHE`), else `HF_HOME/hub`, else
    /// `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`; `HF_ENDPOINT`;
    /// `HF_TOKEN`, else the token file `hf auth login` writes; `RMX_HOME`, else `~/.rmx`.
    pub fn from_env() -> Result<Self, StoreError> {
        Self::from_vars(|key| std::env::var(key).ok().filter(|v| !v.is_empty()))
    }

    /// [`from_env`](Self::from_env) over any variable source (tests pass a map).
    ///
    /// The paths are worked out here, not by `hf_hub::Cache::from_env`: hf-hub 0.4 ignores
    /// `HF_HUB_CACHE`, `XDG_CACHE_HOME` and `HF_TOKEN_PATH`, and panics without a home folder.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, StoreError> {
        let home = var("HOME").map(PathBuf::from);
        let hf_home = match (var("HF_HOME"), var("XDG_CACHE_HOME"), &home) {
            (Some(dir), _, _) => PathBuf::from(dir),
            (None, Some(xdg), _) => Path::new(&xdg).join("huggingface"),
            (None, None, Some(home)) => home.join(".cache").join("huggingface"),
            (None, None, None) => return Err(StoreError::NoHome),
        };
        let hub_cache = var("HF_HUB_CACHE")
            .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("hub"));
        let rmx_home = match (var("RMX_HOME"), &home) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some(home)) => home.join(".rmx"),
            (None, None) => return Err(StoreError::NoHome),
        };
        let endpoint = var("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        // A missing, unreadable or empty token file means "anonymous", as in huggingface_hub.
        let token = var("HF_TOKEN").or_else(|| match var("HF_TOKEN_PATH") {
            Some(path) => std::fs::read_to_string(path)
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty()),
            // hf-hub looks beside its `hub` folder: `HF_HOME/token` for `HF_HOME/hub`, which is
            // where `hf auth login` writes it even when `HF_HUB_CACHE` moves the cache.
            None => hf_hub::Cache::new(hf_home.join("hub")).token(),
        });
        let mut config = StoreConfig::new(hub_cache, rmx_home, endpoint);
        config.token = token;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn cache_follows_huggingface_hub_precedence() -> Result<(), StoreError> {
        let c = StoreConfig::from_vars(vars(&[("HOME", "/h")]))?;
        assert_eq!(c.hub_cache, PathBuf::from("/h/.cache/huggingface/hub"));
        assert_eq!(c.rmx_home, PathBuf::from("/h/.rmx"));
        assert_eq!(c.endpoint, DEFAULT_ENDPOINT);
        let c = StoreConfig::from_vars(vars(&[("HOME", "/h"), ("HF_HOME", "/hf")]))?;
        assert_eq!(c.hub_cache, PathBuf::from("/hf/hub"));
        let c = StoreConfig::from_vars(vars(&[
            ("HOME", "/h"),
            ("HF_HOME", "/hf"),
            ("HF_HUB_CACHE", "/cache"),
            ("HF_ENDPOINT", "http://127.0.0.1:9/"),
            ("HF_TOKEN", "hf_x"),
            ("RMX_HOME", "/r"),
        ]))?;
        assert_eq!(c.hub_cache, PathBuf::from("/cache"));
        assert_eq!(c.endpoint, "http://127.0.0.1:9");
        assert_eq!(c.token.as_deref(), Some("hf_x"));
        assert_eq!(c.rmx_home, PathBuf::from("/r"));
        Ok(())
    }

    #[test]
    fn token_file_is_read_from_hf_home_or_hf_token_path() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let hf_home = dir.path().join("hf");
        std::fs::create_dir_all(&hf_home)?;
        std::fs::write(hf_home.join("token"), "hf_file\n")?;
        let hf_home = hf_home.to_string_lossy().into_owned();
        let c = StoreConfig::from_vars(vars(&[
            ("HOME", "/h"),
            ("HF_HOME", &hf_home),
            ("HF_HUB_CACHE", "/elsewhere/hub"),
        ]))?;
        assert_eq!(c.token.as_deref(), Some("hf_file"));
        let other = dir.path().join("other-token");
        std::fs::write(&other, "hf_other")?;
        let other = other.to_string_lossy().into_owned();
        let c = StoreConfig::from_vars(vars(&[
            ("HOME", "/h"),
            ("HF_HOME", &hf_home),
            ("HF_TOKEN_PATH", &other),
        ]))?;
        assert_eq!(c.token.as_deref(), Some("hf_other"));
        let c = StoreConfig::from_vars(vars(&[
            ("HOME", "/h"),
            ("HF_HOME", &hf_home),
            ("HF_TOKEN", "hf_env"),
        ]))?;
        assert_eq!(c.token.as_deref(), Some("hf_env"));
        Ok(())
    }

    #[test]
    fn no_home_is_an_error() {
        assert!(matches!(
            StoreConfig::from_vars(vars(&[])),
            Err(StoreError::NoHome)
        ));
    }
}
