//! Models that live in folders rather than in the Hugging Face cache: those `rmx import`
//! converts into `$RMX_HOME/models/<name>` (rmx owns them, so `remove` deletes them with their
//! alias), and other folders user aliases name (the user's own: listed, never deleted). The CLI
//! and the daemon both list and remove through here, so `rmx ls` and `/api/tags`, `rmx rm` and
//! `/api/delete` agree.

use std::path::{Path, PathBuf};

use crate::aliases::AliasSource;
use crate::error::{IoContext, StoreError};
use crate::info::ModelInfo;
use crate::list::Removed;
use crate::store::Store;

impl Store {
    /// Where `rmx import` writes its models.
    pub fn imports_dir(&self) -> PathBuf {
        self.config().rmx_home.join("models")
    }

    /// Whether `path` is a model folder `rmx import` made (directly under
    /// [`imports_dir`](Self::imports_dir)), which rmx may delete.
    pub fn is_imported(&self, path: &Path) -> bool {
        let imports = canonical(&self.imports_dir());
        path.parent()
            .is_some_and(|parent| canonical(parent) == imports)
    }

    /// The folders user aliases name that hold a model, imported ones among them, described as
    /// [`info`](Self::info) describes them (under the alias's name), sorted by name. An alias
    /// whose folder has gone is not a model on this machine; `rmx alias ls` still shows it.
    pub fn local_models(&self) -> Result<Vec<ModelInfo>, StoreError> {
        let mut out = Vec::new();
        for alias in self.list_aliases()? {
            if alias.source != AliasSource::User || !Path::new(&alias.repo).is_absolute() {
                continue;
            }
            if let Ok(info) = self.info(&alias.name) {
                out.push(info);
            }
        }
        Ok(out)
    }
}

/// Deletes an imported model's folder, then the aliases that name it: a folder that cannot be
/// deleted keeps its alias, so the model stays listed and removable rather than orphaned.
pub(crate) fn remove_imported(store: &Store, path: PathBuf) -> Result<Removed, StoreError> {
    let target = canonical(&path);
    let names: Vec<String> = store
        .list_aliases()?
        .into_iter()
        .filter(|a| a.source == AliasSource::User && canonical(Path::new(&a.repo)) == target)
        .map(|a| a.name)
        .collect();
    let freed = folder_size(&path);
    std::fs::remove_dir_all(&path).at("remove", &path)?;
    for name in names {
        store.remove_alias(&name)?;
    }
    Ok(Removed {
        repo: None,
        path,
        freed,
    })
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Bytes of the regular files in a model folder (an import writes no subfolders).
pub fn folder_size(path: &Path) -> u64 {
    std::fs::read_dir(path)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
