//! How the daemon is set up: the store, the default keep-alive, the limits on loaded models and
//! the folders TCP clients may name, read once from the settings (rmx-settings) when the daemon
//! starts.

use rmx_api::KeepAlive;
use rmx_settings::EnvVars;
use rmx_store::Store;

use super::{ModelRoots, ServiceError};

/// How the daemon is set up; [`ServiceConfig::from_env`] reads the `RMX_*` variables.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub store: Store,
    pub default_keep_alive: KeepAlive,
    /// `RMX_MAX_LOADED_MODELS` (default 3).
    pub max_loaded_models: usize,
    /// Bytes of weights loaded models may take (`RMX_MAX_MEMORY`, default 75% of RAM).
    pub memory_budget: u64,
    /// Where requests over TCP may name model folders by path (`RMX_MODEL_ROOTS`).
    pub model_roots: ModelRoots,
    /// How answers store their KV cache when the request does not say (`rmx serve --kv-bits`).
    pub kv_quant: Option<rmx_engine::KvQuant>,
    /// How answers speculate when the request does not say (`rmx serve --speculative`).
    pub speculative: Option<crate::speculation::Spec>,
    /// Fetches images that requests name by http(s) URL (`RMX_IMAGE_URLS=1`); `None` refuses
    /// them.
    pub image_urls: Option<super::ImageFetcher>,
}

impl ServiceConfig {
    pub fn from_env() -> Result<ServiceConfig, ServiceError> {
        let store = Store::from_env().map_err(|e| ServiceError::Internal(e.to_string()))?;
        let max_loaded_models = rmx_settings::number(EnvVars::RMX_MAX_LOADED_MODELS)
            .map_err(ServiceError::BadRequest)?
            .unwrap_or(3);
        let memory_budget = crate::lifecycle::budget::budget_from(
            rmx_settings::var(EnvVars::RMX_MAX_MEMORY).as_deref(),
            crate::lifecycle::budget::system_ram(),
        )
        .map_err(ServiceError::BadRequest)?;
        Ok(ServiceConfig {
            store,
            default_keep_alive: KeepAlive::from_env(),
            max_loaded_models,
            memory_budget,
            model_roots: ModelRoots::from_env().map_err(ServiceError::BadRequest)?,
            kv_quant: None,
            speculative: None,
            image_urls: rmx_settings::is_one(EnvVars::RMX_IMAGE_URLS)
                .then(super::ImageFetcher::new),
        })
    }
}
