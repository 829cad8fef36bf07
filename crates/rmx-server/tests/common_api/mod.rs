//! The API suites' service: a [`Service`] over a throwaway store and its router, for
//! `oneshot` requests or (`serve`) a real port. The tiny model and the HTTP and SSE helpers
//! are the shared test support's (`tests/support`: `rmx_tests::api`, `rmx_tests::http`).
// Each suite uses its own part of this module and of the re-exports.
#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use rmx_api::KeepAlive;
use rmx_server::service::ModelRoots;
use rmx_server::{Service, ServiceConfig};
use rmx_store::{Store, StoreConfig};

pub use rmx_tests::api::*;
pub use rmx_tests::http::*;

/// A service over an empty store in `home` (models are asked for by folder).
pub fn service(home: &Path) -> Arc<Service> {
    service_with_roots(home, Vec::new())
}

/// [`service`] whose TCP requests may name folders under `roots` (RMX_MODEL_ROOTS).
pub fn service_with_roots(home: &Path, roots: Vec<PathBuf>) -> Arc<Service> {
    Service::new(config(home, roots))
}

/// The setup of [`service_with_roots`], for a suite that changes a daemon default first.
pub fn config(home: &Path, roots: Vec<PathBuf>) -> ServiceConfig {
    let store = Store::new(StoreConfig::new(
        home.join("hub"),
        home.join("rmx"),
        "http://127.0.0.1:9",
    ));
    ServiceConfig {
        store,
        default_keep_alive: KeepAlive::from_env(),
        max_loaded_models: 2,
        memory_budget: 8 << 30,
        model_roots: ModelRoots::new(roots),
        kv_quant: None,
        speculative: None,
        image_urls: None,
    }
}

/// A model folder at `dir` whose files link to the tiny model's.
pub fn linked_model(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir");
    for entry in std::fs::read_dir(tiny_model()).expect("read the tiny model") {
        let entry = entry.expect("entry");
        std::os::unix::fs::symlink(entry.path(), dir.join(entry.file_name())).expect("link");
    }
    dir.to_path_buf()
}

pub fn app(service: Arc<Service>) -> Router {
    rmx_server::router(service)
}

/// `service`'s router on a real port ([`serve`]), shut down when dropped: the models it loaded
/// are unloaded and their engine threads joined before the test returns. A server left running
/// lets the process exit while an engine thread still works in MLX (persisting a hot prefix
/// after the last answer), and its static destructors then crash the test binary (SIGSEGV
/// after `huge_prompts` passed, CI).
pub struct Served {
    pub base: String,
    service: Arc<Service>,
}

pub fn serve_service(service: Arc<Service>) -> Served {
    let base = serve(app(service.clone()));
    Served { base, service }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.service.shutdown();
    }
}
