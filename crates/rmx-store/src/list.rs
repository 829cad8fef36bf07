//! `rmx ls` and `rmx rm`: what the Hugging Face cache holds, whoever downloaded it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::aliases::AliasRegistry;
use crate::cache::HubCache;
use crate::error::{IoContext, StoreError, Unsupported};
use crate::families::Families;
use crate::model_config::{ModelConfig, Quantization};
use crate::repo_id::RepoId;
use crate::resolve::ModelRef;
use crate::store::Store;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelStatus {
    /// config.json and every weight file are present and no download is pending.
    Complete,
    /// Something is missing or still downloading; `rmx pull` finishes it.
    Partial,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelEntry {
    /// The alias when one names this repo, else the repo id.
    pub name: String,
    pub repo: RepoId,
    pub commit: Option<String>,
    /// Bytes on disk, partial downloads included (what `rm` frees).
    pub size: u64,
    pub quantization: Option<Quantization>,
    /// Last change, in seconds since the Unix epoch.
    pub modified: u64,
    pub status: ModelStatus,
    /// Set when the engine of this rmx cannot load the family (see `ModelInfo::cannot_load`).
    pub cannot_load: Option<Unsupported>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Removed {
    /// The repo of a model from the Hub; None for an imported model.
    pub repo: Option<RepoId>,
    /// What was deleted: the repo's folder in the cache (every snapshot), or the imported
    /// model's folder.
    pub path: PathBuf,
    pub freed: u64,
}

impl Store {
    pub fn list(&self) -> Result<Vec<ModelEntry>, StoreError> {
        list(self)
    }

    pub fn remove(&self, name: &str) -> Result<Removed, StoreError> {
        remove(self, name)
    }
}

fn list(store: &Store) -> Result<Vec<ModelEntry>, StoreError> {
    let cache = store.cache();
    let aliases = store.aliases()?;
    let entries = match fs::read_dir(cache.root()) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).at("list", cache.root()),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.at("list", cache.root())?;
        let Some(repo) = entry
            .file_name()
            .to_str()
            .and_then(RepoId::from_folder_name)
        else {
            continue;
        };
        if entry.path().is_dir() {
            out.push(describe(cache, &aliases, store.families(), repo)?);
        }
    }
    out.sort_by(|a, b| {
        a.repo
            .as_str()
            .to_lowercase()
            .cmp(&b.repo.as_str().to_lowercase())
    });
    Ok(out)
}

fn describe(
    cache: &HubCache,
    aliases: &AliasRegistry,
    families: &Families,
    repo: RepoId,
) -> Result<ModelEntry, StoreError> {
    let repo_dir = cache.repo_dir(&repo);
    let snapshot = cache.current_snapshot(&repo)?;
    let (size, modified) = disk_usage(&repo_dir)?;
    let snapshot_dir = snapshot.as_ref().map(|(_, dir)| dir.as_path());
    let config = snapshot_dir.and_then(|dir| ModelConfig::read(&dir.join("config.json")).ok());
    let quantization = config.as_ref().and_then(|c| c.quantization());
    let cannot_load = config.as_ref().and_then(|c| families.check_config(c).err());
    Ok(ModelEntry {
        cannot_load,
        name: aliases
            .for_repo(repo.as_str())
            .map(|a| a.name.clone())
            .unwrap_or_else(|| repo.to_string()),
        status: status(&repo_dir, snapshot_dir),
        commit: snapshot.map(|(commit, _)| commit),
        repo,
        size,
        quantization,
        modified: modified
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    })
}

/// Judged from the files, not from who wrote them: huggingface_hub links each file into the
/// snapshot as it arrives, so a snapshot folder alone proves nothing.
pub(crate) fn status(repo_dir: &Path, snapshot: Option<&Path>) -> ModelStatus {
    let pending = fs::read_dir(repo_dir.join("blobs")).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".incomplete"))
    });
    match snapshot {
        Some(dir) if !pending && weights_complete(dir) => ModelStatus::Complete,
        _ => ModelStatus::Partial,
    }
}

pub(crate) fn weights_complete(dir: &Path) -> bool {
    if !dir.join("config.json").is_file() {
        return false;
    }
    let index = dir.join("model.safetensors.index.json");
    if index.exists() {
        let Ok(text) = fs::read(&index) else {
            return false;
        };
        let Ok(json) = serde_json::from_slice::<serde_json::Value>(&text) else {
            return false;
        };
        let Some(map) = json.get("weight_map").and_then(|m| m.as_object()) else {
            return false;
        };
        return map
            .values()
            .filter_map(|v| v.as_str())
            .all(|file| crate::cache::is_safe_repo_path(file) && dir.join(file).is_file());
    }
    weight_files(dir).is_ok_and(|files| !files.is_empty())
}

/// The `*.safetensors` files of a model folder, sorted.
pub(crate) fn weight_files(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).at("list", dir)? {
        let path = entry.at("list", dir)?.path();
        if path.extension().is_some_and(|e| e == "safetensors") && path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Bytes of every regular file of a repo folder but `refs/` (symlinks not followed, so blobs
/// count once; the same number as `hf cache scan` shows once downloads are done) and the
/// newest modification time.
fn disk_usage(repo_dir: &Path) -> Result<(u64, SystemTime), StoreError> {
    let mut size = 0;
    let mut newest = SystemTime::UNIX_EPOCH;
    let refs = repo_dir.join("refs");
    let mut stack = vec![repo_dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).at("list", &dir),
        };
        for entry in entries {
            let entry = entry.at("list", &dir)?;
            let meta = fs::symlink_metadata(entry.path()).at("read", entry.path())?;
            if let Ok(modified) = meta.modified() {
                newest = newest.max(modified);
            }
            if meta.is_dir() && entry.path() != refs {
                stack.push(entry.path());
            } else if meta.is_file() {
                size += meta.len();
            }
        }
    }
    Ok((size, newest))
}

/// A model from the Hub leaves the cache; an imported one leaves `$RMX_HOME/models` with its
/// alias (`crate::local`). Other folders are the user's own and are never deleted.
fn remove(store: &Store, name: &str) -> Result<Removed, StoreError> {
    let repo = match store.resolve(name)? {
        ModelRef::Hub { repo, .. } => repo,
        ModelRef::Local { path, .. } if store.is_imported(&path) => {
            return crate::local::remove_imported(store, path)
        }
        ModelRef::Local { path, .. } => return Err(StoreError::LocalModel { path }),
    };
    let cache = store.cache();
    let dir = cache.repo_dir(&repo);
    if !dir.is_dir() {
        return Err(StoreError::NotInStore {
            name: name.to_string(),
            repo: repo.to_string(),
            cache: cache.root().to_path_buf(),
        });
    }
    let (freed, _) = disk_usage(&dir)?;
    fs::remove_dir_all(&dir).at("remove", &dir)?;
    // The lock files are empty; removing them keeps the cache tidy and is what
    // `hf cache delete` does too.
    let locks = cache.root().join(".locks").join(repo.folder_name());
    match fs::remove_dir_all(&locks) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).at("remove", locks),
    }
    Ok(Removed {
        repo: Some(repo),
        path: dir,
        freed,
    })
}
