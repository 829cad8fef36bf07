//! A store pointed at a fake hub serving the tiny model repo (`rmx_tests::tiny_repo`: one
//! "LFS" safetensors of a few hundred KB of random bytes), in a temporary folder.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rmx_store::{PullEvent, Reporter, Store, StoreConfig};

use rmx_tests::fake_hub::FakeHub;
pub use rmx_tests::tiny_repo::{
    config_json, tiny_model_files, tiny_safetensors, tree, weights_len, COMMIT, REPO, TINY_PARAMS,
    WEIGHTS,
};

pub struct Env {
    pub hub: FakeHub,
    pub dir: tempfile::TempDir,
}

impl Env {
    pub async fn new() -> Env {
        let hub = FakeHub::start().await;
        hub.add_repo(REPO, COMMIT, tiny_model_files());
        let dir = tempfile::tempdir().expect("tempdir");
        Env { hub, dir }
    }

    pub fn cache(&self) -> PathBuf {
        self.dir.path().join("hf").join("hub")
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("rmx")
    }

    pub fn config(&self) -> StoreConfig {
        let mut config = StoreConfig::new(self.cache(), self.home(), self.hub.url.clone());
        // Fast tests: no backoff-heavy retry loops unless a test asks for them.
        config.retries = 0;
        config
    }

    pub fn store(&self) -> Store {
        Store::new(self.config())
    }

    pub fn repo_dir(&self) -> PathBuf {
        self.cache().join("models--test-org--tiny-llama-4bit")
    }
}

/// Collects every event, for assertions.
#[derive(Default, Clone)]
pub struct Recorder(pub Arc<Mutex<Vec<PullEvent>>>);

impl Reporter for Recorder {
    fn report(&self, event: &PullEvent) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event.clone());
    }
}

impl Recorder {
    pub fn events(&self) -> Vec<PullEvent> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

pub fn sha256_hex(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).expect("read")))
}
