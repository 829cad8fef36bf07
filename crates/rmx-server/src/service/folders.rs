//! Which model folders a request may name by path.
//!
//! On the Unix socket, any: it is the user's own CLI (`rmx run ./my-model`). Over TCP, a name
//! like `~/.docker` would otherwise have the daemon read, list and try to load any folder of
//! the user's disk that holds a config.json, for whichever program or page reaches the port,
//! and its answers (a listing, a load error where a missing folder is a 404) would say which
//! folders exist. So over TCP a folder is served only when the user put it there or named it:
//! the model store (the Hugging Face cache, imported models), a folder a user alias names, or a
//! folder under the model roots the daemon was started with (`RMX_MODEL_ROOTS`). Any other
//! folder is answered exactly as a name that resolves to nothing.

use std::path::{Path, PathBuf};

use rmx_settings::EnvVars;
use rmx_store::{AliasSource, Store};

/// The folders under which TCP requests may name model folders by path.
#[derive(Debug, Clone, Default)]
pub struct ModelRoots(Vec<PathBuf>);

impl ModelRoots {
    pub fn new(roots: impl IntoIterator<Item = PathBuf>) -> ModelRoots {
        ModelRoots(roots.into_iter().map(|r| canonical(&r)).collect())
    }

    /// `RMX_MODEL_ROOTS`: folders separated by `:`; relative ones are refused, as the
    /// daemon's working folder is nobody's choice.
    pub fn from_env() -> Result<ModelRoots, String> {
        let Some(value) = rmx_settings::var(EnvVars::RMX_MODEL_ROOTS) else {
            return Ok(ModelRoots::default());
        };
        let mut roots = Vec::new();
        for root in std::env::split_paths(&value).filter(|p| !p.as_os_str().is_empty()) {
            if !root.is_absolute() {
                return Err(format!(
                    "{}: `{}` is not an absolute path",
                    EnvVars::RMX_MODEL_ROOTS,
                    root.display()
                ));
            }
            roots.push(root);
        }
        Ok(ModelRoots::new(roots))
    }

    /// Whether a TCP request may use the model folder `path` (canonical), which it named by
    /// path rather than through an alias.
    pub(crate) fn allow(&self, store: &Store, path: &Path) -> bool {
        let under = |root: &Path| path.starts_with(canonical(root));
        under(&store.imports_dir())
            || under(store.cache().root())
            || self.0.iter().any(|r| path.starts_with(r))
            || store.list_aliases().is_ok_and(|aliases| {
                aliases.iter().any(|a| {
                    a.source == AliasSource::User
                        && Path::new(&a.repo).is_absolute()
                        && canonical(Path::new(&a.repo)) == path
                })
            })
    }
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}
