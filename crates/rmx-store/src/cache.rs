//! The Hugging Face hub cache layout, exactly as `huggingface_hub` writes it:
//!
//! ```text
//! <hub_cache>/models--owner--name/
//!     blobs/<etag>                 file contents, named by sha256 (LFS) or git sha1
//!     blobs/<etag>.incomplete      a download in progress (resumed by byte offset)
//!     snapshots/<commit>/<file>    relative symlink -> ../../blobs/<etag>
//!     refs/main                    the commit `main` pointed at when last fetched
//! <hub_cache>/.locks/models--owner--name/<etag>.lock
//! ```
//!
//! Sharing this layout is what lets rmx reuse models mlx-lm downloaded and the other way round.
//!
//! The cache root, repo folder names and writing refs go through the `hf-hub` crate. The rest
//! stays here because hf-hub 0.4 keeps it private to its own downloader (blob and snapshot
//! paths, symlinking) or does not have it (`.locks/`, `.incomplete`, reading a ref on its own).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use hf_hub::{Cache, Repo, RepoType};

use crate::error::{IoContext, StoreError};
use crate::repo_id::RepoId;

#[derive(Debug, Clone)]
pub struct HubCache {
    cache: Cache,
}

impl HubCache {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        HubCache {
            cache: Cache::new(root.into()),
        }
    }

    pub fn root(&self) -> &Path {
        self.cache.path()
    }

    pub fn repo_dir(&self, repo: &RepoId) -> PathBuf {
        self.root().join(repo.folder_name())
    }

    pub fn blob_path(&self, repo: &RepoId, etag: &str) -> PathBuf {
        self.repo_dir(repo).join("blobs").join(etag)
    }

    pub fn incomplete_path(&self, repo: &RepoId, etag: &str) -> PathBuf {
        self.repo_dir(repo)
            .join("blobs")
            .join(format!("{etag}.incomplete"))
    }

    pub fn lock_path(&self, repo: &RepoId, etag: &str) -> PathBuf {
        self.root()
            .join(".locks")
            .join(repo.folder_name())
            .join(format!("{etag}.lock"))
    }

    pub fn snapshot_dir(&self, repo: &RepoId, commit: &str) -> PathBuf {
        self.repo_dir(repo).join("snapshots").join(commit)
    }

    /// The commit `refs/main` names, if any. Ours: hf-hub reads a ref only inside
    /// `CacheRepo::get`, unchecked (its text becomes a path) and without the fallback
    /// [`current_snapshot`](Self::current_snapshot) needs.
    pub fn read_ref(&self, repo: &RepoId, name: &str) -> Result<Option<String>, StoreError> {
        let path = self.repo_dir(repo).join("refs").join(name);
        match fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text.trim().to_string()).filter(|c| is_safe_name(c))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).at("read", path),
        }
    }

    /// Record that `name` (a branch) points at `commit`: written last, after every file of the
    /// snapshot is in place. hf-hub rewrites the file in place, as huggingface_hub does; a
    /// reader catching it half-written finds no such snapshot and takes the newest one.
    pub fn write_ref(&self, repo: &RepoId, name: &str, commit: &str) -> Result<(), StoreError> {
        let revision = Repo::with_revision(repo.to_string(), RepoType::Model, name.to_string());
        self.cache
            .repo(revision)
            .create_ref(commit)
            .at("write", self.repo_dir(repo).join("refs").join(name))
    }

    /// The snapshot rmx should use: the one `refs/main` names, else the most recently
    /// modified one (a cache filled by commit hash only has no ref).
    pub fn current_snapshot(&self, repo: &RepoId) -> Result<Option<(String, PathBuf)>, StoreError> {
        if let Some(commit) = self.read_ref(repo, "main")? {
            let dir = self.snapshot_dir(repo, &commit);
            if dir.is_dir() {
                return Ok(Some((commit, dir)));
            }
        }
        let snapshots = self.repo_dir(repo).join("snapshots");
        let entries = match fs::read_dir(&snapshots) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).at("list", snapshots),
        };
        let mut best: Option<(SystemTime, String, PathBuf)> = None;
        for entry in entries {
            let entry = entry.at("list", &snapshots)?;
            let path = entry.path();
            let Some(commit) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_dir() {
                continue;
            }
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if best.as_ref().is_none_or(|(t, _, _)| modified > *t) {
                best = Some((modified, commit, path));
            }
        }
        Ok(best.map(|(_, commit, path)| (commit, path)))
    }

    /// Point `snapshots/<commit>/<file>` at `blobs/<etag>` with a relative link, as
    /// huggingface_hub does (so the cache can be moved), replacing whatever was there.
    pub fn link_snapshot_file(
        &self,
        repo: &RepoId,
        commit: &str,
        file: &str,
        etag: &str,
    ) -> Result<(), StoreError> {
        let link = self.snapshot_dir(repo, commit).join(file);
        if let Some(dir) = link.parent() {
            fs::create_dir_all(dir).at("create", dir)?;
        }
        match fs::remove_file(&link) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).at("replace", &link),
        }
        // snapshots/<commit>/ is two levels below the repo folder, plus one per subfolder.
        let depth = 2 + file.matches('/').count();
        let mut target = PathBuf::new();
        for _ in 0..depth {
            target.push("..");
        }
        target.push("blobs");
        target.push(etag);
        link_file(&target, &self.blob_path(repo, etag), &link)
    }
}

#[cfg(unix)]
fn link_file(relative: &Path, _absolute: &Path, link: &Path) -> Result<(), StoreError> {
    std::os::unix::fs::symlink(relative, link).at("create symlink", link)
}

// Windows without developer mode cannot symlink; huggingface_hub copies the blob then.
#[cfg(not(unix))]
fn link_file(_relative: &Path, absolute: &Path, link: &Path) -> Result<(), StoreError> {
    fs::copy(absolute, link).map(|_| ()).at("copy", link)
}

/// A name from the Hub (etag, commit) that is about to become a file name: plain ASCII
/// letters and digits only, so nothing from outside can climb out of the cache.
pub fn is_safe_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128 && name.chars().all(|c| c.is_ascii_alphanumeric())
}

/// A repo file path from the Hub: relative, `/`-separated, no `..`, no hidden tricks.
pub fn is_safe_repo_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && !path.contains('\0')
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_names_are_refused() {
        assert!(is_safe_name("a1b2"));
        assert!(!is_safe_name("../x"));
        assert!(!is_safe_name(""));
        assert!(is_safe_repo_path("config.json"));
        assert!(is_safe_repo_path("sub/model.safetensors"));
        for bad in ["/etc/passwd", "../x", "a/../b", "a//b", "a\\b", "./a"] {
            assert!(!is_safe_repo_path(bad), "{bad}");
        }
    }
}
