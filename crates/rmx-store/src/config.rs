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
    /// A token given outright (`HF_TOKEN`); it wins over `token_file`.
    pub token: Option<String>,
    /// The token file (`HF_TOKEN_PATH`, else `HF_HOME/token`, where `hf auth login` writes),
    /// read at every [`token`](Self::token) call: a daemon that started before the user logged
    /// in still pulls gated models afterwards.
    pub token_file: Option<PathBuf>,
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
            .field("token_file", &self.token_file)
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
            token_file: None,
            concurrency: 4,
            retries: 3,
            free_space: Arc::new(available_space),
        }
    }

    /// `HF_HUB_CACHE` (or the older `HUGGINGFACE_HUB_CACHE`), else `HF_HOME/hub`, else
    /// `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`; `HF_ENDPOINT`;
    /// `HF_TOKEN`, else the token file `hf auth login` writes; `RMX_HOME`, else `~/.rmx`.
    pub fn from_env() -> Result<Self, StoreError> {
        Self::from_vars(|key| match key {
            rmx_settings::EnvVars::RMX_HOME => rmx_settings::var(key),
            _ => std::env::var(key).ok().filter(|v| !v.is_empty()),
        })
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
        let rmx_home = match (var(rmx_settings::EnvVars::RMX_HOME), &home) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some(home)) => home.join(".rmx"),
            (None, None) => return Err(StoreError::NoHome),
        };
        let endpoint = var("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        // hf-hub looks beside its `hub` folder: `HF_HOME/token` for `HF_HOME/hub`, which is
        // where `hf auth login` writes it even when `HF_HUB_CACHE` moves the cache.
        let token_file = var("HF_TOKEN_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("token"));
        let token = var("HF_TOKEN");
        let mut config = StoreConfig::new(hub_cache, rmx_home, endpoint);
        config.token = token;
        config.token_file = Some(token_file);
        Ok(config)
    }

    /// The token to send: `token`, else the token file's content as it is now. A missing,
    /// unreadable or empty file means "anonymous", as in huggingface_hub.
    pub fn token(&self) -> Option<String> {
        self.token.clone().or_else(|| {
            std::fs::read_to_string(self.token_file.as_ref()?)
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
        })
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
        assert_eq!(c.token().as_deref(), Some("hf_x"));
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
        assert_eq!(c.token().as_deref(), Some("hf_file"));
        let other = dir.path().join("other-token");
        std::fs::write(&other, "hf_other")?;
        let other = other.to_string_lossy().into_owned();
        let c = StoreConfig::from_vars(vars(&[
            ("HOME", "/h"),
            ("HF_HOME", &hf_home),
            ("HF_TOKEN_PATH", &other),
        ]))?;
        assert_eq!(c.token().as_deref(), Some("hf_other"));
        let c = StoreConfig::from_vars(vars(&[
            ("HOME", "/h"),
            ("HF_HOME", &hf_home),
            ("HF_TOKEN", "hf_env"),
        ]))?;
        assert_eq!(c.token().as_deref(), Some("hf_env"));
        Ok(())
    }

    #[test]
    fn a_token_file_written_after_start_is_read_at_the_next_call(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let hf_home = dir.path().to_string_lossy().into_owned();
        let c = StoreConfig::from_vars(vars(&[("HOME", "/h"), ("HF_HOME", &hf_home)]))?;
        assert_eq!(c.token(), None);
        std::fs::write(dir.path().join("token"), "hf_later\n")?;
        assert_eq!(c.token().as_deref(), Some("hf_later"));
        std::fs::write(dir.path().join("token"), "  \n")?;
        assert_eq!(c.token(), None, "an empty file is anonymous");
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
