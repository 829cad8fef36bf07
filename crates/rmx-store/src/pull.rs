//! `rmx pull`: list the repo, keep the files the engine needs, refuse a family the engine
//! cannot load (from config.json, before any weight is asked for), check the disk, transfer in
//! parallel, and only then publish the snapshot (symlinks + `refs/main`), so a model shows up
//! as complete only when every file is verified.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::{stream, StreamExt, TryStreamExt};
use serde::Serialize;

use crate::error::{IoContext, StoreError};
use crate::hub_api::{check_sibling, FileMeta, HubClient, Sibling};
use crate::model_config::ModelConfig;
use crate::progress::{PlannedFile, PullEvent, Reporter};
use crate::repo_id::RepoId;
use crate::resolve::ModelRef;
use crate::store::Store;
use crate::transfer::{fetch_file, TransferCtx};

/// Files the engine reads besides the weights (`*.safetensors`).
const ENGINE_FILES: &[&str] = &[
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "model.safetensors.index.json",
    // sentence-transformers: which pooling an embedding model uses, and its input limit
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
];

/// A sentence-transformers Pooling module's settings (`1_Pooling/config.json`): the one file
/// of a subfolder the engine reads.
fn is_pooling_config(name: &str) -> bool {
    name.split_once('/').is_some_and(|(dir, file)| {
        file == "config.json" && dir.ends_with("_Pooling") && !dir.contains('/')
    })
}

/// HEAD requests in flight at once while planning (they are tiny).
const META_CONCURRENCY: usize = 8;

/// The most of a config.json read to judge its family; real ones are a few KB (per-layer
/// quantization tables, the largest, stay well under 1 MB).
const CONFIG_LIMIT: u64 = 16 << 20;

const CONFIG: &str = "config.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pulled {
    pub repo: RepoId,
    pub commit: String,
    pub snapshot: PathBuf,
    /// Bytes fetched over the network by this pull.
    pub downloaded: u64,
    /// Size of the model's files.
    pub total: u64,
}

impl Store {
    /// Download a model into the cache. Dropping the future cancels it and leaves
    /// `.incomplete` files that the next pull resumes.
    pub async fn pull(&self, name: &str, reporter: &dyn Reporter) -> Result<Pulled, StoreError> {
        pull(self, name, None, reporter).await
    }

    /// As [`pull`](Self::pull), sending `token` instead of the store's own: the daemon pulls
    /// with the token of the shell that asked, which may have been set after it started.
    pub async fn pull_with_token(
        &self,
        name: &str,
        token: Option<String>,
        reporter: &dyn Reporter,
    ) -> Result<Pulled, StoreError> {
        pull(self, name, token, reporter).await
    }
}

async fn pull(
    store: &Store,
    name: &str,
    token: Option<String>,
    reporter: &dyn Reporter,
) -> Result<Pulled, StoreError> {
    let repo = match store.resolve(name)? {
        ModelRef::Hub { repo, .. } => repo,
        ModelRef::Local { path, .. } => return Err(StoreError::LocalModel { path }),
    };
    let config = store.config();
    let cache = store.cache();
    let client = HubClient::new(&config.endpoint, token.or_else(|| config.token()))?;

    // Everything up to the disk check only reads from the network: a missing repo or file
    // leaves nothing behind in the cache.
    let info = client.repo_info(&repo, "main").await?;
    for sibling in &info.siblings {
        check_sibling(client.endpoint(), &sibling.rfilename)?;
    }
    let wanted = select_files(&repo, &info.siblings)?;
    let commit = info.sha.clone();
    // config.json alone first: a family the engine cannot load is refused before any weight
    // file is asked for, even by a HEAD.
    let config_meta = client.file_meta(&repo, &commit, CONFIG).await?;
    check_family(store, &client, &repo, &commit, &config_meta).await?;
    // The futures are built up front (not by a closure inside the stream) so the pull's
    // future stays `Send` for any lifetime, which a daemon spawning it needs.
    let heads: Vec<_> = wanted
        .iter()
        .filter(|file| *file != CONFIG)
        .map(|file| client.file_meta(&repo, &commit, file))
        .collect();
    let mut metas: Vec<FileMeta> = stream::iter(heads)
        .buffer_unordered(META_CONCURRENCY)
        .try_collect()
        .await?;
    metas.push(config_meta);
    metas.sort_by(|a, b| a.file.cmp(&b.file));

    let mut planned = Vec::with_capacity(metas.len());
    let mut blobs: BTreeMap<&str, &FileMeta> = BTreeMap::new();
    for meta in &metas {
        let present = present_bytes(store, &repo, meta);
        planned.push(PlannedFile {
            file: meta.file.clone(),
            digest: meta.digest(),
            size: meta.size,
            present,
        });
        // Two files with one content share one blob: transfer it once.
        blobs.entry(meta.etag.as_str()).or_insert(meta);
    }
    let total: u64 = blobs.values().map(|m| m.size).sum();
    let present: u64 = blobs.values().map(|m| present_bytes(store, &repo, m)).sum();
    reporter.report(&PullEvent::Resolved {
        repo: repo.to_string(),
        commit: commit.clone(),
        files: planned,
        total,
        present,
    });

    let needed = total - present.min(total);
    let available = (config.free_space)(cache.root()).at("measure free space of", cache.root())?;
    if needed > available {
        return Err(StoreError::NotEnoughSpace {
            path: cache.root().to_path_buf(),
            needed,
            available,
        });
    }

    let done = AtomicU64::new(present);
    let ctx = TransferCtx {
        client: &client,
        cache,
        repo: &repo,
        commit: &commit,
        reporter,
        done: &done,
        total,
        retries: config.retries,
    };
    // On error the other transfers are dropped mid-flight; their `.incomplete` files stay for
    // the next pull to resume.
    let transfers: Vec<_> = blobs.values().map(|meta| fetch_file(&ctx, meta)).collect();
    let downloaded: Vec<u64> = stream::iter(transfers)
        .buffer_unordered(config.concurrency.max(1))
        .try_collect()
        .await?;

    reporter.report(&PullEvent::Writing {
        repo: repo.to_string(),
        commit: commit.clone(),
    });
    for meta in &metas {
        cache.link_snapshot_file(&repo, &commit, &meta.file, &meta.etag)?;
    }
    cache.write_ref(&repo, "main", &commit)?;
    let downloaded = downloaded.iter().sum();
    reporter.report(&PullEvent::Finished {
        repo: repo.to_string(),
        commit: commit.clone(),
        downloaded,
    });
    debug_assert_eq!(done.load(Ordering::Relaxed), total);
    Ok(Pulled {
        snapshot: cache.snapshot_dir(&repo, &commit),
        repo,
        commit,
        downloaded,
        total,
    })
}

/// Refuses a repo whose config.json names a family the store was told the engine cannot
/// load. The config comes from the cache when an earlier pull left its blob (a pull of a
/// stored model transfers nothing), else into memory only: a refused repo leaves nothing in
/// the cache.
async fn check_family(
    store: &Store,
    client: &HubClient,
    repo: &RepoId,
    commit: &str,
    meta: &FileMeta,
) -> Result<(), StoreError> {
    if !store.families().is_known() {
        return Ok(());
    }
    let bytes = match std::fs::read(store.cache().blob_path(repo, &meta.etag)) {
        Ok(bytes) => bytes,
        Err(_) => client.fetch_config(repo, commit, CONFIG_LIMIT).await?,
    };
    let config = ModelConfig::from_slice(&bytes).map_err(|source| StoreError::BadResponse {
        url: client
            .resolve_url(repo, commit, CONFIG)
            .map(|u| u.to_string())
            .unwrap_or_else(|_| CONFIG.to_string()),
        source,
    })?;
    store
        .families()
        .check_config(&config)
        .map_err(|unsupported| StoreError::UnsupportedFamily {
            repo: repo.to_string(),
            unsupported,
        })
}

/// Bytes of this file already in the cache: a finished blob counts fully (it is verified
/// before use), a partial one by its length.
fn present_bytes(store: &Store, repo: &RepoId, meta: &FileMeta) -> u64 {
    let cache = store.cache();
    let len = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).ok();
    len(cache.blob_path(repo, &meta.etag))
        .or_else(|| len(cache.incomplete_path(repo, &meta.etag)))
        .unwrap_or(0)
        .min(meta.size)
}

/// The files of a repo the engine needs. Only top-level files: subfolders of MLX repos hold
/// other formats or assets.
pub(crate) fn select_files(repo: &RepoId, siblings: &[Sibling]) -> Result<Vec<String>, StoreError> {
    let names: Vec<&str> = siblings
        .iter()
        .map(|s| s.rfilename.as_str())
        .filter(|n| !n.contains('/') || is_pooling_config(n))
        .collect();
    if !names.contains(&"config.json") {
        return Err(StoreError::NoConfig {
            repo: repo.to_string(),
        });
    }
    let weights: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| n.ends_with(".safetensors") && !n.contains('/'))
        .collect();
    // Mistral's own repos carry the same weights twice; `consolidated` is the duplicate.
    let sharded = weights.iter().any(|n| !n.starts_with("consolidated"));
    let weights: Vec<&str> = weights
        .into_iter()
        .filter(|n| !(sharded && n.starts_with("consolidated")))
        .collect();
    if weights.is_empty() {
        return Err(StoreError::NoWeights {
            repo: repo.to_string(),
        });
    }
    let mut out: Vec<String> = names
        .iter()
        .filter(|n| ENGINE_FILES.contains(n) || is_pooling_config(n))
        .chain(weights.iter())
        .map(|n| n.to_string())
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn siblings(names: &[&str]) -> Vec<Sibling> {
        names
            .iter()
            .map(|n| Sibling {
                rfilename: n.to_string(),
            })
            .collect()
    }

    #[test]
    fn keeps_engine_files_and_weights_only() -> Result<(), StoreError> {
        let repo = RepoId::parse("o/m")?;
        let picked = select_files(
            &repo,
            &siblings(&[
                "README.md",
                ".gitattributes",
                "config.json",
                "tokenizer.json",
                "tokenizer_config.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "model.safetensors.index.json",
                "consolidated.safetensors",
                "original/consolidated.00.pth",
                "pytorch_model.bin",
            ]),
        )?;
        assert_eq!(
            picked,
            [
                "config.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "model.safetensors.index.json",
                "tokenizer.json",
                "tokenizer_config.json",
            ]
        );
        Ok(())
    }

    #[test]
    fn keeps_a_sentence_transformers_models_pooling_files() -> Result<(), StoreError> {
        // sentence-transformers/all-MiniLM-L6-v2's layout (less its other formats)
        let repo = RepoId::parse("o/m")?;
        let picked = select_files(
            &repo,
            &siblings(&[
                "1_Pooling/config.json",
                "config.json",
                "config_sentence_transformers.json",
                "model.safetensors",
                "modules.json",
                "onnx/model.onnx",
                "openvino/openvino_model.xml",
                "pytorch_model.bin",
                "sentence_bert_config.json",
                "tokenizer.json",
                "vocab.txt",
                "2_Dense/config.json",
                "onnx/config.json",
            ]),
        )?;
        assert_eq!(
            picked,
            [
                "1_Pooling/config.json",
                "config.json",
                "config_sentence_transformers.json",
                "model.safetensors",
                "modules.json",
                "sentence_bert_config.json",
                "tokenizer.json",
            ]
        );
        Ok(())
    }

    #[test]
    fn refuses_repos_rmx_cannot_run() -> Result<(), StoreError> {
        let repo = RepoId::parse("o/m")?;
        assert!(matches!(
            select_files(&repo, &siblings(&["model.safetensors"])),
            Err(StoreError::NoConfig { .. })
        ));
        assert!(matches!(
            select_files(&repo, &siblings(&["config.json", "pytorch_model.bin"])),
            Err(StoreError::NoWeights { .. })
        ));
        Ok(())
    }
}
